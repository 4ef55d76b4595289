//! The data of Ultralytics' precision-recall plot (`BoxPR_curve.png` of a detection run), as
//! 8.4.190's `ap_per_class` computes it and `plot_pr_curve` draws it.

use super::ap::{compute_ap, envelope, order_by_confidence};
use super::matching::TruePositives;
use super::numeric::{interp_sorted, linspace_unit, mean};

/// Points of the recall axis of the PR curves (`np.linspace(0, 1, 1000)`).
pub const PR_POINTS: usize = 1000;

/// Precision against recall at IoU 0.5, per class with ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct PrCurves {
    /// The recall axis, [`PR_POINTS`] points from 0 to 1 (`x`).
    pub recall: Vec<f64>,
    /// Classes with ground truth, ascending (`unique_classes`).
    pub classes: Vec<usize>,
    /// AP at IoU 0.5 of each class (`ap[:, 0]`, the number in the plot's legend).
    pub ap50: Vec<f64>,
    /// Per class, precision at each recall of [`Self::recall`] (`prec_values`): `compute_ap`'s
    /// precision envelope read by `np.interp(x, mrec, mpre)`; all 0 for a class never predicted.
    pub precision: Vec<Vec<f64>>,
}

impl PrCurves {
    /// The mean of the classes' curves at each recall (`py.mean(1)`, the plot's "all classes"
    /// line); empty without classes.
    pub fn mean(&self) -> Vec<f64> {
        if self.classes.is_empty() {
            return Vec::new();
        }
        let mut column = Vec::with_capacity(self.precision.len());
        (0..self.recall.len())
            .map(|i| {
                column.clear();
                column.extend(self.precision.iter().map(|curve| curve[i]));
                mean(&column)
            })
            .collect()
    }

    /// Mean AP at IoU 0.5 over the classes (`ap[:, 0].mean()`); 0 without classes.
    pub fn map50(&self) -> f64 {
        super::ap::mean_or_zero(&self.ap50)
    }
}

/// The PR curves of `ap_per_class(tp, conf, pred_cls, target_cls)` (its `x`, `unique_classes`,
/// `ap[:, 0]` and `prec_values`), with the same inputs as [`super::ap_per_class`] and the same
/// stable order among equal confidences.
pub fn pr_curves(tp: &[TruePositives], conf: &[f32], pred_cls: &[usize], target_cls: &[usize]) -> PrCurves {
    const EPS: f64 = 1e-16;
    let n = tp.len().min(conf.len()).min(pred_cls.len());
    let order = order_by_confidence(&conf[..n]);
    let mut classes = target_cls.to_vec();
    classes.sort_unstable();
    classes.dedup();
    let x = linspace_unit(PR_POINTS);
    let (mut mrec, mut mpre) = (Vec::new(), Vec::new());
    let mut ap50 = Vec::with_capacity(classes.len());
    let mut precision_curves = Vec::with_capacity(classes.len());
    for &class in &classes {
        let labels = target_cls.iter().filter(|&&t| t == class).count() as f64;
        let (mut tpc, mut fpc) = (0u64, 0u64);
        let (mut recall, mut precision) = (Vec::new(), Vec::new());
        for &i in order.iter().filter(|&&i| pred_cls[i] == class) {
            tpc += u64::from(tp[i][0]);
            fpc += u64::from(!tp[i][0]);
            recall.push(tpc as f64 / (labels + EPS));
            precision.push(tpc as f64 / (tpc + fpc) as f64);
        }
        if recall.is_empty() {
            ap50.push(0.0);
            precision_curves.push(vec![0.0; PR_POINTS]);
            continue;
        }
        ap50.push(compute_ap(&recall, &precision));
        envelope(&recall, &precision, &mut mrec, &mut mpre);
        let (left, right) = (mpre[0], mpre[mpre.len() - 1]);
        let mut curve = Vec::with_capacity(PR_POINTS);
        interp_sorted(&x, &mrec, &mpre, left, right, &mut curve);
        precision_curves.push(curve);
    }
    PrCurves { recall: x, classes, ap50, precision: precision_curves }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::N_IOU;

    #[test]
    fn one_perfect_detection_is_flat_then_drops_at_full_recall() {
        let curves = pr_curves(&[[true; N_IOU]], &[0.9], &[0], &[0]);
        assert_eq!(curves.classes, vec![0]);
        assert_eq!(curves.recall.len(), PR_POINTS);
        let curve = &curves.precision[0];
        assert!(curve[..PR_POINTS - 1].iter().all(|&p| p == 1.0));
        // At recall 1 np.interp takes the last of the repeated 1s: the 0 sentinel.
        assert_eq!(curve[PR_POINTS - 1], 0.0);
        assert!((curves.ap50[0] - 0.995).abs() < 1e-12);
        assert_eq!(curves.mean(), *curve);
    }

    #[test]
    fn class_without_predictions_has_a_zero_curve_in_the_mean() {
        let curves = pr_curves(&[[true; N_IOU]], &[0.9], &[0], &[0, 1]);
        assert_eq!(curves.classes, vec![0, 1]);
        assert!(curves.precision[1].iter().all(|&p| p == 0.0));
        assert_eq!(curves.mean()[10], 0.5);
        assert!((curves.map50() - 0.995 / 2.0).abs() < 1e-12);
    }

    #[test]
    fn no_labels_no_curves() {
        let curves = pr_curves(&[[false; N_IOU]], &[0.5], &[0], &[]);
        assert!(curves.classes.is_empty() && curves.precision.is_empty() && curves.mean().is_empty());
        assert_eq!(curves.map50(), 0.0);
    }

    #[test]
    fn ap50_is_ap_per_class_ap50() {
        let tp = [[true; N_IOU], [false; N_IOU], [true; N_IOU], [false; N_IOU]];
        let (conf, pred_cls, target_cls) = ([0.9, 0.8, 0.7, 0.6], [0, 0, 0, 1], [0, 0, 0, 1]);
        let curves = pr_curves(&tp, &conf, &pred_cls, &target_cls);
        let result = super::super::ap_per_class(&tp, &conf, &pred_cls, &target_cls);
        assert_eq!(curves.classes, result.classes);
        let ap50: Vec<f64> = result.ap.iter().map(|a| a[0]).collect();
        assert_eq!(curves.ap50, ap50);
        assert_eq!(curves.map50(), result.map50());
    }
}
