//! `GatherElements`: Gathers elements along `axis` (default 0) by an index tensor of the data's rank.

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `GatherElements`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GatherElementsConfig {
    /// The axis, normalised to `0..rank` once the input rank is known.
    pub axis: i64,
}

/// Imports a `GatherElements` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::GatherElements(GatherElementsConfig { axis: node.attr_or("axis", 0)? }))
}
