//! Run presets (`configs/runs.toml`, embedded): what a field retrain trains and what its deploy
//! gate demands. `headroom train --preset` and `headroom field run --preset` read them, so they
//! live here, below both: one file format, every key checked whichever verb reads it (a typo must
//! not silently change a nightly run). A preset's training keys are a layer of a [`RunRequest`]
//! ([`RunPreset::apply`]: the command line over the preset over the flags' defaults), and the field
//! loop's training step gets them in its request; its field keys (`max_images`, `keep_runs`) and
//! its [`GateSettings`] are the field loop's to use (`headroom_field`).

use std::path::Path;

use headroom_onnx::Trainable;
use headroom_plan::{Optimizer, PlanMode};
use serde::{Deserialize, Serialize};

use crate::limits;
use crate::request::{Nbs, RunRequest};
use crate::{Error, Result};

/// The presets shipped in `configs/runs.toml`.
pub const BUILTIN_RUNS: &str = include_str!("../../../configs/runs.toml");

/// The labelled set's bound when neither the preset nor `--max-images` gives one.
pub const DEFAULT_MAX_IMAGES: usize = 5000;
/// Runs `history/` keeps when neither the preset nor `--keep-runs` says.
pub const DEFAULT_KEEP_RUNS: usize = 10;
/// The most images a labelled set may be bounded to (`max_images`, `--max-images`).
pub const MAX_IMAGES_MAX: usize = 100_000_000;
/// The most runs `history/` may keep (`keep_runs`, `--keep-runs`).
pub const KEEP_RUNS_MAX: usize = 10_000;

/// One run preset, its settings typed. Read and written as TOML through `RawPreset` (the keys as
/// written), checked as it is read: unknown keys and bad values are errors naming the key (a typo
/// must not silently change a nightly run).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(try_from = "RawPreset", into = "RawPreset")]
pub struct RunPreset {
    /// What the preset is for, with the figures behind it.
    pub description: String,
    /// Epochs (`headroom train --epochs`).
    pub epochs: Option<usize>,
    /// What trains (`--train`: head, neck+head, all, affine, N).
    pub train: Option<Trainable>,
    /// Nominal batch (`--nbs`: `auto` or a count).
    pub nbs: Option<Nbs>,
    /// Optimiser (`--optimizer`: `auto` is `Some(None)`, sgd, adamw).
    pub optimizer: Option<Option<Optimizer>>,
    /// Initial learning rate of sgd and adamw (`--lr0`).
    pub lr0: Option<f64>,
    /// `true`: Ultralytics' mosaic, scale, translate and HSV values (`headroom train`'s defaults);
    /// `false`: all off.
    pub augment: Option<bool>,
    /// Dense distillation from the labelling teacher (`--teacher`).
    pub distill: bool,
    /// Gain of the dense distillation term (`--dense-kd`).
    pub dense_kd: Option<f64>,
    /// Stop after this many epochs without a better val fitness (`--patience`).
    pub patience: Option<usize>,
    /// Training time budget, hours (`--time`).
    pub time_hours: Option<f64>,
    /// Whether `headroom train` plans the run for the board's budget (`--plan`: `auto` trains with
    /// the fastest configuration that fits; `off` as given). The field loop passes it to its train step (`auto` when unset).
    pub plan: Option<PlanMode>,
    /// The field loop's labelled set keeps at most this many images, the newest (`headroom field
    /// run --max-images`; human-labelled images always stay) [default: 5000].
    pub max_images: Option<usize>,
    /// Runs the field loop's `history/` keeps (`--keep-runs`) [default: 10].
    pub keep_runs: Option<usize>,
    /// The deploy gate (`headroom field run`).
    pub gate: GateSettings,
}

impl RunPreset {
    /// The rules of `headroom train`'s flags, so that both verbs refuse a preset alike.
    fn check(&self) -> std::result::Result<(), String> {
        if let Some(epochs) = self.epochs
            && !(limits::EPOCHS_MIN..=limits::EPOCHS_MAX).contains(&epochs)
        {
            return Err(format!(
                "epochs = {epochs}: a count in {}..={}",
                limits::EPOCHS_MIN,
                limits::EPOCHS_MAX
            ));
        }
        if let Some(n) = self.max_images
            && !(1..=MAX_IMAGES_MAX).contains(&n)
        {
            return Err(format!("max_images = {n}: a count in 1..={MAX_IMAGES_MAX}"));
        }
        if let Some(n) = self.keep_runs
            && !(1..=KEEP_RUNS_MAX).contains(&n)
        {
            return Err(format!("keep_runs = {n}: a count in 1..={KEEP_RUNS_MAX}"));
        }
        if let Some(g) = self.dense_kd
            && !(g.is_finite() && (0.0..=100.0).contains(&g))
        {
            return Err(format!("dense_kd = {g}: a gain in [0, 100]"));
        }
        if self.dense_kd.is_some() && !self.distill {
            return Err("dense_kd needs distill = true (it is the gain of the teacher's term)".into());
        }
        if let Some(lr) = self.lr0 {
            if !limits::lr0(lr) {
                return Err(format!("lr0 = {lr}: a rate in (0, 1)"));
            }
            if self.optimizer.flatten().is_none() {
                return Err(format!(
                    "lr0 = {lr} needs optimizer = \"sgd\" or \"adamw\" (auto chooses its own)"
                ));
            }
        }
        if let Some(h) = self.time_hours
            && !limits::hours(h)
        {
            return Err(format!("time_hours = {h}: hours in (0, 10000]"));
        }
        self.gate.check()
    }

    /// The preset's training settings as a request (what it leaves unsaid, unset). `teacher`: the
    /// labelling teacher, taken when the preset distils.
    pub fn request(&self, teacher: Option<&Path>) -> RunRequest {
        let mut request = RunRequest {
            epochs: self.epochs,
            part: self.train,
            nbs: self.nbs,
            optimizer: self.optimizer,
            lr0: self.lr0,
            patience: self.patience,
            time_hours: self.time_hours,
            dense_kd: self.dense_kd,
            teacher: teacher.filter(|_| self.distill).map(Path::to_path_buf),
            plan: self.plan,
            ..RunRequest::default()
        };
        match self.augment {
            Some(true) => {
                let on = crate::request::AugmentConfig::ultralytics();
                request.mosaic = Some(on.mosaic);
                request.scale = Some(on.scale);
                request.translate = Some(on.translate);
                request.hsv = Some([on.hsv_h, on.hsv_s, on.hsv_v]);
            }
            Some(false) => {
                request.mosaic = Some(0.0);
                request.scale = Some(0.0);
                request.translate = Some(0.0);
                request.hsv = Some([0.0; 3]);
            }
            None => {}
        }
        request
    }

    /// Sets each training setting of `request` that it leaves unset to the preset's.
    pub fn apply(&self, request: &mut RunRequest, teacher: Option<&Path>) {
        *request = std::mem::take(request).or(self.request(teacher));
    }
}

/// Every preset of a presets file's text; `origin` names it in errors.
pub fn parse_presets(origin: &str, text: &str) -> Result<Vec<(String, RunPreset)>> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        Error::Request(format!("{origin}: not valid TOML: {}", crate::spec::toml_error(text, &e)))
    })?;
    let mut presets = Vec::new();
    for (name, value) in table {
        let preset: RunPreset = value.try_into().map_err(|e: toml::de::Error| {
            Error::Request(format!("{origin}: preset `{name}`: {}", e.message()))
        })?;
        presets.push((name, preset));
    }
    Ok(presets)
}

/// The preset `spec` names: a built-in name, or a TOML file holding one preset's keys at its top
/// level (a section of configs/runs.toml without its header). Returns its name and the preset.
pub fn load(spec: &str) -> Result<(String, RunPreset)> {
    let path = Path::new(spec);
    if path.is_file() || spec.ends_with(".toml") {
        let text = headroom_core::fsio::read_regular(path)
            .map_err(|e| Error::Request(format!("--preset {spec}: reading the preset file: {e}")))?;
        let text = String::from_utf8(text)
            .map_err(|_| Error::Request(format!("--preset {spec}: not UTF-8 text")))?;
        let preset: RunPreset = toml::from_str(&text)
            .map_err(|e| Error::Request(format!("--preset {spec}: {}", e.message().trim())))?;
        return Ok((spec.to_string(), preset));
    }
    let presets = parse_presets("<builtin configs/runs.toml>", BUILTIN_RUNS)?;
    let known = presets.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    presets.into_iter().find(|(n, _)| n == spec).ok_or_else(|| {
        Error::Request(format!("--preset {spec}: no such preset (built in: {known}) and no such file"))
    })
}

/// A preset as its TOML keys are written (`train = "all"`, `nbs = "auto"` or `nbs = 64`,
/// `optimizer = "adamw"`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreset {
    #[serde(default)]
    description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    epochs: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    train: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nbs: Option<NbsValue>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    optimizer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lr0: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    augment: Option<bool>,
    #[serde(default)]
    distill: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dense_kd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    patience: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time_hours: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    plan: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_images: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_runs: Option<usize>,
    #[serde(default)]
    gate: GateSettings,
}

/// `nbs = "auto"` or `nbs = 8`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum NbsValue {
    /// A fixed nominal batch.
    Count(u64),
    /// `auto`.
    Text(String),
}

impl TryFrom<RawPreset> for RunPreset {
    type Error = String;

    fn try_from(raw: RawPreset) -> std::result::Result<Self, Self::Error> {
        let nbs = match &raw.nbs {
            None => None,
            Some(NbsValue::Text(t)) if t != "auto" => {
                return Err(format!("nbs = \"{t}\": expected \"auto\" or a count"));
            }
            Some(NbsValue::Text(_)) => Some(Nbs::Auto),
            Some(NbsValue::Count(n)) => {
                Some(n.to_string().parse::<Nbs>().map_err(|e| format!("nbs = {n}: {e}"))?)
            }
        };
        let train = raw
            .train
            .as_deref()
            .map(|part| part.parse::<Trainable>().map_err(|e| format!("train = \"{part}\": {e}")))
            .transpose()?;
        let optimizer = match raw.optimizer.as_deref() {
            None => None,
            Some("auto") => Some(None),
            Some(o) => Some(Some(
                o.parse::<Optimizer>()
                    .map_err(|_| format!("optimizer = \"{o}\": expected \"auto\", \"sgd\" or \"adamw\""))?,
            )),
        };
        let plan = raw
            .plan
            .as_deref()
            .map(|mode| {
                mode.parse::<PlanMode>()
                    .map_err(|_| format!("plan = \"{mode}\": expected \"auto\" or \"off\""))
            })
            .transpose()?;
        let preset = RunPreset {
            description: raw.description,
            epochs: raw.epochs,
            train,
            nbs,
            optimizer,
            lr0: raw.lr0,
            augment: raw.augment,
            distill: raw.distill,
            dense_kd: raw.dense_kd,
            patience: raw.patience,
            time_hours: raw.time_hours,
            plan,
            max_images: raw.max_images,
            keep_runs: raw.keep_runs,
            gate: raw.gate,
        };
        preset.check()?;
        Ok(preset)
    }
}

impl From<RunPreset> for RawPreset {
    fn from(preset: RunPreset) -> Self {
        RawPreset {
            description: preset.description,
            epochs: preset.epochs,
            train: preset.train.map(|t| t.to_string()),
            nbs: preset.nbs.map(|n| match n {
                Nbs::Auto => NbsValue::Text("auto".into()),
                Nbs::Fixed(n) => NbsValue::Count(n as u64),
            }),
            optimizer: preset.optimizer.map(|o| o.map_or("auto", Optimizer::name).to_string()),
            lr0: preset.lr0,
            augment: preset.augment,
            distill: preset.distill,
            dense_kd: preset.dense_kd,
            patience: preset.patience,
            time_hours: preset.time_hours,
            plan: preset.plan.map(|m| m.name().to_string()),
            max_images: preset.max_images,
            keep_runs: preset.keep_runs,
            gate: preset.gate,
        }
    }
}

/// When `headroom field run` deploys a candidate (docs/FIELD.md "The gate"). Points are mAP50-95
/// × 100.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GateSettings {
    /// The lower end of the paired bootstrap interval of the candidate's mAP50-95 gain on the holdout
    /// must be at least this many points (0.1: a gain above the holdout's noise; −100: any).
    pub min_gain: f64,
    /// Two-sided confidence of the paired bootstrap interval over holdout images.
    pub confidence: f64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Seed of the resampling (the same run gives the same interval).
    pub seed: u64,
    /// Points of mAP50-95 the old-scene set (`--old`) may lose.
    pub old_tolerance: f64,
    /// Points of AP50-95 any class of the holdout may lose.
    pub class_tolerance: f64,
}

impl Default for GateSettings {
    fn default() -> Self {
        GateSettings {
            min_gain: 0.1,
            confidence: 0.95,
            resamples: 1000,
            seed: 0,
            old_tolerance: 1.0,
            class_tolerance: 5.0,
        }
    }
}

impl GateSettings {
    /// Refuses a setting out of its range, naming its key (`gate.confidence 1.5 is not in (0, 1)`).
    pub fn check(&self) -> Result<(), String> {
        let points = |v: f64| v.is_finite() && (0.0..=100.0).contains(&v);
        if !(self.min_gain.is_finite() && (-100.0..=100.0).contains(&self.min_gain)) {
            return Err(format!("gate.min_gain {} is not points in -100..=100", self.min_gain));
        }
        if !points(self.old_tolerance) || !points(self.class_tolerance) {
            return Err("gate.old_tolerance and gate.class_tolerance are points in 0..=100".into());
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(format!("gate.confidence {} is not in (0, 1)", self.confidence));
        }
        if !(1..=100_000).contains(&self.resamples) {
            return Err(format!("gate.resamples {} is not in 1..=100000", self.resamples));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layered(preset: &RunPreset, given: RunRequest, teacher: Option<&Path>) -> RunRequest {
        let mut request = given;
        preset.apply(&mut request, teacher);
        request
    }

    #[test]
    fn builtin_presets_parse_and_check() {
        let presets = parse_presets("runs.toml", BUILTIN_RUNS).expect("built-in presets");
        let names: Vec<&str> = presets.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"field-quick") && names.contains(&"field-accurate"), "{names:?}");
        let (_, accurate) = load("field-accurate").expect("field-accurate");
        assert!(accurate.augment == Some(true) && accurate.distill);
        let (_, quick) = load("field-quick").expect("field-quick");
        let asked = layered(&quick, RunRequest::default(), None);
        assert_eq!(
            (asked.part, asked.nbs, asked.mosaic),
            (Some(Trainable::Head), Some(Nbs::Fixed(64)), Some(0.0))
        );
        assert_eq!(accurate.nbs, Some(Nbs::Auto));
        assert_eq!((accurate.plan, quick.plan), (Some(PlanMode::Auto), None));
        assert_eq!(asked.plan, None, "the field loop sets the plan itself");
        assert_eq!(accurate.request(None).plan, Some(PlanMode::Auto), "headroom train plans with it");
        assert_eq!(
            (accurate.optimizer, accurate.lr0, accurate.dense_kd),
            (Some(Some(Optimizer::AdamW)), Some(0.004), Some(3.0))
        );
    }

    #[test]
    fn the_given_settings_stay_and_the_teacher_is_added() {
        let (_, accurate) = load("field-accurate").expect("field-accurate");
        let given = RunRequest { epochs: Some(7), ..RunRequest::default() };
        let asked = layered(&accurate, given, Some(Path::new("/t.onnx")));
        assert_eq!(asked.epochs, Some(7), "the given epochs, not the preset's");
        assert_eq!((asked.part, asked.nbs), (Some(Trainable::Freeze(0)), Some(Nbs::Auto)));
        assert_eq!((asked.mosaic, asked.hsv), (Some(1.0), Some([0.015, 0.7, 0.4])));
        assert_eq!(asked.teacher.as_deref(), Some(Path::new("/t.onnx")));
        assert_eq!(accurate.request(Some(Path::new("/t.onnx"))).lr0, accurate.lr0);
        let without = accurate.request(None);
        assert!(without.teacher.is_none(), "no teacher given, none taken");
    }

    #[test]
    fn bad_presets_name_the_key() {
        let err = parse_presets("f.toml", "[p]\nepochs = 3\nepoch = 4\n").expect_err("refused").to_string();
        assert!(err.contains("f.toml") && err.contains("`p`") && err.contains("epoch"), "{err}");
        let err = parse_presets("f.toml", "[p]\nnbs = \"lots\"\n").expect_err("refused").to_string();
        assert!(err.contains("nbs = \"lots\""), "{err}");
        let err =
            parse_presets("f.toml", "[p]\n[p.gate]\nconfidence = 1.5\n").expect_err("refused").to_string();
        assert!(err.contains("gate.confidence 1.5"), "{err}");
        let err = load("no-such-preset").expect_err("refused").to_string();
        assert!(err.contains("field-quick") && err.contains("no such preset"), "{err}");
        for (text, want) in [
            ("[p]\ntrain = \"legs\"\n", "train = \"legs\""),
            ("[p]\nnbs = 0\n", "nbs = 0"),
            ("[p]\nepochs = 0\n", "epochs = 0"),
            ("[p]\nkeep_runs = 0\n", "keep_runs = 0"),
            ("[p]\nplan = \"sometimes\"\n", "plan = \"sometimes\": expected \"auto\" or \"off\""),
        ] {
            let err = parse_presets("f.toml", text).expect_err(text).to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn optimizer_rate_and_dense_gain_reach_the_request_and_are_checked() {
        let text = "[p]\ndistill = true\ndense_kd = 3\noptimizer = \"adamw\"\nlr0 = 0.004\n";
        let (_, preset) = parse_presets("f.toml", text).expect("parse").remove(0);
        let asked = layered(&preset, RunRequest::default(), Some(Path::new("/t.onnx")));
        assert_eq!((asked.optimizer, asked.lr0), (Some(Some(Optimizer::AdamW)), Some(0.004)));
        assert_eq!((asked.teacher.as_deref(), asked.dense_kd), (Some(Path::new("/t.onnx")), Some(3.0)));
        for (text, want) in [
            ("[p]\noptimizer = \"adam\"\n", "optimizer = \"adam\""),
            ("[p]\nlr0 = 0.01\n", "needs optimizer"),
            ("[p]\noptimizer = \"sgd\"\nlr0 = 2.0\n", "lr0 = 2"),
            ("[p]\ndense_kd = 3\n", "needs distill"),
            ("[p]\ndistill = true\ndense_kd = -1\n", "dense_kd = -1"),
        ] {
            let err = parse_presets("f.toml", text).expect_err(text).to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn a_preset_file_holds_one_preset_and_writes_back_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mine.toml");
        std::fs::write(
            &path,
            "epochs = 3\ntrain = \"all\"\nnbs = 64\nplan = \"off\"\n[gate]\nmin_gain = 1.0\n",
        )
        .expect("write");
        let (name, preset) = load(path.to_str().expect("utf-8")).expect("load");
        assert!(name.ends_with("mine.toml"));
        assert_eq!((preset.epochs, preset.gate.min_gain), (Some(3), 1.0));
        assert_eq!(preset.gate.resamples, GateSettings::default().resamples);
        // The run's state keeps the preset as TOML: it reads back equal.
        let written = toml::to_string(&preset).expect("toml");
        assert!(written.contains("nbs = 64") && written.contains("plan = \"off\""), "{written}");
        let back: RunPreset = toml::from_str(&written).expect("reads back");
        assert_eq!(back, preset);
    }
}
