//! INT8 export: a detector with `QuantizeLinear`/`DequantizeLinear` pairs (Q/DQ, "explicit
//! quantization") that ONNX Runtime runs and TensorRT 10/11 builds into int8 kernels, plus the ranges
//! TensorRT's implicit INT8 reads from a calibration cache ([`crate::calib_cache`]).
//!
//! Placement follows TensorRT's Q/DQ placement recommendations (the "Working with Quantized
//! Types" chapter of the TensorRT developer guide) and what NVIDIA ModelOpt's ONNX PTQ does for CNNs:
//!
//! - every Conv that computes from the image, outside the Detect head's decode, reads its
//!   activation through Q/DQ (symmetric int8, per tensor, zero point 0: TensorRT supports only
//!   symmetric int8) and its weight through a per-channel DQ (axis 0: one scale per output channel,
//!   `max|w| / 127`, the int8 weight stored in the file);
//! - biases and Conv outputs stay float: TensorRT fuses the bias, the SiLU (`Sigmoid`·`Mul`) and the
//!   next Conv's quantize into one int8 kernel, and moves Q/DQ through `MaxPool`, `Resize`
//!   (nearest), `Split` and `Concat` on its own;
//! - the decode — everything computed from the head's raw box and class convolutions: DFL's softmax
//!   and fixed conv, box arithmetic against the anchors, strides, class sigmoid, the final concat of
//!   pixel boxes with scores — stays float. One shared scale for boxes in pixels (0–640) and scores
//!   (0–1) is what makes ONNX Runtime's `quantize_static` over the whole graph score 0 mAP;
//! - Convs named in [`Int8Options::keep_float`] (chosen by the sensitivity search of `headroom
//!   export --sensitivity`) stay float.
//!
//! Ranges come from [`calib::Histogram`]s of each tensor over calibration images, run through ONNX
//! Runtime by the caller (`headroom_infer::calibrate`), with the [`calib::Method`] asked for.

pub mod calib;
pub mod dequantize;

use std::collections::{BTreeMap, HashMap, HashSet};

use prost::Message as _;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::fp16::plan::computes_from;
use crate::fp16::types::{FLOAT, element_types, import_ops};
use crate::model::Model;
use crate::ops::Op;
use crate::proto::{AttributeProto, NodeProto, TensorProto, attribute_proto::AttributeType};
use crate::tensor::{TensorData, float_tensor};
pub use calib::{BINS, Histogram, Method};

/// `TensorProto.DataType.INT8`.
const INT8: i32 = 3;

/// Lowest opset with per-axis `DequantizeLinear`.
pub const MIN_QDQ_OPSET: i64 = 13;

/// A Conv that gets Q/DQ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConvSite {
    /// The node's name.
    pub node: String,
    /// Its activation input (quantized per tensor).
    pub activation: String,
    /// Its weight initializer (quantized per output channel).
    pub weight: String,
    /// Its output.
    pub output: String,
}

/// Where a model gets Q/DQ, and which tensors calibration must see.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sites {
    /// The Convs that can be quantized, in graph order.
    pub convs: Vec<ConvSite>,
    /// Convs computing from the image that cannot be (weight not an initializer), with the reason.
    pub skipped: Vec<(String, String)>,
    /// Float tensors computed from the image outside the decode, graph input first: what the
    /// TensorRT calibration cache lists, and a superset of the Conv activations.
    pub tensors: Vec<String>,
    /// The graph's image input.
    pub input: String,
    /// Nodes of the decode (left float).
    pub decode_nodes: usize,
}

fn export_error(model: &Model, reason: impl Into<String>) -> Error {
    Error::Export { path: model.path.clone(), reason: reason.into() }
}

/// Finds the Convs to quantize and the tensors to calibrate in a float32 detector that
/// [`crate::inspect::inspect`] accepts (its Detect head marks where the decode starts).
pub fn sites(model: &Model) -> Result<Sites> {
    let graph = model.proto.graph.as_ref().ok_or_else(|| export_error(model, "no graph"))?;
    if model.opset < MIN_QDQ_OPSET {
        return Err(export_error(
            model,
            format!(
                "opset {} is below {MIN_QDQ_OPSET}, the first with per-channel DequantizeLinear: re-export with opset >= 13",
                model.opset
            ),
        ));
    }
    let ops = import_ops(graph, model.opset)?;
    let types = element_types(graph, &ops);
    if let Some(init) =
        graph.initializer.iter().find(|t| t.data_type() != FLOAT && is_float_type(t.data_type()))
    {
        return Err(export_error(
            model,
            format!("`{}` is not float32: quantize the float32 model", init.name()),
        ));
    }
    let inspection = crate::inspect::inspect(model)?;
    let head: Vec<String> =
        inspection.head.levels.iter().flat_map(|l| [l.box_output.clone(), l.class_output.clone()]).collect();
    let input =
        model.graph.inputs.first().map(|i| i.name.clone()).ok_or_else(|| export_error(model, "no input"))?;
    let from_image = computes_from(graph, &ops, [input.clone()]);
    let decode = computes_from(graph, &ops, head);
    let initializers: HashSet<&str> = graph.initializer.iter().map(|t| t.name()).collect();
    let (mut convs, mut skipped) = (Vec::new(), Vec::new());
    let mut tensors = vec![input.clone()];
    for (n, (node, op)) in graph.node.iter().zip(&ops).enumerate() {
        if !from_image[n] || decode[n] {
            continue;
        }
        tensors.extend(node.output.iter().filter(|o| types.get(*o) == Some(&FLOAT)).cloned());
        if !matches!(op, Op::Conv(_)) {
            continue;
        }
        let weight = node.input.get(1).cloned().unwrap_or_default();
        let dims = model.graph.initializer_dims.get(&weight);
        if !initializers.contains(weight.as_str()) || dims.is_none_or(|d| d.len() < 3) {
            skipped.push((node.name().to_string(), format!("weight `{weight}` is not a float initializer")));
            continue;
        }
        convs.push(ConvSite {
            node: node.name().to_string(),
            activation: node.input[0].clone(),
            weight,
            output: node.output.first().cloned().unwrap_or_default(),
        });
    }
    if convs.is_empty() {
        return Err(export_error(
            model,
            "no Conv computing from the image outside the decode: nothing to quantize",
        ));
    }
    let decode_nodes = decode.iter().filter(|d| **d).count();
    Ok(Sites { convs, skipped, tensors, input, decode_nodes })
}

fn is_float_type(t: i32) -> bool {
    // FLOAT16, DOUBLE, BFLOAT16
    matches!(t, 10 | 11 | 16)
}

/// What to quantize.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Int8Options {
    /// Conv node names kept float.
    pub keep_float: HashSet<String>,
}

/// What [`to_int8`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Int8Report {
    /// Convs computing in int8.
    pub quantized: usize,
    /// Convs kept float by request.
    pub kept_float: Vec<String>,
    /// Convs that could not be quantized, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Activation tensors with a Q/DQ pair.
    pub activations: usize,
    /// Weights stored in int8.
    pub weights: usize,
}

/// The scale int8 gives a symmetric range ±`amax` (a tensor that was always 0 gets scale 1: any
/// scale represents it exactly, and 0 is not allowed).
pub fn scale_for(amax: f32) -> f32 {
    if amax > 0.0 && amax.is_finite() { amax / 127.0 } else { 1.0 }
}

/// Per-channel symmetric int8 of a weight `[C_out, ...]`: the values (round half to even, clamped
/// to ±127) and one scale per output channel.
pub fn quantize_weight(values: &[f32], channels: usize) -> (Vec<i8>, Vec<f32>) {
    let per = values.len() / channels.max(1);
    let mut q = Vec::with_capacity(values.len());
    let mut scales = Vec::with_capacity(channels);
    for c in 0..channels {
        let chunk = &values[c * per..(c + 1) * per];
        let scale = scale_for(chunk.iter().fold(0f32, |m, v| m.max(v.abs())));
        scales.push(scale);
        q.extend(chunk.iter().map(|v| (v / scale).round_ties_even().clamp(-127.0, 127.0) as i8));
    }
    (q, scales)
}

/// The bytes of `model` with Q/DQ on `sites`' Convs (but those `options` keep float), activation
/// ranges from `amax` (tensor name → range, for every quantized Conv's activation).
pub fn to_int8(
    model: &Model,
    sites: &Sites,
    amax: &HashMap<String, f32>,
    options: &Int8Options,
) -> Result<(Vec<u8>, Int8Report)> {
    let mut proto = model.proto.clone();
    let graph = proto.graph.as_mut().ok_or_else(|| export_error(model, "no graph"))?;
    let mut taken: HashSet<String> = graph.initializer.iter().map(|t| t.name().to_string()).collect();
    for node in &graph.node {
        taken.extend(node.output.iter().cloned());
        taken.insert(node.name().to_string());
    }
    taken.extend(graph.input.iter().chain(&graph.output).map(|v| v.name().to_string()));
    let mut fresh = |base: String| {
        let mut name = base.clone();
        let mut n = 1;
        while taken.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        taken.insert(name.clone());
        name
    };
    let mut report = Int8Report { skipped: sites.skipped.clone(), ..Default::default() };
    // Nodes to insert before the node at each index, and inputs to rewire.
    let mut before: BTreeMap<usize, Vec<NodeProto>> = BTreeMap::new();
    let mut dequantized: HashMap<String, String> = HashMap::new();
    let mut new_initializers: Vec<TensorProto> = Vec::new();
    let position: HashMap<&str, usize> = graph.node.iter().enumerate().map(|(i, n)| (n.name(), i)).collect();
    let mut rewire: Vec<(usize, usize, String)> = Vec::new();
    for site in &sites.convs {
        if options.keep_float.contains(&site.node) {
            report.kept_float.push(site.node.clone());
            continue;
        }
        let at = *position
            .get(site.node.as_str())
            .ok_or_else(|| export_error(model, format!("no node `{}`", site.node)))?;
        // The activation: one Q/DQ pair per tensor, shared by its quantized readers.
        let activation_dq = match dequantized.get(&site.activation) {
            Some(dq) => dq.clone(),
            None => {
                let range = *amax.get(&site.activation).ok_or_else(|| {
                    export_error(model, format!("no calibration range for `{}`", site.activation))
                })?;
                let base = site.activation.clone();
                let scale = fresh(format!("{base}_scale"));
                let zero = fresh(format!("{base}_zero_point"));
                new_initializers.push(float_tensor(&scale, &[], &[scale_for(range)]));
                new_initializers.push(int8_tensor(&zero, &[], &[0]));
                let q = fresh(format!("{base}_QuantizeLinear"));
                let dq = fresh(format!("{base}_DequantizeLinear"));
                let q_out = fresh(format!("{base}_quantized"));
                let dq_out = fresh(format!("{base}_dequantized"));
                let nodes = before.entry(at).or_default();
                nodes.push(node("QuantizeLinear", &q, &[&site.activation, &scale, &zero], &q_out, None));
                nodes.push(node("DequantizeLinear", &dq, &[&q_out, &scale, &zero], &dq_out, None));
                dequantized.insert(site.activation.clone(), dq_out.clone());
                report.activations += 1;
                dq_out
            }
        };
        rewire.push((at, 0, activation_dq));
        // The weight: int8 in the file, per-channel DQ.
        let weight = model
            .graph
            .initializers
            .get(&site.weight)
            .ok_or_else(|| export_error(model, format!("weight `{}` is not loaded", site.weight)))?;
        let TensorData::F32(values) = &weight.data else {
            return Err(export_error(model, format!("weight `{}` is not float32", site.weight)));
        };
        let channels = weight.dims[0];
        let (q, scales) = quantize_weight(values, channels);
        let dims: Vec<i64> = weight.dims.iter().map(|d| *d as i64).collect();
        let base = site.weight.clone();
        let (q_name, scale, zero) = (
            fresh(format!("{base}_quantized")),
            fresh(format!("{base}_scale")),
            fresh(format!("{base}_zero_point")),
        );
        new_initializers.push(int8_tensor(&q_name, &dims, &q));
        new_initializers.push(float_tensor(&scale, &[channels as i64], &scales));
        new_initializers.push(int8_tensor(&zero, &[channels as i64], &vec![0; channels]));
        let dq = fresh(format!("{base}_DequantizeLinear"));
        let dq_out = fresh(format!("{base}_dequantized"));
        before.entry(at).or_default().push(node(
            "DequantizeLinear",
            &dq,
            &[&q_name, &scale, &zero],
            &dq_out,
            Some(0),
        ));
        rewire.push((at, 1, dq_out));
        report.weights += 1;
        report.quantized += 1;
    }
    for (at, input, name) in rewire {
        graph.node[at].input[input] = name;
    }
    let old = std::mem::take(&mut graph.node);
    for (i, n) in old.into_iter().enumerate() {
        if let Some(nodes) = before.remove(&i) {
            graph.node.extend(nodes);
        }
        graph.node.push(n);
    }
    // Float weights no node reads any more leave the file.
    let read: HashSet<String> = graph.node.iter().flat_map(|n| n.input.iter().cloned()).collect();
    graph.initializer.retain(|t| read.contains(t.name()));
    graph.initializer.extend(new_initializers);
    Ok((proto.encode_to_vec(), report))
}

fn node(op: &str, name: &str, inputs: &[&str], output: &str, axis: Option<i64>) -> NodeProto {
    NodeProto {
        name: Some(name.to_string()),
        op_type: Some(op.to_string()),
        input: inputs.iter().map(ToString::to_string).collect(),
        output: vec![output.to_string()],
        attribute: axis
            .map(|a| AttributeProto {
                name: Some("axis".into()),
                r#type: Some(AttributeType::Int as i32),
                i: Some(a),
                ..Default::default()
            })
            .into_iter()
            .collect(),
        ..Default::default()
    }
}

fn int8_tensor(name: &str, dims: &[i64], values: &[i8]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(INT8),
        raw_data: Some(values.iter().map(|v| *v as u8).collect()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_are_per_channel_symmetric_with_ties_to_even() {
        let (q, s) = quantize_weight(&[127.0, -63.5, 0.5, 0.0, 0.0, 0.0], 2);
        assert_eq!(s, vec![1.0, 1.0]);
        // -63.5 rounds to -64 (even), 0.5 to 0; the all-zero channel gets scale 1.
        assert_eq!(q, vec![127, -64, 0, 0, 0, 0]);
    }

    #[test]
    fn a_zero_or_broken_range_gets_scale_one() {
        assert_eq!(scale_for(0.0), 1.0);
        assert_eq!(scale_for(f32::NAN), 1.0);
        assert_eq!(scale_for(12.7), 0.1);
    }
}
