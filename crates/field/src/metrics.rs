//! The night's outcome for a fleet (`headroom field run --metrics FILE`): Prometheus' text exposition
//! format, as node_exporter's textfile collector reads it (`--collector.textfile.directory`). One
//! file per deployed model (every sample carries `model="<path>"`), written atomically at the end
//! of every night — deployed, kept, superseded, quiet, failed or stopped — so the collector never
//! reads half a file.

use std::fmt::Write as _;
use std::path::Path;

use crate::quiet::Look;
use crate::report::FieldSummary;

/// How the night ended, with what it has to say.
#[derive(Debug)]
pub enum Night<'a> {
    /// Every step ran; the summary (and the run folder, for training's peak memory).
    Finished(&'a FieldSummary, &'a Path),
    /// Nothing new to train on.
    Quiet(&'a Look),
    /// A step or a setting failed.
    Failed,
    /// A signal stopped it (the next start continues).
    Stopped,
    /// Another field command held the lock.
    Busy,
}

impl Night<'_> {
    fn decision(&self) -> &'static str {
        match self {
            Night::Finished(summary, _) => summary.decision.word(),
            Night::Quiet(_) => "nothing_new",
            Night::Failed => "failed",
            Night::Stopped => "stopped",
            Night::Busy => "busy",
        }
    }
}

/// Every decision a night can end with (each a sample: 1 for tonight's, 0 for the others, so a
/// query never meets a missing series).
const DECISIONS: [&str; 7] = ["deployed", "kept", "superseded", "nothing_new", "failed", "stopped", "busy"];

/// Writes the metrics of a night of the loop for `deployed` (its state folder `work`) to `file`,
/// atomically.
pub fn write(
    file: &Path,
    deployed: &Path,
    work: &Path,
    night: &Night<'_>,
    exit_code: i32,
) -> crate::Result<()> {
    let text = render(deployed, work, night, exit_code, std::time::SystemTime::now());
    headroom_core::fsio::write_atomic(file, text.as_bytes())?;
    Ok(())
}

/// A label value as the exposition format writes it: `\`, `"` and line feeds escaped.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The samples of one metric family.
struct Family<'a> {
    out: &'a mut String,
    name: &'static str,
    model: String,
}

impl Family<'_> {
    fn sample(&mut self, labels: &[(&str, &str)], value: f64) {
        let mut all = format!("model=\"{}\"", self.model);
        for (key, val) in labels {
            let _ = write!(all, ",{key}=\"{}\"", escape(val));
        }
        let _ = writeln!(self.out, "{}{{{all}}} {}", self.name, number(value));
    }
}

/// A sample value: integers without a fraction, `NaN` and the infinities as the format spells them.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{value}")
    }
}

fn family<'a>(out: &'a mut String, model: &str, name: &'static str, help: &str) -> Family<'a> {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
    Family { out, name, model: escape(model) }
}

fn render(
    deployed: &Path,
    work: &Path,
    night: &Night<'_>,
    exit_code: i32,
    now: std::time::SystemTime,
) -> String {
    let model = deployed.display().to_string();
    let mut out = String::new();
    let unix =
        |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    family(
        &mut out,
        &model,
        "headroom_field_last_night_timestamp_seconds",
        "When the last night of the loop ended (Unix time).",
    )
    .sample(&[], unix(now).floor());
    family(
        &mut out,
        &model,
        "headroom_field_exit_code",
        "The exit status of the last night (0: it ended well).",
    )
    .sample(&[], f64::from(exit_code));
    let tonight = night.decision();
    let mut decisions = family(
        &mut out,
        &model,
        "headroom_field_decision",
        "The last night's decision: 1 for the one taken.",
    );
    for decision in DECISIONS {
        decisions.sample(&[("decision", decision)], if decision == tonight { 1.0 } else { 0.0 });
    }
    match night {
        Night::Finished(summary, run) => finished(&mut out, &model, summary, run),
        Night::Quiet(look) => {
            let mut images = family(
                &mut out,
                &model,
                "headroom_field_images",
                "Images in the folder of new images, by kind.",
            );
            for (kind, n) in
                [("listed", look.images), ("new", look.new), ("seen", look.seen), ("fresh", look.fresh)]
            {
                images.sample(&[("kind", kind)], n as f64);
            }
        }
        Night::Failed | Night::Stopped | Night::Busy => {}
    }
    family(
        &mut out,
        &model,
        "headroom_field_state_bytes",
        "Bytes the loop's state folder holds (labelled set, runs, history).",
    )
    .sample(&[], folder_bytes(work) as f64);
    if let Ok(bytes) = std::fs::read(deployed) {
        let sha = headroom_core::hash::sha256_hex(&bytes);
        family(
            &mut out,
            &model,
            "headroom_field_deployed_model_info",
            "The deployed model: its sha256 as a label.",
        )
        .sample(&[("sha256", &sha)], 1.0);
        if let Ok(modified) = std::fs::metadata(deployed).and_then(|m| m.modified()) {
            let age = now.duration_since(modified).map_or(0.0, |d| d.as_secs_f64()).floor();
            family(
                &mut out,
                &model,
                "headroom_field_deployed_model_age_seconds",
                "Seconds since the deployed file last changed.",
            )
            .sample(&[], age);
        }
    }
    out
}

fn finished(out: &mut String, model: &str, summary: &FieldSummary, run: &Path) {
    let mut holdout = family(
        out,
        model,
        "headroom_field_holdout_map50_95",
        "mAP50-95 on the holdout, of the candidate and the deployed model.",
    );
    holdout.sample(&[("which", "candidate")], summary.map50_95.candidate);
    holdout.sample(&[("which", "deployed")], summary.map50_95.deployed_before);
    let mut gain = family(
        out,
        model,
        "headroom_field_gain_map50_95",
        "The candidate's gain on the holdout (candidate - deployed), and its bootstrap interval.",
    );
    gain.sample(&[("bound", "point")], summary.map50_95.candidate - summary.map50_95.deployed_before);
    gain.sample(&[("bound", "low")], summary.gain_interval[0]);
    gain.sample(&[("bound", "high")], summary.gain_interval[1]);
    if let Some(old) = &summary.old_scenes {
        family(
            out,
            model,
            "headroom_field_old_scenes_change_map50_95",
            "The candidate's mAP50-95 change on the old scenes.",
        )
        .sample(&[], old.candidate - old.deployed);
    }
    let mut images =
        family(out, model, "headroom_field_images", "Images in the folder of new images, by kind.");
    for (kind, n) in [("listed", summary.labelled.images), ("labelled_now", summary.labelled.labelled_now)] {
        if let Some(n) = n {
            images.sample(&[("kind", kind)], n as f64);
        }
    }
    let mut steps = family(out, model, "headroom_field_step_seconds", "Seconds each step of the night took.");
    for (step, seconds) in &summary.step_seconds {
        steps.sample(&[("step", step)], *seconds);
    }
    let results: Option<serde_json::Value> = std::fs::read_to_string(run.join("train/results.json"))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    if let Some(peak) = results.as_ref().and_then(|r| r["peak_mb"].as_f64()) {
        family(
            out,
            model,
            "headroom_field_train_peak_memory_bytes",
            "Training's peak memory (as the planner counts it).",
        )
        .sample(&[], (peak * 1_048_576.0).round());
    }
}

/// The bytes of the regular files under `folder` (links not followed).
fn folder_bytes(folder: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(folder) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => folder_bytes(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::{Night, escape, render};

    #[test]
    fn a_quiet_night_renders_every_decision_and_escapes_the_model_label() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deployed = dir.path().join("odd \"name\"\\.onnx");
        std::fs::write(&deployed, b"model").expect("write");
        let look = crate::quiet::Look { images: 3, new: 0, seen: 3, fresh: 0, unreadable: 0, since: None };
        let text = render(&deployed, dir.path(), &Night::Quiet(&look), 0, std::time::SystemTime::now());
        let model = escape(&deployed.display().to_string());
        assert!(model.contains("\\\"name\\\"\\\\"), "{model}");
        assert!(
            text.contains(&format!(
                "headroom_field_decision{{model=\"{model}\",decision=\"nothing_new\"}} 1\n"
            )),
            "{text}"
        );
        assert!(
            text.contains(&format!("headroom_field_decision{{model=\"{model}\",decision=\"deployed\"}} 0\n"))
        );
        assert!(text.contains(&format!("headroom_field_images{{model=\"{model}\",kind=\"seen\"}} 3\n")));
        assert!(text.contains("headroom_field_deployed_model_info{") && text.contains("sha256=\""));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().expect("a value");
            assert!(value.parse::<f64>().is_ok() || ["NaN", "+Inf", "-Inf"].contains(&value), "{line}");
        }
    }
}
