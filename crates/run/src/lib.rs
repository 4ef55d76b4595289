//! headroom-run: one training run as a library object.
//!
//! - [`spec::RunSpec`]: every setting of a run, validated in one place, saved as the run folder's
//!   `config.toml` before training starts, and the only source of settings on resume.
//! - [`run::start`] / [`run::resume`]: the whole run — inputs, folder and lock, trunk source,
//!   epochs, validation in ONNX Runtime, `best.onnx`/`last.onnx`, metrics, plots, checkpoints,
//!   out-of-memory step-down, stop requests — reporting through an [`observer::Observer`].
//! - [`request::RunRequest`]: what a caller asks for, setting by setting, resolved into a spec
//!   (every derived value derived there) for a new run or against a saved one on resume.
//! - [`job::TrainJob`]: one `headroom train` as a value (a new run's request or a resume, and how
//!   it is carried out), from the flags or from the field loop.
//! - [`preset`]: run presets (`configs/runs.toml`), typed: `headroom train --preset` and `headroom
//!   field run --preset` read them here; their training keys are a layer of a request.
//! - [`planner`]: the memory planner's view of a run, and `--plan auto`.
//! - [`folder`]: the run folder's files besides checkpoints.
//! - `label_torch`: the teacher of `headroom label --runtime torch`, on libtorch.
//! - `parity`: the executor against ONNX Runtime on one model (`headroom inspect --check`).
//! - `val_plots`: `best.onnx` validated at the end, with Ultralytics' PR curve, confusion matrices
//!   and val mosaics.
//!
//! The run needs libtorch and ONNX Runtime (features `libtorch`, `onnxruntime`, on by default);
//! without them the spec and the folder's files still build.

mod error;
pub mod folder;
pub mod job;
pub mod model_checks;
pub mod observer;
pub mod planner;
pub mod preset;
pub mod request;
pub mod spec;

#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
mod batch_speed;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod device;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
mod epochs;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod inputs;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod label_torch;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod parity;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod qat;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod renorm;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod run;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod teacher;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
mod trunk;
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub mod val_plots;

pub use error::{Error, Result};
/// The bounds of every training setting (`--epochs`, `--time`, `lr0`, …), shared by the flags,
/// the presets and the spec's validation.
pub use headroom_train::config::limits;
