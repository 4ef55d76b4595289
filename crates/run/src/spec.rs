//! The spec of a run: every setting that shapes it, validated in one place ([`RunSpec::validate`])
//! for a new run's command line and for a saved `config.toml` alike, saved in the run folder
//! before training starts, and the only source of settings when the run resumes
//! ([`RunSpec::differences`] finds what a resuming command line would change). Pure: no native
//! library.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use headroom_onnx::Trainable;
use headroom_train::config::TrainConfig;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The file of a run folder that holds its spec.
pub const SPEC_FILE: &str = "config.toml";

/// What runs the frozen trunk (one enum for the planner and the run: `headroom_plan::TrunkRuntime`).
pub use headroom_plan::TrunkRuntime;

/// Where libtorch trains, as `config.toml` keeps it: `cpu`, `cuda`, `cuda:N` (`--device auto` is
/// saved as what it decided). Runs saved before `--board` existed may hold a board preset's name
/// (or `auto`), kept as [`TorchDevice::Board`] and resolved through the presets when they resume.
/// Written and read as that text (Display and FromStr round-trip).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TorchDevice {
    /// The CPU.
    Cpu,
    /// A CUDA device (`None`: `cuda`, libtorch's current one).
    Cuda(Option<usize>),
    /// A board preset's name, or `auto`, from a run saved before `--board`.
    Board(String),
}

impl TorchDevice {
    /// Whether it names libtorch's device (not an old run's board preset).
    pub fn is_libtorch(&self) -> bool {
        !matches!(self, TorchDevice::Board(_))
    }

    /// As a `--device` choice (an old run's board: `auto`, which its preset decides).
    pub fn choice(&self) -> headroom_plan::DeviceChoice {
        use headroom_plan::DeviceChoice;
        match self {
            TorchDevice::Cpu => DeviceChoice::Cpu,
            TorchDevice::Cuda(n) => DeviceChoice::Cuda(*n),
            TorchDevice::Board(_) => DeviceChoice::Auto,
        }
    }
}

impl std::fmt::Display for TorchDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TorchDevice::Cpu => f.write_str("cpu"),
            TorchDevice::Cuda(None) => f.write_str("cuda"),
            TorchDevice::Cuda(Some(n)) => write!(f, "cuda:{n}"),
            TorchDevice::Board(name) => f.write_str(name),
        }
    }
}

impl std::str::FromStr for TorchDevice {
    type Err = String;

    /// `cpu`, `cuda`, `cuda:N`; any other word is an old run's board preset (empty is refused).
    fn from_str(text: &str) -> std::result::Result<TorchDevice, String> {
        match text {
            "" => Err("an empty device: expected cpu, cuda or cuda:N".into()),
            "cpu" => Ok(TorchDevice::Cpu),
            "cuda" => Ok(TorchDevice::Cuda(None)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n
                    .parse()
                    .map(|n| TorchDevice::Cuda(Some(n)))
                    .map_err(|_| format!("`{other}`: expected cpu, cuda or cuda:N")),
                None => Ok(TorchDevice::Board(other.to_string())),
            },
        }
    }
}

impl Serialize for TorchDevice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TorchDevice {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<TorchDevice, D::Error> {
        String::deserialize(deserializer)?.trim().parse().map_err(serde::de::Error::custom)
    }
}

/// `memory_cap` as `config.toml` writes it (`512MiB`); a bad one names the key.
fn memory_cap<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<headroom_plan::Bytes>, D::Error> {
    let text: Option<String> = Option::deserialize(d)?;
    text.map(|t| t.parse().map_err(|e| serde::de::Error::custom(format!("memory_cap: {e}")))).transpose()
}

/// What `--plan auto` chose for the run (recorded so that a resumed run is the planned one).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanChoice {
    /// The device preset planned for.
    pub device: String,
    /// The budget, bytes.
    pub budget: u64,
    /// The rung of the fit ladder chosen.
    pub rung: headroom_plan::Rung,
    /// Its estimated peak, bytes.
    pub estimate: u64,
    /// The chosen batch and the larger ones that fit the budget too, each timed at the start of
    /// the run; the fastest per image trains (docs/PLAN.md "A larger batch when it is faster").
    /// Empty when no larger batch fits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches: Vec<BatchTiming>,
}

impl PlanChoice {
    /// Whether the run still has batches to time (it has not started training yet).
    pub fn timing_pending(&self) -> bool {
        self.batches.len() > 1
            && self.batches.iter().any(|b| b.seconds_per_image.is_none() && b.skipped.is_none())
    }
}

/// One batch `--plan auto` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchTiming {
    /// The batch.
    pub batch: usize,
    /// Its estimated peak, bytes.
    pub estimate: u64,
    /// Seconds per image of its training passes, measured (none before the measurement, or when
    /// it could not run: `skipped` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seconds_per_image: Option<f64>,
    /// Why it was not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// A larger batch trains only when it measured at least this much faster per image than the
/// planned one: two timings of the same batch on a busy machine differ by a few percent.
pub const FASTER_BY: f64 = 0.05;

/// The batch to train with: the fastest per image among `timings`, if it beats `planned`'s by
/// [`FASTER_BY`]; else `planned` (also when `planned` has no timing).
pub fn fastest_batch(timings: &[BatchTiming], planned: usize) -> usize {
    let time_of = |b: &BatchTiming| b.seconds_per_image.filter(|s| s.is_finite() && *s > 0.0);
    let Some(base) = timings.iter().find(|b| b.batch == planned).and_then(time_of) else {
        return planned;
    };
    timings
        .iter()
        .filter_map(|b| time_of(b).map(|s| (b.batch, s)))
        .filter(|&(_, s)| s <= base * (1.0 - FASTER_BY))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map_or(planned, |(batch, _)| batch)
}

/// Everything that shapes a training run (what `config.toml` holds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// The student (an Ultralytics ONNX export).
    pub model: PathBuf,
    /// The dataset's `data.yaml`.
    pub data: PathBuf,
    /// What trains (`head`, `neck+head`, `freeze=N`, `affine` in `config.toml`).
    #[serde(with = "part_text")]
    pub part: Trainable,
    /// Where libtorch trains.
    pub device: TorchDevice,
    /// Old-domain data replayed against forgetting.
    #[serde(default)]
    pub replay: Option<PathBuf>,
    /// Replayed images per new image and epoch.
    #[serde(default)]
    pub replay_fraction: f64,
    /// Dataset classes mapped onto the student's (`SRC=DST,...`).
    #[serde(default)]
    pub remap: Option<String>,
    /// What runs the frozen trunk.
    pub trunk: TrunkRuntime,
    /// Train epochs on cached trunk outputs.
    pub cache_features: bool,
    /// The memory cap of a pass above the start (`--memory-cap`).
    #[serde(default, deserialize_with = "memory_cap")]
    pub memory_cap: Option<headroom_plan::Bytes>,
    /// Passes before the memory cap is checked.
    #[serde(default)]
    pub memory_cap_after: u64,
    /// Convs at the start of the trunk re-normalised to the new images before training
    /// (`headroom_onnx::renorm`; 0: none). Needs old-domain images (`replay`).
    #[serde(default)]
    pub renorm: usize,
    /// Quantization-aware training: the Q/DQ file (`headroom export --int8`) whose Convs train
    /// fake-quantized at its activation scales (`headroom_train::fake_quant`). Needs `part = all`.
    #[serde(default)]
    pub qat: Option<PathBuf>,
    /// A teacher run on every training batch for dense distillation (`settings.dense_kd` its
    /// gain; `crate::teacher`).
    #[serde(default)]
    pub teacher: Option<PathBuf>,
    /// Stop when the val fitness has not improved for this many epochs (Ultralytics' `patience`;
    /// 0: never).
    #[serde(default)]
    pub patience: usize,
    /// Stop before an epoch that would end past this many hours of training, summed over the
    /// run's sessions (Ultralytics' `time`; 0: no limit).
    #[serde(default)]
    pub time_hours: f64,
    /// The board preset (`--board NAME`, or `auto` detected; with `--plan auto` always), with the
    /// device files then read: a resumed run uses it and needs no device file. None when no board
    /// was given (the built-in x86-cpu or gpu-8 then), and in runs saved before it was recorded
    /// (the built-in preset `device` names then).
    #[serde(default)]
    pub device_preset: Option<headroom_plan::DevicePreset>,
    /// What `--plan auto` chose, when it planned the run.
    #[serde(default)]
    pub plan: Option<PlanChoice>,
    /// The training settings (after any step down the run took).
    pub settings: TrainConfig,
}

impl RunSpec {
    /// A spec for training the head of `model` on `data` on the CPU with the default settings.
    pub fn new(model: PathBuf, data: PathBuf) -> RunSpec {
        RunSpec {
            model,
            data,
            part: Trainable::Head,
            device: TorchDevice::Cpu,
            replay: None,
            replay_fraction: 1.0,
            remap: None,
            trunk: TrunkRuntime::Ort,
            cache_features: false,
            memory_cap: None,
            memory_cap_after: 0,
            renorm: 0,
            qat: None,
            teacher: None,
            patience: 0,
            time_hours: 0.0,
            device_preset: None,
            plan: None,
            settings: TrainConfig::default(),
        }
    }

    /// The memory cap in bytes, if any.
    pub fn memory_cap_bytes(&self) -> Result<Option<u64>> {
        let Some(cap) = self.memory_cap else { return Ok(None) };
        if cap.0 < 1 << 20 {
            return Err(Error::Spec {
                key: "memory_cap".into(),
                reason: format!("{cap} is less than 1 MiB: give what a pass may take, e.g. 512MiB"),
            });
        }
        Ok(Some(cap.0))
    }

    /// Checks every setting: the training settings' bounds, the replay share, the memory
    /// cap, and that a feature cache is not asked for with augmentations that change the trunk's
    /// input. The same checks run for a new run and for a saved one.
    pub fn validate(&self) -> Result<()> {
        self.settings.validate().map_err(|e| match e {
            headroom_train::Error::Config { key, reason } => {
                Error::Spec { key: format!("settings.{key}"), reason }
            }
            other => other.into(),
        })?;
        self.memory_cap_bytes()?;
        if !(0.0..=10.0).contains(&self.replay_fraction) || !self.replay_fraction.is_finite() {
            return Err(Error::Spec {
                key: "replay_fraction".into(),
                reason: format!("{} is not in [0, 10]", self.replay_fraction),
            });
        }
        if self.renorm > 0 && self.replay.is_none() {
            return Err(Error::Spec {
                key: "renorm".into(),
                reason: "re-normalising needs old-domain images to take the statistics from: add --replay OLD.yaml"
                    .into(),
            });
        }
        if self.qat.is_some() && (self.part != Trainable::Freeze(0) || self.cache_features) {
            return Err(Error::Spec {
                key: "qat".into(),
                reason: format!(
                    "quantization-aware training fake-quantizes every Conv: it needs part = all (not {}) and no \
                     feature cache",
                    self.part
                ),
            });
        }
        if self.renorm > 64 {
            return Err(Error::Spec {
                key: "renorm".into(),
                reason: format!("{} is not in 0..=64", self.renorm),
            });
        }
        if !(self.time_hours == 0.0 || headroom_train::config::limits::hours(self.time_hours)) {
            return Err(Error::Spec {
                key: "time_hours".into(),
                reason: format!("{} is not hours in 0..=10000 (0: no limit)", self.time_hours),
            });
        }
        if matches!(&self.device, TorchDevice::Board(name) if name.trim().is_empty()) {
            return Err(Error::Spec {
                key: "device".into(),
                reason: "empty: cpu, cuda, cuda:N or a preset".into(),
            });
        }
        if self.cache_features && self.teacher.is_some() {
            return Err(Error::Spec {
                key: "cache_features".into(),
                reason: "a teacher runs on each batch's images, which cached features never make: drop \
                         --cache-features or --teacher"
                    .into(),
            });
        }
        if self.cache_features && self.settings.augment.changes_pixels() {
            return Err(Error::Spec {
                key: "cache_features".into(),
                reason: "cached features are the trunk's outputs for fixed inputs; --mosaic, --scale, --translate \
                         and --hsv change those inputs: turn them off or drop --cache-features"
                    .into(),
            });
        }
        Ok(())
    }

    /// Reads and validates the spec saved in run folder `dir`.
    pub fn load(dir: &Path) -> Result<RunSpec> {
        let path = dir.join(SPEC_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| headroom_core::Error::io(&path, e))?;
        let spec: RunSpec = toml::from_str(&text)
            .map_err(|e| Error::SavedSpec { path: path.clone(), reason: toml_error(&text, &e) })?;
        spec.validate().map_err(|e| Error::SavedSpec { path, reason: e.to_string() })?;
        Ok(spec)
    }

    /// Writes the spec to `dir`'s `config.toml` atomically.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let text = toml::to_string_pretty(self)
            .map_err(|e| Error::Spec { key: SPEC_FILE.into(), reason: e.to_string() })?;
        headroom_core::fsio::write_atomic(&dir.join(SPEC_FILE), text.as_bytes())?;
        Ok(())
    }

    /// The settings in which `other` differs from this spec, as (key, this value, other value),
    /// keys spelled as in `config.toml` (`settings.batch`, `part`, ...).
    pub fn differences(&self, other: &RunSpec) -> Vec<(String, String, String)> {
        let (a, b) = (flatten(self), flatten(other));
        let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
        keys.into_iter()
            .filter_map(|k| {
                let (x, y) = (a.get(k), b.get(k));
                (x != y).then(|| (k.clone(), shown(x), shown(y)))
            })
            .collect()
    }
}

fn shown(value: Option<&String>) -> String {
    value.cloned().unwrap_or_else(|| "nothing".into())
}

/// The spec as dotted keys → TOML text of each value.
fn flatten(spec: &RunSpec) -> BTreeMap<String, String> {
    fn walk(prefix: &str, value: &toml::Value, out: &mut BTreeMap<String, String>) {
        match value {
            toml::Value::Table(table) => {
                for (k, v) in table {
                    let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                    walk(&key, v, out);
                }
            }
            other => {
                out.insert(prefix.to_string(), other.to_string());
            }
        }
    }
    let mut out = BTreeMap::new();
    if let Ok(value) = toml::Value::try_from(spec) {
        walk("", &value, &mut out);
    }
    out
}

/// A TOML error in one line, `line 3: key with no value, expected `=``, not toml's drawing of the
/// line with a caret under the column.
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    match e.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            format!("line {line}: {message}")
        }
        None => message.to_string(),
    }
}

/// `part` saved as its text (`part = "freeze=0"`, the words a person reads), read back with
/// `Trainable`'s `FromStr`; a bad one names the key.
mod part_text {
    use headroom_onnx::Trainable;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(part: &Trainable, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(part)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Trainable, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(|e| serde::de::Error::custom(format!("part = {text:?}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RunSpec {
        RunSpec::new("m.onnx".into(), "d/data.yaml".into())
    }

    fn timing(batch: usize, seconds: Option<f64>) -> BatchTiming {
        BatchTiming { batch, estimate: batch as u64 * 100, seconds_per_image: seconds, skipped: None }
    }

    /// Quantization-aware training fake-quantizes every Conv: a frozen trunk or a feature cache is
    /// refused by name.
    #[test]
    fn qat_needs_every_layer_trained() {
        let mut qat = RunSpec { qat: Some("m.int8.onnx".into()), part: Trainable::Freeze(0), ..spec() };
        qat.validate().expect("part = all");
        qat.part = Trainable::Head;
        let err = qat.validate().expect_err("head only").to_string();
        assert!(err.contains("qat") && err.contains("part = all (not head)"), "{err}");
    }

    /// A larger batch trains only when it is at least 5 % faster per image than the planned one;
    /// the fastest of those wins; without a timing of the planned batch nothing changes.
    #[test]
    fn the_fastest_batch_must_beat_the_planned_one_by_five_percent() {
        let t = |list: &[(usize, Option<f64>)]| list.iter().map(|&(b, s)| timing(b, s)).collect::<Vec<_>>();
        assert_eq!(fastest_batch(&t(&[(2, Some(0.044)), (4, Some(0.038)), (8, Some(0.035))]), 2), 8);
        assert_eq!(fastest_batch(&t(&[(2, Some(0.044)), (4, Some(0.035)), (8, Some(0.038))]), 2), 4);
        assert_eq!(fastest_batch(&t(&[(2, Some(0.040)), (4, Some(0.0385))]), 2), 2, "4 % is noise");
        assert_eq!(fastest_batch(&t(&[(2, Some(0.040)), (4, Some(0.080))]), 2), 2, "slower on this device");
        assert_eq!(fastest_batch(&t(&[(2, None), (4, Some(0.01))]), 2), 2, "the planned batch untimed");
        assert_eq!(fastest_batch(&t(&[(2, Some(0.04)), (4, None), (8, Some(f64::NAN))]), 2), 2);
        assert_eq!(fastest_batch(&[], 2), 2);
    }

    /// The timings are part of config.toml (a resumed run trains with the batch chosen and does not
    /// time again); a plan without them (a run from before) reads back as it was.
    #[test]
    fn a_plan_keeps_its_batch_timings_and_an_older_plan_reads_without_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plan = PlanChoice {
            device: "orin-nano-8".into(),
            budget: 3 << 30,
            rung: headroom_plan::Rung::Start,
            estimate: 800,
            batches: vec![
                timing(2, Some(0.044)),
                timing(4, None),
                BatchTiming { skipped: Some("above the 3 images of an epoch".into()), ..timing(8, None) },
            ],
        };
        assert!(plan.timing_pending(), "batch 4 is not timed yet");
        let s = RunSpec { plan: Some(plan.clone()), ..spec() };
        s.save(dir.path()).expect("save");
        assert_eq!(RunSpec::load(dir.path()).expect("load"), s);
        let timed =
            PlanChoice { batches: vec![timing(2, Some(0.044)), timing(4, Some(0.03))], ..plan.clone() };
        assert!(!timed.timing_pending());
        assert!(!PlanChoice { batches: vec![timing(2, None)], ..plan.clone() }.timing_pending(), "one batch");
        let older = RunSpec { plan: Some(PlanChoice { batches: Vec::new(), ..plan }), ..spec() };
        older.save(dir.path()).expect("save");
        let text = std::fs::read_to_string(dir.path().join(SPEC_FILE)).expect("config.toml");
        assert!(!text.contains("batches"), "{text}");
        assert_eq!(RunSpec::load(dir.path()).expect("load"), older);
    }

    #[test]
    fn a_saved_spec_reads_back_equal() {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = RunSpec { memory_cap: Some(headroom_plan::Bytes(512 << 20)), ..spec() };
        s.save(dir.path()).expect("save");
        assert_eq!(RunSpec::load(dir.path()).expect("load"), s);
    }

    #[test]
    fn a_saved_preset_reads_back_and_older_specs_have_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let devices = headroom_plan::builtin_devices().expect("builtins");
        let nano = headroom_plan::find_device(&devices, "orin-nano-8").expect("preset").clone();
        let s = RunSpec { device: TorchDevice::Board("auto".into()), device_preset: Some(nano), ..spec() };
        s.save(dir.path()).expect("save");
        let text = std::fs::read_to_string(dir.path().join(SPEC_FILE)).expect("read");
        assert!(text.contains("[device_preset]") && text.contains("models = [\"Orin Nano\"]"), "{text}");
        assert_eq!(RunSpec::load(dir.path()).expect("load"), s);
        spec().save(dir.path()).expect("save");
        let text = std::fs::read_to_string(dir.path().join(SPEC_FILE)).expect("read");
        assert!(!text.contains("device_preset"), "{text}");
        assert_eq!(RunSpec::load(dir.path()).expect("load").device_preset, None);
    }

    #[test]
    fn bad_saved_values_are_refused_naming_the_key_and_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        spec().save(dir.path()).expect("save");
        let path = dir.path().join(SPEC_FILE);
        let text = std::fs::read_to_string(&path).expect("read");
        for (from, to, key) in [
            ("lr0 = 0.0001", "lr0 = -1.0", "settings.lr0"),
            ("batch = 2", "batch = 100000", "settings.batch"),
            ("part = \"head\"", "part = \"elbow\"", "part"),
        ] {
            std::fs::write(&path, text.replace(from, to)).expect("write");
            let err = RunSpec::load(dir.path()).expect_err(key).to_string();
            assert!(err.contains(key) && err.contains("config.toml"), "{key}: {err}");
        }
        std::fs::write(&path, text.replace("[settings]", "colour = 1\n[settings]")).expect("write");
        assert!(RunSpec::load(dir.path()).expect_err("unknown").to_string().contains("colour"));
    }

    #[test]
    fn a_memory_cap_must_parse_and_be_positive() {
        let s = RunSpec { memory_cap: Some(headroom_plan::Bytes(0)), ..spec() };
        assert!(s.validate().expect_err("0").to_string().contains("memory_cap"));
        let dir = tempfile::tempdir().expect("tempdir");
        spec().save(dir.path()).expect("save");
        let path = dir.path().join(SPEC_FILE);
        let text = std::fs::read_to_string(&path).expect("read");
        let edited = text.replace("[settings]", "memory_cap = \"garbage\"\n[settings]");
        std::fs::write(&path, edited).expect("write");
        let err = RunSpec::load(dir.path()).expect_err("garbage").to_string();
        assert!(err.contains("memory_cap") && err.contains("config.toml"), "{err}");
    }

    #[test]
    fn differences_name_each_changed_key() {
        let mut other = spec();
        other.part = Trainable::NeckHead;
        other.settings.batch = 1;
        let diff = spec().differences(&other);
        let keys: Vec<&str> = diff.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(keys, ["part", "settings.batch"]);
        assert_eq!(diff[0].1, "\"head\"");
        assert!(spec().differences(&spec()).is_empty());
    }

    #[test]
    fn a_device_round_trips_through_its_text_and_an_old_board_name_stays_one() {
        for text in ["cpu", "cuda", "cuda:1", "orin-nano-8", "auto"] {
            let device: TorchDevice = text.parse().expect(text);
            assert_eq!(device.to_string(), text);
        }
        assert_eq!("cuda:2".parse(), Ok(TorchDevice::Cuda(Some(2))));
        assert!(!"orin-nano-8".parse::<TorchDevice>().expect("a board").is_libtorch());
        assert!("cuda:x".parse::<TorchDevice>().is_err() && "".parse::<TorchDevice>().is_err());
        let saved = RunSpec { device: TorchDevice::Cuda(Some(1)), ..spec() };
        let text = toml::to_string(&saved).expect("toml");
        assert!(text.contains("device = \"cuda:1\""), "{text}");
        let back: RunSpec = toml::from_str(&text).expect("read back");
        assert_eq!(back.device, TorchDevice::Cuda(Some(1)));
    }
}
