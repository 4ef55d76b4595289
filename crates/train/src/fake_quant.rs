//! Fake quantization for quantization-aware training: a Conv computes in float from int8-rounded
//! inputs, the rounding `headroom_onnx::quant::to_int8` writes into the Q/DQ file, so training sees
//! the error the INT8 model will have. Both ops are libtorch's, whose backward is the
//! straight-through estimate: the gradient passes unchanged where the value is within the int8
//! range and is 0 where it was clamped.
//!
//! - An activation: symmetric int8 per tensor, zero point 0, −128..127, at the calibrated scale
//!   (`amax / 127`, [`headroom_onnx::quant::scale_for`]).
//! - A weight: per output channel, `max|w| / 127` of the current weight (a channel of zeros gets 1),
//!   −127..127, as `headroom_onnx::quant::quantize_weight` rounds it. The scale follows the weight
//!   as it trains and carries no gradient.

use tch::{Kind, Tensor};

/// `x` rounded to int8 at `scale` and back (−128..127, zero point 0).
pub fn activation(x: &Tensor, scale: f64) -> Result<Tensor, tch::TchError> {
    x.f_fake_quantize_per_tensor_affine(scale, 0, -128, 127)
}

/// A Conv weight `[out, in/group, kh, kw]` rounded per output channel to int8 and back.
pub fn weight(w: &Tensor) -> Result<Tensor, tch::TchError> {
    let amax = w.detach().f_abs()?.f_amax([1, 2, 3], false)?.f_to_kind(Kind::Float)?;
    let scale = amax.f_where_scalarother(&amax.f_gt(0.0)?, 127.0)?.f_div_scalar(127.0)?;
    let zero = Tensor::f_zeros([w.size()[0]], (Kind::Int, w.device()))?;
    w.f_fake_quantize_per_channel_affine(&scale, &zero, 0, -127, 127)
}
