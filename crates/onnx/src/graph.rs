//! The graph IR: nodes with typed [`Op`]s, graph inputs and outputs, initializers, inferred shapes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use crate::attr::NodeContext;
use crate::dim::Dim;
use crate::error::{Error, Result, UnsupportedOp};
use crate::ops::{self, Op};
use crate::proto::{GraphProto, ValueInfoProto, tensor_shape_proto::dimension, type_proto};
use crate::tensor::{self, Tensor};

/// One node of the graph.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The node's name (`#index` when the export left it empty).
    pub name: String,
    /// The typed operator.
    pub op: Op,
    /// Input tensor names (`""` for an omitted optional input).
    pub inputs: Vec<String>,
    /// Output tensor names.
    pub outputs: Vec<String>,
}

impl Node {
    /// The inputs that can hold a layer's parameters: a Conv's weight and bias, both operands of a
    /// MatMul; empty for other ops. (Which of them are initializers is the graph's to say.)
    pub fn parameter_inputs(&self) -> &[String] {
        match self.op {
            Op::Conv(_) => self.inputs.get(1..).unwrap_or_default(),
            Op::MatMul => &self.inputs,
            _ => &[],
        }
    }

    /// The Ultralytics module index from the node name (`/model.22/cv2.0/...` gives 22).
    pub fn module(&self) -> Option<usize> {
        let rest = self.name.split('/').find_map(|part| part.strip_prefix("model."))?;
        rest.split('.').next()?.parse().ok()
    }
}

/// Which node (index into `nodes`) makes each tensor.
pub fn producers(nodes: &[Node]) -> HashMap<&str, usize> {
    nodes.iter().enumerate().flat_map(|(i, n)| n.outputs.iter().map(move |o| (o.as_str(), i))).collect()
}

/// A graph input or output: name, element type, declared shape.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ValueInfo {
    /// The tensor name.
    pub name: String,
    /// The declared dims (`None` when the file declares no shape).
    pub shape: Option<Vec<Dim>>,
}

impl ValueInfo {
    fn from_proto(proto: &ValueInfoProto) -> ValueInfo {
        let shape = match proto.r#type.as_ref().and_then(|t| t.value.as_ref()) {
            Some(type_proto::Value::TensorType(t)) => t.shape.as_ref().map(|s| {
                s.dim
                    .iter()
                    .enumerate()
                    .map(|(i, d)| match &d.value {
                        Some(dimension::Value::DimValue(v)) => Dim::Known(*v),
                        Some(dimension::Value::DimParam(p)) => Dim::Symbol(p.clone()),
                        None => Dim::Symbol(format!("{}_{i}", proto.name())),
                    })
                    .collect()
            }),
            _ => None,
        };
        ValueInfo { name: proto.name().to_string(), shape }
    }
}

/// A model's graph in typed form.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    /// The file the graph came from (for error messages).
    pub path: PathBuf,
    /// The default-domain opset.
    pub opset: i64,
    /// Nodes in file (topological) order.
    pub nodes: Vec<Node>,
    /// Graph inputs that are not initializers (`images`).
    pub inputs: Vec<ValueInfo>,
    /// Graph outputs (`output0`).
    pub outputs: Vec<ValueInfo>,
    /// Initializer dims, known before any weight is decoded.
    pub initializer_dims: BTreeMap<String, Vec<usize>>,
    /// Decoded initializers (filled by [`Graph::load_initializers`]).
    pub initializers: BTreeMap<String, Tensor>,
    /// Inferred shape of every tensor whose shape could be inferred.
    pub shapes: HashMap<String, Vec<Dim>>,
}

impl Graph {
    /// Imports the nodes of `proto` (no weights decoded). Malformed nodes are errors; unknown ops
    /// become [`Op::Unsupported`].
    pub fn import(proto: &GraphProto, opset: i64, path: &Path) -> Result<Graph> {
        let initializer_dims: BTreeMap<String, Vec<usize>> = proto
            .initializer
            .iter()
            .map(|t| (t.name().to_string(), t.dims.iter().map(|d| (*d).max(0) as usize).collect()))
            .collect();
        let nodes = proto
            .node
            .iter()
            .enumerate()
            .map(|(index, node)| {
                let ctx = NodeContext { proto: node, opset, index };
                Ok(Node {
                    name: ctx.name(),
                    op: ops::import(&ctx)?,
                    inputs: node.input.clone(),
                    outputs: node.output.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let inputs = proto
            .input
            .iter()
            .filter(|i| !initializer_dims.contains_key(i.name()))
            .map(ValueInfo::from_proto)
            .collect();
        Ok(Graph {
            path: path.to_path_buf(),
            opset,
            nodes,
            inputs,
            outputs: proto.output.iter().map(ValueInfo::from_proto).collect(),
            initializer_dims,
            initializers: BTreeMap::new(),
            shapes: HashMap::new(),
        })
    }

    /// Every unsupported node, in graph order.
    pub fn unsupported(&self) -> Vec<UnsupportedOp> {
        self.nodes
            .iter()
            .filter_map(|n| match &n.op {
                Op::Unsupported { op_type, domain } => Some(UnsupportedOp {
                    node: n.name.clone(),
                    op_type: op_type.clone(),
                    domain: domain.clone(),
                }),
                _ => None,
            })
            .collect()
    }

    /// Checks that every op is supported (all unsupported ones in one error) and that every node
    /// input is provided by an initializer, a graph input or an earlier node. Touches no weight.
    pub fn check(&self) -> Result<()> {
        let ops = self.unsupported();
        if !ops.is_empty() {
            return Err(Error::Unsupported { path: self.path.clone(), ops });
        }
        let mut known: HashSet<&str> = self.inputs.iter().map(|i| i.name.as_str()).collect();
        known.extend(self.initializer_dims.keys().map(String::as_str));
        for node in &self.nodes {
            if let Some(input) = node.inputs.iter().find(|i| !i.is_empty() && !known.contains(i.as_str())) {
                return Err(Error::MissingInput {
                    path: self.path.clone(),
                    node: node.name.clone(),
                    op_type: node.op.op_type().to_string(),
                    input: input.clone(),
                });
            }
            known.extend(node.outputs.iter().map(String::as_str));
        }
        if let Some(output) = self.outputs.iter().find(|o| !known.contains(o.name.as_str())) {
            return Err(Error::MissingInput {
                path: self.path.clone(),
                node: "(graph output)".into(),
                op_type: "-".into(),
                input: output.name.clone(),
            });
        }
        Ok(())
    }

    /// Removes `Identity` nodes that merely alias an initializer (un-simplified exports route Conv
    /// biases through them) and points their readers at the initializer itself, so a parameter is
    /// always an initializer read directly by its layer. Returns how many nodes were removed.
    pub fn fold_initializer_aliases(&mut self) -> usize {
        let mut alias: HashMap<String, String> = HashMap::new();
        let outputs: HashSet<&str> = self.outputs.iter().map(|o| o.name.as_str()).collect();
        for node in &self.nodes {
            if let (Op::Identity, [input], [output]) =
                (&node.op, node.inputs.as_slice(), node.outputs.as_slice())
            {
                let source = alias.get(input).cloned().unwrap_or_else(|| input.clone());
                if self.initializer_dims.contains_key(&source) && !outputs.contains(output.as_str()) {
                    alias.insert(output.clone(), source);
                }
            }
        }
        if alias.is_empty() {
            return 0;
        }
        let before = self.nodes.len();
        self.nodes.retain(|n| !n.outputs.iter().any(|o| alias.contains_key(o)));
        for node in &mut self.nodes {
            for input in &mut node.inputs {
                if let Some(source) = alias.get(input) {
                    input.clone_from(source);
                }
            }
        }
        before - self.nodes.len()
    }

    /// Decodes every initializer of `proto` (inline or external data next to the model file).
    pub fn load_initializers(&mut self, proto: &GraphProto) -> Result<()> {
        let dir = self.path.parent().map(Path::to_path_buf);
        for t in &proto.initializer {
            let decoded = tensor::decode(t, dir.as_deref()).map_err(|reason| Error::Initializer {
                path: self.path.clone(),
                name: t.name().to_string(),
                reason,
            })?;
            self.initializers.insert(t.name().to_string(), decoded);
        }
        Ok(())
    }

    /// The node that produces `tensor`, if any.
    pub fn producer(&self, tensor: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.outputs.iter().any(|o| o == tensor))
    }

    /// The nodes that read `tensor`.
    pub fn consumers<'a>(&'a self, tensor: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.nodes.iter().filter(move |n| n.inputs.iter().any(|i| i == tensor))
    }

    /// The inferred shape of `tensor` (initializers included).
    pub fn shape(&self, tensor: &str) -> Option<Vec<Dim>> {
        self.shapes.get(tensor).cloned().or_else(|| {
            self.initializer_dims.get(tensor).map(|d| d.iter().map(|x| Dim::Known(*x as i64)).collect())
        })
    }
}
