//! What a caller asks of a run, setting by setting, and the [`RunSpec`] it resolves to: for a new
//! run every setting asked for over headroom train's defaults; on resume the saved spec with the
//! settings asked for applied (what the run then compares with it: only `epochs` may differ).
//! Derived values are derived here, the same way for both: the optimiser of `auto`, the input size
//! (a dynamic export's rounded up to its largest stride), AMP (CUDA only), the default batch within
//! what the export allows, `nbs = auto` from the data, and the feature cache turning the default
//! augmentation off.

use std::path::{Path, PathBuf};

use headroom_onnx::Trainable;
use headroom_plan::{DevicePreset, Optimizer, PlanMode, TrunkRuntime};
/// The augmentation settings (`AugmentConfig::ultralytics()`: `headroom train`'s defaults).
pub use headroom_train::augment::AugmentConfig;
use headroom_train::config::TrainConfig;
use serde::{Deserialize, Serialize};

use crate::spec::{RunSpec, TorchDevice};
use crate::{Error, Result};

/// What trains when neither the command line nor a preset says (`headroom train`'s `--train all`).
pub const DEFAULT_PART: Trainable = Trainable::Freeze(0);

/// The nominal batch asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nbs {
    /// Sized to the data ([`headroom_train::schedule::nominal_batch_for`]).
    Auto,
    /// A fixed nominal batch.
    Fixed(usize),
}

impl std::str::FromStr for Nbs {
    type Err = String;

    /// `auto`, or a count within `headroom_train::config::limits` (`NBS_MIN..=NBS_MAX`).
    fn from_str(text: &str) -> std::result::Result<Self, Self::Err> {
        use headroom_train::config::limits;
        if text == "auto" {
            return Ok(Nbs::Auto);
        }
        match text.parse::<usize>() {
            Ok(n) if (limits::NBS_MIN..=limits::NBS_MAX).contains(&n) => Ok(Nbs::Fixed(n)),
            _ => {
                Err(format!("`{text}` is not `auto` or a count in {}..={}", limits::NBS_MIN, limits::NBS_MAX))
            }
        }
    }
}

impl Serialize for Nbs {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Nbs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        /// `"auto"`, or a count (as a number or as text).
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Written {
            Count(usize),
            Text(String),
        }
        let text = match Written::deserialize(deserializer)? {
            Written::Count(n) => n.to_string(),
            Written::Text(text) => text,
        };
        text.parse().map_err(|e| serde::de::Error::custom(format!("nbs = {text}: {e}")))
    }
}

/// A setting that may be asked as a value or as none/auto (`Option<Option<T>>`): left out when
/// not asked, `null` for none/auto, else the value.
mod nested {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<S: Serializer, T: Serialize>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(inner) => inner.serialize(serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        Option::<T>::deserialize(deserializer).map(Some)
    }
}

/// `part` as its text (`"freeze=0"`), as `config.toml` keeps it.
mod part_text {
    use headroom_onnx::Trainable;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(part: &Option<Trainable>, serializer: S) -> Result<S::Ok, S::Error> {
        match part {
            Some(part) => serializer.collect_str(part),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Trainable>, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map(Some).map_err(|e| serde::de::Error::custom(format!("part = {text:?}: {e}")))
    }
}

impl std::fmt::Display for Nbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Nbs::Auto => f.write_str("auto"),
            Nbs::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// Every setting of a run a caller may ask for; `None` is "not asked" (a new run takes headroom
/// train's default, a resumed one keeps its own). Paths are absolute. Serialized (JSON) it is what
/// the field loop hands its training child and keeps in `state.json`: a setting not asked is left
/// out; a setting asked as "none" or "auto" (`optimizer`, `ignore_band`, `imgsz`) is `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The student.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<PathBuf>,
    /// The dataset's `data.yaml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<PathBuf>,
    /// What trains.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "part_text")]
    pub part: Option<Trainable>,
    /// Where libtorch trains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<TorchDevice>,
    /// The board preset planned for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub board: Option<DevicePreset>,
    /// Whether a new run plans its configuration for the board's budget (`--plan`): the caller
    /// plans ([`crate::planner::plan_auto`]) before the run starts; a resumed run keeps its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PlanMode>,
    /// Old-domain data replayed against forgetting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<PathBuf>,
    /// Replayed images per new image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_fraction: Option<f64>,
    /// Dataset classes mapped onto the student's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remap: Option<String>,
    /// What runs the frozen trunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trunk: Option<TrunkRuntime>,
    /// Train on cached trunk features.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_features: Option<bool>,
    /// The memory cap of a pass above the start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cap: Option<headroom_plan::Bytes>,
    /// Passes before the cap is checked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_cap_after: Option<u64>,
    /// Convolutions re-normalised before training.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renorm: Option<usize>,
    /// Quantization-aware training at this Q/DQ file's sites and activation scales.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qat: Option<PathBuf>,
    /// The dense-distillation teacher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub teacher: Option<PathBuf>,
    /// Epochs without a better fitness before stopping (0: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patience: Option<usize>,
    /// The time budget, hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_hours: Option<f64>,
    /// Epochs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epochs: Option<usize>,
    /// Images per pass; not asked for, a new run takes 2 or what the export allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<usize>,
    /// The nominal batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbs: Option<Nbs>,
    /// The optimiser; `Some(None)` is `auto` (AdamW at the rate of the classes).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nested")]
    pub optimizer: Option<Option<Optimizer>>,
    /// The initial learning rate of a chosen optimiser.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lr0: Option<f64>,
    /// Cosine learning-rate decay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cos_lr: Option<bool>,
    /// Gradient clipping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_grad_norm: Option<f64>,
    /// Flip probability.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flip: Option<f64>,
    /// KL distillation gain on the labels' soft scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kd: Option<f64>,
    /// Dense distillation gain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_kd: Option<f64>,
    /// The ignore band (`Some(None)`: none).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nested")]
    pub ignore_band: Option<Option<[f64; 2]>>,
    /// Pull toward the starting weights.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<f64>,
    /// HSV gains; not asked for, a new run takes Ultralytics' (off with the feature cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hsv: Option<[f32; 3]>,
    /// Translation; as `hsv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translate: Option<f32>,
    /// Scale; as `hsv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale: Option<f32>,
    /// Mosaic probability; as `hsv`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mosaic: Option<f32>,
    /// Gradient checkpointing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<bool>,
    /// Mixed precision (CUDA only: on the CPU the run trains in fp32, with a warning).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amp: Option<bool>,
    /// The input size (`Some(None)`: the export's).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "nested")]
    pub imgsz: Option<Option<usize>>,
    /// Checkpoint every N optimiser steps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_period: Option<u64>,
    /// Checkpoint after this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub save_interval: Option<f64>,
    /// The seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

/// Epochs of a new run when neither the command line nor a preset says: the adaptation figures' 30
/// (10 lost to 30 with augmentation).
pub const DEFAULT_EPOCHS: usize = 30;

impl RunRequest {
    /// headroom train's defaults: what a new run takes where neither the command line nor a preset
    /// says (`--help` shows each as `[default: ...]`). Unset here, and derived when the run
    /// resolves: the device (`auto`: the caller resolves it), the batch (2, or what the export
    /// allows), the augmentation (Ultralytics', off with the feature cache), `lr0` (the
    /// optimiser's own); and what has no default (the model, data, board, replay, teacher, remap,
    /// memory cap).
    pub fn defaults() -> RunRequest {
        RunRequest {
            part: Some(DEFAULT_PART),
            plan: Some(PlanMode::Off),
            replay_fraction: Some(1.0),
            trunk: Some(TrunkRuntime::Ort),
            cache_features: Some(false),
            memory_cap_after: Some(0),
            renorm: Some(0),
            patience: Some(100),
            time_hours: Some(0.0),
            epochs: Some(DEFAULT_EPOCHS),
            nbs: Some(Nbs::Auto),
            optimizer: Some(None),
            cos_lr: Some(false),
            max_grad_norm: Some(10.0),
            flip: Some(0.5),
            kd: Some(0.0),
            dense_kd: Some(1.0),
            ignore_band: Some(None),
            anchor: Some(0.0),
            checkpoint: Some(true),
            amp: Some(false),
            imgsz: Some(None),
            save_period: Some(0),
            save_interval: Some(60.0),
            seed: Some(0),
            ..RunRequest::default()
        }
    }

    /// This request, each setting it leaves unset taken from `fallback` (the command line over a
    /// preset, a preset over the flags' defaults).
    #[must_use]
    pub fn or(self, fallback: RunRequest) -> RunRequest {
        RunRequest {
            model: self.model.or(fallback.model),
            data: self.data.or(fallback.data),
            part: self.part.or(fallback.part),
            device: self.device.or(fallback.device),
            board: self.board.or(fallback.board),
            plan: self.plan.or(fallback.plan),
            replay: self.replay.or(fallback.replay),
            replay_fraction: self.replay_fraction.or(fallback.replay_fraction),
            remap: self.remap.or(fallback.remap),
            trunk: self.trunk.or(fallback.trunk),
            cache_features: self.cache_features.or(fallback.cache_features),
            memory_cap: self.memory_cap.or(fallback.memory_cap),
            memory_cap_after: self.memory_cap_after.or(fallback.memory_cap_after),
            renorm: self.renorm.or(fallback.renorm),
            qat: self.qat.or(fallback.qat),
            teacher: self.teacher.or(fallback.teacher),
            patience: self.patience.or(fallback.patience),
            time_hours: self.time_hours.or(fallback.time_hours),
            epochs: self.epochs.or(fallback.epochs),
            batch: self.batch.or(fallback.batch),
            nbs: self.nbs.or(fallback.nbs),
            optimizer: self.optimizer.or(fallback.optimizer),
            lr0: self.lr0.or(fallback.lr0),
            cos_lr: self.cos_lr.or(fallback.cos_lr),
            max_grad_norm: self.max_grad_norm.or(fallback.max_grad_norm),
            flip: self.flip.or(fallback.flip),
            kd: self.kd.or(fallback.kd),
            dense_kd: self.dense_kd.or(fallback.dense_kd),
            ignore_band: self.ignore_band.or(fallback.ignore_band),
            anchor: self.anchor.or(fallback.anchor),
            hsv: self.hsv.or(fallback.hsv),
            translate: self.translate.or(fallback.translate),
            scale: self.scale.or(fallback.scale),
            mosaic: self.mosaic.or(fallback.mosaic),
            checkpoint: self.checkpoint.or(fallback.checkpoint),
            amp: self.amp.or(fallback.amp),
            imgsz: self.imgsz.or(fallback.imgsz),
            save_period: self.save_period.or(fallback.save_period),
            save_interval: self.save_interval.or(fallback.save_interval),
            seed: self.seed.or(fallback.seed),
        }
    }

    /// The spec of a new run (`base` None) or of `base` with this request applied. `cuda`: whether
    /// this libtorch sees a CUDA device (AMP needs one).
    pub fn resolve(&self, base: Option<&RunSpec>, cuda: bool) -> Result<RunSpec> {
        let refuse = |message: &str| Error::Request(message.to_string());
        let model = match (&self.model, base) {
            (Some(m), _) => m.clone(),
            (None, Some(b)) => b.model.clone(),
            (None, None) => return Err(refuse("--model is required for a new run")),
        };
        let data = match (&self.data, base) {
            (Some(d), _) => d.clone(),
            (None, Some(b)) => b.data.clone(),
            (None, None) => return Err(refuse("--data is required for a new run")),
        };
        let mut spec = match base {
            Some(b) => b.clone(),
            None => {
                let mut spec = RunSpec::new(model.clone(), data.clone());
                // headroom train's defaults where the spec's differ.
                spec.settings.augment = AugmentConfig::ultralytics();
                spec
            }
        };
        spec.model = model;
        spec.data = data;
        self.apply_run_settings(&mut spec);
        self.apply_training_settings(&mut spec.settings);
        if base.is_none() && self.cache_features == Some(true) {
            self.default_augmentation_off(&mut spec.settings.augment);
        }
        if self.amp.is_some() || self.device.is_some() {
            let want = self.amp.unwrap_or(false);
            spec.settings.amp = want && spec.device != TorchDevice::Cpu && cuda;
            if want && !spec.settings.amp {
                tracing::warn!(
                    "--amp: mixed precision is for CUDA; on the CPU this run trains in fp32 (config.toml records amp = false)"
                );
            }
        }
        let needs_model = self.imgsz.is_some() || self.optimizer.is_some() || self.lr0.is_some();
        let new_default_batch = base.is_none() && self.batch.is_none();
        if needs_model || new_default_batch {
            let model = headroom_onnx::Model::load(&spec.model)?;
            let inspection = headroom_onnx::inspect::inspect(&model)?;
            if let Some(imgsz) = self.imgsz {
                spec.settings.imgsz = input_size(&spec.model, imgsz, &inspection)?;
            }
            if self.optimizer.is_some() || self.lr0.is_some() {
                self.choose_optimizer(&mut spec.settings, inspection.classes)?;
            }
            if new_default_batch {
                default_batch_within_the_export(&mut spec, &model, &inspection)?;
            }
        }
        // Sized from the run's own epochs and batch (set above); on resume only when asked.
        if let Some(nbs) = self.nbs {
            spec.settings.nbs = match nbs {
                Nbs::Fixed(n) => n,
                Nbs::Auto => auto_nbs(&spec)?,
            };
        }
        spec.validate()?;
        Ok(spec)
    }

    /// The saved spec of a run to resume with this request applied, refused when the request
    /// changes any setting but `epochs` (a resumed run keeps its settings; only more epochs may
    /// extend it).
    pub fn check_resume(&self, saved: &RunSpec, cuda: bool) -> Result<()> {
        let asked = self.resolve(Some(saved), cuda)?;
        match saved.differences(&asked).into_iter().find(|(setting, _, _)| setting != "settings.epochs") {
            Some((setting, saved, given)) => Err(Error::ResumeConflict { setting, saved, given }),
            None => Ok(()),
        }
    }

    fn apply_run_settings(&self, spec: &mut RunSpec) {
        set(&mut spec.part, self.part);
        set(&mut spec.device, self.device.clone());
        if let Some(board) = &self.board {
            spec.device_preset = Some(board.clone());
        }
        if let Some(replay) = &self.replay {
            spec.replay = Some(replay.clone());
        }
        set(&mut spec.replay_fraction, self.replay_fraction);
        if let Some(remap) = &self.remap {
            spec.remap = Some(remap.clone());
        }
        set(&mut spec.trunk, self.trunk);
        set(&mut spec.cache_features, self.cache_features);
        if let Some(cap) = self.memory_cap {
            spec.memory_cap = Some(cap);
        }
        set(&mut spec.memory_cap_after, self.memory_cap_after);
        set(&mut spec.renorm, self.renorm);
        if let Some(qat) = &self.qat {
            spec.qat = Some(qat.clone());
        }
        if let Some(teacher) = &self.teacher {
            spec.teacher = Some(teacher.clone());
        }
        set(&mut spec.patience, self.patience);
        set(&mut spec.time_hours, self.time_hours);
    }

    fn apply_training_settings(&self, s: &mut TrainConfig) {
        set(&mut s.epochs, self.epochs);
        set(&mut s.batch, self.batch);
        set(&mut s.cos_lr, self.cos_lr);
        set(&mut s.max_grad_norm, self.max_grad_norm);
        set(&mut s.flip, self.flip);
        set(&mut s.kd, self.kd);
        set(&mut s.dense_kd, self.dense_kd);
        set(&mut s.ignore_band, self.ignore_band);
        set(&mut s.anchor, self.anchor);
        if let Some([h, s_gain, v]) = self.hsv {
            [s.augment.hsv_h, s.augment.hsv_s, s.augment.hsv_v] = [h, s_gain, v];
        }
        set(&mut s.augment.translate, self.translate);
        set(&mut s.augment.scale, self.scale);
        set(&mut s.augment.mosaic, self.mosaic);
        set(&mut s.checkpoint, self.checkpoint);
        set(&mut s.save_period, self.save_period);
        set(&mut s.save_interval, self.save_interval);
        set(&mut s.seed, self.seed);
    }

    /// The feature cache stores the trunk's outputs of fixed inputs: the augmentation a new run
    /// takes by default is turned off (augmentation asked for stays, and the spec refuses it with
    /// the cache).
    fn default_augmentation_off(&self, augment: &mut AugmentConfig) {
        let mut off = Vec::new();
        if self.mosaic.is_none() && augment.mosaic > 0.0 {
            augment.mosaic = 0.0;
            off.push("--mosaic");
        }
        if self.scale.is_none() && augment.scale > 0.0 {
            augment.scale = 0.0;
            off.push("--scale");
        }
        if self.translate.is_none() && augment.translate > 0.0 {
            augment.translate = 0.0;
            off.push("--translate");
        }
        if self.hsv.is_none() && [augment.hsv_h, augment.hsv_s, augment.hsv_v].iter().any(|g| *g > 0.0) {
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

    /// `auto`: AdamW at the rate of the classes (a rate asked for is ignored, with a warning); a
    /// chosen optimiser at the rate asked for, else the default.
    fn choose_optimizer(&self, s: &mut TrainConfig, classes: usize) -> Result<()> {
        if let Some(lr0) = self.lr0
            && !headroom_train::config::limits::lr0(lr0)
        {
            return Err(Error::Request(format!("--lr0 {lr0} is not in (0, 1)")));
        }
        match self.optimizer.flatten() {
            None => {
                if let Some(lr0) = self.lr0 {
                    tracing::warn!(
                        "--lr0 {lr0} is ignored: --optimizer auto chooses the rate (use sgd or adamw to set it)"
                    );
                }
                *s = s.clone().with_auto_optimizer(classes);
                tracing::info!("--optimizer auto: {} lr0 {} momentum {}", s.optimizer, s.lr0, s.momentum);
            }
            Some(chosen) => {
                let defaults = TrainConfig::default();
                s.optimizer = chosen;
                s.lr0 = self.lr0.unwrap_or(defaults.lr0);
                s.momentum = defaults.momentum;
            }
        }
        Ok(())
    }
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

/// `nbs = auto`: sized to the images an epoch sees (the new ones and their replayed share).
fn auto_nbs(spec: &RunSpec) -> Result<usize> {
    let new = train_images(&spec.data)?;
    let replayed =
        if spec.replay.is_some() { (new as f64 * spec.replay_fraction).round() as usize } else { 0 };
    let s = &spec.settings;
    let nbs = headroom_train::schedule::nominal_batch_for(new + replayed, s.epochs, s.batch);
    tracing::info!(
        "--nbs auto: {nbs} ({} images per epoch, {} epochs: {} optimiser steps)",
        new + replayed,
        s.epochs,
        (new + replayed).div_ceil(nbs) * s.epochs
    );
    Ok(nbs)
}

/// The default batch (2) where the export allows it: a static export whose batch is fixed at 1 and
/// whose part to train reshapes with it (attention layers of 11, v10, 26 when more than the head
/// trains) trains at batch 1, said in a line (asked for batch 2, the run refuses it).
fn default_batch_within_the_export(
    spec: &mut RunSpec,
    model: &headroom_onnx::Model,
    inspection: &headroom_onnx::inspect::Inspection,
) -> Result<()> {
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

/// Usable images in the train split of `data` (`nbs = auto` counts them), checked as training
/// loads them but not logged: training's own load warns once of each image it skips.
fn train_images(data: &Path) -> Result<usize> {
    use headroom_core::dataset::{DataConfig, LoadOptions, Split, layout, load_images};
    let config = DataConfig::load(data)?;
    let split = Split::Train;
    let sources = config.split_sources(split).ok_or_else(|| Error::Input {
        path: config.file.clone(),
        reason: format!("key `{}:` is absent or empty", split.key()),
    })?;
    let listed = layout::list_images(&config.file, split.key(), sources)?;
    Ok(load_images(&listed, config.nc(), LoadOptions::default())?.0.len())
}

/// The input size: the export's; asked for, a dynamic export's rounded up to the largest stride.
fn input_size(
    model: &Path,
    imgsz: Option<usize>,
    inspection: &headroom_onnx::inspect::Inspection,
) -> Result<[u32; 2]> {
    let [h, w] = inspection.inspected_size;
    let Some(wanted) = imgsz else { return Ok([w as u32, h as u32]) };
    let fixed = inspection.input_shape.iter().skip(2).all(|d| matches!(d, headroom_onnx::Dim::Known(_)));
    if fixed {
        if !(wanted as i64 == h && wanted as i64 == w) {
            return Err(Error::Request(format!(
                "{}: the export's input is fixed at {h}x{w}; --imgsz {wanted} needs an export at that size \
                 (or dynamic=True)",
                model.display()
            )));
        }
        return Ok([w as u32, h as u32]);
    }
    let stride = inspection.strides.iter().copied().max().unwrap_or(32) as usize;
    let rounded = wanted.div_ceil(stride) * stride;
    if rounded != wanted {
        tracing::warn!("--imgsz {wanted} is not a multiple of the largest stride {stride}: using {rounded}");
    }
    Ok([rounded as u32, rounded as u32])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo/yolov8n-shapes-160.onnx")
    }

    fn request() -> RunRequest {
        RunRequest {
            model: Some(demo()),
            data: Some(PathBuf::from("/nowhere/data.yaml")),
            part: Some(Trainable::Freeze(0)),
            epochs: Some(30),
            nbs: Some(Nbs::Fixed(8)),
            optimizer: Some(None),
            imgsz: Some(None),
            ..RunRequest::default()
        }
    }

    #[test]
    fn a_request_round_trips_through_json_with_none_and_auto_kept_apart_from_not_asked() {
        let full = RunRequest {
            board: Some(headroom_plan::builtin_devices().expect("boards").remove(0)),
            device: Some(TorchDevice::Cuda(Some(1))),
            plan: Some(PlanMode::Auto),
            memory_cap: Some(headroom_plan::Bytes(512 << 20)),
            ignore_band: Some(Some([0.1, 0.3])),
            hsv: Some([0.1, 0.2, 0.3]),
            optimizer: Some(Some(Optimizer::Sgd)),
            nbs: Some(Nbs::Auto),
            ..RunRequest::defaults().or(request())
        };
        for asked in [RunRequest::default(), request(), RunRequest::defaults(), full] {
            let json = serde_json::to_string(&asked).expect("json");
            assert_eq!(serde_json::from_str::<RunRequest>(&json).expect("back"), asked, "{json}");
        }
        let json = serde_json::to_value(request()).expect("json");
        assert_eq!(json["optimizer"], serde_json::Value::Null, "auto");
        assert!(json.get("batch").is_none(), "not asked: left out");
        assert_eq!((json["part"].as_str(), json["nbs"].as_str()), (Some("freeze=0"), Some("8")));
        let err = serde_json::from_str::<RunRequest>(r#"{"epoch": 3}"#).expect_err("a renamed key");
        assert!(err.to_string().contains("epoch"), "{err}");
        let err = serde_json::from_str::<RunRequest>(r#"{"part": "neck"}"#).expect_err("a bad part");
        assert!(err.to_string().contains("part = \"neck\""), "{err}");
    }

    #[test]
    fn a_new_run_takes_the_defaults_and_derives_the_rest() {
        let spec = request().resolve(None, false).expect("a new run");
        assert_eq!(spec.part, Trainable::Freeze(0));
        assert_eq!((spec.settings.epochs, spec.settings.batch, spec.settings.nbs), (30, 2, 8));
        assert_eq!(spec.settings.imgsz, [160, 160], "the export's size");
        assert_eq!(spec.settings.optimizer, Optimizer::AdamW, "auto");
        assert_eq!(spec.settings.augment, AugmentConfig::ultralytics());
        let cached = RunRequest { cache_features: Some(true), mosaic: Some(0.5), ..request() };
        let err = cached.resolve(None, false).expect_err("augmentation asked for with the cache");
        assert!(err.to_string().contains("mosaic"), "{err}");
        let cached = RunRequest { cache_features: Some(true), ..request() };
        let spec = cached.resolve(None, false).expect("the cache turns the default augmentation off");
        assert_eq!(spec.settings.augment, AugmentConfig::default());
        let amp = RunRequest { amp: Some(true), device: Some(TorchDevice::Cuda(Some(0))), ..request() };
        assert!(!amp.resolve(None, false).expect("no CUDA").settings.amp);
        assert!(amp.resolve(None, true).expect("CUDA").settings.amp);
    }

    #[test]
    fn on_resume_only_what_is_asked_changes_and_bad_values_are_refused() {
        let saved = request().resolve(None, false).expect("a new run");
        let asked = RunRequest { epochs: Some(40), ..RunRequest::default() };
        let resumed = asked.resolve(Some(&saved), false).expect("resumed");
        let changed: Vec<String> = saved.differences(&resumed).into_iter().map(|(k, _, _)| k).collect();
        assert_eq!(changed, ["settings.epochs"]);
        assert_eq!(RunRequest::default().resolve(Some(&saved), false).expect("nothing asked"), saved);
        let err = RunRequest { model: None, ..request() }.resolve(None, false).expect_err("no model");
        assert_eq!(err.to_string(), "--model is required for a new run");
        let err = RunRequest { optimizer: Some(Some(Optimizer::Sgd)), lr0: Some(2.0), ..request() }
            .resolve(None, false)
            .expect_err("lr0 out of range");
        assert_eq!(err.to_string(), "--lr0 2 is not in (0, 1)");
        let err = RunRequest { part: Some(Trainable::Head), ..RunRequest::default() }
            .check_resume(&saved, false)
            .expect_err("another part");
        assert!(err.to_string().starts_with("part: this run was started with"), "{err}");
        RunRequest { epochs: Some(60), ..RunRequest::default() }
            .check_resume(&saved, false)
            .expect("more epochs");
        let err = RunRequest { imgsz: Some(Some(320)), ..request() }.resolve(None, false).expect_err("fixed");
        assert!(err.to_string().contains("fixed at 160x160"), "{err}");
    }
}
