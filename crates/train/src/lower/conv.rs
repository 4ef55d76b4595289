//! `Conv` (2-D): weights `[out, in/group, kh, kw]`, optional bias. Asymmetric explicit pads and
//! `SAME_*` auto-padding are applied with a zero pad before a padding-free convolution.

use super::{Fail, Inputs, Lowered};
use crate::lower::max_pool::{pads_for, symmetric};
use headroom_onnx::ops::ConvConfig;

pub(crate) fn run(config: &ConvConfig, inputs: &Inputs<'_>) -> Lowered {
    let (x, w) = (inputs.get(0)?, inputs.get(1)?);
    let size = x.size();
    if size.len() != 4 || w.dim() != 4 {
        return Err(Fail(format!("only 2-D convolution is lowered (input {size:?}, weight {:?})", w.size())));
    }
    let kernel = [w.size()[2], w.size()[3]];
    let pads = pads_for(&config.padding, [size[2], size[3]], kernel, &config.strides, &config.dilations)?;
    let bias = inputs.opt(2);
    match symmetric(&pads) {
        Some(padding) => Ok(x.f_conv2d(
            w,
            bias,
            config.strides.as_slice(),
            padding,
            config.dilations.as_slice(),
            config.group,
        )?),
        None => {
            // constant_pad_nd takes (left, right, top, bottom): last axis first.
            let padded = x.f_constant_pad_nd([pads[1], pads[3], pads[0], pads[2]])?;
            Ok(padded.f_conv2d(
                w,
                bias,
                config.strides.as_slice(),
                [0, 0],
                config.dilations.as_slice(),
                config.group,
            )?)
        }
    }
}
