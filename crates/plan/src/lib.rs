//! headroom-plan: training-memory planning from the model itself.
//!
//! - [`choice`]: the choices a run's memory depends on, one enum each ([`Optimizer`], [`TrunkRuntime`],
//!   [`DeviceChoice`] and, decided, [`RunsOn`]), and whether a run plans at all ([`PlanMode`]).
//! - [`devices`]: device presets (`configs/devices.toml`, embedded in the binary).
//! - [`budget`](mod@budget): the memory a plan may use (`--budget`: a preset's, a size, or this machine's
//!   free memory; less `--reserve`).
//! - [`memory`]: the estimate of one training configuration by component ([`memory::Planner`]),
//!   from the ONNX IR's inferred shapes, the trunk/trainable [`headroom_onnx::Partition`] and what
//!   libtorch's autograd saves per op ([`saved`], [`graph_memory`]).
//! - [`ladder`]: the fit-to-budget ladder (batch down with accumulation → checkpointing → AMP →
//!   freeze more → feature cache → imgsz down → a smaller student) and the in-run step-down after
//!   an out-of-memory error.
//!
//! Pure: no libtorch, no ONNX Runtime (`--budget auto` on a discrete GPU runs `nvidia-smi`).

use std::path::PathBuf;

pub mod budget;
pub mod choice;
pub mod devices;
pub mod graph_memory;
pub mod ladder;
pub mod memory;
pub mod saved;
pub mod size;

pub use budget::{Budget, Pool, budget, budget_on};
pub use choice::{DeviceChoice, Optimizer, PlanMode, Prefetch, RunsOn, TrunkRuntime};
pub use devices::{
    BUILTIN_DEVICES, Board, Detected, DevicePreset, SYSTEM_DEVICES, System, builtin_devices, detect,
    find_device, load_devices, parse_devices,
};
pub use ladder::{Candidate, MAX_MEASURED_BATCH, Plan, Risk, Rung, larger_batches, plan, step_down};
pub use memory::{Components, Estimate, Planner, Setup, TeacherCost};
pub use size::{BudgetSize, Bytes, format_size, parse_size};

/// Errors of `headroom-plan`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A device file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A device file is not valid (unknown key, wrong type, bad value).
    #[error("{path}: {message}")]
    Invalid {
        /// The file (`<builtin>` for the embedded presets).
        path: PathBuf,
        /// What is wrong, with line and column where the TOML parser gives them.
        message: String,
    },
    /// No preset has the requested name.
    #[error("unknown device `{name}`; known devices: {known}")]
    UnknownDevice {
        /// The name asked for.
        name: String,
        /// The names available.
        known: String,
    },
    /// `--board auto` found nothing to go on.
    #[error("--board auto: {reason}; give --board NAME")]
    Detect {
        /// What could not be read.
        reason: String,
    },
    /// The input size cannot be used with this export.
    #[error("input size {}x{}: {reason}", imgsz[0], imgsz[1])]
    ImageSize {
        /// `[height, width]` asked for.
        imgsz: [u32; 2],
        /// Why not.
        reason: String,
    },
    /// The model cannot be split or shaped for training.
    #[error(transparent)]
    Model {
        /// What the ONNX layer said.
        #[from]
        source: headroom_onnx::Error,
    },
    /// A configuration that cannot train.
    #[error("{reason}")]
    Setup {
        /// Why.
        reason: String,
    },
}
