//! `Shape`: the input's dims as int64 (`start`/`end` clamped as ONNX specifies).

use headroom_onnx::ops::ShapeConfig;
use tch::Tensor;

use super::{Inputs, Lowered};

pub(crate) fn run(config: &ShapeConfig, inputs: &Inputs<'_>) -> Lowered {
    let size = inputs.get(0)?.size();
    let rank = size.len() as i64;
    let clamp = |v: i64| if v < 0 { (v + rank).max(0) } else { v.min(rank) } as usize;
    let (start, end) = (clamp(config.start), clamp(config.end.unwrap_or(rank)));
    let dims = size.get(start..end.max(start)).unwrap_or_default();
    Ok(Tensor::f_from_slice(dims)?.f_to_device(inputs.device())?)
}
