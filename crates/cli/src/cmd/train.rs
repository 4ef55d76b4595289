//! `headroom train`: the command line of a training run. The run itself — spec, folder, epochs,
//! validation, checkpoints, resume — is `headroom-run`'s ([`headroom_run::run`]); this file turns
//! flags into a [`headroom_run::spec::RunSpec`] (or checks them against a saved one on resume),
//! draws progress and prints the result (docs/TRAIN.md).

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
use std::path::Path;
use std::path::PathBuf;

use super::Outcome;

/// Arguments of `headroom train`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The student, an Ultralytics ONNX detector export (or a headroom export of one).
    #[arg(long, value_name = "MODEL.onnx", required_unless_present = "resume")]
    pub model: Option<PathBuf>,
    /// The dataset (Ultralytics `data.yaml`; `headroom label` writes one over pseudo-labels).
    #[arg(long, value_name = "data.yaml", required_unless_present = "resume")]
    pub data: Option<PathBuf>,
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
    /// Nominal batch: one optimiser step per round(nbs / batch) passes (Ultralytics' nbs, 64).
    /// `auto`: sized to the data, the largest power of two up to 64 with which the run still makes
    /// about 200 optimiser steps (4 for 100 images x 10 epochs). Measured: with --train all it
    /// gained on new and old scenes; with the head alone it lost (docs/TRAIN.md).
    #[arg(long, default_value = "64", value_parser = nbs_arg, value_name = "auto|N")]
    pub nbs: Nbs,
    /// Optimiser: auto (Ultralytics' rule: AdamW at 0.002·5/(4+nc), momentum 0.9, for runs under
    /// 10,000 iterations; SGD at 0.01 above), sgd (Nesterov momentum 0.937) or adamw. auto by
    /// measurement: it kept and gained the most (docs/BENCHMARKS.md).
    #[arg(long, value_enum, default_value_t = OptimizerArg::Auto)]
    pub optimizer: OptimizerArg,
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
    #[arg(long, value_enum, default_value_t = PlanMode::Off)]
    pub plan: PlanMode,
    #[command(flatten)]
    pub budget: super::plan::PlanArgs,
    /// Stop a pass that takes more than this above what the process held when training started
    /// (checked after every pass, Linux): it is then an out-of-memory error, and the run steps
    /// down one rung (batch halved, accumulation keeping --nbs; then checkpointing; then AMP on a
    /// GPU), reloads its last checkpoint and goes on, as after a real allocation failure.
    #[arg(long, value_name = "SIZE")]
    pub memory_cap: Option<String>,
    /// Re-normalise the first N convolutions of the trunk to the new images before training: each
    /// one's per-channel output mean and std on the new images set to what they are on the old
    /// (--replay) images, folded into its weight and bias (AdaBN for BatchNorm-folded exports;
    /// forward passes only). The run folder keeps the result as renorm.onnx (0: off).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 64>)]
    pub renorm: usize,
    /// Passes before --memory-cap is checked (to hit it mid-epoch in tests).
    #[arg(long, default_value_t = 0, hide = true)]
    pub memory_cap_after: u64,
    /// What runs the frozen trunk: ort (ONNX Runtime on the trunk cut out of the same file) or
    /// torch (headroom's libtorch executor).
    #[arg(long, value_enum, default_value_t = TrunkArg::Ort)]
    pub trunk: TrunkArg,
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
    /// Continue a run from its last checkpoint: RUN_DIR, or PROJECT/NAME without a value. The run's
    /// saved settings (config.toml) are the only ones used: a flag that disagrees with them is an
    /// error naming it, except --epochs, which may extend the run. A run killed before its first
    /// checkpoint starts again; a finished run says so and exits 0.
    #[arg(long, value_name = "RUN_DIR", num_args = 0..=1)]
    pub resume: Option<Option<PathBuf>>,
    /// libtorch and ONNX Runtime threads (0: their defaults).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
    /// The ids of the flags given on the command line (filled by `main`; a resumed run checks them
    /// against its saved settings).
    #[arg(skip)]
    pub given: Vec<String>,
}

/// `--nbs`: sized to the data, or a fixed nominal batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nbs {
    /// `headroom_train::schedule::nominal_batch_for` the run's images, epochs and batch.
    Auto,
    /// This many images per optimiser step.
    Fixed(usize),
}

fn nbs_arg(text: &str) -> Result<Nbs, String> {
    if text == "auto" {
        return Ok(Nbs::Auto);
    }
    match text.parse::<usize>() {
        Ok(n) if (1..=4096).contains(&n) => Ok(Nbs::Fixed(n)),
        _ => Err(format!("`{text}` is not `auto` or a count in 1..=4096")),
    }
}

/// `--optimizer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OptimizerArg {
    /// Ultralytics' rule (AdamW for runs under 10,000 iterations).
    Auto,
    /// SGD with Nesterov momentum.
    Sgd,
    /// AdamW.
    Adamw,
}

/// `--plan`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanMode {
    /// Train as given.
    Off,
    /// Train with the first configuration of the fit ladder that fits the device's budget.
    Auto,
}

/// `--trunk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TrunkArg {
    /// ONNX Runtime on the trunk cut out of the same file.
    Ort,
    /// headroom's libtorch executor.
    Torch,
}

/// Runs `headroom train`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    run_with_libraries(args)
}

/// `--hsv H,S,V`, each in [0, 1].
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
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

/// The run folder that `--resume` names: RUN_DIR, or PROJECT/NAME.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn resume_dir(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    match &args.resume {
        None => Ok(None),
        Some(Some(dir)) => Ok(Some(dir.clone())),
        Some(None) => match &args.name {
            Some(name) => Ok(Some(args.project.join(name))),
            None => anyhow::bail!("--resume: name the run, --resume RUN_DIR (or --name NAME with --project)"),
        },
    }
}

/// A file path as given, made absolute so that a run resumes from any folder.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn absolute(flag: &str, path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn run_with_libraries(args: &Args) -> anyhow::Result<Outcome> {
    use headroom_run::run::{RunEnd, RunOptions};
    use headroom_run::spec::RunSpec;

    let interrupt = super::interrupt::Interrupt::install()?;
    let options = RunOptions { threads: args.threads, stop: Some(interrupt.flag()) };
    let mut observer = TerminalObserver::default();
    let end = match resume_dir(args)? {
        Some(dir) => {
            anyhow::ensure!(
                args.plan == PlanMode::Off,
                "--plan auto plans a new run; --resume continues with the run's own settings"
            );
            let saved = RunSpec::load(&headroom_run::folder::existing_run_dir(&dir)?)?;
            let asked = spec_from_args(args, Some(&saved))?;
            for (setting, was, now) in saved.differences(&asked) {
                if setting != "settings.epochs" {
                    return Err(
                        headroom_run::Error::ResumeConflict { setting, saved: was, given: now }.into()
                    );
                }
            }
            let epochs = args.given.iter().any(|g| g == "epochs").then_some(args.epochs);
            headroom_run::run::resume(&dir, epochs, &options, &mut observer)?
        }
        None => {
            let mut spec = spec_from_args(args, None)?;
            if args.plan == PlanMode::Auto {
                super::train_plan::plan_auto(&mut spec, &args.budget)?;
            }
            spec.validate()?;
            let dir = headroom_run::folder::new_run_dir(&args.project, args.name.as_deref())?;
            headroom_run::run::start(&spec, &dir, &options, &mut observer)?
        }
    };
    match end {
        RunEnd::Finished(results) => {
            println!("{}", serde_json::to_string_pretty(&results)?);
            Ok(Outcome::Success)
        }
        RunEnd::AlreadyFinished(results) => {
            eprintln!(
                "{}: this run has finished its {} epochs; --resume --epochs N (more) extends it",
                results["run"].as_str().unwrap_or("the run"),
                results["epochs"]
            );
            println!("{}", serde_json::to_string_pretty(&results)?);
            Ok(Outcome::Success)
        }
        RunEnd::Interrupted => {
            let signal = interrupt.signal().unwrap_or(2);
            eprintln!(
                "stopped by {}: the run is saved at its last checkpoint; `headroom train --resume RUN_DIR` continues it",
                super::interrupt::signal_name(signal)
            );
            Ok(Outcome::Interrupted(signal))
        }
    }
}

#[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
fn run_with_libraries(_args: &Args) -> anyhow::Result<Outcome> {
    Err(headroom_train::Error::FeatureDisabled { feature: "libtorch" }.into())
}

/// The spec a command line asks for: every flag for a new run (`base` None); for a resumed run
/// the saved spec with the flags given on the command line applied (what is then compared).
/// Derived values (the optimiser of `--optimizer auto`, the input size, AMP) are derived the same
/// way for both.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn spec_from_args(
    args: &Args,
    base: Option<&headroom_run::spec::RunSpec>,
) -> anyhow::Result<headroom_run::spec::RunSpec> {
    use headroom_run::spec::{RunSpec, TrunkKind};
    use headroom_train::config::{OptimizerKind, TrainConfig};

    let given = |id: &str| base.is_none() || args.given.iter().any(|g| g == id);
    let model = match (&args.model, base) {
        (Some(m), _) => absolute("--model", m)?,
        (None, Some(b)) => b.model.clone(),
        (None, None) => anyhow::bail!("--model is required for a new run"),
    };
    let data = match (&args.data, base) {
        (Some(d), _) => absolute("--data", d)?,
        (None, Some(b)) => b.data.clone(),
        (None, None) => anyhow::bail!("--data is required for a new run"),
    };
    let mut spec = base.cloned().unwrap_or_else(|| RunSpec::new(model.clone(), data.clone()));
    spec.model = model;
    spec.data = data;
    if given("train") || given("freeze") {
        let trainable: headroom_onnx::Trainable = match args.freeze {
            Some(n) => headroom_onnx::Trainable::Freeze(n),
            None => args.train.parse().map_err(|e| anyhow::anyhow!("--train {}: {e}", args.train))?,
        };
        spec.part = trainable.to_string();
    }
    if given("device") {
        spec.device = args.device.clone();
    }
    if given("replay") {
        spec.replay = args.replay.as_deref().map(|p| absolute("--replay", p)).transpose()?;
    }
    if given("replay_fraction") {
        spec.replay_fraction = args.replay_fraction;
    }
    if given("remap") {
        spec.remap = args.remap.clone();
    }
    if given("trunk") {
        spec.trunk = if args.trunk == TrunkArg::Torch { TrunkKind::Torch } else { TrunkKind::Ort };
    }
    if given("cache_features") {
        spec.cache_features = args.cache_features;
    }
    if given("memory_cap") {
        spec.memory_cap = args.memory_cap.clone();
    }
    if given("renorm") {
        spec.renorm = args.renorm;
    }
    if given("memory_cap_after") {
        spec.memory_cap_after = args.memory_cap_after;
    }
    apply_setting_flags(args, &given, &mut spec.settings)?;
    let set = |flag: &str| given(flag);
    let s = &mut spec.settings;
    if set("amp") || set("device") {
        s.amp = args.amp && spec.device != "cpu" && headroom_run::device::cuda_available();
        if args.amp && !s.amp {
            tracing::warn!(
                "--amp: mixed precision is for CUDA; on the CPU this run trains in fp32 (config.toml records amp = false)"
            );
        }
    }
    // Sized from the run's own epochs and batch (set above); on resume only when given.
    if set("nbs") {
        spec.settings.nbs = match args.nbs {
            Nbs::Fixed(n) => n,
            Nbs::Auto => {
                let new = train_images(&spec.data)?;
                let replayed = if spec.replay.is_some() {
                    (new as f64 * spec.replay_fraction).round() as usize
                } else {
                    0
                };
                let s = &spec.settings;
                let nbs = headroom_train::schedule::nominal_batch_for(new + replayed, s.epochs, s.batch);
                tracing::info!(
                    "--nbs auto: {nbs} ({} images per epoch, {} epochs: {} optimiser steps)",
                    new + replayed,
                    s.epochs,
                    (new + replayed).div_ceil(nbs) * s.epochs
                );
                nbs
            }
        };
    }
    let needs_model = set("imgsz") || set("optimizer") || set("lr0");
    if needs_model {
        let model = headroom_onnx::Model::load(&spec.model)?;
        let inspection = headroom_onnx::inspect::inspect(&model)?;
        let s = &mut spec.settings;
        if set("imgsz") {
            s.imgsz = input_size(&spec.model, args.imgsz, &inspection)?;
        }
        if set("optimizer") || set("lr0") {
            if let Some(lr0) = args.lr0 {
                anyhow::ensure!(lr0 > 0.0 && lr0 < 1.0, "--lr0 {lr0} is not in (0, 1)");
            }
            match args.optimizer {
                OptimizerArg::Auto => {
                    if let Some(lr0) = args.lr0 {
                        tracing::warn!(
                            "--lr0 {lr0} is ignored: --optimizer auto chooses the rate (use sgd or adamw to set it)"
                        );
                    }
                    let images = train_images(&spec.data)?;
                    *s = s.clone().with_auto_optimizer(images, inspection.classes);
                    tracing::info!(
                        "--optimizer auto: {:?} lr0 {} momentum {}",
                        s.optimizer,
                        s.lr0,
                        s.momentum
                    );
                }
                chosen => {
                    let defaults = TrainConfig::default();
                    s.optimizer =
                        if chosen == OptimizerArg::Adamw { OptimizerKind::AdamW } else { OptimizerKind::Sgd };
                    s.lr0 = args.lr0.unwrap_or(defaults.lr0);
                    s.momentum = defaults.momentum;
                }
            }
        }
    }
    spec.validate()?;
    Ok(spec)
}

/// The flags that set one training setting each, where `given` says a flag applies.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn apply_setting_flags(
    args: &Args,
    given: &dyn Fn(&str) -> bool,
    s: &mut headroom_train::config::TrainConfig,
) -> anyhow::Result<()> {
    let set = given;
    if set("epochs") {
        s.epochs = args.epochs;
    }
    if set("batch") {
        s.batch = args.batch;
    }
    if set("cos_lr") {
        s.cos_lr = args.cos_lr;
    }
    if set("max_grad_norm") {
        s.max_grad_norm = args.max_grad_norm;
    }
    if set("flip") {
        s.flip = args.flip;
    }
    if set("kd") {
        s.kd = args.kd;
    }
    if set("anchor") {
        s.anchor = args.anchor;
    }
    if set("hsv") {
        [s.augment.hsv_h, s.augment.hsv_s, s.augment.hsv_v] = hsv_gains(&args.hsv)?;
    }
    if set("translate") {
        s.augment.translate = args.translate;
    }
    if set("scale") {
        s.augment.scale = args.scale;
    }
    if set("mosaic") {
        s.augment.mosaic = args.mosaic;
    }
    if set("no_checkpoint") {
        s.checkpoint = !args.no_checkpoint;
    }
    if set("save_period") {
        s.save_period = args.save_period;
    }
    if set("seed") {
        s.seed = args.seed;
    }
    Ok(())
}

/// Images in the train split of `data` (Ultralytics' optimiser rule counts them).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn train_images(data: &Path) -> anyhow::Result<usize> {
    use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
    let config = DataConfig::load(data)?;
    Ok(load_split(&config, Split::Train, LoadOptions::default())?.images.len())
}

/// The input size: the export's; `--imgsz` for a dynamic export, rounded up to the largest stride.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn input_size(
    model: &Path,
    imgsz: Option<usize>,
    inspection: &headroom_onnx::inspect::Inspection,
) -> anyhow::Result<[u32; 2]> {
    let [h, w] = inspection.inspected_size;
    let Some(wanted) = imgsz else { return Ok([w as u32, h as u32]) };
    let fixed = inspection.input_shape.iter().skip(2).all(|d| matches!(d, headroom_onnx::Dim::Known(_)));
    if fixed {
        anyhow::ensure!(
            wanted as i64 == h && wanted as i64 == w,
            "{}: the export's input is fixed at {h}x{w}; --imgsz {wanted} needs an export at that size \
             (or dynamic=True)",
            model.display()
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

/// Progress of a run on the terminal: a bar per epoch (losses, speed, peak memory) and a line per
/// epoch's end.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
#[derive(Default)]
struct TerminalObserver {
    bar: Option<indicatif::ProgressBar>,
    epoch: usize,
    epochs: usize,
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
impl headroom_run::observer::Observer for TerminalObserver {
    fn caching(&mut self, done: usize, total: usize) {
        let bar = self.bar.get_or_insert_with(|| super::progress::bar(0, "caching trunk features"));
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }

    fn cached(&mut self, ok: bool) {
        if let Some(bar) = self.bar.take() {
            super::progress::end(&bar, ok);
        }
    }

    fn epoch_started(&mut self, epoch: usize, epochs: usize) {
        (self.epoch, self.epochs) = (epoch, epochs);
        self.bar = Some(super::progress::bar(0, &format!("{}/{epochs}", epoch + 1)));
    }

    fn pass(&mut self, done: usize, total: usize, c: [f64; 4]) {
        let Some(bar) = &self.bar else { return };
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(format!(
            "{}/{} box {:.3} cls {:.3} dfl {:.3} kd {:.3} peak {:.0} MB",
            self.epoch + 1,
            self.epochs,
            c[0],
            c[1],
            c[2],
            c[3],
            headroom_run::folder::peak_rss_mb().unwrap_or(0.0)
        ));
    }

    fn epoch_trained(&mut self, ok: bool) {
        if let Some(bar) = self.bar.take() {
            super::progress::end(&bar, ok);
        }
    }

    fn epoch_ended(&mut self, r: &headroom_run::observer::EpochReport) {
        let s = &r.stats;
        eprintln!(
            "epoch {}/{}: loss box {:.4} cls {:.4} dfl {:.4} kd {:.4}, val mAP50 {:.4} mAP50-95 {:.4}{} ({:.1} s)",
            s.epoch + 1,
            r.epochs,
            s.loss[0],
            s.loss[1],
            s.loss[2],
            s.kd,
            r.metrics.map50,
            r.metrics.map50_95,
            if r.best { ", best" } else { "" },
            s.seconds
        );
    }
}
