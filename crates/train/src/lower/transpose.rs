//! `Transpose` (no `perm`: reverse the axes).

use headroom_onnx::ops::TransposeConfig;

use super::{Inputs, Lowered};

pub(crate) fn run(config: &TransposeConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let perm = config.perm.clone().unwrap_or_else(|| (0..x.dim() as i64).rev().collect());
    Ok(x.f_permute(perm.as_slice())?)
}
