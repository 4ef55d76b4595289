//! Which nodes compute in float16 and which initializers are stored in float16.
//!
//! A node that touches float values gets a precision, decided in this order:
//! 1. `Range` and `NonMaxSuppression` stay float32: ONNX defines them for float32 and not float16;
//! 2. nodes named in the node block list, then ops in the op block list, stay float32;
//! 3. the Detect head's decode stays float32: every node computing from the head's raw outputs
//!    (`inspect`'s box and class convolutions), through values and not only shapes;
//! 4. any other node computing from the image goes to float16;
//! 5. what is left computes constants (anchors, strides, `Constant` nodes, aliases of
//!    initializers): float16 when every reader wants float16, else float32 — so anchors and strides
//!    read by the decode are never rounded. Decided from the last node back, readers first.
//!
//! A float initializer is stored in float16 when every reader wants float16 (same rule as 5).

use std::collections::{HashMap, HashSet};

use super::types::{FLOAT, Role, input_role};
use super::{Fp16Options, KeptReason};
use crate::ops::Op;
use crate::proto::GraphProto;

/// Float16 or float32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Precision {
    /// float16.
    Half,
    /// float32.
    Full,
}

/// Ops ONNX defines for float32 and not float16: always kept float32.
pub const FLOAT32_ONLY_OPS: &[&str] = &["Range", "NonMaxSuppression"];

/// The decisions for one graph.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Per node (graph order): its precision, `None` for nodes that compute no float value.
    pub precision: Vec<Option<Precision>>,
    /// Per node: why it stays float32 (`None` when it is float16 or computes no float value).
    pub kept: Vec<Option<KeptReason>>,
    /// Float initializers stored in float16.
    pub half_initializers: HashSet<String>,
    /// Precision of the graph's float inputs and outputs.
    pub io: Precision,
}

/// Readers of each tensor: (node index, input index).
pub fn readers(graph: &GraphProto) -> HashMap<&str, Vec<(usize, usize)>> {
    let mut map: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (n, node) in graph.node.iter().enumerate() {
        for (i, input) in node.input.iter().enumerate().filter(|(_, t)| !t.is_empty()) {
            map.entry(input.as_str()).or_default().push((n, i));
        }
    }
    map
}

/// Whether a node computes with float32 values of the source model: a float output, or a float input
/// it computes with (Shape and Cast only look at their input's shape or convert it).
pub fn is_float_node(graph: &GraphProto, ops: &[Op], types: &HashMap<String, i32>, n: usize) -> bool {
    let (node, op) = (&graph.node[n], &ops[n]);
    let is_float = |t: &String| types.get(t) == Some(&FLOAT);
    node.output.iter().any(is_float)
        || node.input.iter().enumerate().any(|(i, t)| is_float(t) && input_role(op, i) != Role::AnyType)
}

/// Per node: whether it computes from the values of `seeds`, directly or through other nodes
/// (`Shape` reads only dims: nothing flows through it).
pub(crate) fn computes_from(
    graph: &GraphProto,
    ops: &[Op],
    seeds: impl IntoIterator<Item = String>,
) -> Vec<bool> {
    let mut reached: HashSet<String> = seeds.into_iter().collect();
    let mut nodes = vec![false; graph.node.len()];
    for (n, (node, op)) in graph.node.iter().zip(ops).enumerate() {
        if !matches!(op, Op::Shape(_)) && node.input.iter().any(|i| reached.contains(i)) {
            reached.extend(node.output.iter().cloned());
            nodes[n] = true;
        }
    }
    nodes
}

/// The precision rules 1–4 give (`None`: a constant, decided by its readers).
fn fixed_precision(
    name: &str,
    op_type: &str,
    options: &Fp16Options,
    decode: bool,
    from_image: bool,
) -> Option<(Precision, Option<KeptReason>)> {
    let full = |reason| Some((Precision::Full, Some(reason)));
    if FLOAT32_ONLY_OPS.contains(&op_type) {
        full(KeptReason::Float32Only)
    } else if options.node_block_list.iter().any(|b| b == name) {
        full(KeptReason::NodeBlockList)
    } else if options.op_block_list.iter().any(|b| b == op_type) {
        full(KeptReason::OpBlockList)
    } else if decode {
        full(KeptReason::Decode)
    } else if from_image {
        Some((Precision::Half, None))
    } else {
        None
    }
}

/// What a reader wants for the tensor it reads as input `index` (`None`: any type).
fn want(ops: &[Op], precision: &[Option<Precision>], (node, index): (usize, usize)) -> Option<Precision> {
    match input_role(&ops[node], index) {
        Role::AnyType => None,
        Role::Float32 => Some(Precision::Full),
        Role::Compute => Some(precision[node].unwrap_or(Precision::Full)),
    }
}

/// Float16 when every reader of `tensors` (and the graph outputs among them) wants float16.
fn by_readers<'a>(
    tensors: impl IntoIterator<Item = &'a String>,
    readers: &HashMap<&str, Vec<(usize, usize)>>,
    outputs: &HashSet<&str>,
    (ops, precision, io): (&[Op], &[Option<Precision>], Precision),
) -> Precision {
    let mut wants = Vec::new();
    for tensor in tensors {
        let read = readers.get(tensor.as_str()).into_iter().flatten();
        wants.extend(read.filter_map(|r| want(ops, precision, *r)));
        if outputs.contains(tensor.as_str()) {
            wants.push(io);
        }
    }
    if !wants.is_empty() && wants.iter().all(|w| *w == Precision::Half) {
        Precision::Half
    } else {
        Precision::Full
    }
}

/// Decides every node's precision and which initializers become float16. `head_outputs` are the
/// Detect head's raw outputs (empty: no decode rule).
pub fn plan(
    graph: &GraphProto,
    ops: &[Op],
    types: &HashMap<String, i32>,
    options: &Fp16Options,
    head_outputs: &[String],
) -> Plan {
    let io = if options.keep_io_types { Precision::Full } else { Precision::Half };
    let inputs = graph.input.iter().map(|i| i.name().to_string());
    let from_image = computes_from(graph, ops, inputs);
    let decode = computes_from(graph, ops, head_outputs.iter().cloned());
    let count = graph.node.len();
    let (mut precision, mut kept) = (vec![None; count], vec![None; count]);
    let float: Vec<bool> = (0..count).map(|n| is_float_node(graph, ops, types, n)).collect();
    let mut constants = Vec::new();
    for (n, node) in graph.node.iter().enumerate().filter(|(n, _)| float[*n]) {
        let decided = fixed_precision(node.name(), node.op_type(), options, decode[n], from_image[n]);
        match decided {
            Some((p, reason)) => (precision[n], kept[n]) = (Some(p), reason),
            None => constants.push(n),
        }
    }
    let readers = readers(graph);
    let outputs: HashSet<&str> = graph.output.iter().map(|o| o.name()).collect();
    for &n in constants.iter().rev() {
        let p = by_readers(&graph.node[n].output, &readers, &outputs, (ops, &precision, io));
        precision[n] = Some(p);
        kept[n] = (p == Precision::Full).then_some(KeptReason::FeedsFloat32);
    }
    let half_initializers = graph
        .initializer
        .iter()
        .filter(|t| t.data_type() == FLOAT)
        .filter(|t| {
            let name = t.name().to_string();
            by_readers([&name], &readers, &outputs, (ops, &precision, io)) == Precision::Half
        })
        .map(|t| t.name().to_string())
        .collect();
    Plan { precision, kept, half_initializers, io }
}
