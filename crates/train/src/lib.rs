//! headroom-train: training on libtorch through tch.
//!
//! - [`Executor`]: an imported ONNX graph run op by op on libtorch with autograd (one lowering per
//!   op in `lower/`, matched exhaustively).
//! - [`Student`]: a detector split by [`headroom_onnx::Partition`] into a frozen trunk (no
//!   gradients) and trainable segments, with a plain or checkpointed backward.
//! - [`loss`]: Ultralytics' detection loss (task-aligned assignment, CIoU, DFL or L1, BCE) on raw
//!   head outputs.
//! - [`libtorch_check`]: proof that libtorch is linked and trains.
//!
//! libtorch is behind the `libtorch` feature (on by default). Without it the crate still builds
//! and every entry point returns [`Error::FeatureDisabled`], so the pure parts of headroom
//! (and the aarch64 build without native libraries) need no libtorch.

#[cfg(feature = "libtorch")]
mod amp;
pub mod augment;
#[cfg(feature = "libtorch")]
pub mod cache;
#[cfg(feature = "libtorch")]
mod check;
#[cfg(feature = "libtorch")]
mod checkpoint;
pub mod config;
#[cfg(feature = "libtorch")]
pub mod data;
#[cfg(feature = "libtorch")]
pub mod ema;
mod error;
#[cfg(feature = "libtorch")]
pub mod executor;
#[cfg(feature = "libtorch")]
pub mod loss;
#[cfg(feature = "libtorch")]
mod lower;
pub mod memory_guard;
#[cfg(feature = "libtorch")]
pub mod optim;
#[cfg(feature = "libtorch")]
pub mod probe;
pub mod schedule;
pub mod state;
#[cfg(feature = "libtorch")]
pub mod student;
#[cfg(feature = "libtorch")]
pub mod trainer;

pub use error::{Error, Result};
#[cfg(feature = "libtorch")]
pub use executor::Executor;
#[cfg(feature = "libtorch")]
pub use student::{Cut, Student};
#[cfg(feature = "libtorch")]
pub use tch;

/// The libtorch version whose headers tch's C++ wrapper was compiled against (`build.rs` reads the
/// `TORCH_VERSION_*` defines of the LIBTORCH that torch-sys used); `unknown`
/// without the `libtorch` feature.
pub const LIBTORCH_HEADERS: &str = env!("HEADROOM_LIBTORCH_HEADERS");

/// Whether libtorch sees a CUDA device (false without the `libtorch` feature).
pub fn cuda_available() -> bool {
    #[cfg(feature = "libtorch")]
    {
        tch::Cuda::is_available()
    }
    #[cfg(not(feature = "libtorch"))]
    {
        false
    }
}

/// What [`libtorch_check`] measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LibtorchReport {
    /// The libtorch version whose headers tch was compiled against ([`LIBTORCH_HEADERS`]).
    pub version: &'static str,
    /// Whether libtorch sees a CUDA device.
    pub cuda_available: bool,
    /// Intra-op threads libtorch uses.
    pub threads: i32,
    /// Loss of the tiny convolution before the optimiser steps.
    pub loss_before: f64,
    /// Loss after the optimiser steps (lower when autograd and Adam work).
    pub loss_after: f64,
}

/// Runs a small convolution forward, backward and Adam steps on the CPU and reports the loss before
/// and after: proof that libtorch is linked, loads, computes gradients and updates weights.
pub fn libtorch_check() -> Result<LibtorchReport> {
    #[cfg(feature = "libtorch")]
    {
        check::run()
    }
    #[cfg(not(feature = "libtorch"))]
    {
        Err(Error::FeatureDisabled { feature: "libtorch" })
    }
}
