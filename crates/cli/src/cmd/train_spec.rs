//! `headroom train`'s flags as a run spec: every flag for a new run, or the flags given applied to
//! a saved spec on resume (what is then compared with it), with derived values derived alike.

use std::path::Path;

use super::train_args::{Args, Nbs, absolute, hsv_gains};

/// The spec a command line asks for: every flag for a new run (`base` None); for a resumed run
/// the saved spec with the flags given on the command line applied (what is then compared).
/// Derived values (the optimiser of `--optimizer auto`, the input size, AMP) are derived the same
/// way for both.
pub fn spec_from_args(
    args: &Args,
    base: Option<&headroom_run::spec::RunSpec>,
) -> anyhow::Result<headroom_run::spec::RunSpec> {
    use headroom_run::spec::RunSpec;
    use headroom_train::config::TrainConfig;

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
        spec.part = trainable;
    }
    if given("device") {
        spec.device = args.device.torch_text();
    }
    if given("board") || given("devices") {
        spec.device_preset = match args.board.board.as_deref() {
            Some(name) => Some(super::device_arg::resolve_board(name, args.board.devices.as_deref())?),
            None if base.is_none() => None,
            None => anyhow::bail!("--devices without --board: name the board the file adds"),
        };
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
        spec.trunk = args.trunk.into();
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
    if given("teacher") {
        spec.teacher = args.teacher.as_deref().map(|p| absolute("--teacher", p)).transpose()?;
    }
    if given("patience") {
        spec.patience = args.patience;
    }
    if given("time") {
        spec.time_hours = args.time.unwrap_or(0.0);
    }
    if given("memory_cap_after") {
        spec.memory_cap_after = args.memory_cap_after;
    }
    apply_setting_flags(args, &given, &mut spec.settings)?;
    if base.is_none() && args.cache_features {
        default_augmentation_off(args, &mut spec.settings.augment);
    }
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
    let needs_model = set("imgsz") || set("optimizer") || set("lr0");
    // Loaded once for what below reads the model (a new run always does).
    let mut loaded = None;
    if needs_model {
        let model = headroom_onnx::Model::load(&spec.model)?;
        let inspection = headroom_onnx::inspect::inspect(&model)?;
        let s = &mut spec.settings;
        if set("imgsz") {
            s.imgsz = input_size(&spec.model, args.imgsz, &inspection)?;
        }
        if set("optimizer") || set("lr0") {
            if let Some(lr0) = args.lr0 {
                anyhow::ensure!(headroom_train::config::limits::lr0(lr0), "--lr0 {lr0} is not in (0, 1)");
            }
            match args.optimizer.chosen() {
                None => {
                    if let Some(lr0) = args.lr0 {
                        tracing::warn!(
                            "--lr0 {lr0} is ignored: --optimizer auto chooses the rate (use sgd or adamw to set it)"
                        );
                    }
                    *s = s.clone().with_auto_optimizer(inspection.classes);
                    tracing::info!("--optimizer auto: {} lr0 {} momentum {}", s.optimizer, s.lr0, s.momentum);
                }
                Some(chosen) => {
                    let defaults = TrainConfig::default();
                    s.optimizer = chosen;
                    s.lr0 = args.lr0.unwrap_or(defaults.lr0);
                    s.momentum = defaults.momentum;
                }
            }
        }
        loaded = Some((model, inspection));
    }
    if base.is_none() && !args.given.iter().any(|g| g == "batch") {
        let (model, inspection) = match loaded {
            Some(pair) => pair,
            None => {
                let model = headroom_onnx::Model::load(&spec.model)?;
                let inspection = headroom_onnx::inspect::inspect(&model)?;
                (model, inspection)
            }
        };
        default_batch_within_the_export(&mut spec, &model, &inspection)?;
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
    spec.validate()?;
    Ok(spec)
}

/// The flags that set one training setting each, where `given` says a flag applies.
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
    if set("dense_kd") {
        s.dense_kd = args.dense_kd;
    }
    if set("ignore_band") {
        s.ignore_band = args.ignore_band;
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
    if set("save_interval") {
        s.save_interval = args.save_interval;
    }
    if set("seed") {
        s.seed = args.seed;
    }
    Ok(())
}

/// `--cache-features` stores the trunk's outputs of fixed inputs: the augmentation `headroom train`
/// does by default is turned off (augmentation given on the command line stays, and the spec
/// refuses it with the cache).
fn default_augmentation_off(args: &Args, augment: &mut headroom_train::augment::AugmentConfig) {
    let given = |id: &str| args.given.iter().any(|g| g == id);
    let mut off = Vec::new();
    if !given("mosaic") && augment.mosaic > 0.0 {
        augment.mosaic = 0.0;
        off.push("--mosaic");
    }
    if !given("scale") && augment.scale > 0.0 {
        augment.scale = 0.0;
        off.push("--scale");
    }
    if !given("translate") && augment.translate > 0.0 {
        augment.translate = 0.0;
        off.push("--translate");
    }
    if !given("hsv") && [augment.hsv_h, augment.hsv_s, augment.hsv_v].iter().any(|g| *g > 0.0) {
        [augment.hsv_h, augment.hsv_s, augment.hsv_v] = [0.0; 3];
        off.push("--hsv");
    }
    if !off.is_empty() {
        tracing::info!(
            "--cache-features: the default augmentation ({}) is off: cached features are of fixed inputs",
            off.join(", ")
        );
    }
}

/// The default batch (2) where the export allows it: a static export whose batch is fixed at 1 and
/// whose part to train reshapes with it (attention layers of 11, v10, 26 when more than the head
/// trains) trains at batch 1, said in a line (given `--batch 2`, the run refuses it).
fn default_batch_within_the_export(
    spec: &mut headroom_run::spec::RunSpec,
    model: &headroom_onnx::Model,
    inspection: &headroom_onnx::inspect::Inspection,
) -> anyhow::Result<()> {
    let [w, h] = spec.settings.imgsz;
    let limit = headroom_plan::Planner::new(model, inspection, 0).batch_limit(spec.part, [h, w])?;
    if limit < spec.settings.batch {
        tracing::info!(
            "--batch {limit}: the export's batch is fixed at 1 and the part to train ({}) reshapes with it \
             (attention layers); gradients still accumulate to --nbs",
            spec.part
        );
        spec.settings.batch = limit;
    }
    Ok(())
}

/// Usable images in the train split of `data` (`--nbs auto` counts them), checked as training
/// loads them but not logged: training's own load warns once of each image it skips.
fn train_images(data: &Path) -> anyhow::Result<usize> {
    use anyhow::Context as _;
    use headroom_core::dataset::{DataConfig, LoadOptions, Split, layout, load_images};
    let config = DataConfig::load(data)?;
    let split = Split::Train;
    let sources = config
        .split_sources(split)
        .with_context(|| format!("{}: key `{}:` is absent or empty", config.file.display(), split.key()))?;
    let listed = layout::list_images(&config.file, split.key(), sources)?;
    Ok(load_images(&listed, config.nc(), LoadOptions::default())?.0.len())
}

/// The input size: the export's; `--imgsz` for a dynamic export, rounded up to the largest stride.
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
