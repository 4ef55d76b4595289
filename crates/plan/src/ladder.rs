//! The fit ladder: from the configuration asked for, one rung at a time, cheapest accuracy cost
//! first — batch down (accumulation keeps the nominal batch) → checkpointing → AMP (GPU) → freeze
//! more (all → neck+head → head) → feature cache → imgsz down (multiples of the stride) → advise a
//! smaller student. The first candidate whose estimate fits the budget is chosen.

use std::fmt;
use std::str::FromStr;

use headroom_onnx::Trainable;
use serde::Serialize;

use crate::Error;
use crate::memory::{Estimate, Planner, Setup};

/// What one rung of the ladder changes, written as `plan` prints it and `config.toml` records it
/// (`start`, `batch 4`, `checkpoint`, `amp`, `train head`, `cache`, `imgsz 512`; Display and FromStr
/// round-trip).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rung {
    /// The configuration asked for.
    Start,
    /// The batch halved to this (accumulation keeps the nominal batch).
    Batch(usize),
    /// Gradient checkpointing on.
    Checkpoint,
    /// Mixed precision on (a GPU's rung).
    Amp,
    /// A coarser part trained.
    Train(Trainable),
    /// The frozen trunk's outputs cached.
    Cache,
    /// A smaller input size.
    Imgsz(u32),
}

impl fmt::Display for Rung {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` honours the caller's width and alignment (`{:<16}` in plan's table).
        let text = match self {
            Rung::Start => "start".to_owned(),
            Rung::Batch(b) => format!("batch {b}"),
            Rung::Checkpoint => "checkpoint".to_owned(),
            Rung::Amp => "amp".to_owned(),
            Rung::Train(t) => format!("train {t}"),
            Rung::Cache => "cache".to_owned(),
            Rung::Imgsz(s) => format!("imgsz {s}"),
        };
        f.pad(&text)
    }
}

impl FromStr for Rung {
    type Err = String;

    fn from_str(text: &str) -> Result<Rung, String> {
        let wrong = || {
            format!(
                "`{text}` is not a rung of the fit ladder (start, batch N, checkpoint, amp, train PART, cache, imgsz N)"
            )
        };
        Ok(match text.split_once(' ') {
            None => match text {
                "start" => Rung::Start,
                "checkpoint" => Rung::Checkpoint,
                "amp" => Rung::Amp,
                "cache" => Rung::Cache,
                _ => return Err(wrong()),
            },
            Some(("batch", n)) => Rung::Batch(n.parse().map_err(|_| wrong())?),
            Some(("train", part)) => Rung::Train(part.parse().map_err(|_| wrong())?),
            Some(("imgsz", n)) => Rung::Imgsz(n.parse().map_err(|_| wrong())?),
            Some(_) => return Err(wrong()),
        })
    }
}

impl Serialize for Rung {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Rung {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Rung, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The accuracy risk of what the ladder changed, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Risk {
    /// Changes the time, not the result.
    None,
    /// Measured small.
    Low,
    /// Trains less of the model.
    Medium,
    /// A smaller input: small objects suffer.
    High,
}

impl fmt::Display for Risk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Risk::None => "none",
            Risk::Low => "low",
            Risk::Medium => "medium",
            Risk::High => "high",
        })
    }
}

/// One configuration of the ladder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// What this rung changed.
    pub rung: Rung,
    /// The estimate.
    pub estimate: Estimate,
    /// Whether the peak fits the budget.
    pub fits: bool,
    /// Expected time per epoch relative to the first candidate (rough: see [`rung_cost`]).
    pub time: f64,
    /// Expected accuracy risk of everything changed so far.
    pub risk: Risk,
}

/// The ladder's outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Bytes available to training.
    pub budget: u64,
    /// Every rung, in ladder order.
    pub candidates: Vec<Candidate>,
    /// Index of the chosen candidate (the first that fits), if any.
    pub chosen: Option<usize>,
    /// The smallest estimated peak of any candidate: the least budget that would fit one.
    pub minimum: u64,
    /// Runtime and weights alone (the least any training of this model needs).
    pub floor: u64,
    /// Advice when nothing fits (a smaller student, ...).
    pub advice: Option<String>,
}

/// Time factor and accuracy risk of one rung (rough, from docs/BENCHMARKS.md where measured):
/// halving the batch ×1.1 (less parallel work per pass, same images per step), checkpointing ×1.35
/// (measured 1.36 on YOLOv8n), AMP ×0.6 on a GPU, freezing more ×0.7, the feature cache ×0.3
/// (the trunk no longer runs), imgsz down by its pixel ratio.
pub fn rung_cost(rung: Rung) -> (f64, Risk) {
    match rung {
        Rung::Start => (1.0, Risk::None),
        Rung::Batch(_) => (1.1, Risk::None),
        Rung::Checkpoint => (1.35, Risk::None),
        Rung::Amp => (0.6, Risk::Low),
        Rung::Train(_) => (0.7, Risk::Medium),
        Rung::Cache => (0.3, Risk::Low),
        Rung::Imgsz(_) => (0.65, Risk::High),
    }
}

/// Coarser trainable parts than `t`, in order (… → neck+head → head): those that freeze more
/// modules than `t` does.
fn freeze_more(planner: &Planner<'_>, t: Trainable) -> Vec<Trainable> {
    let now = planner.freeze_index(t).unwrap_or(0);
    [Trainable::NeckHead, Trainable::Head]
        .into_iter()
        .filter(|c| planner.freeze_index(*c).is_some_and(|f| f > now))
        .collect()
}

/// Input sizes below `imgsz` to try: about 80 % each step, multiples of `stride`, down to `4·stride`.
fn smaller_sizes(imgsz: [u32; 2], stride: u32) -> Vec<[u32; 2]> {
    let mut sizes = Vec::new();
    let mut s = imgsz;
    loop {
        let next = s.map(|v| ((v as f64 * 0.8) as u32 / stride).max(4) * stride);
        if next == s || next[0] < 4 * stride {
            break;
        }
        sizes.push(next);
        s = next;
    }
    sizes
}

/// Runs the ladder from `start` against `budget` bytes. `gpu`: whether AMP is a rung.
/// The start's own settings are respected as floors: a rung never raises the batch, turns
/// checkpointing off, or trains more.
pub fn plan(planner: &mut Planner<'_>, start: &Setup, budget: u64, gpu: bool) -> Result<Plan, Error> {
    let limit = planner.batch_limit(start.trainable, start.imgsz)?;
    let start = &Setup { batch: start.batch.min(limit), ..start.clone() };
    let first = planner.estimate(start)?;
    let floor = first.components.runtime + first.components.weights;
    let mut candidates = vec![Candidate {
        rung: Rung::Start,
        fits: first.peak <= budget,
        estimate: first,
        time: 1.0,
        risk: Risk::None,
    }];
    let mut s = start.clone();
    let mut push = |rung: Rung, s: &Setup, planner: &mut Planner<'_>| -> Result<(), Error> {
        let Some(last) = candidates.last() else { return Ok(()) };
        let (factor, risk) = rung_cost(rung);
        let (time, risk) = (last.time * factor, last.risk.max(risk));
        let estimate = planner.estimate(s)?;
        candidates.push(Candidate { rung, fits: estimate.peak <= budget, estimate, time, risk });
        Ok(())
    };
    while s.batch > 1 {
        s.batch = s.batch.div_ceil(2).max(1);
        push(Rung::Batch(s.batch), &s, planner)?;
    }
    if !s.checkpoint {
        s.checkpoint = true;
        push(Rung::Checkpoint, &s, planner)?;
    }
    if gpu && !s.amp {
        s.amp = true;
        push(Rung::Amp, &s, planner)?;
    }
    for t in freeze_more(planner, s.trainable) {
        s.trainable = t;
        push(Rung::Train(t), &s, planner)?;
    }
    // The cache stores the trunk's outputs of fixed inputs: not for augmented pixels, nor for a
    // teacher that runs on each batch.
    if !s.cache_features && !s.augment && s.teacher.is_none() {
        s.cache_features = true;
        push(Rung::Cache, &s, planner)?;
    }
    if planner.fixed_size().is_none() {
        for size in smaller_sizes(s.imgsz, planner.stride()) {
            s.imgsz = size;
            push(Rung::Imgsz(size[0]), &s, planner)?;
        }
    }
    let chosen = candidates.iter().position(|c| c.fits);
    let minimum = candidates.iter().map(|c| c.estimate.peak).min().unwrap_or(0);
    let advice = chosen.is_none().then(|| {
        if budget < floor {
            format!(
                "the runtime and the model's weights alone need {}: this budget cannot hold any training of \
                 this model",
                crate::format_size(floor)
            )
        } else {
            format!(
                "no rung fits: the smallest needs {}; free memory (stop other processes, lower --reserve), or \
                 train a smaller student (fewer channels, e.g. a yolov8n instead of a yolov8s)",
                crate::format_size(minimum)
            )
        }
    });
    Ok(Plan { budget, candidates, chosen, minimum, floor, advice })
}

/// Largest batch [`larger_batches`] offers to measure: Ultralytics' default batch. A larger one
/// would make the measurement itself cost more than it can save on a field retrain's few hundred
/// images.
pub const MAX_MEASURED_BATCH: usize = 16;

/// Batches above `setup.batch` that a run could train with instead, for `--plan auto` to measure
/// (docs/PLAN.md "A larger batch when it is faster"): `setup.batch` doubled while it stays within
/// the nominal batch `nbs` (accumulation then keeps the optimiser steps: `nbs / batch` passes
/// each), [`MAX_MEASURED_BATCH`] and the export's own limit, and while the estimate fits
/// `budget`; each with its estimate. Empty when nothing larger fits. (The measurement drops a
/// batch above the images of an epoch.)
pub fn larger_batches(
    planner: &mut Planner<'_>,
    setup: &Setup,
    nbs: usize,
    budget: u64,
) -> Result<Vec<Estimate>, Error> {
    let limit = planner.batch_limit(setup.trainable, setup.imgsz)?.min(nbs).min(MAX_MEASURED_BATCH);
    let mut found = Vec::new();
    let mut batch = setup.batch.max(1) * 2;
    while batch <= limit {
        let estimate = planner.estimate(&Setup { batch, ..setup.clone() })?;
        if estimate.peak > budget {
            break;
        }
        found.push(estimate);
        batch *= 2;
    }
    Ok(found)
}

/// The next rung down that a running training can take without rebuilding its model: halve the
/// batch (accumulation keeps the nominal batch), then checkpointing, then AMP on a GPU. `None`
/// when none is left (freezing more or a smaller input needs a new run: `headroom plan` says which).
pub fn step_down(batch: usize, checkpoint: bool, amp: bool, gpu: bool) -> Option<(Rung, usize, bool, bool)> {
    if batch > 1 {
        let b = batch / 2;
        return Some((Rung::Batch(b), b, checkpoint, amp));
    }
    if !checkpoint {
        return Some((Rung::Checkpoint, batch, true, amp));
    }
    if gpu && !amp {
        return Some((Rung::Amp, batch, checkpoint, true));
    }
    None
}

/// The ladder as `headroom plan` prints it: the board and budget, a row per rung, the chosen (or
/// smallest) rung's memory by component and by op, and the `headroom train` flags of the chosen one.
pub fn table(
    model: &std::path::Path,
    (device, runs_on): (&crate::DevicePreset, crate::RunsOn),
    budget: &crate::Budget,
    plan: &Plan,
) -> String {
    use std::fmt::Write as _;
    let file_name = |path: &std::path::Path| {
        path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
    };
    let mib = |bytes: u64| format!("{:.0}", bytes as f64 / f64::from(1u32 << 20));
    let format_size = crate::format_size;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {} ({}{}), training on {runs_on}: budget {} ({})",
        file_name(model),
        device.name,
        device.description,
        if device.unified { ", unified memory" } else { "" },
        format_size(plan.budget),
        budget.source
    );
    let _ = writeln!(
        s,
        "{:<16} {:>5} {:<10} {:<5} {:<4} {:<5} {:>5} {:>10} {:<4} {:>5} {:<6}",
        "rung", "batch", "train", "ckpt", "amp", "cache", "imgsz", "peak", "fits", "time", "risk"
    );
    let yes = |b: bool| if b { "yes" } else { "no" };
    for (i, c) in plan.candidates.iter().enumerate() {
        let e = &c.estimate;
        let _ = writeln!(
            s,
            "{:<16} {:>5} {:<10} {:<5} {:<4} {:<5} {:>5} {:>10} {:<4} {:>5.2} {:<6}{}",
            c.rung,
            e.setup.batch,
            e.setup.trainable.to_string().replace("freeze=0", "all"),
            yes(e.setup.checkpoint),
            yes(e.setup.amp),
            yes(e.setup.cache_features),
            e.setup.imgsz[0],
            format_size(e.peak),
            yes(c.fits),
            c.time,
            c.risk,
            if plan.chosen == Some(i) { "  <- chosen" } else { "" }
        );
    }
    let shown = plan.chosen.unwrap_or(plan.candidates.len().saturating_sub(1));
    if let Some(c) = plan.candidates.get(shown) {
        let parts: Vec<String> = c
            .estimate
            .components
            .at_peak()
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(n, v)| format!("{n} {}", mib(*v)))
            .collect();
        let _ = writeln!(
            s,
            "{} `{}`, peak by component (MiB): {}",
            if plan.chosen.is_some() { "chosen" } else { "smallest" },
            c.rung,
            parts.join(", ")
        );
        let by_op: Vec<String> =
            c.estimate.saved_by_op.iter().take(6).map(|(op, v)| format!("{op} {}", mib(*v))).collect();
        if !by_op.is_empty() {
            let _ = writeln!(s, "kept for backward by op (plain backward, MiB): {}", by_op.join(", "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_run_rungs_go_batch_then_checkpoint_then_amp() {
        assert_eq!(step_down(4, false, false, false).map(|r| r.1), Some(2));
        assert_eq!(step_down(1, false, false, false).map(|r| r.2), Some(true));
        assert_eq!(step_down(1, true, false, false), None);
        assert_eq!(step_down(1, true, false, true).map(|r| r.0), Some(Rung::Amp));
    }

    #[test]
    fn rungs_round_trip_through_their_text_and_risks_order() {
        for rung in [
            Rung::Start,
            Rung::Batch(4),
            Rung::Checkpoint,
            Rung::Amp,
            Rung::Train(Trainable::NeckHead),
            Rung::Train(Trainable::Freeze(10)),
            Rung::Cache,
            Rung::Imgsz(512),
        ] {
            assert_eq!(rung.to_string().parse::<Rung>(), Ok(rung), "{rung}");
        }
        assert_eq!(Rung::Batch(4).to_string(), "batch 4");
        assert_eq!(Rung::Train(Trainable::Head).to_string(), "train head");
        for bad in ["", "batch", "batch x", "stairs 3", "train elbow", "imgsz 5 5"] {
            assert!(bad.parse::<Rung>().is_err(), "{bad}");
        }
        assert!(Risk::None < Risk::Low && Risk::Low < Risk::Medium && Risk::Medium < Risk::High);
        assert_eq!(serde_json::to_value(Risk::Medium).expect("json"), "medium");
        assert_eq!(serde_json::to_value(Rung::Imgsz(320)).expect("json"), "imgsz 320");
    }

    #[test]
    fn smaller_sizes_are_stride_multiples() {
        let sizes = smaller_sizes([640, 640], 32);
        assert_eq!(sizes.first(), Some(&[512, 512]));
        assert!(sizes.iter().all(|s| s[0] % 32 == 0 && s[0] >= 128));
    }
}
