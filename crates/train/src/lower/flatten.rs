//! `Flatten` to 2-D at `axis`.

use headroom_onnx::ops::FlattenConfig;

use super::{Inputs, Lowered, axis, rank};

pub(crate) fn run(config: &FlattenConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let a = axis(config.axis, rank(x), true)? as usize;
    let size = x.size();
    let outer: i64 = size[..a].iter().product();
    let inner: i64 = size[a..].iter().product();
    Ok(x.f_reshape([outer, inner])?)
}
