//! `Softmax`; before opset 13 over the flattened dims `axis..`.

use headroom_onnx::ops::SoftmaxConfig;

use super::{Inputs, Lowered, axis, rank};

pub(crate) fn run(config: &SoftmaxConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let a = axis(config.axis, rank(x), false)?;
    if !config.flatten_from_axis || a as usize + 1 == rank(x) {
        return Ok(x.f_softmax(a, None)?);
    }
    let size = x.size();
    let outer: i64 = size[..a as usize].iter().product();
    Ok(x.f_reshape([outer, -1])?.f_softmax(1, None)?.f_reshape(size.as_slice())?)
}
