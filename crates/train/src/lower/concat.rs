//! `Concat`.

use headroom_onnx::ops::ConcatConfig;
use tch::Tensor;

use super::{Inputs, Lowered, axis, rank};

pub(crate) fn run(config: &ConcatConfig, inputs: &Inputs<'_>) -> Lowered {
    let tensors: Vec<&Tensor> = (0..inputs.len()).map(|i| inputs.get(i)).collect::<Lowered<_>>()?;
    let first = inputs.get(0)?;
    Ok(Tensor::f_cat(&tensors, axis(config.axis, rank(first), false)?)?)
}
