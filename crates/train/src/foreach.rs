//! The optimiser's arithmetic over all trained tensors in one libtorch call each: PyTorch's fused
//! AdamW and SGD (`torch.optim.AdamW(fused=True)`, `SGD(fused=True)`) and its foreach kernels (`torch._foreach_*`), reached
//! through vendor/torch-sys/libtch/headroom_api.cpp because tch does not bind list-of-tensor ops.
//! One call instead of a dozen tch calls, scalar wrappers and temporaries per tensor: on the demo
//! student (126 trained tensors) the step's optimiser, clipping, average and gradient zeroing went
//! from 33 to a few ms (docs/BENCHMARKS.md "Where a step's time goes").

use std::ffi::{c_char, c_long, c_void};

use tch::Tensor;

use crate::{Error, Result};

#[allow(unsafe_code)]
mod native {
    use std::ffi::{c_char, c_long, c_void};

    unsafe extern "C" {
        /// vendor/torch-sys/libtch/headroom_api.cpp; every list holds `n` tch tensor handles.
        pub(super) fn headroom_fused_adamw(
            params: *const *mut c_void,
            grads: *const *mut c_void,
            exp_avgs: *const *mut c_void,
            exp_avg_sqs: *const *mut c_void,
            n: c_long,
            step: *mut c_void,
            lr: f64,
            beta1: f64,
            beta2: f64,
            weight_decay: f64,
            eps: f64,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
        pub(super) fn headroom_fused_sgd(
            params: *const *mut c_void,
            grads: *const *mut c_void,
            momentum_buffers: *const *mut c_void,
            n: c_long,
            lr: f64,
            momentum: f64,
            weight_decay: f64,
            nesterov: bool,
            first: bool,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
        pub(super) fn headroom_foreach_ema(
            average: *const *mut c_void,
            value: *const *mut c_void,
            n: c_long,
            decay: f64,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
        pub(super) fn headroom_foreach_norm(
            list: *const *mut c_void,
            n: c_long,
            norm: *mut f64,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
        pub(super) fn headroom_foreach_mul(
            list: *const *mut c_void,
            n: c_long,
            factor: f64,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
        pub(super) fn headroom_backward(
            outputs: *const *mut c_void,
            grads: *const *mut c_void,
            n: c_long,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
        pub(super) fn headroom_foreach_zero(
            list: *const *mut c_void,
            n: c_long,
            err: *mut c_char,
            len: c_long,
        ) -> c_long;
    }
}

/// tch's handles of `tensors`, valid while they are borrowed.
fn handles(tensors: &[&Tensor]) -> Vec<*mut c_void> {
    tensors.iter().map(|t| t.as_ptr().cast_mut().cast::<c_void>()).collect()
}

/// Runs `call` with an error buffer; libtorch's message becomes [`Error::Foreach`].
fn checked(what: &'static str, call: impl FnOnce(*mut c_char, c_long) -> c_long) -> Result<()> {
    let mut err = vec![0u8; 1024];
    let len = c_long::try_from(err.len()).unwrap_or(c_long::MAX);
    if call(err.as_mut_ptr().cast(), len) == 0 {
        return Ok(());
    }
    let end = err.iter().position(|&b| b == 0).unwrap_or(err.len());
    Err(Error::Foreach { what, reason: String::from_utf8_lossy(&err[..end]).into_owned() })
}

/// The lists' common length, or an error when they differ.
fn length(what: &'static str, lists: &[usize]) -> Result<c_long> {
    let n = lists.first().copied().unwrap_or(0);
    if lists.iter().any(|&m| m != n) {
        return Err(Error::Foreach { what, reason: format!("lists of different lengths {lists:?}") });
    }
    c_long::try_from(n).map_err(|_| Error::Foreach { what, reason: format!("{n} tensors") })
}

/// AdamW's update of `params` with their `grads`, first moments `exp_avgs` and second moments
/// `exp_avg_sqs` (updated in place, zeros at the first step), at optimiser step `step` (1-based):
/// libtorch's `_fused_adamw_`, decoupled weight decay, no AMSGrad. Every tensor of one call has
/// the same dtype and device.
#[allow(clippy::too_many_arguments)]
pub fn fused_adamw(
    params: &[&Tensor],
    grads: &[&Tensor],
    exp_avgs: &[&Tensor],
    exp_avg_sqs: &[&Tensor],
    step: u64,
    lr: f64,
    betas: (f64, f64),
    weight_decay: f64,
    eps: f64,
) -> Result<()> {
    let n = length("fused AdamW", &[params.len(), grads.len(), exp_avgs.len(), exp_avg_sqs.len()])?;
    if n == 0 {
        return Ok(());
    }
    let device = params[0].device();
    let mut step = Tensor::from(step as f32).f_to_device(device)?;
    let (p, g, m, v) = (handles(params), handles(grads), handles(exp_avgs), handles(exp_avg_sqs));
    let step_handle = step.as_mut_ptr().cast::<c_void>();
    checked("fused AdamW", |err, len| {
        // SAFETY: four lists of `n` live tensor handles (borrowed for the call), a live step tensor
        // and an error buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_fused_adamw(
                p.as_ptr(),
                g.as_ptr(),
                m.as_ptr(),
                v.as_ptr(),
                n,
                step_handle,
                lr,
                betas.0,
                betas.1,
                weight_decay,
                eps,
                err,
                len,
            )
        }
    })
}

/// SGD's update of `params` with their `grads` and `momentum_buffers` (written from the gradients
/// when `first`, updated in place after): libtorch's `_fused_sgd_`, L2 `weight_decay`, momentum
/// without dampening, Nesterov or not. Every tensor of one call has the same dtype and device.
#[allow(clippy::too_many_arguments)]
pub fn fused_sgd(
    params: &[&Tensor],
    grads: &[&Tensor],
    momentum_buffers: &[&Tensor],
    lr: f64,
    momentum: f64,
    weight_decay: f64,
    nesterov: bool,
    first: bool,
) -> Result<()> {
    let n = length("fused SGD", &[params.len(), grads.len(), momentum_buffers.len()])?;
    if n == 0 {
        return Ok(());
    }
    let (p, g, b) = (handles(params), handles(grads), handles(momentum_buffers));
    checked("fused SGD", |err, len| {
        // SAFETY: three lists of `n` live tensor handles (borrowed for the call) and an error
        // buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_fused_sgd(
                p.as_ptr(),
                g.as_ptr(),
                b.as_ptr(),
                n,
                lr,
                momentum,
                weight_decay,
                nesterov,
                first,
                err,
                len,
            )
        }
    })
}

/// `average = average · decay + value · (1 − decay)`, tensor by tensor, in place.
pub fn ema(average: &[&Tensor], value: &[&Tensor], decay: f64) -> Result<()> {
    let n = length("moving average", &[average.len(), value.len()])?;
    let (a, v) = (handles(average), handles(value));
    checked("moving average", |err, len| {
        // SAFETY: two lists of `n` live tensor handles and an error buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_foreach_ema(a.as_ptr(), v.as_ptr(), n, decay, err, len)
        }
    })
}

/// The joint L2 norm of `list` (0 for an empty list).
pub fn norm(list: &[&Tensor]) -> Result<f64> {
    let n = length("gradient norm", &[list.len()])?;
    let l = handles(list);
    let mut norm = 0.0f64;
    let out: *mut f64 = &mut norm;
    checked("gradient norm", |err, len| {
        // SAFETY: `n` live tensor handles, a live f64 to write and an error buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_foreach_norm(l.as_ptr(), n, out, err, len)
        }
    })?;
    Ok(norm)
}

/// Multiplies every tensor of `list` by `factor`, in place.
pub fn mul_(list: &[&Tensor], factor: f64) -> Result<()> {
    let n = length("scaling", &[list.len()])?;
    let l = handles(list);
    checked("scaling", |err, len| {
        // SAFETY: `n` live tensor handles and an error buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_foreach_mul(l.as_ptr(), n, factor, err, len)
        }
    })
}

/// Zeroes every tensor of `list`, in place.
pub fn zero_(list: &[&Tensor]) -> Result<()> {
    let n = length("zeroing", &[list.len()])?;
    let l = handles(list);
    checked("zeroing", |err, len| {
        // SAFETY: `n` live tensor handles and an error buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_foreach_zero(l.as_ptr(), n, err, len)
        }
    })
}

/// Backward from `outputs`, each seeded with the gradient of the same index
/// (`torch.autograd.backward(outputs, grads)`): gradients accumulate into the leaves' `.grad()`.
/// Every output requires grad; each gradient has its output's shape and dtype.
pub fn backward(outputs: &[&Tensor], grads: &[&Tensor]) -> Result<()> {
    let n = length("backward", &[outputs.len(), grads.len()])?;
    let (o, g) = (handles(outputs), handles(grads));
    checked("backward", |err, len| {
        // SAFETY: `n` live tensor handles in each list and an error buffer of `len` bytes.
        #[allow(unsafe_code)]
        unsafe {
            native::headroom_backward(o.as_ptr(), g.as_ptr(), n, err, len)
        }
    })
}
