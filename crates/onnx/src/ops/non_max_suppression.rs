//! `NonMaxSuppression` (exports with `nms=True`). Inference only: training uses the raw head.

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `NonMaxSuppression`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NonMaxSuppressionConfig {
    /// Boxes are `[cx, cy, w, h]` (1) or `[y1, x1, y2, x2]` (0, default).
    pub center_point_box: bool,
}

/// Imports a `NonMaxSuppression` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::NonMaxSuppression(NonMaxSuppressionConfig {
        center_point_box: node.attr_or::<i64>("center_point_box", 0)? != 0,
    }))
}
