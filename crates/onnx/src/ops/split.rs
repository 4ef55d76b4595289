//! `Split`: splits along `axis` into parts given by the `split` input (opset 13+) or attribute
//! (before 13), or into equal parts (`num_outputs` from opset 18, else the output count).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Split`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SplitConfig {
    /// The axis (default 0), normalised once the rank is known.
    pub axis: i64,
    /// Part sizes from the attribute (opset < 13); from 13 they come from input 1 if present.
    pub split: Option<Vec<i64>>,
    /// Number of parts (the node's output count).
    pub parts: usize,
}

/// Imports a `Split` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let split = if node.opset < 13 { node.attr_opt("split")? } else { None };
    Ok(Op::Split(SplitConfig { axis: node.attr_or("axis", 0)?, split, parts: node.proto.output.len() }))
}
