//! `headroom train`: fine-tune an ONNX detector's head on a dataset and write the same ONNX back
//! (docs/TRAIN.md). Each epoch: train, write `last.onnx` (averaged weights, written back into the
//! original graph), evaluate it through ONNX Runtime on the val split (what ships is what is
//! measured), keep the best as `best.onnx`, append `metrics.csv`, save a checkpoint.

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
use std::path::Path;
use std::path::PathBuf;

use super::Outcome;

/// Arguments of `headroom train`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The student, an Ultralytics ONNX detector export (or a headroom export of one).
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// The dataset (Ultralytics `data.yaml`; `headroom label` writes one over pseudo-labels).
    #[arg(long, value_name = "data.yaml")]
    pub data: PathBuf,
    /// What trains: `head` (the Detect module), `neck+head`, `all`, or N (modules 0..N frozen, as
    /// Ultralytics' `freeze=N`; 0 trains everything).
    #[arg(long, default_value = "head", value_name = "PART")]
    pub train: String,
    /// Freeze modules 0..N and train the rest (Ultralytics' `freeze=N`; the same as --train N).
    #[arg(long, value_name = "N", conflicts_with = "train")]
    pub freeze: Option<usize>,
    /// Epochs.
    #[arg(long, default_value_t = 10, value_parser = super::provider_args::count_arg::<1, 10000>)]
    pub epochs: usize,
    /// Images per forward pass (gradients accumulate to --nbs).
    #[arg(long, default_value_t = 2, value_parser = super::provider_args::count_arg::<1, 256>)]
    pub batch: usize,
    /// Nominal batch: one optimiser step per round(nbs / batch) passes (Ultralytics' nbs).
    #[arg(long, default_value_t = 64, value_parser = super::provider_args::count_arg::<1, 4096>)]
    pub nbs: usize,
    /// Optimiser: auto (Ultralytics' rule: AdamW at 0.002·5/(4+nc), momentum 0.9, for runs under
    /// 10,000 iterations; SGD at 0.01 above), sgd (Nesterov momentum 0.937) or adamw. auto by
    /// measurement: it kept and gained the most (docs/BENCHMARKS.md).
    #[arg(long, default_value = "auto", value_parser = ["sgd", "adamw", "auto"])]
    pub optimizer: String,
    /// Initial learning rate of sgd and adamw (warmup, then decay to lr0·0.01) [default: 1e-4;
    /// SGD at 1e-3 wrecked the converged demo model]. auto chooses its own and ignores this.
    #[arg(long)]
    pub lr0: Option<f64>,
    /// Cosine instead of linear learning-rate decay.
    #[arg(long)]
    pub cos_lr: bool,
    /// Clip the gradients' L2 norm at each step to this (Ultralytics: 10; 0: off).
    #[arg(long, default_value_t = 10.0)]
    pub max_grad_norm: f64,
    /// Distillation: gain of a KL term between the teacher's soft class scores (written by
    /// `headroom label` beside its labels) and the student's, on the anchors assigned to objects.
    #[arg(long, default_value_t = 0.0, value_name = "WEIGHT")]
    pub kd: f64,
    /// Pull toward the starting weights against forgetting (L2-SP: adds anchor·(w − w₀) to each
    /// step's gradient; 0: off). --replay is the measured remedy (docs/TRAIN.md).
    #[arg(long, default_value_t = 0.0)]
    pub anchor: f64,
    /// Probability of a left-right flip per image.
    #[arg(long, default_value_t = 0.5)]
    pub flip: f64,
    /// HSV augmentation gains: hue, saturation, value (Ultralytics: 0.015,0.7,0.4; default off).
    #[arg(long, default_value = "0,0,0", value_name = "H,S,V")]
    pub hsv: String,
    /// Random translation, a fraction of the input (Ultralytics: 0.1; default off).
    #[arg(long, default_value_t = 0.0)]
    pub translate: f32,
    /// Random scale gain: the image is scaled by 1 ± this (Ultralytics: 0.5; default off).
    #[arg(long, default_value_t = 0.0)]
    pub scale: f32,
    /// Probability of a 4-image mosaic (Ultralytics: 1.0; default off).
    #[arg(long, default_value_t = 0.0)]
    pub mosaic: f32,
    /// Map dataset classes onto the student's: SRC=DST,... (ids or names; DST `drop` removes them).
    #[arg(long, value_name = "SRC=DST,...")]
    pub remap: Option<String>,
    /// Input size: a static export takes only its own; a dynamic one is rounded up to a multiple
    /// of the largest stride [default: the export's size].
    #[arg(long, value_parser = super::provider_args::count_arg::<32, 8192>)]
    pub imgsz: Option<usize>,
    /// Where libtorch trains: cpu, cuda or cuda:N; or a device preset of `headroom plan`
    /// (orin-nano-4, ...: CUDA when it has a GPU and libtorch sees one), whose budget --plan auto fits.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// `auto`: train with the first configuration of `headroom plan`'s fit ladder that fits the
    /// device's budget (from --train, --imgsz, batch 16 down); it overrides --batch,
    /// --no-checkpoint, --amp, --cache-features, --train and --imgsz. `off`: as given.
    #[arg(long, default_value = "off", value_parser = ["off", "auto"])]
    pub plan: String,
    #[command(flatten)]
    pub budget: super::plan::PlanArgs,
    /// Stop a pass that takes more than this above what the process held when training started
    /// (checked after every pass, Linux): it is then an out-of-memory error, and the run steps
    /// down one rung (batch halved, accumulation keeping --nbs; then checkpointing; then AMP on a
    /// GPU), reloads its last checkpoint and goes on, as after a real allocation failure.
    #[arg(long, value_name = "SIZE")]
    pub memory_cap: Option<String>,
    /// Passes before --memory-cap is checked (to hit it mid-epoch in tests).
    #[arg(long, default_value_t = 0, hide = true)]
    pub memory_cap_after: u64,
    /// What runs the frozen trunk: ort (ONNX Runtime on the trunk cut out of the same file) or
    /// torch (headroom's libtorch executor).
    #[arg(long, default_value = "ort", value_parser = ["ort", "torch"])]
    pub trunk: String,
    /// Compute the trunk's outputs once per image (and its mirror image when --flip > 0), store them
    /// as fp16 in the run folder, and train epochs on them: only the trainable part runs. Refused
    /// with augmentations that change the trunk's input (--mosaic, --scale, --translate, --hsv).
    #[arg(long)]
    pub cache_features: bool,
    /// Mixed precision on CUDA (fp16 autocast with a dynamic loss scale). On the CPU it is ignored
    /// with a warning: the run trains in fp32.
    #[arg(long)]
    pub amp: bool,
    /// Checkpoint every N optimiser steps within an epoch (0: at epoch ends only).
    #[arg(long, default_value_t = 10)]
    pub save_period: u64,
    /// Old-domain data to replay against forgetting: each epoch adds a seeded sample of this dataset's
    /// train split to the new images (docs/TRAIN.md: without it a field retrain lost 21.6 points on
    /// the old scenes, with as many replayed images 0.65).
    #[arg(long, value_name = "OLD.yaml")]
    pub replay: Option<PathBuf>,
    /// Replayed images per new image and epoch (with --replay).
    #[arg(long, default_value_t = 1.0, requires = "replay")]
    pub replay_fraction: f64,
    /// Keep the head's activations for backward instead of recomputing them (faster, more memory).
    #[arg(long)]
    pub no_checkpoint: bool,
    /// Seed of the data order and flips.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Parent folder of runs.
    #[arg(long, default_value = "runs/train", value_name = "DIR")]
    pub project: PathBuf,
    /// Run name: the run is written to PROJECT/NAME [default: train, train2, ...].
    #[arg(long)]
    pub name: Option<String>,
    /// Continue the run PROJECT/NAME from its last checkpoint (its saved settings are used); a run
    /// killed before its first checkpoint starts again.
    #[arg(long, requires = "name")]
    pub resume: bool,
    /// libtorch and ONNX Runtime threads (0: their defaults).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
}

/// Runs `headroom train`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    if let Some(lr0) = args.lr0 {
        anyhow::ensure!(lr0 > 0.0 && lr0 < 1.0, "--lr0 {lr0} is not in (0, 1)");
    }
    anyhow::ensure!((0.0..=1.0).contains(&args.flip), "--flip {} is not in [0, 1]", args.flip);
    anyhow::ensure!(
        (0.0..=10.0).contains(&args.replay_fraction),
        "--replay-fraction {} is not in [0, 10]",
        args.replay_fraction
    );
    anyhow::ensure!((0.0..=100.0).contains(&args.kd), "--kd {} is not in [0, 100]", args.kd);
    anyhow::ensure!((0.0..=1e6).contains(&args.anchor), "--anchor {} is not in [0, 1e6]", args.anchor);
    anyhow::ensure!(args.max_grad_norm >= 0.0, "--max-grad-norm {} is negative", args.max_grad_norm);
    anyhow::ensure!((0.0..=1.0).contains(&args.mosaic), "--mosaic {} is not in [0, 1]", args.mosaic);
    anyhow::ensure!(
        (0.0..0.5).contains(&args.translate),
        "--translate {} is not in [0, 0.5)",
        args.translate
    );
    anyhow::ensure!((0.0..1.0).contains(&args.scale), "--scale {} is not in [0, 1)", args.scale);
    let pixels_change = args.mosaic > 0.0
        || args.scale > 0.0
        || args.translate > 0.0
        || hsv_gains(&args.hsv)?.iter().any(|&g| g > 0.0);
    anyhow::ensure!(
        !(args.cache_features && pixels_change),
        "--cache-features stores the trunk's outputs for fixed inputs; --mosaic, --scale, --translate and \
         --hsv change those inputs: turn them off or drop --cache-features"
    );
    let trainable: headroom_onnx::Trainable = match args.freeze {
        Some(n) => headroom_onnx::Trainable::Freeze(n),
        None => args.train.parse().map_err(|e| anyhow::anyhow!("--train {}: {e}", args.train))?,
    };
    #[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
    if args.plan == "auto" {
        anyhow::ensure!(
            !args.resume,
            "--plan auto plans a new run; --resume continues with the run's own settings"
        );
        let (torch, preset) = super::train_plan::resolve_device(&args.device, cuda_available(), false)?;
        let gpu = torch != "cpu";
        let (planned, trainable) = super::train_plan::plan_auto(args, trainable, &preset, &args.budget, gpu)?;
        return train(&planned, trainable);
    }
    train(args, trainable)
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn cuda_available() -> bool {
    headroom_train::tch::Cuda::is_available()
}

/// `--hsv H,S,V`, each in [0, 1].
pub(super) fn hsv_gains(text: &str) -> anyhow::Result<[f32; 3]> {
    let parts: Vec<f32> = text
        .split(',')
        .map(|p| p.trim().parse::<f32>())
        .collect::<Result<_, _>>()
        .map_err(|_| anyhow::anyhow!("--hsv {text}: expected three numbers H,S,V"))?;
    let gains: [f32; 3] =
        parts.try_into().map_err(|_| anyhow::anyhow!("--hsv {text}: expected three numbers H,S,V"))?;
    anyhow::ensure!(gains.iter().all(|g| (0.0..=1.0).contains(g)), "--hsv {text}: each gain in [0, 1]");
    Ok(gains)
}

/// The run folder: PROJECT/NAME, or the first free PROJECT/trainN.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn run_dir(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(name) = &args.name {
        let dir = args.project.join(name);
        anyhow::ensure!(
            args.resume || !dir.exists(),
            "{} exists: choose another --name, or add --resume to continue it",
            dir.display()
        );
        anyhow::ensure!(
            !args.resume || dir.join(CONFIG).exists(),
            "{}: no run to resume (no {CONFIG})",
            dir.display()
        );
        return Ok(dir);
    }
    (1..10_000)
        .map(|i| args.project.join(if i == 1 { "train".to_string() } else { format!("train{i}") }))
        .find(|d| !d.exists())
        .ok_or_else(|| anyhow::anyhow!("{}: no free run name", args.project.display()))
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
const CONFIG: &str = "config.toml";

/// libtorch's device from `--device`.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn device(text: &str) -> anyhow::Result<headroom_train::tch::Device> {
    use headroom_train::tch::{Cuda, Device};
    let index = match text {
        "cpu" => return Ok(Device::Cpu),
        "cuda" => 0,
        other => other
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .ok_or_else(|| anyhow::anyhow!("--device {other}: expected cpu, cuda or cuda:N"))?,
    };
    anyhow::ensure!(
        Cuda::is_available(),
        "--device {text}: this libtorch sees no CUDA device (scripts/setup.sh installs the CPU build; on a \
         Jetson, point LIBTORCH at JetPack's PyTorch, docs/TRAIN.md)"
    );
    anyhow::ensure!(
        (index as i64) < Cuda::device_count(),
        "--device {text}: only {} CUDA device(s)",
        Cuda::device_count()
    );
    Ok(Device::Cuda(index))
}

/// The input size: the export's; `--imgsz` for a dynamic export, rounded up to the largest stride.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn input_size(args: &Args, inspection: &headroom_onnx::inspect::Inspection) -> anyhow::Result<[u32; 2]> {
    let [h, w] = inspection.inspected_size;
    let Some(wanted) = args.imgsz else { return Ok([w as u32, h as u32]) };
    let fixed = inspection.input_shape.iter().skip(2).all(|d| matches!(d, headroom_onnx::Dim::Known(_)));
    if fixed {
        anyhow::ensure!(
            wanted as i64 == h && wanted as i64 == w,
            "{}: the export's input is fixed at {h}x{w}; --imgsz {wanted} needs an export at that size \
             (or dynamic=True)",
            args.model.display()
        );
        return Ok([w as u32, h as u32]);
    }
    let stride = inspection.strides.iter().copied().max().unwrap_or(32) as usize;
    let rounded = wanted.div_ceil(stride) * stride;
    if rounded != wanted {
        tracing::warn!("--imgsz {wanted} is not a multiple of the largest stride {stride}: using {rounded}");
    }
    Ok([rounded as u32, rounded as u32])
}

/// What is read before the run folder exists: every check that can refuse the run.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
struct Inputs {
    data: headroom_core::dataset::DataConfig,
    train: Vec<headroom_core::dataset::ImageRecord>,
    val: Vec<headroom_core::dataset::ImageRecord>,
    soft: headroom_train::data::SoftTargets,
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn read_inputs(args: &Args, model: &headroom_onnx::inspect::Inspection, kd: f64) -> anyhow::Result<Inputs> {
    use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
    let data = DataConfig::load(&args.data)?;
    let mut train = load_split(&data, Split::Train, LoadOptions::default())?.images;
    let mut val = load_split(&data, Split::Val, LoadOptions::default())?.images;
    anyhow::ensure!(!train.is_empty(), "{}: the train split has no usable image", args.data.display());
    let (mut soft, objects) = super::train_data::load_soft_targets(&train, model.classes)?;
    anyhow::ensure!(
        kd == 0.0 || objects > 0,
        "--kd needs the teacher's soft scores (labels/<stem>.scores.bin, written by `headroom label`): the \
         train split of {} has none",
        args.data.display()
    );
    if kd > 0.0 {
        let total: usize = train.iter().map(|r| r.labels.len()).sum();
        tracing::info!("distillation: {objects} of {total} objects have the teacher's soft scores");
    }
    let student_names: Vec<String> =
        model.names.clone().unwrap_or_else(|| (0..model.classes).map(|i| i.to_string()).collect());
    match &args.remap {
        Some(text) => {
            let remap = super::train_data::Remap::parse(text, &data.names, &student_names)?;
            remap.apply(&mut train, &mut soft, &data.names)?;
            remap.apply(&mut val, &mut headroom_train::data::SoftTargets::new(), &data.names)?;
        }
        None => {
            super::train_data::check_classes(model.names.as_deref(), model.classes, &data.names, &args.data)?
        }
    }
    if let Some(path) = &args.replay {
        let old = DataConfig::load(path)?;
        anyhow::ensure!(
            old.names.len() == model.classes,
            "{}: the replay dataset has {} classes, the model {}",
            path.display(),
            old.names.len(),
            model.classes
        );
    }
    Ok(Inputs { data, train, val, soft })
}

/// The settings of a new run from the command line.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn settings(
    args: &Args,
    imgsz: [u32; 2],
    images: usize,
    nc: usize,
) -> anyhow::Result<headroom_train::fit::TrainConfig> {
    use headroom_train::fit::{OptimizerKind, TrainConfig};
    let [hsv_h, hsv_s, hsv_v] = hsv_gains(&args.hsv)?;
    anyhow::ensure!(
        args.mosaic == 0.0 || imgsz[0] == imgsz[1],
        "--mosaic needs a square input; this one is {}x{}",
        imgsz[1],
        imgsz[0]
    );
    let config = TrainConfig {
        epochs: args.epochs,
        batch: args.batch,
        nbs: args.nbs,
        optimizer: if args.optimizer == "adamw" { OptimizerKind::AdamW } else { OptimizerKind::Sgd },
        lr0: args.lr0.unwrap_or(1e-4),
        cos_lr: args.cos_lr,
        max_grad_norm: args.max_grad_norm,
        flip: args.flip,
        augment: headroom_train::augment::AugmentConfig {
            hsv_h,
            hsv_s,
            hsv_v,
            translate: args.translate,
            scale: args.scale,
            mosaic: args.mosaic,
        },
        kd: args.kd,
        anchor: args.anchor,
        checkpoint: !args.no_checkpoint,
        amp: args.amp && args.device != "cpu" && headroom_train::tch::Cuda::is_available(),
        save_period: args.save_period,
        seed: args.seed,
        imgsz,
        ..TrainConfig::default()
    };
    Ok(if args.optimizer == "auto" {
        if let Some(lr0) = args.lr0 {
            tracing::warn!(
                "--lr0 {lr0} is ignored: --optimizer auto chooses the rate (use sgd or adamw to set it)"
            );
        }
        let config = config.with_auto_optimizer(images, nc);
        tracing::info!(
            "--optimizer auto: {:?} lr0 {} momentum {}",
            config.optimizer,
            config.lr0,
            config.momentum
        );
        config
    } else {
        config
    })
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn train(args: &Args, trainable: headroom_onnx::Trainable) -> anyhow::Result<Outcome> {
    use anyhow::Context as _;
    use headroom_train::fit::Trainer;
    use headroom_train::loss::LossConfig;

    if args.threads > 0 {
        headroom_train::tch::set_num_threads(args.threads as i32);
    }
    let (device_text, preset) = super::train_plan::resolve_device(&args.device, cuda_available(), true)?;
    let device = device(&device_text)?;
    if args.amp && !device.is_cuda() {
        tracing::warn!(
            "--amp: mixed precision is for CUDA; on the CPU this run trains in fp32 (config.toml records amp = false)"
        );
    }
    let model = headroom_onnx::Model::load(&args.model)?;
    let student = headroom_train::Student::new(&model, trainable, device)
        .with_context(|| format!("preparing {} for training ({trainable})", args.model.display()))?;
    check_batch(args, &model, &student, trainable)?;
    let inspection = student.inspection().clone();
    let (nc, reg_max, strides) =
        (inspection.classes as i64, inspection.head.reg_max as i64, inspection.strides.clone());
    let loss = if inspection.end_to_end {
        LossConfig::one_to_one(nc, reg_max, strides)
    } else {
        LossConfig::one_to_many(nc, reg_max, strides)
    };
    let imgsz = input_size(args, &inspection)?;
    let mut inputs = read_inputs(args, &inspection, args.kd)?;
    let new_settings = settings(args, imgsz, inputs.train.len(), inspection.classes)?;
    let dir = run_dir(args)?;
    std::fs::create_dir_all(dir.join("ckpt")).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = headroom_core::fsio::OutputLock::acquire(&dir, "headroom train")?;
    let run = if args.resume {
        read_run_config(&dir)?
    } else {
        write_run_config(args, trainable, &dir, new_settings)?
    };
    let config = run.settings.clone();
    let replay = match &run.replay {
        Some(path) => {
            let old = headroom_core::dataset::DataConfig::load(path)?;
            let split = headroom_core::dataset::Split::Train;
            headroom_core::dataset::load_split(&old, split, Default::default())?.images
        }
        None => Vec::new(),
    };
    let bytes = std::fs::read(&args.model).with_context(|| format!("reading {}", args.model.display()))?;
    let base_sha = headroom_infer::label::output::sha256_hex(&bytes);
    let mut trainer = Trainer::new(&student, config.clone(), loss)?;
    trainer.set_soft_targets(std::mem::take(&mut inputs.soft));
    attach_trunk(&mut trainer, &model, &student, &run, &inputs, &replay, &dir, &base_sha, args.threads)?;
    let checkpoint = dir.join("ckpt/last.pt");
    trainer.set_checkpoint_path(&checkpoint);
    // Out of memory: one rung down, back to the last checkpoint (docs/PLAN.md).
    trainer
        .set_out_of_memory(Box::new(headroom_train::memory_guard::LadderStepDown { gpu: device.is_cuda() }));
    if let Some(text) = &args.memory_cap {
        let bytes = headroom_plan::parse_size(text).map_err(|e| anyhow::anyhow!("--memory-cap {e}"))?;
        let cap = headroom_train::memory_guard::MemoryCap::new(bytes, args.memory_cap_after)
            .ok_or_else(|| anyhow::anyhow!("--memory-cap needs /proc/self/status (Linux)"))?;
        tracing::debug!("--memory-cap: resident at the start of training {} MiB", cap.base >> 20);
        trainer.set_memory_cap(cap);
    }
    let setup =
        super::train_plan::setup_of(&config, trainable, &run.trunk, run.cache_features, &inputs.train);
    let planner = super::train_plan::estimate_json(&model, &inspection, &preset, &setup);
    tracing::info!("planner ({}): estimated peak {} MB for this run", preset.name, planner["estimate_mb"]);
    if args.resume {
        // Killed before its first checkpoint: the run starts again from the beginning.
        if checkpoint.exists() {
            trainer.load_checkpoint(&checkpoint)?;
        }
        // Rows of epochs after the checkpoint are redone.
        truncate_metrics(&dir, trainer.progress().epochs_done)?;
        let p = trainer.progress();
        tracing::info!("resuming {} at epoch {}, pass {}", dir.display(), p.epochs_done + 1, p.pass);
    }
    if !checkpoint.exists() {
        // The state a step down goes back to before the first checkpoint of the run.
        trainer.save_start_checkpoint(&dir.join("ckpt/start.pt"))?;
    }
    tracing::info!(
        "training {} ({trainable}, {} parameters, {device:?}) on {} images, validating on {}; run folder {}",
        args.model.display(),
        student.partition().parameter_count,
        inputs.train.len(),
        inputs.val.len(),
        dir.display()
    );
    let mut best = read_best(&dir);
    for epoch in trainer.progress().epochs_done..config.epochs {
        let images = with_replay(&inputs.train, &replay, run.replay_fraction, config.seed, epoch);
        let logged = trainer.steps_down().len();
        let stats = train_epoch(&mut trainer, &images, epoch, config.epochs)?;
        if trainer.steps_down().len() > logged {
            super::train_plan::log_steps(&dir, &trainer.steps_down()[logged..])?;
            // A resumed run continues in the configuration it stepped down to.
            let stepped = RunConfig { settings: trainer.config().clone(), ..read_run_config(&dir)? };
            let text = toml::to_string_pretty(&stepped).context("writing the run's settings")?;
            headroom_core::fsio::write_atomic(&dir.join(CONFIG), text.as_bytes())?;
        }
        let phases: Vec<String> = headroom_train::fit::PHASES
            .iter()
            .zip(stats.phases)
            .map(|(name, seconds)| format!("{name} {seconds:.2} s"))
            .collect();
        tracing::info!("epoch {} time: {}", epoch + 1, phases.join("; "));
        let outputs =
            EpochOutputs { dir: &dir, model: &args.model, bytes: &bytes, base_sha: &base_sha, trainable };
        best = finish_epoch(&outputs, &trainer, &stats, &inputs, best, args.threads)?;
    }
    let mut planner = planner;
    if let (Some(estimate), Some(peak)) = (planner["estimate_mb"].as_f64(), peak_rss_mb()) {
        // Every run checks the planner: its estimate against this run's measured peak.
        planner["error_pct_vs_peak_rss"] = (((estimate - peak) / peak * 1000.0).round() / 10.0).into();
    }
    let results = serde_json::json!({
        "run": dir,
        "epochs": config.epochs,
        "best_fitness": best,
        "best": dir.join("best.onnx"),
        "last": dir.join("last.onnx"),
        "peak_rss_mb": peak_rss_mb(),
        "planner": planner,
        "steps_down": trainer.steps_down(),
    });
    headroom_core::fsio::write_atomic(
        &dir.join("results.json"),
        (serde_json::to_string_pretty(&results)? + "\n").as_bytes(),
    )?;
    println!("{}", serde_json::to_string_pretty(&results)?);
    Ok(Outcome::Success)
}

/// Writes `config.toml` of a new run; returns what it holds.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn write_run_config(
    args: &Args,
    trainable: headroom_onnx::Trainable,
    dir: &Path,
    settings: headroom_train::fit::TrainConfig,
) -> anyhow::Result<RunConfig> {
    use anyhow::Context as _;
    let run = RunConfig {
        model: args.model.clone(),
        data: args.data.clone(),
        part: trainable.to_string(),
        device: args.device.clone(),
        replay: args.replay.clone(),
        replay_fraction: args.replay_fraction,
        remap: args.remap.clone(),
        trunk: args.trunk.clone(),
        cache_features: args.cache_features,
        settings,
    };
    let text = toml::to_string_pretty(&run).context("writing the run's settings")?;
    headroom_core::fsio::write_atomic(&dir.join(CONFIG), text.as_bytes())?;
    Ok(run)
}

/// Gives the trainer its frozen trunk: the feature cache (built with ONNX Runtime or libtorch),
/// or ONNX Runtime on the trunk cut out of the model; libtorch's executor otherwise.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
#[allow(clippy::too_many_arguments)]
fn attach_trunk<'a>(
    trainer: &mut headroom_train::fit::Trainer<'a>,
    model: &headroom_onnx::Model,
    student: &'a headroom_train::Student,
    run: &RunConfig,
    inputs: &Inputs,
    replay: &[headroom_core::dataset::ImageRecord],
    dir: &Path,
    base_sha: &str,
    threads: usize,
) -> anyhow::Result<()> {
    let mut ort = match run.trunk.as_str() {
        "ort" => {
            let options = headroom_infer::provider::SessionOptions {
                intra_threads: threads,
                spinning: false,
                ..Default::default()
            };
            Some(headroom_infer::trunk::OrtTrunk::open(model, &student.partition().cut, &options)?)
        }
        _ => None,
    };
    let settings = &run.settings;
    if run.cache_features {
        let mut all = inputs.train.clone();
        all.extend(replay.iter().cloned());
        let key = headroom_train::cache::CacheKey::new(
            base_sha.to_string(),
            run.part.clone(),
            settings.imgsz,
            settings.flip > 0.0,
            &all,
        );
        let cache = build_cache(dir, &key, &all, student, ort.as_mut())?;
        trainer.set_feature_cache(cache)?;
    } else if let Some(mut ort) = ort.take() {
        let names = student.partition().cut.clone();
        let device = student.executor().device();
        trainer.set_trunk(Box::new(move |images| ort_cut(&mut ort, &names, images, device)));
    }
    Ok(())
}

/// What an epoch's end writes to.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
struct EpochOutputs<'a> {
    dir: &'a Path,
    model: &'a Path,
    bytes: &'a [u8],
    base_sha: &'a str,
    trainable: headroom_onnx::Trainable,
}

/// The end of an epoch: the averaged weights written back into the model (`last.onnx`), evaluated
/// through ONNX Runtime on the val split, kept as `best.onnx` when better, the metrics row, the
/// plots, the checkpoint, a summary line. Returns the best fitness so far.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn finish_epoch(
    out: &EpochOutputs<'_>,
    trainer: &headroom_train::fit::Trainer<'_>,
    stats: &headroom_train::fit::EpochStats,
    inputs: &Inputs,
    best: Option<f64>,
    threads: usize,
) -> anyhow::Result<Option<f64>> {
    let epochs = trainer.config().epochs;
    let phases: Vec<String> = headroom_train::fit::PHASES
        .iter()
        .zip(stats.phases)
        .map(|(name, seconds)| format!("{name} {seconds:.2} s"))
        .collect();
    tracing::info!("epoch {} time: {}", stats.epoch + 1, phases.join("; "));
    let meta = vec![
        (headroom_onnx::patch::KEY_BASE_SHA256.to_string(), out.base_sha.to_string()),
        (headroom_onnx::patch::KEY_VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string()),
        (
            headroom_onnx::patch::KEY_FINETUNED.to_string(),
            format!("{}, epoch {}", out.trainable, stats.epoch + 1),
        ),
    ];
    let written = headroom_onnx::patch::write_weights(out.bytes, out.model, &trainer.ema_weights()?, &meta)?;
    let last = out.dir.join("last.onnx");
    headroom_core::fsio::write_atomic(&last, &written)?;
    let metrics = evaluate(&last, &inputs.data, &inputs.val, threads)?;
    let better = best.is_none_or(|b| metrics.fitness > b);
    if better {
        headroom_core::fsio::write_atomic(&out.dir.join("best.onnx"), &written)?;
    }
    let csv = append_metrics(out.dir, stats, &metrics)?;
    if let Err(e) = headroom_train::plots::write_plots(&csv, out.dir) {
        tracing::warn!("plots of {}: {e}", out.dir.display());
    }
    trainer.save_checkpoint(&out.dir.join("ckpt/last.pt"))?;
    eprintln!(
        "epoch {}/{epochs}: loss box {:.4} cls {:.4} dfl {:.4} kd {:.4}, val mAP50 {:.4} mAP50-95 {:.4}{} ({:.1} s)",
        stats.epoch + 1,
        stats.loss[0],
        stats.loss[1],
        stats.loss[2],
        stats.kd,
        metrics.map50,
        metrics.map50_95,
        if better { ", best" } else { "" },
        stats.seconds
    );
    Ok(if better { Some(metrics.fitness) } else { best })
}

/// Opens the run's feature cache, building it (with a progress bar) when it is missing or stale.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn build_cache(
    dir: &Path,
    key: &headroom_train::cache::CacheKey,
    records: &[headroom_core::dataset::ImageRecord],
    student: &headroom_train::Student,
    mut ort: Option<&mut headroom_infer::trunk::OrtTrunk>,
) -> anyhow::Result<headroom_train::cache::FeatureCache> {
    use headroom_train::tch::Device;
    let names = student.partition().cut.clone();
    let bar = super::progress::bar(0, "caching trunk features");
    let mut trunk =
        |images: &headroom_train::tch::Tensor| -> headroom_train::Result<Vec<headroom_train::tch::Tensor>> {
            let cut = match ort.as_deref_mut() {
                Some(ort) => ort_cut(ort, &names, images, Device::Cpu)?,
                None => student.trunk(images)?,
            };
            names
                .iter()
                .map(|n| {
                    cut.get(n)
                        .map(|t| t.shallow_clone())
                        .ok_or_else(|| headroom_train::Error::UnknownTensor { name: n.clone() })
                })
                .collect()
        };
    let cache = headroom_train::cache::FeatureCache::open_or_build(
        &dir.join("cache"),
        key,
        records,
        &names,
        &mut trunk,
        &|done, total| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        },
    );
    super::progress::end(&bar, cache.is_ok());
    let cache = cache?;
    tracing::info!("feature cache: {} entries in {}", cache.len(), dir.join("cache").display());
    Ok(cache)
}

/// The trunk on ONNX Runtime: libtorch images in, the cut as libtorch tensors on `device` out.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn ort_cut(
    ort: &mut headroom_infer::trunk::OrtTrunk,
    names: &[String],
    images: &headroom_train::tch::Tensor,
    device: headroom_train::tch::Device,
) -> headroom_train::Result<headroom_train::Cut> {
    use headroom_train::tch::{Device, Kind, Tensor};
    // Image by image: static exports take a batch of 1 only (the batch is 1 or 2 anyway).
    let mut parts: Vec<Vec<Tensor>> = names.iter().map(|_| Vec::new()).collect();
    for i in 0..images.size()[0] {
        let image =
            images.f_narrow(0, i, 1)?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
        let size = image.size();
        let shape = [1, size[1] as usize, size[2] as usize, size[3] as usize];
        let flat = Vec::<f32>::try_from(&image.f_reshape([-1])?)?;
        let outputs =
            ort.run(&flat, shape).map_err(|e| headroom_train::Error::Data { reason: e.to_string() })?;
        for (k, (data, shape)) in outputs.into_iter().enumerate() {
            parts[k].push(Tensor::from_slice(&data).f_view(shape.as_slice())?);
        }
    }
    let tensors = names
        .iter()
        .zip(parts)
        .map(|(name, p)| Ok((name.clone(), Tensor::f_cat(&p, 0)?.f_to_device(device)?)))
        .collect::<headroom_train::Result<Vec<_>>>()?;
    Ok(headroom_train::Cut::from_named(tensors))
}

/// One epoch with its progress bar (losses, speed and peak memory in the message).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn train_epoch(
    trainer: &mut headroom_train::fit::Trainer<'_>,
    images: &[headroom_core::dataset::ImageRecord],
    epoch: usize,
    epochs: usize,
) -> anyhow::Result<headroom_train::fit::EpochStats> {
    let bar = super::progress::bar(0, &format!("{}/{epochs}", epoch + 1));
    let stats = trainer.train_epoch(images, &|done, total, c| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(format!(
            "{}/{epochs} box {:.3} cls {:.3} dfl {:.3} kd {:.3} peak {:.0} MB",
            epoch + 1,
            c[0],
            c[1],
            c[2],
            c[3],
            peak_rss_mb().unwrap_or(0.0)
        ));
    });
    super::progress::end(&bar, stats.is_ok());
    stats.map_err(|e| match e {
        // The trainer has stepped down as far as a run can (docs/PLAN.md): stop and say what to change.
        headroom_train::Error::OutOfMemory { .. } => anyhow::anyhow!("{e}"),
        other => other.into(),
    })
}

/// A batch above 1 needs a trunk that takes it (static batch-1 exports run their trunk image by
/// image, but their attention layers cannot train at batch 2).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn check_batch(
    args: &Args,
    model: &headroom_onnx::Model,
    student: &headroom_train::Student,
    trainable: headroom_onnx::Trainable,
) -> anyhow::Result<()> {
    let reshapes_in_training = student
        .partition()
        .segments
        .iter()
        .flat_map(|seg| &seg.nodes)
        .any(|&i| matches!(model.graph.nodes[i].op, headroom_onnx::Op::Reshape(_)));
    anyhow::ensure!(
        args.batch == 1 || !student.batch_fixed_at_one() || !reshapes_in_training,
        "{}: the export's batch is fixed at 1 and the part to train ({trainable}) reshapes with that batch \
         (attention layers): use --batch 1 (gradients still accumulate to --nbs), --train head, or an export \
         with dynamic=True",
        args.model.display()
    );
    Ok(())
}

#[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
fn train(_args: &Args, _trainable: headroom_onnx::Trainable) -> anyhow::Result<Outcome> {
    Err(headroom_train::Error::FeatureDisabled { feature: "libtorch" }.into())
}

/// The epoch's images: the new ones, plus `fraction` as many drawn from `replay` (without
/// repetition while there are enough; seeded by the run's seed and the epoch, so a resumed run draws
/// the same).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn with_replay(
    new: &[headroom_core::dataset::ImageRecord],
    replay: &[headroom_core::dataset::ImageRecord],
    fraction: f64,
    seed: u64,
    epoch: usize,
) -> Vec<headroom_core::dataset::ImageRecord> {
    let mut images = new.to_vec();
    if replay.is_empty() {
        return images;
    }
    let wanted = (new.len() as f64 * fraction).round() as usize;
    // A seeded stride walk through the replay set: every image once before any repeats.
    let start = (seed as usize).wrapping_mul(31).wrapping_add(epoch.wrapping_mul(wanted.max(1)));
    images.extend((0..wanted).map(|i| replay[(start + i) % replay.len()].clone()));
    images
}

/// What `config.toml` holds: the run's inputs and every training setting (what `--resume` reuses).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
struct RunConfig {
    model: PathBuf,
    data: PathBuf,
    part: String,
    device: String,
    #[serde(default)]
    replay: Option<PathBuf>,
    #[serde(default)]
    replay_fraction: f64,
    #[serde(default)]
    remap: Option<String>,
    trunk: String,
    cache_features: bool,
    settings: headroom_train::fit::TrainConfig,
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn read_run_config(dir: &Path) -> anyhow::Result<RunConfig> {
    use anyhow::Context as _;
    let path = dir.join(CONFIG);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str::<RunConfig>(&text).with_context(|| format!("{}", path.display()))
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn evaluate(
    model: &Path,
    data: &headroom_core::dataset::DataConfig,
    images: &[headroom_core::dataset::ImageRecord],
    threads: usize,
) -> anyhow::Result<headroom_core::metrics::Metrics> {
    let options = headroom_infer::provider::SessionOptions {
        intra_threads: threads,
        spinning: false,
        ..Default::default()
    };
    let mut detector = headroom_infer::detector::Detector::open(model, &options)?;
    super::eval::val_metrics(&mut detector, images, &data.names)
}

/// Keeps the header and the first `epochs` rows of `metrics.csv`.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn truncate_metrics(dir: &Path, epochs: usize) -> anyhow::Result<()> {
    let path = dir.join("metrics.csv");
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
    let kept: Vec<&str> = text.lines().take(epochs + 1).collect();
    headroom_core::fsio::write_atomic(&path, (kept.join("\n") + "\n").as_bytes())?;
    Ok(())
}

/// The best fitness recorded in `metrics.csv` (for a resumed run).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn read_best(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join("metrics.csv")).ok()?;
    text.lines().skip(1).filter_map(|l| l.rsplit(',').next()?.parse::<f64>().ok()).reduce(f64::max)
}

/// Appends the epoch's row to `metrics.csv`; returns the file's text.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn append_metrics(
    dir: &Path,
    stats: &headroom_train::fit::EpochStats,
    m: &headroom_core::metrics::Metrics,
) -> anyhow::Result<String> {
    let path = dir.join("metrics.csv");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "epoch,box_loss,cls_loss,dfl_loss,kd_loss,lr,bad_steps,seconds,peak_rss_mb,precision,recall,map50,map50_95,fitness\n"
            .to_string()
    });
    text.push_str(&format!(
        "{},{:.6},{:.6},{:.6},{:.6},{:.6e},{},{:.2},{:.1},{:.6},{:.6},{:.6},{:.6},{:.6}\n",
        stats.epoch + 1,
        stats.loss[0],
        stats.loss[1],
        stats.loss[2],
        stats.kd,
        stats.lr,
        stats.bad_steps,
        stats.seconds,
        peak_rss_mb().unwrap_or(0.0),
        m.precision,
        m.recall,
        m.map50,
        m.map50_95,
        m.fitness
    ));
    headroom_core::fsio::write_atomic(&path, text.as_bytes())?;
    Ok(text)
}

/// The process's peak resident memory (`VmHWM`), MB, where /proc tells it.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
