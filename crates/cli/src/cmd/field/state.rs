//! The field run's folder: `<work>/run` holds the unfinished run (its `state.json` lists the steps
//! done and the settings it started with), `<work>/history/<id>` the finished ones,
//! `<work>/labelled` the pseudo-labelled images of every night (each image labelled once per
//! content), `<work>/lock` the lock of one run at a time.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
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
    pub reserve: String,
    /// `--epochs` / `--train` given on the command line.
    pub overrides: Vec<String>,
}

fn auto() -> String {
    "auto".into()
}

/// `state.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    /// The run's id (UTC start time).
    pub id: String,
    /// SHA-256 of the deployed model when the run started (`base.onnx`).
    pub base_sha256: String,
    /// The settings.
    pub settings: RunSettings,
    /// Steps finished, in order.
    pub done: Vec<String>,
    /// Seconds each step took (summed over invocations).
    #[serde(default)]
    pub seconds: Vec<(String, f64)>,
    /// Whether the run ended (summary written).
    #[serde(default)]
    pub finished: bool,
}

impl RunState {
    /// Reads `<run>/state.json`.
    pub fn load(run: &Path) -> anyhow::Result<RunState> {
        let path = run.join("state.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{}: not a field run's state", path.display()))
    }

    /// Writes `<run>/state.json` atomically.
    pub fn save(&self, run: &Path) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(self)? + "\n";
        headroom_core::fsio::write_atomic(&run.join("state.json"), text.as_bytes())?;
        Ok(())
    }

    /// Whether `step` is done.
    pub fn is_done(&self, step: &str) -> bool {
        self.done.iter().any(|s| s == step)
    }

    /// Marks `step` done after `seconds`, durably.
    pub fn mark(&mut self, run: &Path, step: &str, seconds: f64) -> anyhow::Result<()> {
        self.done.push(step.to_string());
        self.add_time(step, seconds);
        self.save(run)
    }

    /// Adds time to `step` (also for a step that does not finish in this invocation).
    pub fn add_time(&mut self, step: &str, seconds: f64) {
        match self.seconds.iter_mut().find(|(s, _)| s == step) {
            Some((_, t)) => *t += seconds,
            None => self.seconds.push((step.to_string(), seconds)),
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

/// The unfinished run, or a new one: a finished run is archived to `history/<id>`, an unfinished one
/// started with other settings to `history/<id>-abandoned`. A run folder without a state (killed
/// while being created) is removed and made again.
pub fn open_run(
    work: &Path,
    deployed: &Path,
    settings: &RunSettings,
) -> anyhow::Result<(PathBuf, RunState, bool)> {
    let run = work.join("run");
    if run.join("state.json").is_file() {
        let state = RunState::load(&run)?;
        if !state.finished && &state.settings == settings {
            return Ok((run, state, true));
        }
        let mut name = state.id.clone();
        if !state.finished {
            // Never mix two settings in one run: the unfinished one is set aside, whole.
            name.push_str("-abandoned");
            tracing::warn!(
                "the unfinished run {} was started with other settings ({}): it is kept in history/{name} \
                 and a new run starts",
                state.id,
                differences(&state.settings, settings)
            );
        }
        let history = work.join("history");
        std::fs::create_dir_all(&history).with_context(|| format!("creating {}", history.display()))?;
        let to = history.join(&name);
        std::fs::rename(&run, &to)
            .with_context(|| format!("archiving the run {} to {}", run.display(), to.display()))?;
    } else if run.exists() {
        std::fs::remove_dir_all(&run).with_context(|| format!("removing the unstarted {}", run.display()))?;
    }
    let fresh = work.join("run.new");
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh).with_context(|| format!("removing {}", fresh.display()))?;
    }
    std::fs::create_dir_all(&fresh).with_context(|| format!("creating {}", fresh.display()))?;
    let bytes = std::fs::read(deployed).with_context(|| format!("reading {}", deployed.display()))?;
    headroom_core::fsio::write_atomic(&fresh.join("base.onnx"), &bytes)?;
    let state = RunState {
        id: utc_id(),
        base_sha256: headroom_infer::label::output::sha256_hex(&bytes),
        settings: settings.clone(),
        done: Vec::new(),
        seconds: Vec::new(),
        finished: false,
    };
    state.save(&fresh)?;
    std::fs::rename(&fresh, &run)
        .with_context(|| format!("renaming {} to {}", fresh.display(), run.display()))?;
    Ok((run, state, false))
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
    }

    #[test]
    fn utc_id_is_a_timestamp() {
        let id = super::utc_id();
        assert_eq!(id.len(), 16, "{id}");
        assert!(id.starts_with("20") && id.ends_with('Z') && id.as_bytes()[8] == b'T', "{id}");
    }
}
