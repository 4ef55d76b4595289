//! `Range(start, limit, delta)`, in the type of `start`.

use tch::Tensor;

use super::{Inputs, Lowered, floats, ints};

pub(crate) fn run(inputs: &Inputs<'_>) -> Lowered {
    let start = inputs.get(0)?;
    let kind = start.kind();
    if start.is_floating_point() {
        let v = |i| -> Lowered<f64> { Ok(floats(inputs.get(i)?)?.first().copied().unwrap_or(0.0)) };
        Ok(Tensor::f_arange_start_step(v(0)?, v(1)?, v(2)?, (kind, inputs.device()))?)
    } else {
        let v = |i| -> Lowered<i64> { Ok(ints(inputs.get(i)?)?.first().copied().unwrap_or(0)) };
        Ok(Tensor::f_arange_start_step(v(0)?, v(1)?, v(2)?, (kind, inputs.device()))?)
    }
}
