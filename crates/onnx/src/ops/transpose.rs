//! `Transpose`: permutes axes (`perm`, default reversed).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Transpose`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TransposeConfig {
    /// The permutation; `None` reverses the axes.
    pub perm: Option<Vec<i64>>,
}

/// Imports a `Transpose` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Transpose(TransposeConfig { perm: node.attr_opt("perm")? }))
}
