//! Per-image matching of predictions to ground truth, as Ultralytics 8.4.190's
//! `DetectionValidator._process_batch` and `BaseValidator.match_predictions` do it.

use crate::boxes::Xyxy;
use crate::{Error, Result};

/// Number of IoU thresholds (0.50, 0.55, …, 0.95).
pub const N_IOU: usize = 10;

/// The IoU thresholds 0.50:0.05:0.95 exactly as `torch.linspace(0.5, 0.95, 10)` makes them in
/// `float32` (each is the `f32` nearest to `0.5 + 0.05 i`).
pub const IOU_THRESHOLDS: [f32; N_IOU] = [
    f32::from_bits(0x3f00_0000),
    f32::from_bits(0x3f0c_cccd),
    f32::from_bits(0x3f19_999a),
    f32::from_bits(0x3f26_6666),
    f32::from_bits(0x3f33_3333),
    f32::from_bits(0x3f40_0000),
    f32::from_bits(0x3f4c_cccd),
    f32::from_bits(0x3f59_999a),
    f32::from_bits(0x3f66_6666),
    f32::from_bits(0x3f73_3333),
];

/// Whether one prediction is a true positive at each of the [`IOU_THRESHOLDS`].
pub type TruePositives = [bool; N_IOU];

/// IoU of every ground-truth box (rows) with every prediction (columns), in `f32`.
#[derive(Debug, Clone, PartialEq)]
pub struct IouMatrix {
    labels: usize,
    predictions: usize,
    values: Vec<f32>,
}

impl IouMatrix {
    /// The matrix from row-major values (`labels` rows of `predictions` columns).
    pub fn from_rows(labels: usize, predictions: usize, values: Vec<f32>) -> Result<Self> {
        if values.len() != labels * predictions {
            return Err(Error::InvalidArgument {
                name: "values",
                message: format!("{} values for a {labels}×{predictions} IoU matrix", values.len()),
            });
        }
        Ok(Self { labels, predictions, values })
    }

    /// Number of ground-truth boxes (rows).
    pub fn labels(&self) -> usize {
        self.labels
    }

    /// Number of predictions (columns).
    pub fn predictions(&self) -> usize {
        self.predictions
    }

    /// IoU of ground-truth box `label` with prediction `prediction`.
    pub fn get(&self, label: usize, prediction: usize) -> f32 {
        self.values[label * self.predictions + prediction]
    }
}

/// Ultralytics' `box_iou(ground_truth, predictions)`: `inter / (area1 + area2 - inter + 1e-7)`,
/// every step in `f32` and in the same order, so values agree bit for bit with the PyTorch ones.
pub fn box_iou(ground_truth: &[Xyxy], predictions: &[Xyxy]) -> IouMatrix {
    const EPS: f32 = 1e-7;
    let mut values = Vec::with_capacity(ground_truth.len() * predictions.len());
    for a in ground_truth {
        let area_a = (a.x2 - a.x1) * (a.y2 - a.y1);
        for b in predictions {
            let w = (a.x2.min(b.x2) - a.x1.max(b.x1)).max(0.0);
            let h = (a.y2.min(b.y2) - a.y1.max(b.y1)).max(0.0);
            let inter = w * h;
            let area_b = (b.x2 - b.x1) * (b.y2 - b.y1);
            values.push(inter / (area_a + area_b - inter + EPS));
        }
    }
    IouMatrix { labels: ground_truth.len(), predictions: predictions.len(), values }
}

/// Ultralytics' `match_predictions` (the greedy path, `use_scipy=False`).
///
/// `pred_classes` must be in the order the validator sees them: by decreasing confidence (NMS
/// output order). IoUs between different classes count as 0. Predictions are visited in order;
/// one whose best IoU with any label reaches 0.5 claims, independently at each threshold, the
/// unclaimed label with the highest IoU (the first such label on ties, as `argmax` does) and is a
/// true positive there when that IoU reaches the threshold. A label is claimed at most once per
/// threshold.
///
/// Returns one row per prediction. Errors when the matrix does not have
/// `true_classes.len()` rows and `pred_classes.len()` columns.
pub fn match_predictions(
    pred_classes: &[usize],
    true_classes: &[usize],
    iou: &IouMatrix,
) -> Result<Vec<TruePositives>> {
    if iou.labels != true_classes.len() || iou.predictions != pred_classes.len() {
        return Err(Error::InvalidArgument {
            name: "iou",
            message: format!(
                "a {}×{} IoU matrix for {} labels and {} predictions",
                iou.labels,
                iou.predictions,
                true_classes.len(),
                pred_classes.len()
            ),
        });
    }
    Ok(match_checked(pred_classes, true_classes, iou))
}

/// [`match_predictions`] once the shapes are known to agree.
pub(crate) fn match_checked(
    pred_classes: &[usize],
    true_classes: &[usize],
    iou: &IouMatrix,
) -> Vec<TruePositives> {
    let mut correct = vec![[false; N_IOU]; pred_classes.len()];
    if true_classes.is_empty() {
        return correct;
    }
    let class_iou = |label: usize, prediction: usize| {
        let same = true_classes[label] == pred_classes[prediction];
        // `iou * correct_class` in float32: a different class multiplies by 0.
        iou.get(label, prediction) * if same { 1.0 } else { 0.0 }
    };
    let lowest = IOU_THRESHOLDS[0];
    let mut claimed = vec![[false; N_IOU]; true_classes.len()];
    for (j, row) in correct.iter_mut().enumerate() {
        if !(0..true_classes.len()).any(|i| class_iou(i, j) >= lowest) {
            continue;
        }
        for (t, &threshold) in IOU_THRESHOLDS.iter().enumerate() {
            // `np.where(matched, 0, iou[:, j]).argmax(0)`: first maximum, NaN wins.
            let available = |i: usize| if claimed[i][t] { 0.0 } else { class_iou(i, j) };
            let mut best = 0;
            for i in 1..true_classes.len() {
                let (v, b) = (available(i), available(best));
                if !b.is_nan() && (v.is_nan() || v > b) {
                    best = i;
                }
            }
            row[t] = available(best) >= threshold;
            claimed[best][t] |= row[t];
        }
    }
    correct
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_are_the_nearest_f32() {
        for (i, &t) in IOU_THRESHOLDS.iter().enumerate() {
            assert_eq!(t, (0.5 + 0.05 * i as f64) as f32, "threshold {i}");
        }
    }

    #[test]
    fn box_iou_agrees_with_xyxy_iou() {
        let a = [Xyxy::new(0.0, 0.0, 10.0, 10.0), Xyxy::new(5.0, 5.0, 15.0, 25.0)];
        let b = [
            Xyxy::new(0.0, 0.0, 10.0, 10.0),
            Xyxy::new(2.0, 3.0, 12.0, 9.0),
            Xyxy::new(50.0, 0.0, 60.0, 9.0),
        ];
        let m = box_iou(&a, &b);
        for (i, ga) in a.iter().enumerate() {
            for (j, pb) in b.iter().enumerate() {
                assert!((m.get(i, j) - ga.iou(*pb)).abs() < 1e-6, "({i}, {j})");
            }
        }
    }

    #[test]
    fn one_label_is_claimed_once_per_threshold() {
        let gt = [Xyxy::new(0.0, 0.0, 100.0, 100.0)];
        // Both predictions overlap the one label; the first (higher confidence) takes it.
        let preds = [Xyxy::new(0.0, 0.0, 100.0, 90.0), Xyxy::new(0.0, 0.0, 100.0, 100.0)];
        let tp = match_predictions(&[0, 0], &[0], &box_iou(&gt, &preds)).expect("shapes agree");
        assert_eq!(tp[0], [true, true, true, true, true, true, true, true, true, false]);
        // The second is a true positive only where the first failed (IoU 0.9 < 0.95).
        assert_eq!(tp[1], [false, false, false, false, false, false, false, false, false, true]);
    }

    #[test]
    fn other_classes_do_not_match() {
        let gt = [Xyxy::new(0.0, 0.0, 10.0, 10.0)];
        let tp = match_predictions(&[1], &[0], &box_iou(&gt, &gt)).expect("shapes agree");
        assert_eq!(tp, vec![[false; N_IOU]]);
    }

    #[test]
    fn shape_mismatch_is_an_error() {
        let m = box_iou(&[Xyxy::default()], &[]);
        assert!(match_predictions(&[0], &[0], &m).is_err());
        assert!(IouMatrix::from_rows(2, 2, vec![0.0; 3]).is_err());
    }
}
