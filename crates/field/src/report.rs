//! The gate's evaluation and the end of a run: `summary.json` and `report.md`.

use std::path::Path;

use crate::gate::GateReport;
use crate::state::RunState;

/// Writes `summary.json` and `report.md`, marks the run finished, and says what happened.
pub fn finish(
    state: &mut RunState,
    run: &Path,
    deployed: &Path,
    gate: &GateReport,
    preset: &str,
) -> crate::Result<serde_json::Value> {
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
    // `headroom label --json`'s report is its manifest.
    let label: Option<headroom_infer::label::LabelManifest> =
        std::fs::read_to_string(run.join("label.json")).ok().and_then(|t| serde_json::from_str(&t).ok());
    let counts = label.as_ref().map(|l| &l.counts);
    let decision = if gate.deploy { "deployed" } else { "kept" };
    let deployed_sha = headroom_core::hash::sha256_file(deployed)?;
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
        "previous": gate.deploy.then(|| crate::deploy::previous_path(deployed)),
        "candidate": run.join("train/best.onnx"),
        "artefacts": artefacts,
        "calibration_cache": Some(run.join("export/best.int8.calib")).filter(|p| p.is_file()),
        "engines": export["engines"],
        "labelled": { "images": counts.map(|c| c.images), "labelled_now": counts.map(|c| c.labelled),
                      "already_labelled": counts.map(|c| c.already_done) },
        "gate": run.join("gate.json"),
        "plan": run.join("plan.json"),
        "step_seconds": state.seconds.iter().map(|(s, t)| (s.to_string(), serde_json::json!((t * 10.0).round() / 10.0))).collect::<serde_json::Map<_, _>>(),
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
