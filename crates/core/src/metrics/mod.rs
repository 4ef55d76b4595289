//! Detection metrics computed as Ultralytics 8.4.190's `val` computes them: precision, recall,
//! AP per class, mAP50, mAP50-95 and fitness.
//!
//! The pipeline, with the Ultralytics function each step reproduces:
//! 1. per image, [`box_iou`] of every ground-truth box with every prediction (`box_iou`, `float32`),
//!    then [`match_predictions`] (`BaseValidator.match_predictions`, the greedy path): a
//!    true-positive flag per prediction at each of the 10 [`IOU_THRESHOLDS`];
//! 2. over the whole set, [`ap_per_class`] (`ap_per_class`, `compute_ap`, `smooth`): AP per class
//!    and threshold with 101-point interpolation, P and R where the smoothed mean F1 peaks;
//! 3. means over the classes that have ground truth (`Metric.mp`, `mr`, `map50`, `map`) and
//!    `fitness` (8.4.190 weighs only mAP50-95).
//!
//! [`DetectionStats`] drives the whole thing: [`DetectionStats::add_image`] per image, then
//! [`DetectionStats::finish`]. [`coco`] evaluates a COCO results file (Ultralytics'
//! `predictions.json`) against YOLO labels.
//!
//! The data of Ultralytics' end-of-run plots: [`DetectionStats::pr_curves`] ([`pr_curves`], the
//! PR curve per class of `ap_per_class`) and [`ConfusionMatrix`] (`ConfusionMatrix.process_batch`),
//! fed the same images as [`DetectionStats`].
//!
//! Two places where numbers can differ from a given Ultralytics run, both documented where they
//! happen: predictions with **equal confidences in the same class** (numpy's default sort is not
//! stable and its order is CPU-dependent; we sort stably), and near-ties of the smoothed F1 peak
//! (numpy sums the filter with BLAS; we sum in order).
//! Boxes of predictions and ground truth must be in the same pixel space; IoU is invariant to the
//! per-axis scale and shift between Ultralytics' letterboxed space and the original image.

mod ap;
pub mod bootstrap;
pub mod coco;
mod confusion;
mod curves;
mod matching;
mod numeric;

#[cfg(test)]
mod golden_tests;
#[cfg(test)]
mod plots_golden_tests;

use serde::{Deserialize, Serialize};

pub use ap::{AP_POINTS, ApPerClass, CURVE_POINTS, ap_per_class, compute_ap};
pub use confusion::ConfusionMatrix;
pub use curves::{PR_POINTS, PrCurves, pr_curves};
pub use matching::{IOU_THRESHOLDS, IouMatrix, N_IOU, TruePositives, box_iou, match_predictions};

use crate::boxes::{Detection, Xyxy};
use crate::{Error, Result};

/// Weights of `[P, R, mAP50, mAP50-95]` in Ultralytics 8.4.190's `Metric.fitness` (the model
/// selection score; older versions used 0.1 mAP50 + 0.9 mAP50-95).
pub const FITNESS_WEIGHTS: [f64; 4] = [0.0, 0.0, 0.0, 1.0];

/// Metrics of one class, as a row of Ultralytics' per-class `val` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    /// Class id.
    pub class: usize,
    /// Images with at least one ground-truth box of the class.
    pub images: usize,
    /// Ground-truth boxes of the class.
    pub instances: usize,
    /// Precision at the confidence of the best mean F1.
    pub precision: f64,
    /// Recall at the confidence of the best mean F1.
    pub recall: f64,
    /// AP at IoU 0.5.
    pub ap50: f64,
    /// AP averaged over IoU 0.50:0.05:0.95.
    pub ap50_95: f64,
}

/// Metrics of a whole evaluation, as Ultralytics' `val` prints and returns them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Images evaluated (with or without boxes).
    pub images: usize,
    /// Ground-truth boxes.
    pub instances: usize,
    /// Mean precision over classes with ground truth (`metrics/precision(B)`).
    pub precision: f64,
    /// Mean recall over classes with ground truth (`metrics/recall(B)`).
    pub recall: f64,
    /// mAP at IoU 0.5 (`metrics/mAP50(B)`).
    pub map50: f64,
    /// mAP over IoU 0.50:0.05:0.95 (`metrics/mAP50-95(B)`).
    pub map50_95: f64,
    /// [`FITNESS_WEIGHTS`] applied to the four numbers above, NaN counted as 0 (`fitness`).
    pub fitness: f64,
    /// One row per class with at least one ground-truth box, by class id. Classes without ground
    /// truth are not listed and do not enter any mean, even if they were predicted.
    pub per_class: Vec<ClassMetrics>,
}

impl Metrics {
    /// The table Ultralytics prints after `val`: all classes, then one row per class with ground truth.
    pub fn table(&self, names: &[String]) -> String {
        use std::fmt::Write as _;
        let m = self;
        let mut out = format!(
            "{:>22}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n",
            "Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95"
        );
        let mut row = |name: &str, images: usize, instances: usize, p: f64, r: f64, a50: f64, a: f64| {
            let _ =
                writeln!(out, "{name:>22}{images:>11}{instances:>11}{p:>11.3}{r:>11.3}{a50:>11.3}{a:>11.3}");
        };
        row("all", m.images, m.instances, m.precision, m.recall, m.map50, m.map50_95);
        for c in &m.per_class {
            let name = names.get(c.class).map(String::as_str).unwrap_or("?");
            row(name, c.images, c.instances, c.precision, c.recall, c.ap50, c.ap50_95);
        }
        out
    }
}

/// Accumulates per-image matches over an evaluation set, as `DetectionValidator.update_metrics`
/// accumulates `DetMetrics.stats`.
#[derive(Debug, Clone, Default)]
pub struct DetectionStats {
    tp: Vec<TruePositives>,
    conf: Vec<f32>,
    pred_cls: Vec<usize>,
    target_cls: Vec<usize>,
    /// The distinct classes of each image's ground truth, concatenated (`target_img`).
    target_img: Vec<usize>,
    /// Where each image's entries end, in the order the images were added.
    ends: Vec<ImageEnds>,
}

/// The end (one past the last) of one image's entries in each of [`DetectionStats`]' vectors; the
/// image starts where the previous one ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct ImageEnds {
    /// In `tp`, `conf` and `pred_cls`.
    predictions: usize,
    /// In `target_cls`.
    targets: usize,
    /// In `target_img`.
    target_img: usize,
}

impl DetectionStats {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self::default()
    }

    /// Images added so far.
    pub fn images(&self) -> usize {
        self.ends.len()
    }

    /// Where the `image`-th image's entries start and end (`image < self.images()`).
    fn image_range(&self, image: usize) -> (ImageEnds, ImageEnds) {
        let start = if image == 0 { ImageEnds::default() } else { self.ends[image - 1] };
        (start, self.ends[image])
    }

    /// The stats of the given images (indices in the order they were added), in the given order,
    /// repeats allowed: a bootstrap resample. `subset(&(0..n).collect::<Vec<_>>())` finishes to
    /// the same metrics as `self`.
    ///
    /// # Panics
    ///
    /// If an index is not below [`Self::images`].
    pub fn subset(&self, images: &[usize]) -> DetectionStats {
        let mut out = DetectionStats::new();
        out.ends.reserve(images.len());
        for &image in images {
            assert!(image < self.images(), "image {image} of {} in a subset", self.images());
            let (start, end) = self.image_range(image);
            let predictions = start.predictions..end.predictions;
            out.tp.extend_from_slice(&self.tp[predictions.clone()]);
            out.conf.extend_from_slice(&self.conf[predictions.clone()]);
            out.pred_cls.extend_from_slice(&self.pred_cls[predictions]);
            out.target_cls.extend_from_slice(&self.target_cls[start.targets..end.targets]);
            out.target_img.extend_from_slice(&self.target_img[start.target_img..end.target_img]);
            out.push_end();
        }
        out
    }

    /// Records that the current image's entries end here.
    fn push_end(&mut self) {
        self.ends.push(ImageEnds {
            predictions: self.tp.len(),
            targets: self.target_cls.len(),
            target_img: self.target_img.len(),
        });
    }

    /// Adds one image: its predictions (any order; they are matched by decreasing score, equal
    /// scores in the given order, which is NMS output order when the caller keeps it) and its
    /// ground truth as `(class, box)`, both in the same pixel space. Images with no predictions or
    /// no ground truth count like in Ultralytics: their predictions are false positives of their
    /// class, their labels count as missed.
    ///
    /// Returns the true-positive flags of the predictions, in matching order.
    pub fn add_image(
        &mut self,
        predictions: &[Detection],
        ground_truth: &[(usize, Xyxy)],
    ) -> Vec<TruePositives> {
        let mut ordered: Vec<&Detection> = predictions.iter().collect();
        ordered.sort_by(|a, b| score_descending(a.score, b.score));
        let pred_classes: Vec<usize> = ordered.iter().map(|d| d.class).collect();
        let true_classes: Vec<usize> = ground_truth.iter().map(|(c, _)| *c).collect();
        let tp = if ordered.is_empty() || ground_truth.is_empty() {
            vec![[false; N_IOU]; ordered.len()]
        } else {
            let gt_boxes: Vec<Xyxy> = ground_truth.iter().map(|(_, b)| *b).collect();
            let pred_boxes: Vec<Xyxy> = ordered.iter().map(|d| d.bbox).collect();
            matching::match_checked(&pred_classes, &true_classes, &box_iou(&gt_boxes, &pred_boxes))
        };
        self.tp.extend_from_slice(&tp);
        self.conf.extend(ordered.iter().map(|d| d.score));
        self.pred_cls.extend(pred_classes);
        let mut distinct = true_classes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        self.target_img.extend(distinct);
        self.target_cls.extend(true_classes);
        self.push_end();
        tp
    }

    /// The PR curves of everything added (`ap_per_class`'s `prec_values`, what
    /// `BoxPR_curve.png` plots).
    pub fn pr_curves(&self) -> PrCurves {
        pr_curves(&self.tp, &self.conf, &self.pred_cls, &self.target_cls)
    }

    /// Computes the metrics of everything added (`DetMetrics.process`). `nc` is the number of
    /// classes of the model and dataset; a ground-truth or predicted class `>= nc` is an error.
    pub fn finish(&self, nc: usize) -> Result<Metrics> {
        let out_of_range = |what: &str, classes: &[usize]| match classes.iter().find(|&&c| c >= nc) {
            Some(c) => Err(Error::InvalidArgument {
                name: "nc",
                message: format!("{what} has class {c} but the model has {nc} classes (0..{nc})"),
            }),
            None => Ok(()),
        };
        out_of_range("the ground truth", &self.target_cls)?;
        out_of_range("a prediction", &self.pred_cls)?;

        let result = ap_per_class(&self.tp, &self.conf, &self.pred_cls, &self.target_cls);
        let mut images_per_class = vec![0usize; nc];
        for &c in &self.target_img {
            images_per_class[c] += 1;
        }
        let per_class = result
            .classes
            .iter()
            .enumerate()
            .map(|(i, &class)| ClassMetrics {
                class,
                images: images_per_class[class],
                instances: result.instances[i],
                precision: result.precision[i],
                recall: result.recall[i],
                ap50: result.ap[i][0],
                ap50_95: result.ap50_95(i),
            })
            .collect();
        let (precision, recall) = (result.mean_precision(), result.mean_recall());
        let (map50, map50_95) = (result.map50(), result.map50_95());
        Ok(Metrics {
            images: self.images(),
            instances: self.target_cls.len(),
            precision,
            recall,
            map50,
            map50_95,
            fitness: fitness([precision, recall, map50, map50_95]),
            per_class,
        })
    }
}

/// Ultralytics' `Metric.fitness`: `[P, R, mAP50, mAP50-95]` with NaN as 0, weighted by
/// [`FITNESS_WEIGHTS`].
pub fn fitness(mean_results: [f64; 4]) -> f64 {
    mean_results.iter().zip(FITNESS_WEIGHTS).map(|(&v, w)| if v.is_nan() { 0.0 } else { v } * w).sum()
}

/// Decreasing score, NaN last; equal scores compare equal (so a stable sort keeps their order).
fn score_descending(a: f32, b: f32) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => b.partial_cmp(&a).unwrap_or(Ordering::Equal),
    }
}

#[cfg(test)]
mod tests;
