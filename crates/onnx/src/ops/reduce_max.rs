//! `ReduceMax`: `axes` an attribute before opset 18, input 1 from 18.

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `ReduceMax`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ReduceMaxConfig {
    /// Axes from the attribute (opset < 18); from 18 they come from input 1. None: all axes.
    pub axes: Option<Vec<i64>>,
    /// Keep reduced dims as size 1 (default true).
    pub keepdims: bool,
    /// With no axes, do nothing instead of reducing all (opset 18+).
    pub noop_with_empty_axes: bool,
}

/// Imports a `ReduceMax` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let axes = if node.opset < 18 { node.attr_opt("axes")? } else { None };
    Ok(Op::ReduceMax(ReduceMaxConfig {
        axes,
        keepdims: node.attr_or::<i64>("keepdims", 1)? != 0,
        noop_with_empty_axes: node.attr_or::<i64>("noop_with_empty_axes", 0)? != 0,
    }))
}
