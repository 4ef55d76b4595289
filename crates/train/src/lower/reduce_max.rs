//! `ReduceMax`: axes from the attribute (before opset 18) or input 1; none reduces all (or nothing
//! with `noop_with_empty_axes`).

use headroom_onnx::ops::ReduceMaxConfig;

use super::{Inputs, Lowered, axis, rank};

pub(crate) fn run(config: &ReduceMaxConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let axes = match &config.axes {
        Some(a) => a.clone(),
        None => inputs.opt_ints(1)?.unwrap_or_default(),
    };
    if axes.is_empty() && config.noop_with_empty_axes {
        return Ok(x.shallow_clone());
    }
    let axes: Vec<i64> = if axes.is_empty() {
        (0..rank(x) as i64).collect()
    } else {
        axes.iter().map(|a| axis(*a, rank(x), false)).collect::<Lowered<_>>()?
    };
    Ok(x.f_amax(axes.as_slice(), config.keepdims)?)
}
