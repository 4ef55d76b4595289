//! FP16 export: a detector's weights and compute in float16, the numerically sensitive part in float32.
//!
//! Follows what onnxconverter-common's `convert_float_to_float16` does — float initializers and
//! constants converted, `Cast` nodes where float16 and float32 meet, graph inputs and outputs
//! optionally kept float32 (`keep_io_types`) — with these differences:
//!
//! - values are rounded to nearest even; finite values beyond ±65504 are clamped to ±65504 and
//!   counted ([`Fp16Report::clamped`]); values too small for float16's subnormals become ±0 and are
//!   counted ([`Fp16Report::underflowed`]) rather than raised to 1e-7 as onnxconverter-common does;
//! - element types come from the ops themselves (no ONNX shape inference needed), and an
//!   initializer read both in float16 and float32 stays float32 with a `Cast` for its float16
//!   readers (onnxconverter-common converts it and leaves a float32 reader with a float16 input);
//! - what stays float32, node by node, with the reason ([`KeptReason`], rules in order):
//!   1. `Range` and `NonMaxSuppression`: ONNX defines them for float32, not float16
//!      ([`FLOAT32_ONLY_OPS`]); likewise Resize's `scales` input always stays float32;
//!   2. nodes in [`Fp16Options::node_block_list`], ops in [`Fp16Options::op_block_list`] (default
//!      `TopK`, from onnxconverter-common's list; `Resize` is not blocked: the neck's nearest
//!      upsample copies values, exact in any precision);
//!   3. the Detect head's decode ([`Fp16Options::keep_decode_fp32`]): every node that computes from
//!      the head's raw box and class convolutions found by [`crate::inspect::inspect`] — the
//!      reshapes and concats of the levels, DFL's softmax and its fixed conv (a weighted sum of 16
//!      bins: the box side in pixels of the grid), the box decode against the anchors
//!      (`anchor ± distance`, centre and size), the multiply by the strides (pixel coordinates up to
//!      the input size, where float16's step is 0.25–0.5 px at 640), the class sigmoid and the
//!      final concat of boxes with scores, and any end-to-end tail (TopK, GatherElements). The head
//!      convolutions themselves compute in float16; their outputs are cast to float32;
//!   4. everything else computed from the image is float16;
//!   5. constants (anchors and strides of dynamic exports, `Constant` nodes, aliases of
//!      initializers) are float16 only when every reader is float16: anchors and strides read by the
//!      decode stay exact.

pub(crate) mod plan;
mod rewrite;
pub(crate) mod types;

use prost::Message as _;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::Model;
use crate::ops::Op;
pub use plan::FLOAT32_ONLY_OPS;
use types::{FLOAT, FLOAT16, Role, declared_type, element_types, import_ops, input_role, input_type};

/// Ops kept float32 by default (from onnxconverter-common's `DEFAULT_OP_BLOCK_LIST`, the ones
/// headroom imports that ONNX does allow in float16).
pub const DEFAULT_OP_BLOCK_LIST: &[&str] = &["TopK"];

/// The largest finite float16 value.
pub const F16_MAX: f32 = 65504.0;

/// What to convert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fp16Options {
    /// Keep float graph inputs and outputs float32, with `Cast` nodes at the boundary (default true).
    pub keep_io_types: bool,
    /// Keep the Detect head's decode float32 (default true; needs a detector `inspect` accepts).
    pub keep_decode_fp32: bool,
    /// Op types kept float32 (default [`DEFAULT_OP_BLOCK_LIST`]).
    pub op_block_list: Vec<String>,
    /// Node names kept float32.
    pub node_block_list: Vec<String>,
}

impl Default for Fp16Options {
    fn default() -> Fp16Options {
        Fp16Options {
            keep_io_types: true,
            keep_decode_fp32: true,
            op_block_list: DEFAULT_OP_BLOCK_LIST.iter().map(ToString::to_string).collect(),
            node_block_list: Vec::new(),
        }
    }
}

/// Why a node stays float32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeptReason {
    /// ONNX defines the op for float32 and not float16 ([`FLOAT32_ONLY_OPS`]).
    Float32Only,
    /// Named in [`Fp16Options::node_block_list`].
    NodeBlockList,
    /// Its op type is in [`Fp16Options::op_block_list`].
    OpBlockList,
    /// Part of the Detect head's decode.
    Decode,
    /// Computes a constant (not from the image) read in float32.
    FeedsFloat32,
}

impl KeptReason {
    /// One line for people.
    pub fn describe(self) -> &'static str {
        match self {
            KeptReason::Float32Only => "ONNX defines this op for float32 only",
            KeptReason::NodeBlockList => "in the node block list",
            KeptReason::OpBlockList => "op type in the op block list",
            KeptReason::Decode => "Detect head decode (after the raw head convolutions)",
            KeptReason::FeedsFloat32 => "computes a constant read in float32",
        }
    }
}

/// A node kept float32.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeptNode {
    /// The node's name.
    pub node: String,
    /// Its op type.
    pub op_type: String,
    /// Why.
    pub reason: KeptReason,
}

/// What [`to_fp16`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Fp16Report {
    /// Nodes computing in float16.
    pub converted_nodes: usize,
    /// Nodes computing float values that stay float32, with the reason, in graph order.
    pub kept_nodes: Vec<KeptNode>,
    /// `Cast` nodes added (between float16 and float32 parts, and at the graph boundary).
    pub casts_inserted: usize,
    /// Float initializers stored as float16.
    pub initializers_converted: usize,
    /// Float initializers kept float32 (read by float32 nodes, or Resize `scales`).
    pub initializers_kept: Vec<String>,
    /// Values converted (initializers and constants).
    pub values_converted: usize,
    /// Finite values beyond ±65504, clamped to ±65504.
    pub clamped: usize,
    /// Non-zero values that became ±0 (below half of float16's smallest subnormal, 2^-24).
    pub underflowed: usize,
}

/// Counts what rounding did.
#[derive(Debug, Default)]
struct Conversion {
    converted: usize,
    clamped: usize,
    underflowed: usize,
}

impl Conversion {
    fn convert(&mut self, value: f32) -> u16 {
        self.converted += 1;
        let clamped = if value.is_finite() && value.abs() > F16_MAX {
            self.clamped += 1;
            F16_MAX.copysign(value)
        } else {
            value
        };
        let bits = f32_to_f16_bits(clamped);
        if bits & 0x7fff == 0 && value != 0.0 {
            self.underflowed += 1;
        }
        bits
    }
}

/// `value` as IEEE float16 bits, rounded to nearest even (overflow gives ±infinity, NaN stays NaN).
pub fn f32_to_f16_bits(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exponent = ((bits >> 23) & 0xff) as i32;
    let mantissa = bits & 0x007f_ffff;
    if exponent == 0xff {
        let nan = if mantissa != 0 { 0x0200 | (mantissa >> 13) as u16 } else { 0 };
        return sign | 0x7c00 | nan;
    }
    let half_exponent = exponent - 127 + 15;
    if half_exponent >= 0x1f {
        return sign | 0x7c00;
    }
    let (significand, shift) = if half_exponent <= 0 {
        if half_exponent < -10 {
            return sign; // below half of the smallest subnormal (f32 subnormals included)
        }
        (mantissa | 0x0080_0000, (14 - half_exponent) as u32)
    } else {
        (((half_exponent as u32) << 23) | mantissa, 13)
    };
    let (rounded, rest, halfway) = (significand >> shift, significand & ((1 << shift) - 1), 1 << (shift - 1));
    // A carry out of the mantissa moves to the next exponent (or to infinity), as it should.
    let rounded = if rest > halfway || (rest == halfway && rounded & 1 == 1) { rounded + 1 } else { rounded };
    sign | rounded as u16
}

/// IEEE float16 bits as f32 (exact).
pub fn f16_bits_to_f32(bits: u16) -> f32 {
    let sign = u32::from(bits & 0x8000) << 16;
    let exponent = u32::from((bits >> 10) & 0x1f);
    let mantissa = u32::from(bits & 0x03ff);
    let magnitude = match exponent {
        0 => {
            let subnormal = mantissa as f32 * 2f32.powi(-24);
            return if sign == 0 { subnormal } else { -subnormal };
        }
        0x1f => 0x7f80_0000 | (mantissa << 13),
        _ => ((exponent + 127 - 15) << 23) | (mantissa << 13),
    };
    f32::from_bits(sign | magnitude)
}

fn export_error(model: &Model, reason: impl Into<String>) -> Error {
    Error::Export { path: model.path.clone(), reason: reason.into() }
}

/// The bytes of `model` converted to float16 as `options` say, and what was done. The model must
/// be float32 (an error names the first float16 tensor found otherwise); with
/// [`Fp16Options::keep_decode_fp32`] it must be a detector [`crate::inspect::inspect`] accepts.
pub fn to_fp16(model: &Model, options: &Fp16Options) -> Result<(Vec<u8>, Fp16Report)> {
    let mut proto = model.proto.clone();
    let graph = proto.graph.as_mut().ok_or_else(|| export_error(model, "no graph"))?;
    let ops = import_ops(graph, model.opset)?;
    let types = element_types(graph, &ops);
    if let Some((name, _)) = types.iter().find(|(_, t)| **t == FLOAT16) {
        return Err(export_error(model, format!("already holds float16 tensors (`{name}`)")));
    }
    let head_outputs: Vec<String> = if options.keep_decode_fp32 {
        let inspection = crate::inspect::inspect(model)?;
        inspection.head.levels.iter().flat_map(|l| [l.box_output.clone(), l.class_output.clone()]).collect()
    } else {
        Vec::new()
    };
    let plan = plan::plan(graph, &ops, &types, options, &head_outputs);
    let report = rewrite::apply(graph, &ops, &types, &plan).map_err(|reason| export_error(model, reason))?;
    Ok((proto.encode_to_vec(), report))
}

/// Type errors ONNX Runtime would refuse, found from the ops: a node computing with both float16
/// and float32 inputs, a float32-only input (Resize `scales`) that is not float32, a `Cast` between
/// float types that does not change the type, declared types (`value_info`, outputs) that disagree
/// with what the producing node makes. Empty for a consistent model.
pub fn type_errors(model: &Model) -> Result<Vec<String>> {
    let Some(graph) = model.proto.graph.as_ref() else { return Ok(vec!["no graph".into()]) };
    let ops = import_ops(graph, model.opset)?;
    let types = element_types(graph, &ops);
    let is_float = |t: Option<i32>| matches!(t, Some(FLOAT | FLOAT16));
    let mut errors = Vec::new();
    for (node, op) in graph.node.iter().zip(&ops) {
        let at = || format!("node `{}` ({})", node.name(), node.op_type());
        let inputs: Vec<(Role, Option<i32>)> =
            (0..node.input.len()).map(|i| (input_role(op, i), input_type(&types, node, i))).collect();
        let compute: Vec<i32> = inputs
            .iter()
            .filter(|(r, t)| *r == Role::Compute && is_float(*t))
            .filter_map(|(_, t)| *t)
            .collect();
        if compute.windows(2).any(|w| w[0] != w[1]) {
            errors.push(format!("{}: float16 and float32 inputs", at()));
        }
        if inputs.iter().any(|(r, t)| *r == Role::Float32 && t.is_some_and(|t| t != FLOAT)) {
            errors.push(format!("{}: a float32-only input is not float32", at()));
        }
        let output = node.output.first().and_then(|o| types.get(o).copied());
        let source = inputs.first().and_then(|(_, t)| *t);
        if matches!(op, Op::Cast(_)) && is_float(source) && source == output {
            errors.push(format!("{}: casts a float tensor to its own type", at()));
        }
    }
    for info in graph.value_info.iter().chain(&graph.output) {
        if let (Some(declared), Some(made)) = (declared_type(info), types.get(info.name()).copied())
            && declared != made
        {
            errors.push(format!(
                "`{}` is declared as type {declared} but its producer makes {made}",
                info.name()
            ));
        }
    }
    Ok(errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_to_nearest_even_and_round_trips_every_half() {
        for bits in 0..=u16::MAX {
            let value = f16_bits_to_f32(bits);
            if value.is_nan() {
                assert!(f16_bits_to_f32(f32_to_f16_bits(value)).is_nan());
                continue;
            }
            assert_eq!(f32_to_f16_bits(value), bits, "{bits:#06x} = {value}");
        }
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to the even mantissa (1.0).
        assert_eq!(f32_to_f16_bits(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16_bits(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16_bits(65520.0), 0x7c00, "65520 rounds up to infinity");
        assert_eq!(f32_to_f16_bits(2f32.powi(-25)), 0, "half the smallest subnormal ties to zero");
        assert_eq!(f32_to_f16_bits(1.5 * 2f32.powi(-25)), 1);
        assert_eq!(f32_to_f16_bits(-2f32.powi(-14)), 0x8400);
    }

    #[test]
    fn conversion_clamps_beyond_the_range_and_counts_underflow() {
        let mut c = Conversion::default();
        assert_eq!(f16_bits_to_f32(c.convert(1e6)), F16_MAX);
        assert_eq!(f16_bits_to_f32(c.convert(-70000.0)), -F16_MAX);
        assert_eq!(c.convert(f32::INFINITY), 0x7c00);
        assert_eq!(c.convert(1e-9), 0);
        assert_eq!(c.convert(0.0), 0);
        assert_eq!((c.converted, c.clamped, c.underflowed), (5, 2, 1));
    }
}
