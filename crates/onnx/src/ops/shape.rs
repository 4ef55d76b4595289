//! `Shape`: the input's dims as an int64 vector (`start`/`end` from opset 15).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Shape`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShapeConfig {
    /// First dim (default 0).
    pub start: i64,
    /// One past the last dim (default: the rank).
    pub end: Option<i64>,
}

/// Imports a `Shape` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Shape(ShapeConfig { start: node.attr_or("start", 0)?, end: node.attr_opt("end")? }))
}
