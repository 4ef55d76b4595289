//! The training loop of one run: epochs of shuffled batches through the frozen trunk and the
//! (checkpointed) trainable head, Ultralytics' loss (plus distillation on a teacher's soft scores),
//! gradients accumulated to a nominal batch and clipped, SGD or AdamW with warmup and a linear or
//! cosine learning-rate decay, an exponential moving average of the weights (what is written out and
//! evaluated), skipped non-finite steps, and checkpoints every N optimiser steps that a run resumes
//! from exactly. Evaluation and writing ONNX files belong to the caller (the CLI).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use headroom_core::dataset::ImageRecord;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::cache::FeatureCache;
use crate::data::{SoftTargets, augmented_batch, targets_for};
use crate::loss::{Distill, LossConfig, detection_loss_with};
use crate::memory_guard::{MemoryCap, StepDown};
use crate::optim::{AdamW, Sgd, clip_grad_norm};
use crate::student::Cut;
use crate::{Error, Result, Student};

/// The optimiser.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// SGD with Nesterov momentum.
    Sgd,
    /// AdamW (beta1 = the momentum).
    AdamW,
}

/// Everything that shapes a run (saved with it; see docs/TRAIN.md for the defaults' reasons).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Epochs.
    pub epochs: usize,
    /// Images per forward pass (1–2 is the point on a small device).
    pub batch: usize,
    /// Nominal batch: gradients are accumulated over `round(nbs / batch)` passes per step
    /// (Ultralytics' `nbs`, 64).
    pub nbs: usize,
    /// The optimiser.
    pub optimizer: OptimizerKind,
    /// Initial learning rate.
    pub lr0: f64,
    /// Final learning rate as a fraction of `lr0`.
    pub lrf: f64,
    /// Cosine decay from `lr0` to `lr0 · lrf` instead of linear (Ultralytics' `cos_lr`).
    pub cos_lr: bool,
    /// SGD momentum (Nesterov), or AdamW's beta1.
    pub momentum: f64,
    /// Weight decay at the nominal batch (scaled by `batch · accumulate / nbs`), weights only.
    pub weight_decay: f64,
    /// Warmup length in epochs (at least 100 iterations, as Ultralytics).
    pub warmup_epochs: f64,
    /// Momentum at the start of warmup.
    pub warmup_momentum: f64,
    /// Largest L2 norm of the gradients at a step (Ultralytics: 10); 0 turns clipping off.
    pub max_grad_norm: f64,
    /// Probability of a left-right flip per image.
    pub flip: f64,
    /// Colour, scale, translate and mosaic augmentation (all off by default).
    #[serde(default)]
    pub augment: crate::augment::AugmentConfig,
    /// Gain of the distillation term on the teacher's soft scores (0: off).
    pub kd: f64,
    /// Strength of a pull toward the starting weights (L2-SP: `anchor/2 · Σ (w − w₀)²` added to
    /// the loss of each step, on weights and biases), against forgetting; 0: off.
    #[serde(default)]
    pub anchor: f64,
    /// Recompute the head's segments in backward instead of keeping their activations.
    pub checkpoint: bool,
    /// Mixed precision on CUDA: autocast (fp16 where libtorch deems it safe) with a dynamic loss
    /// scale (×2 every 2000 clean steps, ×0.5 and the step skipped on inf/NaN gradients).
    /// Ignored on the CPU (the CLI says so and records false).
    #[serde(default)]
    pub amp: bool,
    /// Optimiser steps between checkpoints within an epoch (0: at epoch ends only).
    pub save_period: u64,
    /// Seed of the data order and the augmentation.
    pub seed: u64,
    /// Model input width and height.
    pub imgsz: [u32; 2],
    /// Non-finite losses in a row that stop the run.
    pub max_bad_steps: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 10,
            batch: 2,
            nbs: 64,
            optimizer: OptimizerKind::Sgd,
            lr0: 1e-4,
            lrf: 0.01,
            cos_lr: false,
            momentum: 0.937,
            weight_decay: 5e-4,
            warmup_epochs: 3.0,
            warmup_momentum: 0.8,
            max_grad_norm: 10.0,
            flip: 0.5,
            augment: crate::augment::AugmentConfig::default(),
            kd: 0.0,
            anchor: 0.0,
            checkpoint: true,
            amp: false,
            save_period: 10,
            seed: 0,
            imgsz: [640, 640],
            max_bad_steps: 10,
        }
    }
}

impl TrainConfig {
    /// Ultralytics' `optimizer=auto` rule for `images` training images: SGD at 0.01 for runs of
    /// more than 10,000 iterations, else AdamW at `0.002 · 5 / (4 + nc)` with momentum 0.9.
    pub fn with_auto_optimizer(mut self, images: usize, nc: usize) -> TrainConfig {
        let iterations = images.div_ceil(self.batch.max(self.nbs)) * self.epochs;
        if iterations > 10_000 {
            self.optimizer = OptimizerKind::Sgd;
            self.lr0 = 0.01;
            self.momentum = 0.937;
        } else {
            self.optimizer = OptimizerKind::AdamW;
            self.lr0 = (0.002 * 5.0 / (4.0 + nc as f64) * 1e6).round() / 1e6;
            self.momentum = 0.9;
        }
        self
    }

    /// The learning-rate factor at the start of `epoch` (linear or cosine from 1 to `lrf`).
    pub fn lr_factor(&self, epoch: usize) -> f64 {
        let x = epoch as f64 / self.epochs as f64;
        if self.cos_lr {
            (1.0 - (x * std::f64::consts::PI).cos()) / 2.0 * (self.lrf - 1.0) + 1.0
        } else {
            (1.0 - x) * (1.0 - self.lrf) + self.lrf
        }
    }
}

/// What one epoch did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochStats {
    /// 0-based epoch.
    pub epoch: usize,
    /// Mean box, cls and dfl (or L1) terms (with gains) over the epoch's passes.
    pub loss: [f64; 3],
    /// Mean distillation term (with its gain).
    pub kd: f64,
    /// Learning rate of the weights at the end of the epoch.
    pub lr: f64,
    /// Passes whose loss was not finite (skipped).
    pub bad_steps: usize,
    /// Optimiser steps taken.
    pub optimizer_steps: u64,
    /// Seconds (over every process that worked on the epoch).
    pub seconds: f64,
    /// Where the seconds of this process went: [`PHASES`].
    pub phases: [f64; 5],
}

/// The phases of a pass timed in [`EpochStats::phases`]: data (read and augment images, or read
/// cached features), trunk, head (the trainable part's forward and backward, recomputation
/// included), loss, optimizer (clipping, the step, the EMA).
pub const PHASES: [&str; 5] = ["data", "trunk", "head", "loss", "optimizer"];

/// The state a run resumes from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Epochs finished.
    pub epochs_done: usize,
    /// Passes finished in the epoch in progress.
    pub pass: usize,
    /// Optimiser steps taken.
    pub optimizer_steps: u64,
    /// EMA updates.
    pub ema_updates: u64,
    /// Sums of the epoch in progress: box, cls, dfl, kd.
    pub sums: [f64; 4],
    /// Passes counted in `sums`.
    pub counted: usize,
    /// Skipped passes of the epoch in progress.
    pub bad: usize,
    /// Seconds spent on the epoch in progress.
    pub seconds: f64,
    /// The loss scale of mixed precision (0: not started).
    #[serde(default)]
    pub loss_scale: f64,
    /// Clean steps since the loss scale last changed.
    #[serde(default)]
    pub scale_steps: u64,
}

/// What happens when libtorch runs out of memory: the planner steps down (smaller batch, more
/// checkpointing) and the run continues; without a planner the run stops with what to change.
pub trait OutOfMemory {
    /// A configuration that needs less memory than `config`, or `None` to stop.
    fn step_down(&mut self, config: &TrainConfig) -> Option<TrainConfig>;
}

/// The hook that stops ([`crate::memory_guard::LadderStepDown`] steps down instead).
pub struct StopOnOutOfMemory;

impl OutOfMemory for StopOnOutOfMemory {
    fn step_down(&mut self, _config: &TrainConfig) -> Option<TrainConfig> {
        None
    }
}

/// Whether a libtorch error is an allocation failure.
pub fn is_out_of_memory(error: &Error) -> bool {
    let text = error.to_string();
    ["out of memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED", "std::bad_alloc"]
        .iter()
        .any(|needle| text.contains(needle))
}

enum Optimizer {
    Sgd(Sgd),
    AdamW(AdamW),
}

/// A run in progress.
pub struct Trainer<'a> {
    student: &'a Student,
    config: TrainConfig,
    loss: LossConfig,
    grids: Vec<(i64, i64)>,
    optimizer: Optimizer,
    ema: BTreeMap<String, Tensor>,
    progress: Progress,
    soft: SoftTargets,
    checkpoint_path: Option<PathBuf>,
    start_checkpoint: Option<PathBuf>,
    cache: Option<FeatureCache>,
    trunk: Option<RefCell<Box<ExternalTrunk<'a>>>>,
    phases: RefCell<[f64; 5]>,
    start: HashMap<String, Tensor>,
    out_of_memory: Option<Box<dyn OutOfMemory + 'a>>,
    memory_cap: Option<MemoryCap>,
    steps_down: Vec<StepDown>,
    passes_run: u64,
}

/// A trunk run elsewhere (ONNX Runtime on the trunk cut out of the same file): images in, cut out.
pub type ExternalTrunk<'a> = dyn FnMut(&Tensor) -> Result<Cut> + 'a;

const EMA_DECAY: f64 = 0.9999;
const EMA_TAU: f64 = 2000.0;

impl<'a> Trainer<'a> {
    /// A new run of `student` with `config`; `loss` describes the head.
    pub fn new(student: &'a Student, config: TrainConfig, loss: LossConfig) -> Result<Trainer<'a>> {
        if config.batch == 0 || config.epochs == 0 || config.nbs == 0 {
            return Err(Error::Data { reason: "epochs, batch and nbs must be at least 1".into() });
        }
        let inspection = student.inspection();
        let stride0 = inspection.strides.first().copied().unwrap_or(8);
        let grids: Vec<(i64, i64)> = inspection
            .strides
            .iter()
            .map(|s| (i64::from(config.imgsz[1]) / s, i64::from(config.imgsz[0]) / s))
            .collect();
        if i64::from(config.imgsz[0]) % stride0 != 0 || i64::from(config.imgsz[1]) % stride0 != 0 {
            return Err(Error::Data {
                reason: format!("input {:?} is not a multiple of stride {stride0}", config.imgsz),
            });
        }
        let accumulate = accumulate(&config);
        let weight_decay = config.weight_decay * (config.batch * accumulate) as f64 / config.nbs as f64;
        let optimizer = match config.optimizer {
            OptimizerKind::Sgd => Optimizer::Sgd(Sgd::new(config.lr0, config.momentum, true, weight_decay)),
            OptimizerKind::AdamW => Optimizer::AdamW(AdamW::new(config.momentum, weight_decay)),
        };
        let ema = student.parameters().into_iter().map(|(n, p)| (n.to_string(), p.detach().copy())).collect();
        Ok(Trainer {
            student,
            config,
            loss,
            grids,
            optimizer,
            ema,
            progress: Progress::default(),
            soft: SoftTargets::new(),
            checkpoint_path: None,
            start_checkpoint: None,
            cache: None,
            trunk: None,
            phases: RefCell::new([0.0; 5]),
            out_of_memory: None,
            memory_cap: None,
            steps_down: Vec::new(),
            passes_run: 0,
            start: student
                .parameters()
                .into_iter()
                .map(|(n, p)| (n.to_string(), p.detach().copy()))
                .collect(),
        })
    }

    /// Trains on cached trunk outputs (no image is read or run through the trunk during epochs).
    /// Refused when an augmentation changes the trunk's input (flips are cached both ways).
    pub fn set_feature_cache(&mut self, cache: FeatureCache) -> Result<()> {
        if self.config.augment.changes_pixels() {
            return Err(Error::Data {
                reason: "cached features are the trunk's outputs for fixed inputs: --mosaic, --scale, \
                         --translate and --hsv change those inputs; turn them off or drop --cache-features"
                    .into(),
            });
        }
        self.cache = Some(cache);
        Ok(())
    }

    /// Runs the frozen trunk with `trunk` instead of libtorch.
    pub fn set_trunk(&mut self, trunk: Box<ExternalTrunk<'a>>) {
        self.trunk = Some(RefCell::new(trunk));
    }

    /// The teacher's soft scores per image (for `kd`; see [`crate::data::SoftTargets`]).
    pub fn set_soft_targets(&mut self, soft: SoftTargets) {
        self.soft = soft;
    }

    /// Where checkpoints within an epoch go (every `save_period` optimiser steps).
    pub fn set_checkpoint_path(&mut self, path: &Path) {
        self.checkpoint_path = Some(path.to_path_buf());
    }

    /// What to do when memory runs out: with a hook that steps down, the trainer reloads the last
    /// checkpoint (see [`Trainer::set_checkpoint_path`]) in the new configuration and continues.
    pub fn set_out_of_memory(&mut self, hook: Box<dyn OutOfMemory + 'a>) {
        self.out_of_memory = Some(hook);
    }

    /// Saves the run's starting state to `path`: what a step down goes back to when memory runs
    /// out before the first checkpoint.
    pub fn save_start_checkpoint(&mut self, path: &Path) -> Result<()> {
        self.save_checkpoint(path)?;
        self.start_checkpoint = Some(path.to_path_buf());
        Ok(())
    }

    /// Checks `cap` after every pass; exceeding it is an out-of-memory error.
    pub fn set_memory_cap(&mut self, cap: MemoryCap) {
        self.memory_cap = Some(cap);
    }

    /// The steps down taken so far.
    pub fn steps_down(&self) -> &[StepDown] {
        &self.steps_down
    }

    /// Where the run stands.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Trains (the rest of) one epoch on `records`; `progress(pass, passes, components)` after
    /// each pass, components being box, cls, dfl and kd. When memory runs out (an allocation
    /// failure or the memory cap) and the out-of-memory hook steps down, the last checkpoint is
    /// reloaded in the new configuration and the epoch goes on from there.
    pub fn train_epoch(
        &mut self,
        records: &[ImageRecord],
        progress: &dyn Fn(usize, usize, [f64; 4]),
    ) -> Result<EpochStats> {
        loop {
            match self.epoch_once(records, progress) {
                Err(Error::OutOfMemory { reason }) => self.recover(reason)?,
                other => return other,
            }
        }
    }

    /// After running out of memory: one rung down, the last checkpoint reloaded.
    fn recover(&mut self, reason: String) -> Result<()> {
        let stop = |reason: String| Err(Error::OutOfMemory { reason });
        let last = self.checkpoint_path.clone().filter(|p| p.exists());
        let Some(path) = last.or_else(|| self.start_checkpoint.clone().filter(|p| p.exists())) else {
            return stop(format!("{reason}; no checkpoint to step down from"));
        };
        let Some(hook) = self.out_of_memory.as_mut() else { return stop(reason) };
        let Some(next) = hook.step_down(&self.config) else {
            return stop(format!("{reason}; no rung left to step down to in this run"));
        };
        if next.imgsz != self.config.imgsz || next.nbs != self.config.nbs {
            return stop(format!("{reason}; a step down cannot change the input size or the nominal batch"));
        }
        let (epoch, pass, old) = (self.progress.epochs_done, self.progress.pass, self.config.clone());
        self.student.zero_grad();
        self.config = next;
        self.load_checkpoint(&path)?;
        let step = StepDown {
            epoch,
            pass,
            reason,
            rung: crate::memory_guard::describe(&old, &self.config),
            batch: [old.batch, self.config.batch],
            accumulate: accumulate(&self.config),
            resumed_at: [self.progress.epochs_done, self.progress.pass],
        };
        tracing::warn!(
            "out of memory at epoch {} pass {} ({}): stepped down to {} (accumulating {} passes per step, \
             nominal batch {}), resumed from {} at epoch {} pass {}",
            epoch + 1,
            pass,
            step.reason,
            step.rung,
            step.accumulate,
            self.config.nbs,
            path.display(),
            step.resumed_at[0] + 1,
            step.resumed_at[1]
        );
        self.steps_down.push(step);
        Ok(())
    }

    fn epoch_once(
        &mut self,
        records: &[ImageRecord],
        progress: &dyn Fn(usize, usize, [f64; 4]),
    ) -> Result<EpochStats> {
        let started = std::time::Instant::now();
        *self.phases.borrow_mut() = [0.0; 5];
        let seconds_before = self.progress.seconds;
        let epoch = self.progress.epochs_done;
        let cfg = self.config.clone();
        let order = shuffled(records.len(), cfg.seed, epoch);
        let passes = order.len().div_ceil(cfg.batch);
        let warmup = if cfg.warmup_epochs > 0.0 {
            ((cfg.warmup_epochs * passes as f64).round() as u64).max(100)
        } else {
            0
        };
        let mut bad_in_row = 0usize;
        let mut since_step = 0usize;
        let mut lr = cfg.lr0 * cfg.lr_factor(epoch);
        self.student.zero_grad();
        for (pass, chunk) in order.chunks(cfg.batch).enumerate().skip(self.progress.pass) {
            let ni = (pass + passes * epoch) as u64;
            let (accumulate_now, momentum);
            if ni <= warmup && warmup > 0 {
                let t = ni as f64 / warmup as f64;
                accumulate_now =
                    ((1.0 + t * (cfg.nbs as f64 / cfg.batch as f64 - 1.0)).round() as usize).max(1);
                lr = t * cfg.lr0 * cfg.lr_factor(epoch);
                momentum = cfg.warmup_momentum + t * (cfg.momentum - cfg.warmup_momentum);
            } else {
                accumulate_now = accumulate(&cfg);
                lr = cfg.lr0 * cfg.lr_factor(epoch);
                momentum = cfg.momentum;
            }
            let batch_records: Vec<&ImageRecord> = chunk.iter().map(|&i| &records[i]).collect();
            let cap = self.memory_cap.filter(|c| self.passes_run >= c.armed_after);
            let resident_before = cap.map_or(0, |c| c.before_pass());
            let (value, components) = self.pass(&batch_records, records, epoch, pass).map_err(oom)?;
            self.passes_run += 1;
            if let Some(cap) = cap {
                tracing::debug!("epoch {epoch} pass {pass}: {} MiB above the start", cap.used() >> 20);
            }
            if let Some(used) = cap.and_then(|c| c.exceeded(resident_before)) {
                return Err(Error::OutOfMemory {
                    reason: format!(
                        "memory cap: the pass took {} MiB above the start, the cap is {} MiB",
                        used >> 20,
                        cap.map_or(0, |c| c.bytes >> 20)
                    ),
                });
            }
            self.progress.pass = pass + 1;
            if !value.is_finite() {
                self.progress.bad += 1;
                bad_in_row += 1;
                self.student.zero_grad();
                since_step = 0;
                tracing::warn!("epoch {epoch} pass {pass}: loss {value}, step skipped");
                if bad_in_row >= cfg.max_bad_steps {
                    return Err(Error::Data {
                        reason: format!(
                            "{bad_in_row} non-finite losses in a row (epoch {epoch}, pass {pass}): lower --lr0, or check the labels"
                        ),
                    });
                }
                continue;
            }
            bad_in_row = 0;
            for (s, c) in self.progress.sums.iter_mut().zip(components) {
                *s += c;
            }
            self.progress.counted += 1;
            since_step += 1;
            if since_step >= accumulate_now || pass + 1 == passes {
                let stepping = std::time::Instant::now();
                self.step(lr, momentum)?;
                self.phases.borrow_mut()[4] += stepping.elapsed().as_secs_f64();
                since_step = 0;
                let period = cfg.save_period;
                if period > 0 && self.progress.optimizer_steps.is_multiple_of(period) && pass + 1 < passes {
                    self.progress.seconds = seconds_before + started.elapsed().as_secs_f64();
                    if let Some(path) = self.checkpoint_path.clone() {
                        self.save_checkpoint(&path)?;
                    }
                }
            }
            progress(pass + 1, passes, components);
        }
        let p = std::mem::take(&mut self.progress);
        self.progress = Progress {
            epochs_done: p.epochs_done + 1,
            optimizer_steps: p.optimizer_steps,
            ema_updates: p.ema_updates,
            loss_scale: p.loss_scale,
            scale_steps: p.scale_steps,
            ..Progress::default()
        };
        let mean = p.sums.map(|s| s / p.counted.max(1) as f64);
        Ok(EpochStats {
            epoch,
            loss: [mean[0], mean[1], mean[2]],
            kd: mean[3],
            lr,
            bad_steps: p.bad,
            optimizer_steps: p.optimizer_steps,
            seconds: seconds_before + started.elapsed().as_secs_f64(),
            phases: *self.phases.borrow(),
        })
    }

    /// Forward and backward of one batch; the loss and its components (box, cls, dfl, kd).
    fn pass(
        &self,
        batch_records: &[&ImageRecord],
        all: &[ImageRecord],
        epoch: usize,
        pass: usize,
    ) -> Result<(f64, [f64; 4])> {
        let cfg = &self.config;
        let mut rng = ChaCha8Rng::seed_from_u64(
            cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((epoch as u64 + 1) << 32) ^ pass as u64,
        );
        let device = self.student.executor().device();
        let timer = |phase: usize, since: std::time::Instant| {
            self.phases.borrow_mut()[phase] += since.elapsed().as_secs_f64();
        };
        let started = std::time::Instant::now();
        let (cut, targets, soft) = if let Some(cache) = &self.cache {
            // The same draws as `augmented_batch` without pixel augmentations: one flip per image.
            let flips: Vec<bool> = batch_records.iter().map(|_| rng.random::<f64>() < cfg.flip).collect();
            let (targets, soft) = targets_for(batch_records, &flips, cfg.imgsz, &self.soft);
            let cut = cache.cut(batch_records, &flips, device)?;
            timer(0, started);
            (cut, targets, soft)
        } else {
            let batch = augmented_batch(batch_records, all, cfg, &mut rng, &self.soft, device)?;
            timer(0, started);
            let started = std::time::Instant::now();
            let cut = match &self.trunk {
                Some(trunk) => (trunk.borrow_mut())(&batch.images)?,
                None => self.student.trunk(&batch.images)?,
            };
            timer(1, started);
            (cut, batch.targets, batch.soft)
        };
        let head_started = std::time::Instant::now();
        let loss_seconds = std::cell::Cell::new(0.0);
        let scale = self.loss_scale();
        let mut components = [0f64; 4];
        let distill = (cfg.kd > 0.0).then_some(Distill { weight: cfg.kd, soft: &soft });
        let loss_fn = |outputs: &[Tensor]| {
            let started = std::time::Instant::now();
            let (boxes, scores) = head_tensors(outputs)?;
            let out = detection_loss_with(&self.loss, &boxes, &scores, &self.grids, &targets, distill)?;
            components = [out.components[0], out.components[1], out.components[2], out.kd];
            loss_seconds.set(started.elapsed().as_secs_f64());
            Ok(if scale == 1.0 { out.total } else { out.total * scale })
        };
        let run = || {
            if cfg.checkpoint {
                self.student.backward_checkpointed(&cut, loss_fn)
            } else {
                self.student.backward(&cut, loss_fn)
            }
        };
        let value = if self.amp_active() { tch::autocast(true, run)? } else { run()? } / scale;
        let mut phases = self.phases.borrow_mut();
        phases[3] += loss_seconds.get();
        phases[2] += head_started.elapsed().as_secs_f64() - loss_seconds.get();
        Ok((value, components))
    }

    /// Whether mixed precision runs: asked for, and the student is on a CUDA device.
    fn amp_active(&self) -> bool {
        self.config.amp && self.student.executor().device().is_cuda()
    }

    /// The factor the loss is multiplied by before backward (1 without mixed precision).
    fn loss_scale(&self) -> f64 {
        match self.progress.loss_scale {
            s if self.amp_active() && s > 0.0 => s,
            _ if self.amp_active() => 65536.0,
            _ => 1.0,
        }
    }

    /// Mixed precision: divides the gradients by the loss scale; false (and the scale halved) when
    /// one is not finite, so that the step is skipped, as `torch.amp.GradScaler` does.
    fn unscale(&mut self, parameters: &[(&str, &Tensor)]) -> Result<bool> {
        let scale = self.loss_scale();
        let _guard = tch::no_grad_guard();
        let mut finite = true;
        for (_, p) in parameters {
            let mut g = p.grad();
            if g.defined() {
                let _unscaled = g.f_div_scalar_(scale)?;
                finite &= g.f_isfinite()?.f_all()?.int64_value(&[]) == 1;
            }
        }
        if finite {
            self.progress.scale_steps += 1;
            if self.progress.scale_steps >= 2000 {
                self.progress.loss_scale = scale * 2.0;
                self.progress.scale_steps = 0;
            } else {
                self.progress.loss_scale = scale;
            }
        } else {
            self.progress.loss_scale = scale * 0.5;
            self.progress.scale_steps = 0;
        }
        Ok(finite)
    }

    /// Clips, steps the optimiser, clears the gradients, updates the average.
    fn step(&mut self, lr: f64, momentum: f64) -> Result<()> {
        let parameters = self.student.parameters();
        if self.amp_active() && !self.unscale(&parameters)? {
            tracing::debug!(
                "mixed precision: inf/NaN gradients, step skipped, loss scale now {}",
                self.progress.loss_scale
            );
            self.student.zero_grad();
            return Ok(());
        }
        if self.config.anchor > 0.0 {
            let _guard = tch::no_grad_guard();
            for (name, p) in &parameters {
                let (mut g, Some(start)) = (p.grad(), self.start.get(*name)) else { continue };
                if g.defined() {
                    let _pulled = g.f_add_(&p.f_sub(start)?.f_mul_scalar(self.config.anchor)?)?;
                }
            }
        }
        if self.config.max_grad_norm > 0.0 {
            clip_grad_norm(&parameters, self.config.max_grad_norm)?;
        }
        match &mut self.optimizer {
            Optimizer::Sgd(sgd) => {
                sgd.momentum = momentum;
                sgd.step_with(&parameters, lr, lr)?;
            }
            Optimizer::AdamW(adam) => adam.step_with(&parameters, lr, lr)?,
        }
        self.student.zero_grad();
        self.progress.optimizer_steps += 1;
        self.update_ema()
    }

    fn update_ema(&mut self) -> Result<()> {
        let _guard = tch::no_grad_guard();
        self.progress.ema_updates += 1;
        let d = EMA_DECAY * (1.0 - (-(self.progress.ema_updates as f64) / EMA_TAU).exp());
        for (name, p) in self.student.parameters() {
            if let Some(e) = self.ema.get_mut(name) {
                let _ = e.f_mul_scalar_(d)?.f_add_(&p.f_mul_scalar(1.0 - d)?)?;
            }
        }
        Ok(())
    }

    /// The averaged weights (what is written out and evaluated), name → row-major f32.
    pub fn ema_weights(&self) -> Result<BTreeMap<String, Vec<f32>>> {
        self.ema
            .iter()
            .map(|(n, t)| {
                let flat = t.f_reshape([-1])?.f_to_kind(Kind::Float)?.f_to_device(tch::Device::Cpu)?;
                Ok((n.clone(), Vec::<f32>::try_from(&flat)?))
            })
            .collect()
    }

    /// Writes the weights, averages, optimiser state and progress (position in the epoch included)
    /// to `path` atomically (a temporary beside it, then a rename).
    pub fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (n, p) in self.student.parameters() {
            named.push((format!("param/{n}"), p.detach().copy()));
        }
        for (n, e) in &self.ema {
            named.push((format!("ema/{n}"), e.shallow_clone()));
        }
        let mut adam_steps = 0;
        match &self.optimizer {
            Optimizer::Sgd(sgd) => {
                for (n, b) in sgd.buffers() {
                    named.push((format!("momentum/{n}"), b.shallow_clone()));
                }
            }
            Optimizer::AdamW(adam) => {
                let (steps, moments) = adam.state();
                adam_steps = steps;
                named.extend(moments.into_iter().map(|(k, v)| (format!("adam/{k}"), v)));
            }
        }
        let state = serde_json::to_vec(&SavedState {
            progress: self.progress.clone(),
            adam_steps,
            batch: self.config.batch,
        })
        .map_err(|e| Error::Data { reason: e.to_string() })?;
        named.push(("state".into(), Tensor::from_slice(&state)));
        let tmp = headroom_core::fsio::temporary_path(path);
        Tensor::save_multi(&named, &tmp)?;
        std::fs::rename(&tmp, path).map_err(|e| Error::Data { reason: format!("{}: {e}", path.display()) })
    }

    /// Restores a checkpoint written by [`Trainer::save_checkpoint`] for the same student. Saved
    /// with another batch (a step down since), its position in the epoch is converted to this
    /// configuration's batch (exact when one divides the other the way halving does).
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<()> {
        let named = Tensor::load_multi(path)?;
        let map: HashMap<String, Tensor> = named.into_iter().collect();
        let _guard = tch::no_grad_guard();
        for (n, p) in self.student.parameters() {
            let saved = map.get(&format!("param/{n}")).ok_or_else(|| Error::Data {
                reason: format!(
                    "{}: no weights for `{n}`: a checkpoint of another model or split",
                    path.display()
                ),
            })?;
            let mut p = p.shallow_clone();
            p.f_copy_(saved)?;
        }
        for (n, e) in self.ema.iter_mut() {
            if let Some(saved) = map.get(&format!("ema/{n}")) {
                e.f_copy_(saved)?;
            }
        }
        let state = map
            .get("state")
            .ok_or_else(|| Error::Data { reason: format!("{}: no state", path.display()) })?;
        let bytes = Vec::<u8>::try_from(state)?;
        let saved: SavedState = serde_json::from_slice(&bytes)
            .map_err(|e| Error::Data { reason: format!("{}: {e}", path.display()) })?;
        let strip = |prefix: &str| -> HashMap<String, Tensor> {
            map.iter()
                .filter_map(|(k, v)| k.strip_prefix(prefix).map(|n| (n.to_string(), v.shallow_clone())))
                .collect()
        };
        match &mut self.optimizer {
            Optimizer::Sgd(sgd) => sgd.set_buffers(strip("momentum/")),
            Optimizer::AdamW(adam) => adam.set_state(saved.adam_steps, &strip("adam/")),
        }
        self.progress = saved.progress;
        if saved.batch > 0 && saved.batch != self.config.batch {
            self.progress.pass = self.progress.pass * saved.batch / self.config.batch;
        }
        Ok(())
    }
}

/// The JSON inside a checkpoint.
#[derive(Serialize, Deserialize)]
struct SavedState {
    progress: Progress,
    #[serde(default)]
    adam_steps: u64,
    /// The batch of the run when it was saved (0: older checkpoints).
    #[serde(default)]
    batch: usize,
}

/// libtorch's allocation failures become [`Error::OutOfMemory`].
fn oom(error: Error) -> Error {
    if is_out_of_memory(&error) { Error::OutOfMemory { reason: error.to_string() } } else { error }
}

/// Passes between optimiser steps after warmup.
fn accumulate(config: &TrainConfig) -> usize {
    ((config.nbs as f64 / config.batch as f64).round() as usize).max(1)
}

/// The head outputs (per level: box distribution, class logits) as `[B, 4·reg_max, A]` and
/// `[B, nc, A]`, levels concatenated in order.
pub fn head_tensors(outputs: &[Tensor]) -> Result<(Tensor, Tensor)> {
    if outputs.is_empty() || !outputs.len().is_multiple_of(2) {
        return Err(Error::Loss {
            reason: format!("{} head outputs, expected box and class per level", outputs.len()),
        });
    }
    let (boxes, scores): (Vec<Tensor>, Vec<Tensor>) =
        outputs.chunks(2).map(|pair| (pair[0].flatten(2, 3), pair[1].flatten(2, 3))).unzip();
    Ok((Tensor::cat(&boxes, 2), Tensor::cat(&scores, 2)))
}

/// A permutation of `0..n` for `epoch`, the same for the same seed (Fisher–Yates).
fn shuffled(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = ((u128::from(rng.random::<u64>()) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}
