//! The one error type of `headroom-train`.

use std::path::PathBuf;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `headroom-train`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A training image or its labels could not be read.
    #[error("training data: {reason}")]
    Data {
        /// What went wrong, naming the file.
        reason: String,
    },
    /// A file of the run (checkpoint, feature cache, metrics.csv, plot, chart) cannot be read or
    /// written.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong and what to do.
        reason: String,
    },
    /// The loss stopped being finite.
    #[error(
        "{count} non-finite losses in a row (epoch {epoch}, pass {pass}): lower --lr0, or check the labels"
    )]
    Diverged {
        /// Non-finite losses in a row.
        count: usize,
        /// The epoch.
        epoch: usize,
        /// The pass in the epoch.
        pass: usize,
    },
    /// metrics.csv cannot be plotted, or the plot's font cannot be loaded.
    #[error("{reason}")]
    Plot {
        /// What is wrong, naming the file and line.
        reason: String,
    },
    /// ONNX Runtime failed on the frozen trunk or the teacher.
    #[error("{reason}")]
    Runtime {
        /// ONNX Runtime's error, naming the model.
        reason: String,
    },
    /// A check of `headroom doctor` computed something wrong.
    #[error("{reason}")]
    Check {
        /// What was wrong.
        reason: String,
    },
    /// The loss was given head outputs or targets that do not fit each other.
    #[error("loss: {reason}")]
    Loss {
        /// What does not fit.
        reason: String,
    },
    /// This build of headroom was made without the native library that the call needs.
    #[error(
        "this headroom was built without the `{feature}` feature: rebuild with `--features {feature}` (scripts/setup.sh installs libtorch)"
    )]
    FeatureDisabled {
        /// The cargo feature to enable.
        feature: &'static str,
    },
    /// An op could not be run on libtorch.
    #[error("{}: node `{node}` ({op_type}): {reason}", path.display())]
    Lower {
        /// The model file.
        path: PathBuf,
        /// The node's name.
        node: String,
        /// Its op type.
        op_type: String,
        /// What went wrong.
        reason: String,
    },
    /// A tensor name that the graph does not have.
    #[error("the graph has no tensor `{name}`")]
    UnknownTensor {
        /// The name asked for.
        name: String,
    },
    /// A tensor with the wrong shape.
    #[error("tensor `{name}` has shape {found:?}, {expected:?} expected")]
    Shape {
        /// The tensor.
        name: String,
        /// The shape it must have.
        expected: Vec<i64>,
        /// The shape given.
        found: Vec<i64>,
    },
    /// libtorch could not allocate memory for a training pass.
    #[error(
        "out of memory during a training pass ({reason}): use --batch 1 (gradients still accumulate to --nbs), \
         keep checkpointing on (no --no-checkpoint), train less (--train head), or a smaller input \
         (an export at a smaller imgsz); `headroom plan` estimates what fits"
    )]
    OutOfMemory {
        /// libtorch's message.
        reason: String,
    },
    /// A setting is out of its bounds (from the command line or a run's `config.toml`).
    #[error("setting `{key}`: {reason}")]
    Config {
        /// The key as `config.toml` spells it.
        key: String,
        /// What is wrong and what it must be.
        reason: String,
    },
    /// One of libtorch's list-of-tensor kernels (fused AdamW, the foreach ops) failed.
    #[error("{what}: {reason}")]
    Foreach {
        /// What the kernel computed.
        what: &'static str,
        /// libtorch's message.
        reason: String,
    },
    /// The run was asked to stop (Ctrl-C, SIGTERM) and stopped at a checkpoint it resumes from.
    #[error("stopped on request; the run resumes from its last checkpoint")]
    Interrupted,
    /// Reading or writing a file failed (the message names it).
    #[error(transparent)]
    Core(#[from] headroom_core::Error),
    /// The model cannot be partitioned or inspected.
    #[error(transparent)]
    Onnx(#[from] headroom_onnx::Error),
    /// libtorch reported an error.
    #[cfg(feature = "libtorch")]
    #[error("libtorch: {}", torch_message(&.0.to_string()))]
    Torch(#[from] tch::TchError),
}

/// libtorch's message without the C++ stack trace it appends (`Exception raised from ...` and a
/// frame per line): its first line.
#[cfg(feature = "libtorch")]
pub(crate) fn torch_message(text: &str) -> &str {
    let text = text.strip_prefix("Internal torch error: ").unwrap_or(text);
    text.lines().next().unwrap_or_default().trim_end()
}

#[cfg(all(test, feature = "libtorch"))]
mod tests {
    #[test]
    fn a_torch_message_loses_its_stack_trace() {
        let text = "Internal torch error: not a ZIP archive. Check the file.\nException raised from valid at x.cc:242\nframe #0: c10::Error";
        assert_eq!(super::torch_message(text), "not a ZIP archive. Check the file.");
    }
}
