//! headroom-train: training on libtorch through tch.
//!
//! Today this crate proves the libtorch link ([`libtorch_check`]); the ONNX → libtorch lowering,
//! segments with checkpointing, the YOLOv8 loss and the training loop build on it.
//!
//! libtorch is behind the `libtorch` feature (on by default). Without it the crate still builds
//! and every entry point returns [`Error::FeatureDisabled`], so the pure parts of headroom
//! (and the aarch64 build without native libraries) need no libtorch.

#[cfg(feature = "libtorch")]
mod check;
mod error;

pub use error::{Error, Result};

/// What [`libtorch_check`] measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LibtorchReport {
    /// The libtorch version tch was built for.
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
