//! An INT8 (Q/DQ) export seen as the float graph it was made from, for `headroom inspect`: every
//! `DequantizeLinear` of an integer initializer becomes that initializer in float32, every
//! `QuantizeLinear` → `DequantizeLinear` pair on an activation becomes the activation itself.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{Error, Result};
use crate::proto::{ModelProto, TensorProto};
use crate::tensor::{TensorData, decode};

/// The Q/DQ nodes of `proto` folded away (see the module docs) and how many there were. A
/// `DequantizeLinear` that reads neither an initializer nor a `QuantizeLinear` is an error naming it.
pub fn dequantize(proto: &ModelProto, path: &Path) -> Result<(ModelProto, usize)> {
    let mut proto = proto.clone();
    let fail = |node: &str, reason: String| Error::Export {
        path: path.to_path_buf(),
        reason: format!("node `{node}`: {reason}"),
    };
    let Some(graph) = proto.graph.as_mut() else { return Ok((proto, 0)) };
    let initializers: HashMap<String, TensorProto> =
        graph.initializer.iter().map(|t| (t.name().to_string(), t.clone())).collect();
    // A DequantizeLinear's output → the float tensor it stands for; a QuantizeLinear's output → its input.
    let mut alias: HashMap<String, String> = HashMap::new();
    let mut quantized: HashMap<String, String> = HashMap::new();
    let mut count = 0;
    let mut kept = Vec::with_capacity(graph.node.len());
    for mut node in std::mem::take(&mut graph.node) {
        for input in &mut node.input {
            if let Some(source) = alias.get(input) {
                *input = source.clone();
            }
        }
        let output = node.output.first().cloned().unwrap_or_default();
        match node.op_type() {
            "QuantizeLinear" => {
                count += 1;
                quantized.insert(output, node.input.first().cloned().unwrap_or_default());
            }
            "DequantizeLinear" => {
                count += 1;
                let input = node.input.first().cloned().unwrap_or_default();
                if let Some(source) = quantized.get(&input) {
                    alias.insert(output, source.clone());
                } else if initializers.contains_key(&input) {
                    let axis = node.attribute.iter().find(|a| a.name() == "axis").map_or(1, |a| a.i());
                    let values =
                        weight(&initializers, &node.input, axis, path).map_err(|r| fail(node.name(), r))?;
                    graph.initializer.push(values.with_name(&output));
                } else {
                    return Err(fail(
                        node.name(),
                        format!("reads `{input}`, neither a weight nor a QuantizeLinear"),
                    ));
                }
            }
            _ => kept.push(node),
        }
    }
    graph.node = kept;
    for output in &mut graph.output {
        if let Some(source) = output.name.as_ref().and_then(|n| alias.get(n)) {
            output.name = Some(source.clone());
        }
    }
    Ok((proto, count))
}

/// A dequantized weight: `(x - zero) * scale`, per tensor or along `axis`.
struct Weight {
    dims: Vec<i64>,
    values: Vec<f32>,
}

impl Weight {
    fn with_name(self, name: &str) -> TensorProto {
        crate::tensor::float_tensor(name, &self.dims, &self.values)
    }
}

fn weight(
    initializers: &HashMap<String, TensorProto>,
    inputs: &[String],
    axis: i64,
    path: &Path,
) -> Result<Weight, String> {
    let dir = path.parent();
    let get = |i: usize| -> Result<Option<crate::tensor::Tensor>, String> {
        match inputs.get(i).filter(|n| !n.is_empty()) {
            None => Ok(None),
            Some(name) => {
                let proto =
                    initializers.get(name).ok_or_else(|| format!("`{name}` is not an initializer"))?;
                decode(proto, dir).map(Some)
            }
        }
    };
    let x = get(0)?.ok_or("no input")?;
    let scale = get(1)?.ok_or("no scale")?;
    let zero = get(2)?;
    let as_f32 = |data: &TensorData| -> Option<Vec<f32>> {
        match data {
            TensorData::F32(v) => Some(v.clone()),
            other => other.as_i64().map(|v| v.into_iter().map(|x| x as f32).collect()),
        }
    };
    let values = as_f32(&x.data).ok_or("the quantized weight is not integer")?;
    let scale = as_f32(&scale.data).ok_or("the scale is not float32")?;
    let zero = zero.and_then(|z| as_f32(&z.data)).unwrap_or_else(|| vec![0.0; scale.len()]);
    let rank = x.dims.len() as i64;
    let axis = if axis < 0 { axis + rank } else { axis };
    let (channels, inner) = if scale.len() <= 1 || axis < 0 || axis >= rank {
        (1, 1)
    } else {
        (x.dims[axis as usize], x.dims[axis as usize + 1..].iter().product::<usize>())
    };
    if channels != scale.len().max(1) || zero.len() != scale.len() {
        return Err(format!("{} scales for {channels} channels", scale.len()));
    }
    let values = values
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let c = if channels > 1 { (i / inner) % channels } else { 0 };
            (q - zero[c]) * scale[c]
        })
        .collect();
    Ok(Weight { dims: x.dims.iter().map(|d| *d as i64).collect(), values })
}

/// The activation scale of every Conv of a Q/DQ file that reads its input through a
/// `QuantizeLinear` → `DequantizeLinear` pair with one scale (Conv node name → scale): what
/// quantization-aware training fake-quantizes at, and what an export of the trained model writes
/// again. Convs the file keeps float are absent.
pub fn activation_scales(proto: &ModelProto, path: &Path) -> Result<HashMap<String, f32>> {
    let Some(graph) = proto.graph.as_ref() else { return Ok(HashMap::new()) };
    let initializers: HashMap<&str, &TensorProto> = graph.initializer.iter().map(|t| (t.name(), t)).collect();
    let producer: HashMap<&str, &crate::proto::NodeProto> =
        graph.node.iter().flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n))).collect();
    let mut scales = HashMap::new();
    for conv in graph.node.iter().filter(|n| n.op_type() == "Conv") {
        let Some(dq) = conv.input.first().and_then(|i| producer.get(i.as_str())) else { continue };
        let reads_q = dq
            .input
            .first()
            .and_then(|i| producer.get(i.as_str()))
            .is_some_and(|q| q.op_type() == "QuantizeLinear");
        if dq.op_type() != "DequantizeLinear" || !reads_q {
            continue;
        }
        let Some(scale) = dq.input.get(1).and_then(|s| initializers.get(s.as_str())) else { continue };
        let scale = decode(scale, path.parent()).map_err(|reason| Error::Export {
            path: path.to_path_buf(),
            reason: format!("the scale of `{}`: {reason}", dq.name()),
        })?;
        if let TensorData::F32(v) = &scale.data
            && v.len() == 1
        {
            scales.insert(conv.name().to_string(), v[0]);
        }
    }
    Ok(scales)
}
