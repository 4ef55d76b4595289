//! The typed operators: one file per op with its config struct and importer, all registered in
//! [`REGISTRY`] (one line each, with the op's arity). Import applies opset defaults once; negative
//! axes are normalised by [`Op::normalize_axes`] when shape inference knows the input rank.
//!
//! Ops without attributes (Add, Sigmoid, MatMul, ...) have no config and no file of their own.

pub mod cast;
pub mod concat;
pub mod constant;
pub mod constant_of_shape;
pub mod conv;
pub mod flatten;
pub mod gather;
pub mod gather_elements;
pub mod max_pool;
pub mod modulo;
pub mod non_max_suppression;
pub mod reduce_max;
pub mod reshape;
pub mod resize;
pub mod shape;
pub mod softmax;
pub mod split;
pub mod squeeze;
pub mod top_k;
pub mod transpose;
pub mod unsqueeze;

use crate::attr::NodeContext;
use crate::error::Result;

pub use cast::CastConfig;
pub use concat::ConcatConfig;
pub use constant::ConstantConfig;
pub use constant_of_shape::ConstantOfShapeConfig;
pub use conv::ConvConfig;
pub use flatten::FlattenConfig;
pub use gather::GatherConfig;
pub use gather_elements::GatherElementsConfig;
pub use max_pool::MaxPoolConfig;
pub use modulo::ModConfig;
pub use non_max_suppression::NonMaxSuppressionConfig;
pub use reduce_max::ReduceMaxConfig;
pub use reshape::ReshapeConfig;
pub use resize::ResizeConfig;
pub use shape::ShapeConfig;
pub use softmax::SoftmaxConfig;
pub use split::SplitConfig;
pub use squeeze::SqueezeConfig;
pub use top_k::TopKConfig;
pub use transpose::TransposeConfig;
pub use unsqueeze::UnsqueezeConfig;

/// Padding of `Conv` and `MaxPool`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub enum Padding {
    /// `pads`: all begins, then all ends (default zeros).
    Explicit(Vec<i64>),
    /// `auto_pad = SAME_UPPER`.
    SameUpper,
    /// `auto_pad = SAME_LOWER`.
    SameLower,
    /// `auto_pad = VALID`.
    Valid,
}

impl Padding {
    /// Reads `auto_pad` and `pads` of a node with `spatial` spatial axes.
    pub fn import(node: &NodeContext, spatial: usize) -> Result<Padding> {
        let auto_pad: String = node.attr_or("auto_pad", "NOTSET".to_string())?;
        match auto_pad.as_str() {
            "NOTSET" => {
                let pads: Vec<i64> = node.attr_or("pads", vec![0; 2 * spatial])?;
                if pads.len() != 2 * spatial {
                    return Err(node.error(format!(
                        "`pads` has {} values, {} expected",
                        pads.len(),
                        2 * spatial
                    )));
                }
                Ok(Padding::Explicit(pads))
            }
            "SAME_UPPER" => Ok(Padding::SameUpper),
            "SAME_LOWER" => Ok(Padding::SameLower),
            "VALID" => Ok(Padding::Valid),
            other => Err(node.error(format!("unknown auto_pad `{other}`"))),
        }
    }
}

/// One imported operator. Executors match it exhaustively, one arm per variant.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// `Add` (broadcasting).
    Add,
    /// `Sub`.
    Sub,
    /// `Mul`.
    Mul,
    /// `Div`.
    Div,
    /// `Pow`.
    Pow,
    /// `Sqrt`.
    Sqrt,
    /// `Neg`.
    Neg,
    /// `Sigmoid` (half of SiLU).
    Sigmoid,
    /// `Identity`.
    Identity,
    /// `MatMul` (attention).
    MatMul,
    /// `Equal`.
    Equal,
    /// `Less`.
    Less,
    /// `Greater`.
    Greater,
    /// `Not`.
    Not,
    /// `Where`.
    Where,
    /// `Range` (start, limit, delta).
    Range,
    /// `Expand` (broadcast to a shape).
    Expand,
    /// `Slice` (starts, ends, axes, steps as inputs).
    Slice,
    /// `Conv`.
    Conv(ConvConfig),
    /// `MaxPool`.
    MaxPool(MaxPoolConfig),
    /// `Concat`.
    Concat(ConcatConfig),
    /// `Split`.
    Split(SplitConfig),
    /// `Reshape`.
    Reshape(ReshapeConfig),
    /// `Transpose`.
    Transpose(TransposeConfig),
    /// `Softmax`.
    Softmax(SoftmaxConfig),
    /// `Resize`.
    Resize(ResizeConfig),
    /// `Shape`.
    Shape(ShapeConfig),
    /// `Gather`.
    Gather(GatherConfig),
    /// `GatherElements`.
    GatherElements(GatherElementsConfig),
    /// `Unsqueeze`.
    Unsqueeze(UnsqueezeConfig),
    /// `Squeeze`.
    Squeeze(SqueezeConfig),
    /// `Flatten`.
    Flatten(FlattenConfig),
    /// `Cast`.
    Cast(CastConfig),
    /// `Constant`.
    Constant(ConstantConfig),
    /// `ConstantOfShape`.
    ConstantOfShape(ConstantOfShapeConfig),
    /// `TopK`.
    TopK(TopKConfig),
    /// `ReduceMax`.
    ReduceMax(ReduceMaxConfig),
    /// `Mod`.
    Mod(ModConfig),
    /// `NonMaxSuppression`.
    NonMaxSuppression(NonMaxSuppressionConfig),
    /// An operator headroom does not import; [`crate::Graph::check`] reports all of them.
    Unsupported {
        /// The operator type.
        op_type: String,
        /// The operator domain.
        domain: String,
    },
}

/// Imports one node into an [`Op`].
pub type Importer = fn(&NodeContext) -> Result<Op>;

/// An operator's registration: ONNX name, allowed input and output counts, importer.
#[derive(Debug, Clone, Copy)]
pub struct Registration {
    /// ONNX `op_type` (default domain).
    pub op_type: &'static str,
    /// Minimum and maximum number of inputs (trailing empty optional inputs not counted).
    pub inputs: (usize, usize),
    /// Minimum and maximum number of outputs.
    pub outputs: (usize, usize),
    /// The importer.
    pub import: Importer,
}

const fn reg(
    op_type: &'static str,
    inputs: (usize, usize),
    outputs: (usize, usize),
    import: Importer,
) -> Registration {
    Registration { op_type, inputs, outputs, import }
}

const ANY: usize = usize::MAX;

/// Every supported operator, one line each.
pub const REGISTRY: &[Registration] = &[
    reg("Add", (2, 2), (1, 1), |_| Ok(Op::Add)),
    reg("Sub", (2, 2), (1, 1), |_| Ok(Op::Sub)),
    reg("Mul", (2, 2), (1, 1), |_| Ok(Op::Mul)),
    reg("Div", (2, 2), (1, 1), |_| Ok(Op::Div)),
    reg("Pow", (2, 2), (1, 1), |_| Ok(Op::Pow)),
    reg("Sqrt", (1, 1), (1, 1), |_| Ok(Op::Sqrt)),
    reg("Neg", (1, 1), (1, 1), |_| Ok(Op::Neg)),
    reg("Sigmoid", (1, 1), (1, 1), |_| Ok(Op::Sigmoid)),
    reg("Identity", (1, 1), (1, 1), |_| Ok(Op::Identity)),
    reg("MatMul", (2, 2), (1, 1), |_| Ok(Op::MatMul)),
    reg("Equal", (2, 2), (1, 1), |_| Ok(Op::Equal)),
    reg("Less", (2, 2), (1, 1), |_| Ok(Op::Less)),
    reg("Greater", (2, 2), (1, 1), |_| Ok(Op::Greater)),
    reg("Not", (1, 1), (1, 1), |_| Ok(Op::Not)),
    reg("Where", (3, 3), (1, 1), |_| Ok(Op::Where)),
    reg("Range", (3, 3), (1, 1), |_| Ok(Op::Range)),
    reg("Expand", (2, 2), (1, 1), |_| Ok(Op::Expand)),
    reg("Slice", (3, 5), (1, 1), |_| Ok(Op::Slice)),
    reg("Conv", (2, 3), (1, 1), conv::import),
    reg("MaxPool", (1, 1), (1, 2), max_pool::import),
    reg("Concat", (1, ANY), (1, 1), concat::import),
    reg("Split", (1, 2), (1, ANY), split::import),
    reg("Reshape", (2, 2), (1, 1), reshape::import),
    reg("Transpose", (1, 1), (1, 1), transpose::import),
    reg("Softmax", (1, 1), (1, 1), softmax::import),
    reg("Resize", (1, 4), (1, 1), resize::import),
    reg("Shape", (1, 1), (1, 1), shape::import),
    reg("Gather", (2, 2), (1, 1), gather::import),
    reg("GatherElements", (2, 2), (1, 1), gather_elements::import),
    reg("Unsqueeze", (1, 2), (1, 1), unsqueeze::import),
    reg("Squeeze", (1, 2), (1, 1), squeeze::import),
    reg("Flatten", (1, 1), (1, 1), flatten::import),
    reg("Cast", (1, 1), (1, 1), cast::import),
    reg("Constant", (0, 0), (1, 1), constant::import),
    reg("ConstantOfShape", (1, 1), (1, 1), constant_of_shape::import),
    reg("TopK", (2, 2), (2, 2), top_k::import),
    reg("ReduceMax", (1, 2), (1, 1), reduce_max::import),
    reg("Mod", (2, 2), (1, 1), modulo::import),
    reg("NonMaxSuppression", (2, 5), (1, 1), non_max_suppression::import),
];

/// Imports a node: looks it up in [`REGISTRY`], checks its arity, runs its importer. Unknown ops and
/// other domains give [`Op::Unsupported`] (reported later, all together).
pub fn import(node: &NodeContext) -> Result<Op> {
    let (op_type, domain) = (node.proto.op_type(), node.proto.domain());
    let registration = REGISTRY.iter().find(|r| r.op_type == op_type);
    let Some(registration) = registration.filter(|_| matches!(domain, "" | "ai.onnx")) else {
        return Ok(Op::Unsupported { op_type: op_type.to_string(), domain: domain.to_string() });
    };
    let check = |what: &str, n: usize, (min, max): (usize, usize)| {
        if n < min || n > max {
            let range = match (min == max, max == ANY) {
                (true, _) => format!("{min}"),
                (_, true) => format!("at least {min}"),
                _ => format!("{min} to {max}"),
            };
            return Err(node.error(format!("{n} {what}, {range} expected")));
        }
        Ok(())
    };
    check("inputs", node.input_count(), registration.inputs)?;
    check("outputs", node.proto.output.len(), registration.outputs)?;
    (registration.import)(node)
}

/// `axis` in `-rank..rank` (or `..=rank` when `inclusive`) mapped to `0..rank`.
pub fn normalize_axis(axis: i64, rank: usize, inclusive: bool) -> Result<i64, String> {
    let rank = rank as i64;
    let normalized = if axis < 0 { axis + rank } else { axis };
    if (0..rank + i64::from(inclusive)).contains(&normalized) {
        Ok(normalized)
    } else {
        Err(format!("axis {axis} is out of range for rank {rank}"))
    }
}

impl Op {
    /// The ONNX operator type of this op.
    pub fn op_type(&self) -> &str {
        match self {
            Op::Unsupported { op_type, .. } => op_type,
            other => other.registered_name(),
        }
    }

    fn registered_name(&self) -> &'static str {
        match self {
            Op::Add => "Add",
            Op::Sub => "Sub",
            Op::Mul => "Mul",
            Op::Div => "Div",
            Op::Pow => "Pow",
            Op::Sqrt => "Sqrt",
            Op::Neg => "Neg",
            Op::Sigmoid => "Sigmoid",
            Op::Identity => "Identity",
            Op::MatMul => "MatMul",
            Op::Equal => "Equal",
            Op::Less => "Less",
            Op::Greater => "Greater",
            Op::Not => "Not",
            Op::Where => "Where",
            Op::Range => "Range",
            Op::Expand => "Expand",
            Op::Slice => "Slice",
            Op::Conv(_) => "Conv",
            Op::MaxPool(_) => "MaxPool",
            Op::Concat(_) => "Concat",
            Op::Split(_) => "Split",
            Op::Reshape(_) => "Reshape",
            Op::Transpose(_) => "Transpose",
            Op::Softmax(_) => "Softmax",
            Op::Resize(_) => "Resize",
            Op::Shape(_) => "Shape",
            Op::Gather(_) => "Gather",
            Op::GatherElements(_) => "GatherElements",
            Op::Unsqueeze(_) => "Unsqueeze",
            Op::Squeeze(_) => "Squeeze",
            Op::Flatten(_) => "Flatten",
            Op::Cast(_) => "Cast",
            Op::Constant(_) => "Constant",
            Op::ConstantOfShape(_) => "ConstantOfShape",
            Op::TopK(_) => "TopK",
            Op::ReduceMax(_) => "ReduceMax",
            Op::Mod(_) => "Mod",
            Op::NonMaxSuppression(_) => "NonMaxSuppression",
            Op::Unsupported { .. } => "",
        }
    }

    /// Rewrites negative single axes to `0..rank`, given the rank of input 0. Ops whose axes come
    /// from input tensors are normalised where those are read (shape inference, executors).
    pub fn normalize_axes(&mut self, rank: usize) -> Result<(), String> {
        match self {
            Op::Concat(c) => c.axis = normalize_axis(c.axis, rank, false)?,
            Op::Split(c) => c.axis = normalize_axis(c.axis, rank, false)?,
            Op::Softmax(c) => c.axis = normalize_axis(c.axis, rank, false)?,
            Op::Gather(c) => c.axis = normalize_axis(c.axis, rank, false)?,
            Op::GatherElements(c) => c.axis = normalize_axis(c.axis, rank, false)?,
            Op::TopK(c) => c.axis = normalize_axis(c.axis, rank, false)?,
            Op::Flatten(c) => c.axis = normalize_axis(c.axis, rank, true)?,
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};

    fn node(op_type: &str, inputs: usize, attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            name: Some(format!("/model.1/{op_type}")),
            op_type: Some(op_type.into()),
            input: (0..inputs).map(|i| format!("x{i}")).collect(),
            output: vec!["y".into()],
            attribute: attrs,
            ..Default::default()
        }
    }

    fn int(name: &str, value: i64) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(value),
            ..Default::default()
        }
    }

    fn import_at(proto: &NodeProto, opset: i64) -> Result<Op> {
        import(&NodeContext { proto, opset, index: 0 })
    }

    #[test]
    fn opset_defaults_are_applied_at_import() {
        let softmax = node("Softmax", 1, vec![]);
        assert!(matches!(
            import_at(&softmax, 11),
            Ok(Op::Softmax(SoftmaxConfig { axis: 1, flatten_from_axis: true }))
        ));
        assert!(matches!(
            import_at(&softmax, 13),
            Ok(Op::Softmax(SoftmaxConfig { axis: -1, flatten_from_axis: false }))
        ));
        let Ok(Op::Conv(conv)) = import_at(&node("Conv", 2, vec![]), 17) else { panic!("conv") };
        assert_eq!(
            (conv.group, conv.strides.clone(), conv.padding.clone()),
            (1, vec![1, 1], Padding::Explicit(vec![0; 4]))
        );
    }

    #[test]
    fn arity_is_checked_centrally_and_names_the_node() {
        let err = import_at(&node("Conv", 1, vec![]), 17).expect_err("arity").to_string();
        assert!(
            err.contains("/model.1/Conv")
                && err.contains("1 inputs, 2 to 3 expected")
                && err.contains("opset 17"),
            "{err}"
        );
    }

    #[test]
    fn unknown_ops_and_foreign_domains_are_unsupported() {
        assert!(matches!(import_at(&node("Swish", 1, vec![]), 17), Ok(Op::Unsupported { .. })));
        let mut foreign = node("Add", 2, vec![]);
        foreign.domain = Some("com.microsoft".into());
        assert!(
            matches!(import_at(&foreign, 17), Ok(Op::Unsupported { domain, .. }) if domain == "com.microsoft")
        );
    }

    #[test]
    fn negative_axes_are_normalised_with_the_rank() {
        let Ok(mut op) = import_at(&node("Concat", 2, vec![int("axis", -1)]), 17) else { panic!("concat") };
        op.normalize_axes(3).expect("in range");
        assert_eq!(op, Op::Concat(ConcatConfig { axis: 2 }));
        assert!(normalize_axis(-4, 3, false).is_err());
        assert_eq!(normalize_axis(3, 3, true), Ok(3));
    }

    #[test]
    fn resize_attributes_the_ir_does_not_represent_are_refused_at_import() {
        // onnx test_resize_downsample_scales_linear_antialias: computed without antialias before.
        for attr in ["antialias", "exclude_outside"] {
            let err = import_at(&node("Resize", 3, vec![int(attr, 1)]), 18).expect_err(attr).to_string();
            assert!(err.contains(attr) && err.contains("not supported"), "{err}");
        }
        assert!(import_at(&node("Resize", 3, vec![int("antialias", 0)]), 18).is_ok());
    }

    #[test]
    fn every_registered_op_maps_back_to_its_name() {
        for registration in REGISTRY {
            let mut proto = node(registration.op_type, registration.inputs.0, vec![]);
            proto.output = (0..registration.outputs.0).map(|i| format!("y{i}")).collect();
            if let Ok(op) = import_at(&proto, 17) {
                assert_eq!(op.op_type(), registration.op_type);
            }
        }
    }
}
