//! The epochs of a run: each trained (its optimiser steps, the steps down memory forced, the stop
//! request), its averaged weights written back into the ONNX file (`last.onnx`), validated in ONNX
//! Runtime, kept as `best.onnx` when better, its metrics row, plots and checkpoint written; the
//! early stops (`patience`, `time_hours`); and `best.onnx` validated once more at the end.

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use headroom_core::metrics::Metrics;
use headroom_train::memory_guard::MemoryPool;
use headroom_train::state::{EpochStats, PHASES};
use headroom_train::trainer::Trainer;

use crate::Result;
use crate::folder;
use crate::inputs::Inputs;
use crate::observer::{EpochReport, Observer};
use crate::spec::RunSpec;
use crate::val_plots::evaluate;

/// What an epoch's end writes to.
pub(crate) struct EpochOutputs<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) model: &'a Path,
    pub(crate) bytes: &'a [u8],
    pub(crate) base_sha: &'a str,
    pub(crate) part: &'a str,
    pub(crate) threads: usize,
    /// The budget and the planner's estimate, drawn on `memory.png`.
    pub(crate) memory_lines: headroom_plot::MemoryLines,
    /// Where the tensors live: what the memory figures read.
    pub(crate) pool: MemoryPool,
}

/// How the epochs ended.
pub(crate) struct Ended {
    pub(crate) epochs_done: usize,
    /// Why the run stopped before its last epoch (`--patience`, `--time`), if it did.
    pub(crate) stopped_early: Option<String>,
    /// The epoch (1-based) of `best.onnx`.
    pub(crate) best_epoch: Option<usize>,
}

/// The epochs left: each trained, its steps down recorded, its end written; stops early on
/// `patience` or `time_hours`. The best fitness and how it ended, or `None` when the run stopped on
/// request (`stop` set).
pub(crate) fn train_epochs(
    trainer: &mut Trainer<'_>,
    spec: &mut RunSpec,
    outputs: &EpochOutputs<'_>,
    inputs: &Inputs,
    stop: Option<&AtomicBool>,
    observer: &mut dyn Observer,
) -> Result<Option<(Option<f64>, Ended)>> {
    let stop_requested = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
    let progress = trainer.progress();
    if progress.epochs_done == 0 && progress.pass == 0 && !outputs.dir.join(folder::START_FILE).exists() {
        if spec.remap.is_some() {
            tracing::info!("--remap: the starting model has other classes, so best.onnx is the best epoch");
        } else {
            validate_start(outputs, trainer, inputs)?;
        }
    }
    let mut best = folder::read_best(outputs.dir);
    // What earlier sessions of the run did, from metrics.csv: the best epoch and the time trained.
    let history = folder::epoch_history(outputs.dir);
    let mut best_epoch = history.best_epoch;
    let mut trained_seconds = history.seconds;
    let epochs = spec.settings.epochs;
    let mut ended = Ended { epochs_done: trainer.progress().epochs_done, stopped_early: None, best_epoch };
    for epoch in trainer.progress().epochs_done..epochs {
        if let Some(why) = early_stop(spec, epoch, best_epoch, trained_seconds, history.last_seconds) {
            tracing::info!(
                "stopping before epoch {}: {why}; best.onnx is epoch {}",
                epoch + 1,
                best_epoch.unwrap_or(0)
            );
            ended.stopped_early = Some(why);
            break;
        }
        if stop_requested() {
            return Ok(None);
        }
        let images = inputs.epoch_images(spec.replay_fraction, spec.settings.seed, epoch);
        let logged = trainer.steps_down().len();
        observer.epoch_started(epoch, epochs);
        let stats = {
            let observer = RefCell::new(&mut *observer);
            let stats = trainer.train_epoch(&images, &|report| observer.borrow_mut().pass(report));
            observer.borrow_mut().epoch_trained(stats.is_ok());
            stats
        };
        if trainer.steps_down().len() > logged {
            // Recorded also when the epoch then failed: what the run tried is in run.log, and a
            // resumed run continues in the configuration it stepped down to.
            folder::log_steps(outputs.dir, &trainer.steps_down()[logged..])?;
            spec.settings = trainer.config().clone();
            spec.save(outputs.dir)?;
        }
        let stats = match stats {
            Err(headroom_train::Error::Interrupted) => return Ok(None),
            other => other?,
        };
        let seconds = stats.seconds;
        // The next epoch's first batch is made on the second thread while this one ends.
        let next = (epoch + 1 < epochs && !stop_requested())
            .then(|| inputs.epoch_images(spec.replay_fraction, spec.settings.seed, epoch + 1));
        let (report, better) = trainer
            .preparing_next_epoch(next.as_deref(), |t| finish_epoch(outputs, t, stats, inputs, best))?;
        if report.best {
            best_epoch = Some(epoch + 1);
        }
        best = better;
        trained_seconds += seconds;
        ended = Ended { epochs_done: epoch + 1, stopped_early: None, best_epoch };
        observer.epoch_ended(&report);
        if let Some(why) = early_stop(spec, epoch + 1, best_epoch, trained_seconds, seconds)
            && epoch + 1 < epochs
        {
            tracing::info!(
                "stopping after epoch {}: {why}; best.onnx is epoch {}",
                epoch + 1,
                best_epoch.unwrap_or(0)
            );
            ended.stopped_early = Some(why);
            break;
        }
    }
    tracing::debug!(
        "{} epochs of this session started on a batch prepared while the epoch before ended",
        trainer.batches_prepared_ahead()
    );
    Ok(Some((best, ended)))
}

/// "Epoch 0": the starting weights written as `best.onnx` and validated on the val split as every
/// epoch is ([`folder::START_FILE`]), so that `best.onnx` stays the starting model until an epoch
/// beats it (a short run never hands back a worse model than it was given). A starting model that
/// cannot be validated (another class list, `--remap`) leaves the choice to the epochs, with a warning.
fn validate_start(out: &EpochOutputs<'_>, trainer: &Trainer<'_>, inputs: &Inputs) -> Result<()> {
    let meta = vec![
        (headroom_onnx::patch::KEY_BASE_SHA256.to_string(), out.base_sha.to_string()),
        (headroom_onnx::patch::KEY_VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string()),
        (
            headroom_onnx::patch::KEY_FINETUNED.to_string(),
            format!("{}, epoch 0 (the starting model)", out.part),
        ),
    ];
    let written = headroom_onnx::patch::write_weights(out.bytes, out.model, &trainer.ema_weights()?, &meta)?;
    let best = out.dir.join("best.onnx");
    headroom_core::fsio::write_atomic(&best, &written)?;
    match evaluate(&best, &inputs.data.names, &inputs.val, out.threads) {
        Ok(metrics) => {
            let record = folder::StartRecord { epoch: 0, fitness: metrics.fitness, metrics: metrics.clone() };
            let text = serde_json::to_string_pretty(&record).unwrap_or_default() + "\n";
            headroom_core::fsio::write_atomic(&out.dir.join(folder::START_FILE), text.as_bytes())?;
            tracing::info!(
                "the starting model on the val split: mAP50 {:.3} mAP50-95 {:.3} (epoch 0; best.onnx until an epoch beats it)",
                metrics.map50,
                metrics.map50_95
            );
        }
        Err(e) => {
            let _ = std::fs::remove_file(&best);
            tracing::warn!("validating the starting model: {e}; best.onnx will be the best epoch");
        }
    }
    Ok(())
}

/// Why the run should stop before training epoch `next` (0-based), if it should: `patience`
/// epochs without a better fitness since `best_epoch` (1-based), or `time_hours` that another
/// epoch of `last_seconds` would overrun.
fn early_stop(
    spec: &RunSpec,
    next: usize,
    best_epoch: Option<usize>,
    trained_seconds: f64,
    last_seconds: f64,
) -> Option<String> {
    if spec.patience > 0 && next > 0 {
        let since = next - best_epoch.unwrap_or(0);
        if since >= spec.patience {
            return Some(format!("no better val fitness in {since} epochs (--patience {})", spec.patience));
        }
    }
    let budget = spec.time_hours * 3600.0;
    if budget > 0.0 && next > 0 && trained_seconds + last_seconds > budget {
        return Some(format!(
            "{:.0} s trained, and another epoch (~{:.0} s) would pass --time {} h",
            trained_seconds, last_seconds, spec.time_hours
        ));
    }
    None
}

/// The end of an epoch: the averaged weights written back into the model (`last.onnx`), evaluated
/// through ONNX Runtime on the val split, kept as `best.onnx` when better, the metrics row, the
/// plots, the checkpoint. Returns the epoch's report and the best fitness so far.
fn finish_epoch(
    out: &EpochOutputs<'_>,
    trainer: &Trainer<'_>,
    stats: EpochStats,
    inputs: &Inputs,
    best: Option<f64>,
) -> Result<(EpochReport, Option<f64>)> {
    let phases: Vec<String> =
        PHASES.iter().zip(stats.phases).map(|(name, seconds)| format!("{name} {seconds:.2} s")).collect();
    tracing::debug!("epoch {} time: {}", stats.epoch + 1, phases.join("; "));
    if let Some(pool) = headroom_train::cpu_pool::stats() {
        const MB: f64 = 1024.0 * 1024.0;
        tracing::debug!(
            "epoch {} CPU pool: {} blocks reused, {} grown ({:.1} MB of fresh pages), {} releases; \
             heap {:.1} MB, {:.1} MB in use, {:.1} MB most in use",
            stats.epoch + 1,
            pool.reused,
            pool.grown,
            pool.grown_bytes as f64 / MB,
            pool.releases,
            pool.heap as f64 / MB,
            pool.in_use as f64 / MB,
            pool.high_water as f64 / MB
        );
    }
    // What the pool kept serves the next epoch's passes; validation and writing run in ONNX
    // Runtime and plain buffers, which would peak on top of it.
    headroom_train::cpu_pool::trim();
    let meta = vec![
        (headroom_onnx::patch::KEY_BASE_SHA256.to_string(), out.base_sha.to_string()),
        (headroom_onnx::patch::KEY_VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string()),
        (headroom_onnx::patch::KEY_FINETUNED.to_string(), format!("{}, epoch {}", out.part, stats.epoch + 1)),
    ];
    let ended = std::time::Instant::now();
    let written = headroom_onnx::patch::write_weights(out.bytes, out.model, &trainer.ema_weights()?, &meta)?;
    let last = out.dir.join("last.onnx");
    headroom_core::fsio::write_atomic(&last, &written)?;
    let write_seconds = ended.elapsed().as_secs_f64();
    let metrics = evaluate(&last, &inputs.data.names, &inputs.val, out.threads)?;
    let validate_seconds = ended.elapsed().as_secs_f64() - write_seconds;
    let better = best.is_none_or(|b| metrics.fitness > b);
    if better {
        headroom_core::fsio::write_atomic(&out.dir.join("best.onnx"), &written)?;
    }
    let csv = folder::append_metrics(out.dir, &stats, &metrics, &folder::peak_memory(out.pool))?;
    let plotting = std::time::Instant::now();
    if let Err(e) = headroom_plot::write_plots(&csv, out.dir, &out.memory_lines) {
        tracing::warn!("plots of {}: {e}", out.dir.display());
    }
    let plot_seconds = plotting.elapsed().as_secs_f64();
    trainer.save_checkpoint(&out.dir.join("ckpt/last.pt"))?;
    tracing::debug!(
        "epoch {} end: {:.3} s (written {write_seconds:.3} s, validated {validate_seconds:.3} s, plots \
         {plot_seconds:.3} s, then the checkpoint)",
        stats.epoch + 1,
        ended.elapsed().as_secs_f64()
    );
    let best = if better { Some(metrics.fitness) } else { best };
    let epochs = trainer.config().epochs;
    Ok((EpochReport { stats, epochs, metrics, best: better }, best))
}

/// `best.onnx` once more on the val split, as Ultralytics validates the best weights at the end: its
/// metrics (for `results.json`) and the pictures of [`crate::val_plots`]. `None`, with a line in
/// the log, when the run used `--remap` (the dataset's classes are not the model's), has no
/// `best.onnx`, or the evaluation fails: the run has finished either way.
pub(crate) fn best_validation(
    spec: &RunSpec,
    dir: &Path,
    inputs: &Inputs,
    threads: usize,
) -> Option<Metrics> {
    if spec.remap.is_some() {
        tracing::debug!(
            "--remap: no final validation of best.onnx (the dataset's classes are not the model's)"
        );
        return None;
    }
    let best = dir.join("best.onnx");
    if !best.exists() {
        return None;
    }
    tracing::debug!("validating {} on {} val images", best.display(), inputs.val.len());
    match crate::val_plots::final_validation(dir, &best, &inputs.data.names, &inputs.val, threads) {
        Ok(metrics) => Some(metrics),
        Err(e) => {
            tracing::warn!("validating {} at the end of the run: {e}", best.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(patience: usize, time_hours: f64) -> RunSpec {
        let mut spec = RunSpec::new("m.onnx".into(), "d.yaml".into());
        spec.patience = patience;
        spec.time_hours = time_hours;
        spec
    }

    #[test]
    fn patience_counts_epochs_since_the_best() {
        let s = spec(3, 0.0);
        assert!(early_stop(&s, 0, None, 0.0, 0.0).is_none(), "never before the first epoch");
        assert!(early_stop(&s, 4, Some(2), 0.0, 1.0).is_none(), "2 epochs since the best");
        let why = early_stop(&s, 5, Some(2), 0.0, 1.0).expect("3 epochs since the best");
        assert!(why.contains("--patience 3"), "{why}");
        assert!(early_stop(&spec(0, 0.0), 50, Some(1), 0.0, 1.0).is_none(), "0: never");
    }

    #[test]
    fn time_stops_before_an_epoch_that_would_overrun() {
        let s = spec(0, 1.0);
        assert!(early_stop(&s, 3, Some(3), 3000.0, 500.0).is_none(), "3500 s < 3600 s");
        let why = early_stop(&s, 3, Some(3), 3200.0, 500.0).expect("3700 s > 3600 s");
        assert!(why.contains("--time 1 h"), "{why}");
    }
}
