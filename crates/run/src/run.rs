//! One training run from start (or resume) to end: the student prepared, the inputs read, the run
//! folder created and locked, the trainer given its trunk, checkpoints, out-of-memory step-down,
//! memory cap and stop request; then each epoch trained, its averaged weights written back into
//! the same ONNX file (`last.onnx`), validated in ONNX Runtime (what ships is what is measured),
//! kept as `best.onnx` when better, its metrics row and plots written and a checkpoint saved; at
//! the end `best.onnx` validated once more, with Ultralytics' end-of-run pictures
//! ([`crate::val_plots`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use headroom_onnx::Model;
use headroom_train::Student;
use headroom_train::loss::LossConfig;
use headroom_train::memory_guard::{
    Allocator, LadderStepDown, MemoryCap, MemoryPool, TegraSampler, set_allocator,
};
use headroom_train::trainer::Trainer;

use crate::batch_speed;
use crate::epochs::{EpochOutputs, best_validation, train_epochs};
use crate::folder::{self, RESULTS_FILE, RunResults};
use crate::inputs::Inputs;
use crate::observer::Observer;
use crate::spec::{RunSpec, SPEC_FILE, TrunkRuntime};
use crate::{Error, Result, device, planner, teacher, trunk};

/// How a run is carried out (what does not shape its result).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// libtorch and ONNX Runtime threads (0: their defaults).
    pub threads: usize,
    /// Set by a Ctrl-C handler: the run stops at its next optimiser step, resumable.
    pub stop: Option<Arc<AtomicBool>>,
    /// How the C allocator returns freed memory (set before the run allocates anything; a
    /// process setting, not saved with the run).
    pub allocator: Allocator,
    /// A trace of libtorch's ops over this many passes after the run's first, and where to write
    /// it (`headroom train --profile`; docs/TRAIN.md "Where a step's time goes").
    pub profile: Option<(PathBuf, u64)>,
    /// Whether the next batch is prepared on a second thread (`--prefetch`; resolved by
    /// [`prefetch_on`]).
    pub prefetch: headroom_plan::Prefetch,
}

/// How a run ended without an error.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// Trained to its last epoch; `results.json`'s content.
    Finished(RunResults),
    /// It had already finished: nothing was done; its `results.json`.
    AlreadyFinished(RunResults),
    /// Stopped on request at a checkpoint; `headroom train --resume` continues it.
    Interrupted,
}

/// Starts a new run of `spec` in `dir` (which must not exist yet). Everything that can refuse the
/// run is checked before the folder is created.
pub fn start(
    spec: &RunSpec,
    dir: &Path,
    options: &RunOptions,
    observer: &mut dyn Observer,
) -> Result<RunEnd> {
    spec.validate()?;
    check_options(options)?;
    if dir.exists() {
        return Err(Error::Folder {
            dir: dir.to_path_buf(),
            reason: "exists: choose another --name, or add --resume to continue it".into(),
        });
    }
    execute(spec.clone(), dir, true, options, observer)
}

/// Continues the run in `dir` with its saved spec, extended to `epochs` when given.
pub fn resume(
    dir: &Path,
    epochs: Option<usize>,
    options: &RunOptions,
    observer: &mut dyn Observer,
) -> Result<RunEnd> {
    let mut spec = RunSpec::load(&folder::existing_run_dir(dir)?)?;
    if let Some(epochs) = epochs {
        if epochs < spec.settings.epochs {
            return Err(Error::ResumeConflict {
                setting: "settings.epochs".into(),
                saved: spec.settings.epochs.to_string(),
                given: format!("{epochs} (a run can be extended, not shortened)"),
            });
        }
        spec.settings.epochs = epochs;
        spec.validate()?;
    }
    if let Some(results) = folder::read_results(dir)
        && results.epochs == spec.settings.epochs
    {
        return Ok(RunEnd::AlreadyFinished(results));
    }
    check_options(options)?;
    execute(spec, dir, false, options, observer)
}

/// What can refuse the options before anything is written: a trace whose folder is missing.
fn check_options(options: &RunOptions) -> Result<()> {
    if let Some((path, _)) = &options.profile {
        headroom_train::profile::check_destination(path)?;
    }
    Ok(())
}

/// The model a run trains from: the student's file, re-normalised when the spec asks.
struct Start {
    /// Its bytes (what `last.onnx` and `best.onnx` are written back into).
    bytes: Vec<u8>,
    model: Model,
    /// SHA-256 of the student's file as given.
    base_sha: String,
    inputs: Inputs,
    renorm: Vec<crate::renorm::RenormStep>,
}

fn starting_model(spec: &RunSpec, threads: usize) -> Result<Start> {
    let bytes = std::fs::read(&spec.model).map_err(|e| headroom_core::Error::io(&spec.model, e))?;
    let base_sha = headroom_core::hash::sha256_hex(&bytes);
    let model = Model::from_bytes(&bytes, &spec.model)?;
    let inputs = Inputs::read(spec, &headroom_onnx::inspect::inspect(&model)?)?;
    if spec.renorm == 0 {
        return Ok(Start { bytes, model, base_sha, inputs, renorm: Vec::new() });
    }
    if inputs.train.len() < crate::renorm::MIN_NEW_IMAGES {
        return Err(Error::Input {
            path: spec.data.clone(),
            reason: format!(
                "--renorm: {} training images are too few to measure the new scenes' statistics on ({} at least)",
                inputs.train.len(),
                crate::renorm::MIN_NEW_IMAGES
            ),
        });
    }
    let (bytes, renorm) = crate::renorm::renormalise(
        &spec.model,
        &bytes,
        spec.renorm,
        &inputs.train,
        &inputs.replay,
        spec.settings.imgsz,
        threads,
    )?;
    let model = Model::from_bytes(&bytes, &spec.model)?;
    Ok(Start { bytes, model, base_sha, inputs, renorm })
}

/// Ultralytics' loss for the student's head (one-to-one for end-to-end heads).
fn loss_for(inspection: &headroom_onnx::inspect::Inspection) -> LossConfig {
    let (nc, reg_max, strides) =
        (inspection.classes as i64, inspection.head.reg_max as i64, inspection.strides.clone());
    if inspection.end_to_end {
        LossConfig::one_to_one(nc, reg_max, strides)
    } else {
        LossConfig::one_to_many(nc, reg_max, strides)
    }
}

/// The inputs that make a run what it is ([`folder::STARTED_WITH_FILE`]): a resumed run must train
/// on the ones it started with.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct StartedWith {
    model: std::path::PathBuf,
    data: std::path::PathBuf,
    #[serde(default)]
    replay: Option<std::path::PathBuf>,
    #[serde(default)]
    teacher: Option<std::path::PathBuf>,
}

impl StartedWith {
    fn of(spec: &RunSpec) -> StartedWith {
        StartedWith {
            model: spec.model.clone(),
            data: spec.data.clone(),
            replay: spec.replay.clone(),
            teacher: spec.teacher.clone(),
        }
    }

    /// Each input by its key, as JSON text (`"/data/a.yaml"`, `null`), for the message.
    fn keyed(&self) -> [(&'static str, String); 4] {
        let text = |path: Option<&std::path::PathBuf>| serde_json::to_string(&path).unwrap_or_default();
        [
            ("model", text(Some(&self.model))),
            ("data", text(Some(&self.data))),
            ("replay", text(self.replay.as_ref())),
            ("teacher", text(self.teacher.as_ref())),
        ]
    }
}

/// Writes [`folder::STARTED_WITH_FILE`] when the run folder has none (a new run, or one from before
/// it existed); otherwise refuses a spec whose inputs differ from it (a hand-edited `config.toml`).
fn check_started_with(dir: &Path, spec: &RunSpec) -> Result<()> {
    let path = dir.join(folder::STARTED_WITH_FILE);
    let now = StartedWith::of(spec);
    let saved: Option<StartedWith> =
        std::fs::read_to_string(&path).ok().and_then(|text| serde_json::from_str(&text).ok());
    let Some(saved) = saved else {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| headroom_core::Error::io(parent, e))?;
        }
        let text = serde_json::to_string_pretty(&now).unwrap_or_default() + "\n";
        headroom_core::fsio::write_atomic(&path, text.as_bytes())?;
        return Ok(());
    };
    for ((key, now), (_, saved)) in now.keyed().into_iter().zip(saved.keyed()) {
        if now != saved {
            return Err(Error::SavedSpec {
                path: dir.join(SPEC_FILE),
                reason: format!(
                    "{key} is {now} but the run started with {saved} ({}): config.toml was edited; a resumed run \
                     keeps the inputs it started with: put it back, or start a new run",
                    path.display()
                ),
            });
        }
    }
    Ok(())
}

/// Creates (or locks) the run folder and writes the spec: the first thing a run puts on disk.
fn open_folder(
    dir: &Path,
    fresh: bool,
    spec: &RunSpec,
    start: &Start,
) -> Result<headroom_core::fsio::OutputLock> {
    let lock = folder::create_and_lock(dir)?;
    sweep_temporaries(dir);
    if fresh {
        if dir.join(SPEC_FILE).exists() {
            return Err(Error::Folder { dir: dir.to_path_buf(), reason: "another run started here".into() });
        }
    } else {
        // The run's results are rewritten at its end (an extended run has more epochs).
        let _ = std::fs::remove_file(dir.join(RESULTS_FILE));
    }
    check_started_with(dir, spec)?;
    spec.save(dir)?;
    if !start.renorm.is_empty() {
        // The starting point of the training: what re-normalisation alone gives.
        headroom_core::fsio::write_atomic(&dir.join("renorm.onnx"), &start.bytes)?;
    }
    Ok(lock)
}

/// Gives the trainer its checkpoints, out-of-memory step-down, memory cap and stop request.
fn configure(
    trainer: &mut Trainer<'_>,
    spec: &RunSpec,
    dir: &Path,
    pool: MemoryPool,
    options: &RunOptions,
) -> Result<()> {
    trainer.set_checkpoint_path(&dir.join("ckpt/last.pt"));
    // Out of memory: one rung down, back to the last checkpoint (docs/PLAN.md).
    trainer.set_out_of_memory(Box::new(LadderStepDown { gpu: matches!(pool, MemoryPool::Cuda { .. }) }));
    if let Some(bytes) = spec.memory_cap_bytes()? {
        // Validation loads ONNX Runtime at the first epoch's end (and a run that freezes nothing
        // has not loaded it yet): its library belongs to the start, not to the passes after it.
        let _ = headroom_infer::runtime::environment();
        let cap = MemoryCap::new(bytes, spec.memory_cap_after, pool).ok_or_else(|| Error::Spec {
            key: "--memory-cap".into(),
            reason: "needs /proc/self/status (Linux)".into(),
        })?;
        tracing::debug!("--memory-cap: {} MiB held at the start of training ({pool:?})", cap.base >> 20);
        trainer.set_memory_cap(cap);
    }
    if let Some((path, passes)) = &options.profile {
        trainer.set_profile(headroom_train::profile::ProfileWindow::new(path, 1, *passes));
    }
    if let Some(stop) = &options.stop {
        trainer.set_stop(Arc::clone(stop));
    }
    Ok(())
}

/// A resumed run goes back to its last checkpoint (none: it starts again) and drops the metrics
/// rows after it; a run without a checkpoint saves its start, what a step down goes back to.
fn restore(trainer: &mut Trainer<'_>, dir: &Path, fresh: bool) -> Result<()> {
    let checkpoint = dir.join("ckpt/last.pt");
    if !fresh {
        if checkpoint.exists() {
            trainer.load_checkpoint(&checkpoint)?;
        }
        folder::truncate_metrics(dir, trainer.progress().epochs_done)?;
        let p = trainer.progress();
        tracing::info!("resuming {} at epoch {}, pass {}", dir.display(), p.epochs_done + 1, p.pass);
    }
    if !checkpoint.exists() {
        trainer.save_start_checkpoint(&dir.join("ckpt/start.pt"))?;
    }
    Ok(())
}

fn execute(
    mut spec: RunSpec,
    dir: &Path,
    fresh: bool,
    options: &RunOptions,
    observer: &mut dyn Observer,
) -> Result<RunEnd> {
    set_process(options);
    // Before anything touches CUDA: where memory stood, for the figure of a Jetson's GPU run.
    let memory_at_start = headroom_core::tegra_memory::Sample::read();
    let (device_text, preset) =
        device::resolve_saved(&spec.device, spec.device_preset.as_ref(), device::cuda_available(), true)?;
    let device = device::torch_device(&device_text)?;
    let mut start = starting_model(&spec, options.threads)?;
    let trainable = spec.part;
    let student = student_for(&spec, &start.model, device)?;
    let inspection = student.inspection().clone();
    let mut trainer = Trainer::new(&student, spec.settings.clone(), loss_for(&inspection))?;
    spec.memory_cap_bytes()?;
    let teacher = match &spec.teacher {
        Some(path) => {
            // The teacher runs where the frozen trunk runs; with nothing frozen (`all`, `affine`)
            // on libtorch, so that ONNX Runtime is not resident while training.
            let on_torch = spec.trunk == TrunkRuntime::Torch || student.partition().trunk.is_empty();
            let torch = on_torch.then_some(device);
            Some(teacher::open(path, &inspection, spec.settings.imgsz, options.threads, torch)?)
        }
        None => None,
    };

    // Everything that can refuse the run has been checked: the folder is created (or locked) now.
    let _lock = open_folder(dir, fresh, &spec, &start)?;
    let inputs = &mut start.inputs;
    trainer.set_soft_targets(std::mem::take(&mut inputs.soft));
    let mut all = inputs.train.clone();
    all.extend(inputs.replay.iter().cloned());
    let trunk = trunk::trunk_for(
        &spec,
        &start.model,
        &student,
        &all,
        dir,
        &start.base_sha,
        options.threads,
        observer,
    )?;
    trainer.set_trunk(trunk)?;
    let teacher_cost = teacher.as_ref().map(teacher::TeacherSession::cost);
    if let Some(teacher) = teacher {
        trainer.set_teacher(teacher.into_teacher(device))?;
    }
    let pool = match device {
        headroom_train::tch::Device::Cuda(index) => {
            MemoryPool::Cuda { device: index, unified: preset.unified }
        }
        _ => MemoryPool::Cpu,
    };
    observer.memory_pool(pool);
    // On a unified board's GPU the figure is memory as Tegra counts it, sampled while training.
    let tegra = match (pool, memory_at_start) {
        (MemoryPool::Cuda { unified: true, .. }, Some(start)) => {
            Some(TegraSampler::start(start, std::time::Duration::from_millis(200)))
        }
        _ => None,
    };
    // `--plan auto` found room for larger batches: each is timed before the first step (again
    // after a kill before training started: nothing was trained), the fastest kept in config.toml.
    let trained = !fresh && dir.join("ckpt/last.pt").exists();
    let mut setup_peak = None;
    let spare = device.is_cuda() || spare_core(options.threads);
    let prefetch = prefetch_on(options.prefetch, spare, spec.cache_features, options.profile.is_some());
    // The batches are timed as they will train: prepared on the second thread when it runs.
    trainer.set_prefetch(prefetch);
    if spec.plan.as_ref().is_some_and(crate::spec::PlanChoice::timing_pending) && !trained {
        let images = inputs.epoch_images(spec.replay_fraction, spec.settings.seed, 0);
        setup_peak = batch_speed::choose(&mut trainer, &mut spec, &images, pool)?;
        spec.save(dir)?;
    }
    let mut setup = planner::setup_of(
        &spec.settings,
        trainable,
        spec.trunk,
        spec.cache_features,
        &inputs.train,
        teacher_cost,
        planner::frame_of([&inputs.train[..], &inputs.val[..], &inputs.replay[..]]),
    );
    setup.prefetch = prefetch;
    if setup.prefetch && options.profile.is_some() {
        tracing::warn!(
            "--prefetch on with --profile: the trace holds the main thread's ops, not the data's or the teacher's"
        );
    }
    let mut estimate =
        planner::PlannerCheck::estimate(&start.model, &inspection, &preset, &setup, device.is_cuda());
    if let (headroom_plan::Prefetch::Auto, true, Some(plan)) = (options.prefetch, setup.prefetch, &spec.plan)
    {
        let mib = estimate.estimate_mb.unwrap_or(0.0);
        if mib * (1u64 << 20) as f64 > plan.budget as f64 {
            tracing::info!(
                "--prefetch auto: off, the next batch beside this one ({mib:.0} MiB estimated) is over the \
                 budget of {}",
                headroom_plan::format_size(plan.budget)
            );
            setup.prefetch = false;
            estimate =
                planner::PlannerCheck::estimate(&start.model, &inspection, &preset, &setup, device.is_cuda());
        }
    }
    trainer.set_prefetch(setup.prefetch);
    if setup.prefetch {
        tracing::info!("the next batch is prepared on a second thread while each pass runs (--prefetch)");
    }
    // The student, its trunk and the planner have what they need from the decoded model; its
    // weights (the protobuf's and the IR's) are two copies the rest of the run does not read.
    start.model.release_initializers();
    // After the release: a memory cap counts from the resident set the training starts with.
    configure(&mut trainer, &spec, dir, pool, options)?;
    tracing::info!(
        "planner ({}): estimated peak {} MB for this run{}",
        preset.name,
        estimate.estimate_mb.map_or_else(
            || format!("unknown ({})", estimate.error.as_deref().unwrap_or("")),
            |mb| mb.to_string()
        ),
        if teacher_cost.is_some() { " (the teacher included)" } else { "" }
    );
    restore(&mut trainer, dir, fresh)?;
    tracing::info!(
        "training {} ({trainable}, {} parameters, {}) on {} images, validating on {}; run folder {}",
        spec.model.display(),
        student.partition().parameter_count,
        device_text,
        inputs.train.len(),
        inputs.val.len(),
        dir.display()
    );
    let (model_path, part) = (spec.model.clone(), spec.part.to_string());
    let outputs = EpochOutputs {
        dir,
        model: &model_path,
        bytes: &start.bytes,
        base_sha: &start.base_sha,
        part: &part,
        threads: options.threads,
        memory_lines: planner::memory_lines(&spec, &estimate),
        pool,
    };
    let Some((best, ended)) =
        train_epochs(&mut trainer, &mut spec, &outputs, &start.inputs, options.stop.as_deref(), observer)?
    else {
        return Ok(RunEnd::Interrupted);
    };
    // With the set-up's peak where timing the batches started the peaks again.
    let peak = folder::peak_memory(pool);
    let peak = setup_peak.map_or(peak, |setup| peak.max(setup));
    let peak = match &tegra {
        Some(sampler) => peak.with_tegra(&sampler.peak()),
        None => peak,
    };
    // After the peak is read: the planner's check is of the training, as before.
    let best_val = best_validation(&spec, dir, &start.inputs, options.threads);
    // Every run checks the planner: its estimate against this run's measured peak (on CUDA the
    // allocator's, with the resident set on a unified board: the figure a budget holds).
    estimate.check_against(peak.rss_mb, peak.counted_mb);
    let results = RunResults {
        run: dir.to_path_buf(),
        epochs: spec.settings.epochs,
        epochs_done: ended.epochs_done,
        stopped_early: ended.stopped_early,
        best_epoch: ended.best_epoch,
        best_fitness: best,
        start_fitness: folder::read_start_fitness(dir),
        best_val,
        best: dir.join("best.onnx"),
        last: dir.join("last.onnx"),
        peak_rss_mb: peak.rss_mb,
        peak_cuda_reserved_mb: peak.cuda_reserved_mb,
        peak_cuda_allocated_mb: peak.cuda_allocated_mb,
        peak_mb: peak.counted_mb,
        peak_tegra_mb: peak.tegra_mb,
        memory_pool: pool_text(pool).to_string(),
        planner: estimate,
        steps_down: trainer.steps_down().to_vec(),
        renorm: start.renorm,
    };
    let text = serde_json::to_string_pretty(&results).unwrap_or_default() + "\n";
    headroom_core::fsio::write_atomic(&dir.join(RESULTS_FILE), text.as_bytes())?;
    Ok(RunEnd::Finished(results))
}

/// Whether this machine has a core the run's libtorch threads leave free: `threads` set (0 takes
/// every core) and below the cores available to the process.
fn spare_core(threads: usize) -> bool {
    threads > 0 && std::thread::available_parallelism().is_ok_and(|n| n.get() > threads)
}

/// `--prefetch` resolved: `auto` is on where a core is spare (the student on a GPU leaves the CPU
/// free), the batches are made each pass (not read from a feature cache) and no `--profile` traces
/// the passes (libtorch's profiler records the thread that starts it: the phases are traced in
/// turn). The budget is checked after, where the run is planned.
pub fn prefetch_on(
    choice: headroom_plan::Prefetch,
    spare_core: bool,
    cache_features: bool,
    profiling: bool,
) -> bool {
    match choice {
        headroom_plan::Prefetch::On => !cache_features,
        headroom_plan::Prefetch::Off => false,
        headroom_plan::Prefetch::Auto => spare_core && !cache_features && !profiling,
    }
}

/// The process settings of a run: libtorch's threads, the C allocator's mode.
fn set_process(options: &RunOptions) {
    if options.threads > 0 {
        headroom_train::tch::set_num_threads(options.threads as i32);
    }
    if !set_allocator(options.allocator) {
        tracing::warn!(
            "--allocator {:?}: this C library has no such setting; its defaults stay",
            options.allocator
        );
    }
}

/// The student prepared for training on `device`, its batch checked against the export.
fn student_for(spec: &RunSpec, model: &Model, device: headroom_train::tch::Device) -> Result<Student> {
    let trainable = spec.part;
    let mut student = Student::new(model, trainable, device).map_err(|e| {
        // Most of these errors name the model already: once is enough.
        let text = e.to_string();
        let prefix = format!("{}: ", spec.model.display());
        let reason = text.strip_prefix(&prefix).unwrap_or(&text);
        Error::Input {
            path: spec.model.clone(),
            reason: format!("preparing for training ({trainable}): {reason}"),
        }
    })?;
    check_batch(spec, model, &student)?;
    if let Some(qat) = &spec.qat {
        student.set_fake_quant(crate::qat::sites(qat, model)?)?;
    }
    Ok(student)
}

/// Which memory a run's peaks are of (`results.json`'s `memory_pool`).
fn pool_text(pool: MemoryPool) -> &'static str {
    match pool {
        MemoryPool::Cpu => "cpu (resident set)",
        MemoryPool::Cuda { unified: true, .. } => {
            "cuda, unified with the system's (allocator reserved + resident set)"
        }
        MemoryPool::Cuda { unified: false, .. } => "cuda (allocator reserved)",
    }
}

/// Removes the temporaries that a killed run of this folder left behind (its own files only).
fn sweep_temporaries(dir: &Path) {
    let folders =
        [(dir.to_path_buf(), &folder::RUN_FILES[..]), (dir.join("ckpt"), &folder::CHECKPOINT_FILES[..])];
    for (path, names) in folders {
        match headroom_core::fsio::remove_stale_temporaries(&path, names) {
            Ok(removed) => {
                for file in removed {
                    tracing::info!("removed {}, left by a run that was stopped", file.display());
                }
            }
            Err(e) => tracing::warn!("sweeping {}: {e}", path.display()),
        }
    }
}

/// A batch above 1 needs a trunk that takes it (static batch-1 exports run their trunk image by
/// image, but their attention layers cannot train at batch 2).
fn check_batch(spec: &RunSpec, model: &Model, student: &Student) -> Result<()> {
    let reshapes_in_training = student
        .partition()
        .segments
        .iter()
        .flat_map(|seg| &seg.nodes)
        .any(|&i| matches!(model.graph.nodes[i].op, headroom_onnx::Op::Reshape(_)));
    if spec.settings.batch > 1 && student.batch_fixed_at_one() && reshapes_in_training {
        return Err(Error::Input {
            path: spec.model.clone(),
            reason: format!(
                "the export's batch is fixed at 1 and the part to train ({}) reshapes with that batch (attention \
                 layers): use --batch 1 (gradients still accumulate to --nbs), --train head, or an export with \
                 dynamic=True",
                spec.part
            ),
        });
    }
    Ok(())
}
