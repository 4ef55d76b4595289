//! `Constant` and `ConstantOfShape`.

use headroom_onnx::ops::{ConstantConfig, ConstantOfShapeConfig};
use tch::Tensor;

use super::{Inputs, Lowered, floats, to_torch};

pub(crate) fn constant(config: &ConstantConfig, inputs: &Inputs<'_>) -> Lowered {
    to_torch(&config.value, inputs.device())
}

pub(crate) fn constant_of_shape(config: &ConstantOfShapeConfig, inputs: &Inputs<'_>) -> Lowered {
    let shape = inputs.ints(0)?;
    let value = to_torch(&config.value, inputs.device())?;
    let fill = floats(&value)?.first().copied().unwrap_or(0.0);
    Ok(Tensor::f_full(shape.as_slice(), fill, (value.kind(), inputs.device()))?)
}
