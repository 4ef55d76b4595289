//! The student: an ONNX detector on libtorch, split into a frozen trunk and trainable segments, with
//! a plain or a checkpointed backward pass.
//!
//! Checkpointing: the segments first run forward without autograd, keeping only the activations that
//! cross segment boundaries; the kept tail ([`Partition::recomputed`]: the detect head when more
//! than the head trains, else the last segment) then runs with autograd, and the loss's backward goes
//! through it. The other segments are re-run one at a time in reverse order with autograd on, and
//! each one's backward is seeded with the gradient of its outputs (`torch.autograd.backward(outputs,
//! grads)`, a vector-Jacobian product). Parameter gradients accumulate as in the plain backward; at any moment
//! only one recomputed segment's activations (or the tail's) are alive.

use std::collections::{HashMap, HashSet};

use headroom_onnx::inspect::{Inspection, inspect};
use headroom_onnx::renorm::{ConvSite, stem_convs};
use headroom_onnx::{Model, Partition, Trainable};
use tch::{Device, Kind, Tensor};

use crate::executor::Executor;
use crate::{Error, Result};

/// A detector ready to train: executor, split, trainable parameters.
#[derive(Debug)]
pub struct Student {
    executor: Executor,
    partition: Partition,
    inspection: Inspection,
    /// With [`Trainable::Affine`]: each trunk Conv and the names of its scale and shift.
    affine: Vec<(ConvSite, String, String)>,
}

/// Activations at the trunk/trainable cut for one batch (computed without gradients).
#[derive(Debug)]
pub struct Cut(HashMap<String, Tensor>);

impl Cut {
    /// A cut from its tensors by name (from a feature cache or another runtime's trunk).
    pub fn from_named(tensors: impl IntoIterator<Item = (String, Tensor)>) -> Cut {
        Cut(tensors.into_iter().collect())
    }

    /// The tensor named `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.0.get(name)
    }
}

impl Student {
    /// Loads `model` on `device`, split as `trainable` says; the trainable initializers get
    /// `requires_grad`.
    pub fn new(model: &Model, trainable: Trainable, device: Device) -> Result<Student> {
        let inspection = inspect(model)?;
        let mut partition = Partition::new(&model.graph, &inspection, trainable)?;
        let mut executor = Executor::new(&model.graph, device)?;
        executor.set_trainable(partition.parameters.iter().map(String::as_str))?;
        let mut affine = Vec::new();
        if trainable == Trainable::Affine {
            for site in stem_convs(&model.graph, &inspection, usize::MAX)? {
                let (scale, shift) = executor.add_affine(&site.node, site.channels as i64);
                partition.parameters.extend([scale.clone(), shift.clone()]);
                partition.parameter_count += 2 * site.channels;
                affine.push((site, scale, shift));
            }
        }
        Ok(Student { executor, partition, inspection, affine })
    }

    /// Folds the per-channel scales and shifts of [`Trainable::Affine`] in `weights` (name →
    /// values, as [`Student::trained_weights`] gives them, or their average) into their Convs:
    /// `W' = scale·W`, `b' = scale·b + shift` replace the scale and shift entries, so the result
    /// holds only the graph's own initializers. Nothing to do for other splits.
    pub fn fold_affine(&self, weights: &mut std::collections::BTreeMap<String, Vec<f32>>) -> Result<()> {
        for (site, scale, shift) in &self.affine {
            let (Some(scale), Some(shift)) = (weights.remove(scale), weights.remove(shift)) else { continue };
            let value = |name: &str| -> Result<Vec<f32>> {
                let t =
                    self.executor.weight(name).ok_or_else(|| Error::UnknownTensor { name: name.into() })?;
                let flat = t.detach().f_reshape([-1])?.f_to_kind(Kind::Float)?.f_to_device(Device::Cpu)?;
                Ok(Vec::<f32>::try_from(&flat)?)
            };
            let (weight, bias) = (value(&site.weight)?, value(&site.bias)?);
            if scale.len() != site.channels || shift.len() != site.channels || bias.len() != site.channels {
                return Err(Error::Shape {
                    name: site.node.clone(),
                    expected: vec![site.channels as i64],
                    found: vec![scale.len() as i64, shift.len() as i64, bias.len() as i64],
                });
            }
            let per_channel = weight.len() / site.channels;
            let folded: Vec<f32> = weight
                .chunks(per_channel)
                .zip(&scale)
                .flat_map(|(row, &a)| row.iter().map(move |&w| w * a))
                .collect();
            let bias: Vec<f32> = (0..site.channels).map(|c| scale[c] * bias[c] + shift[c]).collect();
            weights.insert(site.weight.clone(), folded);
            weights.insert(site.bias.clone(), bias);
        }
        Ok(())
    }

    /// The split.
    pub fn partition(&self) -> &Partition {
        &self.partition
    }

    /// What `inspect` found.
    pub fn inspection(&self) -> &Inspection {
        &self.inspection
    }

    /// The executor (all weights, any graph tensor).
    pub fn executor(&self) -> &Executor {
        &self.executor
    }

    /// Quantization-aware training: these Convs (node → activation scale) compute from
    /// fake-quantized activation and weight ([`Executor::set_fake_quant`]).
    pub fn set_fake_quant(&mut self, sites: HashMap<String, f64>) -> Result<()> {
        self.executor.set_fake_quant(sites)
    }

    /// Runs the graph's SiLUs as one op (the default) or node by node ([`Executor::set_fusion`]).
    pub fn set_fusion(&mut self, fuse: bool) {
        self.executor.set_fusion(fuse);
    }

    /// Trainable parameters by name.
    pub fn parameters(&self) -> Vec<(&str, &Tensor)> {
        self.partition
            .parameters
            .iter()
            .filter_map(|n| self.executor.weight(n).map(|t| (n.as_str(), t)))
            .collect()
    }

    /// The trainable parameters' current values (name → row-major f32), for writing back into the
    /// ONNX file ([`headroom_onnx::patch::write_weights`]).
    pub fn trained_weights(&self) -> Result<std::collections::BTreeMap<String, Vec<f32>>> {
        let mut weights = self
            .parameters()
            .into_iter()
            .map(|(name, p)| {
                let flat = p.detach().f_reshape([-1])?.f_to_kind(Kind::Float)?.f_to_device(Device::Cpu)?;
                Ok((name.to_string(), Vec::<f32>::try_from(&flat)?))
            })
            .collect::<Result<_>>()?;
        self.fold_affine(&mut weights)?;
        Ok(weights)
    }

    /// Clears the gradients of the trainable parameters.
    pub fn zero_grad(&self) {
        let grads: Vec<Tensor> =
            self.parameters().iter().map(|(_, p)| p.grad()).filter(Tensor::defined).collect();
        if crate::foreach::zero_(&grads.iter().collect::<Vec<_>>()).is_err() {
            // The list kernel refused (mixed devices or dtypes): one tensor at a time.
            for mut g in grads {
                let _ = g.detach_().zero_();
            }
        }
    }

    /// Whether the export's batch dimension is fixed at 1: its reshapes (attention in 11, v10, 26)
    /// then hold batch 1 as a constant, and a batch of several images must pass one at a time.
    pub fn batch_fixed_at_one(&self) -> bool {
        self.inspection.input_shape.first() == Some(&headroom_onnx::Dim::Known(1))
    }

    /// Runs the frozen trunk on `images` (`[B, 3, H, W]`, float in [0, 1]) without gradients. An
    /// export whose batch is fixed at 1 runs image by image, the cut tensors concatenated.
    pub fn trunk(&self, images: &Tensor) -> Result<Cut> {
        let batch = images.size().first().copied().unwrap_or(1);
        if batch > 1 && self.batch_fixed_at_one() {
            let cuts =
                (0..batch).map(|i| self.trunk(&images.narrow(0, i, 1))).collect::<Result<Vec<Cut>>>()?;
            let mut joined = HashMap::new();
            for name in &self.partition.cut {
                let parts: Vec<&Tensor> = cuts.iter().filter_map(|c| c.0.get(name)).collect();
                joined.insert(name.clone(), Tensor::f_cat(&parts, 0)?);
            }
            return Ok(Cut(joined));
        }
        let _guard = tch::no_grad_guard();
        let input = self.executor.input_names().first().cloned().unwrap_or_default();
        let mut env = HashMap::from([(input, images.shallow_clone())]);
        let keep: HashSet<&str> = self.partition.cut.iter().map(String::as_str).collect();
        self.executor.run_nodes(&self.partition.trunk, &mut env, &keep)?;
        let cut = self
            .partition
            .cut
            .iter()
            .map(|n| {
                env.remove(n).map(|t| (n.clone(), t)).ok_or_else(|| Error::UnknownTensor { name: n.clone() })
            })
            .collect::<Result<_>>()?;
        Ok(Cut(cut))
    }

    fn run_segment(
        &self,
        index: usize,
        env: &mut HashMap<String, Tensor>,
        keep: &HashSet<&str>,
    ) -> Result<()> {
        self.executor.run_nodes(&self.partition.segments[index].nodes, env, keep)
    }

    /// Every tensor that crosses a segment boundary (segment inputs and outputs).
    fn boundary_names(&self) -> HashSet<&str> {
        self.partition
            .segments
            .iter()
            .flat_map(|s| s.inputs.iter().chain(&s.outputs))
            .map(String::as_str)
            .collect()
    }

    fn head_outputs(&self, env: &HashMap<String, Tensor>) -> Result<Vec<Tensor>> {
        self.partition
            .head_outputs
            .iter()
            .map(|n| {
                env.get(n).map(Tensor::shallow_clone).ok_or_else(|| Error::UnknownTensor { name: n.clone() })
            })
            .collect()
    }

    /// The trainable part on a cut, with autograd: the raw head tensors (per level: box
    /// distribution, class logits).
    pub fn head(&self, cut: &Cut) -> Result<Vec<Tensor>> {
        let mut env: HashMap<String, Tensor> =
            cut.0.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect();
        let keep = self.boundary_names();
        for index in 0..self.partition.segments.len() {
            self.run_segment(index, &mut env, &keep)?;
        }
        self.head_outputs(&env)
    }

    /// Forward and plain backward: gradients land in the parameters' `.grad()`. Returns the loss.
    pub fn backward(&self, cut: &Cut, loss: impl FnOnce(&[Tensor]) -> Result<Tensor>) -> Result<f64> {
        let outputs = self.head(cut)?;
        let loss = loss(&outputs)?;
        loss.f_backward()?;
        Ok(loss.f_double_value(&[])?)
    }

    /// Forward and checkpointed backward (see the module docs): same gradients as
    /// [`Student::backward`], lower peak memory. Returns the loss.
    pub fn backward_checkpointed(
        &self,
        cut: &Cut,
        loss: impl FnOnce(&[Tensor]) -> Result<Tensor>,
    ) -> Result<f64> {
        let segments = &self.partition.segments;
        let cut_names: HashSet<&str> = self.partition.cut.iter().map(String::as_str).collect();
        // 1. Forward without autograd but for the last segment, remembering each segment's inputs.
        let mut boundary: HashMap<String, Tensor> =
            cut.0.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect();
        let recomputed = self.recomputed();
        {
            let _guard = tch::no_grad_guard();
            let mut env: HashMap<String, Tensor> =
                boundary.iter().map(|(k, v)| (k.clone(), v.shallow_clone())).collect();
            let keep = self.boundary_names();
            for (index, segment) in segments.iter().enumerate().take(recomputed) {
                self.run_segment(index, &mut env, &keep)?;
                for name in &segment.outputs {
                    if let Some(t) = env.get(name) {
                        boundary.insert(name.clone(), t.shallow_clone());
                    }
                }
            }
        }
        // 2. The kept tail with autograd, the loss on its head outputs, one backward through both:
        // the gradients of the tail's inputs from earlier segments (and of head outputs made earlier).
        let mut grads: HashMap<String, Tensor> = HashMap::new();
        let (mut env, mut leaves) = self.run_tail_with_leaves(recomputed, &boundary, &cut_names)?;
        let mut heads = Vec::with_capacity(self.partition.head_outputs.len());
        for name in &self.partition.head_outputs {
            if let Some(t) = env.get(name) {
                heads.push(t.shallow_clone());
                continue;
            }
            let value = boundary.get(name).ok_or_else(|| Error::UnknownTensor { name: name.clone() })?;
            let leaf = value.detach().set_requires_grad(true);
            leaves.push((name.clone(), leaf.shallow_clone()));
            heads.push(leaf);
        }
        let loss = loss(&heads)?;
        loss.f_backward()?;
        drop(heads);
        env.clear();
        for (name, leaf) in leaves {
            let g = leaf.grad();
            if g.defined() {
                accumulate(&mut grads, &name, g);
            }
        }
        for segment in &segments[recomputed..] {
            for name in &segment.outputs {
                boundary.remove(name);
            }
        }
        // 3. The other segments in reverse: recompute with autograd, backward seeded with the
        // output gradients.
        for index in (0..recomputed).rev() {
            let segment = &segments[index];
            let (env, leaves) = self.run_with_leaves(index..index + 1, &boundary, &cut_names)?;
            let (mut outputs, mut seeds) = (Vec::new(), Vec::new());
            for name in &segment.outputs {
                let (Some(out), Some(grad)) = (env.get(name), grads.remove(name)) else { continue };
                if out.requires_grad() {
                    outputs.push(out.shallow_clone());
                    seeds.push(grad);
                }
            }
            drop(env);
            crate::foreach::backward(&outputs.iter().collect::<Vec<_>>(), &seeds.iter().collect::<Vec<_>>())?;
            drop((outputs, seeds));
            for (name, leaf) in leaves {
                let g = leaf.grad();
                if g.defined() {
                    accumulate(&mut grads, &name, g);
                }
            }
            // This segment's inputs from earlier segments stay in `boundary` for them; its outputs
            // are no longer needed.
            for name in &segment.outputs {
                boundary.remove(name);
            }
        }
        Ok(loss.f_double_value(&[])?)
    }

    /// How many segments, from the first, the checkpointed backward recomputes
    /// ([`Partition::recomputed`]); the rest (the kept tail) run once with autograd.
    fn recomputed(&self) -> usize {
        self.partition.recomputed()
    }

    /// The kept tail, segments `from..`, run with autograd (see [`Student::run_with_leaves`]), the
    /// head outputs kept.
    #[allow(clippy::type_complexity)]
    fn run_tail_with_leaves(
        &self,
        from: usize,
        boundary: &HashMap<String, Tensor>,
        cut_names: &HashSet<&str>,
    ) -> Result<(HashMap<String, Tensor>, Vec<(String, Tensor)>)> {
        self.run_with_leaves(from..self.partition.segments.len(), boundary, cut_names)
    }

    /// Segments `range` run in order with autograd on their inputs from `boundary`: each input that
    /// an earlier segment made (not a cut tensor, floating point) becomes a leaf whose gradient is
    /// read after the backward. Keeps the segments' outputs and the head outputs in the returned
    /// environment.
    #[allow(clippy::type_complexity)]
    fn run_with_leaves(
        &self,
        range: std::ops::Range<usize>,
        boundary: &HashMap<String, Tensor>,
        cut_names: &HashSet<&str>,
    ) -> Result<(HashMap<String, Tensor>, Vec<(String, Tensor)>)> {
        let segments = &self.partition.segments[range.clone()];
        let made: HashSet<&str> = segments.iter().flat_map(|s| &s.outputs).map(String::as_str).collect();
        let mut env = HashMap::new();
        let mut leaves = Vec::new();
        for name in segments.iter().flat_map(|s| &s.inputs) {
            if made.contains(name.as_str()) || env.contains_key(name) {
                continue;
            }
            let value = boundary.get(name).ok_or_else(|| Error::UnknownTensor { name: name.clone() })?;
            let needs_grad = !cut_names.contains(name.as_str()) && value.is_floating_point();
            let leaf =
                if needs_grad { value.detach().set_requires_grad(true) } else { value.shallow_clone() };
            if needs_grad {
                leaves.push((name.clone(), leaf.shallow_clone()));
            }
            env.insert(name.clone(), leaf);
        }
        // Every segment's inputs and outputs stay until the last segment has run (a tensor that two
        // of them read must not go after the first).
        let mut keep: HashSet<&str> = made.clone();
        keep.extend(segments.iter().flat_map(|s| &s.inputs).map(String::as_str));
        keep.extend(self.partition.head_outputs.iter().map(String::as_str));
        for index in range {
            self.run_segment(index, &mut env, &keep)?;
        }
        Ok((env, leaves))
    }
}

fn accumulate(grads: &mut HashMap<String, Tensor>, name: &str, grad: Tensor) {
    match grads.remove(name) {
        Some(g) => {
            grads.insert(name.to_string(), g + grad);
        }
        None => {
            grads.insert(name.to_string(), grad);
        }
    }
}

/// Which device to train on: `cuda` when libtorch sees one, else the CPU.
pub fn default_device() -> Device {
    Device::cuda_if_available()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_errors_list_valid_points() {
        let model =
            Model::load(concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/demo/yolov8n-shapes-160.onnx"))
                .expect("demo model");
        let e = Student::new(&model, Trainable::Freeze(23), Device::Cpu).expect_err("23 > head").to_string();
        assert!(e.contains("freeze=23") && e.contains("22 is head") && e.contains("neck+head"), "{e}");
    }
}
