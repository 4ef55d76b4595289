//! The Ultralytics dataset layout and COCO JSON.
//!
//! - [`config`]: `data.yaml` ([`DataConfig::load`]), read as Ultralytics' `check_det_dataset` does.
//! - [`layout`]: the image list of a split and the images/ ↔ labels/ mapping ([`label_path_for`]).
//! - [`labels`]: YOLO label files, one `class cx cy w h` line per box, normalised to [0, 1].
//! - [`verify`]: image integrity checks (header, size, PNG chunks, JPEG end marker).
//! - [`load`]: [`load_split`], which checks every image and label and reports every problem.
//! - [`coco`]: COCO instances JSON in, COCO ground truth and detection results out.
//!
//! YAML is read with `serde_yaml_ng`: `serde_yaml` is archived and unmaintained, `serde_yml` had
//! soundness and maintenance problems, and `serde_yaml_ng` is a maintained fork with the same API.
//!
//! ```no_run
//! use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
//! # fn main() -> headroom_core::Result<()> {
//! let config = DataConfig::load("data.yaml".as_ref())?;
//! let val = load_split(&config, Split::Val, LoadOptions::default())?;
//! for record in &val.images {
//!     println!("{} {}x{}: {} boxes", record.image.display(), record.width, record.height, record.labels.len());
//! }
//! println!("{}", val.report.summary());
//! # Ok(())
//! # }
//! ```

pub mod coco;
pub mod config;
pub mod labels;
pub mod layout;
pub mod load;
pub mod verify;

pub use config::{DataConfig, Split};
pub use labels::YoloLabel;
pub use layout::{IMG_FORMATS, label_path_for};
pub use load::{
    ImageRecord, LoadOptions, LoadReport, LoadedSplit, largest_frame_cost, load_images, load_split,
};
