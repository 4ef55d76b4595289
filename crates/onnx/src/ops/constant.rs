//! `Constant`: a tensor held in the node (un-simplified exports). Only the `value` form is read.

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::Op;
use crate::tensor::Tensor;

/// Attributes of `Constant`.
#[derive(Debug, Clone, PartialEq)]
pub struct ConstantConfig {
    /// The value.
    pub value: Tensor,
}

/// Imports a `Constant` node (`value`, `value_int`, `value_ints`, `value_float`, `value_floats`).
pub fn import(node: &NodeContext) -> Result<Op> {
    use crate::tensor::TensorData;
    let scalar = |data| Tensor { name: String::new(), dims: vec![], data };
    let vector = |data: TensorData| Tensor { name: String::new(), dims: vec![data.len()], data };
    let value = if let Some(v) = node.attr_opt::<i64>("value_int")? {
        scalar(TensorData::I64(vec![v]))
    } else if let Some(v) = node.attr_opt::<Vec<i64>>("value_ints")? {
        vector(TensorData::I64(v))
    } else if let Some(v) = node.attr_opt::<f32>("value_float")? {
        scalar(TensorData::F32(vec![v]))
    } else if let Some(v) = node.attr_opt::<Vec<f32>>("value_floats")? {
        vector(TensorData::F32(v))
    } else {
        node.attr_tensor("value")?
    };
    Ok(Op::Constant(ConstantConfig { value }))
}
