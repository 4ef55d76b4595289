//! `Unsqueeze` and `Squeeze`: axes from the attribute (before opset 13) or input 1.

use headroom_onnx::ops::{SqueezeConfig, UnsqueezeConfig};

use super::{Inputs, Lowered, axis, rank};

pub(crate) fn unsqueeze(config: &UnsqueezeConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let axes = match &config.axes {
        Some(a) => a.clone(),
        None => inputs.ints(1)?,
    };
    let out_rank = rank(x) + axes.len();
    let mut axes: Vec<i64> = axes.iter().map(|a| axis(*a, out_rank, false)).collect::<Lowered<_>>()?;
    axes.sort_unstable();
    let mut out = x.shallow_clone();
    for a in axes {
        out = out.f_unsqueeze(a)?;
    }
    Ok(out)
}

pub(crate) fn squeeze(config: &SqueezeConfig, inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let axes = match &config.axes {
        Some(a) => Some(a.clone()),
        None => inputs.opt_ints(1)?,
    };
    match axes {
        None => Ok(x.f_squeeze()?),
        Some(axes) => {
            let axes: Vec<i64> = axes.iter().map(|a| axis(*a, rank(x), false)).collect::<Lowered<_>>()?;
            Ok(x.f_squeeze_dims(axes.as_slice())?)
        }
    }
}
