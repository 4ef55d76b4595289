//! The detection confusion matrix of Ultralytics 8.4.190's `ConfusionMatrix.process_batch` (the
//! data of `confusion_matrix.png` and `confusion_matrix_normalized.png`).

use super::matching::box_iou;
use crate::boxes::{Detection, Xyxy};
use crate::{Error, Result};

/// Counts of predicted class against true class over an evaluation set: `(nc + 1)²` cells, rows
/// predicted, columns true, the last row and column "background" (a missed box counts in the
/// background row of its class; a detection matching no box in the background column of its own).
///
/// Matching, per image, as `process_batch` does it: only detections with confidence above the
/// threshold count; in order of decreasing confidence (equal ones in the given order) each
/// detection that overlaps some box with IoU above the IoU threshold claims the box it overlaps
/// most (the first on equal IoU), if that box is still unclaimed (a claimed box's IoUs become 0),
/// whatever the classes: a wrong-class match counts in the predicted row and true column.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfusionMatrix {
    nc: usize,
    conf: f32,
    iou_threshold: f32,
    /// Row-major, `(nc + 1)²`.
    counts: Vec<u64>,
}

impl ConfusionMatrix {
    /// `process_batch`'s default confidence threshold (detections must score above it). Ultralytics
    /// 8.4.190's `val` passes its own `conf` instead (0.001 by default, so its matrix counts nearly
    /// every detection); headroom's plots use 0.25, as older Ultralytics versions did (their
    /// `ConfusionMatrix` replaced `val`'s default 0.001 by 0.25).
    pub const CONF: f32 = 0.25;
    /// `process_batch`'s IoU threshold (a match needs an IoU above it).
    pub const IOU_THRESHOLD: f32 = 0.45;

    /// An empty matrix for `nc` classes with the thresholds [`Self::CONF`] and
    /// [`Self::IOU_THRESHOLD`].
    pub fn new(nc: usize) -> Self {
        Self::with_thresholds(nc, Self::CONF, Self::IOU_THRESHOLD)
    }

    /// An empty matrix for `nc` classes with other thresholds.
    pub fn with_thresholds(nc: usize, conf: f32, iou_threshold: f32) -> Self {
        Self { nc, conf, iou_threshold, counts: vec![0; (nc + 1) * (nc + 1)] }
    }

    /// Number of classes (without background).
    pub fn nc(&self) -> usize {
        self.nc
    }

    /// The confidence threshold.
    pub fn conf(&self) -> f32 {
        self.conf
    }

    /// The count in row `predicted`, column `truth` (`nc` is background).
    ///
    /// # Panics
    ///
    /// If either index is above `nc`.
    pub fn get(&self, predicted: usize, truth: usize) -> u64 {
        assert!(
            predicted <= self.nc && truth <= self.nc,
            "cell ({predicted}, {truth}) of a {} matrix",
            self.nc + 1
        );
        self.counts[predicted * (self.nc + 1) + truth]
    }

    /// The matrix as rows (predicted) of columns (true), background last (`matrix`).
    pub fn rows(&self) -> Vec<Vec<f64>> {
        self.counts.chunks(self.nc + 1).map(|row| row.iter().map(|&v| v as f64).collect()).collect()
    }

    /// Each column divided by its sum + 1e-9, as `ConfusionMatrix.plot(normalize=True)` scales it:
    /// the share of each true class's boxes predicted as each class (background: missed).
    pub fn normalized(&self) -> Vec<Vec<f64>> {
        let n = self.nc + 1;
        let sums: Vec<f64> =
            (0..n).map(|col| (0..n).map(|row| self.counts[row * n + col] as f64).sum::<f64>()).collect();
        self.counts
            .chunks(n)
            .map(|row| row.iter().zip(&sums).map(|(&v, &sum)| v as f64 / (sum + 1e-9)).collect())
            .collect()
    }

    /// Adds one image: its detections (NMS output order: equal confidences are taken in this
    /// order) and its ground truth as `(class, box)`, in the same pixel space. A class `>= nc`
    /// is an error and leaves the matrix as it was.
    pub fn add_image(&mut self, predictions: &[Detection], ground_truth: &[(usize, Xyxy)]) -> Result<()> {
        let out_of_range = |what: &str, class: usize| Error::InvalidArgument {
            name: "nc",
            message: format!(
                "{what} has class {class} but the model has {} classes (0..{})",
                self.nc, self.nc
            ),
        };
        if let Some(&(c, _)) = ground_truth.iter().find(|(c, _)| *c >= self.nc) {
            return Err(out_of_range("the ground truth", c));
        }
        if let Some(d) = predictions.iter().find(|d| d.class >= self.nc) {
            return Err(out_of_range("a prediction", d.class));
        }
        let (background, conf) = (self.nc, self.conf);
        if ground_truth.is_empty() {
            for d in predictions.iter().filter(|d| d.score > conf) {
                self.count(d.class, background);
            }
            return Ok(());
        }
        // Checked before the confidence filter, as Ultralytics does; the same result either way.
        let kept: Vec<&Detection> = predictions.iter().filter(|d| d.score > conf).collect();
        let gt_boxes: Vec<Xyxy> = ground_truth.iter().map(|(_, b)| *b).collect();
        let det_boxes: Vec<Xyxy> = kept.iter().map(|d| d.bbox).collect();
        let iou = box_iou(&gt_boxes, &det_boxes);
        let mut iou: Vec<Vec<f32>> =
            (0..gt_boxes.len()).map(|g| (0..det_boxes.len()).map(|d| iou.get(g, d)).collect()).collect();
        let mut candidates: Vec<usize> =
            (0..kept.len()).filter(|&d| iou.iter().any(|row| row[d] > self.iou_threshold)).collect();
        // np.argsort(-conf[candidates], kind="stable").
        candidates.sort_by(|&a, &b| super::score_descending(kept[a].score, kept[b].score));
        let mut gt_match: Vec<Option<usize>> = vec![None; gt_boxes.len()];
        for d in candidates {
            let best = argmax_column(&iou, d);
            if iou[best][d] > self.iou_threshold {
                gt_match[best] = Some(d);
                iou[best].iter_mut().for_each(|v| *v = 0.0);
            }
        }
        let mut matched = vec![false; kept.len()];
        for (&(truth, _), m) in ground_truth.iter().zip(&gt_match) {
            match m {
                Some(d) => {
                    matched[*d] = true;
                    self.count(kept[*d].class, truth);
                }
                None => self.count(background, truth),
            }
        }
        for (d, _) in kept.iter().zip(&matched).filter(|(_, m)| !**m) {
            self.count(d.class, background);
        }
        Ok(())
    }

    fn count(&mut self, predicted: usize, truth: usize) {
        self.counts[predicted * (self.nc + 1) + truth] += 1;
    }
}

/// `iou[:, column].argmax()`: the first row of the largest value (the first NaN if any).
fn argmax_column(iou: &[Vec<f32>], column: usize) -> usize {
    let mut best = 0;
    for (row, values) in iou.iter().enumerate() {
        let v = values[column];
        if v.is_nan() {
            return row;
        }
        if v > iou[best][column] {
            best = row;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn det(x1: f32, score: f32, class: usize) -> Detection {
        Detection { bbox: Xyxy::new(x1, 0.0, x1 + 10.0, 10.0), score, class }
    }

    fn gt(x1: f32, class: usize) -> (usize, Xyxy) {
        (class, Xyxy::new(x1, 0.0, x1 + 10.0, 10.0))
    }

    #[test]
    fn hits_misses_and_background() {
        let mut m = ConfusionMatrix::new(2);
        // A hit of class 0, a wrong-class match, a missed box and a background detection.
        m.add_image(
            &[det(0.0, 0.9, 0), det(20.0, 0.8, 0), det(60.0, 0.7, 1)],
            &[gt(0.0, 0), gt(20.0, 1), gt(40.0, 1)],
        )
        .expect("classes in range");
        assert_eq!(m.rows(), vec![vec![1.0, 1.0, 0.0], vec![0.0, 0.0, 1.0], vec![0.0, 1.0, 0.0]]);
        let normalized = m.normalized();
        assert!((normalized[0][1] - 0.5).abs() < 1e-8 && (normalized[1][2] - 1.0).abs() < 1e-8);
    }

    #[test]
    fn confidence_must_be_above_the_threshold() {
        let mut m = ConfusionMatrix::new(1);
        m.add_image(&[det(0.0, 0.25, 0)], &[gt(0.0, 0)]).expect("in range");
        m.add_image(&[det(0.0, 0.25, 0)], &[]).expect("in range");
        assert_eq!((m.get(0, 0), m.get(1, 0), m.get(0, 1)), (0, 1, 0));
    }

    #[test]
    fn the_higher_confidence_claims_the_box() {
        let mut m = ConfusionMatrix::new(2);
        m.add_image(&[det(1.0, 0.6, 1), det(0.0, 0.9, 0)], &[gt(0.0, 0)]).expect("in range");
        assert_eq!((m.get(0, 0), m.get(1, 2)), (1, 1));
    }

    #[test]
    fn out_of_range_classes_are_errors_that_change_nothing() {
        let mut m = ConfusionMatrix::new(1);
        let err = m.add_image(&[det(0.0, 0.9, 0)], &[gt(0.0, 3)]).expect_err("class 3 of 1");
        assert!(err.to_string().contains("class 3"), "{err}");
        m.add_image(&[det(0.0, 0.9, 2)], &[]).expect_err("class 2 of 1");
        assert_eq!(m, ConfusionMatrix::new(1));
    }
}
