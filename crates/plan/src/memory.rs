//! The memory estimate of one training configuration, by component, from the graph itself.
//!
//! A training process holds, at its worst moment:
//! - **state** for the whole run: the runtime (libtorch, ONNX Runtime, per device preset), the
//!   weights (every copy the process keeps), the trainable parameters' gradients, the optimiser's
//!   state, the averaged weights (EMA and the starting weights), the feature cache's pages;
//! - plus the largest of three **phases**:
//!   - trunk: the input batch and the frozen trunk's live tensors under no-grad (its cut included);
//!   - head: the cut, the activations autograd keeps (plain), or the segment boundaries plus one
//!     recomputed segment (checkpointed), the gradient buffers of backward, the loss' temporaries;
//!   - eval (each epoch's end): the written-back model and ONNX Runtime's session of it, its live
//!     tensors at batch 1.
//!
//! Activations come from [`crate::graph_memory`]: the executor's freeing rule simulated over the
//! graph's inferred shapes, with what libtorch's autograd saves per op ([`crate::saved`]).

use std::collections::{HashMap, HashSet};

use headroom_onnx::inspect::Inspection;
use headroom_onnx::{Dim, Graph, Model, Partition, Trainable};
use serde::Serialize;

use crate::Error;
pub use crate::choice::{Optimizer, TrunkRuntime};
use crate::graph_memory::{FLOAT_BYTES, Storages, node_backward, node_saved, requiring_grad, simulate};

/// One training configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Setup {
    /// What trains.
    pub trainable: Trainable,
    /// Images per pass.
    pub batch: usize,
    /// Nominal batch (accumulation keeps it).
    pub nbs: usize,
    /// Input `[height, width]`.
    pub imgsz: [u32; 2],
    /// Checkpointed segments.
    pub checkpoint: bool,
    /// Mixed precision (CUDA only).
    pub amp: bool,
    /// The optimiser.
    pub optimizer: Optimizer,
    /// What runs the trunk.
    pub trunk: TrunkRuntime,
    /// Cached trunk outputs: no trunk runs during epochs.
    pub cache_features: bool,
    /// Objects per image the loss' assigner is sized for.
    pub objects: usize,
    /// Training images (the feature cache's size).
    pub images: usize,
    /// Augmentation that changes the trunk's input pixels (mosaic, scale, translate, HSV): the
    /// feature cache cannot serve it, so the fit ladder skips that rung.
    pub augment: bool,
    /// A dense-distillation teacher running in the process on every batch (`--teacher`).
    pub teacher: Option<TeacherCost>,
    /// The next batch prepared (and run through the teacher) on a second thread while the
    /// student's pass runs (`--prefetch`): its working set sits beside the pass's.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub prefetch: bool,
    /// Bytes reading the data's largest frame holds at once (its file, its decoded pixels and any
    /// conversion copy: [`headroom_core::imageio::read_cost`]); 0 when the data is not known. A
    /// 13000² camera frame holds more than a 160-pixel model's whole training pass.
    #[serde(skip_serializing_if = "is_zero")]
    pub frame: u64,
}

impl Setup {
    /// The configuration a ladder starts from: `trainable` at `batch` (1–256), at `imgsz` (square)
    /// or the model's inspected size, without checkpointing.
    pub fn start(
        inspection: &Inspection,
        trainable: Trainable,
        imgsz: Option<u32>,
        batch: usize,
    ) -> Result<Setup, Error> {
        if !(1..=256).contains(&batch) {
            return Err(Error::Setup { reason: format!("--batch {batch} is not in [1, 256]") });
        }
        let [h, w] = inspection.inspected_size;
        let imgsz = match imgsz {
            Some(n) => [n, n],
            None => [h as u32, w as u32],
        };
        Ok(Setup { trainable, batch, imgsz, checkpoint: false, ..Setup::default() })
    }
}

/// A configuration in words, as a log line says what a plan chose: `all, batch 2, 640x640,
/// checkpointed, AMP, features cached` (the command line's flags are the CLI's to write).
impl std::fmt::Display for Setup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = match self.trainable {
            Trainable::Freeze(0) => "all".to_string(),
            other => other.to_string(),
        };
        write!(f, "{part}, batch {}, {}x{}", self.batch, self.imgsz[1], self.imgsz[0])?;
        f.write_str(if self.checkpoint { ", checkpointed" } else { ", not checkpointed" })?;
        if self.amp {
            f.write_str(", AMP")?;
        }
        if self.cache_features {
            f.write_str(", features cached")?;
        } else if !self.augment {
            f.write_str(", no augmentation")?;
        }
        Ok(())
    }
}

/// What a dense-distillation teacher adds to a training process, per [`Planner::teacher_cost`]: its
/// weights for the whole run, its forward under no-grad on each batch (a phase of its own, before
/// the student's), and its head outputs, which the loss holds through the student's passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TeacherCost {
    /// Bytes of the teacher's weights: one copy, in libtorch (the decoded model is dropped once the
    /// executor holds its tensors) or in ONNX Runtime's session alike (measured: docs/PLAN.md).
    pub weights: u64,
    /// Its live tensors at the worst node of one image's forward, input included.
    pub forward: u64,
    /// Its head outputs for one image (box distributions and class logits).
    pub outputs: u64,
}

impl TeacherCost {
    /// What the teacher at `path` adds at `imgsz` (`[height, width]`), as the planner counts it;
    /// errors name `--teacher`.
    pub fn of_file(path: &std::path::Path, imgsz: [u32; 2]) -> Result<TeacherCost, Error> {
        let refuse = |e: &dyn std::fmt::Display| Error::Setup { reason: format!("--teacher: {e}") };
        let model = Model::load(path).map_err(|e| refuse(&e))?;
        let inspection = headroom_onnx::inspect::inspect(&model).map_err(|e| refuse(&e))?;
        Planner::new(&model, &inspection, 0)
            .teacher_cost(imgsz)
            .map_err(|e| Error::Setup { reason: format!("--teacher {}: {e}", path.display()) })
    }
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            trainable: Trainable::Head,
            batch: 2,
            nbs: 64,
            imgsz: [640, 640],
            checkpoint: true,
            amp: false,
            optimizer: Optimizer::AdamW,
            trunk: TrunkRuntime::Ort,
            cache_features: false,
            objects: 16,
            images: 0,
            augment: false,
            teacher: None,
            prefetch: false,
            frame: 0,
        }
    }
}

/// Bytes by component (see the module docs); the peak is the state plus the larger phase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Components {
    /// libtorch, ONNX Runtime and (on a GPU) the CUDA context.
    pub runtime: u64,
    /// Every copy of the weights the process keeps.
    pub weights: u64,
    /// Gradients of the trainable parameters (fp32).
    pub gradients: u64,
    /// Optimiser state (SGD 1×, AdamW 2× the trainable parameters).
    pub optimizer: u64,
    /// Averaged weights (EMA) and the starting weights, 2× the trainable parameters; plus the
    /// fp16 weight casts autocast caches under AMP.
    pub averages: u64,
    /// What libtorch keeps after the first pass (oneDNN's kernels, primitive cache and scratchpad,
    /// the allocator's retained heap): [`WARMUP_BASE`] plus [`WARMUP_PER_CONV`] per trainable Conv.
    pub warmup: u64,
    /// The feature cache's pages a pass touches (one batch of fp16 cut tensors). The whole file
    /// ([`Estimate::cache_file`]) is file-backed page cache the kernel drops under pressure, so it
    /// is reported beside the peak, not in it.
    pub cache: u64,
    /// Trunk phase: the input batch.
    pub input: u64,
    /// Trunk phase: the trunk's live tensors at its worst node, cut included.
    pub trunk: u64,
    /// Head phase: the cut (trunk outputs the trainable part reads).
    pub cut: u64,
    /// Head phase: activations kept for backward (plain) or boundaries + one recomputed segment.
    pub activations: u64,
    /// Head phase: gradient buffers alive during backward, with what the loss keeps for it.
    pub backward: u64,
    /// Head phase: the loss' and assigner's temporaries at the loss' own peak.
    pub loss: u64,
    /// Evaluation phase (the end of each epoch): the written-back model's bytes and ONNX Runtime's
    /// session of it (two more copies of the weights) and its live tensors at batch 1.
    pub eval: u64,
    /// A dense-distillation teacher's weights (state, the whole run).
    pub teacher: u64,
    /// Freed memory the tensor allocator keeps resident for reuse: [`POOL_SLACK`] × the tensors it
    /// serves at the peak (libtorch's copy of the weights, gradients, optimiser state, averages and
    /// the larger pass phase). headroom's CPU pool keeps its free pages within that bound
    /// (`headroom_train::cpu_pool`); on a unified board's CUDA allocator the same margin is assumed.
    /// 0 on a discrete GPU, whose budget the planner counts without the host.
    pub allocator: u64,
    /// Teacher phase: the input batch and the teacher's live tensors under no-grad.
    pub teacher_pass: u64,
    /// The teacher's head outputs, held through the trunk and head phases.
    pub teacher_outputs: u64,
    /// With [`Setup::prefetch`]: the next batch being prepared beside the pass (the larger of the
    /// teacher phase and the prepared batch waiting with its teacher outputs; the input batch
    /// without a teacher). The teacher phase is then no phase of its own.
    #[serde(skip_serializing_if = "is_zero")]
    pub prefetch: u64,
    /// Reading the largest frame ([`Setup::frame`]): between passes on the training thread, beside
    /// the pass on the prefetch thread (then part of [`Components::prefetch`]), and at evaluation
    /// beside the written-back model. Host memory: 0 on a discrete GPU.
    #[serde(skip_serializing_if = "is_zero")]
    pub decode: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

impl Components {
    /// The run-long state.
    pub fn state(&self) -> u64 {
        self.runtime
            + self.weights
            + self.gradients
            + self.optimizer
            + self.averages
            + self.warmup
            + self.cache
            + self.teacher
            + self.allocator
    }

    /// The trunk phase (with the teacher's outputs the loss will read).
    pub fn trunk_phase(&self) -> u64 {
        self.input + self.trunk + self.teacher_outputs
    }

    /// The head phase (with the teacher's outputs the loss reads).
    pub fn head_phase(&self) -> u64 {
        self.cut + self.activations + self.backward.max(self.loss) + self.teacher_outputs
    }

    /// The larger of the training passes' phases: trunk, head, teacher, reading the data.
    fn pass_phase(&self) -> u64 {
        if self.prefetch > 0 {
            self.trunk_phase().max(self.head_phase()) + self.prefetch
        } else {
            self.trunk_phase().max(self.head_phase()).max(self.teacher_pass).max(self.decode)
        }
    }

    /// The estimated peak.
    pub fn peak(&self) -> u64 {
        self.state() + self.pass_phase().max(self.eval)
    }

    /// Which phase sets the peak: `trunk`, `head`, `teacher`, `data` (reading the largest frame)
    /// or `eval`.
    pub fn peak_phase(&self) -> &'static str {
        let (trunk, head) = (self.trunk_phase(), self.head_phase());
        if self.eval > self.pass_phase() {
            "eval"
        } else if self.prefetch == 0 && self.decode > trunk.max(head).max(self.teacher_pass) {
            "data"
        } else if self.prefetch == 0 && self.teacher_pass > trunk.max(head) {
            "teacher"
        } else if trunk > head {
            "trunk"
        } else {
            "head"
        }
    }

    /// The peak of the training passes (evaluation left out) less what is resident once the model
    /// is loaded (runtime and weights): what `checkpoint_memory --window step` measures.
    /// The allocator's margin is left out: the probe runs with glibc's fixed threshold.
    pub fn training_peak(&self) -> u64 {
        self.state() - self.runtime - self.weights - self.allocator + self.pass_phase()
    }

    /// `(name, bytes)` of what makes up the peak, in a fixed order (the smaller phase shown as 0).
    pub fn at_peak(&self) -> Vec<(&'static str, u64)> {
        let at = self.peak_phase();
        let phase = |v: u64, in_trunk: bool| {
            let this = if in_trunk { "trunk" } else { "head" };
            if at == this { v } else { 0 }
        };
        vec![
            ("runtime", self.runtime),
            ("weights", self.weights),
            ("gradients", self.gradients),
            ("optimizer", self.optimizer),
            ("averages", self.averages),
            ("warmup", self.warmup),
            ("cache", self.cache),
            ("teacher", self.teacher),
            ("allocator", self.allocator),
            ("teacher pass", if at == "teacher" { self.teacher_pass } else { 0 }),
            ("decode", if at == "data" { self.decode } else { 0 }),
            ("teacher outputs", if at == "trunk" || at == "head" { self.teacher_outputs } else { 0 }),
            ("prefetch", if at == "trunk" || at == "head" { self.prefetch } else { 0 }),
            ("input", phase(self.input, true)),
            ("trunk", phase(self.trunk, true)),
            ("cut", phase(self.cut, false)),
            ("activations", phase(self.activations, false)),
            ("backward", phase(if self.backward >= self.loss { self.backward } else { 0 }, false)),
            ("loss", phase(if self.backward >= self.loss { 0 } else { self.loss }, false)),
            ("eval", if at == "eval" { self.eval } else { 0 }),
        ]
    }
}

/// The estimate of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The configuration.
    pub setup: Setup,
    /// Bytes by component.
    pub components: Components,
    /// The estimated peak, bytes.
    pub peak: u64,
    /// Trainable parameters (elements).
    pub trainable_parameters: u64,
    /// Activation bytes autograd keeps, by op type (plain backward, whole batch).
    pub saved_by_op: Vec<(String, u64)>,
    /// Size of the feature cache's file (fp16 cut of every image, both flips), 0 without it.
    pub cache_file: u64,
}

/// A model prepared for estimates: inspection and, per input size, the graph with concrete shapes.
#[derive(Debug)]
pub struct Planner<'a> {
    model: &'a Model,
    inspection: &'a Inspection,
    runtime: u64,
    discrete: bool,
    graphs: HashMap<[u32; 2], (Graph, Storages)>,
}

/// Head-sized temporaries alive at the loss' peak (crates/train/src/loss): the permuted contiguous
/// copies of the box distributions and class logits, the DFL softmax, the detached sigmoid the
/// assigner reads. Counted from the code, confirmed by measurement (docs/PLAN.md).
pub const LOSS_FORWARD_COPIES: u64 = 4;
/// Head-sized tensors the loss keeps into backward, with the head outputs' gradients: the softmax
/// result and the BCE input autograd saves, and the gradient flowing back.
pub const LOSS_SAVED_COPIES: u64 = 2;
/// `[objects, anchors]` float matrices alive at once in the assigner (the in-box mask, CIoU
/// overlaps, alignment metric; the others are made and freed one by one). Measured: 1 → 32
/// objects per image at 640 added 2.7 MB, 2.6 matrices.
pub const LOSS_ASSIGNER_MATRICES: u64 = 3;
/// The part of [`Components::warmup`] that does not depend on the model (x86, libtorch 2.13 CPU).
pub const WARMUP_BASE: u64 = 27 << 20;
/// How far above the most bytes ever in tensors the CPU pool lets its resident pages go before it
/// returns its free ones: 0.25 (`headroom_train::cpu_pool::DEFAULT_SLACK` is this constant;
/// docs/BENCHMARKS.md "The allocator"). The planner counts it as [`Components::allocator`].
pub const POOL_SLACK: f64 = 0.25;
/// The part of [`Components::warmup`] per trainable Conv (its backward kernels).
pub const WARMUP_PER_CONV: u64 = 150 << 10;

impl<'a> Planner<'a> {
    /// A planner for `model` (inspected as `inspection`) with `runtime` bytes of runtime overhead.
    pub fn new(model: &'a Model, inspection: &'a Inspection, runtime: u64) -> Planner<'a> {
        Planner { model, inspection, runtime, discrete: false, graphs: HashMap::new() }
    }

    /// The planner of a run on `board` training on `runs_on`: the runtime's fixed cost there
    /// ([`DevicePreset::runtime_bytes_on`]), and [`Planner::discrete`] on a GPU of the board's own
    /// memory. `headroom plan`, `--plan auto` and a run's recorded estimate all set it up so.
    pub fn on(
        model: &'a Model,
        inspection: &'a Inspection,
        board: &crate::DevicePreset,
        runs_on: crate::RunsOn,
    ) -> Planner<'a> {
        let planner = Planner::new(model, inspection, board.runtime_bytes_on(runs_on.is_gpu()));
        if runs_on.is_gpu() && !board.unified { planner.discrete() } else { planner }
    }

    /// For a discrete GPU, whose budget is its own memory: only what lives on the device counts —
    /// libtorch's copy of the weights (the protobuf, the IR, the file's bytes and ONNX Runtime's
    /// CPU sessions stay in host memory), no evaluation phase (ONNX Runtime on the CPU). On unified
    /// memory (Jetson, a CPU) everything shares the one pool and counts.
    pub fn discrete(mut self) -> Planner<'a> {
        self.discrete = true;
        self
    }

    /// The input sizes the export accepts: `None` for any multiple of the largest stride (dynamic),
    /// else the fixed `[h, w]`.
    pub fn fixed_size(&self) -> Option<[u32; 2]> {
        let s = &self.inspection.input_shape;
        match (s.get(2).and_then(Dim::known), s.get(3).and_then(Dim::known)) {
            (Some(h), Some(w)) => Some([h as u32, w as u32]),
            _ => None,
        }
    }

    /// The largest stride (input sizes must be multiples of it).
    pub fn stride(&self) -> u32 {
        self.inspection.strides.iter().copied().max().unwrap_or(32) as u32
    }

    fn graph(&mut self, imgsz: [u32; 2]) -> Result<&(Graph, Storages), Error> {
        let stride = self.stride();
        if let Some(fixed) = self.fixed_size() {
            if fixed != imgsz {
                return Err(Error::ImageSize {
                    imgsz,
                    reason: format!(
                        "the export's input is fixed at {}x{}; another size needs an export at that size \
                         (or dynamic=True)",
                        fixed[0], fixed[1]
                    ),
                });
            }
        } else if imgsz[0] == 0
            || imgsz[1] == 0
            || !imgsz[0].is_multiple_of(stride)
            || !imgsz[1].is_multiple_of(stride)
        {
            return Err(Error::ImageSize {
                imgsz,
                reason: format!("not a positive multiple of the largest stride {stride}"),
            });
        }
        if !self.graphs.contains_key(&imgsz) {
            let mut dims = HashMap::new();
            for (d, v) in self.inspection.input_shape.iter().zip([1i64, 3, imgsz[0] as i64, imgsz[1] as i64])
            {
                if let Dim::Symbol(s) = d {
                    dims.insert(s.clone(), v);
                }
            }
            let graph = if dims.is_empty() {
                self.model.graph.clone()
            } else {
                self.model.graph_with_dims(&dims).map_err(|source| Error::Model { source })?
            };
            let storages = Storages::new(&graph);
            self.graphs.insert(imgsz, (graph, storages));
        }
        self.graphs.get(&imgsz).ok_or(Error::ImageSize { imgsz, reason: "no graph".into() })
    }

    /// What this model costs as a dense-distillation teacher at `imgsz` (`[height, width]`).
    pub fn teacher_cost(&mut self, imgsz: [u32; 2]) -> Result<TeacherCost, Error> {
        let inspection = self.inspection;
        let (graph, storages) = self.graph(imgsz)?;
        let weights: u64 =
            graph.initializer_dims.values().map(|d| d.iter().product::<usize>() as u64 * FLOAT_BYTES).sum();
        let all_nodes: Vec<usize> = (0..graph.nodes.len()).collect();
        let input = std::slice::from_ref(&inspection.input);
        let forward = simulate(graph, storages, &[&all_nodes], input, &HashSet::new(), None).peak;
        let outputs: u64 = inspection
            .head
            .levels
            .iter()
            .flat_map(|l| [&l.box_output, &l.class_output])
            .map(|name| storages.bytes_of(name))
            .sum();
        Ok(TeacherCost { weights, forward, outputs })
    }

    /// The freeze point of `trainable` (modules `0..N` frozen), if the model has it.
    pub fn freeze_index(&self, trainable: Trainable) -> Option<usize> {
        self.inspection
            .freeze_points
            .iter()
            .find(|p| match trainable {
                Trainable::Freeze(n) => p.freeze == n,
                // The activations of training everything (its backward runs through every
                // module); the head's weights and the scales and shifts are few.
                Trainable::Affine => p.freeze == 0,
                Trainable::Head => p.name.as_deref() == Some("head"),
                Trainable::NeckHead => p.name.as_deref() == Some("neck+head"),
            })
            .map(|p| p.freeze)
    }

    /// The largest batch `trainable` can train at: 1 when the export's batch is fixed at 1 and the
    /// trainable part reshapes with it (attention in 11, v10, 26: `headroom train` refuses more),
    /// else unlimited.
    pub fn batch_limit(&mut self, trainable: Trainable, imgsz: [u32; 2]) -> Result<usize, Error> {
        let fixed_one = self.inspection.input_shape.first() == Some(&Dim::Known(1));
        let inspection = self.inspection;
        let (graph, _) = self.graph(imgsz)?;
        let partition = Partition::new(graph, inspection, trainable)?;
        let reshapes = partition
            .segments
            .iter()
            .flat_map(|s| &s.nodes)
            .any(|&i| matches!(graph.nodes[i].op, headroom_onnx::Op::Reshape(_)));
        Ok(if fixed_one && reshapes { 1 } else { usize::MAX })
    }

    /// Estimates `setup`.
    pub fn estimate(&mut self, setup: &Setup) -> Result<Estimate, Error> {
        if setup.batch == 0 {
            return Err(Error::Setup { reason: "batch must be at least 1".into() });
        }
        let inspection = self.inspection;
        let (runtime, discrete) = (self.runtime, self.discrete);
        let (graph, storages) = self.graph(setup.imgsz)?;
        let partition =
            Partition::new(graph, inspection, setup.trainable).map_err(|source| Error::Model { source })?;
        let b = setup.batch as u64;
        let weight_bytes: u64 =
            graph.initializer_dims.values().map(|d| d.iter().product::<usize>() as u64 * FLOAT_BYTES).sum();
        let trainable_elements: u64 = partition
            .parameters
            .iter()
            .filter_map(|p| graph.initializer_dims.get(p))
            .map(|d| d.iter().product::<usize>() as u64)
            .sum();
        let trainable_bytes = trainable_elements * FLOAT_BYTES;
        // Copies while training: libtorch's and the file's bytes kept for write-back (the decoded
        // protobuf's and the IR's are released once the student is made); ONNX Runtime's session
        // holds the trunk's once more.
        let ort_session =
            setup.trunk == TrunkRuntime::Ort && !setup.cache_features && !partition.trunk.is_empty();
        let copies = if discrete {
            1
        } else if ort_session {
            3
        } else {
            2
        };
        let amp_casts = if setup.amp { trainable_elements * 2 } else { 0 };
        let grad = requiring_grad(graph, &partition);
        let cut_bytes: u64 =
            distinct(storages, partition.cut.iter()).iter().map(|o| storages.owner_bytes(o)).sum::<u64>() * b;
        let (trunk_bytes, input_bytes) = if setup.cache_features || partition.trunk.is_empty() {
            (0, 0)
        } else {
            let (trunk, input) = trunk_phase(graph, storages, &partition, &inspection.input);
            (trunk * b, input * b)
        };
        let head = head_phase(graph, storages, &partition, &grad, setup.checkpoint);
        let all_nodes: Vec<usize> = (0..graph.nodes.len()).collect();
        let input = std::slice::from_ref(&inspection.input);
        let inference = simulate(graph, storages, &[&all_nodes], input, &HashSet::new(), None).peak;
        let act_scale = |v: u64| if setup.amp { v / 2 } else { v };
        let (loss, loss_saved) = loss_bytes(inspection, storages, &partition, setup);
        let trainable_convs = partition
            .segments
            .iter()
            .flat_map(|s| &s.nodes)
            .filter(|&&i| matches!(graph.nodes[i].op, headroom_onnx::Op::Conv(_)))
            .count() as u64;
        // fp16 on disk: half the fp32 cut; both flips of every image.
        let (cache, cache_file) = if setup.cache_features {
            (cut_bytes / 2, cut_bytes / b / 2 * setup.images as u64 * 2)
        } else {
            (0, 0)
        };
        let mut components = Components {
            runtime,
            weights: weight_bytes * copies,
            gradients: trainable_bytes,
            optimizer: trainable_bytes * if setup.optimizer == Optimizer::AdamW { 2 } else { 1 },
            averages: trainable_bytes * 2 + amp_casts,
            warmup: WARMUP_BASE + WARMUP_PER_CONV * trainable_convs,
            cache,
            input: input_bytes,
            trunk: trunk_bytes,
            cut: cut_bytes,
            activations: act_scale(head.activations * b),
            backward: act_scale(head.backward * b) + loss_saved * b,
            loss: loss * b,
            eval: if discrete { 0 } else { weight_bytes * 2 + inference },
            teacher: setup.teacher.map_or(0, |t| t.weights),
            teacher_pass: setup.teacher.map_or(0, |t| t.forward * b),
            teacher_outputs: setup.teacher.map_or(0, |t| t.outputs * b),
            allocator: 0,
            prefetch: 0,
            decode: 0,
        };
        if setup.prefetch && !setup.cache_features {
            components.prefetch = components.teacher_pass.max(components.input + components.teacher_outputs);
        }
        if !discrete {
            let served = weight_bytes
                + components.gradients
                + components.optimizer
                + components.averages
                + components.pass_phase();
            components.allocator = (served as f64 * POOL_SLACK) as u64;
            // The frame is glibc's (a block this size is mapped and unmapped whole), not the
            // tensor allocator's: counted after its slack. The prefetch thread reads it beside the
            // pass; with the feature cache no image is read while training.
            if !setup.cache_features {
                components.decode = setup.frame;
                components.prefetch = components.prefetch.max(if setup.prefetch { setup.frame } else { 0 });
            }
            components.eval = weight_bytes * 2 + inference.max(setup.frame);
        }
        let plain = if setup.checkpoint {
            head_phase(graph, storages, &partition, &grad, false)
        } else {
            head.clone()
        };
        Ok(Estimate {
            setup: setup.clone(),
            peak: components.peak(),
            components,
            trainable_parameters: trainable_elements,
            saved_by_op: plain.by_op.into_iter().map(|(k, v)| (k, v * b)).collect(),
            cache_file,
        })
    }
}

/// The trunk under no-grad at batch 1: its live tensors at the worst node less the input, and the
/// input (the caller holds the batch while the trunk runs; the cut is kept for the trainable part).
fn trunk_phase(graph: &Graph, storages: &Storages, partition: &Partition, input: &str) -> (u64, u64) {
    let mut keep: HashSet<&str> = partition.cut.iter().map(String::as_str).collect();
    keep.insert(input);
    let initial = [input.to_string()];
    let live = simulate(graph, storages, &[&partition.trunk], &initial, &keep, None);
    let input_bytes = storages.bytes_of(input);
    (live.peak.saturating_sub(input_bytes), input_bytes)
}

fn distinct<'s>(storages: &'s Storages, names: impl Iterator<Item = &'s String>) -> Vec<&'s str> {
    let mut owners: Vec<&str> = Vec::new();
    for n in names {
        if let Some(o) = storages.base(n)
            && !owners.contains(&o)
        {
            owners.push(o);
        }
    }
    owners
}

/// The head phase at batch 1, less the cut: activations and backward buffers.
#[derive(Debug, Clone, Default)]
struct HeadPhase {
    activations: u64,
    backward: u64,
    by_op: Vec<(String, u64)>,
}

fn head_phase(
    graph: &Graph,
    storages: &Storages,
    partition: &Partition,
    grad: &HashSet<String>,
    checkpoint: bool,
) -> HeadPhase {
    let cut: HashSet<&str> = distinct(storages, partition.cut.iter()).into_iter().collect();
    let cut_total = storages.total(cut.iter().copied());
    let boundary_names: HashSet<&str> = partition
        .segments
        .iter()
        .flat_map(|s| s.inputs.iter().chain(&s.outputs))
        .map(String::as_str)
        .collect();
    let lists: Vec<&[usize]> = partition.segments.iter().map(|s| s.nodes.as_slice()).collect();
    let initial: Vec<String> = partition.cut.clone();
    let mut by_op: HashMap<String, u64> = HashMap::new();
    let mut counted: HashSet<String> = HashSet::new();
    for segment in &partition.segments {
        for &i in &segment.nodes {
            let (owners, extra) = node_saved(graph, storages, grad, i);
            let fresh: u64 =
                owners.iter().filter(|o| counted.insert((*o).clone())).map(|o| storages.owner_bytes(o)).sum();
            *by_op.entry(graph.nodes[i].op.op_type().to_string()).or_default() += fresh + extra;
        }
    }
    let mut by_op: Vec<(String, u64)> = by_op.into_iter().filter(|(_, v)| *v > 0).collect();
    by_op.sort_by_key(|(_, v)| std::cmp::Reverse(*v));
    let transient = |nodes: &[usize]| nodes.iter().map(|&i| node_backward(graph, storages, grad, i)).max();
    if !checkpoint {
        let live = simulate(graph, storages, &lists, &initial, &boundary_names, Some(grad));
        let at_end = storages.total(live.alive_at_end.iter().map(String::as_str)) + live.saved_extra;
        let kept = at_end.max(live.peak).saturating_sub(cut_total);
        let backward = lists.iter().filter_map(|l| transient(l)).max().unwrap_or(0);
        return HeadPhase { activations: kept, backward, by_op };
    }
    // Checkpointed: boundaries stay; the kept tail (`Partition::recomputed`) runs once with autograd,
    // its saved activations alive together; then the other segments recompute one at a time in
    // reverse.
    let forward = simulate(graph, storages, &lists, &initial, &boundary_names, None);
    let mut best =
        HeadPhase { activations: forward.peak.saturating_sub(cut_total), backward: 0, by_op: by_op.clone() };
    let groups = recompute_groups(partition);
    let segments = &groups;
    let mut pending: HashSet<String> =
        partition.head_outputs.iter().filter_map(|n| storages.base(n).map(str::to_string)).collect();
    for index in (0..segments.len()).rev() {
        let segment = &segments[index];
        let alive: HashSet<String> = segments[..=index]
            .iter()
            .flat_map(|s| s.outputs.iter())
            .chain(partition.cut.iter())
            .filter_map(|n| storages.base(n).map(str::to_string))
            .collect();
        let recompute = simulate(
            graph,
            storages,
            &[&segment.nodes],
            &segment.inputs,
            &segment.outputs.iter().map(String::as_str).collect(),
            Some(grad),
        );
        let extra_saved: u64 = recompute
            .alive_at_end
            .iter()
            .filter(|o| !alive.contains(*o))
            .map(|o| storages.owner_bytes(o))
            .sum::<u64>()
            + recompute.saved_extra;
        let leaves: u64 = segment
            .inputs
            .iter()
            .filter(|n| !cut.contains(storages.base(n).unwrap_or_default()))
            .map(|n| storages.bytes_of(n))
            .sum();
        let grads = storages.total(pending.iter().map(String::as_str)) + leaves;
        let activations = storages.total(alive.iter().map(String::as_str)) - cut_total + extra_saved;
        let backward = grads + transient(&segment.nodes).unwrap_or(0);
        if activations + backward > best.activations + best.backward {
            best = HeadPhase { activations, backward, by_op: by_op.clone() };
        }
        for o in &segment.outputs {
            if let Some(base) = storages.base(o) {
                pending.remove(base);
            }
        }
        for i in segment.inputs.iter().filter_map(|n| storages.base(n)).filter(|b| !cut.contains(b)) {
            pending.insert(i.to_string());
        }
    }
    best
}

/// The segments as a checkpointed backward recomputes them: each recomputed segment alone, then
/// the kept tail as one (its nodes in order, its inputs from before it, its outputs).
fn recompute_groups(partition: &Partition) -> Vec<headroom_onnx::Segment> {
    let split = partition.recomputed();
    let mut groups: Vec<headroom_onnx::Segment> = partition.segments[..split].to_vec();
    let tail = &partition.segments[split..];
    if !tail.is_empty() {
        let made: HashSet<&str> = tail.iter().flat_map(|s| &s.outputs).map(String::as_str).collect();
        let mut inputs: Vec<String> = Vec::new();
        for name in tail.iter().flat_map(|s| &s.inputs) {
            if !made.contains(name.as_str()) && !inputs.contains(name) {
                inputs.push(name.clone());
            }
        }
        groups.push(headroom_onnx::Segment {
            module: tail.last().and_then(|s| s.module),
            nodes: tail.iter().flat_map(|s| s.nodes.iter().copied()).collect(),
            inputs,
            outputs: tail.iter().flat_map(|s| s.outputs.iter().cloned()).collect(),
        });
    }
    groups
}

/// The loss' temporaries per image at its peak, and what it keeps into backward (see
/// [`LOSS_FORWARD_COPIES`]).
fn loss_bytes(
    inspection: &Inspection,
    storages: &Storages,
    partition: &Partition,
    setup: &Setup,
) -> (u64, u64) {
    let heads: u64 = partition.head_outputs.iter().map(|h| storages.bytes_of(h)).sum();
    let anchors: u64 = inspection
        .strides
        .iter()
        .map(|s| u64::from(setup.imgsz[0]) / *s as u64 * (u64::from(setup.imgsz[1]) / *s as u64))
        .sum();
    let assigner = anchors * setup.objects as u64 * FLOAT_BYTES * LOSS_ASSIGNER_MATRICES;
    (heads * LOSS_FORWARD_COPIES + assigner, heads * LOSS_SAVED_COPIES)
}
