//! The end of a finished run, as Ultralytics' final validation ends one: `best.onnx` evaluated once
//! on the val split (its metrics go into `results.json` and the terminal's table) and the pictures
//! Ultralytics users know written into the run folder ([`crate::folder::VAL_PLOT_FILES`]). A picture
//! that cannot be drawn is a warning, never a failed run.

use std::path::Path;

use headroom_core::dataset::ImageRecord;
use headroom_core::metrics::Metrics;
use headroom_infer::eval::EvalReport;
use headroom_infer::preview::{DRAW_CONF, MOSAIC_IMAGES, PreviewBox, tile};
use headroom_plot::{Curve, Tile};

use crate::Result;
use crate::folder::{
    CONFUSION_FILE, CONFUSION_NORMALIZED_FILE, LABELS_MOSAIC_FILE, PR_CURVE_FILE, PREDICTIONS_MOSAIC_FILE,
};

/// Evaluates `model` (the run's `best.onnx`) on `images` as `val` does and writes the pictures of
/// [`write_val_plots`] into `dir`. The metrics, or the error of the evaluation.
pub(crate) fn final_validation(
    dir: &Path,
    model: &Path,
    names: &[String],
    images: &[ImageRecord],
    threads: usize,
) -> Result<Metrics> {
    let mut detector = open_detector(model, threads)?;
    let report = headroom_infer::eval::evaluate(
        &mut detector,
        images,
        names,
        &headroom_infer::decode::DecodeOptions::val(),
        headroom_core::preprocess::Preprocess::Val,
        |_| {},
    )?;
    write_val_plots(dir, &report, images);
    Ok(report.metrics)
}

/// `model`'s val metrics on `images` (the epoch's validation).
pub(crate) fn evaluate(
    model: &Path,
    names: &[String],
    images: &[headroom_core::dataset::ImageRecord],
    threads: usize,
) -> Result<headroom_core::metrics::Metrics> {
    let mut detector = open_detector(model, threads)?;
    Ok(headroom_infer::eval::val_metrics(&mut detector, images, names)?)
}

/// An ONNX Runtime session of `model` for validation, on `threads` threads (0: its default).
pub(crate) fn open_detector(model: &Path, threads: usize) -> Result<headroom_infer::detector::Detector> {
    let options = headroom_infer::provider::SessionOptions {
        intra_threads: threads,
        spinning: false,
        ..Default::default()
    };
    Ok(headroom_infer::detector::Detector::open(model, &options)?)
}

/// Writes the PR curve, both confusion matrices and the two mosaics of `report` (an evaluation of
/// `images`) into `dir`; each one that fails is a warning. No PR curve without ground truth, no
/// mosaics without images.
pub fn write_val_plots(dir: &Path, report: &EvalReport, images: &[ImageRecord]) {
    let names = &report.names;
    let warn = |file: &str, e: &dyn std::fmt::Display| tracing::warn!("{}: {e}", dir.join(file).display());
    let curves = report.stats.pr_curves();
    if !curves.classes.is_empty() {
        let per_class: Vec<Curve> = curves
            .classes
            .iter()
            .zip(&curves.ap50)
            .zip(&curves.precision)
            .map(|((&class, ap50), y)| Curve {
                label: format!("{} {ap50:.3}", names.get(class).map_or("?", String::as_str)),
                x: curves.recall.clone(),
                y: y.clone(),
            })
            .collect();
        let mean = Curve {
            label: format!("all classes {:.3} mAP@0.5", curves.map50()),
            x: curves.recall.clone(),
            y: curves.mean(),
        };
        if let Err(e) = headroom_plot::write_pr_curve(&dir.join(PR_CURVE_FILE), &per_class, &mean) {
            warn(PR_CURVE_FILE, &e);
        }
    }
    let matrix = report.confusion.rows();
    for (file, normalize) in [(CONFUSION_FILE, false), (CONFUSION_NORMALIZED_FILE, true)] {
        if let Err(e) = headroom_plot::write_confusion_matrix(&dir.join(file), &matrix, names, normalize) {
            warn(file, &e);
        }
    }
    let (predicted, labelled) = mosaic_tiles(report, images);
    for (file, tiles) in [(PREDICTIONS_MOSAIC_FILE, predicted), (LABELS_MOSAIC_FILE, labelled)] {
        if tiles.is_empty() {
            continue;
        }
        if let Err(e) = headroom_plot::write_mosaic(&dir.join(file), &tiles, names) {
            warn(file, &e);
        }
    }
}

/// The tiles of the first [`MOSAIC_IMAGES`] images: with their predictions above [`DRAW_CONF`],
/// and with their labels. An image that cannot be read is left out of both (a debug line).
fn mosaic_tiles(report: &EvalReport, images: &[ImageRecord]) -> (Vec<Tile>, Vec<Tile>) {
    let (mut predicted, mut labelled) = (Vec::new(), Vec::new());
    let nc = report.names.len();
    for (record, detections) in images.iter().zip(&report.first_detections).take(MOSAIC_IMAGES) {
        let image = match headroom_core::imageio::read_rgb(&record.image) {
            Ok(image) => image,
            Err(e) => {
                tracing::debug!("{PREDICTIONS_MOSAIC_FILE}: leaving out {}: {e}", record.image.display());
                continue;
            }
        };
        let (w, h) = image.dimensions();
        let boxes: Vec<PreviewBox> = detections
            .iter()
            .filter(|d| d.score > DRAW_CONF && d.class < nc)
            .map(|d| PreviewBox { class: d.class, bbox: d.bbox, score: Some(d.score) })
            .collect();
        let labels: Vec<PreviewBox> = record
            .labels
            .iter()
            .filter(|l| l.class < nc)
            .map(|l| PreviewBox { class: l.class, bbox: l.to_pixels(w, h), score: None })
            .collect();
        predicted.push(tile(image.clone(), &boxes, &record.image));
        labelled.push(tile(image, &labels, &record.image));
    }
    (predicted, labelled)
}
