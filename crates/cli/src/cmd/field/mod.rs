//! `headroom field`: the nightly field loop as one command (docs/FIELD.md).
//!
//! `field run`: label the new images (each once per content) → train (planned for this device,
//! resumable) → export → the gate on a holdout and the old scenes → deploy only if it passes →
//! summary JSON and a Markdown report. Each step is the matching `headroom` verb run as a child
//! process of this binary, handed a typed request (`headroom step FILE`; its memory is the
//! system's again when it ends; a kill of this process takes the child with it), except the gate,
//! which evaluates in this process. Steps mark
//! themselves done in `<work>/run/state.json`; a rerun after a kill at any moment continues.
//!
//! The loop itself is `headroom_field::field_run::FieldRun`; this module parses the flags, checks
//! them before any work, resolves the preset and the board, and runs the steps' children through
//! `headroom_field::runner::ChildRunner`.

mod service;

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Outcome;
use super::device_arg::{DEVICE_VALUES, device_arg};
use super::provider_args::count_arg;
use headroom_field::ask::FieldAsk;
use headroom_field::field_run::{self, FieldRun};
use headroom_field::inputs::{Given, check_inputs, work_dir};
use headroom_field::runner::{ChildRunner, StepRunner};
use headroom_field::{deploy, deployment};
use headroom_infer::provider::ExecutionProvider;
use headroom_plan::DeviceChoice;
use headroom_run::limits;
use headroom_run::preset;

/// Arguments of `headroom field`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub command: FieldCommand,
}

/// The subcommands of `headroom field`.
// Parsed once per process: the size of `RunArgs` costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, clap::Subcommand)]
pub enum FieldCommand {
    /// One night of the loop: label → train (planned for the board) → export → gate → deploy only
    /// if better.
    ///
    /// Exit 0 when it ends (deployed or kept), 2 on an error (nothing half-deployed; a rerun
    /// continues), 3 when another field run holds the lock, 130/143 when stopped by a signal.
    /// docs/FIELD.md.
    #[command(allow_negative_numbers = true)]
    Run(RunArgs),
    /// Put the previous model (`DEPLOYED.prev`) back; a second rollback undoes the first.
    ///
    /// The one rolled back from becomes the previous one. `.prev` must be a detector with the
    /// deployed model's classes and input size; with no deployed file, `.prev` is put in its place.
    Rollback(RollbackArgs),
    /// The deploy gate alone: would CANDIDATE replace the deployed model? Exit 0 yes, 1 no.
    ///
    /// Evaluates both on the holdout (and the old scenes) as `field run` does.
    #[command(allow_negative_numbers = true)]
    Gate(GateArgs),
    /// Write a systemd service and timer that run `headroom field run` with these flags every night.
    #[command(allow_negative_numbers = true)]
    InstallService(service::Args),
}

/// Arguments of `headroom field gate`.
#[derive(Debug, clap::Args)]
pub struct GateArgs {
    /// The candidate model.
    #[arg(long, value_name = "CANDIDATE.onnx")]
    pub candidate: PathBuf,
    /// The deployed model.
    #[arg(long, value_name = "DEPLOYED.onnx")]
    pub model: PathBuf,
    /// Labelled new-scene images (its val split).
    #[arg(long, value_name = "H.yaml")]
    pub holdout: PathBuf,
    /// Old-scene data (its val split).
    #[arg(long, value_name = "OLD.yaml")]
    pub old: Option<PathBuf>,
    /// The preset whose `gate` settings apply.
    #[arg(long, default_value = "field-accurate", value_name = "NAME|FILE")]
    pub preset: String,
    /// Seed of the bootstrap [default: the preset's].
    #[arg(long, value_parser = crate::cmd::provider_args::whole_arg::<u64>)]
    pub seed: Option<u64>,
    /// ONNX Runtime threads (0: its default).
    #[arg(long, default_value_t = 0, value_parser = count_arg::<0, 256>)]
    pub threads: usize,
    /// Print the gate's report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `headroom field run`.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// The folder of new images (searched recursively; only images not labelled before, by
    /// content, are labelled; a name with a line break is skipped with a warning). An image that
    /// cannot be used (empty, truncated, under 10 pixels a side, not decodable, modified in the last
    /// 2 s) is skipped by every step, with a warning naming it; one still being written is taken
    /// by a later run.
    #[arg(long, value_name = "DIR")]
    pub images: PathBuf,
    /// The teacher that labels them (an ONNX detector with the deployed model's classes).
    #[arg(long, value_name = "T.onnx")]
    pub teacher: PathBuf,
    /// The deployed model: the file the inference service reads, replaced only by an atomic rename
    /// when the gate passes, keeping its owner, group and mode (the previous one kept as
    /// DEPLOYED.prev); a symbolic link stays one, the file it points to is replaced.
    #[arg(long, value_name = "DEPLOYED.onnx")]
    pub model: PathBuf,
    /// Labelled new-scene images held out for the gate (a data.yaml; its val split). They never
    /// pick the epoch: training picks it on its own val split.
    #[arg(long, value_name = "H.yaml")]
    pub holdout: PathBuf,
    /// The precision deployed at DEPLOYED: the trained model (fp32) or its export (fp16, int8);
    /// the gate measures exactly that file against the serving model at the same precision, and
    /// the engine the export built for it (with trtexec) is deployed beside it as DEPLOYED's
    /// `.engine` and rolled back with it. fp16: TensorRT on an Orin runs it on the tensor cores at
    /// no measured cost in accuracy; int8 is faster and costs points (docs/FIELD.md "Precision").
    #[arg(long, default_value = "fp16", value_name = "fp32|fp16|int8")]
    pub deploy: headroom_field::served::Precision,
    /// Old-scene data: its train split is replayed in training against forgetting, its val split
    /// is checked by the gate (recommended).
    #[arg(long, value_name = "OLD.yaml")]
    pub old: Option<PathBuf>,
    /// Run preset (configs/runs.toml: field-accurate, the best measured; field-quick, head only) or
    /// a preset file.
    #[arg(long, default_value = "field-accurate", value_name = "NAME|FILE")]
    pub preset: String,
    /// Where every step runs (labelling, training, the export's checks, the gate): cpu, cuda,
    /// cuda:N; auto: each step takes the GPU when it can use one (`headroom train --help`,
    /// `headroom label --help`), else the CPU.
    #[arg(long, default_value = "auto", value_name = DEVICE_VALUES, value_parser = device_arg)]
    pub device: DeviceChoice,
    /// The board preset of the memory planner: `auto` reads the board's model and memory, or a
    /// name (`headroom plan --help`).
    #[arg(long, default_value = "auto", value_name = "auto|NAME")]
    pub board: headroom_plan::Board,
    /// A device file adding boards (configs/devices.toml's format).
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
    /// Memory left to the running inference service, taken off the budget (e.g. 600MiB).
    #[arg(long, default_value = "0", value_name = "SIZE")]
    pub reserve: headroom_plan::Bytes,
    /// Epochs [default: the preset's].
    #[arg(long, value_parser = count_arg::<{ limits::EPOCHS_MIN }, { limits::EPOCHS_MAX }>)]
    pub epochs: Option<usize>,
    /// What trains [default: the preset's].
    #[arg(long, value_name = "PART", value_parser = super::train_shared::part_arg)]
    pub train: Option<headroom_onnx::Trainable>,
    /// The training's time budget in hours (`headroom train --time`: it stops before an epoch that
    /// would overrun; the nightly window) [default: the preset's, else none].
    #[arg(long, value_name = "HOURS")]
    #[arg(value_parser = crate::cmd::provider_args::number_arg::<f64>)]
    pub time: Option<f64>,
    /// Execution providers of labelling and the gate, e.g. `tensorrt,cuda,cpu` (a provider that
    /// fails to register is skipped with a warning) [default: from --device, as `headroom label`].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ep: Option<Vec<ExecutionProvider>>,
    /// The state folder, outside --images [default: DEPLOYED's folder/.headroom-field/DEPLOYED's
    /// file name: each deployed model has its own].
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// The labelled set keeps at most N images, the newest by modification time; human-labelled
    /// images always stay [default: the preset's max_images, else 5000].
    #[arg(long, value_name = "N", value_parser = count_arg::<1, 100_000_000>)]
    pub max_images: Option<usize>,
    /// Frames with more than N pixels are left unlabelled, before decoding (`label --max-pixels`)
    /// [default: sized for the board: a decoded frame within a 32nd of its memory, e.g. 44.7
    /// million pixels on 4 GB; on 16 GB and more Pillow's limit, 178956970].
    #[arg(long, value_name = "N", value_parser = count_arg::<100, 178_956_970>)]
    pub max_pixels: Option<usize>,
    /// Runs `<work>/history` keeps, each pruned to its summary, reports and trained model (the
    /// newest keeps its exports) [default: the preset's keep_runs, else 10].
    #[arg(long, value_name = "N", value_parser = count_arg::<1, 10_000>)]
    pub keep_runs: Option<usize>,
    /// Threads of every step (0: the libraries' defaults).
    #[arg(long, default_value_t = 0, value_parser = count_arg::<0, 256>)]
    pub threads: usize,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Write the night's outcome in Prometheus' text format to FILE, atomically, however the night
    /// ends (for node_exporter's textfile collector: a file per model in its directory, e.g.
    /// /var/lib/node_exporter/textfile/headroom-field.prom).
    #[arg(long, value_name = "FILE")]
    pub metrics: Option<PathBuf>,
}

/// Arguments of `headroom field rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    /// The deployed model.
    #[arg(long, value_name = "DEPLOYED.onnx")]
    pub model: PathBuf,
    /// The state folder [default: DEPLOYED's folder/.headroom-field/DEPLOYED's file name].
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
}

/// Runs `headroom field`, with `hooks` around the loop (none in the binary).
pub fn run(args: &Args, hooks: &crate::Hooks) -> anyhow::Result<Outcome> {
    match &args.command {
        FieldCommand::Run(args) => run_field(args, hooks),
        FieldCommand::Rollback(args) => {
            // The deployed file may be missing: `.prev` is put in its place.
            anyhow::ensure!(
                !args.model.is_dir(),
                "--model {}: is a folder; give the file",
                args.model.display()
            );
            let deployed = std::path::absolute(&args.model)
                .with_context(|| format!("--model {}", args.model.display()))?;
            let work = work_dir(args.work.as_deref(), &deployed, None)?;
            let Some(_lock) = lock(&work)? else { return Ok(Outcome::Busy) };
            deploy::remove_stale_temporaries(&deployed, &work)?;
            deployment::reconcile_engine(&deployed, &work)?;
            let sha = deploy::rollback(&deployed, &work, &mut |point| {
                if let Some(at) = hooks.rollback_at {
                    at(point);
                }
            })?;
            // The engine built with the model now deployed comes back beside it.
            deployment::reconcile_engine(&deployed, &work)?;
            eprintln!("rolled back: {} is now sha256 {sha}", deployed.display());
            Ok(Outcome::Success)
        }
        FieldCommand::Gate(args) => gate_only(args),
        FieldCommand::InstallService(args) => service::install(args),
    }
}

fn gate_only(args: &GateArgs) -> anyhow::Result<Outcome> {
    let report = headroom_field::gate_job::GateJob {
        candidate: args.candidate.clone(),
        model: args.model.clone(),
        holdout: args.holdout.clone(),
        old: args.old.clone(),
        preset: args.preset.clone(),
        seed: args.seed,
        threads: args.threads,
    }
    .run()?;
    if args.json {
        print_json(&report, None);
    } else {
        print!("{report}");
    }
    Ok(if report.deploy { Outcome::Success } else { Outcome::CheckFailed })
}

/// The steps' sessions: `--device`, `--ep` (a provider that fails to register is skipped).
fn provider_session(
    device: DeviceChoice,
    ep: Option<&[ExecutionProvider]>,
    threads: usize,
) -> anyhow::Result<headroom_infer::provider::SessionOptions> {
    let providers = ep.map(<[ExecutionProvider]>::to_vec);
    let request = headroom_infer::provider::SessionRequest {
        device,
        providers,
        ..headroom_infer::provider::SessionRequest::cpu(threads)
    };
    Ok(request.options()?)
}

/// One field command at a time per state folder; `None` (exit 3) when another holds it.
fn lock(work: &Path) -> anyhow::Result<Option<headroom_core::fsio::OutputLock>> {
    match headroom_core::fsio::OutputLock::acquire_named(work, "lock", "this field loop", "headroom field") {
        Ok(lock) => Ok(Some(lock)),
        Err(err @ headroom_core::Error::Locked { .. }) => {
            eprintln!("error: {err}");
            Ok(None)
        }
        Err(err) => Err(err.into()),
    }
}

/// What a night left for its metrics.
#[derive(Default)]
struct Left {
    /// The deployed model and the state folder, once known.
    model_and_work: Option<(PathBuf, PathBuf)>,
    /// The summary and the run folder of a finished run.
    finished: Option<(Box<headroom_field::report::FieldSummary>, PathBuf)>,
    /// What a quiet night found.
    quiet: Option<headroom_field::quiet::Look>,
}

/// `field run`: one night, then its metrics (`--metrics`), whatever the night's end.
fn run_field(args: &RunArgs, hooks: &crate::Hooks) -> anyhow::Result<Outcome> {
    let mut left = Left::default();
    let result = night(args, &mut left, hooks);
    if let Some(file) = &args.metrics {
        use headroom_field::metrics::Night;
        let (exit, night) = match (&result, &left) {
            (Err(_), _) => (2, Night::Failed),
            (Ok(Outcome::Busy), _) => (3, Night::Busy),
            (Ok(Outcome::Interrupted(signal)), _) => (128 + signal, Night::Stopped),
            (Ok(_), Left { finished: Some((summary, run)), .. }) => (0, Night::Finished(summary, run)),
            (Ok(_), Left { quiet: Some(look), .. }) => (0, Night::Quiet(look)),
            (Ok(_), _) => (0, Night::Failed),
        };
        let (model, work) =
            left.model_and_work.clone().unwrap_or_else(|| (args.model.clone(), PathBuf::new()));
        if let Err(e) = headroom_field::metrics::write(file, &model, &work, &night, exit) {
            tracing::warn!("--metrics {}: not written: {}", file.display(), e.chain());
        }
    }
    result
}

fn night(args: &RunArgs, left: &mut Left, hooks: &crate::Hooks) -> anyhow::Result<Outcome> {
    let inputs = check_inputs(Given {
        images: &args.images,
        teacher: &args.teacher,
        model: &args.model,
        holdout: &args.holdout,
        old: args.old.as_deref(),
    })?;
    let (preset_name, preset) = headroom_run::preset::load(&args.preset)?;
    let device = headroom_plan::System::host().resolve_board(&args.board, args.devices.as_deref())?;
    let keep_runs = args.keep_runs.or(preset.keep_runs).unwrap_or(preset::DEFAULT_KEEP_RUNS);
    let ask = FieldAsk {
        inputs,
        preset_name: preset_name.clone(),
        preset,
        board: device.clone(),
        device: args.device,
        reserve: args.reserve,
        epochs: args.epochs,
        part: args.train,
        time_hours: args.time,
        providers: args.ep.clone(),
        threads: args.threads,
        max_images: args.max_images,
        max_pixels: args.max_pixels.map(|n| n as u64),
        deploy: args.deploy,
    };
    // Every setting the steps would refuse, refused now: before any work, with its cause.
    ask.preflight(args.work.as_deref(), (&args.board, args.devices.as_deref()))?;
    let inputs = &ask.inputs;
    let work = work_dir(args.work.as_deref(), &inputs.deployed, Some(&inputs.images))?;
    left.model_and_work = Some((inputs.deployed.clone(), work.clone()));
    let Some(_lock) = lock(&work)? else { return Ok(Outcome::Busy) };
    deploy::remove_stale_temporaries(&inputs.deployed, &work)?;
    // A kill between a deploy's model and its engine, or a rollback by hand: the pair is mended.
    deployment::reconcile_engine(&inputs.deployed, &work)?;
    // A quiet night is a good night: nothing the last run was not gated on, nothing to do.
    if !headroom_field::state::has_unfinished_run(&work) {
        let look = headroom_field::quiet::look(&inputs.images, &work)?;
        if look.quiet() {
            let message = look.message(&inputs.images);
            eprintln!("{message}");
            if args.json {
                let night =
                    serde_json::json!({ "decision": "nothing-new", "message": message, "images": look });
                print_json(&night, None);
            }
            left.quiet = Some(look);
            return Ok(Outcome::Success);
        }
    }
    let (settings, steps) = ask.settings()?;
    let mut field_run = FieldRun::open(&work, &steps.inputs.deployed, &settings, keep_runs)?;
    let (run, state) = (field_run.dir().to_path_buf(), field_run.state());
    if field_run.continued() {
        let done: Vec<&str> = state.done.iter().map(|s| s.name()).collect();
        eprintln!("continuing field run {} ({} done: {})", state.id, run.display(), done.join(", "));
    } else {
        eprintln!(
            "field run {} in {} (preset {preset_name}, board {}, device {})",
            state.id,
            run.display(),
            device.name,
            args.device
        );
    }
    field_run.keep_board(&device)?;
    let interrupt = super::interrupt::Interrupt::install()?;
    let children = ChildRunner::new(
        std::env::current_exe().context("finding this binary")?,
        !tracing::enabled!(tracing::Level::INFO),
        Box::new(move || interrupt.signal()),
    );
    let mut runner: Box<dyn StepRunner> = match hooks.runner {
        Some(wrap) => wrap(children),
        None => Box::new(children),
    };
    let session = provider_session(args.device, args.ep.as_deref(), args.threads)?;
    match field_run.run(&steps, runner.as_mut(), &session)? {
        field_run::Outcome::Stopped(signal) => Ok(stopped(Outcome::Interrupted(signal))),
        field_run::Outcome::Finished(summary) => {
            if args.json {
                print_json(&summary, Some(&run.join("summary.json")));
            }
            left.finished = Some((summary, run));
            Ok(Outcome::Success)
        }
    }
}

/// Prints `value` as JSON on stdout. The night's work is done and on disk whatever stdout is: a
/// full or failing stdout is a warning (naming the file that holds the same JSON), never a panic
/// after a deploy. (A closed pipe ends the process quietly, as it ends `cat`: main.rs.)
fn print_json(value: &impl serde::Serialize, kept_in: Option<&Path>) {
    use std::io::Write as _;
    let text = match serde_json::to_string_pretty(value) {
        Ok(text) => text + "\n",
        Err(e) => {
            tracing::warn!("could not make the JSON for stdout: {e}");
            return;
        }
    };
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        let kept = kept_in.map(|p| format!("; it is in {}", p.display())).unwrap_or_default();
        tracing::warn!("could not write the JSON to stdout ({e}){kept}");
    }
}

fn stopped(outcome: Outcome) -> Outcome {
    if let Outcome::Interrupted(signal) = outcome {
        eprintln!(
            "stopped by {}: rerun the same command to continue the run",
            super::interrupt::signal_name(signal)
        );
    }
    outcome
}
