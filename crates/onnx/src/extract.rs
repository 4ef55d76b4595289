//! A part of a model as a model of its own: the nodes that compute some of its tensors, with the
//! initializers they use, those tensors as outputs. `headroom train --trunk ort` runs the frozen trunk
//! cut out of the student this way in ONNX Runtime.

use std::collections::HashSet;
use std::path::Path;

use prost::Message as _;

use crate::proto::{
    AttributeProto, NodeProto, TypeProto, ValueInfoProto, attribute_proto::AttributeType,
    tensor_proto::DataType, type_proto,
};
use crate::{Error, Model, Result};

/// What [`extract`] appends to an output's name: the output is that tensor cast to float32 (an
/// FP16 export's tensors are float16).
pub const FLOAT_OUTPUT_SUFFIX: &str = "__headroom_f32";

/// The bytes of a model holding only what `model` needs to compute `outputs` from its inputs;
/// each of `outputs`, cast to float32, becomes a graph output named with [`FLOAT_OUTPUT_SUFFIX`]
/// appended; metadata and opsets are kept.
pub fn extract(model: &Model, outputs: &[String]) -> Result<Vec<u8>> {
    let err = |reason: String| Error::WriteBack { path: model.path.clone(), reason };
    let mut proto = model.proto.clone();
    let graph = proto.graph.as_mut().ok_or_else(|| err("no graph".into()))?;
    let mut needed: HashSet<String> = outputs.iter().cloned().collect();
    let mut keep = vec![false; graph.node.len()];
    // Nodes are in topological order: one pass backwards collects every producer needed.
    for (i, node) in graph.node.iter().enumerate().rev() {
        if node.output.iter().any(|o| needed.contains(o)) {
            keep[i] = true;
            needed.extend(node.input.iter().filter(|n| !n.is_empty()).cloned());
        }
    }
    let produced: HashSet<&String> = graph
        .node
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .flat_map(|(n, _)| &n.output)
        .chain(graph.input.iter().filter_map(|i| i.name.as_ref()))
        .chain(graph.initializer.iter().filter_map(|t| t.name.as_ref()))
        .collect();
    if let Some(missing) = outputs.iter().find(|o| !produced.contains(o)) {
        return Err(err(format!("no node computes `{missing}`")));
    }
    let nodes = std::mem::take(&mut graph.node);
    graph.node = nodes.into_iter().zip(&keep).filter(|(_, k)| **k).map(|(n, _)| n).collect();
    graph.initializer.retain(|t| t.name.as_ref().is_some_and(|n| needed.contains(n)));
    graph.value_info.retain(|v| v.name.as_ref().is_some_and(|n| needed.contains(n)));
    for name in outputs {
        graph.node.push(cast_to_float(name));
    }
    graph.output = outputs.iter().map(|name| float_output(&format!("{name}{FLOAT_OUTPUT_SUFFIX}"))).collect();
    Ok(proto.encode_to_vec())
}

/// A Cast of `name` to float32 (a no-op on a float32 tensor) into `name` + [`FLOAT_OUTPUT_SUFFIX`].
fn cast_to_float(name: &str) -> NodeProto {
    cast_node(name, &format!("{name}{FLOAT_OUTPUT_SUFFIX}"))
}

/// A node (named as its output) casting `input` to float32 into `output`.
pub fn cast_node(input: &str, output: &str) -> NodeProto {
    NodeProto {
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        name: Some(output.to_string()),
        op_type: Some("Cast".into()),
        attribute: vec![AttributeProto {
            name: Some("to".into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(DataType::Float as i64),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn float_output(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            denotation: None,
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: None,
            })),
        }),
        ..Default::default()
    }
}

/// [`extract`] of the model at `path`.
pub fn extract_file(path: &Path, outputs: &[String]) -> Result<Vec<u8>> {
    extract(&Model::load(path)?, outputs)
}
