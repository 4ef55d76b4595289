//! `headroom train`: fine-tune an ONNX detector's head on a dataset and write the same ONNX back
//! (docs/TRAIN.md). Each epoch: train, write `last.onnx` (averaged weights, written back into the
//! original graph), evaluate it through ONNX Runtime on the val split (what ships is what is
//! measured), keep the best as `best.onnx`, append `metrics.csv`, save a checkpoint.

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
use std::path::Path;
use std::path::PathBuf;

use super::Outcome;

/// Arguments of `headroom train`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The student, an Ultralytics ONNX detector export (or a headroom export of one).
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// The dataset (Ultralytics `data.yaml`; `headroom label` writes one over pseudo-labels).
    #[arg(long, value_name = "data.yaml")]
    pub data: PathBuf,
    /// What trains: `head` (the Detect module), `neck+head`, or N (modules 0..N frozen, as
    /// Ultralytics' `freeze=N`; 0 trains everything).
    #[arg(long, default_value = "head", value_name = "PART")]
    pub train: String,
    /// Epochs.
    #[arg(long, default_value_t = 10, value_parser = super::provider_args::count_arg::<1, 10000>)]
    pub epochs: usize,
    /// Images per forward pass (gradients accumulate to --nbs).
    #[arg(long, default_value_t = 2, value_parser = super::provider_args::count_arg::<1, 256>)]
    pub batch: usize,
    /// Nominal batch: one optimiser step per round(nbs / batch) passes (Ultralytics' nbs).
    #[arg(long, default_value_t = 64, value_parser = super::provider_args::count_arg::<1, 4096>)]
    pub nbs: usize,
    /// Initial learning rate (SGD, Nesterov momentum 0.937; warmup, then linear decay to lr0·0.01).
    /// 1e-4 by measurement: higher rates wreck a converged model (docs/TRAIN.md).
    #[arg(long, default_value_t = 1e-4)]
    pub lr0: f64,
    /// Probability of a left-right flip per image.
    #[arg(long, default_value_t = 0.5)]
    pub flip: f64,
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
    /// Continue the run PROJECT/NAME from its last checkpoint (an epoch boundary; its saved settings
    /// are used); a run killed before its first checkpoint starts again.
    #[arg(long, requires = "name")]
    pub resume: bool,
    /// libtorch and ONNX Runtime threads (0: their defaults).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
}

/// Runs `headroom train`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    anyhow::ensure!(args.lr0 > 0.0 && args.lr0 < 1.0, "--lr0 {} is not in (0, 1)", args.lr0);
    anyhow::ensure!((0.0..=1.0).contains(&args.flip), "--flip {} is not in [0, 1]", args.flip);
    anyhow::ensure!(
        (0.0..=10.0).contains(&args.replay_fraction),
        "--replay-fraction {} is not in [0, 10]",
        args.replay_fraction
    );
    let trainable: headroom_onnx::Trainable =
        args.train.parse().map_err(|e| anyhow::anyhow!("--train {}: {e}", args.train))?;
    train(args, trainable)
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
            !args.resume || dir.join("config.json").exists(),
            "{}: no run to resume (no config.json)",
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
fn train(args: &Args, trainable: headroom_onnx::Trainable) -> anyhow::Result<Outcome> {
    use anyhow::Context as _;
    use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
    use headroom_train::fit::{TrainConfig, Trainer};
    use headroom_train::loss::LossConfig;

    if args.threads > 0 {
        headroom_train::tch::set_num_threads(args.threads as i32);
    }
    let model = headroom_onnx::Model::load(&args.model)?;
    let data = DataConfig::load(&args.data)?;
    let train_split = load_split(&data, Split::Train, LoadOptions::default())?;
    let val_split = load_split(&data, Split::Val, LoadOptions::default())?;
    anyhow::ensure!(
        !train_split.images.is_empty(),
        "{}: the train split has no usable image",
        args.data.display()
    );
    let student = headroom_train::Student::new(&model, trainable, headroom_train::tch::Device::Cpu)
        .with_context(|| format!("preparing {} for training ({trainable})", args.model.display()))?;
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
    let inspection = student.inspection();
    check_classes(inspection.names.as_deref(), inspection.classes, &data.names, &args.data)?;
    let head = &inspection.head;
    let (nc, reg_max, strides) = (inspection.classes as i64, head.reg_max as i64, inspection.strides.clone());
    let loss = if inspection.end_to_end {
        LossConfig::one_to_one(nc, reg_max, strides)
    } else {
        LossConfig::one_to_many(nc, reg_max, strides)
    };
    let [h, w] = inspection.inspected_size;
    // A bad replay dataset is refused before the run folder exists (it is loaded again below, from
    // the saved settings when resuming).
    if let Some(path) = &args.replay {
        let old = DataConfig::load(path)?;
        anyhow::ensure!(
            old.names.len() == data.names.len(),
            "{}: the replay dataset has {} classes, {} has {}",
            path.display(),
            old.names.len(),
            args.data.display(),
            data.names.len()
        );
    }
    let dir = run_dir(args)?;
    std::fs::create_dir_all(dir.join("ckpt")).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = headroom_core::fsio::OutputLock::acquire(&dir, "headroom train")?;
    let config_path = dir.join("config.json");
    let (config, replay_source, replay_fraction) = if args.resume {
        let text = std::fs::read_to_string(&config_path)
            .with_context(|| format!("reading {}", config_path.display()))?;
        let run =
            serde_json::from_str::<RunConfig>(&text).with_context(|| format!("{}", config_path.display()))?;
        (run.settings, run.replay, run.replay_fraction)
    } else {
        let config = TrainConfig {
            epochs: args.epochs,
            batch: args.batch,
            nbs: args.nbs,
            lr0: args.lr0,
            flip: args.flip,
            checkpoint: !args.no_checkpoint,
            seed: args.seed,
            imgsz: [w as u32, h as u32],
            ..TrainConfig::default()
        };
        let run = RunConfig {
            model: args.model.clone(),
            data: args.data.clone(),
            part: trainable.to_string(),
            settings: config.clone(),
            replay: args.replay.clone(),
            replay_fraction: args.replay_fraction,
        };
        headroom_core::fsio::write_atomic(
            &config_path,
            (serde_json::to_string_pretty(&run)? + "\n").as_bytes(),
        )?;
        (config, args.replay.clone(), args.replay_fraction)
    };
    let replay = match &replay_source {
        Some(path) => load_split(&DataConfig::load(path)?, Split::Train, LoadOptions::default())?.images,
        None => Vec::new(),
    };
    let mut trainer = Trainer::new(&student, config.clone(), loss)?;
    let checkpoint = dir.join("ckpt/last.pt");
    if args.resume {
        // Killed before its first checkpoint: the run starts again from the beginning.
        if checkpoint.exists() {
            trainer.load_checkpoint(&checkpoint)?;
        }
        // A run killed after writing an epoch's row but before its checkpoint redoes that epoch.
        truncate_metrics(&dir, trainer.progress().epochs_done)?;
        tracing::info!("resuming {} after epoch {}", dir.display(), trainer.progress().epochs_done);
    }
    tracing::info!(
        "training {} ({trainable}, {} parameters) on {} images, validating on {}; run folder {}",
        args.model.display(),
        student.partition().parameter_count,
        train_split.images.len(),
        val_split.images.len(),
        dir.display()
    );
    let bytes = std::fs::read(&args.model).with_context(|| format!("reading {}", args.model.display()))?;
    let base_sha = headroom_infer::label::output::sha256_hex(&bytes);
    let mut best = read_best(&dir);
    for epoch in trainer.progress().epochs_done..config.epochs {
        let bar = super::progress::bar(0, &format!("{}/{}", epoch + 1, config.epochs));
        let images = with_replay(&train_split.images, &replay, replay_fraction, config.seed, epoch);
        let stats = trainer.train_epoch(&images, &|done, total, c| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            bar.set_message(format!(
                "{}/{} box {:.3} cls {:.3} dfl {:.3}",
                epoch + 1,
                config.epochs,
                c[0],
                c[1],
                c[2]
            ));
        });
        super::progress::end(&bar, stats.is_ok());
        let stats = stats?;
        let weights = trainer.ema_weights()?;
        let meta = vec![
            (headroom_onnx::patch::KEY_BASE_SHA256.to_string(), base_sha.clone()),
            (headroom_onnx::patch::KEY_VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string()),
            (headroom_onnx::patch::KEY_FINETUNED.to_string(), format!("{trainable}, epoch {}", epoch + 1)),
        ];
        let written = headroom_onnx::patch::write_weights(&bytes, &args.model, &weights, &meta)?;
        let last = dir.join("last.onnx");
        headroom_core::fsio::write_atomic(&last, &written)?;
        let metrics = evaluate(&last, &data, &val_split.images, args.threads)?;
        let better = best.is_none_or(|b| metrics.fitness > b);
        if better {
            headroom_core::fsio::write_atomic(&dir.join("best.onnx"), &written)?;
            best = Some(metrics.fitness);
        }
        append_metrics(&dir, &stats, &metrics)?;
        trainer.save_checkpoint(&checkpoint)?;
        eprintln!(
            "epoch {}/{}: loss box {:.4} cls {:.4} dfl {:.4}, val mAP50 {:.4} mAP50-95 {:.4}{} ({:.1} s)",
            epoch + 1,
            config.epochs,
            stats.loss[0],
            stats.loss[1],
            stats.loss[2],
            metrics.map50,
            metrics.map50_95,
            if better { ", best" } else { "" },
            stats.seconds
        );
    }
    let results = serde_json::json!({
        "run": dir,
        "epochs": config.epochs,
        "best_fitness": best,
        "best": dir.join("best.onnx"),
        "last": dir.join("last.onnx"),
        "peak_rss_mb": peak_rss_mb(),
    });
    headroom_core::fsio::write_atomic(
        &dir.join("results.json"),
        (serde_json::to_string_pretty(&results)? + "\n").as_bytes(),
    )?;
    println!("{}", serde_json::to_string_pretty(&results)?);
    Ok(Outcome::Success)
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

/// What `config.json` holds: the run's inputs and its training settings (what `--resume` reuses).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
struct RunConfig {
    model: PathBuf,
    data: PathBuf,
    part: String,
    settings: headroom_train::fit::TrainConfig,
    #[serde(default)]
    replay: Option<PathBuf>,
    #[serde(default)]
    replay_fraction: f64,
}

/// The model's classes and the dataset's must agree in number (and in names when the model has them).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn check_classes(
    model_names: Option<&[String]>,
    nc: usize,
    data_names: &[String],
    data: &Path,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        data_names.len() == nc,
        "{}: the dataset has {} classes ({}), the model {nc}; relabel with a class map (`headroom label --class-map`)",
        data.display(),
        data_names.len(),
        data_names.join(", ")
    );
    if let Some(names) = model_names
        && names != data_names
    {
        tracing::warn!(
            "{}: class names {:?} differ from the model's {:?}; training by class id",
            data.display(),
            data_names,
            names
        );
    }
    Ok(())
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn evaluate(
    model: &Path,
    data: &headroom_core::dataset::DataConfig,
    images: &[headroom_core::dataset::ImageRecord],
    threads: usize,
) -> anyhow::Result<headroom_core::metrics::Metrics> {
    let options = headroom_infer::provider::SessionOptions { intra_threads: threads, ..Default::default() };
    let mut detector = headroom_infer::detector::Detector::open(model, &options)?;
    let report = headroom_infer::eval::evaluate(
        &mut detector,
        images,
        &data.names,
        &headroom_infer::decode::DecodeOptions::val(),
        headroom_core::preprocess::Preprocess::Val,
        |_| {},
    )?;
    Ok(report.metrics)
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

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn append_metrics(
    dir: &Path,
    stats: &headroom_train::fit::EpochStats,
    m: &headroom_core::metrics::Metrics,
) -> anyhow::Result<()> {
    let path = dir.join("metrics.csv");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "epoch,box_loss,cls_loss,dfl_loss,lr,bad_steps,seconds,precision,recall,map50,map50_95,fitness\n"
            .to_string()
    });
    text.push_str(&format!(
        "{},{:.6},{:.6},{:.6},{:.6e},{},{:.2},{:.6},{:.6},{:.6},{:.6},{:.6}\n",
        stats.epoch + 1,
        stats.loss[0],
        stats.loss[1],
        stats.loss[2],
        stats.lr,
        stats.bad_steps,
        stats.seconds,
        m.precision,
        m.recall,
        m.map50,
        m.map50_95,
        m.fitness
    ));
    headroom_core::fsio::write_atomic(&path, text.as_bytes())?;
    Ok(())
}

/// The process's peak resident memory (`VmHWM`), MB, where /proc tells it.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
