//! Patterns the trainer runs as one libtorch op, found here so that the executor
//! (crates/train/src/executor.rs) and the memory planner (crates/plan) agree on them.
//!
//! **SiLU**: Ultralytics exports `nn.SiLU` as `Sigmoid(x) → s; Mul(x, s)`. Run as two ops, autograd
//! keeps `s` for the Sigmoid and both `x` and `s` for the Mul, and each op makes its own output and
//! gradient; libtorch's `silu` keeps `x` alone and runs one kernel each way.

use std::collections::HashMap;

use crate::Op;
use crate::graph::Node;

/// The SiLUs of `nodes`: Mul index → Sigmoid index, for every `Sigmoid(x) → s` whose output is read
/// by exactly one node, a later `Mul` of `x` and `s` (either order), and is not among `outputs` (the
/// graph's outputs). Running that Mul as `silu(x)` and the Sigmoid not at all gives the same value.
pub fn silu_pairs(nodes: &[Node], outputs: &[String]) -> HashMap<usize, usize> {
    let mut readers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        for input in node.inputs.iter().filter(|x| !x.is_empty()) {
            let list = readers.entry(input.as_str()).or_default();
            if list.last() != Some(&i) {
                list.push(i);
            }
        }
    }
    let mut pairs = HashMap::new();
    for (i, node) in nodes.iter().enumerate() {
        let (Op::Sigmoid, [x], [s]) = (&node.op, node.inputs.as_slice(), node.outputs.as_slice()) else {
            continue;
        };
        if outputs.contains(s) {
            continue;
        }
        let Some(&[j]) = readers.get(s.as_str()).map(Vec::as_slice) else { continue };
        let mul = &nodes[j];
        let operands = mul.inputs.as_slice();
        let is_silu = matches!(mul.op, Op::Mul)
            && j > i
            && (operands == [x.clone(), s.clone()] || operands == [s.clone(), x.clone()]);
        if is_silu {
            pairs.insert(j, i);
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: Op, inputs: &[&str], outputs: &[&str]) -> Node {
        Node {
            name: outputs[0].to_string(),
            op,
            inputs: inputs.iter().map(|s| s.to_string()).collect(),
            outputs: outputs.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn a_sigmoid_read_only_by_the_mul_of_its_input_is_a_silu() {
        let nodes = vec![
            node(Op::Sigmoid, &["x"], &["s"]),
            node(Op::Mul, &["x", "s"], &["y"]),
            node(Op::Sigmoid, &["y"], &["t"]),
            node(Op::Mul, &["t", "y"], &["z"]),
        ];
        let pairs = silu_pairs(&nodes, &["z".to_string()]);
        assert_eq!(pairs, HashMap::from([(1, 0), (3, 2)]));
    }

    #[test]
    fn other_patterns_are_left_as_they_are() {
        let nodes = vec![
            // s is read twice: the Sigmoid's output must exist.
            node(Op::Sigmoid, &["x"], &["s"]),
            node(Op::Mul, &["x", "s"], &["y"]),
            node(Op::Add, &["s", "y"], &["a"]),
            // A Mul of another tensor: a gate, not a SiLU.
            node(Op::Sigmoid, &["a"], &["g"]),
            node(Op::Mul, &["y", "g"], &["b"]),
            // The Sigmoid's output is a graph output.
            node(Op::Sigmoid, &["b"], &["o"]),
            node(Op::Mul, &["b", "o"], &["c"]),
            // Mul(s, s) reads s twice from one node but is not x·s.
            node(Op::Sigmoid, &["c"], &["q"]),
            node(Op::Mul, &["q", "q"], &["d"]),
        ];
        assert!(silu_pairs(&nodes, &["o".to_string(), "d".to_string()]).is_empty());
    }
}
