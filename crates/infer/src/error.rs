//! The one error type of `headroom-infer`.

use std::path::PathBuf;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `headroom-infer`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This build of headroom was made without the native library the call needs.
    #[error("this headroom was built without the `{feature}` feature: rebuild with `--features {feature}`")]
    FeatureDisabled {
        /// The cargo feature to enable.
        feature: &'static str,
    },
    /// The ONNX Runtime shared library could not be found or loaded.
    #[error(
        "cannot load ONNX Runtime from `{path}`: {reason} (looked at: {tried}; set ORT_DYLIB_PATH to a libonnxruntime.so of 1.20 or newer, put it in the lib/ folder beside the binary's bin/, or in a clone run scripts/setup.sh and source .deps/env.sh)"
    )]
    RuntimeLoad {
        /// The library path loaded.
        path: PathBuf,
        /// Every place looked at, in order.
        tried: String,
        /// What the loader said.
        reason: String,
    },
    /// An execution provider is compiled in but ONNX Runtime would not register it.
    #[error(
        "execution provider {provider} failed to register: {reason}; pass --ep-fallback to use the next one"
    )]
    ProviderUnavailable {
        /// The provider.
        provider: crate::provider::ExecutionProvider,
        /// What ONNX Runtime said.
        reason: String,
    },
    /// ONNX Runtime rejected a model or failed to run it.
    #[error("{path}: ONNX Runtime: {reason}")]
    Session {
        /// The model file.
        path: PathBuf,
        /// What ONNX Runtime said.
        reason: String,
    },
    /// The model's output is not one of the detector layouts headroom knows.
    #[error("model output shape {shape:?} is not a YOLO detector output: {reason}")]
    NotADetector {
        /// The output shape (-1 for dynamic dimensions).
        shape: Vec<i64>,
        /// Why it does not fit.
        reason: String,
    },
    /// The model's metadata could not be parsed.
    #[error("{path}: {source}")]
    Metadata {
        /// The model file.
        path: PathBuf,
        /// The parse error.
        source: headroom_onnx::MetadataError,
    },
    /// Settings that contradict each other (`--device cpu` with a GPU provider).
    #[error("{message}")]
    Settings {
        /// What disagrees and what to give instead.
        message: String,
    },
    /// The dataset and the model disagree (e.g. on the number of classes).
    #[error("{message}")]
    Mismatch {
        /// What differs and what to do.
        message: String,
    },
    /// A soft-score file is malformed or cannot be encoded.
    #[error("{path}: soft-score file: {reason}")]
    SoftScores {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A class map (`--class-map`) is malformed or names classes the teacher does not have.
    #[error("class map {source_name}: {reason}")]
    ClassMap {
        /// The file, or `--class-map` for an inline map.
        source_name: String,
        /// What is wrong, naming the entries at fault.
        reason: String,
    },
    /// The output dataset cannot be written or is not in a state headroom can continue.
    #[error("{path}: {reason}")]
    Output {
        /// The file or folder.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// A run stopped on request (a signal) after committing its finished work.
    #[error(
        "stopped on request after labelling {labelled} images ({remaining} left); rerun the same command to resume"
    )]
    Interrupted {
        /// Images labelled by this run.
        labelled: usize,
        /// Images still to label.
        remaining: usize,
    },
    /// A long step stopped on request (its progress callback said so) before it was done.
    #[error("{stage} stopped on request after {done} of {total} steps")]
    Cancelled {
        /// Which step (`calibration`).
        stage: &'static str,
        /// Steps done.
        done: usize,
        /// Steps in all.
        total: usize,
    },
    /// Every calibration image was refused by the image filter
    /// (`headroom_core::imageio::usable_image`); each was skipped with a warning.
    #[error(
        "none of the {total} calibration images can be used (each was skipped with a warning; the last: {last}): \
         give a folder or data.yaml with whole images"
    )]
    NoUsableImages {
        /// Images given.
        total: usize,
        /// Why the last one was skipped (it names the file).
        last: Box<headroom_core::Error>,
    },
    /// A pipeline thread stopped unexpectedly.
    #[error("the {stage} thread stopped unexpectedly (panicked)")]
    Pipeline {
        /// Which stage.
        stage: &'static str,
    },
    /// A dataset or image error from `headroom-core`.
    #[error(transparent)]
    Core(#[from] headroom_core::Error),
    /// A model error from `headroom-onnx`.
    #[error(transparent)]
    Onnx(#[from] headroom_onnx::Error),
    /// A picture that could not be drawn or written (`headroom-plot`).
    #[error(transparent)]
    Plot(#[from] headroom_plot::Error),
}
