//! `ReduceMax`: axes from the attribute (before opset 18) or input 1; none reduces all (or nothing
//! with `noop_with_empty_axes`).

use headroom_onnx::ops::ReduceMaxConfig;

use super::{Fail, Inputs, Lowered, axis, rank};

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
    let size = x.size();
    if axes.iter().any(|a| size.get(*a as usize) == Some(&0)) {
        // ONNX defines the max of nothing as the type's lowest value; libtorch's amax refuses.
        return Err(Fail(format!(
            "ReduceMax over an empty axis (input {size:?}, axes {axes:?}) is not lowered"
        )));
    }
    Ok(x.f_amax(axes.as_slice(), config.keepdims)?)
}

#[cfg(test)]
mod tests {
    use headroom_onnx::ops::ReduceMaxConfig;
    use tch::{Device, Kind, Tensor};

    use crate::lower::test_util;

    #[test]
    fn reduce_max_over_an_empty_axis_is_a_clear_refusal_not_a_libtorch_error() {
        // onnx test_reduce_max_empty_set: [2, 0, 4] reduced over axis 1.
        let config = ReduceMaxConfig { axes: Some(vec![1]), keepdims: true, noop_with_empty_axes: false };
        let x = Tensor::zeros([2, 0, 4], (Kind::Float, Device::Cpu));
        let err = super::run(&config, &test_util::inputs(&[Some(&x)])).expect_err("refused");
        assert!(err.0.contains("empty axis"), "{}", err.0);
    }
}
