//! Element types for the fp16 conversion: the type of every tensor of a graph, and how each operator
//! reads its inputs (which float inputs follow the node's precision, which ONNX defines as float32
//! only, and which may be of any type).

use std::collections::HashMap;

use crate::attr::NodeContext;
use crate::error::Result;
use crate::ops::{self, Op};
use crate::proto::{GraphProto, NodeProto, ValueInfoProto, tensor_proto::DataType, type_proto};
use crate::tensor::TensorData;

/// `TensorProto.DataType.FLOAT`.
pub const FLOAT: i32 = DataType::Float as i32;
/// `TensorProto.DataType.FLOAT16`.
pub const FLOAT16: i32 = DataType::Float16 as i32;
const INT64: i32 = DataType::Int64 as i32;
const BOOL: i32 = DataType::Bool as i32;

/// How a node reads one of its inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A value computed with: float16 when the node computes in float16, float32 otherwise.
    Compute,
    /// A float input the ONNX spec defines as float32 only (Resize `scales`).
    Float32,
    /// Any element type is accepted and the values are not computed with (Shape's input, Cast's
    /// input, Resize `roi`, whose type is independent of the data's).
    AnyType,
}

/// How `op` reads its input `index`.
pub fn input_role(op: &Op, index: usize) -> Role {
    match op {
        Op::Resize(_) => match index {
            1 => Role::AnyType,
            2 => Role::Float32,
            _ => Role::Compute,
        },
        Op::Shape(_) | Op::Cast(_) => Role::AnyType,
        Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Div
        | Op::Pow
        | Op::Sqrt
        | Op::Neg
        | Op::Sigmoid
        | Op::Identity
        | Op::MatMul
        | Op::Equal
        | Op::Less
        | Op::Greater
        | Op::Not
        | Op::Where
        | Op::Range
        | Op::Expand
        | Op::Slice
        | Op::Conv(_)
        | Op::MaxPool(_)
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Reshape(_)
        | Op::Transpose(_)
        | Op::Softmax(_)
        | Op::Gather(_)
        | Op::GatherElements(_)
        | Op::Unsqueeze(_)
        | Op::Squeeze(_)
        | Op::Flatten(_)
        | Op::Constant(_)
        | Op::ConstantOfShape(_)
        | Op::TopK(_)
        | Op::ReduceMax(_)
        | Op::Mod(_)
        | Op::NonMaxSuppression(_)
        | Op::Unsupported { .. } => Role::Compute,
    }
}

fn data_type(data: &TensorData) -> i32 {
    let dtype = match data {
        TensorData::F32(_) => DataType::Float,
        TensorData::F64(_) => DataType::Double,
        TensorData::F16(_) => DataType::Float16,
        TensorData::I64(_) => DataType::Int64,
        TensorData::I32(_) => DataType::Int32,
        TensorData::U8(_) => DataType::Uint8,
        TensorData::I8(_) => DataType::Int8,
        TensorData::Bool(_) => DataType::Bool,
    };
    dtype as i32
}

/// The element types of `op`'s outputs, given the types of its inputs (`None`: unknown).
fn output_types(op: &Op, outputs: usize, input: impl Fn(usize) -> Option<i32>) -> Vec<Option<i32>> {
    let first = input(0);
    let types = match op {
        Op::Where => vec![input(1)],
        Op::Equal | Op::Less | Op::Greater | Op::Not => vec![Some(BOOL)],
        Op::Shape(_) | Op::NonMaxSuppression(_) => vec![Some(INT64)],
        Op::MaxPool(_) | Op::TopK(_) => vec![first, Some(INT64)],
        Op::Cast(c) => vec![DataType::from_str_name(&c.to).map(|d| d as i32)],
        Op::Constant(c) => vec![Some(data_type(&c.value.data))],
        Op::ConstantOfShape(c) => vec![Some(data_type(&c.value.data))],
        Op::Unsupported { .. } => vec![],
        Op::Add
        | Op::Sub
        | Op::Mul
        | Op::Div
        | Op::Pow
        | Op::Sqrt
        | Op::Neg
        | Op::Sigmoid
        | Op::Identity
        | Op::MatMul
        | Op::Range
        | Op::Expand
        | Op::Slice
        | Op::Conv(_)
        | Op::Concat(_)
        | Op::Split(_)
        | Op::Reshape(_)
        | Op::Transpose(_)
        | Op::Softmax(_)
        | Op::Resize(_)
        | Op::Gather(_)
        | Op::GatherElements(_)
        | Op::Unsqueeze(_)
        | Op::Squeeze(_)
        | Op::Flatten(_)
        | Op::ReduceMax(_)
        | Op::Mod(_) => vec![first; outputs],
    };
    (0..outputs).map(|i| types.get(i).copied().flatten()).collect()
}

/// The typed operator of every node of `graph`, in node order.
pub fn import_ops(graph: &GraphProto, opset: i64) -> Result<Vec<Op>> {
    graph
        .node
        .iter()
        .enumerate()
        .map(|(index, proto)| ops::import(&NodeContext { proto, opset, index }))
        .collect()
}

/// The declared element type of a value info (`None` when it declares none).
pub fn declared_type(info: &ValueInfoProto) -> Option<i32> {
    match info.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) => t.elem_type,
        _ => None,
    }
}

/// Sets the declared element type of a tensor value info (nothing for other kinds).
pub fn set_declared_type(info: &mut ValueInfoProto, elem_type: i32) {
    if let Some(type_proto::Value::TensorType(t)) = info.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.elem_type = Some(elem_type);
    }
}

/// The element type of every tensor: graph inputs and initializers as declared, node outputs
/// inferred from their op (the declared `value_info` only where the op says nothing).
pub fn element_types(graph: &GraphProto, ops: &[Op]) -> HashMap<String, i32> {
    let mut types: HashMap<String, i32> = HashMap::new();
    for info in &graph.value_info {
        if let Some(t) = declared_type(info) {
            types.insert(info.name().to_string(), t);
        }
    }
    for info in &graph.input {
        if let Some(t) = declared_type(info) {
            types.insert(info.name().to_string(), t);
        }
    }
    for init in &graph.initializer {
        types.insert(init.name().to_string(), init.data_type());
    }
    for (node, op) in graph.node.iter().zip(ops) {
        let outputs = output_types(op, node.output.len(), |i| input_type(&types, node, i));
        for (name, t) in node.output.iter().zip(outputs) {
            if let Some(t) = t {
                types.insert(name.clone(), t);
            }
        }
    }
    types
}

/// The element type of `node`'s input `index` (`None` when omitted or unknown).
pub fn input_type(types: &HashMap<String, i32>, node: &NodeProto, index: usize) -> Option<i32> {
    node.input.get(index).filter(|n| !n.is_empty()).and_then(|n| types.get(n).copied())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::{CastConfig, ResizeConfig};

    #[test]
    fn resize_scales_are_float32_only_and_roi_any_type() {
        let resize = Op::Resize(ResizeConfig {
            mode: "nearest".into(),
            coordinate_transformation_mode: "asymmetric".into(),
            nearest_mode: "floor".into(),
            cubic_coeff_a: -0.75,
        });
        let roles: Vec<Role> = (0..3).map(|i| input_role(&resize, i)).collect();
        assert_eq!(roles, vec![Role::Compute, Role::AnyType, Role::Float32]);
        assert_eq!(input_role(&Op::Cast(CastConfig { to: "FLOAT".into() }), 0), Role::AnyType);
        assert_eq!(input_role(&Op::Add, 1), Role::Compute);
    }

    #[test]
    fn output_types_follow_the_op() {
        let float = |_| Some(FLOAT);
        assert_eq!(output_types(&Op::Add, 1, float), vec![Some(FLOAT)]);
        assert_eq!(output_types(&Op::Equal, 1, float), vec![Some(BOOL)]);
        let cast = Op::Cast(CastConfig { to: "FLOAT16".into() });
        assert_eq!(output_types(&cast, 1, float), vec![Some(FLOAT16)]);
        let where_types = output_types(&Op::Where, 1, |i| Some(if i == 0 { BOOL } else { FLOAT16 }));
        assert_eq!(where_types, vec![Some(FLOAT16)]);
    }
}
