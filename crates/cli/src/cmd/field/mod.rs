//! `headroom field`: the nightly field loop as one command (docs/FIELD.md).
//!
//! `field run`: label the new images (each once per content) → plan for this device → train
//! (resumable) → export → the gate on a holdout and the old scenes → deploy only if it passes →
//! summary JSON and a Markdown report. Each step is the matching `headroom` verb run as a child
//! process of this binary (its memory is the system's again when it ends; a kill of this process
//! takes the child with it), except the gate, which evaluates in this process. Steps mark
//! themselves done in `<work>/run/state.json`; a rerun after a kill at any moment continues.

mod calendar;
mod deploy;
mod disk;
mod gate;
mod inputs;
mod preflight;
mod report;
mod service;
mod sources;
mod state;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;

use super::Outcome;
use super::device_arg::{DEVICE_VALUES, DeviceArg, device_arg};
use super::provider_args::{ProviderArg, count_arg};
use inputs::{absolute_file, check_inputs, class_names, work_dir};
use state::{RunSettings, RunState};

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
    /// One field retrain: label → plan → train → export → gate → deploy only if better.
    /// Exit 0 when it ends (deployed or kept), 2 on an error (nothing half-deployed; a rerun
    /// continues), 3 when another field run holds the lock, 130/143 when stopped by a signal.
    #[command(allow_negative_numbers = true)]
    Run(RunArgs),
    /// Put the previous model (`DEPLOYED.prev`) back; the one rolled back from becomes the previous
    /// one, so a second rollback undoes the first. `.prev` must be a detector with the deployed
    /// model's classes and input size; with no deployed file, `.prev` is put in its place.
    Rollback(RollbackArgs),
    /// The deploy gate alone: would CANDIDATE replace the deployed model? Evaluates both on the
    /// holdout (and the old scenes) as `field run` does; exit 0 when it would deploy, 1 when not.
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
    pub device: DeviceArg,
    /// The board preset of the memory planner: `auto` reads the board's model and memory, or a
    /// name (`headroom plan --help`).
    #[arg(long, default_value = "auto", value_name = "auto|NAME")]
    pub board: String,
    /// A device file adding boards (configs/devices.toml's format).
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
    /// Memory left to the running inference service, taken off the budget (e.g. 600MiB).
    #[arg(long, default_value = "0", value_name = "SIZE")]
    pub reserve: String,
    /// Epochs [default: the preset's].
    #[arg(long, value_parser = count_arg::<1, 10000>)]
    pub epochs: Option<usize>,
    /// What trains [default: the preset's].
    #[arg(long, value_name = "PART")]
    pub train: Option<String>,
    /// The training's time budget in hours (`headroom train --time`: it stops before an epoch that
    /// would overrun; the nightly window) [default: the preset's, else none].
    #[arg(long, value_name = "HOURS")]
    #[arg(value_parser = crate::cmd::provider_args::number_arg::<f64>)]
    pub time: Option<f64>,
    /// Execution providers of labelling and the gate, e.g. `tensorrt,cuda,cpu` (a provider that
    /// fails to register is skipped with a warning) [default: from --device, as `headroom label`].
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ep: Option<Vec<ProviderArg>>,
    /// The state folder, outside --images [default: DEPLOYED's folder/.headroom-field/DEPLOYED's
    /// file name: each deployed model has its own].
    #[arg(long, value_name = "DIR")]
    pub work: Option<PathBuf>,
    /// The labelled set keeps at most N images, the newest by modification time; human-labelled
    /// images always stay [default: the preset's max_images, else 5000].
    #[arg(long, value_name = "N", value_parser = count_arg::<1, 100_000_000>)]
    pub max_images: Option<usize>,
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

/// Runs `headroom field`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    match &args.command {
        FieldCommand::Run(args) => run_field(args),
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
            let sha = deploy::rollback(&deployed, &work)?;
            eprintln!("rolled back: {} is now sha256 {sha}", deployed.display());
            Ok(Outcome::Success)
        }
        FieldCommand::Gate(args) => gate_only(args),
        FieldCommand::InstallService(args) => service::install(args),
    }
}

fn gate_only(args: &GateArgs) -> anyhow::Result<Outcome> {
    let candidate = absolute_file("--candidate", &args.candidate)?;
    let deployed = absolute_file("--model", &args.model)?;
    let holdout = absolute_file("--holdout", &args.holdout)?;
    let old = args.old.as_deref().map(|p| absolute_file("--old", p)).transpose()?;
    let names = class_names("--model", &deployed)?;
    let candidate_names = class_names("--candidate", &candidate)?;
    anyhow::ensure!(
        candidate_names == names,
        "--candidate has classes {}, the deployed model {}: compare models of the same classes",
        candidate_names.join(", "),
        names.join(", ")
    );
    // Refused without labels, warned about images without a label file, before any model runs.
    for (flag, data) in [("--holdout", Some(&holdout)), ("--old", old.as_ref())] {
        if let Some(data) = data {
            report::check_labelled(&headroom_core::dataset::DataConfig::load(data)?, flag)?;
        }
    }
    let (_, mut preset) = super::preset::load(&args.preset)?;
    if let Some(seed) = args.seed {
        preset.gate.seed = seed;
    }
    let session = cpu_session(args.threads)?;
    let report = report::evaluate_gate(
        &candidate,
        &deployed,
        &holdout,
        old.as_deref(),
        &names,
        &preset.gate,
        &session,
    )?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for c in &report.conditions {
            println!("{:<4} {:<16} {}", if c.passed { "ok" } else { "FAIL" }, c.name, c.detail);
        }
        for (name, s) in [("holdout", Some(&report.holdout)), ("old scenes", report.old.as_ref())] {
            if let Some(s) = s.filter(|s| s.without_labels > 0) {
                println!(
                    "{name}: {} of {} images without a label file (background)",
                    s.without_labels, s.images
                );
            }
        }
        println!("{}: {}", if report.deploy { "deploy" } else { "keep" }, report.decided_by);
    }
    Ok(if report.deploy { Outcome::Success } else { Outcome::CheckFailed })
}

/// CPU session options with these threads.
fn cpu_session(threads: usize) -> anyhow::Result<headroom_infer::provider::SessionOptions> {
    provider_session(DeviceArg::Cpu, Some(&[ProviderArg::Cpu]), threads)
}

fn provider_session(
    device: DeviceArg,
    ep: Option<&[ProviderArg]>,
    threads: usize,
) -> anyhow::Result<headroom_infer::provider::SessionOptions> {
    super::provider_args::ProviderArgs {
        device,
        ep: ep.map(<[ProviderArg]>::to_vec),
        ep_fallback: true,
        threads,
        device_id: None,
        trt_fp16: false,
        trt_int8: false,
        trt_int8_table: None,
        trt_engine_cache: None,
        trt_workspace_mib: None,
        trt_timing_cache: None,
    }
    .session_options()
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

/// Testing hook: `HEADROOM_FIELD_KILL_AT=<point>` ends this process with SIGKILL at that point
/// (steps: label plan train export eval deploy deploy-swap rollback-swap); `<step>:mid` (label,
/// train, export) does so while the step's child runs.
pub(crate) fn kill_point(point: &str) {
    if std::env::var("HEADROOM_FIELD_KILL_AT").is_ok_and(|v| v == point) {
        eprintln!("HEADROOM_FIELD_KILL_AT={point}: SIGKILL");
        sigkill_self();
    }
}

/// `<step>:mid`: SIGKILL as soon as the step's child has written `evidence` (so the kill lands
/// inside the step however fast it runs), taking the child with it.
fn arm_mid_kill(step: &str, evidence: &Path) {
    if std::env::var("HEADROOM_FIELD_KILL_AT").is_ok_and(|v| v == format!("{step}:mid")) {
        let (step, evidence) = (step.to_string(), evidence.to_path_buf());
        std::thread::spawn(move || {
            while !evidence.exists() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            eprintln!("HEADROOM_FIELD_KILL_AT={step}:mid: SIGKILL once {} exists", evidence.display());
            sigkill_self();
        });
    }
}

#[allow(unsafe_code)]
fn sigkill_self() {
    // SAFETY: kill(2) on our own pid with a valid signal number.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}

/// One step of the run: `Some` when it was stopped by a signal.
type StepFn<'a> = dyn Fn(&mut Ctx) -> anyhow::Result<Option<Outcome>> + 'a;

/// What the steps share.
struct Ctx {
    exe: PathBuf,
    work: PathBuf,
    run: PathBuf,
    /// The last `error:` line a child step printed (when its messages were read, not a terminal's).
    child_error: std::cell::RefCell<Option<String>>,
    state: RunState,
    quiet: bool,
    interrupt: super::interrupt::Interrupt,
}

impl Ctx {
    /// Runs `headroom <args>` as a child; its stdout goes to `stdout_to` (atomically, when it
    /// succeeds), its stderr to ours. The child dies with this process (PR_SET_PDEATHSIG).
    fn child(
        &self,
        step: &str,
        args: &[String],
        stdout_to: &Path,
        evidence: &Path,
    ) -> anyhow::Result<Option<Outcome>> {
        let tmp = headroom_core::fsio::temporary_path(stdout_to);
        let out = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut command = std::process::Command::new(&self.exe);
        if self.quiet {
            command.arg("-q");
        }
        command.args(args).stdout(out);
        die_with_parent(&mut command);
        tracing::info!("{step}: headroom {}", args.join(" "));
        arm_mid_kill(step, evidence);
        // Unattended (no terminal: a service's journal, a log file), the child's messages pass
        // through this process so that a failure's own words are kept with the run's state.
        let read = !std::io::IsTerminal::is_terminal(&std::io::stderr());
        if read {
            command.stderr(std::process::Stdio::piped());
        }
        let mut child = command.spawn().with_context(|| format!("starting {}", self.exe.display()))?;
        let last_error = child.stderr.take().map(|pipe| std::thread::spawn(move || pass_through(pipe)));
        let status = child.wait().with_context(|| format!("waiting for {}", self.exe.display()))?;
        if let Some(reader) = last_error {
            *self.child_error.borrow_mut() = reader.join().ok().flatten();
        }
        if let Some(signal) = self.interrupt.signal() {
            return Ok(Some(Outcome::Interrupted(signal)));
        }
        match status.code() {
            Some(0) => {
                std::fs::rename(&tmp, stdout_to)
                    .with_context(|| format!("writing {}", stdout_to.display()))?;
                Ok(None)
            }
            Some(code @ (130 | 143)) => Ok(Some(Outcome::Interrupted(code - 128))),
            _ => anyhow::bail!(
                "`{} {}` failed ({status}; its messages are above)",
                self.exe.display(),
                args.join(" ")
            ),
        }
    }

    /// Runs `body` as step `name` unless done, timing it and marking it done.
    fn step(
        &mut self,
        name: &str,
        body: impl FnOnce(&mut Ctx) -> anyhow::Result<Option<Outcome>>,
    ) -> anyhow::Result<Option<Outcome>> {
        if self.state.is_done(name) {
            return Ok(None);
        }
        kill_point(name);
        let start = Instant::now();
        *self.child_error.borrow_mut() = None;
        let stopped = match body(self) {
            Ok(stopped) => stopped,
            Err(err) => return Err(self.failed(name, err)),
        };
        let seconds = start.elapsed().as_secs_f64();
        match stopped {
            Some(outcome) => {
                self.state.add_time(name, seconds);
                self.state.save(&self.run)?;
                Ok(Some(outcome))
            }
            None => {
                self.state.mark(&self.run, name, seconds)?;
                Ok(None)
            }
        }
    }
}

impl Ctx {
    /// Records that step `name` failed with `err` and says what happens next: the next start
    /// retries the step; the [`state::MAX_TRIES`]th failure in a row with the same error sets the
    /// run aside in `history/<id>-failed`, so that the next start begins a fresh run.
    fn failed(&mut self, name: &str, err: anyhow::Error) -> anyhow::Error {
        let error = self.child_error.borrow_mut().take().unwrap_or_else(|| format!("{err:#}"));
        let tries = match self.state.record_failure(&self.run, name, &error) {
            Ok(tries) => tries,
            Err(e) => return err.context(format!("step {name} failed, and recording it failed too: {e:#}")),
        };
        if tries < state::MAX_TRIES {
            return err.context(format!(
                "step {name} failed (start {tries} of {} with this error): the next start retries it; if it \
                 fails again so, the run is set aside and a fresh one starts",
                state::MAX_TRIES
            ));
        }
        match state::set_aside(&self.work, &self.run, &format!("{}-failed", self.state.id)) {
            Ok(to) => err.context(format!(
                "step {name} failed {tries} starts in a row with this error: the run is set aside in {} (its \
                 state.json holds the error) and the next start begins a fresh run; if the cause is in the \
                 settings or the inputs, fix it first",
                to.display()
            )),
            Err(e) => {
                err.context(format!("step {name} failed {tries} times; setting the run aside failed: {e:#}"))
            }
        }
    }
}

/// Copies a child's messages to our stderr, line by line; returns the last line that starts with
/// `error:` (without it).
fn pass_through(pipe: std::process::ChildStderr) -> Option<String> {
    use std::io::{BufRead as _, Write as _};
    let mut last = None;
    for line in std::io::BufReader::new(pipe).split(b'\n') {
        let Ok(line) = line else { break };
        let mut stderr = std::io::stderr().lock();
        // Our stderr gone (a closed pipe): keep reading so that the child never blocks.
        let _ = stderr.write_all(&line).and_then(|()| stderr.write_all(b"\n"));
        let text = String::from_utf8_lossy(&line);
        if let Some(rest) = text.strip_prefix("error: ") {
            last = Some(rest.trim().to_string());
        }
    }
    last
}

#[allow(unsafe_code)]
fn die_with_parent(command: &mut std::process::Command) {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt as _;
        // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}

fn run_field(args: &RunArgs) -> anyhow::Result<Outcome> {
    let inputs = check_inputs(args)?;
    let (preset_name, preset) = super::preset::load(&args.preset)?;
    let device = super::device_arg::resolve_board(&args.board, args.devices.as_deref())?;
    // Every setting the steps would refuse, refused now: before any work, with its cause.
    preflight::check(args, &inputs, &preset_name, &preset, &device)?;
    let work = work_dir(args.work.as_deref(), &inputs.deployed, Some(&inputs.images))?;
    let Some(_lock) = lock(&work)? else { return Ok(Outcome::Busy) };
    deploy::remove_stale_temporaries(&inputs.deployed, &work)?;
    let keep_runs = args.keep_runs.or(preset.keep_runs).unwrap_or(super::preset::DEFAULT_KEEP_RUNS);
    let max_images = args.max_images.or(preset.max_images).unwrap_or(super::preset::DEFAULT_MAX_IMAGES);
    let mut overrides = Vec::new();
    if let Some(epochs) = args.epochs {
        overrides.extend(["--epochs".to_string(), epochs.to_string()]);
    }
    if let Some(train) = &args.train {
        overrides.extend(["--train".to_string(), train.clone()]);
    }
    if let Some(hours) = args.time {
        anyhow::ensure!(hours > 0.0 && hours.is_finite(), "--time {hours}: hours, more than 0");
        overrides.extend(["--time".to_string(), hours.to_string()]);
    }
    let settings = RunSettings {
        images: inputs.images.clone(),
        teacher: inputs.teacher.clone(),
        holdout: inputs.holdout.clone(),
        old: inputs.old.clone(),
        preset: preset_name.clone(),
        preset_toml: toml::to_string(&preset)?,
        board: device.name.clone(),
        runs_on: args.device.to_string(),
        reserve: args.reserve.clone(),
        overrides: overrides.clone(),
        model: inputs.deployed.clone(),
    };
    let (run, state, continued) = state::open_run(&work, &inputs.deployed, &settings, keep_runs)?;
    if continued {
        eprintln!("continuing field run {} ({} done: {})", state.id, run.display(), state.done.join(", "));
    } else {
        eprintln!(
            "field run {} in {} (preset {preset_name}, board {}, device {})",
            state.id,
            run.display(),
            device.name,
            args.device
        );
    }
    // The device preset the run plans for, kept with the run (an unknown board's measured one too).
    let device_file = run.join("device.toml");
    if !device_file.is_file() {
        let text = toml::to_string(&serde_json::json!({ "device": [device] }))?;
        headroom_core::fsio::write_atomic(&device_file, text.as_bytes())?;
    }
    let mut ctx = Ctx {
        exe: std::env::current_exe().context("finding this binary")?,
        work: work.clone(),
        run: run.clone(),
        child_error: std::cell::RefCell::new(None),
        state,
        quiet: !tracing::enabled!(tracing::Level::INFO),
        interrupt: super::interrupt::Interrupt::install()?,
    };
    let labelled = work.join("labelled");
    let threads = args.threads.to_string();
    let runs_on = ["--device".to_string(), args.device.to_string()];
    let board = ["--board".to_string(), device.name.clone(), "--devices".into(), path(&device_file)];
    // The camera may be writing into --images while the run reads it: label and export's
    // calibration leave a frame modified moments ago for the next run, by the same rule.
    let settle = ["--settle".to_string(), headroom_core::imageio::SETTLE_TIME.as_secs().to_string()];
    let ep: Vec<String> = match &args.ep {
        None => Vec::new(),
        Some(list) => {
            let list: Vec<String> = list.iter().map(|e| format!("{e:?}").to_lowercase()).collect();
            vec!["--ep".into(), list.join(","), "--ep-fallback".into()]
        }
    };

    let steps: [(&str, Box<StepFn<'_>>); 4] = [
        (
            "label",
            Box::new(|ctx: &mut Ctx| {
                let force = sources::sync(&inputs.images, &labelled, &inputs.teacher)?;
                let mut a =
                    vec!["label".into(), "--teacher".into(), path(&inputs.teacher), "--images".into()];
                a.extend([path(&inputs.images), "--out".into(), path(&labelled), "--json".into()]);
                a.extend([
                    "--threads".into(),
                    threads.clone(),
                    "--max-images".into(),
                    max_images.to_string(),
                ]);
                a.extend(settle.iter().cloned());
                a.extend(runs_on.iter().cloned());
                a.extend(ep.iter().cloned());
                if force {
                    a.push("--force".into());
                }
                ctx.child("label", &a, &ctx.run.join("label.json"), &labelled.join("labels"))
            }),
        ),
        (
            "plan",
            Box::new(|ctx: &mut Ctx| {
                let part = args
                    .train
                    .clone()
                    .or_else(|| preset.train.clone())
                    .unwrap_or_else(|| crate::cmd::train::DEFAULT_PART.into());
                let mut a = vec!["plan".into(), "--model".into(), path(&ctx.run.join("base.onnx"))];
                a.extend(runs_on.iter().cloned());
                a.extend(board.iter().cloned());
                // As train's --plan auto, which chooses checkpointing itself: from off; and with
                // what the preset's run holds (the teacher) or rules out (the cache, if it augments).
                a.push("--no-checkpoint".into());
                if preset.augment == Some(false) {
                    a.push("--no-augment".into());
                }
                if preset.distill {
                    a.extend(["--teacher".into(), path(&inputs.teacher)]);
                }
                a.extend(["--reserve".into(), args.reserve.clone(), "--train".into(), part, "--json".into()]);
                ctx.child("plan", &a, &ctx.run.join("plan.json"), &ctx.run.join("plan.json"))
            }),
        ),
        (
            "train",
            Box::new(|ctx: &mut Ctx| {
                let train_dir = ctx.run.join("train");
                let base = ctx.run.join("base.onnx");
                let base_bytes =
                    std::fs::metadata(&base).with_context(|| format!("reading {}", base.display()))?;
                disk::check_free_space(&ctx.run, base_bytes.len())?;
                set_aside_foreign_training(&train_dir, &base, &labelled.join("data.yaml"))?;
                let mut a: Vec<String> = vec!["train".into()];
                if train_dir.join("config.toml").is_file() {
                    a.extend(["--resume".into(), path(&train_dir)]);
                } else {
                    if train_dir.exists() {
                        // Killed before the run saved its settings: nothing of it to keep.
                        std::fs::remove_dir_all(&train_dir)
                            .with_context(|| format!("removing {}", train_dir.display()))?;
                    }
                    a.extend(["--model".into(), path(&ctx.run.join("base.onnx"))]);
                    a.extend(["--data".into(), path(&labelled.join("data.yaml"))]);
                    if let Some(old) = &inputs.old {
                        a.extend(["--replay".into(), path(old)]);
                    }
                    let given = |id: &str| overrides.iter().any(|o| o == &format!("--{id}"));
                    a.extend(overrides.iter().cloned());
                    a.extend(preset.train_flags(&given, Some(&inputs.teacher)));
                    a.extend(["--plan".into(), "auto".into()]);
                    a.extend(runs_on.iter().cloned());
                    a.extend(board.iter().cloned());
                    a.extend(["--reserve".into(), args.reserve.clone()]);
                    a.extend(["--project".into(), path(&ctx.run), "--name".into(), "train".into()]);
                }
                a.extend(["--threads".into(), threads.clone(), "--json".into()]);
                let outcome =
                    ctx.child("train", &a, &ctx.run.join("train.json"), &train_dir.join("config.toml"))?;
                if outcome.is_none() {
                    let best = train_dir.join("best.onnx");
                    anyhow::ensure!(best.is_file(), "headroom train wrote no {}", best.display());
                }
                Ok(outcome)
            }),
        ),
        (
            "export",
            Box::new(|ctx: &mut Ctx| {
                let mut a = vec!["export".into(), "--model".into(), path(&ctx.run.join("train/best.onnx"))];
                a.extend(["--fp16".into(), "--int8".into(), "--calib".into(), path(&inputs.images)]);
                a.extend(settle.iter().cloned());
                a.extend(["--out".into(), path(&ctx.run.join("export")), "--force".into(), "--json".into()]);
                a.extend(["--threads".into(), threads.clone()]);
                a.extend(runs_on.iter().cloned());
                a.extend(board.iter().cloned());
                // The same search as `export --engine`: $TRTEXEC, JetPack's path (not on PATH), PATH.
                match headroom_trt::find_trtexec(None) {
                    Some(trtexec) => a.extend(["--engine".into(), "--trtexec".into(), path(&trtexec)]),
                    None => eprintln!(
                        "no trtexec ($TRTEXEC, {}, PATH): the ONNX files are exported, no TensorRT engine is built",
                        headroom_trt::JETPACK_TRTEXEC
                    ),
                }
                ctx.child("export", &a, &ctx.run.join("export.json"), &ctx.run.join("export"))
            }),
        ),
    ];
    for (name, body) in &steps {
        if let Some(outcome) = ctx.step(name, |ctx| body(ctx))? {
            return Ok(stopped(outcome));
        }
    }
    drop(steps);

    // The gate, in this process.
    let gate_file = run.join("gate.json");
    let session = provider_session(args.device, args.ep.as_deref(), args.threads)?;
    if let Some(outcome) = ctx.step("eval", |ctx| {
        let report = report::evaluate_gate(
            &ctx.run.join("train/best.onnx"),
            &ctx.run.join("base.onnx"),
            &inputs.holdout,
            inputs.old.as_deref(),
            &inputs.names,
            &preset.gate,
            &session,
        )?;
        let text = serde_json::to_string_pretty(&report)? + "\n";
        headroom_core::fsio::write_atomic(&gate_file, text.as_bytes())?;
        Ok(None)
    })? {
        return Ok(stopped(outcome));
    }
    let gate: gate::GateReport = serde_json::from_str(
        &std::fs::read_to_string(&gate_file).with_context(|| format!("reading {}", gate_file.display()))?,
    )
    .with_context(|| format!("{}: not a gate report", gate_file.display()))?;

    let candidate = run.join("train/best.onnx");
    ctx.step("deploy", |ctx| {
        if !gate.deploy {
            eprintln!("keeping the deployed model: {} did not hold", gate.decided_by);
            return Ok(None);
        }
        // The service may have been given another model since the run began: never replace that.
        let current = deploy::sha256_file(&inputs.deployed)?;
        let ours = [ctx.state.base_sha256.clone(), deploy::sha256_file(&candidate)?];
        anyhow::ensure!(
            ours.contains(&current),
            "{} changed since this run started (sha256 {current}, the run started from {}): not replacing \
             it; remove {} to start over from the new model",
            inputs.deployed.display(),
            ctx.state.base_sha256,
            ctx.run.display()
        );
        eprintln!("deploying: every condition of the gate held");
        deploy::swap_in(&inputs.deployed, &candidate)?;
        Ok(None)
    })?;
    let summary = report::finish(&mut ctx.state, &run, &inputs.deployed, &gate, &preset_name)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    }
    Ok(Outcome::Success)
}

/// A training folder whose settings do not load, or that trains another model or dataset than this
/// run's (a hand-edited `config.toml`), is set aside beside it (`train.set-aside-<time>`) and the
/// training starts anew: resuming it would mix datasets or fail every night.
fn set_aside_foreign_training(train_dir: &Path, base: &Path, data: &Path) -> anyhow::Result<()> {
    if !train_dir.join("config.toml").is_file() {
        return Ok(());
    }
    let why = match headroom_run::spec::RunSpec::load(train_dir) {
        Err(e) => format!("its settings do not load ({e})"),
        Ok(spec) if spec.model != base || spec.data != data => format!(
            "it trains {} on {}, not this run's {} on {}",
            spec.model.display(),
            spec.data.display(),
            base.display(),
            data.display()
        ),
        Ok(_) => return Ok(()),
    };
    let to = train_dir.with_file_name(format!("train.set-aside-{}", state::utc_id()));
    std::fs::rename(train_dir, &to)
        .with_context(|| format!("moving {} to {}", train_dir.display(), to.display()))?;
    tracing::warn!(
        "{}: {why}; it is kept as {} and the training starts anew",
        train_dir.display(),
        to.display()
    );
    Ok(())
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

fn path(p: &Path) -> String {
    p.display().to_string()
}
