//! The dynamic loss scale of mixed precision (as `torch.amp.GradScaler`): the loss is multiplied
//! by the scale before backward, the gradients divided by it before the step; ×2 after 2000 clean
//! steps, ×0.5 and the step skipped on inf/NaN gradients. Its state lives in [`Progress`], so a
//! resumed run goes on with the same scale.

use tch::Tensor;

use crate::Result;
use crate::state::Progress;

/// The scale a run starts with.
const INITIAL_SCALE: f64 = 65536.0;
/// Clean steps after which the scale doubles.
const GROWTH_INTERVAL: u64 = 2000;

/// The factor the loss is multiplied by before backward (1 when mixed precision is not active).
pub fn loss_scale(progress: &Progress, active: bool) -> f64 {
    match progress.loss_scale {
        _ if !active => 1.0,
        s if s > 0.0 => s,
        _ => INITIAL_SCALE,
    }
}

/// Divides the gradients of `parameters` by the loss scale; false (and the scale halved) when one
/// is not finite, so that the step is skipped.
pub fn unscale(parameters: &[(&str, &Tensor)], progress: &mut Progress) -> Result<bool> {
    let scale = loss_scale(progress, true);
    let _guard = tch::no_grad_guard();
    let mut finite = true;
    for (_, p) in parameters {
        let mut g = p.grad();
        if g.defined() {
            let _unscaled = g.f_div_scalar_(scale)?;
            finite &= g.f_isfinite()?.f_all()?.int64_value(&[]) == 1;
        }
    }
    if finite {
        progress.scale_steps += 1;
        if progress.scale_steps >= GROWTH_INTERVAL {
            progress.loss_scale = scale * 2.0;
            progress.scale_steps = 0;
        } else {
            progress.loss_scale = scale;
        }
    } else {
        progress.loss_scale = scale * 0.5;
        progress.scale_steps = 0;
    }
    Ok(finite)
}
