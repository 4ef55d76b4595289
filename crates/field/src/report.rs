//! The gate's evaluation and the end of a run: `summary.json` and `report.md`.

use std::path::Path;

use anyhow::Context as _;
use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
use headroom_infer::provider::SessionOptions;

use super::gate::{self, GateReport, Pair};
use super::state::RunState;
use crate::cmd::preset::GateSettings;

/// The candidate and the deployed model (in a run: `<run>/train/best.onnx` and the model as the run
/// found it, `<run>/base.onnx`) on the holdout and the old scenes, and the gate's decision.
pub fn evaluate_gate(
    candidate: &Path,
    base: &Path,
    holdout: &Path,
    old: Option<&Path>,
    names: &[String],
    settings: &GateSettings,
    session: &SessionOptions,
) -> anyhow::Result<GateReport> {
    // Each model is opened once and evaluated on every set.
    let sets: Vec<(&Path, &str)> =
        std::iter::once((holdout, "--holdout")).chain(old.map(|o| (o, "--old"))).collect();
    let splits = sets
        .iter()
        .map(|(data, flag)| labelled_split(&DataConfig::load(data)?, flag))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut reports: Vec<Vec<headroom_infer::eval::EvalReport>> = vec![Vec::new(); 2];
    for (m, model) in [candidate, base].into_iter().enumerate() {
        let mut detector = headroom_infer::detector::Detector::open(model, session)?;
        for ((data, flag), split) in sets.iter().zip(&splits) {
            let report = headroom_infer::eval::evaluate(
                &mut detector,
                &split.images,
                names,
                &headroom_infer::decode::DecodeOptions::val(),
                headroom_core::preprocess::Preprocess::Val,
                |_| {},
            )
            .with_context(|| format!("evaluating {} on {flag} {}", model.display(), data.display()))?;
            reports[m].push(report);
        }
    }
    let (hc, hb) = (&reports[0][0], &reports[1][0]);
    let difference = gate::bootstrap(&hc.stats, &hb.stats, names.len(), settings)?;
    let without_labels = |set: usize| splits[set].report.labels_missing;
    let holdout_pair = Pair {
        data: holdout,
        candidate: &hc.metrics,
        deployed: &hb.metrics,
        without_labels: without_labels(0),
    };
    let old_pair = old.map(|data| Pair {
        data,
        candidate: &reports[0][1].metrics,
        deployed: &reports[1][1].metrics,
        without_labels: without_labels(1),
    });
    Ok(gate::decide(settings, &holdout_pair, difference, old_pair.as_ref(), names))
}

/// The val split of a gate set, refused when no image of it has a label file; images without one
/// are warned about, with their count.
pub fn check_labelled(
    config: &DataConfig,
    flag: &str,
) -> anyhow::Result<headroom_core::dataset::LoadedSplit> {
    let split = labelled_split(config, flag)?;
    let missing = split.report.labels_missing;
    if missing > 0 {
        tracing::warn!(
            "{flag} {}: {missing} of the {} images of its val split have no label file; each counts as \
             background (an image with no objects), so every detection on it is a false positive: give \
             each a label file (an empty one for an image that has no objects)",
            config.file.display(),
            split.report.images_listed
        );
    }
    Ok(split)
}

/// The val split of a gate set, refused when no image of it has a label file.
fn labelled_split(config: &DataConfig, flag: &str) -> anyhow::Result<headroom_core::dataset::LoadedSplit> {
    let data = &config.file;
    let split = load_split(config, Split::Val, LoadOptions { strict: false })
        .with_context(|| format!("{flag} {}", data.display()))?;
    anyhow::ensure!(
        split.report.labels_found > 0,
        "{flag} {}: no image of its val split has a label file: the gate needs labelled images",
        data.display()
    );
    Ok(split)
}

/// Writes `summary.json` and `report.md`, marks the run finished, and says what happened.
pub fn finish(
    state: &mut RunState,
    run: &Path,
    deployed: &Path,
    gate: &GateReport,
    preset: &str,
) -> anyhow::Result<serde_json::Value> {
    let read_json = |name: &str| -> serde_json::Value {
        std::fs::read_to_string(run.join(name))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    };
    let export = read_json("export.json");
    let artefacts: serde_json::Map<String, serde_json::Value> = export["files"]
        .as_array()
        .map(|files| {
            files
                .iter()
                .filter_map(|f| Some((f["precision"].as_str()?.to_string(), f["path"].clone())))
                .collect()
        })
        .unwrap_or_default();
    let label = read_json("label.json");
    let decision = if gate.deploy { "deployed" } else { "kept" };
    let deployed_sha = super::deploy::sha256_file(deployed)?;
    let summary = serde_json::json!({
        "run": state.id,
        "decision": decision,
        "decided_by": gate.decided_by,
        "preset": preset,
        "board": state.settings.board,
        "device": state.settings.runs_on,
        "map50_95": { "candidate": gate.holdout.candidate, "deployed_before": gate.holdout.deployed },
        "gain_interval": [gate.bootstrap.low, gate.bootstrap.high],
        "old_scenes": gate.old,
        "deployed": deployed,
        "deployed_sha256": deployed_sha,
        "previous": gate.deploy.then(|| super::deploy::previous_path(deployed)),
        "candidate": run.join("train/best.onnx"),
        "artefacts": artefacts,
        "calibration_cache": Some(run.join("export/best.int8.calib")).filter(|p| p.is_file()),
        "engines": export["engines"],
        "labelled": { "images": label["counts"]["images"], "labelled_now": label["counts"]["labelled"],
                      "already_labelled": label["counts"]["already_done"] },
        "gate": run.join("gate.json"),
        "plan": run.join("plan.json"),
        "step_seconds": state.seconds.iter().map(|(s, t)| (s.clone(), serde_json::json!((t * 10.0).round() / 10.0))).collect::<serde_json::Map<_, _>>(),
    });
    let text = serde_json::to_string_pretty(&summary)? + "\n";
    headroom_core::fsio::write_atomic(&run.join("summary.json"), text.as_bytes())?;
    headroom_core::fsio::write_atomic(
        &run.join("report.md"),
        markdown(state, gate, decision, deployed).as_bytes(),
    )?;
    state.finished = true;
    state.save(run)?;
    eprintln!(
        "{decision}: candidate mAP50-95 {:.3} vs deployed {:.3} ({}); report {}",
        gate.holdout.candidate,
        gate.holdout.deployed,
        gate.decided_by,
        run.join("report.md").display()
    );
    Ok(summary)
}

fn markdown(state: &RunState, gate: &GateReport, decision: &str, deployed: &Path) -> String {
    let mut md = format!(
        "# Field run {}\n\n**{decision}** ({}): `{}`\n\n| condition | held | figures |\n|---|---|---|\n",
        state.id,
        gate.decided_by,
        deployed.display()
    );
    for c in &gate.conditions {
        md += &format!("| {} | {} | {} |\n", c.name, if c.passed { "yes" } else { "**no**" }, c.detail);
    }
    md += "\n| set | images | without label file (background) | candidate mAP50-95 | deployed mAP50-95 |\n\
           |---|---|---|---|---|\n";
    for (name, s) in [("holdout", Some(&gate.holdout)), ("old scenes", gate.old.as_ref())] {
        if let Some(s) = s {
            md += &format!(
                "| {name} (`{}`) | {} | {} | {:.4} | {:.4} |\n",
                s.data, s.images, s.without_labels, s.candidate, s.deployed
            );
        }
    }
    md += &format!(
        "\nSettings: preset `{}`, board `{}`, device `{}`, teacher `{}`, images `{}`.\n\nStep times (s): {}\n",
        state.settings.preset,
        state.settings.board,
        state.settings.runs_on,
        state.settings.teacher.display(),
        state.settings.images.display(),
        state.seconds.iter().map(|(s, t)| format!("{s} {t:.1}")).collect::<Vec<_>>().join(", ")
    );
    md
}
