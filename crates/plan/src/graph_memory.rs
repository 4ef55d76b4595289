//! Live tensors of the graph as headroom's executor runs it: storages (views share their base's),
//! what each node keeps for backward, liveness of a node list run with `run_nodes`' freeing rule
//! (a tensor goes after its last reader in the list unless kept).

use std::collections::{HashMap, HashSet};

use headroom_onnx::{Graph, Op, Partition};

use crate::saved::{is_view, saved_for_backward};

/// Bytes of one activation element (fp32 everywhere on the CPU; AMP halves what it casts).
pub const FLOAT_BYTES: u64 = 4;

/// Storage sizes of the graph's activations at batch 1 (the batch scales them all).
#[derive(Debug, Clone)]
pub struct Storages {
    /// Tensor name → the name of the tensor that owns its storage (itself unless a view).
    base: HashMap<String, String>,
    /// Owning tensor → bytes at batch 1.
    bytes: HashMap<String, u64>,
    /// Tensors whose shape inference left unknown (counted as 0 bytes; reported).
    pub unknown: Vec<String>,
    /// The graph's SiLUs, Mul index → Sigmoid index: the executor runs each as one `silu`
    /// ([`headroom_onnx::fuse::silu_pairs`]), so the Sigmoid's output never exists and autograd
    /// keeps the SiLU's input alone.
    silu: HashMap<usize, usize>,
    /// Their Sigmoids, Sigmoid index → Mul index.
    silu_sigmoids: HashMap<usize, usize>,
}

impl Storages {
    /// Sizes from the inferred shapes of `graph` (every input dim known).
    pub fn new(graph: &Graph) -> Storages {
        let mut base: HashMap<String, String> = HashMap::new();
        let mut bytes = HashMap::new();
        let mut unknown = Vec::new();
        let mut add = |name: &str, bytes: &mut HashMap<String, u64>| {
            let size = graph.shapes.get(name).and_then(|dims| {
                dims.iter().try_fold(1u64, |acc, d| d.known().map(|v| acc * v.max(0) as u64))
            });
            match size {
                Some(n) => {
                    bytes.insert(name.to_string(), n * FLOAT_BYTES);
                }
                None => unknown.push(name.to_string()),
            }
        };
        for input in &graph.inputs {
            base.insert(input.name.clone(), input.name.clone());
            add(&input.name, &mut bytes);
        }
        for node in &graph.nodes {
            let non_float = matches!(
                node.op,
                Op::Shape(_)
                    | Op::Equal
                    | Op::Less
                    | Op::Greater
                    | Op::Not
                    | Op::Range
                    | Op::ConstantOfShape(_)
            );
            for output in node.outputs.iter().filter(|o| !o.is_empty()) {
                let owner = match node.inputs.first() {
                    Some(first) if is_view(&node.op) && !graph.initializer_dims.contains_key(first) => {
                        base.get(first).cloned().unwrap_or_else(|| first.clone())
                    }
                    _ => output.clone(),
                };
                base.insert(output.clone(), owner.clone());
                if owner == *output {
                    if non_float {
                        bytes.insert(output.clone(), 0);
                    } else {
                        add(output, &mut bytes);
                    }
                }
            }
        }
        let outputs: Vec<String> = graph.outputs.iter().map(|o| o.name.clone()).collect();
        let silu = headroom_onnx::fuse::silu_pairs(&graph.nodes, &outputs);
        let silu_sigmoids = silu.iter().map(|(&mul, &sigmoid)| (sigmoid, mul)).collect();
        Storages { base, bytes, unknown, silu, silu_sigmoids }
    }

    /// The SiLU input when node `index` is the Mul of a SiLU.
    fn silu_input<'g>(&self, graph: &'g Graph, index: usize) -> Option<&'g str> {
        self.silu.get(&index).map(|&sigmoid| graph.nodes[sigmoid].inputs[0].as_str())
    }

    /// The storage owner of `name` (`None` for initializers and unknown names).
    pub fn base(&self, name: &str) -> Option<&str> {
        self.base.get(name).map(String::as_str)
    }

    /// Bytes of a storage owner at batch 1.
    pub fn owner_bytes(&self, owner: &str) -> u64 {
        self.bytes.get(owner).copied().unwrap_or(0)
    }

    /// Bytes of the storage behind `name` at batch 1 (0 for initializers).
    pub fn bytes_of(&self, name: &str) -> u64 {
        self.base(name).map_or(0, |b| self.owner_bytes(b))
    }

    /// Total bytes of a set of storage owners.
    pub fn total<'a>(&self, owners: impl IntoIterator<Item = &'a str>) -> u64 {
        owners.into_iter().map(|o| self.owner_bytes(o)).sum()
    }
}

/// Which tensors of the trainable part require grad: the trainable parameters and everything
/// computed from them (the cut does not).
pub fn requiring_grad(graph: &Graph, partition: &Partition) -> HashSet<String> {
    let mut grad: HashSet<String> = partition.parameters.iter().cloned().collect();
    for segment in &partition.segments {
        for &i in &segment.nodes {
            let node = &graph.nodes[i];
            let differentiable = !matches!(
                node.op,
                Op::Shape(_)
                    | Op::Equal
                    | Op::Less
                    | Op::Greater
                    | Op::Not
                    | Op::Range
                    | Op::ConstantOfShape(_)
            );
            if differentiable && node.inputs.iter().any(|x| grad.contains(x)) {
                grad.extend(node.outputs.iter().cloned());
            }
        }
    }
    grad
}

/// Storage owners a node keeps for backward, and bytes of extra int64 copies (max-pool indices),
/// at batch 1.
pub fn node_saved(
    graph: &Graph,
    storages: &Storages,
    grad: &HashSet<String>,
    index: usize,
) -> (Vec<String>, u64) {
    let node = &graph.nodes[index];
    if storages.silu_sigmoids.contains_key(&index) {
        return (Vec::new(), 0);
    }
    if let Some(x) = storages.silu_input(graph, index) {
        // silu keeps its input.
        let owners = if grad.contains(x) {
            storages.base(x).map(str::to_string).into_iter().collect()
        } else {
            vec![]
        };
        return (owners, 0);
    }
    let requires: Vec<bool> = node.inputs.iter().map(|x| grad.contains(x)).collect();
    let saved = saved_for_backward(&node.op, &requires);
    let mut owners = Vec::new();
    let names = saved
        .inputs
        .iter()
        .filter_map(|&i| node.inputs.get(i))
        .chain(saved.outputs.iter().filter_map(|&i| node.outputs.get(i)));
    for name in names {
        if let Some(owner) = storages.base(name)
            && !owners.iter().any(|o| o == owner)
        {
            owners.push(owner.to_string());
        }
    }
    let extra = saved.int64_output_copies as u64
        * node.outputs.first().map_or(0, |o| storages.bytes_of(o) / FLOAT_BYTES * 8);
    (owners, extra)
}

/// The backward transient of one node at batch 1: the gradient of its output and of each input
/// that requires grad, alive together while its backward runs.
pub fn node_backward(graph: &Graph, storages: &Storages, grad: &HashSet<String>, index: usize) -> u64 {
    let node = &graph.nodes[index];
    if !node.outputs.iter().any(|o| grad.contains(o)) || is_view(&node.op) {
        return 0;
    }
    if storages.silu_sigmoids.contains_key(&index) {
        return 0;
    }
    if let Some(x) = storages.silu_input(graph, index) {
        // silu's backward: the output's gradient and the input's.
        let input = if grad.contains(x) { storages.bytes_of(x) } else { 0 };
        return input + node.outputs.iter().map(|o| storages.bytes_of(o)).sum::<u64>();
    }
    let inputs: u64 = node
        .inputs
        .iter()
        .filter(|x| grad.contains(*x) && !graph.initializer_dims.contains_key(*x))
        .map(|x| storages.bytes_of(x))
        .sum();
    let outputs: u64 = node.outputs.iter().map(|o| storages.bytes_of(o)).sum();
    inputs + outputs
}

/// What running `nodes` with the executor's freeing rule holds at its worst moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Liveness {
    /// Largest bytes alive at once (batch 1), kept tensors, saved ones and the node's outputs
    /// included.
    pub peak: u64,
    /// Storage owners alive at the end (kept tensors and, with autograd, everything saved).
    pub alive_at_end: HashSet<String>,
    /// Storage owners kept for backward (with autograd).
    pub saved: HashSet<String>,
    /// Extra int64 bytes kept for backward (max-pool indices).
    pub saved_extra: u64,
}

/// Simulates lists of nodes run one after the other, each list as one `run_nodes` call (tensors
/// freed after their last reader within the list unless `keep` names them), starting from
/// `initial` tensors; with `grad`, autograd keeps what each node saves.
pub fn simulate(
    graph: &Graph,
    storages: &Storages,
    lists: &[&[usize]],
    initial: &[String],
    keep: &HashSet<&str>,
    grad: Option<&HashSet<String>>,
) -> Liveness {
    let mut env: HashSet<String> = initial.iter().cloned().collect();
    let mut saved: HashSet<String> = HashSet::new();
    let mut saved_extra = 0u64;
    let owners = |env: &HashSet<String>, saved: &HashSet<String>| -> HashSet<String> {
        env.iter().filter_map(|n| storages.base(n).map(str::to_string)).chain(saved.iter().cloned()).collect()
    };
    let mut peak = storages.total(owners(&env, &saved).iter().map(String::as_str));
    for nodes in lists {
        let mut last_use: HashMap<&str, usize> = HashMap::new();
        for (step, &i) in nodes.iter().enumerate() {
            for input in &graph.nodes[i].inputs {
                last_use.insert(input.as_str(), step);
            }
        }
        // As the executor: a SiLU whose two nodes are in this list, its Sigmoid's output not kept,
        // runs as one op at its Mul; the Sigmoid makes nothing.
        let listed: HashSet<usize> = nodes.iter().copied().collect();
        let skipped = |i: usize| {
            storages
                .silu_sigmoids
                .get(&i)
                .is_some_and(|mul| listed.contains(mul) && !keep.contains(graph.nodes[i].outputs[0].as_str()))
        };
        for (step, &i) in nodes.iter().enumerate() {
            let node = &graph.nodes[i];
            if skipped(i) {
                continue;
            }
            let mut during = owners(&env, &saved);
            for o in node.outputs.iter().filter_map(|o| storages.base(o)) {
                during.insert(o.to_string());
            }
            peak = peak.max(storages.total(during.iter().map(String::as_str)) + saved_extra);
            if let Some(grad) = grad {
                let (kept, extra) = node_saved(graph, storages, grad, i);
                saved.extend(kept);
                saved_extra += extra;
            }
            for name in node.outputs.iter().filter(|o| !o.is_empty()) {
                if last_use.get(name.as_str()).is_some_and(|s| *s > step) || keep.contains(name.as_str()) {
                    env.insert(name.clone());
                }
            }
            for input in &node.inputs {
                if last_use.get(input.as_str()) == Some(&step) && !keep.contains(input.as_str()) {
                    env.remove(input);
                }
            }
        }
    }
    let alive_at_end = owners(&env, &saved);
    Liveness { peak, alive_at_end, saved, saved_extra }
}
