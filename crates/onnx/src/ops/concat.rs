//! `Concat`: Concatenates its inputs along `axis` (required).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Concat`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConcatConfig {
    /// The axis, normalised to `0..rank` once the input rank is known.
    pub axis: i64,
}

/// Imports a `Concat` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Concat(ConcatConfig { axis: node.attr("axis")? }))
}
