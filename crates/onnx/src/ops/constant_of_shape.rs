//! `ConstantOfShape`: a tensor of the shape in input 0, filled with `value` (default float 0).

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;
use crate::tensor::{Tensor, TensorData};

/// Attributes of `ConstantOfShape`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantOfShapeConfig {
    /// The one-element fill value.
    pub value: Tensor,
}

/// Imports a `ConstantOfShape` node.
pub fn import(node: &NodeContext) -> Result<Op> {
    let value = match node.attr_opt::<crate::proto::TensorProto>("value")? {
        Some(_) => node.attr_tensor("value")?,
        None => Tensor { name: String::new(), dims: vec![1], data: TensorData::F32(vec![0.0]) },
    };
    if value.data.len() != 1 {
        return Err(node.error(format!("`value` must hold one element, not {}", value.data.len())));
    }
    Ok(Op::ConstantOfShape(ConstantOfShapeConfig { value }))
}
