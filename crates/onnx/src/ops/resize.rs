//! `Resize` (the neck's nearest 2x upsample). Inputs: X, roi, scales, sizes (opset 11+).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Resize`, opset defaults applied.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResizeConfig {
    /// `nearest`, `linear` or `cubic`.
    pub mode: String,
    /// How output coordinates map to input ones (default `half_pixel`).
    pub coordinate_transformation_mode: String,
    /// Rounding for `nearest` (default `round_prefer_floor`).
    pub nearest_mode: String,
    /// Cubic coefficient (default -0.75).
    pub cubic_coeff_a: f32,
}

/// Imports a `Resize` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let mode: String = node.attr_or("mode", "nearest".to_string())?;
    if !matches!(mode.as_str(), "nearest" | "linear" | "cubic") {
        return Err(node.error(format!("unknown mode `{mode}`")));
    }
    Ok(Op::Resize(ResizeConfig {
        mode,
        coordinate_transformation_mode: node
            .attr_or("coordinate_transformation_mode", "half_pixel".to_string())?,
        nearest_mode: node.attr_or("nearest_mode", "round_prefer_floor".to_string())?,
        cubic_coeff_a: node.attr_or("cubic_coeff_a", -0.75)?,
    }))
}
