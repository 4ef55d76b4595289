//! `Cast`: converts to the element type `to`.

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;
use crate::proto::tensor_proto::DataType;

/// Attributes of `Cast`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CastConfig {
    /// The target type, as ONNX's `TensorProto.DataType` name (`FLOAT`, `INT64`, ...).
    pub to: String,
}

/// Imports a `Cast` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let to: i64 = node.attr("to")?;
    let to = i32::try_from(to)
        .ok()
        .and_then(|t| DataType::try_from(t).ok())
        .ok_or_else(|| node.error(format!("unknown target type {to}")))?;
    Ok(Op::Cast(CastConfig { to: to.as_str_name().to_string() }))
}
