//! The liveness simulation never under-counts a live tensor: on random graphs of elementwise ops
//! and views, its peak is at least what any node has alive at once (its inputs and outputs, and
//! with autograd everything saved so far), and what autograd saves stays alive to the end. SiLUs
//! run as one op, as the executor runs them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;

use headroom_onnx::{Dim, Graph, Node, Op, ValueInfo};
use headroom_plan::graph_memory::{Storages, node_saved, simulate};
use proptest::prelude::*;

/// Node `i` reads one or two earlier tensors (`t0` is the input) and writes `t{i+1}` of `width`
/// floats (a view has its input's width).
fn graph(spec: &[(u8, usize, usize, i64)]) -> Graph {
    let mut nodes = Vec::new();
    let mut shapes = HashMap::from([("t0".to_string(), vec![Dim::Known(1), Dim::Known(8)])]);
    for (i, &(kind, a, b, width)) in spec.iter().enumerate() {
        let (a, b) = (format!("t{}", a % (i + 1)), format!("t{}", b % (i + 1)));
        let (op, inputs) = match kind % 4 {
            0 => (Op::Add, vec![a.clone(), b]),
            1 => (Op::Mul, vec![a.clone(), b]),
            2 => (Op::Sigmoid, vec![a.clone()]),
            _ => (Op::Identity, vec![a.clone()]),
        };
        let out = format!("t{}", i + 1);
        let shape = if kind % 4 == 3 { shapes[&a].clone() } else { vec![Dim::Known(1), Dim::Known(width)] };
        shapes.insert(out.clone(), shape);
        nodes.push(Node { name: format!("n{i}"), op, inputs, outputs: vec![out] });
    }
    Graph {
        path: PathBuf::from("random.onnx"),
        opset: 17,
        nodes,
        inputs: vec![ValueInfo { name: "t0".into(), shape: Some(vec![Dim::Known(1), Dim::Known(8)]) }],
        outputs: vec![],
        initializer_dims: BTreeMap::new(),
        initializers: BTreeMap::new(),
        shapes,
    }
}

proptest! {
    #[test]
    fn the_peak_covers_every_node_and_saved_tensors_stay(
        spec in prop::collection::vec((0u8..4, 0usize..64, 0usize..64, 1i64..64), 1..24),
        with_grad in any::<bool>(),
    ) {
        let g = graph(&spec);
        let storages = Storages::new(&g);
        let nodes: Vec<usize> = (0..g.nodes.len()).collect();
        let keep: HashSet<&str> = HashSet::new();
        let grad: HashSet<String> = (0..=g.nodes.len()).map(|i| format!("t{i}")).collect();
        let live = simulate(&g, &storages, &[&nodes], &["t0".to_string()], &keep, with_grad.then_some(&grad));
        // A SiLU (Sigmoid(x)·x, its Sigmoid read by the Mul alone) runs as one op at its Mul: the
        // Sigmoid's output never exists.
        let silu = headroom_onnx::fuse::silu_pairs(&g.nodes, &[]);
        let fused_sigmoids: HashSet<usize> = silu.values().copied().collect();
        let mut saved: HashSet<String> = HashSet::new();
        for (i, node) in g.nodes.iter().enumerate() {
            if fused_sigmoids.contains(&i) {
                prop_assert!(node_saved(&g, &storages, &grad, i).0.is_empty());
                continue;
            }
            let sigmoid_output = silu.get(&i).map(|&s| g.nodes[s].outputs[0].as_str());
            let mut alive: HashSet<String> = node
                .inputs
                .iter()
                .chain(&node.outputs)
                .filter(|n| Some(n.as_str()) != sigmoid_output)
                .filter_map(|n| storages.base(n).map(str::to_string))
                .collect();
            alive.extend(saved.iter().cloned());
            prop_assert!(live.peak >= storages.total(alive.iter().map(String::as_str)), "node {i}");
            if with_grad {
                saved.extend(node_saved(&g, &storages, &grad, i).0);
            }
        }
        prop_assert!(saved.iter().all(|s| live.alive_at_end.contains(s)));
    }
}
