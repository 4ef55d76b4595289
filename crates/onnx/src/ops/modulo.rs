//! `Mod` (end-to-end heads: class index from a flat top-k index).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;

/// Attributes of `Mod`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModConfig {
    /// C `fmod` semantics (sign of the dividend) instead of Python's (default false).
    pub fmod: bool,
}

/// Imports a `Mod` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    Ok(Op::Mod(ModConfig { fmod: node.attr_or::<i64>("fmod", 0)? != 0 }))
}
