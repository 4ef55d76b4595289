//! The deploy gate: the candidate and the deployed model on the holdout (which picked nothing: the
//! training run chose its epoch on its own val split) and on the old scenes; deploy only when the
//! gain on the holdout is above its noise (a paired bootstrap over its images) and neither the old
//! scenes nor any class lost more than the preset allows. The report says which condition decided.

use std::path::Path;

use headroom_core::metrics::Metrics;
use headroom_core::metrics::bootstrap::{BootstrapOptions, PairedDifference, paired_map_difference};
use serde::{Deserialize, Serialize};

use crate::{Context as _, bail, ensure};
use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};

/// One condition of the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Condition {
    /// `gain`, `old-scenes` or `class <name>`.
    pub name: String,
    /// Whether it holds.
    pub passed: bool,
    /// The figures and the threshold, in words.
    pub detail: String,
}

/// Scores of the two models on one set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// The data.yaml evaluated (its val split).
    pub data: String,
    /// Images evaluated.
    pub images: usize,
    /// Of them, images without a label file: each counts as background (no objects). Absent from
    /// gate reports written before it was counted.
    #[serde(default)]
    pub without_labels: usize,
    /// The candidate's mAP50-95.
    pub candidate: f64,
    /// The deployed model's mAP50-95.
    pub deployed: f64,
}

/// What the gate saw and decided.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GateReport {
    /// Deploy the candidate.
    pub deploy: bool,
    /// The first condition that failed, or `every condition held`.
    pub decided_by: String,
    /// Every condition, in the order checked.
    pub conditions: Vec<Condition>,
    /// The holdout's scores.
    pub holdout: Scores,
    /// The paired bootstrap of the holdout's mAP50-95 difference (candidate − deployed).
    pub bootstrap: PairedDifference,
    /// The old scenes' scores, with `--old`.
    pub old: Option<Scores>,
    /// The settings applied.
    pub settings: GateSettings,
    /// The two files compared, at which precision (`field run`; absent from `field gate` before it
    /// checks precisions, and from reports written before `--deploy`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compared: Option<Compared>,
}

/// The two files a gate compared: the one to deploy and the one serving, at one precision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    /// The precision of both.
    pub precision: crate::served::Precision,
    /// The file that is deployed when the gate passes.
    pub candidate: std::path::PathBuf,
    /// The serving model at that precision: the served file, or its source's export.
    pub deployed: std::path::PathBuf,
    /// What the gate compared instead of the served file itself, when it did.
    pub note: Option<String>,
}

/// The report as `headroom field gate` prints it: each condition, the images without labels, the
/// decision.
impl std::fmt::Display for GateReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for c in &self.conditions {
            writeln!(f, "{:<4} {:<16} {}", if c.passed { "ok" } else { "FAIL" }, c.name, c.detail)?;
        }
        if let Some(c) = &self.compared {
            writeln!(
                f,
                "compared at {}: {} vs {}",
                c.precision,
                c.candidate.display(),
                c.deployed.display()
            )?;
        }
        for (name, s) in [("holdout", Some(&self.holdout)), ("old scenes", self.old.as_ref())] {
            if let Some(s) = s.filter(|s| s.without_labels > 0) {
                writeln!(
                    f,
                    "{name}: {} of {} images without a label file (background)",
                    s.without_labels, s.images
                )?;
            }
        }
        writeln!(f, "{}: {}", if self.deploy { "deploy" } else { "keep" }, self.decided_by)
    }
}

/// One set evaluated with both models.
pub struct Pair<'a> {
    /// The data.yaml.
    pub data: &'a Path,
    /// The candidate's metrics.
    pub candidate: &'a Metrics,
    /// The deployed model's metrics.
    pub deployed: &'a Metrics,
    /// Images of the set without a label file (background).
    pub without_labels: usize,
}

impl Pair<'_> {
    fn scores(&self) -> Scores {
        Scores {
            data: self.data.display().to_string(),
            images: self.candidate.images,
            without_labels: self.without_labels,
            candidate: self.candidate.map50_95,
            deployed: self.deployed.map50_95,
        }
    }
}

/// The bootstrap of the holdout's difference.
pub fn bootstrap(
    candidate: &headroom_core::metrics::DetectionStats,
    deployed: &headroom_core::metrics::DetectionStats,
    nc: usize,
    settings: &GateSettings,
) -> crate::Result<PairedDifference> {
    let options = BootstrapOptions {
        resamples: settings.resamples,
        confidence: settings.confidence,
        seed: settings.seed,
    };
    Ok(paired_map_difference(candidate, deployed, nc, &options)?)
}

/// Decides. `names`: class names, for the per-class conditions.
pub fn decide(
    settings: &GateSettings,
    holdout: &Pair<'_>,
    difference: PairedDifference,
    old: Option<&Pair<'_>>,
    names: &[String],
) -> GateReport {
    let points = |v: f64| v * 100.0;
    let mut conditions = Vec::new();
    let gain = points(difference.difference);
    let pct = (settings.confidence * 100.0).round();
    conditions.push(Condition {
        name: "gain".into(),
        passed: points(difference.low) >= settings.min_gain,
        detail: format!(
            "holdout mAP50-95 {:.1} vs {:.1}: {gain:+.2} points ({pct}% interval {:+.2} .. {:+.2} over {} images); \
             the interval's lower end must be >= {:+.2}",
            points(holdout.candidate.map50_95),
            points(holdout.deployed.map50_95),
            points(difference.low),
            points(difference.high),
            difference.images,
            settings.min_gain
        ),
    });
    if let Some(old) = old {
        let change = points(old.candidate.map50_95 - old.deployed.map50_95);
        conditions.push(Condition {
            name: "old-scenes".into(),
            passed: change >= -settings.old_tolerance,
            detail: format!(
                "old-scene mAP50-95 {:.1} vs {:.1}: {change:+.2} points; allowed >= {:+.2}",
                points(old.candidate.map50_95),
                points(old.deployed.map50_95),
                -settings.old_tolerance
            ),
        });
    }
    for before in &holdout.deployed.per_class {
        let after =
            holdout.candidate.per_class.iter().find(|c| c.class == before.class).map_or(0.0, |c| c.ap50_95);
        let change = points(after - before.ap50_95);
        let name = names.get(before.class).cloned().unwrap_or_else(|| before.class.to_string());
        conditions.push(Condition {
            name: format!("class {name}"),
            passed: change >= -settings.class_tolerance,
            detail: format!(
                "AP50-95 of `{name}` {:.1} vs {:.1}: {change:+.2} points; allowed >= {:+.2}",
                points(after),
                points(before.ap50_95),
                -settings.class_tolerance
            ),
        });
    }
    let failed = conditions.iter().find(|c| !c.passed);
    GateReport {
        deploy: failed.is_none(),
        decided_by: failed.map_or_else(|| "every condition held".to_string(), |c| c.name.clone()),
        holdout: holdout.scores(),
        bootstrap: difference,
        old: old.map(Pair::scores),
        settings: settings.clone(),
        conditions,
        compared: None,
    }
}

pub use headroom_run::preset::GateSettings;

/// The candidate and the deployed model (in a run: `<run>/train/best.onnx` and the model as the run
/// found it, `<run>/base.onnx`) on the holdout and the old scenes, and the gate's decision.
#[cfg(feature = "onnxruntime")]
pub fn evaluate_gate(
    candidate: &Path,
    base: &Path,
    holdout: &Path,
    old: Option<&Path>,
    names: &[String],
    settings: &GateSettings,
    session: &headroom_infer::provider::SessionOptions,
) -> crate::Result<GateReport> {
    // Each model is opened once and evaluated on every set.
    let sets: Vec<(&Path, &str)> =
        std::iter::once((holdout, "--holdout")).chain(old.map(|o| (o, "--old"))).collect();
    let splits = sets
        .iter()
        .map(|(data, flag)| labelled_split(&DataConfig::load(data)?, flag))
        .collect::<crate::Result<Vec<_>>>()?;
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
    let difference = bootstrap(&hc.stats, &hb.stats, names.len(), settings)?;
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
    Ok(decide(settings, &holdout_pair, difference, old_pair.as_ref(), names))
}

/// The val split of a gate set, refused when no image of it has a label file; images without one
/// are warned about, with their count.
pub fn check_labelled(config: &DataConfig, flag: &str) -> crate::Result<headroom_core::dataset::LoadedSplit> {
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
fn labelled_split(config: &DataConfig, flag: &str) -> crate::Result<headroom_core::dataset::LoadedSplit> {
    let data = &config.file;
    let split = load_split(config, Split::Val, LoadOptions { strict: false })
        .with_context(|| format!("{flag} {}", data.display()))?;
    let report = &split.report;
    if report.labels_found == 0 && !report.skipped.is_empty() && split.images.is_empty() {
        // Not a question of label files: the images themselves cannot be used (empty files, a copy
        // cut short, not images).
        bail!(
            "{flag} {}: none of the {} images of its val split can be used ({} skipped; the first: {}): \
             the gate needs readable, labelled images",
            data.display(),
            report.images_listed,
            report.skipped.len(),
            report.skipped[0]
        );
    }
    ensure!(
        report.labels_found > 0,
        "{flag} {}: no image of its val split has a label file: the gate needs labelled images",
        data.display()
    );
    Ok(split)
}

#[cfg(test)]
mod tests {
    use headroom_core::metrics::ClassMetrics;

    use super::*;

    fn metrics(map: f64, classes: &[f64]) -> Metrics {
        Metrics {
            images: 10,
            instances: 20,
            precision: 0.5,
            recall: 0.5,
            map50: map,
            map50_95: map,
            fitness: map,
            per_class: classes
                .iter()
                .enumerate()
                .map(|(class, &ap)| ClassMetrics {
                    class,
                    images: 5,
                    instances: 10,
                    precision: 0.5,
                    recall: 0.5,
                    ap50: ap,
                    ap50_95: ap,
                })
                .collect(),
        }
    }

    fn difference(d: f64, low: f64, high: f64) -> PairedDifference {
        PairedDifference { difference: d, low, high, resamples: 100, confidence: 0.95, seed: 0, images: 10 }
    }

    #[test]
    fn each_condition_can_decide() {
        let settings = GateSettings::default();
        let names = vec!["a".to_string(), "b".to_string()];
        let data = Path::new("h.yaml");
        let (base, better) = (metrics(0.30, &[0.3, 0.3]), metrics(0.35, &[0.36, 0.34]));
        let holdout = Pair { data, candidate: &better, deployed: &base, without_labels: 0 };
        let report = decide(&settings, &holdout, difference(0.05, 0.02, 0.08), None, &names);
        assert!(report.deploy, "{report:?}");
        assert_eq!(report.decided_by, "every condition held");

        // Within the noise: the interval reaches below zero.
        let report = decide(&settings, &holdout, difference(0.05, -0.01, 0.08), None, &names);
        assert_eq!((report.deploy, report.decided_by.as_str()), (false, "gain"));

        // The old scenes lost 2 points (1 allowed).
        let (old_base, old_worse) = (metrics(0.60, &[]), metrics(0.58, &[]));
        let old = Pair { data, candidate: &old_worse, deployed: &old_base, without_labels: 0 };
        let report = decide(&settings, &holdout, difference(0.05, 0.02, 0.08), Some(&old), &names);
        assert_eq!((report.deploy, report.decided_by.as_str()), (false, "old-scenes"));

        // One class lost 6 points (5 allowed) while the mean rose.
        let lopsided = metrics(0.35, &[0.46, 0.24]);
        let holdout = Pair { data, candidate: &lopsided, deployed: &base, without_labels: 0 };
        let report = decide(&settings, &holdout, difference(0.05, 0.02, 0.08), None, &names);
        assert_eq!((report.deploy, report.decided_by.as_str()), (false, "class b"));
        assert!(report.conditions.iter().any(|c| c.detail.contains("-6.00 points")), "{report:?}");
    }
}
