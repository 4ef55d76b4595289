//! Evaluation of a detector on a labelled dataset split, with Ultralytics' `val` conventions
//! (conf 0.001, IoU 0.7, multi-label NMS, up to 300 detections).
//!
//! By default ([`Preprocess::Val`]) images are prepared as `val` prepares them and predictions are
//! matched to labels where `val` matches them: in the model input's pixels, predictions unclipped.
//! With [`Preprocess::Predict`] images are prepared as `predict` prepares them (what `headroom label`
//! does) and matching happens in original-image pixels, predictions clipped to the image — the
//! numbers an external evaluation of `predict`'s boxes would give.

use std::path::PathBuf;
#[cfg(feature = "onnxruntime")]
use std::time::Instant;

use headroom_core::boxes::Detection;
#[cfg(feature = "onnxruntime")]
use headroom_core::boxes::Xyxy;
#[cfg(feature = "onnxruntime")]
use headroom_core::dataset::ImageRecord;
use headroom_core::metrics::{ConfusionMatrix, DetectionStats, Metrics};
use headroom_core::preprocess::Preprocess;
use serde::Serialize;

use crate::decode::DecodeOptions;
use crate::provider::ExecutionProvider;
use crate::{Error, Result};

/// The result of an evaluation run.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// The model evaluated.
    pub model: PathBuf,
    /// The execution provider that ran it.
    pub provider: ExecutionProvider,
    /// Decoding thresholds used.
    pub decode: DecodeOptions,
    /// How images were prepared, and so where boxes were matched.
    pub preprocess: Preprocess,
    /// Class names (from the dataset).
    pub names: Vec<String>,
    /// The metrics.
    pub metrics: Metrics,
    /// Wall time of the evaluation, seconds.
    pub seconds: f64,
    /// The per-image matches the metrics come from, in `images` order (not serialised): what
    /// [`headroom_core::metrics::bootstrap::paired_map_difference`] resamples, without running the
    /// model again.
    #[serde(skip)]
    pub stats: DetectionStats,
    /// The confusion matrix of the same matches' images ([`ConfusionMatrix::new`]: detections above
    /// 0.25, IoU above 0.45), in the pixels where the metrics match (not serialised): what
    /// `confusion_matrix.png` draws.
    #[serde(skip)]
    pub confusion: ConfusionMatrix,
    /// The detections of the first [`crate::preview::MOSAIC_IMAGES`] images, in the original
    /// image's pixels (not serialised): what `val_batch0_pred.jpg` draws.
    #[serde(skip)]
    pub first_detections: Vec<Vec<Detection>>,
}

/// Checks that a model's class names fit a dataset's: same count (an error otherwise); a warning
/// when names differ.
pub fn check_classes(model_names: Option<&[String]>, data_names: &[String]) -> Result<()> {
    let Some(model_names) = model_names else {
        tracing::warn!("the model has no `names` metadata; assuming its classes are the dataset's");
        return Ok(());
    };
    if model_names.len() != data_names.len() {
        return Err(Error::Mismatch {
            message: format!(
                "the model has {} classes ({}) but the dataset has {} ({}): evaluate on a dataset of the model's classes",
                model_names.len(),
                model_names.join(", "),
                data_names.len(),
                data_names.join(", ")
            ),
        });
    }
    if model_names != data_names {
        tracing::warn!(
            ?model_names,
            ?data_names,
            "class names differ between model and dataset; using class ids"
        );
    }
    Ok(())
}

/// The metrics of `detector` on `images` as Ultralytics `val` computes them (its decoding and
/// preprocessing, no progress): what `train` and `export` report per file.
#[cfg(feature = "onnxruntime")]
pub fn val_metrics(
    detector: &mut crate::detector::Detector,
    images: &[ImageRecord],
    names: &[String],
) -> Result<headroom_core::metrics::Metrics> {
    let report = evaluate(
        detector,
        images,
        names,
        &DecodeOptions::val(),
        headroom_core::preprocess::Preprocess::Val,
        |_| {},
    )?;
    Ok(report.metrics)
}

/// Evaluates `detector` on `images`, preparing them as `preprocess` says, calling `progress` after
/// each image.
#[cfg(feature = "onnxruntime")]
pub fn evaluate(
    detector: &mut crate::detector::Detector,
    images: &[ImageRecord],
    names: &[String],
    decode: &DecodeOptions,
    preprocess: Preprocess,
    mut progress: impl FnMut(usize),
) -> Result<EvalReport> {
    check_classes(detector.metadata().names.as_deref(), names)?;
    let start = Instant::now();
    let mut stats = DetectionStats::new();
    let mut confusion = ConfusionMatrix::new(names.len());
    let mut first_detections = Vec::new();
    for (i, record) in images.iter().enumerate() {
        let image = headroom_core::imageio::read_rgb(&record.image)?;
        let geometry = detector.input_geometry(preprocess, image.width(), image.height());
        let mut detections = detector.detect_in_input(&image, &geometry, decode)?;
        let truth: Vec<(usize, Xyxy)> = match preprocess {
            Preprocess::Val => record.labels.iter().map(|l| (l.class, geometry.map_label(*l))).collect(),
            Preprocess::Predict => {
                for d in &mut detections {
                    d.bbox = geometry.unmap(d.bbox);
                }
                let (w, h) = image.dimensions();
                record.labels.iter().map(|l| (l.class, l.to_pixels(w, h))).collect()
            }
        };
        if i < crate::preview::MOSAIC_IMAGES {
            // Predict's are unmapped already.
            let mut original = detections.clone();
            if preprocess == Preprocess::Val {
                original.iter_mut().for_each(|d| d.bbox = geometry.unmap(d.bbox));
            }
            first_detections.push(original);
        }
        stats.add_image(&detections, &truth);
        confusion.add_image(&detections, &truth)?;
        progress(i + 1);
    }
    let metrics = stats.finish(names.len())?;
    Ok(EvalReport {
        model: PathBuf::from(detector.path()),
        provider: detector.provider(),
        decode: *decode,
        preprocess,
        names: names.to_vec(),
        metrics,
        seconds: start.elapsed().as_secs_f64(),
        stats,
        confusion,
        first_detections,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_count_mismatch_is_an_error_naming_both() {
        let model = vec!["a".to_string(), "b".to_string()];
        let data = vec!["a".to_string()];
        let err = check_classes(Some(&model), &data).expect_err("2 vs 1");
        assert!(err.to_string().contains("2 classes") && err.to_string().contains("has 1"), "{err}");
        assert!(check_classes(Some(&data), &data).is_ok());
        assert!(check_classes(None, &data).is_ok());
    }
}
