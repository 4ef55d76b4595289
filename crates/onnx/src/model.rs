//! Loading a model file: decode, opset check, import, check ops and references, then weights.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost::Message;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::infer::infer_shapes;
use crate::metadata::ModelMetadata;
use crate::proto::ModelProto;

/// Lowest default-domain opset headroom imports.
pub const MIN_OPSET: i64 = 11;
/// Highest default-domain opset headroom imports.
pub const MAX_OPSET: i64 = 22;

/// A loaded ONNX model: the decoded protobuf (kept for write-back), its typed graph and metadata.
#[derive(Debug, Clone)]
pub struct Model {
    /// The file.
    pub path: PathBuf,
    /// The protobuf as decoded (initializers included).
    pub proto: ModelProto,
    /// The default-domain opset.
    pub opset: i64,
    /// The typed graph, initializers decoded and shapes inferred.
    pub graph: Graph,
    /// The parsed Ultralytics metadata.
    pub metadata: ModelMetadata,
    /// All `metadata_props` as written.
    pub metadata_props: Vec<(String, String)>,
}

impl Model {
    /// Reads and loads `path`: see [`Model::from_bytes`].
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        let path = path.as_ref();
        if path.is_dir() {
            let source = std::io::Error::other("is a folder, not an ONNX model file");
            return Err(Error::Io { path: path.to_path_buf(), source });
        }
        let bytes = std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Model::from_bytes(&bytes, path)
    }

    /// Decodes `bytes` (read from `path`, which names errors and anchors external data), checks the
    /// opset, imports every node, reports all unsupported ops at once and any dangling input, and only
    /// then decodes the initializers and infers shapes.
    pub fn from_bytes(bytes: &[u8], path: &Path) -> Result<Model> {
        let proto = decode(bytes, path)?;
        Model::from_proto(proto, path)
    }

    /// Loads an already decoded model (see [`Model::from_bytes`]).
    pub fn from_proto(proto: ModelProto, path: &Path) -> Result<Model> {
        let opset = opset(&proto, path)?;
        let graph_proto = proto.graph.as_ref().ok_or_else(|| not_onnx(path, "no graph"))?;
        let mut graph = Graph::import(graph_proto, opset, path)?;
        match graph.check() {
            Err(Error::Unsupported { path, ops }) if crate::error::all_qdq(&ops) => {
                return Err(Error::Quantized { path, nodes: ops.len() });
            }
            Err(Error::Unsupported { path, ops }) => {
                return Err(unsupported_or_not_a_detector(&proto, &graph, path, ops));
            }
            other => other?,
        }
        graph.fold_initializer_aliases();
        graph.load_initializers(graph_proto)?;
        infer_shapes(&mut graph, &HashMap::new())?;
        let metadata_props: Vec<(String, String)> =
            proto.metadata_props.iter().map(|p| (p.key().to_string(), p.value().to_string())).collect();
        let metadata =
            ModelMetadata::from_props(metadata_props.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .map_err(|source| Error::Metadata { path: path.to_path_buf(), source })?;
        Ok(Model { path: path.to_path_buf(), proto, opset, graph, metadata, metadata_props })
    }

    /// An INT8 (Q/DQ) export at `path` as the float graph it was made from (for `headroom
    /// inspect`: its modules, parameters and head), and how many Q/DQ nodes it has; any other model
    /// as [`Model::load`] reads it, with 0.
    pub fn load_dequantized(path: impl AsRef<Path>) -> Result<(Model, usize)> {
        let path = path.as_ref();
        match Model::load(path) {
            Err(Error::Quantized { .. }) => {
                let bytes =
                    std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
                let (proto, nodes) = crate::quant::dequantize::dequantize(&decode(&bytes, path)?, path)?;
                Ok((Model::from_proto(proto, path)?, nodes))
            }
            other => other.map(|m| (m, 0)),
        }
    }

    /// Whether the weights are float16 (headroom's FP16 export): such a file can be run and checked
    /// but not trained.
    pub fn has_float16_weights(&self) -> bool {
        self.graph.initializers.values().any(|t| matches!(t.data, crate::TensorData::F16(_)))
    }

    /// Frees the decoded weights, the protobuf's and the graph's, once another copy holds them (a
    /// training run's libtorch tensors; the file's bytes for write-back): the nodes, the
    /// initializers' dims and the inferred shapes stay. Two copies of the weights fewer for the rest
    /// of the run (docs/PLAN.md "weights").
    pub fn release_initializers(&mut self) {
        if let Some(graph) = self.proto.graph.as_mut() {
            graph.initializer = Vec::new();
        }
        self.graph.initializers = std::collections::BTreeMap::new();
    }

    /// The graph with shapes inferred for concrete values of the symbolic input dims
    /// (`{"height": 640, "width": 640, "batch": 1}`).
    pub fn graph_with_dims(&self, dims: &HashMap<String, i64>) -> Result<Graph> {
        let mut graph = self.graph.clone();
        infer_shapes(&mut graph, dims)?;
        Ok(graph)
    }
}

/// A graph with operators headroom does not run: when it is not a detector at all (an Ultralytics
/// export of another task, or no output of rank 3 as `[1, 4+nc, N]` and `[1, 300, 6]` have), saying
/// so helps more than listing the operators of a classifier.
fn unsupported_or_not_a_detector(
    proto: &ModelProto,
    graph: &Graph,
    path: PathBuf,
    ops: Vec<crate::UnsupportedOp>,
) -> Error {
    let names: Vec<&str> = ops
        .iter()
        .map(|op| op.op_type.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let task = proto.metadata_props.iter().find(|p| p.key() == "task").map(|p| p.value().to_string());
    let reason = match task.as_deref() {
        Some("detect") => return Error::Unsupported { path, ops },
        Some(task) => format!("an Ultralytics `{task}` model; headroom trains and exports detectors"),
        None if graph.outputs.iter().any(|o| o.shape.as_ref().is_some_and(|s| s.len() == 3)) => {
            return Error::Unsupported { path, ops };
        }
        None => {
            let shapes: Vec<String> = graph
                .outputs
                .iter()
                .map(|o| {
                    format!(
                        "`{}` {}",
                        o.name,
                        o.shape.as_ref().map_or("of unknown shape".into(), |s| crate::dim::format_shape(s))
                    )
                })
                .collect();
            format!(
                "no output has a detector's shape [1, 4+classes, anchors] or [1, 300, 6] ({})",
                shapes.join(", ")
            )
        }
    };
    Error::NotDetector {
        path,
        reason: format!("{reason} (it also uses operators headroom does not run: {})", names.join(", ")),
    }
}

fn not_onnx(path: &Path, reason: impl Into<String>) -> Error {
    Error::NotOnnx { path: path.to_path_buf(), reason: reason.into() }
}

/// Decodes a `ModelProto`, rejecting what is not plausibly one (protobuf decodes many byte strings).
pub fn decode(bytes: &[u8], path: &Path) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(not_onnx(path, "the file is empty"));
    }
    let proto = ModelProto::decode(bytes).map_err(|e| not_onnx(path, e.to_string()))?;
    if proto.ir_version.unwrap_or(0) <= 0 {
        return Err(not_onnx(path, "no IR version"));
    }
    match &proto.graph {
        Some(g) if !g.node.is_empty() && !g.output.is_empty() => Ok(proto),
        _ => Err(not_onnx(path, "the graph has no nodes or no outputs")),
    }
}

fn opset(proto: &ModelProto, path: &Path) -> Result<i64> {
    let found =
        proto.opset_import.iter().find(|o| matches!(o.domain(), "" | "ai.onnx")).map_or(0, |o| o.version());
    if !(MIN_OPSET..=MAX_OPSET).contains(&found) {
        return Err(Error::Opset { path: path.to_path_buf(), found, min: MIN_OPSET, max: MAX_OPSET });
    }
    Ok(found)
}
