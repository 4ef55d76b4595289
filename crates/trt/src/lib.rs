//! headroom-trt: TensorRT engines, built on the device by driving `trtexec` (present on every
//! JetPack), written as raw plans (no header of ours: DeepStream and `trtexec --loadEngine` read
//! them as they are) with a JSON sidecar.
//!
//! - [`trtexec`]: finding `trtexec`, the command line for an [`EngineRequest`] (fp16, int8 from a
//!   Q/DQ model, int8 from a calibration cache; static or dynamic shapes; workspace; timing cache),
//!   running it, and — without `trtexec` — an error holding the exact command to run on the device.
//! - [`engine`]: engine file names per device and TensorRT version, the `*.engine.json` sidecar.
//!
//! Unverified on hardware: the command lines follow TensorRT 10's `trtexec` reference and are
//! unit-tested, but no engine has been built from them on a Jetson yet.

pub mod engine;
pub mod trtexec;

use std::path::PathBuf;

pub use engine::{EngineInfo, InputShape, Precision, TrtVersion, engine_file_name};
pub use trtexec::{
    BuildOutput, EngineRequest, JETPACK_TRTEXEC, Shapes, build_engine, build_engine_unpublished,
    build_engine_with, find_trtexec, find_trtexec_in, trtexec_args,
};

/// Errors of `headroom-trt`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `trtexec` here: the engine must be built on the device, with this command.
    #[error(
        "trtexec not found (not given, not in $TRTEXEC, not at {JETPACK_TRTEXEC}, not on PATH); \
         build the engine on the device with:\n  {command}"
    )]
    TrtexecNotFound {
        /// The full command line to run on the device.
        command: String,
    },
    /// The request cannot be built (shapes out of order, a name trtexec cannot parse).
    #[error("engine request: {reason}")]
    Request {
        /// What is wrong.
        reason: String,
    },
    /// `trtexec` ran and failed, or wrote no engine.
    #[error("trtexec failed ({status}); its last lines:\n{tail}\ncommand: {command}")]
    BuildFailed {
        /// Exit status, or what went wrong.
        status: String,
        /// The last lines of its output.
        tail: String,
        /// The command that ran.
        command: String,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A sidecar is not valid JSON for [`EngineInfo`].
    #[error("{}: not an engine sidecar: {reason}", path.display())]
    Sidecar {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// Writing a file atomically failed.
    #[error(transparent)]
    Write(#[from] headroom_core::Error),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
