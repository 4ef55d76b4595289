//! One `headroom label` as a value, [`LabelJob`]: what the command line's flags ask, or what the
//! field loop asks of its label step (serialized: `headroom_field::request`). The binary runs both
//! the same way: the flags become a job first. Its sessions, runtime and class map are resolved
//! where it runs.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::decode::DecodeOptions;
use crate::label::output::Placement;
use crate::provider::SessionRequest;

/// Images per inference call when not asked (`--batch`; a fixed batch is used as is).
pub const DEFAULT_BATCH: usize = 8;

/// What runs the teacher.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TeacherRuntime {
    /// torch where ONNX Runtime cannot reach the GPU that libtorch sees, else onnxruntime.
    #[default]
    Auto,
    /// ONNX Runtime, on the providers of --device/--ep.
    Onnxruntime,
    /// headroom's libtorch executor, on --device.
    Torch,
}

/// One labelling: what, into where, with which thresholds, on what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelJob {
    /// The teacher, an Ultralytics ONNX detector export.
    pub teacher: PathBuf,
    /// The folder of images (searched recursively).
    pub images: PathBuf,
    /// The dataset folder to write; a rerun resumes it.
    pub out: PathBuf,
    /// Thresholds (predict's conventions, one class per box).
    pub decode: DecodeOptions,
    /// Teacher → student classes: a file, or inline `0=2,1=0` (`None`: identity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_map: Option<String>,
    /// Boxes narrower or lower than this many image pixels are dropped.
    #[serde(default)]
    pub min_box: f32,
    /// Pre-NMS candidates stored per image (0: none).
    #[serde(default)]
    pub top_k: usize,
    /// Decoding and letterboxing threads (`None`: a quarter of the threads, at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Images per inference call when the teacher's batch is dynamic.
    pub batch: usize,
    /// Inference sessions in parallel (`None`: 2 on the CPU provider with 2 or more threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub streams: Option<u16>,
    /// How images are put into the dataset.
    #[serde(default)]
    pub images_as: Placement,
    /// Datasets whose val images are never labelled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_like: Vec<PathBuf>,
    /// The dataset's bound: the newest images besides every human-labelled one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_images: Option<usize>,
    /// Relabel finished images too, and accept another teacher, settings or split.
    #[serde(default)]
    pub force: bool,
    /// Fraction held out as the val split (`None`: the dataset's recorded one, else the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub val_fraction: Option<f64>,
    /// Seed of the split's hash (`None`: the dataset's recorded one, else 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Images modified more recently are left for a later run.
    #[serde(default)]
    pub settle: Duration,
    /// Images with more pixels are left unlabelled, before decoding (`None`: Pillow's limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pixels: Option<u64>,
    /// What runs the teacher.
    #[serde(default)]
    pub runtime: TeacherRuntime,
    /// Where ONNX Runtime's sessions run, on which providers, with how many threads (libtorch's
    /// device and threads too, with the torch runtime).
    pub session: SessionRequest,
    /// Print the manifest as JSON on stdout.
    #[serde(default)]
    pub json: bool,
}

impl LabelJob {
    /// `teacher` labelling `images` into `out` on `session`, every other setting as `headroom
    /// label` has it by default (predict's thresholds, symbolic links, no bound, no settle time).
    pub fn new(teacher: PathBuf, images: PathBuf, out: PathBuf, session: SessionRequest) -> LabelJob {
        LabelJob {
            teacher,
            images,
            out,
            decode: DecodeOptions::predict(),
            class_map: None,
            min_box: 0.0,
            top_k: 0,
            workers: None,
            batch: DEFAULT_BATCH,
            streams: None,
            images_as: Placement::default(),
            exclude_like: Vec::new(),
            max_images: None,
            force: false,
            val_fraction: None,
            seed: None,
            settle: Duration::ZERO,
            max_pixels: None,
            runtime: TeacherRuntime::default(),
            session,
            json: false,
        }
    }

    /// Refuses settings no labelling can run with, naming the flag.
    pub fn check(&self) -> crate::Result<()> {
        let refuse = |message: String| Err(crate::Error::Mismatch { message });
        if self.min_box.is_nan() || self.min_box < 0.0 {
            return refuse(format!("--min-box {} is negative", self.min_box));
        }
        if !(0.0..=1.0).contains(&self.decode.confidence) {
            return refuse(format!("--conf {} is not in [0, 1]", self.decode.confidence));
        }
        if !(0.0..=1.0).contains(&self.decode.iou) {
            return refuse(format!("--iou {} is not in [0, 1]", self.decode.iou));
        }
        if let Some(fraction) = self.val_fraction {
            crate::label::split::check_fraction(fraction)
                .or_else(|e| refuse(format!("--val-fraction: {e}")))?;
        }
        if !self.images.is_dir() {
            return refuse(format!("--images {}: not a folder of images", self.images.display()));
        }
        if self.out.exists() && !self.out.is_dir() {
            return refuse(format!(
                "--out {}: exists and is not a folder; give a folder for the dataset",
                self.out.display()
            ));
        }
        Ok(())
    }

    /// `--class-map` read: `(where it came from, its text)`, the file's when it names one, else the
    /// inline map (`--class-map`); `None` without one.
    pub fn class_map(&self) -> crate::Result<Option<(String, String)>> {
        match &self.class_map {
            None => Ok(None),
            Some(spec) if std::path::Path::new(spec).is_file() => {
                let text = std::fs::read_to_string(spec).map_err(|e| crate::Error::ClassMap {
                    source_name: spec.clone(),
                    reason: format!("reading it: {e}"),
                })?;
                Ok(Some((spec.clone(), text)))
            }
            Some(spec) => Ok(Some(("--class-map".to_string(), spec.clone()))),
        }
    }

    /// What [`crate::label::label_folder`] is asked: this job with `workers` decoding threads, its
    /// class map read ([`LabelJob::class_map`]), stopping when `cancel` is set.
    #[cfg(feature = "onnxruntime")]
    pub fn request(
        &self,
        workers: usize,
        class_map: Option<(String, String)>,
        cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    ) -> crate::label::LabelRequest {
        crate::label::LabelRequest {
            images: self.images.clone(),
            out: self.out.clone(),
            decode: self.decode,
            min_box: self.min_box,
            top_k: self.top_k,
            class_map,
            exclude_like: self.exclude_like.clone(),
            images_as: self.images_as,
            max_images: self.max_images,
            force: self.force,
            val_fraction: self.val_fraction,
            seed: self.seed,
            pipeline: crate::label::pipeline::PipelineSettings {
                workers,
                batch: self.batch,
                queue: 4 * self.batch.max(4),
                settle: self.settle,
                max_pixels: self.max_pixels.unwrap_or(headroom_core::imageio::MAX_PIXELS),
            },
            cancel,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(images: PathBuf) -> LabelJob {
        LabelJob {
            images_as: Placement::Hardlink,
            exclude_like: vec!["/srv/holdout/data.yaml".into()],
            max_images: Some(5000),
            settle: Duration::from_secs(2),
            max_pixels: Some(1 << 20),
            json: true,
            ..LabelJob::new(
                "/srv/teacher.onnx".into(),
                images,
                "/srv/work/labelled".into(),
                SessionRequest::cpu(2),
            )
        }
    }

    #[test]
    fn a_job_round_trips_through_json_and_is_checked_as_the_flags_are() {
        let dir = std::env::temp_dir();
        let asked = job(dir.clone());
        let json = serde_json::to_string(&asked).expect("json");
        assert_eq!(serde_json::from_str::<LabelJob>(&json).expect("back"), asked, "{json}");
        asked.check().expect("a good job");
        let bad = LabelJob { min_box: -1.0, ..job(dir.clone()) };
        assert!(bad.check().expect_err("negative").to_string().contains("--min-box -1"));
        let bad =
            LabelJob { decode: DecodeOptions { iou: 2.0, ..DecodeOptions::predict() }, ..job(dir.clone()) };
        assert!(bad.check().expect_err("iou").to_string().contains("--iou 2"));
        let bad = LabelJob { val_fraction: Some(1.0), ..job(dir) };
        assert!(bad.check().expect_err("fraction").to_string().contains("--val-fraction"));
        let missing = job("/no/such/images".into());
        assert!(missing.check().expect_err("no folder").to_string().contains("not a folder of images"));
    }
}
