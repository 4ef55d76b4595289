//! The executor: runs an imported ONNX graph on libtorch, node by node, with autograd.
//!
//! Initializers become libtorch tensors once ([`Executor::new`]); [`Executor::run_nodes`] evaluates a
//! list of nodes in graph order into an environment of named tensors and frees every tensor after its
//! last reader, so a forward pass holds no more than ONNX Runtime would (plus what autograd keeps).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use headroom_onnx::{Graph, Node};
use tch::{Device, Tensor};

use crate::lower::{self, Inputs};
use crate::{Error, Result};

/// A decoded ONNX tensor (an initializer, a constant, a test input) as a libtorch tensor on `device`,
/// of the matching kind (`FLOAT` → `Float`, `INT64` → `Int64`, `BOOL` → `Bool`, ...).
pub fn to_torch(tensor: &headroom_onnx::Tensor, device: Device) -> Result<Tensor> {
    lower::to_torch(tensor, device).map_err(|e| Error::Lower {
        path: PathBuf::new(),
        node: format!("tensor `{}`", tensor.name),
        op_type: "-".into(),
        reason: e.0,
    })
}

/// An imported graph ready to run on libtorch.
#[derive(Debug)]
pub struct Executor {
    path: PathBuf,
    nodes: Vec<Node>,
    inputs: Vec<String>,
    outputs: Vec<String>,
    weights: HashMap<String, Tensor>,
    device: Device,
    /// Conv node name → the names (in `weights`) of a per-channel scale and shift applied to its
    /// output ([`Executor::add_affine`]).
    affine: HashMap<String, (String, String)>,
    /// The graph's SiLUs, Mul index → Sigmoid index ([`headroom_onnx::fuse::silu_pairs`]), run as
    /// one `silu` unless [`Executor::set_fusion`] turned it off.
    silu: HashMap<usize, usize>,
    fuse: bool,
    /// Conv node name → the int8 scale of its activation: quantization-aware training
    /// ([`Executor::set_fake_quant`]).
    fake_quant: HashMap<String, f64>,
}

impl Executor {
    /// Converts the graph's initializers to libtorch tensors on `device`.
    pub fn new(graph: &Graph, device: Device) -> Result<Executor> {
        let mut weights = HashMap::with_capacity(graph.initializers.len());
        for (name, tensor) in &graph.initializers {
            let t = lower::to_torch(tensor, device).map_err(|e| Error::Lower {
                path: graph.path.clone(),
                node: format!("initializer `{name}`"),
                op_type: "-".into(),
                reason: e.0,
            })?;
            weights.insert(name.clone(), t);
        }
        Ok(Executor {
            path: graph.path.clone(),
            nodes: graph.nodes.clone(),
            inputs: graph.inputs.iter().map(|i| i.name.clone()).collect(),
            outputs: graph.outputs.iter().map(|o| o.name.clone()).collect(),
            weights,
            device,
            affine: HashMap::new(),
            silu: headroom_onnx::fuse::silu_pairs(
                &graph.nodes,
                &graph.outputs.iter().map(|o| o.name.clone()).collect::<Vec<_>>(),
            ),
            // `set_fusion(false)` runs every node as the file has it (tests and benchmarks).
            fuse: true,
            fake_quant: HashMap::new(),
        })
    }

    /// Quantization-aware training: each Conv named in `sites` (node name → its activation's int8
    /// scale, `amax / 127` as the Q/DQ export writes it) reads its activation and its weight through
    /// fake quantization ([`crate::fake_quant`]), so the forward pass computes what the INT8 file
    /// will, and gradients pass straight through. Empty: every Conv computes in float.
    pub fn set_fake_quant(&mut self, sites: HashMap<String, f64>) -> Result<()> {
        for node in sites.keys() {
            let conv = self.nodes.iter().any(|n| &n.name == node && n.op.op_type() == "Conv");
            if !conv {
                return Err(Error::UnknownTensor { name: format!("Conv node `{node}` (fake quantization)") });
            }
        }
        self.fake_quant = sites;
        Ok(())
    }

    /// Runs the graph's `Sigmoid(x)·x` pairs as one libtorch `silu` (the default: one kernel each
    /// way, and autograd keeps `x` alone) or, with `false`, node by node as the file has them.
    /// Values agree within float rounding (tested: crates/train/tests/fusion.rs).
    pub fn set_fusion(&mut self, fuse: bool) {
        self.fuse = fuse;
    }

    /// How many SiLUs the graph has (each a `Sigmoid` and a `Mul` node).
    pub fn silu_count(&self) -> usize {
        self.silu.len()
    }

    /// Gives the Conv node `node` (`channels` outputs) a trainable per-channel scale (starting at 1)
    /// and shift (at 0) on its output, stored as the weights `NODE#scale` and `NODE#shift`; returns
    /// their names. `y' = scale·y + shift` is the Conv with weight `scale·W` and bias
    /// `scale·b + shift`: what [`crate::Student::fold_affine`] writes back.
    pub fn add_affine(&mut self, node: &str, channels: i64) -> (String, String) {
        let names = (format!("{node}#scale"), format!("{node}#shift"));
        let options = (tch::Kind::Float, self.device);
        self.weights.insert(names.0.clone(), Tensor::ones([channels], options).set_requires_grad(true));
        self.weights.insert(names.1.clone(), Tensor::zeros([channels], options).set_requires_grad(true));
        self.affine.insert(node.to_string(), names.clone());
        names
    }

    /// The device tensors live on.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The graph's input names.
    pub fn input_names(&self) -> &[String] {
        &self.inputs
    }

    /// The graph's output names.
    pub fn output_names(&self) -> &[String] {
        &self.outputs
    }

    /// The nodes, in graph order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// An initializer as a libtorch tensor.
    pub fn weight(&self, name: &str) -> Option<&Tensor> {
        self.weights.get(name)
    }

    /// Replaces an initializer's value (same shape), e.g. with trained or averaged weights.
    pub fn set_weight(&mut self, name: &str, value: Tensor) -> Result<()> {
        let old = self.weights.get(name).ok_or_else(|| Error::UnknownTensor { name: name.to_string() })?;
        if old.size() != value.size() {
            return Err(Error::Shape { name: name.to_string(), expected: old.size(), found: value.size() });
        }
        self.weights.insert(name.to_string(), value);
        Ok(())
    }

    /// Marks initializers as trainable (`requires_grad`); all others are constants.
    pub fn set_trainable<'a>(&mut self, names: impl IntoIterator<Item = &'a str>) -> Result<()> {
        for name in names {
            let t = self.weights.get_mut(name).ok_or_else(|| Error::UnknownTensor { name: name.into() })?;
            *t = t.detach().set_requires_grad(true);
        }
        Ok(())
    }

    /// Indices of the nodes needed to compute `targets` from `known` tensors (graph inputs,
    /// initializers and anything in `known` are leaves), in graph order.
    pub fn nodes_for(&self, targets: &[&str], known: &HashSet<&str>) -> Result<Vec<usize>> {
        let producer = headroom_onnx::graph::producers(&self.nodes);
        let mut needed = HashSet::new();
        let mut stack: Vec<&str> = targets.to_vec();
        let mut seen = HashSet::new();
        while let Some(t) = stack.pop() {
            if t.is_empty() || !seen.insert(t) || known.contains(t) || self.weights.contains_key(t) {
                continue;
            }
            if self.inputs.iter().any(|i| i == t) {
                continue;
            }
            let &i = producer.get(t).ok_or_else(|| Error::UnknownTensor { name: t.to_string() })?;
            if needed.insert(i) {
                stack.extend(self.nodes[i].inputs.iter().map(String::as_str));
            }
        }
        let mut nodes: Vec<usize> = needed.into_iter().collect();
        nodes.sort_unstable();
        Ok(nodes)
    }

    /// Runs `nodes` (indices, graph order) reading and writing `env`. A tensor is dropped from `env`
    /// after its last reader among `nodes` unless `keep` names it; outputs nobody reads are dropped
    /// at once unless kept.
    pub fn run_nodes(
        &self,
        nodes: &[usize],
        env: &mut HashMap<String, Tensor>,
        keep: &HashSet<&str>,
    ) -> Result<()> {
        let mut last_use: HashMap<&str, usize> = HashMap::new();
        for (step, &i) in nodes.iter().enumerate() {
            for input in &self.nodes[i].inputs {
                last_use.insert(input.as_str(), step);
            }
        }
        // SiLUs whose two nodes are both in this list, the Sigmoid's output not wanted afterwards:
        // Mul index → the SiLU's input; their Sigmoids are skipped.
        let mut fused: HashMap<usize, &str> = HashMap::new();
        if self.fuse && !self.silu.is_empty() {
            let listed: HashSet<usize> = nodes.iter().copied().collect();
            for (&mul, &sigmoid) in &self.silu {
                let sig = &self.nodes[sigmoid];
                if listed.contains(&mul)
                    && listed.contains(&sigmoid)
                    && !keep.contains(sig.outputs[0].as_str())
                {
                    fused.insert(mul, sig.inputs[0].as_str());
                }
            }
        }
        let skipped: HashSet<usize> = fused.keys().map(|mul| self.silu[mul]).collect();
        for (step, &i) in nodes.iter().enumerate() {
            let node = &self.nodes[i];
            let outputs = if skipped.contains(&i) {
                Vec::new()
            } else if let Some(x) = fused.get(&i) {
                vec![self.silu_of(node, x, env)?]
            } else {
                self.run_node(node, env)?
            };
            for (name, value) in node.outputs.iter().zip(outputs) {
                if !name.is_empty()
                    && (last_use.get(name.as_str()).is_some_and(|s| *s > step)
                        || keep.contains(name.as_str()))
                {
                    env.insert(name.clone(), value);
                }
            }
            for input in &node.inputs {
                if last_use.get(input.as_str()) == Some(&step) && !keep.contains(input.as_str()) {
                    env.remove(input);
                }
            }
        }
        Ok(())
    }

    fn run_node(&self, node: &Node, env: &HashMap<String, Tensor>) -> Result<Vec<Tensor>> {
        let fail = |reason: String| Error::Lower {
            path: self.path.clone(),
            node: node.name.clone(),
            op_type: node.op.op_type().to_string(),
            reason,
        };
        // A Conv with a scale and shift runs with weight `scale·W` and bias `scale·b + shift`: the
        // same output as scaling it, and backward keeps only what the plain Conv keeps.
        let effective = match self.affine.get(&node.name) {
            Some((scale, shift)) => {
                Some(self.affine_weights(node, scale, shift).map_err(|e| fail(e.to_string()))?)
            }
            None => None,
        };
        // Declared before `values`, which may borrow them.
        let quantized: (Tensor, Tensor);
        let mut values = Vec::with_capacity(node.inputs.len());
        for (index, name) in node.inputs.iter().enumerate() {
            if name.is_empty() {
                values.push(None);
                continue;
            }
            if let (Some((weight, bias)), 1 | 2) = (&effective, index) {
                values.push(Some(if index == 1 { weight } else { bias }));
                continue;
            }
            let value = env
                .get(name)
                .or_else(|| self.weights.get(name))
                .ok_or_else(|| fail(format!("input `{name}` has not been computed")))?;
            values.push(Some(value));
        }
        if let Some(&scale) = self.fake_quant.get(&node.name) {
            let (Some(Some(x)), Some(Some(w))) = (values.first(), values.get(1)) else {
                return Err(fail("a fake-quantized Conv needs its activation and weight".into()));
            };
            let torch = |e: tch::TchError| fail(crate::error::torch_message(&e.to_string()).to_string());
            quantized = (
                crate::fake_quant::activation(x, scale).map_err(torch)?,
                crate::fake_quant::weight(w).map_err(torch)?,
            );
            values[0] = Some(&quantized.0);
            values[1] = Some(&quantized.1);
        }
        let outputs = lower::run(&node.op, &Inputs::new(values, self.device), node.outputs.len())
            .map_err(|e| fail(e.0))?;
        if outputs.len() < node.outputs.len() {
            return Err(fail(format!("{} outputs made, {} declared", outputs.len(), node.outputs.len())));
        }
        Ok(outputs)
    }

    /// `silu(x)` in place of the Mul node `node` of a SiLU.
    fn silu_of(&self, node: &Node, x: &str, env: &HashMap<String, Tensor>) -> Result<Tensor> {
        let fail = |reason: String| Error::Lower {
            path: self.path.clone(),
            node: node.name.clone(),
            op_type: "Sigmoid+Mul (SiLU)".to_string(),
            reason,
        };
        let x = env
            .get(x)
            .or_else(|| self.weights.get(x))
            .ok_or_else(|| fail(format!("input `{x}` has not been computed")))?;
        x.f_silu().map_err(|e| fail(crate::error::torch_message(&e.to_string()).to_string()))
    }

    /// The weight and bias a Conv with a scale and shift runs with.
    fn affine_weights(
        &self,
        node: &Node,
        scale: &str,
        shift: &str,
    ) -> std::result::Result<(Tensor, Tensor), tch::TchError> {
        let (scale, shift) = (&self.weights[scale], &self.weights[shift]);
        let (weight, bias) = (&self.weights[&node.inputs[1]], &self.weights[&node.inputs[2]]);
        Ok((weight.f_mul(&scale.f_view([-1, 1, 1, 1])?)?, bias.f_mul(scale)?.f_add(shift)?))
    }

    /// Runs the graph from `inputs` (name, value) to `targets` (tensor names; the graph outputs when
    /// empty) and returns them in order.
    pub fn run(&self, inputs: Vec<(String, Tensor)>, targets: &[&str]) -> Result<Vec<Tensor>> {
        let targets: Vec<&str> = if targets.is_empty() {
            self.outputs.iter().map(String::as_str).collect()
        } else {
            targets.to_vec()
        };
        for (name, _) in &inputs {
            if !self.inputs.contains(name) {
                return Err(Error::UnknownTensor { name: name.clone() });
            }
        }
        let mut env: HashMap<String, Tensor> = inputs.into_iter().collect();
        let known: HashSet<&str> = HashSet::new();
        let nodes = self.nodes_for(&targets, &known)?;
        let keep: HashSet<&str> = targets.iter().copied().collect();
        self.run_nodes(&nodes, &mut env, &keep)?;
        targets
            .iter()
            .map(|t| {
                env.get(*t)
                    .or_else(|| self.weights.get(*t))
                    .map(Tensor::shallow_clone)
                    .ok_or_else(|| Error::UnknownTensor { name: t.to_string() })
            })
            .collect()
    }
}
