//! Pseudo-labelling with a teacher detector: `headroom label` (docs/LABEL.md).
//!
//! - [`job`]: one `headroom label` as a value ([`job::LabelJob`]: the flags', or the field loop's
//!   label step's, serialized for its child).
//! - [`class_map`]: teacher → student classes.
//! - [`output`]: the output dataset, resuming, human-label protection, atomic per-image writes.
//! - [`pipeline`] (feature `onnxruntime`): worker threads → inference → writer, bounded queues.
//! - [`manifest`]: `manifest.json`, what a run did and with what.
//! - [`teacher`]: what the pipeline needs of a teacher, run by ONNX Runtime or by libtorch.
//! - [`split`]: the seeded, stable train/val split and the `data.yaml` that names it.
//! - [`preview`]: `labels_preview.jpg`, some labelled images with their boxes.

pub mod class_map;
pub mod job;
pub mod manifest;
pub mod output;
#[cfg(feature = "onnxruntime")]
pub mod pipeline;
pub mod preview;
#[cfg(feature = "onnxruntime")]
mod run;
pub mod split;
pub mod teacher;

pub use class_map::ClassMap;
pub use manifest::{LabelCounts, LabelManifest, LabelSettings, TeacherInfo};
#[cfg(feature = "onnxruntime")]
pub use run::{LabelRequest, label_folder};
pub use split::SplitSummary;
pub use teacher::LabelRuntime;
#[cfg(feature = "onnxruntime")]
pub use teacher::TeacherModel;
