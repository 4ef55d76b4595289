//! headroom-core: the pure foundation every other crate builds on.
//!
//! - [`boxes`]: box formats, IoU, class-aware and class-agnostic NMS.
//! - [`letterbox`]: Ultralytics' letterbox (resize with OpenCV's bilinear rounding, pad 114) and its
//!   inverse box mapping.
//! - [`preprocess`]: Ultralytics' `predict` and `val` image preparation (val resizes first, then
//!   letterboxes without enlarging) and the pixel space each matches boxes in.
//! - [`dataset`]: the Ultralytics dataset layout (`data.yaml`, images/ ↔ labels/) and COCO JSON.
//! - [`metrics`]: precision, recall, AP per class, mAP50 and mAP50-95 as Ultralytics computes them.
//! - [`hash`]: SHA-256 of bytes and of files, as hex.
//! - [`cuda_code`]: the GPU architectures a CUDA library carries code for (its `.nv_fatbin`), and
//!   whether that code runs on a given device (Orin's sm_87 among them).
//! - [`tegra_memory`]: a run's memory as a Jetson counts it (nvmap growth from `/proc/meminfo` plus
//!   the anonymous resident set).
//! - [`synth`]: the deterministic synthetic shapes generator behind `headroom synth`.
//!
//! Nothing here links a native library: this crate builds and tests on any target.

pub mod boxes;
pub mod cuda_code;
pub mod dataset;
mod error;
pub mod fsio;
pub mod hash;
pub mod imageio;
pub mod letterbox;
pub mod metrics;
pub mod preprocess;
pub mod process;
pub mod synth;
pub mod tegra_memory;

pub use error::{Error, ImageProblem, LabelProblem, Result, WriteState};
