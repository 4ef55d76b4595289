//! The one error type of headroom-onnx: what went wrong, in which file, at which node.

use std::path::PathBuf;

use crate::metadata::MetadataError;

/// An unsupported operator found by [`crate::Graph::check`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UnsupportedOp {
    /// The node's name (or `#index` when it has none).
    pub node: String,
    /// The operator type.
    pub op_type: String,
    /// The operator domain (`""` is the default ONNX domain).
    pub domain: String,
}

impl std::fmt::Display for UnsupportedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.domain.as_str() {
            "" | "ai.onnx" => write!(f, "{} (node `{}`)", self.op_type, self.node),
            domain => write!(f, "{domain}::{} (node `{}`)", self.op_type, self.node),
        }
    }
}

/// The unsupported operators in a line or two: counted by type, the first node of each named.
fn list(ops: &[UnsupportedOp]) -> String {
    let mut kinds: Vec<(String, usize, &str)> = Vec::new();
    for op in ops {
        let kind = match op.domain.as_str() {
            "" | "ai.onnx" => op.op_type.clone(),
            domain => format!("{domain}::{}", op.op_type),
        };
        match kinds.iter_mut().find(|(k, _, _)| *k == kind) {
            Some((_, n, _)) => *n += 1,
            None => kinds.push((kind, 1, op.node.as_str())),
        }
    }
    kinds
        .iter()
        .map(|(kind, n, first)| format!("{n} {kind} (first: node `{first}`)"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether every unsupported operator is a `QuantizeLinear` or `DequantizeLinear`: an INT8 export.
pub(crate) fn all_qdq(ops: &[UnsupportedOp]) -> bool {
    !ops.is_empty()
        && ops.iter().all(|op| {
            matches!(op.domain.as_str(), "" | "ai.onnx")
                && matches!(op.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear")
        })
}

/// The FP32 file an export `M.int8.onnx` or `M.fp16.onnx` came from: `M.onnx` (by `headroom
/// export`'s naming), or "the FP32 file it came from" for another name.
pub fn fp32_source(path: &std::path::Path) -> String {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.strip_suffix(".int8.onnx").or_else(|| name.strip_suffix(".fp16.onnx")) {
        Some(stem) => format!("the FP32 file it came from ({stem}.onnx)"),
        None => "the FP32 file it came from".to_string(),
    }
}

/// Everything that can go wrong reading an ONNX model.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The bytes are not an ONNX `ModelProto`, or the file is cut short.
    #[error("{} is not an ONNX model or is truncated: {reason}", path.display())]
    NotOnnx {
        /// The file.
        path: PathBuf,
        /// What the decoder said.
        reason: String,
    },
    /// The model's default-domain opset is outside what headroom imports.
    #[error(
        "{}: opset {found} is not supported (headroom reads opsets {min} to {max}); \
         re-export with `opset={max}` or lower",
        path.display()
    )]
    Opset {
        /// The file.
        path: PathBuf,
        /// The model's opset (0 when it declares none).
        found: i64,
        /// Lowest supported.
        min: i64,
        /// Highest supported.
        max: i64,
    },
    /// Operators the importer does not know, all of them.
    #[error("{}: {} unsupported operator(s): {}", path.display(), ops.len(), list(ops))]
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Every unsupported node.
        ops: Vec<UnsupportedOp>,
    },
    /// An INT8 export (QuantizeLinear/DequantizeLinear pairs), which headroom runs in ONNX Runtime
    /// and shows but does not train.
    #[error(
        "{}: {nodes} QuantizeLinear/DequantizeLinear nodes: this is an INT8 export; train {}",
        path.display(),
        fp32_source(path)
    )]
    Quantized {
        /// The file.
        path: PathBuf,
        /// The Q/DQ nodes.
        nodes: usize,
    },
    /// A node is malformed: wrong arity, missing or mistyped attribute, bad value.
    #[error("node `{node}` ({op_type}, opset {opset}): {reason}")]
    Node {
        /// The node's name.
        node: String,
        /// The operator type.
        op_type: String,
        /// The model's opset.
        opset: i64,
        /// What is wrong.
        reason: String,
    },
    /// A node reads a tensor that no initializer, graph input or earlier node provides.
    #[error(
        "{}: node `{node}` ({op_type}) reads `{input}`, which no initializer, graph input or \
         earlier node provides",
        path.display()
    )]
    MissingInput {
        /// The file.
        path: PathBuf,
        /// The node.
        node: String,
        /// Its operator type.
        op_type: String,
        /// The missing tensor.
        input: String,
    },
    /// An initializer cannot be decoded (size mismatch, unknown type, missing external file).
    #[error("{}: initializer `{name}`: {reason}", path.display())]
    Initializer {
        /// The model file.
        path: PathBuf,
        /// The initializer.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// Shape inference found inconsistent shapes.
    #[error("node `{node}` ({op_type}): shape inference: {reason}")]
    Shape {
        /// The node.
        node: String,
        /// Its operator type.
        op_type: String,
        /// What is wrong.
        reason: String,
    },
    /// The metadata cannot be parsed.
    #[error("{}: {source}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: MetadataError,
    },
    /// The graph is valid ONNX but not an Ultralytics-style detector.
    #[error("{}: not a YOLO detector: {reason}", path.display())]
    NotDetector {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A training split that the model does not allow.
    #[error("{}: cannot train with `{spec}`: {reason}", path.display())]
    Partition {
        /// The file.
        path: PathBuf,
        /// The requested split (`head`, `neck+head`, `freeze=10`).
        spec: String,
        /// Why, with the valid choices.
        reason: String,
    },
    /// New weights cannot be written into the model.
    #[error("{}: writing weights: {reason}", path.display())]
    WriteBack {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A model cannot be exported (float16 conversion, quantization).
    #[error("{}: export: {reason}", path.display())]
    Export {
        /// The model file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A TensorRT calibration cache cannot be read.
    #[error("calibration cache, line {line}: {reason}")]
    CalibrationCache {
        /// The 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
