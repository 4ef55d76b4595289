//! headroom-field: the parts of the nightly field loop (`headroom field`, docs/FIELD.md) as a
//! library, so that a test, a service or the loop itself reaches them without the binary.
//!
//! - [`field_run`]: one run, step by step, continued after a kill; [`runner`]: how its child steps
//!   run ([`runner::StepRunner`]; the binary's [`runner::ChildRunner`] runs them as child processes).
//! - [`step`]: the steps of a run, in order.
//! - [`state`]: a run's settings and `state.json` (which steps are done, failures and their tries),
//!   continuing a killed run, setting aside one that keeps failing.
//! - [`request`]: the typed request a child step is handed (one file, versioned, run by the
//!   binary's hidden `headroom step`).
//! - [`inputs`]: the loop's inputs checked before any work (detectors, classes, the state folder).
//! - [`sources`]: which new images the labelled set has, by content; a changed teacher relabels.
//! - [`quiet`]: whether tonight has any image the last finished run was not gated on.
//! - [`gate`]: the deploy gate's conditions and decision ([`gate_job`]: `field gate` on two
//!   files); [`report`]: evaluating both models for it
//!   (ONNX Runtime) and the run's summary and Markdown report.
//! - [`deploy`]: atomic deploy, rollback, and the temporaries a kill leaves; [`deployment`]: the
//!   engine beside the deployed model and the records of what was deployed; [`served`]: a served
//!   file's precision and the FP32 model it came from.
//! - [`disk`]: free space before training, and the history's bound.
//! - [`metrics`]: the night's outcome in Prometheus' text format, for a fleet.
//! - [`calendar`]: systemd `OnCalendar` expressions, checked before a timer is written;
//!   [`service`]: the systemd service and timer of the nightly run.

#[cfg(feature = "onnxruntime")]
pub mod ask;
pub mod calendar;
pub mod deploy;
pub mod deployment;
pub mod detector;
pub mod disk;
mod error;
#[cfg(feature = "onnxruntime")]
pub mod field_run;
pub mod gate;
#[cfg(feature = "onnxruntime")]
pub mod gate_job;
pub mod inputs;
pub mod metrics;
#[cfg(feature = "onnxruntime")]
mod preflight;
pub mod quiet;
pub mod report;
pub mod request;
pub mod runner;
pub mod served;
pub mod service;
pub mod sources;
pub mod state;
pub mod step;

pub use error::{Context, Error, Result};
pub(crate) use error::{bail, ensure};
