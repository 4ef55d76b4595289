//! `TopK` (end-to-end heads): k from input 1, values and indices out.

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `TopK`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TopKConfig {
    /// The axis (default -1), normalised once the rank is known.
    pub axis: i64,
    /// Largest (default) or smallest elements.
    pub largest: bool,
    /// Whether the output is sorted (default true).
    pub sorted: bool,
}

/// Imports a `TopK` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::TopK(TopKConfig {
        axis: node.attr_or("axis", -1)?,
        largest: node.attr_or::<i64>("largest", 1)? != 0,
        sorted: node.attr_or::<i64>("sorted", 1)? != 0,
    }))
}
