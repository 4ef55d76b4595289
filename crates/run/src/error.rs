//! The one error type of `headroom-run`.

use std::path::PathBuf;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can stop a training run before or while it trains.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting of the run is not usable (from the command line or `config.toml`).
    #[error("{key}: {reason}")]
    Spec {
        /// The setting, as the command line or `config.toml` names it.
        key: String,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A request the run refuses, in the words of the flag it names (`--lr0 2 is not in (0, 1)`).
    #[error("{0}")]
    Request(String),
    /// `config.toml` of a run cannot be read back.
    #[error("{}: {reason}", path.display())]
    SavedSpec {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A resumed run was given a setting that differs from the one it was started with.
    #[error(
        "{setting}: this run was started with {saved} (config.toml), the command line says {given}; a resumed \
         run keeps its settings (only --epochs may extend it): drop the flag, or start a new run with another --name"
    )]
    ResumeConflict {
        /// The setting, as `config.toml` names it.
        setting: String,
        /// What the run saved.
        saved: String,
        /// What the command line asked for.
        given: String,
    },
    /// The run folder cannot be used.
    #[error("{}: {reason}", dir.display())]
    Folder {
        /// The run folder.
        dir: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// An input of the run (dataset, replay set, soft scores) does not fit the model or the run.
    #[error("{}: {reason}", path.display())]
    Input {
        /// The file.
        path: PathBuf,
        /// What does not fit.
        reason: String,
    },
    /// Training failed.
    #[error(transparent)]
    Train(#[from] headroom_train::Error),
    /// ONNX Runtime (trunk, validation) failed.
    #[error(transparent)]
    Infer(#[from] headroom_infer::Error),
    /// Reading or writing a file failed.
    #[error(transparent)]
    Core(#[from] headroom_core::Error),
    /// The model could not be read or rewritten.
    #[error(transparent)]
    Onnx(#[from] headroom_onnx::Error),
    /// The memory planner failed.
    #[error(transparent)]
    Plan(#[from] headroom_plan::Error),
}
