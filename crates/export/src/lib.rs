//! headroom-export: deployable variants of a detector (`headroom export`, docs/ONNX.md "FP16
//! export", "INT8 export", "Writing the files") as a library, so that the binary, the field loop
//! and a test reach them alike:
//!
//! - FP16: weights and compute in float16, inputs, outputs and the head's decode in float32;
//! - INT8: Q/DQ ONNX (per-channel int8 weights, per-tensor int8 activations on every Conv outside
//!   the decode) calibrated on images, plus the TensorRT calibration cache for implicit INT8; a
//!   sensitivity search keeps the Convs whose quantization hurts most in float until the mAP drop
//!   is within bounds;
//! - engines: TensorRT engines built with trtexec where it exists, else the commands to run on the
//!   device.
//!
//! Each file is measured against the FP32 one (size, ONNX Runtime time per image, mAP50-95 on a val
//! split when given). The files of one export appear together or not at all (a journal; a stopped one is completed or removed by the next).
//!
//! - [`request`]: what to make ([`ExportRequest`]); [`job`]: one `headroom export` as a value
//!   ([`ExportJob`], the flags' or the field loop's); [`run`]: making it ([`export`]);
//!   [`report`]: what was made ([`ExportReport`], `headroom export --json`);
//!   [`observer`]: progress and stop requests.

mod engine;
mod error;
#[cfg(feature = "onnxruntime")]
mod int8;
pub mod job;
pub mod observer;
mod publish;
pub mod report;
pub mod request;
pub mod run;

pub use error::{Context, Error, Result};
pub use job::{ExportJob, QatSettings};
pub use observer::{Observer, Silent, Stage};
pub use report::{EngineRow, ExportReport, FileRow, Int8Summary, SensitivityStep};
pub use request::{Board, Calibration, EngineSettings, ExportRequest, Int8Settings};
pub use run::{Exported, export};
