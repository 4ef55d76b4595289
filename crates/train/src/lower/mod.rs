//! ONNX ops lowered to libtorch: one file per op (trivial element-wise ops share `elementwise.rs`),
//! dispatched by [`run`], which matches [`Op`] exhaustively — a new op in the IR breaks this build
//! until it is lowered here (or explicitly refused, like `NonMaxSuppression`).
//!
//! Every lowering is differentiable where ONNX's op is (tch records the autograd graph); shape
//! arithmetic of dynamic exports (`Shape`, `Gather`, `Range`, ...) runs on int64 tensors.

mod cast;
mod concat;
mod constant;
mod conv;
mod elementwise;
mod expand;
mod flatten;
mod gather;
mod max_pool;
mod range;
mod reduce_max;
mod reshape;
mod resize;
mod shape;
mod slice;
mod softmax;
mod split;
mod squeeze;
mod top_k;
mod transpose;

use headroom_onnx::Op;
use headroom_onnx::tensor::{Tensor as OnnxTensor, TensorData};
use tch::{Device, Kind, Tensor};

/// Why a lowering failed (the executor adds the node's name and op type).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Fail(pub String);

impl From<tch::TchError> for Fail {
    fn from(e: tch::TchError) -> Fail {
        Fail(crate::error::torch_message(&e.to_string()).to_string())
    }
}

impl From<String> for Fail {
    fn from(s: String) -> Fail {
        Fail(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Fail {
        Fail(s.to_string())
    }
}

/// Result of a lowering.
pub(crate) type Lowered<T = Tensor> = std::result::Result<T, Fail>;

/// The node's inputs as seen by a lowering: `None` for an omitted optional input.
pub(crate) struct Inputs<'a> {
    values: Vec<Option<&'a Tensor>>,
    device: Device,
}

impl<'a> Inputs<'a> {
    pub(crate) fn new(values: Vec<Option<&'a Tensor>>, device: Device) -> Inputs<'a> {
        Inputs { values, device }
    }

    /// Required input `i`.
    pub(crate) fn get(&self, i: usize) -> Lowered<&'a Tensor> {
        self.opt(i).ok_or_else(|| Fail(format!("input {i} is missing")))
    }

    /// Optional input `i`.
    pub(crate) fn opt(&self, i: usize) -> Option<&'a Tensor> {
        self.values.get(i).copied().flatten()
    }

    /// Number of inputs given (omitted optional ones included).
    pub(crate) fn len(&self) -> usize {
        self.values.len()
    }

    /// The device new tensors go to.
    pub(crate) fn device(&self) -> Device {
        self.device
    }

    /// Input `i` read as integers (shape-like inputs: axes, sizes, starts).
    pub(crate) fn ints(&self, i: usize) -> Lowered<Vec<i64>> {
        ints(self.get(i)?)
    }

    /// Optional input `i` read as integers.
    pub(crate) fn opt_ints(&self, i: usize) -> Lowered<Option<Vec<i64>>> {
        self.opt(i).map(ints).transpose()
    }
}

/// A tensor's values as integers, flattened.
pub(crate) fn ints(t: &Tensor) -> Lowered<Vec<i64>> {
    let flat = t.f_reshape([-1])?.f_to_kind(Kind::Int64)?.f_to_device(Device::Cpu)?;
    Ok(Vec::<i64>::try_from(&flat)?)
}

/// A tensor's values as floats, flattened.
pub(crate) fn floats(t: &Tensor) -> Lowered<Vec<f64>> {
    let flat = t.f_reshape([-1])?.f_to_kind(Kind::Double)?.f_to_device(Device::Cpu)?;
    Ok(Vec::<f64>::try_from(&flat)?)
}

/// `axis` in `-rank..rank` mapped to `0..rank` (`..=rank` when `inclusive`).
pub(crate) fn axis(axis: i64, rank: usize, inclusive: bool) -> Lowered<i64> {
    headroom_onnx::ops::normalize_axis(axis, rank, inclusive).map_err(Fail)
}

/// The rank of a tensor.
pub(crate) fn rank(t: &Tensor) -> usize {
    t.dim()
}

/// The libtorch kind for an ONNX `DataType` name (`FLOAT`, `INT64`, ...).
pub(crate) fn kind_of(name: &str) -> Lowered<Kind> {
    Ok(match name {
        "FLOAT" => Kind::Float,
        "DOUBLE" => Kind::Double,
        "FLOAT16" => Kind::Half,
        "BFLOAT16" => Kind::BFloat16,
        "INT64" => Kind::Int64,
        "INT32" => Kind::Int,
        "INT16" => Kind::Int16,
        "INT8" => Kind::Int8,
        "UINT8" => Kind::Uint8,
        "BOOL" => Kind::Bool,
        other => return Err(Fail(format!("data type {other} is not supported by the executor"))),
    })
}

/// An ONNX tensor (initializer or constant) as a libtorch tensor on `device`.
pub(crate) fn to_torch(t: &OnnxTensor, device: Device) -> Lowered {
    let dims: Vec<i64> = t.dims.iter().map(|d| *d as i64).collect();
    let flat = match &t.data {
        TensorData::F32(v) => Tensor::f_from_slice(v)?,
        TensorData::F64(v) => Tensor::f_from_slice(v)?,
        TensorData::F16(v) => {
            let halves: Vec<half::f16> = v.iter().map(|b| half::f16::from_bits(*b)).collect();
            Tensor::f_from_slice(&halves)?
        }
        TensorData::I64(v) => Tensor::f_from_slice(v)?,
        TensorData::I32(v) => Tensor::f_from_slice(v)?,
        TensorData::U8(v) => Tensor::f_from_slice(v)?,
        TensorData::I8(v) => Tensor::f_from_slice(v)?,
        TensorData::Bool(v) => Tensor::f_from_slice(v)?,
    };
    Ok(flat.f_reshape(dims)?.f_to_device(device)?)
}

/// Runs one op. Returns its outputs in order.
pub(crate) fn run(op: &Op, inputs: &Inputs<'_>, outputs: usize) -> Lowered<Vec<Tensor>> {
    use elementwise as ew;
    let one = |t: Lowered| t.map(|t| vec![t]);
    match op {
        Op::Add => one(ew::add(inputs)),
        Op::Sub => one(ew::sub(inputs)),
        Op::Mul => one(ew::mul(inputs)),
        Op::Div => one(ew::div(inputs)),
        Op::Pow => one(ew::pow(inputs)),
        Op::Sqrt => one(ew::sqrt(inputs)),
        Op::Neg => one(ew::neg(inputs)),
        Op::Sigmoid => one(ew::sigmoid(inputs)),
        Op::Identity => one(ew::identity(inputs)),
        Op::MatMul => one(ew::matmul(inputs)),
        Op::Equal => one(ew::equal(inputs)),
        Op::Less => one(ew::less(inputs)),
        Op::Greater => one(ew::greater(inputs)),
        Op::Not => one(ew::not(inputs)),
        Op::Where => one(ew::where_(inputs)),
        Op::Mod(c) => one(ew::modulo(c, inputs)),
        Op::Range => one(range::run(inputs)),
        Op::Expand => one(expand::run(inputs)),
        Op::Slice => one(slice::run(inputs)),
        Op::Conv(c) => one(conv::run(c, inputs)),
        Op::MaxPool(c) => one(max_pool::run(c, inputs, outputs)),
        Op::Concat(c) => one(concat::run(c, inputs)),
        Op::Split(c) => split::run(c, inputs),
        Op::Reshape(c) => one(reshape::run(c, inputs)),
        Op::Transpose(c) => one(transpose::run(c, inputs)),
        Op::Softmax(c) => one(softmax::run(c, inputs)),
        Op::Resize(c) => one(resize::run(c, inputs)),
        Op::Shape(c) => one(shape::run(c, inputs)),
        Op::Gather(c) => one(gather::gather(c, inputs)),
        Op::GatherElements(c) => one(gather::gather_elements(c, inputs)),
        Op::Unsqueeze(c) => one(squeeze::unsqueeze(c, inputs)),
        Op::Squeeze(c) => one(squeeze::squeeze(c, inputs)),
        Op::Flatten(c) => one(flatten::run(c, inputs)),
        Op::Cast(c) => one(cast::run(c, inputs)),
        Op::Constant(c) => one(constant::constant(c, inputs)),
        Op::ConstantOfShape(c) => one(constant::constant_of_shape(c, inputs)),
        Op::TopK(c) => top_k::run(c, inputs),
        Op::ReduceMax(c) => one(reduce_max::run(c, inputs)),
        Op::NonMaxSuppression(_) => Err(Fail(
            "NonMaxSuppression is not lowered: training and `inspect --check` use the raw head, \
             which comes before it"
                .into(),
        )),
        Op::Unsupported { op_type, domain } => Err(Fail(format!(
            "unsupported op {domain}{}{op_type}",
            if domain.is_empty() { "" } else { "::" }
        ))),
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    use tch::{Device, Tensor};

    use super::Inputs;

    /// Inputs from owned tensors (CPU).
    pub(crate) fn inputs(values: &[Option<&Tensor>]) -> Inputs<'static> {
        // SAFETY-free: tests leak the tensors to get 'static borrows.
        let leaked: Vec<Option<&'static Tensor>> =
            values.iter().map(|v| v.map(|t| &*Box::leak(Box::new(t.shallow_clone())))).collect();
        Inputs::new(leaked, Device::Cpu)
    }

    /// Flat float values.
    pub(crate) fn values(t: &Tensor) -> Vec<f32> {
        Vec::<f32>::try_from(&t.reshape([-1]).to_kind(tch::Kind::Float)).unwrap_or_default()
    }
}
