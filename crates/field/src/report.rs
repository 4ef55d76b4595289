//! The gate's evaluation and the end of a run: `summary.json` and `report.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::gate::{GateReport, Scores};
use crate::state::RunState;

/// What the gate decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The candidate replaced the deployed model.
    Deployed,
    /// The deployed model stayed.
    Kept,
    /// The gate passed, but the deployed file was replaced since the run started (the service was
    /// given another model): that one stays, and this candidate is kept only in the run folder.
    Superseded,
}

impl Decision {
    /// The word the report uses.
    pub fn word(self) -> &'static str {
        match self {
            Decision::Deployed => "deployed",
            Decision::Kept => "kept",
            Decision::Superseded => "superseded",
        }
    }
}

/// A finished run's `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FieldSummary {
    /// The run's id.
    pub run: String,
    /// Deployed or kept.
    pub decision: Decision,
    /// The first condition of the gate that failed, or `every condition held`.
    pub decided_by: String,
    /// The run preset.
    pub preset: String,
    /// The board preset planned for.
    pub board: String,
    /// Where the steps ran.
    pub device: String,
    /// The holdout's mAP50-95 of both models.
    pub map50_95: HoldoutMap,
    /// The paired bootstrap's interval of the gain (candidate − deployed).
    pub gain_interval: [f64; 2],
    /// The old scenes' scores, when the run had old scenes.
    pub old_scenes: Option<Scores>,
    /// The deployed model (after the run).
    pub deployed: PathBuf,
    /// The precision this run deploys (`--deploy`); the gate compared at it. FP32 in summaries
    /// written before `--deploy`.
    #[serde(default = "fp32")]
    pub precision: crate::served::Precision,
    /// The file deployed when the gate passes (the trained model, or its FP16 or INT8 export).
    #[serde(default)]
    pub deploy_file: PathBuf,
    /// The engine beside the deployed model after the run, when there is one.
    #[serde(default)]
    pub engine: Option<PathBuf>,
    /// Its sha256.
    pub deployed_sha256: String,
    /// The model it replaced, when the candidate was deployed.
    pub previous: Option<PathBuf>,
    /// The run's trained model.
    pub candidate: PathBuf,
    /// The exported files by precision (`fp32`, `fp16`, `int8`).
    pub artefacts: BTreeMap<String, PathBuf>,
    /// The TensorRT calibration cache, when one was written.
    pub calibration_cache: Option<PathBuf>,
    /// The engines built, when trtexec was found.
    pub engines: Option<Vec<headroom_export::EngineRow>>,
    /// What the label step did.
    pub labelled: Labelled,
    /// The gate's report.
    pub gate: PathBuf,
    /// What training's plan chose for the board (`train/config.toml`'s `[plan]`: the budget, the
    /// rung, its estimate, the batches timed); none when the preset trains as given
    /// (`plan = "off"`).
    pub plan: Option<headroom_run::spec::PlanChoice>,
    /// Seconds each step took (to a tenth).
    pub step_seconds: BTreeMap<String, f64>,
}

/// The holdout's mAP50-95 of both models.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct HoldoutMap {
    /// The candidate's.
    pub candidate: f64,
    /// The deployed model's, before the run.
    pub deployed_before: f64,
}

/// What the label step did (absent figures: its report was not readable).
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Labelled {
    /// Images in the labelled set.
    pub images: Option<usize>,
    /// Images labelled by this run.
    pub labelled_now: Option<usize>,
    /// Images an earlier run had labelled.
    pub already_labelled: Option<usize>,
    /// Images left out because they are images of the holdout or the old scenes (by content).
    #[serde(default)]
    pub excluded: Option<usize>,
}

fn fp32() -> crate::served::Precision {
    crate::served::Precision::Fp32
}

/// Writes `summary.json` and `report.md`, marks the run finished, and says what happened.
/// `deployed`: the deployed path and the precision the run deploys.
pub fn finish(
    state: &mut RunState,
    run: &Path,
    (deployed, precision): (&Path, crate::served::Precision),
    gate: &GateReport,
    preset: &str,
) -> crate::Result<FieldSummary> {
    fn read<T: serde::de::DeserializeOwned>(path: PathBuf) -> Option<T> {
        std::fs::read_to_string(path).ok().and_then(|t| serde_json::from_str(&t).ok())
    }
    // `headroom export --json`'s report and `headroom label --json`'s (its manifest).
    let export: Option<headroom_export::ExportReport> = read(run.join("export.json"));
    let label: Option<headroom_infer::label::LabelManifest> = read(run.join("label.json"));
    let counts = label.as_ref().map(|l| &l.counts);
    let candidate = run.join("train/best.onnx");
    let deploy_file = crate::state::deploy_candidate(run, precision);
    let deployed_sha256 = headroom_core::hash::sha256_file(deployed)?;
    // Read from the files, not kept from the deploy step: a rerun after a kill between the two
    // comes to the same decision.
    let decision = if !gate.deploy {
        Decision::Kept
    } else if headroom_core::hash::sha256_file(&deploy_file)? == deployed_sha256 {
        Decision::Deployed
    } else {
        Decision::Superseded
    };
    let (artefacts, engines) = match export {
        Some(export) => (export.files.into_iter().map(|f| (f.precision, f.path)).collect(), export.engines),
        None => (BTreeMap::new(), None),
    };
    let summary = FieldSummary {
        run: state.id.clone(),
        decision,
        decided_by: gate.decided_by.clone(),
        preset: preset.to_string(),
        board: state.settings.board.clone(),
        device: state.settings.runs_on.clone(),
        map50_95: HoldoutMap { candidate: gate.holdout.candidate, deployed_before: gate.holdout.deployed },
        gain_interval: [gate.bootstrap.low, gate.bootstrap.high],
        old_scenes: gate.old.clone(),
        deployed: deployed.to_path_buf(),
        precision,
        deploy_file,
        engine: Some(crate::deployment::engine_path(deployed)).filter(|e| e.is_file()),
        deployed_sha256,
        previous: (decision == Decision::Deployed).then(|| crate::deploy::previous_path(deployed)),
        candidate,
        artefacts,
        calibration_cache: Some(run.join("export/best.int8.calib")).filter(|p| p.is_file()),
        engines,
        labelled: Labelled {
            images: counts.map(|c| c.images),
            labelled_now: counts.map(|c| c.labelled),
            already_labelled: counts.map(|c| c.already_done),
            excluded: counts.map(|c| c.excluded),
        },
        gate: run.join("gate.json"),
        plan: headroom_run::spec::RunSpec::load(&run.join("train")).ok().and_then(|spec| spec.plan),
        step_seconds: state.seconds.iter().map(|(s, t)| (s.to_string(), (t * 10.0).round() / 10.0)).collect(),
    };
    let text = serde_json::to_string_pretty(&summary)? + "\n";
    headroom_core::fsio::write_atomic(&run.join("summary.json"), text.as_bytes())?;
    headroom_core::fsio::write_atomic(
        &run.join("report.md"),
        markdown(state, gate, decision.word(), deployed, &summary.labelled).as_bytes(),
    )?;
    // What this run was gated on: a night with nothing new after it trains no more.
    if let Some(work) = run.parent() {
        crate::quiet::record(work, &state.id)?;
    }
    state.finished = true;
    state.save(run)?;
    eprintln!(
        "{}: candidate mAP50-95 {:.3} vs deployed {:.3} ({}); report {}",
        decision.word(),
        gate.holdout.candidate,
        gate.holdout.deployed,
        gate.decided_by,
        run.join("report.md").display()
    );
    Ok(summary)
}

fn markdown(
    state: &RunState,
    gate: &GateReport,
    decision: &str,
    deployed: &Path,
    labelled: &Labelled,
) -> String {
    let mut md = format!(
        "# Field run {}\n\n**{decision}** ({}): `{}`\n\n| condition | held | figures |\n|---|---|---|\n",
        state.id,
        gate.decided_by,
        deployed.display()
    );
    if let Some(c) = &gate.compared {
        md = md.replacen(
            "\n\n| condition",
            &format!(
                "\n\nCompared at {}: `{}` against `{}`.{}\n\n| condition",
                c.precision,
                c.candidate.display(),
                c.deployed.display(),
                c.note.as_ref().map(|n| format!(" {n}.")).unwrap_or_default()
            ),
            1,
        );
    }
    for c in &gate.conditions {
        md += &format!("| {} | {} | {} |\n", c.name, if c.passed { "yes" } else { "**no**" }, c.detail);
    }
    if let (Some(images), Some(now)) = (labelled.images, labelled.labelled_now) {
        md += &format!("\nLabelled set: {images} images, {now} labelled tonight");
        match labelled.excluded {
            Some(n) if n > 0 => {
                md +=
                    &format!("; {n} left out: the bytes of holdout or old-scene images (never trained on).\n")
            }
            _ => md += ".\n",
        }
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
