//! `Resize` of NCHW tensors: `nearest` (the neck's 2x upsample) and `linear`. Output size from
//! `sizes` (input 3) or `scales` (input 2).
//!
//! libtorch's nearest mode picks `floor(dst · in/out)`: ONNX's `asymmetric` + `floor`, and also
//! `half_pixel`/`pytorch_half_pixel` + `round_prefer_floor` at integer upscale factors, where both
//! pick the same pixels. Other combinations are refused rather than computed differently.

use headroom_onnx::ops::ResizeConfig;

use super::{Fail, Inputs, Lowered, floats};

pub(crate) fn run(config: &ResizeConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let size = x.size();
    if size.len() != 4 {
        return Err(Fail(format!("only 4-D (NCHW) resize is lowered, input {size:?}")));
    }
    let scales = inputs.opt(2).filter(|t| t.numel() > 0).map(floats).transpose()?;
    let sizes = inputs.opt_ints(3)?.filter(|s| !s.is_empty());
    let (out, scale) = match (sizes, scales) {
        (Some(s), _) if s.len() == 4 => ([s[2], s[3]], None),
        (_, Some(f)) if f.len() == 4 => {
            if f[0] != 1.0 || f[1] != 1.0 {
                return Err(Fail(format!("scales {f:?} resize the batch or channel axis")));
            }
            let out = [(size[2] as f64 * f[2]).floor() as i64, (size[3] as f64 * f[3]).floor() as i64];
            (out, Some([f[2], f[3]]))
        }
        _ => return Err(Fail("neither 4 `sizes` nor 4 `scales` given".into())),
    };
    let ctm = config.coordinate_transformation_mode.as_str();
    match config.mode.as_str() {
        "nearest" => {
            let integer_up = out[0] % size[2] == 0 && out[1] % size[3] == 0;
            let ok = match (ctm, config.nearest_mode.as_str()) {
                ("asymmetric", "floor") => true,
                ("half_pixel" | "pytorch_half_pixel", "round_prefer_floor") => integer_up,
                _ => false,
            };
            if !ok {
                return Err(Fail(format!(
                    "nearest resize with coordinate_transformation_mode `{ctm}` and nearest_mode `{}` \
                     ({}x{} -> {}x{}) is not lowered",
                    config.nearest_mode, size[2], size[3], out[0], out[1]
                )));
            }
            let (sh, sw) = (scale.map(|s| s[0]), scale.map(|s| s[1]));
            Ok(x.f_upsample_nearest2d(out, sh, sw)?)
        }
        "linear" => {
            let align_corners = match ctm {
                "align_corners" => true,
                "half_pixel" => false,
                // pytorch_half_pixel maps an output of length 1 to input 0, half_pixel to the centre.
                "pytorch_half_pixel" if out[0] > 1 && out[1] > 1 => false,
                other => {
                    return Err(Fail(format!(
                        "linear resize with `{other}` ({}x{} -> {}x{}) is not lowered",
                        size[2], size[3], out[0], out[1]
                    )));
                }
            };
            // With scales, ONNX's align_corners divides by `in · scale - 1`, libtorch by `out - 1`:
            // the same only when `in · scale` is a whole number.
            if let (true, Some(s)) = (align_corners, scale) {
                let exact = |axis: usize| (size[axis + 2] as f64 * s[axis]).fract() == 0.0;
                if !(exact(0) && exact(1)) {
                    return Err(Fail(format!(
                        "linear align_corners resize by scales {s:?} of {}x{} (not a whole output \
                         size) is not lowered; give `sizes` instead",
                        size[2], size[3]
                    )));
                }
            }
            let (sh, sw) = (scale.map(|s| s[0]), scale.map(|s| s[1]));
            Ok(x.f_upsample_bilinear2d(out, align_corners, sh, sw)?)
        }
        other => Err(Fail(format!("resize mode `{other}` is not lowered"))),
    }
}

#[cfg(test)]
mod tests {
    use headroom_onnx::ops::ResizeConfig;
    use tch::Tensor;

    use crate::lower::test_util;

    fn linear(ctm: &str) -> ResizeConfig {
        ResizeConfig {
            mode: "linear".into(),
            coordinate_transformation_mode: ctm.into(),
            nearest_mode: "round_prefer_floor".into(),
            cubic_coeff_a: -0.75,
        }
    }

    #[test]
    fn align_corners_by_a_scale_that_rounds_the_size_is_refused_not_computed_differently() {
        // onnx test_resize_downsample_scales_linear_align_corners: 2x4 by 0.6 -> 1x2, where ONNX
        // divides by 4 · 0.6 - 1 = 1.4 and libtorch by 2 - 1.
        let x = Tensor::arange(8, (tch::Kind::Float, tch::Device::Cpu)).reshape([1, 1, 2, 4]);
        let scales = Tensor::from_slice(&[1.0f32, 1.0, 0.6, 0.6]);
        let inputs = test_util::inputs(&[Some(&x), None, Some(&scales)]);
        let err = super::run(&linear("align_corners"), &inputs).expect_err("refused");
        assert!(err.0.contains("align_corners") && err.0.contains("sizes"), "{}", err.0);
        let scales = Tensor::from_slice(&[1.0f32, 1.0, 0.5, 0.5]);
        let inputs = test_util::inputs(&[Some(&x), None, Some(&scales)]);
        assert!(super::run(&linear("align_corners"), &inputs).is_ok());
    }

    #[test]
    fn pytorch_half_pixel_to_a_length_of_one_is_refused_not_centred() {
        // onnx test_resize_downsample_sizes_linear_pytorch_half_pixel: 4x4 -> 3x1.
        let x = Tensor::arange(16, (tch::Kind::Float, tch::Device::Cpu)).reshape([1, 1, 4, 4]);
        let sizes = Tensor::from_slice(&[1i64, 1, 3, 1]);
        let inputs = test_util::inputs(&[Some(&x), None, None, Some(&sizes)]);
        let err = super::run(&linear("pytorch_half_pixel"), &inputs).expect_err("refused");
        assert!(err.0.contains("pytorch_half_pixel"), "{}", err.0);
    }
}
