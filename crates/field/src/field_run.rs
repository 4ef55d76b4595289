//! One field run, step by step: label → train (planned for the board) → export ([`StepRunner`]
//! runs each as a `headroom` verb) → eval (the gate, in this process) → deploy only when the gate passed → the
//! summary and report. Each step marks itself done in `<work>/run/state.json`; a rerun after a kill
//! at any moment continues from the first step not done. A step that fails is retried by the next
//! start; the [`crate::state::MAX_TRIES`]th failure in a row with the same error sets the run aside.
//!
//! The decisions a person reads in the journal (deploying or keeping, no trtexec, the summary) go to
//! stderr as the binary printed them, also under `-q`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::gate::{Compared, GateReport, GateSettings};
use crate::inputs::Inputs;
use crate::runner::{ChildCall, Ended, StepRunner};
use crate::served::Precision;
use crate::state::{self, RunSettings, RunState};
use crate::step::Step;
use crate::{Context as _, ensure};

/// What the steps of a run are given, resolved from the command line and the preset.
#[derive(Debug, Clone)]
pub struct StepSettings {
    /// The checked inputs.
    pub inputs: Inputs,
    /// The preset's name (or file), for the report.
    pub preset_name: String,
    /// The gate's settings.
    pub gate: GateSettings,
    /// What a fresh training is asked beyond the loop's own settings (the model, data, replay,
    /// board, device and plan, which [`FieldRun`] adds): the command line's overrides, then the
    /// preset's.
    pub train: headroom_run::request::RunRequest,
    /// Where the steps run (`--device`).
    pub device: headroom_plan::DeviceChoice,
    /// The board preset planned for, written in `<run>/device.toml`.
    pub board: String,
    /// Memory left to the running service (`--reserve`).
    pub reserve: headroom_plan::Bytes,
    /// Execution providers of labelling, in order (`--ep`), if given: a provider that does not
    /// register is skipped.
    pub providers: Option<Vec<headroom_infer::provider::ExecutionProvider>>,
    /// Threads of every step (0: the libraries' defaults).
    pub threads: usize,
    /// The labelled set's bound.
    pub max_images: usize,
    /// Frames with more pixels are left unlabelled (`label --max-pixels`).
    pub max_pixels: u64,
    /// The precision deployed (`--deploy`): the gate measures that file.
    pub deploy: Precision,
}

impl StepSettings {
    /// Whether the training plans for the board: the preset's `plan` (in [`StepSettings::train`]),
    /// else `auto`: the loop always plans unless the preset says `plan = "off"`.
    pub fn plan(&self) -> headroom_plan::PlanMode {
        self.train.plan.unwrap_or(headroom_plan::PlanMode::Auto)
    }
}

/// How a run ended without an error.
#[derive(Debug)]
pub enum Outcome {
    /// Every step is done; the summary (`summary.json`).
    Finished(Box<crate::report::FieldSummary>),
    /// A signal stopped it; a rerun continues.
    Stopped(i32),
}

/// A field run in `<work>/run`: opened (continued or new), then run.
#[derive(Debug)]
pub struct FieldRun {
    work: PathBuf,
    run: PathBuf,
    state: RunState,
    continued: bool,
}

impl FieldRun {
    /// The unfinished run in `work` when it can be continued, else a new one ([`state::open_run`]).
    pub fn open(
        work: &Path,
        deployed: &Path,
        settings: &RunSettings,
        keep_runs: usize,
    ) -> crate::Result<FieldRun> {
        let (run, state, continued) = state::open_run(work, deployed, settings, keep_runs)?;
        Ok(FieldRun { work: work.to_path_buf(), run, state, continued })
    }

    /// The run's folder (`<work>/run`).
    pub fn dir(&self) -> &Path {
        &self.run
    }

    /// Its state.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// Keeps the board preset the run plans for in `<run>/device.toml` (an unknown board's measured
    /// one too), unless the run has it already: a continued run plans for the board it began with.
    pub fn keep_board(&self, board: &headroom_plan::DevicePreset) -> crate::Result<()> {
        let file = self.run.join("device.toml");
        if !file.is_file() {
            let text = toml::to_string(&serde_json::json!({ "device": [board] }))
                .map_err(|e| crate::Error::refused(format!("{}: {e}", file.display())))?;
            headroom_core::fsio::write_atomic(&file, text.as_bytes())?;
        }
        Ok(())
    }

    /// Whether it continues a run an earlier start began.
    pub fn continued(&self) -> bool {
        self.continued
    }

    /// Runs every step not done yet, in order; the gate evaluates with `session`.
    pub fn run(
        &mut self,
        settings: &StepSettings,
        runner: &mut dyn StepRunner,
        session: &headroom_infer::provider::SessionOptions,
    ) -> crate::Result<Outcome> {
        for step in [Step::Label, Step::Train, Step::Export] {
            if step == Step::Train && !self.state.is_done(Step::Train) {
                // A camera that reuses its file names may have rewritten a labelled frame since the
                // label step: those are labelled again first, never trained with the old labels.
                let changed = crate::sources::changed_since_labelled(&self.labelled())?;
                if !changed.is_empty() {
                    tracing::warn!(
                        "{} labelled images changed since they were labelled ({}{}): labelling them again \
                         before training",
                        changed.len(),
                        changed.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
                        if changed.len() > 3 { ", …" } else { "" }
                    );
                    // The label step is done: its child runs again as it is, outside the bookkeeping.
                    match self.child_step(Step::Label, settings, runner) {
                        Ok(Ended::Done) => {}
                        Ok(Ended::Stopped(signal)) => return Ok(Outcome::Stopped(signal)),
                        Err(err) => {
                            let child_error = runner.last_error();
                            return Err(self.failed(Step::Label, err, child_error));
                        }
                    }
                }
            }
            if let Some(signal) =
                self.step(step, runner, |run, runner| run.child_step(step, settings, runner))?
            {
                return Ok(Outcome::Stopped(signal));
            }
        }
        let inputs = &settings.inputs;
        let gate_file = self.run.join("gate.json");
        let candidate = state::deploy_candidate(&self.run, settings.deploy);
        self.step(Step::Eval, runner, |run, runner| {
            // Like with like: the file to deploy against the one serving, at one precision.
            let (deployed, note) = run.serving_at(settings.deploy);
            if !deployed.is_file() {
                let call = run.export_serving_call(settings, &deployed);
                if let Ended::Stopped(signal) = runner.run_child(&call)? {
                    return Ok(Ended::Stopped(signal));
                }
                ensure!(deployed.is_file(), "headroom export wrote no {}", deployed.display());
            }
            ensure!(candidate.is_file(), "the export step wrote no {}", candidate.display());
            if let Some(note) = &note {
                eprintln!("{note}");
            }
            let mut report = crate::gate::evaluate_gate(
                &candidate,
                &deployed,
                &inputs.holdout,
                inputs.old.as_deref(),
                &inputs.names,
                &settings.gate,
                session,
            )?;
            report.compared = Some(Compared {
                precision: settings.deploy,
                candidate: candidate.clone(),
                deployed: deployed.clone(),
                note,
            });
            let text = serde_json::to_string_pretty(&report)? + "\n";
            headroom_core::fsio::write_atomic(&gate_file, text.as_bytes())?;
            Ok(Ended::Done)
        })?;
        let gate: GateReport = serde_json::from_str(
            &std::fs::read_to_string(&gate_file)
                .with_context(|| format!("reading {}", gate_file.display()))?,
        )
        .with_context(|| format!("{}: not a gate report", gate_file.display()))?;
        self.step(Step::Deploy, runner, |run, runner| {
            run.deploy(&gate, settings.deploy, &inputs.deployed, runner)?;
            Ok(Ended::Done)
        })?;
        let summary = crate::report::finish(
            &mut self.state,
            &self.run,
            (&inputs.deployed, settings.deploy),
            &gate,
            &settings.preset_name,
        )?;
        Ok(Outcome::Finished(Box::new(summary)))
    }

    /// Runs `body` as `step` unless done, timing it and marking it done; `Some(signal)` when a
    /// signal stopped it.
    fn step(
        &mut self,
        step: Step,
        runner: &mut dyn StepRunner,
        body: impl FnOnce(&mut FieldRun, &mut dyn StepRunner) -> crate::Result<Ended>,
    ) -> crate::Result<Option<i32>> {
        if self.state.is_done(step) {
            return Ok(None);
        }
        runner.starting(step);
        let start = Instant::now();
        let _ = runner.last_error();
        let ended = match body(self, runner) {
            Ok(ended) => ended,
            Err(err) => {
                let child_error = runner.last_error();
                return Err(self.failed(step, err, child_error));
            }
        };
        let seconds = start.elapsed().as_secs_f64();
        if ended == Ended::Done {
            runner.finishing(step);
        }
        match ended {
            Ended::Stopped(signal) => {
                self.state.add_time(step, seconds);
                self.state.save(&self.run)?;
                Ok(Some(signal))
            }
            Ended::Done => {
                self.state.mark(&self.run, step, seconds)?;
                Ok(None)
            }
        }
    }

    /// Records that `step` failed with `err` (in the child's words when it printed an `error:`
    /// line) and says what happens next: the next start retries the step; the
    /// [`state::MAX_TRIES`]th failure in a row with the same error sets the run aside in
    /// `history/<id>-failed`, so that the next start begins a fresh run.
    fn failed(&mut self, step: Step, err: crate::Error, child_error: Option<String>) -> crate::Error {
        let error = child_error.unwrap_or_else(|| err.chain());
        let wrap =
            |err: crate::Error, context: String| crate::Error::Context { context, source: Box::new(err) };
        let tries = match self.state.record_failure(&self.run, step, &error) {
            Ok(tries) => tries,
            Err(e) => {
                return wrap(err, format!("step {step} failed, and recording it failed too: {}", e.chain()));
            }
        };
        if tries < state::MAX_TRIES {
            return wrap(
                err,
                format!(
                    "step {step} failed (start {tries} of {} with this error): the next start retries it; if \
                     it fails again so, the run is set aside and a fresh one starts",
                    state::MAX_TRIES
                ),
            );
        }
        match state::set_aside(&self.work, &self.run, &format!("{}-failed", self.state.id)) {
            Ok(to) => wrap(
                err,
                format!(
                    "step {step} failed {tries} starts in a row with this error: the run is set aside in {} \
                     (its state.json holds the error) and the next start begins a fresh run; if the cause is \
                     in the settings or the inputs, fix it first",
                    to.display()
                ),
            ),
            Err(e) => wrap(
                err,
                format!("step {step} failed {tries} times; setting the run aside failed: {}", e.chain()),
            ),
        }
    }

    /// The `headroom` verb of a child step, run by `runner`.
    fn child_step(&self, step: Step, s: &StepSettings, runner: &mut dyn StepRunner) -> crate::Result<Ended> {
        let call = match step {
            Step::Label => {
                let force = crate::sources::sync(&s.inputs.images, &self.labelled(), &s.inputs.teacher)?;
                self.label_call(s, force)
            }
            Step::Train => self.train_call(s)?,
            Step::Export => self.export_call(s),
            Step::Eval | Step::Deploy => unreachable!("{step} runs in this process"),
        };
        let ended = runner.run_child(&call)?;
        if step == Step::Train && ended == Ended::Done {
            let best = self.run.join("train/best.onnx");
            ensure!(best.is_file(), "headroom train wrote no {}", best.display());
        }
        Ok(ended)
    }

    fn labelled(&self) -> PathBuf {
        self.work.join("labelled")
    }

    /// The serving model at `precision`, and what the gate says about it when it is not the served
    /// file itself: the served file when it has that precision; else its FP32 source, or that
    /// source's export (the first night after `--deploy` changed, an FP32 deployment's included).
    fn serving_at(&self, precision: Precision) -> (PathBuf, Option<String>) {
        let serving = self.state.serving;
        if serving == precision {
            return (self.run.join("base.onnx"), None);
        }
        let source = state::source_model(&self.run);
        let file = precision.export_of(&source, &self.run.join("export-serving"));
        let note = format!(
            "the deployed model is {serving}, this run deploys {precision}: the gate compares the candidate's \
             {precision} file with the deployed model's {precision} {} ({})",
            if precision == Precision::Fp32 { "source" } else { "export" },
            file.display()
        );
        (file, Some(note))
    }

    /// `headroom export` of the serving model's FP32 source at the precision of `file`, as the
    /// export step exports the candidate (the same calibration images), without engines.
    fn export_serving_call(&self, s: &StepSettings, file: &Path) -> ChildCall {
        let export = self.export_request(
            s,
            state::source_model(&self.run),
            (s.deploy == Precision::Fp16, s.deploy == Precision::Int8),
            self.run.join("export-serving"),
        );
        let job = headroom_export::ExportJob {
            export,
            // `headroom export`'s own default: times comparable from board to board.
            device: headroom_plan::DeviceChoice::Cpu,
            threads: s.threads,
            qat: None,
            json: true,
        };
        ChildCall {
            step: Step::Eval,
            request: crate::request::StepRequest::Export(Box::new(job)),
            request_file: self.run.join("export-serving.request.json"),
            stdout_to: self.run.join("export-serving.json"),
            evidence: file.to_path_buf(),
        }
    }

    /// The export of `model` into `out` at these precisions (FP16, INT8), as the export step makes
    /// them: INT8 calibrated on the night's images by `export`'s own defaults (a frame written
    /// moments ago left for the next run, as labelling leaves it), the files replaced.
    fn export_request(
        &self,
        s: &StepSettings,
        model: PathBuf,
        (fp16, int8): (bool, bool),
        out: PathBuf,
    ) -> headroom_export::ExportRequest {
        use headroom_export::job::{DEFAULT_CALIB_IMAGES, DEFAULT_PERCENTILE, DEFAULT_TRT_VERSION};
        headroom_export::ExportRequest {
            model,
            fp16,
            int8: int8.then(|| headroom_export::Int8Settings {
                calib: s.inputs.images.clone(),
                calib_images: DEFAULT_CALIB_IMAGES,
                settle: headroom_core::imageio::SETTLE_TIME,
                method: headroom_export::Calibration::auto(DEFAULT_PERCENTILE),
                sensitivity: None,
                scales_from: None,
            }),
            imgsz: None,
            trt_version: DEFAULT_TRT_VERSION,
            engine: None,
            session: Default::default(),
            out: Some(out),
            data: None,
            force: true,
        }
    }

    fn label_call(&self, s: &StepSettings, force: bool) -> ChildCall {
        use headroom_infer::label::job::LabelJob;
        let labelled = self.labelled();
        let session = headroom_infer::provider::SessionRequest {
            device: s.device,
            providers: s.providers.clone(),
            fallback: s.providers.is_some(),
            threads: s.threads,
            tensorrt: Default::default(),
        };
        let job = LabelJob {
            // The labelled set keeps its own pixels: a camera that deletes, renames or replaces its
            // files, or a folder that moves, leaves what was labelled as it was labelled.
            images_as: headroom_infer::label::output::Placement::Hardlink,
            // The gate's data never becomes training data, whatever its name or folder.
            exclude_like: std::iter::once(&s.inputs.holdout).chain(s.inputs.old.as_ref()).cloned().collect(),
            max_images: Some(s.max_images),
            force,
            // The camera may be writing into `--images` while the run reads it: a frame modified
            // moments ago is left for the next run (export's calibration leaves it by the same rule).
            settle: headroom_core::imageio::SETTLE_TIME,
            max_pixels: Some(s.max_pixels),
            json: true,
            ..LabelJob::new(s.inputs.teacher.clone(), s.inputs.images.clone(), labelled.clone(), session)
        };
        ChildCall {
            step: Step::Label,
            request: crate::request::StepRequest::Label(Box::new(job)),
            request_file: self.run.join("label.request.json"),
            stdout_to: self.run.join("label.json"),
            evidence: labelled.join("labels"),
        }
    }

    fn train_call(&self, s: &StepSettings) -> crate::Result<ChildCall> {
        use headroom_run::job::{TrainJob, TrainRun};
        use headroom_run::request::RunRequest;

        let train_dir = self.run.join("train");
        let base = state::source_model(&self.run);
        let data = self.labelled().join("data.yaml");
        let base_bytes = std::fs::metadata(&base).with_context(|| format!("reading {}", base.display()))?;
        crate::disk::check_free_space(&self.run, base_bytes.len())?;
        set_aside_foreign_training(&train_dir, &base, &data, s.train.epochs)?;
        let run = if train_dir.join("config.toml").is_file() {
            TrainRun::Resume { dir: train_dir.clone(), request: RunRequest::default() }
        } else {
            if train_dir.exists() {
                // Killed before the run saved its settings: nothing of it to keep.
                std::fs::remove_dir_all(&train_dir)
                    .with_context(|| format!("removing {}", train_dir.display()))?;
            }
            let request = RunRequest {
                model: Some(base),
                data: Some(data),
                replay: s.inputs.old.clone(),
                plan: Some(s.plan()),
                // `auto`: the child's libtorch decides, as `headroom train --device auto` does.
                device: match s.device {
                    headroom_plan::DeviceChoice::Cpu => Some(headroom_run::spec::TorchDevice::Cpu),
                    headroom_plan::DeviceChoice::Cuda(n) => Some(headroom_run::spec::TorchDevice::Cuda(n)),
                    headroom_plan::DeviceChoice::Auto => None,
                },
                // The board the run began with (a continued run plans for it).
                board: Some(self.kept_board(&s.board)?),
                ..s.train.clone()
            };
            TrainRun::New {
                request: request.or(RunRequest::defaults()),
                project: self.run.clone(),
                name: Some("train".into()),
            }
        };
        let job = TrainJob {
            run,
            // The budget is the planner's: a preset's `plan = "off"` trains its settings as given.
            budget: headroom_run::planner::BudgetAsk {
                budget: None,
                reserve: if s.plan() == headroom_plan::PlanMode::Auto {
                    s.reserve
                } else {
                    headroom_plan::Bytes(0)
                },
                board: Some(headroom_plan::Board::Named(s.board.clone())),
                devices: Some(self.run.join("device.toml")),
            },
            threads: s.threads,
            allocator: Default::default(),
            prefetch: Default::default(),
            profile: None,
            json: true,
        };
        Ok(ChildCall {
            step: Step::Train,
            request: crate::request::StepRequest::Train(Box::new(job)),
            request_file: self.run.join("train.request.json"),
            stdout_to: self.run.join("train.json"),
            evidence: train_dir.join("config.toml"),
        })
    }

    /// The board preset kept in `<run>/device.toml` ([`FieldRun::keep_board`]) named `name`.
    fn kept_board(&self, name: &str) -> crate::Result<headroom_plan::DevicePreset> {
        let file = self.run.join("device.toml");
        let boards = headroom_plan::load_devices(&file)?;
        Ok(headroom_plan::find_device(&boards, name)?.clone())
    }

    fn export_call(&self, s: &StepSettings) -> ChildCall {
        let mut export =
            self.export_request(s, self.run.join("train/best.onnx"), (true, true), self.run.join("export"));
        // The same search as `export --engine`: $TRTEXEC, JetPack's path (not on PATH), PATH.
        match headroom_trt::find_trtexec(None) {
            Some(trtexec) => {
                export.engine = Some(headroom_export::EngineSettings {
                    board: headroom_export::Board::Named(s.board.clone()),
                    devices: Some(self.run.join("device.toml")),
                    trtexec: Some(trtexec),
                    workspace: None,
                })
            }
            None => eprintln!(
                "no trtexec ($TRTEXEC, {}, PATH): the ONNX files are exported, no TensorRT engine is built",
                headroom_trt::JETPACK_TRTEXEC
            ),
        }
        let job = headroom_export::ExportJob {
            export,
            device: s.device,
            threads: s.threads,
            // The INT8 file deployed is fine-tuned quantization-aware on the labelled set first.
            qat: (s.deploy == Precision::Int8).then(|| headroom_export::QatSettings {
                data: self.labelled().join("data.yaml"),
                epochs: headroom_export::job::DEFAULT_QAT_EPOCHS,
            }),
            json: true,
        };
        ChildCall {
            step: Step::Export,
            request: crate::request::StepRequest::Export(Box::new(job)),
            request_file: self.run.join("export.request.json"),
            stdout_to: self.run.join("export.json"),
            evidence: self.run.join("export"),
        }
    }

    /// Deploys the candidate at `precision` (and its engine, when the export built one) when the
    /// gate passed, unless the deployed file is no longer the model the run started from (the
    /// service was given another model, before or during the deploy): that one is never replaced,
    /// and the run ends as superseded, not as a failure.
    fn deploy(
        &self,
        gate: &GateReport,
        precision: Precision,
        deployed: &Path,
        runner: &mut dyn StepRunner,
    ) -> crate::Result<()> {
        if !gate.deploy {
            eprintln!("keeping the deployed model: {} did not hold", gate.decided_by);
            return Ok(());
        }
        let candidate = state::deploy_candidate(&self.run, precision);
        let engine = self.engine_of(precision);
        // The FP32 source and the engine's record first: the next run trains from that source (the
        // quantization-aware fine-tuned weights an INT8 file was written from).
        let tuned = self.run.join("export/best.qat/best.onnx");
        let fp32 = if precision == Precision::Int8 && tuned.is_file() {
            tuned
        } else {
            self.run.join("train/best.onnx")
        };
        crate::deployment::remember(&self.work, &candidate, precision, &fp32, engine.as_deref())?;
        let swap = crate::deploy::swap_in(deployed, &candidate, &self.state.base_sha256, &mut || {
            runner.reached("deploy-swap")
        })?;
        match swap {
            crate::deploy::Swap::Done => {
                if precision != Precision::Fp32 {
                    runner.reached("deploy-engine");
                    crate::deployment::deploy_engine(deployed, engine.as_deref())?;
                }
                crate::deployment::prune(&self.work, deployed)?;
                let with = engine
                    .map(|_| {
                        format!(" and its engine {}", crate::deployment::engine_path(deployed).display())
                    })
                    .unwrap_or_default();
                eprintln!(
                    "replaced the deployed model with its {precision} file{with}: every condition of the gate held"
                )
            }
            crate::deploy::Swap::Superseded(now) => eprintln!(
                "not deploying: {} was replaced since this run started (sha256 {now}; the run started from \
                 {}): the model now there stays; this run's candidate is kept in {}",
                deployed.display(),
                self.state.base_sha256,
                self.run.join("train/best.onnx").display()
            ),
        }
        Ok(())
    }
}

/// A training folder whose settings do not load, or that trains another model or dataset, or for
/// other epochs than this run asks (a hand-edited `config.toml`), is set aside beside it
/// (`train.set-aside-<time>`) and the training starts anew: resuming it would mix datasets, fail
/// every night, or train what nobody asked for. (The planner may change the batch or what trains;
/// never the epochs.)
fn set_aside_foreign_training(
    train_dir: &Path,
    base: &Path,
    data: &Path,
    epochs: Option<usize>,
) -> crate::Result<()> {
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
        Ok(spec) if epochs.is_some_and(|e| e != spec.settings.epochs) => format!(
            "its config.toml says {} epochs, this run asks for {} (edited by hand?)",
            spec.settings.epochs,
            epochs.unwrap_or_default()
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

impl FieldRun {
    /// The engine the export step built for `precision`'s file, when it built one.
    fn engine_of(&self, precision: Precision) -> Option<PathBuf> {
        let report = std::fs::read_to_string(self.run.join("export.json")).ok()?;
        let report: headroom_export::ExportReport = serde_json::from_str(&report).ok()?;
        report
            .engines?
            .into_iter()
            .find(|e| precision.runs_engine(&e.precision))
            .map(|e| e.engine)
            .filter(|e| e.is_file())
    }
}
