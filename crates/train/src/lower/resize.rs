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
                "half_pixel" | "pytorch_half_pixel" => false,
                other => return Err(Fail(format!("linear resize with `{other}` is not lowered"))),
            };
            let (sh, sw) = (scale.map(|s| s[0]), scale.map(|s| s[1]));
            Ok(x.f_upsample_bilinear2d(out, align_corners, sh, sw)?)
        }
        other => Err(Fail(format!("resize mode `{other}` is not lowered"))),
    }
}
