//! `Gather`: Gathers slices of the data along `axis` (default 0).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Gather`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GatherConfig {
    /// The axis, normalised to `0..rank` once the input rank is known.
    pub axis: i64,
}

/// Imports a `Gather` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Gather(GatherConfig { axis: node.attr_or("axis", 0)? }))
}
