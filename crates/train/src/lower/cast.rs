//! `Cast`.

use headroom_onnx::ops::CastConfig;

use super::{Inputs, Lowered, kind_of};

pub(crate) fn run(config: &CastConfig, inputs: &Inputs<'_>) -> Lowered {
    Ok(inputs.get(0)?.f_to_kind(kind_of(&config.to)?)?)
}
