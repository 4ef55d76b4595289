//! Typed attribute access for importers: `node.attr::<i64>("axis")?`, `node.attr_or("group", 1)?`.
//! Every error names the node, its op type and the model's opset.

use crate::error::{Error, Result};
use crate::proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};
use crate::tensor::{self, Tensor};

/// A value an attribute can hold.
pub trait FromAttr: Sized {
    /// The ONNX attribute type it reads, for error messages.
    const KIND: AttributeType;
    /// The value, if `attr` holds this kind.
    fn from_attr(attr: &AttributeProto) -> Option<Self>;
}

impl FromAttr for i64 {
    const KIND: AttributeType = AttributeType::Int;
    fn from_attr(attr: &AttributeProto) -> Option<Self> {
        attr.i
    }
}

impl FromAttr for f32 {
    const KIND: AttributeType = AttributeType::Float;
    fn from_attr(attr: &AttributeProto) -> Option<Self> {
        attr.f
    }
}

impl FromAttr for String {
    const KIND: AttributeType = AttributeType::String;
    fn from_attr(attr: &AttributeProto) -> Option<Self> {
        attr.s.as_ref().map(|s| String::from_utf8_lossy(s).into_owned())
    }
}

impl FromAttr for Vec<i64> {
    const KIND: AttributeType = AttributeType::Ints;
    fn from_attr(attr: &AttributeProto) -> Option<Self> {
        Some(attr.ints.clone())
    }
}

impl FromAttr for Vec<f32> {
    const KIND: AttributeType = AttributeType::Floats;
    fn from_attr(attr: &AttributeProto) -> Option<Self> {
        Some(attr.floats.clone())
    }
}

impl FromAttr for crate::proto::TensorProto {
    const KIND: AttributeType = AttributeType::Tensor;
    fn from_attr(attr: &AttributeProto) -> Option<Self> {
        attr.t.clone()
    }
}

/// One node seen by its importer: the proto, the model's opset and helpers.
#[derive(Debug, Clone, Copy)]
pub struct NodeContext<'a> {
    /// The node.
    pub proto: &'a NodeProto,
    /// The model's default-domain opset.
    pub opset: i64,
    /// Position in the graph (names nodes that have no name).
    pub index: usize,
}

impl<'a> NodeContext<'a> {
    /// The node's name, or `#index` when the export left it empty.
    pub fn name(&self) -> String {
        match self.proto.name() {
            "" => format!("#{}", self.index),
            name => name.to_string(),
        }
    }

    /// An [`Error::Node`] for this node.
    pub fn error(&self, reason: impl Into<String>) -> Error {
        Error::Node {
            node: self.name(),
            op_type: self.proto.op_type().to_string(),
            opset: self.opset,
            reason: reason.into(),
        }
    }

    fn find(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name() == name)
    }

    /// The attribute `name`, or `None` when absent; an error when present with another type.
    pub fn attr_opt<T: FromAttr>(&self, name: &str) -> Result<Option<T>> {
        let Some(attr) = self.find(name) else { return Ok(None) };
        let found = AttributeType::try_from(attr.r#type.unwrap_or(0)).unwrap_or(AttributeType::Undefined);
        // Old exporters leave `type` unset; accept the value when its field is present.
        if found != T::KIND && found != AttributeType::Undefined {
            return Err(self.error(format!(
                "attribute `{name}` is {}, expected {}",
                found.as_str_name(),
                T::KIND.as_str_name()
            )));
        }
        T::from_attr(attr)
            .map(Some)
            .ok_or_else(|| self.error(format!("attribute `{name}` has no {} value", T::KIND.as_str_name())))
    }

    /// The required attribute `name`.
    pub fn attr<T: FromAttr>(&self, name: &str) -> Result<T> {
        self.attr_opt(name)?.ok_or_else(|| self.error(format!("missing attribute `{name}`")))
    }

    /// The attribute `name`, or `default` when absent (the opset's default, applied here once).
    pub fn attr_or<T: FromAttr>(&self, name: &str, default: T) -> Result<T> {
        Ok(self.attr_opt(name)?.unwrap_or(default))
    }

    /// A tensor attribute, decoded.
    pub fn attr_tensor(&self, name: &str) -> Result<Tensor> {
        let proto: crate::proto::TensorProto = self.attr(name)?;
        tensor::decode(&proto, None).map_err(|reason| self.error(format!("attribute `{name}`: {reason}")))
    }

    /// Number of inputs, counting empty optional ones in the middle but not trailing empty ones.
    pub fn input_count(&self) -> usize {
        self.proto.input.iter().rposition(|i| !i.is_empty()).map_or(0, |p| p + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeProto {
        NodeProto {
            name: Some("/model.0/conv/Conv".into()),
            op_type: Some("Conv".into()),
            attribute: vec![AttributeProto {
                name: Some("group".into()),
                r#type: Some(AttributeType::Int as i32),
                i: Some(2),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn typed_attributes_and_errors_name_the_node() {
        let proto = node();
        let ctx = NodeContext { proto: &proto, opset: 17, index: 0 };
        assert_eq!(ctx.attr::<i64>("group").ok(), Some(2));
        assert_eq!(ctx.attr_or::<i64>("missing", 5).ok(), Some(5));
        let wrong = ctx.attr::<Vec<i64>>("group").expect_err("wrong type").to_string();
        assert!(
            wrong.contains("/model.0/conv/Conv") && wrong.contains("Conv") && wrong.contains("17"),
            "{wrong}"
        );
        let missing = ctx.attr::<i64>("axis").expect_err("missing").to_string();
        assert!(missing.contains("missing attribute `axis`"), "{missing}");
    }
}
