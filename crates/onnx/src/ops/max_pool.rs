//! `MaxPool` (SPPF uses 5x5, stride 1, pad 2).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::{Op, Padding};

/// Attributes of `MaxPool`, opset defaults applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MaxPoolConfig {
    /// Window size (required).
    pub kernel_shape: Vec<i64>,
    /// Strides (default 1).
    pub strides: Vec<i64>,
    /// Dilations (default 1).
    pub dilations: Vec<i64>,
    /// Padding.
    pub padding: Padding,
    /// Round output sizes up instead of down.
    pub ceil_mode: bool,
}

/// Imports a `MaxPool` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let kernel_shape: Vec<i64> = node.attr("kernel_shape")?;
    let spatial = kernel_shape.len();
    if node.attr_or::<i64>("storage_order", 0)? != 0 {
        return Err(node.error("storage_order 1 (column-major indices) is not supported"));
    }
    Ok(Op::MaxPool(MaxPoolConfig {
        strides: node.attr_or("strides", vec![1; spatial])?,
        dilations: node.attr_or("dilations", vec![1; spatial])?,
        padding: Padding::import(node, spatial)?,
        ceil_mode: node.attr_or::<i64>("ceil_mode", 0)? != 0,
        kernel_shape,
    }))
}
