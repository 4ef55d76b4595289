//! `Softmax` (DFL, attention). Before opset 13 it flattens to 2-D at `axis` (default 1); from 13 it
//! works on one axis (default -1).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Softmax`, opset default applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SoftmaxConfig {
    /// The axis, normalised once the rank is known.
    pub axis: i64,
    /// Opset < 13 semantics: softmax over the flattened dims `axis..`.
    pub flatten_from_axis: bool,
}

/// Imports a `Softmax` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let legacy = node.opset < 13;
    Ok(Op::Softmax(SoftmaxConfig {
        axis: node.attr_or("axis", if legacy { 1 } else { -1 })?,
        flatten_from_axis: legacy,
    }))
}
