//! `headroom train`: the command line of a training run. The run itself — spec, folder, epochs,
//! validation, checkpoints, resume — is `headroom-run`'s ([`headroom_run::run`]); this file turns
//! flags into a [`TrainJob`] (`super::train_spec`), runs it — a new run's spec resolved and
//! planned, or a resumed one's settings checked against its saved ones —, draws progress and prints
//! the result (docs/TRAIN.md). The field loop's training step is a [`TrainJob`] too, run here by
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
    use headroom_plan::PlanMode;
    use headroom_run::job::TrainRun;
    use headroom_run::run::{RunEnd, RunOptions};
    use headroom_run::spec::RunSpec;

    let interrupt = super::interrupt::Interrupt::install()?;
    let options = RunOptions {
        threads: job.threads,
        stop: Some(interrupt.flag()),
        allocator: job.allocator,
        profile: job.profile.clone(),
        prefetch: job.prefetch,
    };
    let mut observer = super::train_progress::TerminalObserver::default();
    let end = match &job.run {
        TrainRun::Resume { dir, request } => {
            anyhow::ensure!(
                request.plan != Some(PlanMode::Auto),
                "--plan auto plans a new run; --resume continues with the run's own settings"
            );
            let saved = RunSpec::load(&headroom_run::folder::existing_run_dir(dir)?)?;
            request.check_resume(&saved, headroom_run::device::cuda_available())?;
            headroom_run::run::resume(dir, request.epochs, &options, &mut observer)?
        }
        TrainRun::New { request, project, name } => {
            // Before the spec, whose derived settings (--nbs auto, --optimizer auto) log what they chose.
            if let Some(model) = &request.model {
                headroom_run::model_checks::refuse_fp16(model, &headroom_onnx::Model::load(model)?)?;
            }
            // A device not asked (the field loop's `--device auto`) is this libtorch's `auto`: the
            // GPU when it sees one. Left unset, the spec would train on the CPU.
            let request = match request.device {
                Some(_) => request.clone(),
                None => headroom_run::request::RunRequest {
                    device: Some(headroom_run::device::torch_text(headroom_plan::DeviceChoice::Auto)),
                    ..request.clone()
                },
            };
            let mut spec = request.resolve(None, headroom_run::device::cuda_available())?;
            // --plan, or the preset's `plan` key (field-accurate plans).
            if request.plan == Some(PlanMode::Auto) {
                headroom_run::planner::plan_auto(&mut spec, &job.budget)?;
            } else if headroom_plan::check_sizes(job.budget.budget.as_deref(), &job.budget.reserve)? {
                tracing::warn!(
                    "--budget and --reserve apply with --plan auto only: this run trains as given"
                );
            }
            let dir = headroom_run::folder::new_run_dir(project, name.as_deref())?;
            headroom_run::run::start(&spec, &dir, &options, &mut observer)?
        }
    };
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
