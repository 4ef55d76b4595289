//! Run presets (`configs/runs.toml`, embedded in the binary): what a field retrain trains and what
//! its deploy gate demands. `headroom train --preset` and `headroom field run --preset` read them.

use std::path::Path;

use anyhow::Context as _;
use headroom_field::gate::GateSettings;
use headroom_train::config::limits;
use serde::{Deserialize, Serialize};

/// The presets shipped in `configs/runs.toml`.
pub const BUILTIN_RUNS: &str = include_str!("../../../../configs/runs.toml");

/// The augmentation flags `augment = false` turns off.
const AUGMENT_OFF: [(&str, &str); 4] =
    [("mosaic", "0"), ("scale", "0"), ("translate", "0"), ("hsv", "0,0,0")];

/// One run preset. Unknown keys are errors (a typo must not silently change a nightly run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunPreset {
    /// What the preset is for, with the figures behind it.
    #[serde(default)]
    pub description: String,
    /// Epochs (`headroom train --epochs`).
    pub epochs: Option<usize>,
    /// What trains (`--train`: head, neck+head, all, affine, N).
    pub train: Option<String>,
    /// Nominal batch (`--nbs`: `auto` or a count).
    pub nbs: Option<NbsValue>,
    /// Optimiser (`--optimizer`: auto, sgd, adamw).
    pub optimizer: Option<String>,
    /// Initial learning rate of sgd and adamw (`--lr0`).
    pub lr0: Option<f64>,
    /// `true`: Ultralytics' mosaic, scale, translate and HSV values (`headroom train`'s defaults);
    /// `false`: all off.
    pub augment: Option<bool>,
    /// Dense distillation from the labelling teacher (`--teacher`).
    #[serde(default)]
    pub distill: bool,
    /// Gain of the dense distillation term (`--dense-kd`).
    pub dense_kd: Option<f64>,
    /// Stop after this many epochs without a better val fitness (`--patience`).
    pub patience: Option<usize>,
    /// Training time budget, hours (`--time`).
    pub time_hours: Option<f64>,
    /// The field loop's labelled set keeps at most this many images, the newest (`headroom field
    /// run --max-images`; human-labelled images always stay) [default: 5000].
    pub max_images: Option<usize>,
    /// Runs the field loop's `history/` keeps (`--keep-runs`) [default: 10].
    pub keep_runs: Option<usize>,
    /// The deploy gate (`headroom field run`).
    #[serde(default)]
    pub gate: GateSettings,
}

/// The labelled set's bound when neither the preset nor `--max-images` gives one.
#[cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(dead_code))]
pub const DEFAULT_MAX_IMAGES: usize = 5000;
/// Runs `history/` keeps when neither the preset nor `--keep-runs` says.
#[cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(dead_code))]
pub const DEFAULT_KEEP_RUNS: usize = 10;

/// `nbs = "auto"` or `nbs = 8`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum NbsValue {
    /// A fixed nominal batch.
    Count(u64),
    /// `auto`.
    Text(String),
}

impl std::fmt::Display for NbsValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NbsValue::Count(n) => write!(f, "{n}"),
            NbsValue::Text(t) => f.write_str(t),
        }
    }
}

impl RunPreset {
    fn check(&self) -> Result<(), String> {
        if let Some(NbsValue::Text(t)) = &self.nbs
            && t != "auto"
        {
            return Err(format!("nbs = \"{t}\": expected \"auto\" or a count"));
        }
        // The rules of `headroom train`'s flags, so that both verbs refuse a preset alike.
        if let Some(NbsValue::Count(n)) = &self.nbs {
            super::train_args::nbs_arg(&n.to_string()).map_err(|e| format!("nbs = {n}: {e}"))?;
        }
        if let Some(epochs) = self.epochs {
            super::provider_args::count_arg::<{ limits::EPOCHS_MIN }, { limits::EPOCHS_MAX }>(
                &epochs.to_string(),
            )
            .map_err(|e| format!("epochs = {epochs}: {e}"))?;
        }
        if let Some(n) = self.max_images {
            super::provider_args::count_arg::<1, 100_000_000>(&n.to_string())
                .map_err(|e| format!("max_images = {n}: {e}"))?;
        }
        if let Some(n) = self.keep_runs {
            super::provider_args::count_arg::<1, 10_000>(&n.to_string())
                .map_err(|e| format!("keep_runs = {n}: {e}"))?;
        }
        if let Some(part) = &self.train {
            part.parse::<headroom_onnx::Trainable>().map_err(|e| format!("train = \"{part}\": {e}"))?;
        }
        if let Some(o) = &self.optimizer
            && !["auto", "sgd", "adamw"].contains(&o.as_str())
        {
            return Err(format!("optimizer = \"{o}\": expected \"auto\", \"sgd\" or \"adamw\""));
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
            if self.optimizer.as_deref().is_none_or(|o| o == "auto") {
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

    /// The `headroom train` flags this preset sets, except those `given` says the user gave.
    /// `teacher`: the labelling teacher, needed when the preset distils.
    pub fn train_flags(&self, given: &dyn Fn(&str) -> bool, teacher: Option<&Path>) -> Vec<String> {
        let mut flags = Vec::new();
        let mut set = |id: &str, value: String| {
            if !given(id) {
                flags.push(format!("--{}", id.replace('_', "-")));
                flags.push(value);
            }
        };
        if let Some(epochs) = self.epochs {
            set("epochs", epochs.to_string());
        }
        if let Some(train) = &self.train {
            set("train", train.clone());
        }
        if let Some(nbs) = &self.nbs {
            set("nbs", nbs.to_string());
        }
        if let Some(optimizer) = &self.optimizer {
            set("optimizer", optimizer.clone());
        }
        if let Some(lr0) = self.lr0 {
            set("lr0", lr0.to_string());
        }
        if let Some(patience) = self.patience {
            set("patience", patience.to_string());
        }
        if let Some(hours) = self.time_hours {
            set("time", hours.to_string());
        }
        let augment: &[(&str, &str)] = match self.augment {
            Some(true) => &super::train_args::AUGMENT_DEFAULTS,
            Some(false) => &AUGMENT_OFF,
            None => &[],
        };
        for (id, value) in augment {
            set(id, value.to_string());
        }
        if self.distill
            && let Some(teacher) = teacher
        {
            set("teacher", teacher.display().to_string());
        }
        if let Some(gain) = self.dense_kd {
            set("dense_kd", gain.to_string());
        }
        flags
    }
}

/// Every preset of a presets file's text; `origin` names it in errors.
pub fn parse_presets(origin: &str, text: &str) -> anyhow::Result<Vec<(String, RunPreset)>> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        anyhow::anyhow!("{origin}: not valid TOML: {}", headroom_run::spec::toml_error(text, &e))
    })?;
    let mut presets = Vec::new();
    for (name, value) in table {
        let preset: RunPreset = value
            .try_into()
            .map_err(|e: toml::de::Error| anyhow::anyhow!("{origin}: preset `{name}`: {}", e.message()))?;
        preset.check().map_err(|e| anyhow::anyhow!("{origin}: preset `{name}`: {e}"))?;
        presets.push((name, preset));
    }
    Ok(presets)
}

/// The preset `spec` names: a built-in name, or a TOML file holding one preset's keys at its top
/// level (a section of configs/runs.toml without its header). Returns its name and the preset.
pub fn load(spec: &str) -> anyhow::Result<(String, RunPreset)> {
    let path = Path::new(spec);
    if path.is_file() || spec.ends_with(".toml") {
        let text = headroom_core::fsio::read_regular(path)
            .with_context(|| format!("--preset {spec}: reading the preset file"))?;
        let text = String::from_utf8(text).map_err(|_| anyhow::anyhow!("--preset {spec}: not UTF-8 text"))?;
        let preset: RunPreset =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("--preset {spec}: {}", e.message().trim()))?;
        preset.check().map_err(|e| anyhow::anyhow!("--preset {spec}: {e}"))?;
        return Ok((spec.to_string(), preset));
    }
    let presets = parse_presets("<builtin configs/runs.toml>", BUILTIN_RUNS)?;
    let known = presets.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    presets.iter().find(|(n, _)| n == spec).cloned().ok_or_else(|| {
        anyhow::anyhow!("--preset {spec}: no such preset (built in: {known}) and no such file")
    })
}

/// Applies `--preset` to `headroom train`'s arguments: each key the command line did not give.
pub fn apply_to_train(args: &mut super::train_args::Args) -> anyhow::Result<()> {
    let Some(spec) = args.preset.clone() else { return Ok(()) };
    let (name, preset) = load(&spec)?;
    anyhow::ensure!(
        !preset.distill || args.teacher.is_some(),
        "--preset {name} distils from the labelling teacher (distill = true): give --teacher T.onnx"
    );
    let given = args.given.clone();
    let flags = preset.train_flags(&|id| given.iter().any(|g| g == id), None);
    for pair in flags.chunks(2) {
        let (flag, value) = (pair[0].as_str(), pair[1].as_str());
        let bad = |e: String| anyhow::anyhow!("--preset {name}: {flag} {value}: {e}");
        let number = |v: &str| v.parse::<f32>().map_err(|_| bad("not a number".into()));
        match flag {
            "--epochs" => {
                args.epochs =
                    super::provider_args::count_arg::<{ limits::EPOCHS_MIN }, { limits::EPOCHS_MAX }>(value)
                        .map_err(bad)?
            }
            "--train" => args.train = value.to_string(),
            "--nbs" => args.nbs = super::train_args::nbs_arg(value).map_err(bad)?,
            "--optimizer" => {
                args.optimizer = clap::ValueEnum::from_str(value, false).map_err(bad)?;
            }
            "--lr0" => args.lr0 = Some(value.parse().map_err(|_| bad("not a number".into()))?),
            "--dense-kd" => args.dense_kd = value.parse().map_err(|_| bad("not a number".into()))?,
            "--mosaic" => args.mosaic = number(value)?,
            "--scale" => args.scale = number(value)?,
            "--translate" => args.translate = number(value)?,
            "--hsv" => args.hsv = value.to_string(),
            "--patience" => args.patience = value.parse().map_err(|_| bad("not a count".into()))?,
            "--time" => args.time = Some(super::train_args::hours_arg(value).map_err(bad)?),
            _ => anyhow::bail!("--preset {name}: {flag} is not a train flag"),
        }
    }
    tracing::info!("preset {name}: {}", preset.description);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_presets_parse_and_check() {
        let presets = parse_presets("runs.toml", BUILTIN_RUNS).expect("built-in presets");
        let names: Vec<&str> = presets.iter().map(|(n, _)| n.as_str()).collect();
        assert!(names.contains(&"field-quick") && names.contains(&"field-accurate"), "{names:?}");
        let (_, accurate) = load("field-accurate").expect("field-accurate");
        assert!(accurate.augment == Some(true) && accurate.distill);
        let (_, quick) = load("field-quick").expect("field-quick");
        let flags = quick.train_flags(&|_| false, None).join(" ");
        assert!(flags.contains("--train head --nbs 64") && flags.contains("--mosaic 0"), "{flags}");
        assert_eq!(accurate.nbs, Some(NbsValue::Text("auto".into())));
        assert_eq!(
            (accurate.optimizer.as_deref(), accurate.lr0, accurate.dense_kd),
            (Some("adamw"), Some(0.004), Some(3.0))
        );
    }

    #[test]
    fn flags_skip_what_was_given_and_add_the_teacher() {
        let (_, accurate) = load("field-accurate").expect("field-accurate");
        let flags = accurate.train_flags(&|id| id == "epochs", Some(Path::new("/t.onnx")));
        let text = flags.join(" ");
        assert!(!text.contains("--epochs"), "{text}");
        assert!(text.contains("--train all") && text.contains("--nbs auto"), "{text}");
        assert!(text.contains("--mosaic 1") && text.contains("--teacher /t.onnx"), "{text}");
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
    }

    #[test]
    fn optimizer_rate_and_dense_gain_become_flags_and_are_checked() {
        let text = "[p]\ndistill = true\ndense_kd = 3\noptimizer = \"adamw\"\nlr0 = 0.004\n";
        let (_, preset) = parse_presets("f.toml", text).expect("parse").remove(0);
        let flags = preset.train_flags(&|_| false, Some(Path::new("/t.onnx"))).join(" ");
        assert!(flags.contains("--optimizer adamw --lr0 0.004"), "{flags}");
        assert!(flags.contains("--teacher /t.onnx --dense-kd 3"), "{flags}");
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
    fn a_preset_file_holds_one_preset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("mine.toml");
        std::fs::write(&path, "epochs = 3\ntrain = \"all\"\n[gate]\nmin_gain = 1.0\n").expect("write");
        let (name, preset) = load(path.to_str().expect("utf-8")).expect("load");
        assert!(name.ends_with("mine.toml"));
        assert_eq!((preset.epochs, preset.gate.min_gain), (Some(3), 1.0));
        assert_eq!(preset.gate.resamples, GateSettings::default().resamples);
    }
}
