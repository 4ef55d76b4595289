//! The inside of a run: epochs of shuffled batches through the frozen trunk and the
//! (checkpointed) trainable head, Ultralytics' loss (plus distillation on a teacher's soft scores),
//! gradients accumulated to a nominal batch and clipped, SGD or AdamW on [`crate::schedule`],
//! the weights' moving average ([`crate::ema`]), skipped non-finite steps, checkpoints every N
//! optimiser steps ([`crate::checkpoint`]), out-of-memory step-down and a stop request honoured at
//! the next optimiser step. The run around it (validation, files, resume) is `headroom-run`'s.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use headroom_core::dataset::ImageRecord;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tch::Tensor;

use crate::cache::FeatureCache;
use crate::config::TrainConfig;
use crate::data::{SoftTargets, augmented_batch, targets_for};
use crate::ema::Ema;
use crate::loss::{DenseTargets, Distill, Extras, Ignore, LossConfig, detection_loss_extras, split_band};
use crate::memory_guard::{MemoryCap, OutOfMemory, StepDown, is_out_of_memory};
use crate::optim::{AdamW, Sgd, clip_grad_norm};
use crate::profile::{ProfileWindow, span};
use crate::schedule::{self, shuffled};
use crate::state::{EpochStats, PassReport, Progress};
use crate::student::Cut;
use crate::{Error, Result, Student, amp};

pub(crate) enum Optimizer {
    Sgd(Sgd),
    AdamW(AdamW),
}

/// A trunk run elsewhere (ONNX Runtime on the trunk cut out of the same file): images in, cut out.
pub type ExternalTrunk<'a> = dyn FnMut(&Tensor) -> Result<Cut> + 'a;

/// What computes the frozen trunk's outputs for a batch.
pub enum Trunk<'a> {
    /// headroom's libtorch executor, under no-grad.
    Torch,
    /// Another runtime (ONNX Runtime on the trunk cut out of the same file).
    External(RefCell<Box<ExternalTrunk<'a>>>),
    /// Outputs computed once per image and read back (no image is read during epochs).
    Cache(FeatureCache),
}

/// A teacher run on each training batch for dense distillation: the batch's images `[B, 3, H, W]`
/// in, the teacher's raw head outputs out (per level: box distribution, class logits, as the
/// student's head gives them).
/// `Send`: with [`Trainer::set_prefetch`] it runs on the thread that prepares the next batch.
pub type Teacher<'a> = dyn FnMut(&Tensor) -> Result<Vec<Tensor>> + Send + 'a;

/// One batch made ready for a pass: its augmented images and targets, the teacher's head tensors
/// on them, and the seconds each took (data, teacher).
struct Prepared {
    batch: crate::data::Batch,
    teacher: Option<(Tensor, Tensor)>,
    seconds: [f64; 2],
}

/// What the trainable part of one pass takes: the trunk's outputs, the targets, their soft scores,
/// and the teacher's head tensors (box distributions, class logits) on the same images.
type BatchInputs = (Cut, Vec<crate::loss::Target>, Vec<Option<Vec<f32>>>, Option<(Tensor, Tensor)>);

/// A run in progress.
pub struct Trainer<'a> {
    pub(crate) student: &'a Student,
    pub(crate) config: TrainConfig,
    loss: LossConfig,
    grids: Vec<(i64, i64)>,
    pub(crate) optimizer: Optimizer,
    pub(crate) ema: Ema,
    pub(crate) progress: Progress,
    soft: SoftTargets,
    checkpoint_path: Option<PathBuf>,
    /// When the last checkpoint was written (or the trainer made): `save_interval` counts from it.
    pub(crate) saved_at: std::cell::Cell<std::time::Instant>,
    start_checkpoint: Option<PathBuf>,
    trunk: Trunk<'a>,
    phases: RefCell<[f64; 5]>,
    start: HashMap<String, Tensor>,
    out_of_memory: Option<Box<dyn OutOfMemory + 'a>>,
    memory_cap: Option<MemoryCap>,
    steps_down: Vec<StepDown>,
    passes_run: u64,
    stop: Option<Arc<AtomicBool>>,
    teacher: Option<RefCell<Box<Teacher<'a>>>>,
    profile: Option<ProfileWindow>,
    prefetch: bool,
    /// The next epoch's first batch, prepared while the epoch before it ended
    /// ([`Trainer::preparing_next_epoch`]).
    ahead: Option<Ahead>,
    /// Epochs whose first pass used [`Trainer::ahead`].
    ahead_used: usize,
}

/// A batch prepared before its epoch began, and where it belongs: used only by the pass it was
/// made for (the same epoch, pass, batch size and images), dropped otherwise.
struct Ahead {
    epoch: usize,
    pass: usize,
    images: Vec<PathBuf>,
    prepared: Prepared,
}

impl<'a> Trainer<'a> {
    /// A new run of `student` with `config` (validated); `loss` describes the head.
    pub fn new(student: &'a Student, config: TrainConfig, loss: LossConfig) -> Result<Trainer<'a>> {
        config.validate()?;
        let inspection = student.inspection();
        let stride0 = inspection.strides.first().copied().unwrap_or(8);
        let grids: Vec<(i64, i64)> = inspection
            .strides
            .iter()
            .map(|s| (i64::from(config.imgsz[1]) / s, i64::from(config.imgsz[0]) / s))
            .collect();
        if i64::from(config.imgsz[0]) % stride0 != 0 || i64::from(config.imgsz[1]) % stride0 != 0 {
            let [h, w] = config.imgsz;
            return Err(Error::Config {
                key: "imgsz".into(),
                reason: format!("{w}x{h} is not a multiple of the largest stride {stride0}"),
            });
        }
        let optimizer = optimizer_for(&config);
        let parameters = student.parameters();
        let start = parameters.iter().map(|(n, p)| (n.to_string(), p.detach().copy())).collect();
        Ok(Trainer {
            student,
            config,
            loss,
            grids,
            optimizer,
            ema: Ema::new(&parameters),
            progress: Progress::default(),
            soft: SoftTargets::new(),
            checkpoint_path: None,
            saved_at: std::cell::Cell::new(std::time::Instant::now()),
            start_checkpoint: None,
            trunk: Trunk::Torch,
            phases: RefCell::new([0.0; 5]),
            start,
            out_of_memory: None,
            memory_cap: None,
            steps_down: Vec::new(),
            passes_run: 0,
            stop: None,
            teacher: None,
            profile: None,
            prefetch: false,
            ahead: None,
            ahead_used: 0,
        })
    }

    /// What runs the frozen trunk. A feature cache is refused when an augmentation changes the
    /// trunk's input (flips are cached both ways).
    pub fn set_trunk(&mut self, trunk: Trunk<'a>) -> Result<()> {
        if matches!(trunk, Trunk::Cache(_)) && self.teacher.is_some() {
            return Err(Error::Config {
                key: "cache_features".into(),
                reason: "a teacher runs on each batch's images, which cached features never make: \
                         drop --cache-features or --teacher"
                    .into(),
            });
        }
        if matches!(trunk, Trunk::Cache(_)) && self.config.augment.changes_pixels() {
            return Err(Error::Config {
                key: "cache_features".into(),
                reason: "cached features are the trunk's outputs for fixed inputs: --mosaic, --scale, \
                         --translate and --hsv change those inputs; turn them off or drop --cache-features"
                    .into(),
            });
        }
        self.trunk = trunk;
        Ok(())
    }

    /// The teacher run on every batch for dense distillation (`dense_kd` of the config; see
    /// [`crate::loss::DenseTargets`]). Refused with a feature cache: the trunk's inputs, which the
    /// teacher needs, are never made then.
    pub fn set_teacher(&mut self, teacher: Box<Teacher<'a>>) -> Result<()> {
        if matches!(self.trunk, Trunk::Cache(_)) {
            return Err(Error::Config {
                key: "cache_features".into(),
                reason: "a teacher runs on each batch's images, which cached features never make: \
                         drop --cache-features or --teacher"
                    .into(),
            });
        }
        self.teacher = Some(RefCell::new(teacher));
        Ok(())
    }

    /// Whether the next batch is prepared (read, augmented, and run through the teacher) on a
    /// second thread while the student's forward and backward run on this one. The batches, and
    /// so the run, are the same either way (each pass draws from its own seeded generator); the
    /// teacher's working set then sits in memory beside the student's backward, which the planner
    /// counts (docs/TRAIN.md "Preparing the next batch"). Not used with a feature cache.
    pub fn set_prefetch(&mut self, on: bool) {
        self.prefetch = on;
    }

    /// The teacher's soft scores per image (for `kd`; see [`crate::data::SoftTargets`]).
    pub fn set_soft_targets(&mut self, soft: SoftTargets) {
        self.soft = soft;
    }

    /// Traces libtorch's ops over a window of passes ([`crate::profile`]).
    pub fn set_profile(&mut self, window: ProfileWindow) {
        self.profile = Some(window);
    }

    /// Where checkpoints within an epoch go (every `save_period` optimiser steps or `save_interval` seconds).
    pub fn set_checkpoint_path(&mut self, path: &Path) {
        self.checkpoint_path = Some(path.to_path_buf());
    }

    /// What to do when memory runs out: with a hook that steps down, the trainer reloads the last
    /// checkpoint (see [`Trainer::set_checkpoint_path`]) in the new configuration and continues.
    pub fn set_out_of_memory(&mut self, hook: Box<dyn OutOfMemory + 'a>) {
        self.out_of_memory = Some(hook);
    }

    /// A stop request (Ctrl-C): once set, the epoch goes on to its next optimiser step, saves a
    /// checkpoint there and returns [`Error::Interrupted`]; a resumed run continues from it exactly.
    pub fn set_stop(&mut self, flag: Arc<AtomicBool>) {
        self.stop = Some(flag);
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

    /// The averaged weights (what is written out and evaluated), name → row-major f32.
    pub fn ema_weights(&self) -> Result<BTreeMap<String, Vec<f32>>> {
        let mut weights = self.ema.weights()?;
        self.student.fold_affine(&mut weights)?;
        Ok(weights)
    }

    /// Seconds per image of `passes` training passes at `batch`, after one untimed pass: forward
    /// and backward with the run's augmentation, trunk and teacher on the first images of the
    /// first epoch's order, gradients discarded, no optimiser step (a run makes the same steps
    /// at any batch: `nbs / batch` passes each) — what `--plan auto` compares batches by
    /// (docs/PLAN.md "A larger batch when it is faster"). With `--prefetch` the batches are made
    /// on the second thread, as the run's passes get them. The run's state is not touched. An
    /// allocation failure is [`Error::OutOfMemory`].
    pub fn time_passes(&mut self, records: &[ImageRecord], batch: usize, passes: usize) -> Result<f64> {
        if batch == 0 || passes == 0 || records.len() < batch {
            return Err(Error::Config {
                key: "batch".into(),
                reason: format!("cannot time {passes} passes of batch {batch} on {} images", records.len()),
            });
        }
        // A pass takes its images from `batch_records`: the configured batch is not read.
        let order = shuffled(records.len(), self.config.seed, 0);
        let chunks: Vec<Vec<&ImageRecord>> =
            order.chunks_exact(batch).map(|chunk| chunk.iter().map(|&j| &records[j]).collect()).collect();
        let images = |i: usize| chunks[i % chunks.len()].clone();
        // With `--prefetch`, timed as the run trains: the batches made on the second thread.
        let timed = if self.prefetching() {
            let batches = (0..=passes).map(|i| (i, images(i)));
            self.with_batches_made(records, 0, batches, |t, made| {
                t.timed_passes(records, batch, passes, &images, Some(made))
            })
        } else {
            self.timed_passes(records, batch, passes, &images, None)
        };
        self.student.zero_grad();
        *self.phases.borrow_mut() = [0.0; 5];
        timed
    }

    /// [`Trainer::time_passes`]' loop: `passes + 1` passes of `batch` images, `images(i)` (the
    /// first untimed), each batch from `prepared` when a second thread makes them; seconds per image.
    fn timed_passes<'r>(
        &self,
        records: &'r [ImageRecord],
        batch: usize,
        passes: usize,
        images: &impl Fn(usize) -> Vec<&'r ImageRecord>,
        prepared: Option<&std::sync::mpsc::Receiver<Result<Prepared>>>,
    ) -> Result<f64> {
        let device = self.student.executor().device();
        let mut seconds = 0.0;
        for i in 0..=passes {
            let batch_records = images(i);
            let started = std::time::Instant::now();
            let ready = prepared.map(received).transpose()?;
            self.pass(&batch_records, records, 0, i, ready).map_err(oom)?;
            if let tch::Device::Cuda(index) = device {
                tch::Cuda::synchronize(index as i64);
            }
            self.student.zero_grad();
            if i > 0 {
                seconds += started.elapsed().as_secs_f64();
            }
        }
        Ok(seconds / (passes * batch) as f64)
    }

    /// Trains with `batch` from now on (accumulation keeps the nominal batch): before the first
    /// optimiser step only, as `--plan auto` chooses it.
    pub fn set_batch(&mut self, batch: usize) -> Result<()> {
        if self.progress.optimizer_steps > 0 || self.progress.epochs_done > 0 || self.progress.pass > 0 {
            return Err(Error::Config {
                key: "batch".into(),
                reason: "the batch is chosen before training starts, not during it".into(),
            });
        }
        let config = TrainConfig { batch, ..self.config.clone() };
        config.validate()?;
        self.optimizer = optimizer_for(&config);
        self.config = config;
        Ok(())
    }

    /// Trains (the rest of) one epoch on `records`; `progress(pass, passes, components)` after
    /// each pass, components being box, cls, dfl and kd. When memory runs out (an allocation
    /// failure or the memory cap) and the out-of-memory hook steps down, the last checkpoint is
    /// reloaded in the new configuration and the epoch goes on from there.
    pub fn train_epoch(
        &mut self,
        records: &[ImageRecord],
        progress: &dyn Fn(&PassReport),
    ) -> Result<EpochStats> {
        loop {
            match self.epoch_once(records, progress) {
                Err(Error::OutOfMemory { reason }) => self.recover(reason)?,
                other => return other,
            }
        }
    }

    fn stop_requested(&self) -> bool {
        self.stop.as_ref().is_some_and(|f| f.load(Ordering::Relaxed))
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
        // The larger passes' free pages go back, and the pool's bound follows the smaller ones.
        crate::cpu_pool::reset();
        let step = StepDown {
            epoch,
            pass,
            reason,
            rung: crate::memory_guard::describe(&old, &self.config),
            batch: [old.batch, self.config.batch],
            accumulate: schedule::accumulate(&self.config),
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

    fn epoch_once(&mut self, records: &[ImageRecord], progress: &dyn Fn(&PassReport)) -> Result<EpochStats> {
        if !self.prefetching() {
            return self.epoch_passes(records, progress, None, None);
        }
        let (epoch, first) = (self.progress.epochs_done, self.progress.pass);
        // The first batch, when it was prepared while the last epoch ended.
        let ahead = self.ahead.take().and_then(|a| {
            let fits = (a.epoch, a.pass) == (epoch, first)
                && pass_images(records, &self.config, epoch, first).is_some_and(|images| images == a.images);
            fits.then_some(a.prepared)
        });
        self.ahead_used += usize::from(ahead.is_some());
        let order = shuffled(records.len(), self.config.seed, epoch);
        let batches = epoch_batches(records, &order, self.config.batch, first + usize::from(ahead.is_some()));
        self.with_batches_made(records, epoch, batches, |t, made| {
            t.epoch_passes(records, progress, ahead, Some(made))
        })
    }

    /// Runs `main` while a second thread prepares `batches` (a pass and its images; mosaic draws
    /// from `all`) in order for it: a rendezvous, one batch waits, prepared, while `main` works on
    /// the one before. That thread owns the teacher and reads the soft scores meanwhile; both come
    /// back whatever `main`'s end. It stops at a failed batch, or when `main` has returned (an
    /// error, a stop, a step-down) and nobody receives.
    fn with_batches_made<'r, R>(
        &mut self,
        all: &'r [ImageRecord],
        epoch: usize,
        batches: impl Iterator<Item = (usize, Vec<&'r ImageRecord>)> + Send,
        main: impl FnOnce(&mut Self, &std::sync::mpsc::Receiver<Result<Prepared>>) -> R,
    ) -> R {
        let mut lent = self.lend();
        let out = std::thread::scope(|scope| {
            let (sender, receiver) = std::sync::mpsc::sync_channel::<Result<Prepared>>(0);
            let lent = &mut lent;
            scope.spawn(move || lent.prepare_each(all, epoch, batches, |made| sender.send(made).is_ok()));
            main(self, &receiver)
        });
        self.give_back(lent);
        out
    }

    /// The teacher and the soft scores taken out for the thread that prepares batches, with what
    /// it needs of the trainer ([`Trainer::give_back`] returns them).
    fn lend(&mut self) -> Lent<'a> {
        Lent {
            teacher: self.teacher.take(),
            soft: std::mem::take(&mut self.soft),
            config: self.config.clone(),
            device: self.student.executor().device(),
            threads: tch::get_num_threads(),
        }
    }

    fn give_back(&mut self, lent: Lent<'a>) {
        self.teacher = lent.teacher;
        self.soft = lent.soft;
    }

    /// How many epochs started on a batch made while the epoch before them ended
    /// ([`Trainer::preparing_next_epoch`]).
    pub fn batches_prepared_ahead(&self) -> usize {
        self.ahead_used
    }

    /// Whether a second thread prepares the batches (`--prefetch`; a feature cache has nothing to
    /// prepare).
    fn prefetching(&self) -> bool {
        self.prefetch && !matches!(self.trunk, Trunk::Cache(_))
    }

    /// Runs `during` (the end of the epoch just trained: its weights written, validated, its
    /// checkpoint) while, with `--prefetch`, a second thread prepares the next epoch's first batch
    /// from `next` (that epoch's images, as the next [`Trainer::train_epoch`] will get them): the
    /// next epoch's first pass then starts without waiting for its batch. The batch is the one that
    /// pass would make (its own seeded draws); a next epoch on other images, another batch size or
    /// another position drops it. Without prefetching, or without `next` (the last epoch), only
    /// `during`. `during` sees the trainer without its teacher (the thread has it).
    pub fn preparing_next_epoch<R>(
        &mut self,
        next: Option<&[ImageRecord]>,
        during: impl FnOnce(&Self) -> R,
    ) -> R {
        let (epoch, pass) = (self.progress.epochs_done, self.progress.pass);
        let images = next.and_then(|records| pass_images(records, &self.config, epoch, pass));
        let (Some(records), Some(images), true) = (next, images, self.prefetching()) else {
            return during(self);
        };
        let order = shuffled(records.len(), self.config.seed, epoch);
        let batches = epoch_batches(records, &order, self.config.batch, pass).take(1);
        let (out, made) = self.with_batches_made(records, epoch, batches, |t, made| (during(t), made.recv()));
        match made {
            Ok(Ok(prepared)) => self.ahead = Some(Ahead { epoch, pass, images, prepared }),
            // The pass makes it again and reports what went wrong there.
            Ok(Err(e)) => tracing::debug!("preparing epoch {} pass {pass} ahead: {e}", epoch + 1),
            // The thread ended without the batch: only by a panic, which the scope has raised.
            Err(_) => {}
        }
        out
    }

    /// The passes of [`Trainer::epoch_once`]; `prepared` gives each pass its batch in order when a
    /// second thread prepares them.
    fn epoch_passes(
        &mut self,
        records: &[ImageRecord],
        progress: &dyn Fn(&PassReport),
        mut ahead: Option<Prepared>,
        prepared: Option<&std::sync::mpsc::Receiver<Result<Prepared>>>,
    ) -> Result<EpochStats> {
        let started = std::time::Instant::now();
        *self.phases.borrow_mut() = [0.0; 5];
        let seconds_before = self.progress.seconds;
        let epoch = self.progress.epochs_done;
        let cfg = self.config.clone();
        let order = shuffled(records.len(), cfg.seed, epoch);
        let passes = order.len().div_ceil(cfg.batch);
        let mut bad_in_row = 0usize;
        let mut since_step = 0usize;
        let mut lr = cfg.lr0 * schedule::lr_factor(&cfg, epoch);
        self.student.zero_grad();
        for (pass, chunk) in order.chunks(cfg.batch).enumerate().skip(self.progress.pass) {
            let plan = schedule::at(&cfg, epoch, pass, passes);
            lr = plan.lr;
            let batch_records: Vec<&ImageRecord> = chunk.iter().map(|&i| &records[i]).collect();
            let cap = self.memory_cap.filter(|c| self.passes_run >= c.armed_after);
            let resident_before = cap.map_or(0, |c| c.before_pass());
            if let Some(window) = &mut self.profile {
                window.before_pass()?;
            }
            let ready = match (ahead.take(), prepared) {
                (Some(made), _) => Some(made),
                (None, Some(receiver)) => Some(received(receiver)?),
                (None, None) => None,
            };
            let (value, components, instances) =
                self.pass(&batch_records, records, epoch, pass, ready).map_err(oom)?;
            self.passes_run += 1;
            if let Some(cap) = cap {
                tracing::debug!("epoch {epoch} pass {pass}: {} MiB above the start", cap.used() >> 20);
            }
            if let Some(used) = cap.and_then(|c| c.exceeded(resident_before)) {
                return Err(Error::OutOfMemory {
                    reason: format!(
                        "memory cap: the pass took {} above the start, over --memory-cap {}",
                        headroom_plan::format_size(used),
                        headroom_plan::format_size(cap.map_or(0, |c| c.bytes))
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
                    return Err(Error::Diverged { count: bad_in_row, epoch, pass });
                }
                continue;
            }
            bad_in_row = 0;
            for (s, c) in self.progress.sums.iter_mut().zip(components) {
                *s += c;
            }
            self.progress.counted += 1;
            since_step += 1;
            if since_step >= plan.accumulate || pass + 1 == passes {
                let stepping = std::time::Instant::now();
                self.step(plan.lr, plan.momentum)?;
                self.phases.borrow_mut()[4] += stepping.elapsed().as_secs_f64();
                since_step = 0;
                let period = cfg.save_period;
                let periodic = (period > 0 && self.progress.optimizer_steps.is_multiple_of(period))
                    || (cfg.save_interval > 0.0
                        && self.saved_at.get().elapsed().as_secs_f64() >= cfg.save_interval);
                let stopping = self.stop_requested();
                if (periodic || stopping) && pass + 1 < passes {
                    self.progress.seconds = seconds_before + started.elapsed().as_secs_f64();
                    if let Some(path) = self.checkpoint_path.clone() {
                        self.save_checkpoint(&path)?;
                    }
                    if stopping {
                        return Err(Error::Interrupted);
                    }
                }
            }
            if let Some(window) = &mut self.profile {
                window.after_pass()?;
            }
            let counted = self.progress.counted.max(1) as f64;
            progress(&PassReport {
                done: pass + 1,
                total: passes,
                mean: self.progress.sums.map(|s| s / counted),
                instances,
                imgsz: cfg.imgsz[0].max(cfg.imgsz[1]),
            });
        }
        if let Some(window) = &mut self.profile {
            window.end()?;
        }
        let p = std::mem::take(&mut self.progress);
        self.progress = p.next_epoch();
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

    /// The trunk's outputs, targets and soft scores of one batch (timed as data and trunk), from
    /// the batch `ready` (prepared on the prefetch thread) or prepared here.
    fn inputs(
        &self,
        batch_records: &[&ImageRecord],
        all: &[ImageRecord],
        epoch: usize,
        pass: usize,
        ready: Option<Prepared>,
    ) -> Result<BatchInputs> {
        let cfg = &self.config;
        let device = self.student.executor().device();
        let timer = |phase: usize, seconds: f64| {
            self.phases.borrow_mut()[phase] += seconds;
        };
        if let Trunk::Cache(cache) = &self.trunk {
            let started = std::time::Instant::now();
            // The same draws as `augmented_batch` without pixel augmentations: one flip per image.
            let mut rng = pass_rng(cfg.seed, epoch, pass);
            let flips: Vec<bool> = batch_records.iter().map(|_| rng.random::<f64>() < cfg.flip).collect();
            let (targets, soft) = targets_for(batch_records, &flips, cfg.imgsz, &self.soft);
            let cut = cache.cut(batch_records, &flips, device)?;
            timer(0, started.elapsed().as_secs_f64());
            return Ok((cut, targets, soft, None));
        }
        let prepared = match ready {
            Some(prepared) => prepared,
            None => {
                let _guard = tch::no_grad_guard();
                let mut teacher = self.teacher.as_ref().map(RefCell::borrow_mut);
                prepare(batch_records, all, cfg, &self.soft, device, teacher.as_deref_mut(), epoch, pass)?
            }
        };
        let Prepared { batch, teacher, seconds } = prepared;
        timer(0, seconds[0]);
        let started = std::time::Instant::now();
        let cut = {
            let _span = span(c"headroom::trunk");
            match &self.trunk {
                Trunk::External(trunk) => (trunk.borrow_mut())(&batch.images)?,
                _ => self.student.trunk(&batch.images)?,
            }
        };
        timer(1, seconds[1] + started.elapsed().as_secs_f64());
        Ok((cut, batch.targets, batch.soft, teacher))
    }

    /// Forward and backward of one batch; the loss, its components (box, cls, dfl, kd) and the
    /// batch's objects.
    fn pass(
        &self,
        batch_records: &[&ImageRecord],
        all: &[ImageRecord],
        epoch: usize,
        pass: usize,
        ready: Option<Prepared>,
    ) -> Result<(f64, [f64; 4], usize)> {
        let cfg = &self.config;
        let (cut, targets, soft, teacher) = self.inputs(batch_records, all, epoch, pass, ready)?;
        let (targets, soft, uncertain) = match cfg.ignore_band {
            Some([low, high]) => split_band(targets, soft, (low, high)),
            None => (targets, soft, Vec::new()),
        };
        let ignore = cfg.ignore_band.map(|[low, high]| Ignore { boxes: &uncertain, band: (low, high) });
        let head_started = std::time::Instant::now();
        let loss_seconds = std::cell::Cell::new(0.0);
        let scale = amp::loss_scale(&self.progress, self.amp_active());
        let mut components = [0f64; 4];
        let distill = (cfg.kd > 0.0).then_some(Distill { weight: cfg.kd, soft: &soft });
        let dense =
            teacher.as_ref().map(|(boxes, scores)| DenseTargets { weight: cfg.dense_kd, boxes, scores });
        let loss_fn = |outputs: &[Tensor]| {
            let _span = span(c"headroom::loss");
            let started = std::time::Instant::now();
            let (boxes, scores) = head_tensors(outputs)?;
            let extras = Extras { distill, dense, ignore };
            let out = detection_loss_extras(&self.loss, &boxes, &scores, &self.grids, &targets, extras)?;
            components = [out.components[0], out.components[1], out.components[2], out.kd];
            loss_seconds.set(started.elapsed().as_secs_f64());
            Ok(if scale == 1.0 { out.total } else { out.total * scale })
        };
        let run = || {
            let _span = span(c"headroom::forward_backward");
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
        Ok((value, components, targets.len()))
    }

    /// Whether mixed precision runs: asked for, and the student is on a CUDA device.
    fn amp_active(&self) -> bool {
        self.config.amp && self.student.executor().device().is_cuda()
    }

    /// Clips, steps the optimiser, clears the gradients, updates the average.
    fn step(&mut self, lr: f64, momentum: f64) -> Result<()> {
        let parameters = self.student.parameters();
        let span_optimizer = span(c"headroom::optimizer");
        if self.amp_active() && !amp::unscale(&parameters, &mut self.progress)? {
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
        drop(span_optimizer);
        self.progress.optimizer_steps += 1;
        self.progress.ema_updates += 1;
        let _span = span(c"headroom::ema");
        self.ema.update(&parameters, self.progress.ema_updates)
    }
}

/// What the thread that prepares batches holds while the student trains ([`Trainer::lend`]).
struct Lent<'a> {
    teacher: Option<RefCell<Box<Teacher<'a>>>>,
    soft: SoftTargets,
    config: TrainConfig,
    device: tch::Device,
    threads: i32,
}

impl Lent<'_> {
    /// On the preparing thread: each of `batches` (a pass and its images; mosaic draws from
    /// `all`), in order, handed to `take` until it returns false or one fails. libtorch's thread
    /// count and grad mode are per thread: set here as the trainer's thread has them (no grad).
    fn prepare_each<'r>(
        &mut self,
        all: &'r [ImageRecord],
        epoch: usize,
        batches: impl Iterator<Item = (usize, Vec<&'r ImageRecord>)>,
        mut take: impl FnMut(Result<Prepared>) -> bool,
    ) {
        tch::set_num_threads(self.threads);
        let _guard = tch::no_grad_guard();
        let mut teacher = self.teacher.as_mut().map(RefCell::get_mut);
        for (pass, batch_records) in batches {
            let made = prepare(
                &batch_records,
                all,
                &self.config,
                &self.soft,
                self.device,
                teacher.as_deref_mut(),
                epoch,
                pass,
            );
            let failed = made.is_err();
            if !take(made) || failed {
                break;
            }
        }
    }
}

/// The next batch from the thread that prepares them (its error as the pass's).
fn received(receiver: &std::sync::mpsc::Receiver<Result<Prepared>>) -> Result<Prepared> {
    receiver
        .recv()
        .map_err(|_| Error::Config {
            key: "prefetch".into(),
            reason: "the thread preparing the batches ended early".into(),
        })?
        .map_err(oom)
}

/// The passes of an epoch in `order` (its shuffled indices into `records`) from pass `from` on,
/// each with its images.
fn epoch_batches<'r>(
    records: &'r [ImageRecord],
    order: &'r [usize],
    batch: usize,
    from: usize,
) -> impl Iterator<Item = (usize, Vec<&'r ImageRecord>)> + Send + 'r {
    order
        .chunks(batch)
        .enumerate()
        .skip(from)
        .map(|(pass, chunk)| (pass, chunk.iter().map(|&i| &records[i]).collect()))
}

/// The images of pass `pass` of epoch `epoch` over `records` (`None` past the epoch's last pass).
fn pass_images(
    records: &[ImageRecord],
    config: &TrainConfig,
    epoch: usize,
    pass: usize,
) -> Option<Vec<PathBuf>> {
    let order = shuffled(records.len(), config.seed, epoch);
    let chunk = order.chunks(config.batch).nth(pass)?;
    Some(chunk.iter().map(|&i| records[i].image.clone()).collect())
}

/// The generator of pass `pass` of epoch `epoch`: a pass's draws do not depend on which thread
/// makes its batch, nor on the passes before it (a resumed epoch draws as the uninterrupted one).
fn pass_rng(seed: u64, epoch: usize, pass: usize) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((epoch as u64 + 1) << 32) ^ pass as u64,
    )
}

/// Pass `pass` of epoch `epoch`'s batch: `batch_records` read and augmented as `config` says
/// (mosaic draws from `all`), and the teacher's head tensors on it. Under no-grad (the caller's).
#[allow(clippy::too_many_arguments)]
fn prepare(
    batch_records: &[&ImageRecord],
    all: &[ImageRecord],
    config: &TrainConfig,
    soft: &SoftTargets,
    device: tch::Device,
    teacher: Option<&mut Box<Teacher<'_>>>,
    epoch: usize,
    pass: usize,
) -> Result<Prepared> {
    let mut rng = pass_rng(config.seed, epoch, pass);
    let started = std::time::Instant::now();
    let batch = {
        let _span = span(c"headroom::data");
        augmented_batch(batch_records, all, config, &mut rng, soft, device)?
    };
    let data = started.elapsed().as_secs_f64();
    let started = std::time::Instant::now();
    let teacher = match teacher {
        Some(teacher) => {
            let _span = span(c"headroom::teacher");
            Some(head_tensors(&teacher(&batch.images)?)?)
        }
        None => None,
    };
    Ok(Prepared { batch, teacher, seconds: [data, started.elapsed().as_secs_f64()] })
}

/// The optimiser of a new run: weight decay scaled by `batch · accumulate / nbs`, as Ultralytics.
fn optimizer_for(config: &TrainConfig) -> Optimizer {
    let accumulate = schedule::accumulate(config);
    let weight_decay = config.weight_decay * (config.batch * accumulate) as f64 / config.nbs as f64;
    match config.optimizer {
        headroom_plan::Optimizer::Sgd => {
            Optimizer::Sgd(Sgd::new(config.lr0, config.momentum, true, weight_decay))
        }
        headroom_plan::Optimizer::AdamW => Optimizer::AdamW(AdamW::new(config.momentum, weight_decay)),
    }
}

/// libtorch's allocation failures become [`Error::OutOfMemory`].
fn oom(error: Error) -> Error {
    if is_out_of_memory(&error) { Error::OutOfMemory { reason: error.to_string() } } else { error }
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
