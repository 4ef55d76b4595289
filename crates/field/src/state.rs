//! The field run's folder: `<work>/run` holds the unfinished run (its `state.json` lists the steps
//! done and the settings it started with), `<work>/history/<id>` the finished ones,
//! `<work>/labelled` the pseudo-labelled images of every night (each image labelled once per
//! content), `<work>/lock` the lock of one run at a time.

use std::path::{Path, PathBuf};

use crate::Context as _;
use crate::served::Precision;
use crate::step::Step;
use serde::{Deserialize, Serialize};

/// What the run started with: a rerun with other settings is refused (the run would mix them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSettings {
    /// The new images.
    pub images: PathBuf,
    /// The teacher.
    pub teacher: PathBuf,
    /// The holdout data.yaml.
    pub holdout: PathBuf,
    /// The old-scene data.yaml.
    pub old: Option<PathBuf>,
    /// The preset's name (or file).
    pub preset: String,
    /// The preset's contents, as resolved.
    pub preset_toml: String,
    /// The board preset planned for (`--board`, or the one `auto` detected). State files written
    /// before `--board` existed call it `device`.
    #[serde(alias = "device")]
    pub board: String,
    /// Where the steps run (`--device`: cpu, cuda, cuda:N, auto); `auto` in older state files,
    /// which had no such flag.
    #[serde(default = "auto")]
    pub runs_on: String,
    /// `--reserve`.
    pub reserve: headroom_plan::Bytes,
    /// What the command line asked of the training over the preset (`--epochs`, `--train`,
    /// `--time`). State files from before requests kept the flags (`[]` when none: read as nothing
    /// asked; flags are refused, and the run is set aside).
    #[serde(deserialize_with = "overrides")]
    pub overrides: headroom_run::request::RunRequest,
    /// The deployed model the run is for (`--model`, absolute): a run never continues for another
    /// model. Empty in state files from before it was recorded (taken as this run's model).
    #[serde(default)]
    pub model: PathBuf,
    /// The precision deployed (`--deploy`). Absent from state files from before it was asked
    /// (taken as this run's).
    #[serde(default)]
    pub deploy: Option<Precision>,
}

/// [`RunSettings::overrides`]: a request, or an earlier headroom's empty list of flags.
fn overrides<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<headroom_run::request::RunRequest, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        // First: a list of strings would also read as a request's fields in order.
        Flags(Vec<String>),
        Request(Box<headroom_run::request::RunRequest>),
    }
    match Written::deserialize(deserializer)? {
        Written::Request(request) => Ok(*request),
        Written::Flags(flags) if flags.is_empty() => Ok(headroom_run::request::RunRequest::default()),
        Written::Flags(flags) => Err(serde::de::Error::custom(format!(
            "overrides: the flags `{}`, as an earlier headroom kept them (this one keeps a request)",
            flags.join(" ")
        ))),
    }
}

fn auto() -> String {
    "auto".into()
}

fn fp32() -> Precision {
    Precision::Fp32
}

/// The FP32 model a run trains from: `<run>/source.onnx` when the deployed file is an FP16 or INT8
/// export (the state folder's copy of the model it came from), else `<run>/base.onnx` itself.
pub fn source_model(run: &Path) -> PathBuf {
    let source = run.join("source.onnx");
    if source.is_file() { source } else { run.join("base.onnx") }
}

/// The file a run deploys at `precision`: the trained model, or its export.
pub fn deploy_candidate(run: &Path, precision: Precision) -> PathBuf {
    precision.export_of(&run.join("train/best.onnx"), &run.join("export"))
}

/// `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    /// The run's id (UTC start time).
    pub id: String,
    /// SHA-256 of the deployed model when the run started (`base.onnx`).
    pub base_sha256: String,
    /// The precision of the deployed model when the run started; FP32 in state files from before
    /// it was recorded (the loop deployed FP32 only then).
    #[serde(default = "fp32")]
    pub serving: Precision,
    /// The settings.
    pub settings: RunSettings,
    /// Steps finished, in order.
    pub done: Vec<Step>,
    /// Seconds each step took (summed over invocations).
    #[serde(default)]
    pub seconds: Vec<(Step, f64)>,
    /// Whether the run ended (summary written).
    #[serde(default)]
    pub finished: bool,
    /// The last step that failed, with its error and how many starts in a row it failed so.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// The run's place in the order runs began in this state folder (1, 2, …; 0 for a run from
    /// before it was counted). The history is pruned by it: a clock that was once wrong makes
    /// wrong ids, never a wrong order.
    #[serde(default)]
    pub seq: u64,
}

/// A state written when a `plan` step ran before training: the step is gone (training plans), so
/// it leaves the steps done, their seconds and a failure of it behind.
fn forget_the_plan_step(state: &mut serde_json::Value) {
    let plan = serde_json::Value::from("plan");
    if let Some(done) = state.get_mut("done").and_then(serde_json::Value::as_array_mut) {
        done.retain(|step| *step != plan);
    }
    if let Some(seconds) = state.get_mut("seconds").and_then(serde_json::Value::as_array_mut) {
        seconds.retain(|pair| pair.get(0) != Some(&plan));
    }
    if state.get("failure").and_then(|f| f.get("step")) == Some(&plan)
        && let Some(object) = state.as_object_mut()
    {
        object.remove("failure");
    }
}

/// The file in the state folder counting the runs begun there ([`RunState::seq`]).
const SEQUENCE: &str = "sequence";

/// The next run's [`RunState::seq`], counted in `<work>/sequence` (written before the run exists:
/// a kill between the two skips a number, never reuses one).
fn next_seq(work: &Path) -> crate::Result<u64> {
    let path = work.join(SEQUENCE);
    let last = match std::fs::read_to_string(&path) {
        Ok(text) => text.trim().parse::<u64>().unwrap_or_else(|e| {
            tracing::warn!("{}: damaged ({e}); counting runs again from the history", path.display());
            0
        }),
        Err(_) => 0,
    };
    // Never below a run already in the history (the file lost or damaged).
    let seen = crate::disk::history_seqs(&work.join("history")).into_iter().max().unwrap_or(0);
    let next = last.max(seen) + 1;
    headroom_core::fsio::write_atomic(&path, format!("{next}\n").as_bytes())?;
    Ok(next)
}

/// A step that failed: the same step failing with the same error [`MAX_TRIES`] starts in a row sets
/// the run aside (`history/<id>-failed`) so that the next start begins a fresh one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    /// The step.
    pub step: Step,
    /// Its error (the last line a child step printed as `error:`, else ours).
    pub error: String,
    /// Starts in a row that failed with this step and error.
    pub tries: u32,
    /// When it last failed (UTC).
    pub at: String,
}

/// Starts in a row a step may fail with the same error before its run is set aside.
pub const MAX_TRIES: u32 = 2;

impl RunState {
    /// Reads `<run>/state.json`.
    pub fn load(run: &Path) -> crate::Result<RunState> {
        let path = run.join("state.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut value: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a field run's state", path.display()))?;
        forget_the_plan_step(&mut value);
        serde_json::from_value(value).with_context(|| format!("{}: not a field run's state", path.display()))
    }

    /// Writes `<run>/state.json` atomically.
    pub fn save(&self, run: &Path) -> crate::Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        headroom_core::fsio::write_atomic(&run.join("state.json"), text.as_bytes())?;
        Ok(())
    }

    /// Whether `step` is done.
    pub fn is_done(&self, step: Step) -> bool {
        self.done.contains(&step)
    }

    /// Marks `step` done after `seconds`, durably.
    pub fn mark(&mut self, run: &Path, step: Step, seconds: f64) -> crate::Result<()> {
        self.done.push(step);
        self.add_time(step, seconds);
        self.save(run)
    }

    /// Records that `step` failed with `error`; returns the starts in a row it failed so.
    pub fn record_failure(&mut self, run: &Path, step: Step, error: &str) -> crate::Result<u32> {
        let tries = match &self.failure {
            Some(f) if f.step == step && f.error == error => f.tries + 1,
            _ => 1,
        };
        self.failure = Some(Failure { step, error: error.into(), tries, at: headroom_core::fsio::utc_now() });
        self.save(run)?;
        Ok(tries)
    }

    /// Adds time to `step` (also for a step that does not finish in this invocation).
    pub fn add_time(&mut self, step: Step, seconds: f64) {
        match self.seconds.iter_mut().find(|(s, _)| *s == step) {
            Some((_, t)) => *t += seconds,
            None => self.seconds.push((step, seconds)),
        }
    }
}

/// The current UTC time as `YYYYMMDDTHHMMSSZ`.
pub fn utc_id() -> String {
    // `2026-12-02 06:30:00 UTC` → `20261202T063000Z`
    let text = headroom_core::fsio::utc_now();
    let digits: String = text.chars().filter(char::is_ascii_digit).collect();
    format!("{}T{}Z", &digits[..8], &digits[8..14])
}

/// The unfinished run, or a new one. A finished run is archived to `history/<id>`; an unfinished
/// one is set aside whole, never continued, when it was started with other settings or for another
/// model (`-abandoned`), when the deployed model was replaced since it started (`-superseded`),
/// when a step failed [`MAX_TRIES`] starts in a row with the same error (`-failed`), and when its
/// state file is damaged (`<now>-damaged`). A run folder without a state (killed while being
/// created) is removed and made again. `history/` then keeps its newest `keep_runs` runs.
pub fn open_run(
    work: &Path,
    deployed: &Path,
    settings: &RunSettings,
    keep_runs: usize,
) -> crate::Result<(PathBuf, RunState, bool)> {
    let run = work.join("run");
    if run.join("state.json").is_file() {
        match RunState::load(&run) {
            Err(e) => {
                let to = set_aside(work, &run, &format!("{}-damaged", utc_id()))?;
                tracing::warn!(
                    "{}: the unfinished run's state is damaged; it is kept in {} and a new run starts",
                    e.chain(),
                    to.display()
                );
            }
            Ok(mut state) => {
                if state.settings.model.as_os_str().is_empty() {
                    state.settings.model = settings.model.clone();
                }
                if state.settings.deploy.is_none() {
                    state.settings.deploy = settings.deploy;
                }
                let Some((suffix, why)) = why_not_continue(&state, settings, deployed, &run)? else {
                    return Ok((run, state, true));
                };
                let to = set_aside(work, &run, &format!("{}{suffix}", state.id))?;
                if !why.is_empty() {
                    tracing::warn!(
                        "the unfinished run {} {why}: it is kept in {} and a new run starts",
                        state.id,
                        to.display()
                    );
                }
            }
        }
    } else if run.exists() {
        std::fs::remove_dir_all(&run).with_context(|| format!("removing the unstarted {}", run.display()))?;
    }
    crate::disk::prune_history(&work.join("history"), keep_runs)?;
    let fresh = work.join("run.new");
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh).with_context(|| format!("removing {}", fresh.display()))?;
    }
    std::fs::create_dir_all(&fresh).with_context(|| format!("creating {}", fresh.display()))?;
    let bytes = std::fs::read(deployed).with_context(|| format!("reading {}", deployed.display()))?;
    let base = fresh.join("base.onnx");
    headroom_core::fsio::write_atomic(&base, &bytes)?;
    let base_sha256 = headroom_core::hash::sha256_hex(&bytes);
    // A served FP16 or INT8 file trains from the FP32 model it came from, copied into the run.
    let serving = Precision::of_model(&base)
        .with_context(|| format!("reading the deployed model {}", deployed.display()))?;
    if serving != Precision::Fp32 {
        let source = crate::served::source_of(deployed, serving, &base_sha256, work)?;
        crate::served::check_source(&base, &source)?;
        let source_bytes = std::fs::read(&source).with_context(|| format!("reading {}", source.display()))?;
        headroom_core::fsio::write_atomic(&fresh.join("source.onnx"), &source_bytes)?;
    }
    let state = RunState {
        id: utc_id(),
        base_sha256,
        serving,
        settings: settings.clone(),
        done: Vec::new(),
        seconds: Vec::new(),
        finished: false,
        failure: None,
        seq: next_seq(work)?,
    };
    state.save(&fresh)?;
    std::fs::rename(&fresh, &run)
        .with_context(|| format!("renaming {} to {}", fresh.display(), run.display()))?;
    Ok((run, state, false))
}

/// Why the run in `run` must not be continued: the suffix of its name in `history/` and the reason
/// (empty for a finished run, archived as it is).
fn why_not_continue(
    state: &RunState,
    settings: &RunSettings,
    deployed: &Path,
    run: &Path,
) -> crate::Result<Option<(&'static str, String)>> {
    if state.finished {
        return Ok(Some(("", String::new())));
    }
    if state.settings.model != settings.model {
        return Ok(Some((
            "-abandoned",
            format!(
                "is for {}, not for --model {}",
                state.settings.model.display(),
                settings.model.display()
            ),
        )));
    }
    if &state.settings != settings {
        // Never mix two settings in one run.
        let changed = differences(&state.settings, settings);
        return Ok(Some(("-abandoned", format!("was started with other settings ({changed})"))));
    }
    if let Some(f) = state.failure.as_ref().filter(|f| f.tries >= MAX_TRIES) {
        return Ok(Some((
            "-failed",
            format!("failed at step {} {} starts in a row ({})", f.step, f.tries, f.error),
        )));
    }
    // The service was given another model since: a run from the old one must not replace it.
    let current = headroom_core::hash::sha256_file(deployed)?;
    let candidate = deploy_candidate(run, state.settings.deploy.unwrap_or(Precision::Fp32));
    if current != state.base_sha256
        && (!candidate.is_file() || headroom_core::hash::sha256_file(&candidate)? != current)
    {
        return Ok(Some((
            "-superseded",
            format!(
                "started from sha256 {} and {} is now sha256 {current} (replaced since)",
                state.base_sha256,
                deployed.display()
            ),
        )));
    }
    Ok(None)
}

/// Whether `work` holds a run a start would go on with or set aside: a state that is not finished,
/// or one that does not load.
pub fn has_unfinished_run(work: &Path) -> bool {
    let run = work.join("run");
    run.join("state.json").is_file() && !RunState::load(&run).is_ok_and(|state| state.finished)
}

/// Moves the run folder `run` to `history/<name>` (`<name>.2`, … when taken); returns where.
pub fn set_aside(work: &Path, run: &Path, name: &str) -> crate::Result<PathBuf> {
    let history = work.join("history");
    std::fs::create_dir_all(&history).with_context(|| format!("creating {}", history.display()))?;
    let mut to = history.join(name);
    let mut n = 1;
    while to.exists() {
        n += 1;
        to = history.join(format!("{name}.{n}"));
    }
    std::fs::rename(run, &to)
        .with_context(|| format!("moving the run {} to {}", run.display(), to.display()))?;
    Ok(to)
}

fn differences(saved: &RunSettings, now: &RunSettings) -> String {
    let (a, b) =
        (serde_json::to_value(saved).unwrap_or_default(), serde_json::to_value(now).unwrap_or_default());
    let mut out = Vec::new();
    if let (Some(a), Some(b)) = (a.as_object(), b.as_object()) {
        for (key, was) in a {
            let is = b.get(key).cloned().unwrap_or_default();
            if *was != is {
                out.push(match key.as_str() {
                    "preset_toml" => "the preset's contents changed".to_string(),
                    _ => format!("{key} was {was}, now {is}"),
                });
            }
        }
    }
    out.join("; ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_state_file_from_before_board_loads() {
        let old = r#"{"images": "/i", "teacher": "/t.onnx", "holdout": "/h.yaml", "old": null,
            "preset": "field-quick", "preset_toml": "", "device": "orin-nx-8", "reserve": "0",
            "overrides": []}"#;
        let settings: super::RunSettings = serde_json::from_str(old).expect("old state");
        assert_eq!((settings.board.as_str(), settings.runs_on.as_str()), ("orin-nx-8", "auto"));
        assert_eq!(settings.overrides, headroom_run::request::RunRequest::default());
        // Flags kept by an earlier headroom: refused, naming them (the run is set aside).
        let flags = old.replace("\"overrides\": []", "\"overrides\": [\"--epochs\", \"3\"]");
        let err = serde_json::from_str::<super::RunSettings>(&flags).expect_err("flags").to_string();
        assert!(err.contains("--epochs 3") && err.contains("earlier headroom"), "{err}");
        let request = old.replace("\"overrides\": []", "\"overrides\": {\"epochs\": 3}");
        let settings: super::RunSettings = serde_json::from_str(&request).expect("a request");
        assert_eq!(settings.overrides.epochs, Some(3));
    }

    #[test]
    fn utc_id_is_a_timestamp() {
        let id = super::utc_id();
        assert_eq!(id.len(), 16, "{id}");
        assert!(id.starts_with("20") && id.ends_with('Z') && id.as_bytes()[8] == b'T', "{id}");
    }
}
