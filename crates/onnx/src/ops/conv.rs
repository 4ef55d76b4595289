//! `Conv`: 2-D convolution (weights `[out, in/group, kh, kw]`, optional bias).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::{Op, Padding};

/// Attributes of `Conv`, opset defaults applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ConvConfig {
    /// Kernel size; empty means "from the weight's dims".
    pub kernel_shape: Vec<i64>,
    /// Strides per spatial axis (default 1).
    pub strides: Vec<i64>,
    /// Dilations per spatial axis (default 1).
    pub dilations: Vec<i64>,
    /// Padding.
    pub padding: Padding,
    /// Number of groups (default 1).
    pub group: i64,
}

/// Imports a `Conv` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let kernel_shape = node.attr_or("kernel_shape", Vec::new())?;
    let spatial = kernel_shape.len().max(2);
    Ok(Op::Conv(ConvConfig {
        strides: node.attr_or("strides", vec![1; spatial])?,
        dilations: node.attr_or("dilations", vec![1; spatial])?,
        padding: Padding::import(node, spatial)?,
        group: node.attr_or("group", 1)?,
        kernel_shape,
    }))
}
