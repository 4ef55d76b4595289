//! headroom-infer: ONNX Runtime sessions and what runs on them — detection, pseudo-labelling,
//! evaluation.
//!
//! - [`decode`] (pure): output layouts and decoding with NMS.
//! - [`provider`] (pure): execution provider settings.
//! - [`runtime`] and [`detector`] (feature `onnxruntime`, on by default): ONNX Runtime loaded at run
//!   time from `ORT_DYLIB_PATH` (scripts/setup.sh installs it), else from the install bundle's
//!   `lib/` beside the binary's folder, else the loader's search path; and a detector that letterboxes,
//!   runs, decodes and maps boxes back to the image.
//! - [`eval`]: precision, recall and mAP of a detector on a dataset split.
//! - [`label`]: pseudo-labelling a folder of images with a teacher (`headroom label`).
//! - [`calibrate`]: INT8 calibration statistics through ONNX Runtime (`headroom export --int8`).
//! - [`soft_scores`] (pure): the per-image soft-score file format.
//! - [`preview`] (pure): mosaics of images with their boxes (val predictions and labels, pseudo-labels).

#[cfg(feature = "onnxruntime")]
pub mod calibrate;
pub mod decode;
#[cfg(feature = "onnxruntime")]
pub mod detector;
#[cfg(feature = "onnxruntime")]
pub mod doctor;
mod error;
pub mod eval;
pub mod label;
pub mod preview;
#[cfg(feature = "onnxruntime")]
pub mod probe;
pub mod provider;
#[cfg(feature = "onnxruntime")]
pub mod runtime;
pub mod soft_scores;
#[cfg(feature = "onnxruntime")]
pub mod trunk;

pub use error::{Error, Result};
