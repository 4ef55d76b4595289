//! `Reshape`: new shape from input 1 (`0` copies a dim unless `allowzero`, `-1` is inferred).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Reshape`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReshapeConfig {
    /// `0` in the shape means a zero-size dim instead of "copy" (opset 14+, default false).
    pub allowzero: bool,
}

/// Imports a `Reshape` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Reshape(ReshapeConfig { allowzero: node.attr_or::<i64>("allowzero", 0)? != 0 }))
}
