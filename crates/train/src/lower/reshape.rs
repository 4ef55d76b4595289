//! `Reshape`: `0` copies the input dim (unless `allowzero`), `-1` is inferred.

use headroom_onnx::ops::ReshapeConfig;

use super::{Fail, Inputs, Lowered};

pub(crate) fn run(config: &ReshapeConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let size = x.size();
    let target: Vec<i64> = inputs
        .ints(1)?
        .iter()
        .enumerate()
        .map(|(i, d)| match (*d, config.allowzero) {
            (0, false) => size.get(i).copied().ok_or_else(|| Fail(format!("dim {i} of 0 has no input dim"))),
            (d, _) => Ok(d),
        })
        .collect::<Lowered<_>>()?;
    Ok(x.f_reshape(target.as_slice())?)
}
