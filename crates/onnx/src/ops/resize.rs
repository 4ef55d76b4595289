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
    // Attributes the IR does not represent: refused here rather than ignored (each changes the
    // output). `exclude_outside` and `extrapolation_value` only matter for modes never lowered,
    // but a model that sets them is not one headroom was checked against.
    if node.attr_or::<i64>("antialias", 0)? != 0 {
        return Err(node.error("antialias 1 is not supported"));
    }
    if node.attr_opt::<Vec<i64>>("axes")?.is_some() {
        return Err(node.error("the `axes` attribute is not supported (scales/sizes for every axis)"));
    }
    let policy: String = node.attr_or("keep_aspect_ratio_policy", "stretch".to_string())?;
    if policy != "stretch" {
        return Err(node.error(format!("keep_aspect_ratio_policy `{policy}` is not supported")));
    }
    if node.attr_or::<i64>("exclude_outside", 0)? != 0 {
        return Err(node.error("exclude_outside 1 is not supported"));
    }
    Ok(Op::Resize(ResizeConfig {
        mode,
        coordinate_transformation_mode: node
            .attr_or("coordinate_transformation_mode", "half_pixel".to_string())?,
        nearest_mode: node.attr_or("nearest_mode", "round_prefer_floor".to_string())?,
        cubic_coeff_a: node.attr_or("cubic_coeff_a", -0.75)?,
    }))
}
