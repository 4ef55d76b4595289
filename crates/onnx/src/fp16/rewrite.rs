//! Applies a [`Plan`] to a graph: float16 initializers and constants, `Cast` nodes where a tensor is
//! stored in one precision and read in the other, graph outputs routed through a final `Cast`, and
//! declared types (`value_info`, inputs, outputs) rewritten to what the nodes now produce.

use std::collections::{HashMap, HashSet};

use super::plan::{Plan, Precision};
use super::types::{FLOAT, FLOAT16, Role, input_role, set_declared_type};
use super::{Conversion, Fp16Report, KeptNode};
use crate::ops::Op;
use crate::proto::{
    AttributeProto, GraphProto, NodeProto, TensorProto, attribute_proto::AttributeType,
    tensor_proto::DataLocation,
};

fn elem_type(p: Precision) -> i32 {
    match p {
        Precision::Half => FLOAT16,
        Precision::Full => FLOAT,
    }
}

fn suffix(p: Precision) -> &'static str {
    match p {
        Precision::Half => "fp16",
        Precision::Full => "fp32",
    }
}

/// Names not taken yet in the graph.
struct Names(HashSet<String>);

impl Names {
    fn of(graph: &GraphProto) -> Names {
        let mut taken: HashSet<String> = HashSet::new();
        taken.extend(
            graph.input.iter().chain(&graph.output).chain(&graph.value_info).map(|v| v.name().into()),
        );
        taken.extend(graph.initializer.iter().map(|t| t.name().to_string()));
        for node in &graph.node {
            taken.extend(node.output.iter().cloned());
            taken.insert(node.name().to_string());
        }
        Names(taken)
    }

    fn fresh(&mut self, base: String) -> String {
        let mut name = base.clone();
        for n in 1.. {
            if !self.0.contains(&name) {
                break;
            }
            name = format!("{base}_{n}");
        }
        self.0.insert(name.clone());
        name
    }
}

fn cast_node(input: &str, output: &str, to: Precision) -> NodeProto {
    NodeProto {
        name: Some(output.to_string()),
        op_type: Some("Cast".into()),
        input: vec![input.to_string()],
        output: vec![output.to_string()],
        attribute: vec![AttributeProto {
            name: Some("to".into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(i64::from(elem_type(to))),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The precision each float tensor of the source is stored in after conversion.
fn storage(graph: &GraphProto, types: &HashMap<String, i32>, plan: &Plan) -> HashMap<String, Precision> {
    let mut storage = HashMap::new();
    for input in &graph.input {
        storage.insert(input.name().to_string(), plan.io);
    }
    for init in &graph.initializer {
        let half = plan.half_initializers.contains(init.name());
        storage.insert(init.name().to_string(), if half { Precision::Half } else { Precision::Full });
    }
    for (node, p) in graph.node.iter().zip(&plan.precision) {
        for output in &node.output {
            storage.insert(output.clone(), p.unwrap_or(Precision::Full));
        }
    }
    storage.retain(|name, _| types.get(name) == Some(&FLOAT));
    storage
}

/// Graph outputs stored in the other precision than `plan.io`: their producer writes a new tensor,
/// which a final `Cast` turns into the output. Returns those casts.
fn route_outputs(
    graph: &mut GraphProto,
    plan: &Plan,
    storage: &mut HashMap<String, Precision>,
    names: &mut Names,
) -> Vec<NodeProto> {
    let mut casts = Vec::new();
    let outputs: Vec<String> = graph.output.iter().map(|o| o.name().to_string()).collect();
    for output in outputs {
        let Some(&have) = storage.get(&output) else { continue };
        let produced = graph.node.iter().any(|n| n.output.contains(&output));
        if have == plan.io || !produced {
            continue;
        }
        let routed = names.fresh(format!("{output}_{}", suffix(have)));
        for node in &mut graph.node {
            for name in node.output.iter_mut().chain(node.input.iter_mut()).filter(|n| **n == output) {
                name.clone_from(&routed);
            }
        }
        storage.insert(routed.clone(), have);
        storage.insert(output.clone(), plan.io);
        casts.push(cast_node(&routed, &output, plan.io));
    }
    casts
}

/// Float32 values to float16 in a tensor (raw or `float_data`), written as `raw_data`.
fn tensor_to_half(tensor: &mut TensorProto, conversion: &mut Conversion) -> Result<(), String> {
    if tensor.data_location == Some(DataLocation::External as i32) {
        return Err(format!(
            "initializer `{}` is stored as external data, which the fp16 export does not support yet",
            tensor.name()
        ));
    }
    let values: Vec<f32> = match tensor.raw_data.take() {
        Some(raw) if raw.len() % 4 == 0 => {
            raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        Some(raw) => return Err(format!("tensor `{}` has {} raw bytes", tensor.name(), raw.len())),
        None => std::mem::take(&mut tensor.float_data),
    };
    let raw: Vec<u8> = values.iter().flat_map(|v| conversion.convert(*v).to_le_bytes()).collect();
    tensor.raw_data = Some(raw);
    tensor.data_type = Some(FLOAT16);
    Ok(())
}

fn tensor_attribute(name: &str, tensor: TensorProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(tensor),
        ..Default::default()
    }
}

/// The attributes of a node that computes in float16: `Cast` to float16, constants in float16.
fn half_attributes(node: &mut NodeProto, op: &Op, conversion: &mut Conversion) -> Result<(), String> {
    let float_tensor = |dims: Vec<i64>, float_data: Vec<f32>| TensorProto {
        dims,
        float_data,
        data_type: Some(FLOAT),
        ..Default::default()
    };
    for attr in &mut node.attribute {
        match (op, attr.name()) {
            (Op::Cast(_), "to") if attr.i == Some(i64::from(FLOAT)) => attr.i = Some(i64::from(FLOAT16)),
            (Op::Constant(_), "value_float") => {
                *attr = tensor_attribute("value", float_tensor(vec![], vec![attr.f.unwrap_or(0.0)]));
            }
            (Op::Constant(_), "value_floats") => {
                let values = std::mem::take(&mut attr.floats);
                *attr = tensor_attribute("value", float_tensor(vec![values.len() as i64], values));
            }
            _ => {}
        }
        let is_value = attr.name() == "value";
        if let Some(t) = attr.t.as_mut().filter(|t| is_value && t.data_type() == FLOAT) {
            tensor_to_half(t, conversion)?;
        }
    }
    if matches!(op, Op::ConstantOfShape(_)) && !node.attribute.iter().any(|a| a.name() == "value") {
        // The default fill is a float32 zero; float16 needs it spelled out.
        let zero = TensorProto {
            dims: vec![1],
            data_type: Some(FLOAT16),
            raw_data: Some(vec![0, 0]),
            ..Default::default()
        };
        node.attribute.push(tensor_attribute("value", zero));
    }
    Ok(())
}

/// What node `n` wants for its input `index` stored as a float tensor (`None`: any type).
fn want(ops: &[Op], plan: &Plan, n: usize, index: usize) -> Option<Precision> {
    match input_role(&ops[n], index) {
        Role::AnyType => None,
        Role::Float32 => Some(Precision::Full),
        Role::Compute => plan.precision[n],
    }
}

/// Rebuilds the node list with a `Cast` before the first reader of each (tensor, precision) pair
/// that needs one, and float16 attributes on float16 nodes. Returns the number of casts.
fn insert_casts(
    graph: &mut GraphProto,
    ops: &[Op],
    plan: &Plan,
    storage: &HashMap<String, Precision>,
    (names, conversion): (&mut Names, &mut Conversion),
) -> Result<usize, String> {
    let mut made: HashMap<(String, Precision), String> = HashMap::new();
    let mut nodes = Vec::with_capacity(graph.node.len() + 16);
    for (n, mut node) in std::mem::take(&mut graph.node).into_iter().enumerate() {
        for index in 0..node.input.len() {
            let tensor = node.input[index].clone();
            let (Some(&have), Some(wanted)) = (storage.get(&tensor), want(ops, plan, n, index)) else {
                continue;
            };
            if have == wanted {
                continue;
            }
            let cast = made.entry((tensor.clone(), wanted)).or_insert_with(|| {
                let name = names.fresh(format!("{tensor}_to_{}", suffix(wanted)));
                nodes.push(cast_node(&tensor, &name, wanted));
                name
            });
            node.input[index].clone_from(cast);
        }
        if plan.precision[n] == Some(Precision::Half) {
            half_attributes(&mut node, &ops[n], conversion)
                .map_err(|e| format!("node `{}` ({}): {e}", node.name(), node.op_type()))?;
        }
        nodes.push(node);
    }
    graph.node = nodes;
    Ok(made.len())
}

/// Declared types of inputs, outputs and `value_info` set to the stored precision.
fn declare_types(graph: &mut GraphProto, storage: &HashMap<String, Precision>) {
    for info in graph.input.iter_mut().chain(&mut graph.output).chain(&mut graph.value_info) {
        if let Some(p) = storage.get(info.name()) {
            set_declared_type(info, elem_type(*p));
        }
    }
}

/// Converts `graph` as `plan` says; `types` are the element types of the source graph.
pub fn apply(
    graph: &mut GraphProto,
    ops: &[Op],
    types: &HashMap<String, i32>,
    plan: &Plan,
) -> Result<Fp16Report, String> {
    let mut conversion = Conversion::default();
    let mut names = Names::of(graph);
    let mut storage = storage(graph, types, plan);
    let mut report = Fp16Report::default();
    for (n, node) in graph.node.iter().enumerate() {
        match (plan.precision[n], plan.kept[n]) {
            (Some(Precision::Half), _) => report.converted_nodes += 1,
            (Some(Precision::Full), Some(reason)) => report.kept_nodes.push(KeptNode {
                node: node.name().to_string(),
                op_type: node.op_type().to_string(),
                reason,
            }),
            _ => {}
        }
    }
    let output_casts = route_outputs(graph, plan, &mut storage, &mut names);
    report.casts_inserted = insert_casts(graph, ops, plan, &storage, (&mut names, &mut conversion))?;
    report.casts_inserted += output_casts.len();
    graph.node.extend(output_casts);
    for init in graph.initializer.iter_mut().filter(|t| t.data_type() == FLOAT) {
        if plan.half_initializers.contains(init.name()) {
            tensor_to_half(init, &mut conversion)?;
            report.initializers_converted += 1;
        } else {
            report.initializers_kept.push(init.name().to_string());
        }
    }
    declare_types(graph, &storage);
    report.values_converted = conversion.converted;
    report.clamped = conversion.clamped;
    report.underflowed = conversion.underflowed;
    Ok(report)
}
