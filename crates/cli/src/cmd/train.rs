//! `headroom train`: the command line of a training run. The run itself — spec, folder, epochs,
//! validation, checkpoints, resume — is `headroom-run`'s ([`headroom_run::run`]); this file turns
//! flags into a [`TrainJob`] (`super::train_spec`), has the library carry it out
//! ([`TrainJob::carry_out`]), draws progress and prints the result (docs/TRAIN.md). The field loop's training step is a [`TrainJob`] too, run here by
//! the hidden `headroom step`.

use super::Outcome;
pub use super::train_args::Args;
use headroom_run::job::TrainJob;

/// Runs `headroom train`.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    run_job(&super::train_spec::job_from_args(args)?)
}

/// Runs `headroom train` (this build has no libtorch).
#[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
pub fn run(_args: &Args) -> anyhow::Result<Outcome> {
    Err(headroom_train::Error::FeatureDisabled { feature: "libtorch" }.into())
}

/// Runs one training as `job` asks.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
pub fn run_job(job: &TrainJob) -> anyhow::Result<Outcome> {
    use headroom_run::run::RunEnd;

    let interrupt = super::interrupt::Interrupt::install()?;
    let mut observer = super::train_progress::TerminalObserver::default();
    let end = job.carry_out(Some(interrupt.flag()), &mut observer)?;
    match end {
        RunEnd::Finished(results) => {
            if job.json {
                println!("{}", serde_json::to_string_pretty(&results)?);
            }
            if tracing::enabled!(tracing::Level::INFO) {
                // As Ultralytics ends a run: best.onnx validated, per class.
                eprintln!("\nvalidated {}:", results.run.join("best.onnx").display());
                match best_table(&results) {
                    Ok(table) => eprint!("{table}"),
                    Err(e) => tracing::warn!("the summary table of best.onnx: {e:#}"),
                }
                eprintln!("{}", finished_line(&results));
            }
            Ok(Outcome::Success)
        }
        RunEnd::AlreadyFinished(results) => {
            eprintln!(
                "{}: this run has finished ({} of {} epochs); --resume --epochs N (more) extends it",
                results.run.display(),
                results.epochs_done,
                results.epochs
            );
            if job.json {
                println!("{}", serde_json::to_string_pretty(&results)?);
            }
            Ok(Outcome::Success)
        }
        RunEnd::Interrupted => {
            let signal = interrupt.signal().unwrap_or(2);
            eprintln!(
                "stopped by {}: the run is saved at its last checkpoint; `headroom train --resume RUN_DIR` continues it",
                super::interrupt::signal_name(signal)
            );
            Ok(Outcome::Interrupted(signal))
        }
    }
}

/// `best.onnx` of a finished run on its val split, per class (the table of `headroom eval`), from
/// the validation the run ended with (`results.json`'s `best_val`); empty when there was none
/// (`--remap`: metrics.csv has the run's own validation).
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn best_table(results: &headroom_run::folder::RunResults) -> anyhow::Result<String> {
    use headroom_core::dataset::DataConfig;
    let Some(metrics) = &results.best_val else {
        return Ok(String::new());
    };
    let spec = headroom_run::spec::RunSpec::load(&results.run)?;
    let config = DataConfig::load(&spec.data)?;
    Ok(metrics.table(&config.names))
}

/// The end of a run in one line: where its files are and which epoch `best.onnx` is.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn finished_line(results: &headroom_run::folder::RunResults) -> String {
    let run = results.run.display();
    let best = match (results.best_epoch, results.best_fitness) {
        (Some(0), Some(fitness)) => {
            format!("; best.onnx is the starting model (epoch 0, fitness {fitness:.4}): no epoch beat it")
        }
        (Some(epoch), Some(fitness)) => format!("; best.onnx is epoch {epoch} (fitness {fitness:.4})"),
        _ => String::new(),
    };
    let stopped =
        results.stopped_early.as_deref().map(|w| format!("; stopped early: {w}")).unwrap_or_default();
    format!("results saved to {run}{best}{stopped}")
}

/// Runs one training as `job` asks (this build has no libtorch).
#[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
pub fn run_job(_job: &TrainJob) -> anyhow::Result<Outcome> {
    Err(headroom_train::Error::FeatureDisabled { feature: "libtorch" }.into())
}
