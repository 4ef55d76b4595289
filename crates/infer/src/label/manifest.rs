//! `manifest.json` of a labelled dataset: the teacher (with its SHA-256), the settings, the provider
//! that ran, counts, the train/val split, skipped images, human-label conflicts and timing. Written when a run starts
//! (`status: running`) and when it ends (`complete`), atomically.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::class_map::ClassMap;
use super::output::{Conflict, SkippedImage};
use super::split::SplitSummary;
use crate::decode::OutputLayout;
use crate::provider::ExecutionProvider;
use crate::{Error, Result};

/// The manifest's file name in the dataset folder.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The teacher model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TeacherInfo {
    /// The ONNX file.
    pub path: PathBuf,
    /// SHA-256 of its bytes, lowercase hex.
    pub sha256: String,
    /// Input width and height.
    pub input_size: [u32; 2],
    /// The output layout, when the output shape is static.
    pub layout: Option<OutputLayout>,
    /// Teacher class names.
    pub names: Vec<String>,
}

/// The settings that decide the labels: a rerun with other settings must not mix its labels in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSettings {
    /// Minimum confidence.
    pub confidence: f32,
    /// NMS IoU threshold.
    pub iou: f32,
    /// Maximum detections per image.
    pub max_detections: usize,
    /// Class-agnostic NMS.
    pub agnostic_nms: bool,
    /// Boxes narrower or lower than this, in image pixels, are dropped.
    pub min_box: f32,
    /// Pre-NMS candidates stored per image.
    pub top_k: usize,
    /// Teacher → student classes.
    pub class_map: ClassMap,
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelCounts {
    /// Images found under `--images`.
    pub images: usize,
    /// Images labelled by this run.
    pub labelled: usize,
    /// Images skipped because an earlier run finished them.
    pub already_done: usize,
    /// Images skipped as unreadable or unplaceable (listed in `skipped`).
    pub skipped: usize,
    /// Images whose labels went beside a human label file (listed in `conflicts`).
    pub conflicts: usize,
    /// Boxes in the dataset's teacher labels: written by this run and by the earlier runs it resumed.
    pub boxes: usize,
    /// Boxes per student class, likewise.
    pub boxes_per_class: Vec<usize>,
    /// Boxes dropped because the class map drops their teacher class.
    pub dropped_unmapped: usize,
    /// Boxes dropped by `--min-box`.
    pub dropped_small: usize,
    /// Older images left out by `--max-images` (not counted in `images`).
    #[serde(default)]
    pub beyond_max: usize,
    /// Images left out because their bytes are those of an image of an `--exclude-like` val split
    /// (a holdout or old-scene image in the folder of new images; not counted in `images`).
    #[serde(default)]
    pub excluded: usize,
}

/// Whether a run finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// Started and not (yet) finished: killed runs leave this.
    Running,
    /// Finished.
    Complete,
    /// Stopped by a signal (Ctrl-C, SIGTERM) after writing the images in flight; rerun to resume.
    Interrupted,
    /// Stopped by an error (or no image could be read); rerun to resume once it is fixed.
    Failed,
}

/// The whole manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelManifest {
    /// The headroom version that wrote it.
    pub headroom_version: String,
    /// Whether the run finished.
    pub status: RunStatus,
    /// The teacher.
    pub teacher: TeacherInfo,
    /// The settings.
    pub settings: LabelSettings,
    /// The execution provider that really ran the teacher (with the torch runtime: `cpu`, or
    /// `cuda` for its GPU).
    pub provider: ExecutionProvider,
    /// The runtime that ran it (manifests written before there was a choice: ONNX Runtime).
    #[serde(default)]
    pub runtime: super::teacher::LabelRuntime,
    /// Whether it computed in half precision (the torch runtime on CUDA: fp16 autocast).
    #[serde(default)]
    pub half: bool,
    /// The image folder.
    pub images: PathBuf,
    /// Images copied (`true`) or symlinked into `images/`.
    pub copied_images: bool,
    /// Images hard-linked into `images/` (copied where the file systems differ).
    #[serde(default)]
    pub hardlinked_images: bool,
    /// Images per inference call.
    pub batch: usize,
    /// Image decoding threads.
    pub workers: usize,
    /// Inference streams (sessions running in parallel).
    #[serde(default = "one")]
    pub streams: usize,
    /// Counts.
    pub counts: LabelCounts,
    /// The train/val split: fraction, seed and the labelled images in each split.
    #[serde(default)]
    pub split: SplitSummary,
    /// Skipped images with reasons.
    pub skipped: Vec<SkippedImage>,
    /// Human label files kept, and where the teacher's labels went.
    pub conflicts: Vec<Conflict>,
    /// Wall time of the whole run (teacher hashing, planning, warm-up, labelling), seconds.
    pub wall_seconds: f64,
    /// Time of the labelling pipeline itself (first image read to last file committed), seconds.
    #[serde(default)]
    pub pipeline_seconds: f64,
    /// Images labelled per second of pipeline time (the throughput; warm-up and setup excluded, as
    /// a bare inference loop excludes its first call).
    pub images_per_second: f64,
}

impl LabelManifest {
    /// What ran the teacher, in words: `cpu` (ONNX Runtime's provider), `torch cpu`, `torch cuda fp16`.
    pub fn runs_on(&self) -> String {
        match self.runtime {
            super::teacher::LabelRuntime::Onnxruntime => self.provider.to_string(),
            super::teacher::LabelRuntime::Torch => {
                format!("torch {}{}", self.provider, if self.half { " fp16" } else { "" })
            }
        }
    }

    /// Reads `DATASET/manifest.json`; `Ok(None)` when there is none.
    pub fn read(dataset: &Path) -> Result<Option<Self>> {
        let path = dataset.join(MANIFEST_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::Core(headroom_core::Error::io(&path, e))),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| Error::Core(headroom_core::Error::Json { path, source }))
    }

    /// Writes `DATASET/manifest.json` atomically.
    pub fn write(&self, dataset: &Path) -> Result<()> {
        let path = dataset.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self)
            .map_err(|source| Error::Core(headroom_core::Error::Json { path: path.clone(), source }))?;
        Ok(headroom_core::fsio::write_atomic(&path, (text + "\n").as_bytes())?)
    }

    /// Why labels of this run may not join those of `previous` (another teacher or other settings),
    /// or `None` when they may.
    pub fn incompatibility(&self, previous: &Self) -> Option<String> {
        if previous.teacher.sha256 != self.teacher.sha256 {
            return Some(format!(
                "was labelled by another teacher (sha256 {} there, {} now)",
                previous.teacher.sha256, self.teacher.sha256
            ));
        }
        (previous.settings != self.settings).then(|| {
            format!(
                "was labelled with other settings ({} there, {} now)",
                serde_json::to_string(&previous.settings).unwrap_or_default(),
                serde_json::to_string(&self.settings).unwrap_or_default()
            )
        })
    }
}

fn one() -> usize {
    1
}

/// The manifest as `headroom label` prints it: the counts, the boxes, the split, each skipped image.
impl std::fmt::Display for LabelManifest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let c = &self.counts;
        writeln!(
            f,
            "labelled {} of {} images ({} already done, {} skipped, {} beside human labels) in {:.1} s ({:.1} \
             images/s, {})",
            c.labelled,
            c.images,
            c.already_done,
            c.skipped,
            c.conflicts,
            self.wall_seconds,
            self.images_per_second,
            self.runs_on()
        )?;
        writeln!(
            f,
            "boxes: {} ({} dropped by the class map, {} by --min-box)",
            c.boxes, c.dropped_unmapped, c.dropped_small
        )?;
        let split = &self.split;
        if split.val > 0 {
            writeln!(
                f,
                "split: {} train, {} val (--val-fraction {}, --seed {}; {} and {})",
                split.train,
                split.val,
                split.val_fraction,
                split.seed,
                super::split::TRAIN_LIST,
                super::split::VAL_LIST
            )?;
        } else {
            writeln!(
                f,
                "split: none held out (--val-fraction {}): val is the {} training images",
                split.val_fraction, split.train
            )?;
        }
        for s in &self.skipped {
            writeln!(f, "skipped {}: {}", s.path.display(), s.reason)?;
        }
        Ok(())
    }
}
