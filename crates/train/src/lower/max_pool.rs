//! `MaxPool` (2-D; the SPPF block). Asymmetric pads are applied with `-inf` before pooling.
//! Also home of the padding arithmetic `Conv` shares.

use headroom_onnx::ops::{MaxPoolConfig, Padding};
use tch::Tensor;

use super::{Fail, Inputs, Lowered};

/// Explicit pads `[top, left, bottom, right]` for a 2-D window.
pub(crate) fn pads_for(
    padding: &Padding,
    input: [i64; 2],
    kernel: [i64; 2],
    strides: &[i64],
    dilations: &[i64],
) -> Lowered<[i64; 4]> {
    let same = |upper: bool| -> Lowered<[i64; 4]> {
        let mut pads = [0i64; 4];
        for axis in 0..2 {
            let stride = *strides.get(axis).ok_or("missing stride")?;
            let dilation = *dilations.get(axis).ok_or("missing dilation")?;
            let out = (input[axis] + stride - 1) / stride;
            let effective = (kernel[axis] - 1) * dilation + 1;
            let total = ((out - 1) * stride + effective - input[axis]).max(0);
            let (small, large) = (total / 2, total - total / 2);
            (pads[axis], pads[axis + 2]) = if upper { (small, large) } else { (large, small) };
        }
        Ok(pads)
    };
    match padding {
        Padding::Explicit(p) => match p.as_slice() {
            [a, b, c, d] => Ok([*a, *b, *c, *d]),
            other => Err(Fail(format!("{} pads for a 2-D window", other.len()))),
        },
        Padding::SameUpper => same(true),
        Padding::SameLower => same(false),
        Padding::Valid => Ok([0; 4]),
    }
}

/// `[h, w]` when begins equal ends.
pub(crate) fn symmetric(pads: &[i64; 4]) -> Option<[i64; 2]> {
    (pads[0] == pads[2] && pads[1] == pads[3]).then_some([pads[0], pads[1]])
}

pub(crate) fn run(config: &MaxPoolConfig, inputs: &Inputs<'_>, outputs: usize) -> Lowered {
    if outputs > 1 {
        return Err(Fail("MaxPool's `Indices` output is not lowered".into()));
    }
    let x = inputs.get(0)?;
    let size = x.size();
    let &[kh, kw] = config.kernel_shape.as_slice() else {
        return Err(Fail(format!("only 2-D pooling is lowered (kernel {:?})", config.kernel_shape)));
    };
    if size.len() != 4 {
        return Err(Fail(format!("only 2-D pooling is lowered (input {size:?})")));
    }
    if !x.is_floating_point() {
        return Err(Fail(format!("MaxPool on {:?} tensors is not lowered (floating point only)", x.kind())));
    }
    let pads = pads_for(&config.padding, [size[2], size[3]], [kh, kw], &config.strides, &config.dilations)?;
    let pool = |t: &Tensor, padding: [i64; 2]| {
        t.f_max_pool2d(
            [kh, kw],
            config.strides.as_slice(),
            padding,
            config.dilations.as_slice(),
            config.ceil_mode,
        )
    };
    match symmetric(&pads) {
        Some(padding) if padding[0] * 2 <= kh && padding[1] * 2 <= kw => Ok(pool(x, padding)?),
        _ => {
            let padded = x.f_constant_pad_nd([pads[1], pads[3], pads[0], pads[2]])?;
            // constant_pad_nd pads with zeros; pad with -inf instead (f64::MIN overflows a float
            // tensor, and tch then panics while dropping the scalar).
            let mask = Tensor::f_ones_like(x)?.f_constant_pad_nd([pads[1], pads[3], pads[0], pads[2]])?;
            let lowest = Tensor::f_full_like(&padded, f64::NEG_INFINITY)?;
            let padded = padded.f_where_self(&mask.f_gt(0.5)?, &lowest)?;
            Ok(pool(&padded, [0, 0])?)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::test_util;

    #[test]
    fn same_padding_splits_the_odd_pixel_by_mode() {
        let upper = pads_for(&Padding::SameUpper, [5, 5], [2, 2], &[1, 1], &[1, 1]).expect("pads");
        let lower = pads_for(&Padding::SameLower, [5, 5], [2, 2], &[1, 1], &[1, 1]).expect("pads");
        assert_eq!((upper, lower), ([0, 0, 1, 1], [1, 1, 0, 0]));
        assert_eq!(symmetric(&[2, 2, 2, 2]), Some([2, 2]));
        assert_eq!(symmetric(&[0, 0, 1, 1]), None);
    }

    #[test]
    fn asymmetric_pads_on_a_float_tensor_pool_instead_of_panicking() {
        let config = MaxPoolConfig {
            kernel_shape: vec![2, 2],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            padding: Padding::SameUpper,
            ceil_mode: false,
        };
        let x = Tensor::from_slice(&[-1.0f32, -2.0, -3.0, -4.0]).reshape([1, 1, 2, 2]);
        let y = run(&config, &test_util::inputs(&[Some(&x)]), 1).expect("pools");
        assert_eq!(test_util::values(&y), [-1.0, -2.0, -3.0, -4.0]);
    }
}
