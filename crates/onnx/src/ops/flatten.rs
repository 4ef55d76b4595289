//! `Flatten`: Flattens to 2-D at `axis` (default 1; may equal the rank).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Flatten`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlattenConfig {
    /// The axis, normalised to `0..rank` once the input rank is known.
    pub axis: i64,
}

/// Imports a `Flatten` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Flatten(FlattenConfig { axis: node.attr_or("axis", 1)? }))
}
