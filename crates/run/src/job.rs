//! One `headroom train` as a value, [`TrainJob`]: what the command line's flags ask, or what the
//! field loop asks of its training step. The binary runs both the same way (the flags become a job
//! first); the loop hands its child the job serialized (`headroom_field::request`), so that a
//! setting it passes on is a field the compiler checks, not a flag spelled at run time.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::planner::BudgetAsk;
use crate::request::RunRequest;

/// One training: a new run or a resumed one, and how it is carried out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainJob {
    /// What is trained.
    pub run: TrainRun,
    /// The budget `--plan auto` fits (a new run that plans). Without planning its sizes are
    /// checked all the same (a typo is an error, not silence) and a warning says they change
    /// nothing.
    pub budget: BudgetAsk,
    /// libtorch and ONNX Runtime threads (0: their defaults).
    #[serde(default)]
    pub threads: usize,
    /// How the C allocator returns freed memory.
    #[serde(default)]
    pub allocator: headroom_train::memory_guard::Allocator,
    /// Whether the next batch is prepared on a second thread.
    #[serde(default)]
    pub prefetch: headroom_plan::Prefetch,
    /// A trace of libtorch's ops over this many passes, and where to write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<(PathBuf, u64)>,
    /// Print the results as JSON on stdout.
    #[serde(default)]
    pub json: bool,
}

/// A new run or a resumed one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", deny_unknown_fields)]
pub enum TrainRun {
    /// A new run in `project/name` (`name` None: the next free `train`, `train2` …), trained as
    /// `request` asks: complete, the flags given over a preset over [`RunRequest::defaults`]. Its
    /// `device` None is `auto`, which the process that trains decides (the GPU its libtorch sees).
    New {
        /// Every setting.
        request: RunRequest,
        /// The folder of runs.
        project: PathBuf,
        /// The run's folder in it.
        name: Option<String>,
    },
    /// The run in `dir` continued; `request` holds only the settings asked (checked against the
    /// run's own: only `epochs` may differ).
    Resume {
        /// The run's folder.
        dir: PathBuf,
        /// The settings asked.
        request: RunRequest,
    },
}

/// Carrying a job out needs the run (libtorch and ONNX Runtime).
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
impl TrainJob {
    /// Trains as the job asks: a resumed run's settings checked against its saved ones, or a new
    /// run's request resolved into its spec (a device not asked, as the field loop's `--device
    /// auto`, is this libtorch's `auto`: the GPU when it sees one), planned when it asks
    /// (`--plan auto`, or a preset's `plan = "auto"`), and started in a new run folder. `stop`:
    /// set by a Ctrl-C handler, the run stops at its next optimiser step, resumable.
    pub fn carry_out(
        &self,
        stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
        observer: &mut dyn crate::observer::Observer,
    ) -> crate::Result<crate::run::RunEnd> {
        use headroom_plan::PlanMode;

        let options = crate::run::RunOptions {
            threads: self.threads,
            stop,
            allocator: self.allocator,
            profile: self.profile.clone(),
            prefetch: self.prefetch,
        };
        match &self.run {
            TrainRun::Resume { dir, request } => {
                if request.plan == Some(PlanMode::Auto) {
                    return Err(crate::Error::Request(
                        "--plan auto plans a new run; --resume continues with the run's own settings".into(),
                    ));
                }
                let saved = crate::spec::RunSpec::load(&crate::folder::existing_run_dir(dir)?)?;
                request.check_resume(&saved, crate::device::cuda_available())?;
                crate::run::resume(dir, request.epochs, &options, observer)
            }
            TrainRun::New { request, project, name } => {
                // Before the spec, whose derived settings (--nbs auto, --optimizer auto) log what
                // they chose.
                if let Some(model) = &request.model {
                    crate::model_checks::refuse_fp16(model, &headroom_onnx::Model::load(model)?)?;
                }
                // Left unset, the spec would train on the CPU.
                let request = match request.device {
                    Some(_) => request.clone(),
                    None => RunRequest {
                        device: Some(crate::device::torch_text(headroom_plan::DeviceChoice::Auto)),
                        ..request.clone()
                    },
                };
                let mut spec = request.resolve(None, crate::device::cuda_available())?;
                if request.plan == Some(PlanMode::Auto) {
                    crate::planner::plan_auto(&mut spec, &self.budget)?;
                } else if self.budget.budget.is_some() || self.budget.reserve.0 > 0 {
                    tracing::warn!(
                        "--budget and --reserve apply with --plan auto only: this run trains as given"
                    );
                }
                let dir = crate::folder::new_run_dir(project, name.as_deref())?;
                crate::run::start(&spec, &dir, &options, observer)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_round_trips_through_json() {
        let new = TrainJob {
            run: TrainRun::New {
                request: RunRequest { epochs: Some(3), ..RunRequest::defaults() },
                project: "/srv/run".into(),
                name: Some("train".into()),
            },
            budget: BudgetAsk {
                reserve: headroom_plan::Bytes(600 << 20),
                board: Some(headroom_plan::Board::Named("orin-nano-4".into())),
                ..BudgetAsk::default()
            },
            threads: 2,
            allocator: headroom_train::memory_guard::Allocator::default(),
            prefetch: headroom_plan::Prefetch::Auto,
            profile: None,
            json: true,
        };
        let resume = TrainJob {
            run: TrainRun::Resume { dir: "/srv/run/train".into(), request: RunRequest::default() },
            ..new.clone()
        };
        for job in [new, resume] {
            let json = serde_json::to_string(&job).expect("json");
            assert_eq!(serde_json::from_str::<TrainJob>(&json).expect("back"), job, "{json}");
        }
    }
}
