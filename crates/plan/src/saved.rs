//! What libtorch's autograd keeps for backward, per ONNX op as headroom's executor lowers it
//! (crates/train/src/lower), and which outputs are views of an input (they share its storage).
//!
//! The rules follow PyTorch's `tools/autograd/derivatives.yaml` for the aten op each lowering calls:
//! - `convolution`: `input` and `weight` (the weight is a parameter, counted as such), whether or not
//!   the input requires grad: the weight's gradient needs it.
//! - `sigmoid`: `result`. `softmax` / `_softmax`: `result`. `sqrt`: `result`.
//! - `mul`: `self` when `other` requires grad, `other` when `self` does. `matmul`: the same.
//! - `div`: `other` when `self` requires grad; `self` and `other` when `other` does.
//! - `pow`: `self` and `exponent` (and `result` for a tensor exponent).
//! - `max_pool2d` with grad dispatches to `max_pool2d_with_indices`: `self` and the int64 `indices`
//!   (output-sized, 8 bytes per element).
//! - `add`, `sub`, `neg`, `cat`, `split_with_sizes`, `narrow`/`slice`, `view`/`reshape`, `permute`,
//!   `upsample_nearest2d`, `upsample_bilinear2d`, `expand`, `to`: nothing but sizes and scalars.
//! - `gather`: the int64 index (the decode tails, never trained).

use headroom_onnx::Op;

/// What one node's autograd node keeps, by input or output position.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Saved {
    /// Inputs kept (positions into the node's inputs).
    pub inputs: Vec<usize>,
    /// Outputs kept (positions into the node's outputs).
    pub outputs: Vec<usize>,
    /// Extra int64 tensors of the first output's element count (max-pool indices).
    pub int64_output_copies: usize,
}

/// What a node with `op` saves, given which of its inputs require grad (its output does when any
/// input does; a node none of whose inputs requires grad saves nothing).
pub fn saved_for_backward(op: &Op, requires_grad: &[bool]) -> Saved {
    let any = requires_grad.iter().any(|r| *r);
    if !any {
        return Saved::default();
    }
    let grad = |i: usize| requires_grad.get(i).copied().unwrap_or(false);
    let keep = |inputs: Vec<usize>| Saved { inputs, ..Saved::default() };
    match op {
        Op::Conv(_) => keep(vec![0]),
        Op::Sigmoid | Op::Softmax(_) | Op::Sqrt => Saved { outputs: vec![0], ..Saved::default() },
        Op::Mul | Op::MatMul => {
            let mut inputs = Vec::new();
            if grad(1) {
                inputs.push(0);
            }
            if grad(0) {
                inputs.push(1);
            }
            keep(inputs)
        }
        Op::Div => keep(if grad(1) { vec![0, 1] } else { vec![1] }),
        Op::Pow => Saved { inputs: vec![0, 1], outputs: vec![0], ..Saved::default() },
        Op::MaxPool(_) => Saved { inputs: vec![0], outputs: vec![], int64_output_copies: 1 },
        Op::Add
        | Op::Sub
        | Op::Neg
        | Op::Identity
        | Op::Equal
        | Op::Less
        | Op::Greater
        | Op::Not
        | Op::Where
        | Op::Range
        | Op::Expand
        | Op::Slice
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Reshape(_)
        | Op::Transpose(_)
        | Op::Resize(_)
        | Op::Shape(_)
        | Op::Gather(_)
        | Op::GatherElements(_)
        | Op::Unsqueeze(_)
        | Op::Squeeze(_)
        | Op::Flatten(_)
        | Op::Cast(_)
        | Op::Constant(_)
        | Op::ConstantOfShape(_)
        | Op::TopK(_)
        | Op::ReduceMax(_)
        | Op::Mod(_)
        | Op::NonMaxSuppression(_)
        | Op::Unsupported { .. } => Saved::default(),
    }
}

/// Whether the op's outputs are views of its first input (no new storage): libtorch's `split`,
/// `narrow`, `view`/`reshape` of a contiguous tensor, `permute`, `squeeze`, `unsqueeze`, `expand`.
pub fn is_view(op: &Op) -> bool {
    matches!(
        op,
        Op::Identity
            | Op::Split(_)
            | Op::Slice
            | Op::Reshape(_)
            | Op::Transpose(_)
            | Op::Unsqueeze(_)
            | Op::Squeeze(_)
            | Op::Flatten(_)
            | Op::Expand
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silu_halves_save_what_autograd_saves() {
        // Sigmoid keeps its result; Mul(x, sigmoid(x)) keeps both operands.
        assert_eq!(saved_for_backward(&Op::Sigmoid, &[true]).outputs, vec![0]);
        assert_eq!(saved_for_backward(&Op::Mul, &[true, true]).inputs, vec![0, 1]);
        // A frozen operand is kept only for the other's gradient.
        assert_eq!(saved_for_backward(&Op::Mul, &[true, false]).inputs, vec![1]);
        assert_eq!(saved_for_backward(&Op::Mul, &[false, false]), Saved::default());
        assert!(is_view(&Op::Slice) && !is_view(&Op::Mul));
    }
}
