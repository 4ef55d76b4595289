//! `Slice`: starts, ends, optional axes and steps from inputs 1–4, clamped as ONNX specifies.

use super::{Fail, Inputs, Lowered, axis, rank};

pub(crate) fn run(inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let (starts, ends) = (inputs.ints(1)?, inputs.ints(2)?);
    let axes = inputs.opt_ints(3)?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = inputs.opt_ints(4)?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(Fail("starts, ends, axes and steps differ in length".into()));
    }
    let size = x.size();
    let mut out = x.shallow_clone();
    for (((start, end), a), step) in starts.iter().zip(&ends).zip(&axes).zip(&steps) {
        let a = axis(*a, rank(x), false)?;
        let dim = size[a as usize];
        if *step <= 0 {
            return Err(Fail(format!("step {step} is not lowered (only positive steps)")));
        }
        let clamp = |v: i64| if v < 0 { (v + dim).max(0) } else { v.min(dim) };
        let (s, e) = (clamp(*start), clamp(*end));
        out = out.f_slice(a, s, e.max(s), *step)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::test_util::{inputs, values};
    use tch::Tensor;

    #[test]
    fn clamps_like_onnx() {
        let x = Tensor::from_slice(&[0f32, 1., 2., 3., 4.]);
        let s = Tensor::from_slice(&[-2i64]);
        let e = Tensor::from_slice(&[i64::MAX]);
        let out = run(&inputs(&[Some(&x), Some(&s), Some(&e)])).expect("slice");
        assert_eq!(values(&out), vec![3., 4.]);
        let step = Tensor::from_slice(&[2i64]);
        let ax = Tensor::from_slice(&[0i64]);
        let z = Tensor::from_slice(&[0i64]);
        let out = run(&inputs(&[Some(&x), Some(&z), Some(&e), Some(&ax), Some(&step)])).expect("slice");
        assert_eq!(values(&out), vec![0., 2., 4.]);
    }
}
