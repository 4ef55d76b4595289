//! `Squeeze`: removes size-1 dims at `axes` (an attribute before opset 13, input 1 from 13).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Squeeze`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SqueezeConfig {
    /// Axes from the attribute (opset < 13); from 13 they come from input 1.
    pub axes: Option<Vec<i64>>,
}

/// Imports a `Squeeze` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let axes = if node.opset < 13 { node.attr_opt("axes")? } else { None };
    Ok(Op::Squeeze(SqueezeConfig { axes }))
}
