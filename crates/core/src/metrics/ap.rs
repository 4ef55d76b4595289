//! Average precision per class, as Ultralytics 8.4.190's `ap_per_class` and `compute_ap` do it.

use super::matching::{N_IOU, TruePositives};
use super::numeric::{argmax, interp, interp_sorted, linspace_unit, mean, smooth, trapezoid_with};

/// Points of the confidence axis of the P, R and F1 curves (`np.linspace(0, 1, 1000)`).
pub const CURVE_POINTS: usize = 1000;

/// Points of the recall axis AP is integrated over (COCO's 101-point interpolation).
pub const AP_POINTS: usize = 101;

/// What `ap_per_class` returns, for the classes that have at least one ground-truth box.
#[derive(Debug, Clone, PartialEq)]
pub struct ApPerClass {
    /// Classes with ground truth, ascending (Ultralytics' `ap_class_index`).
    pub classes: Vec<usize>,
    /// Ground-truth boxes of each class.
    pub instances: Vec<usize>,
    /// Precision of each class at the confidence of the best mean F1.
    pub precision: Vec<f64>,
    /// Recall of each class at the confidence of the best mean F1.
    pub recall: Vec<f64>,
    /// F1 of each class at the confidence of the best mean F1.
    pub f1: Vec<f64>,
    /// AP of each class at each IoU threshold.
    pub ap: Vec<[f64; N_IOU]>,
    /// Index on the 1000-point confidence axis (`index / 999`) where the smoothed mean F1 peaks.
    pub best_f1_index: usize,
}

/// Ultralytics' `compute_ap`: the precision envelope over the recall curve with sentinels
/// (`recall` 0 and 1, precision 1 and 0), sampled at 101 recall points by `np.interp`, integrated
/// by the trapezoid rule. A single perfect detection gives 0.995 (the last of the 101 samples is
/// the 0 sentinel), not 1.
pub fn compute_ap(recall: &[f64], precision: &[f64]) -> f64 {
    ApWork::default().compute_ap(recall, precision)
}

/// Buffers of [`compute_ap`] and [`class_ap`], reusable from one call to the next.
#[derive(Debug, Default)]
pub(super) struct ApWork {
    points: [Vec<(u64, u64)>; N_IOU],
    recall: Vec<f64>,
    precision: Vec<f64>,
    mrec: Vec<f64>,
    mpre: Vec<f64>,
    /// `linspace_unit(AP_POINTS)`, once computed.
    x: Vec<f64>,
    sampled: Vec<f64>,
    terms: Vec<f64>,
}

impl ApWork {
    /// [`compute_ap`] in these buffers.
    fn compute_ap(&mut self, recall: &[f64], precision: &[f64]) -> f64 {
        let Self { mrec, mpre, x, sampled, terms, .. } = self;
        envelope(recall, precision, mrec, mpre);
        if x.is_empty() {
            *x = linspace_unit(AP_POINTS);
        }
        let right = mpre[mpre.len() - 1];
        interp_sorted(x, mrec, mpre, mpre[0], right, sampled);
        trapezoid_with(sampled, x, terms)
    }
}

/// The `mrec` and `mpre` of `compute_ap` into `mrec` and `mpre`: the recall curve with sentinels
/// (0 first, then the last recall again and 1) and the precision envelope over it (1 first, two 0s
/// last, then the running maximum from the right).
pub(super) fn envelope(recall: &[f64], precision: &[f64], mrec: &mut Vec<f64>, mpre: &mut Vec<f64>) {
    mrec.clear();
    mrec.push(0.0);
    mrec.extend_from_slice(recall);
    mrec.push(recall.last().copied().unwrap_or(1.0));
    mrec.push(1.0);
    mpre.clear();
    mpre.push(1.0);
    mpre.extend_from_slice(precision);
    mpre.extend([0.0, 0.0]);
    // np.flip(np.maximum.accumulate(np.flip(mpre))); np.maximum propagates NaN.
    for i in (0..mpre.len() - 1).rev() {
        let (here, next) = (mpre[i], mpre[i + 1]);
        mpre[i] = if here.is_nan() || next.is_nan() { f64::NAN } else { here.max(next) };
    }
}

/// `np.argsort(-conf)` made stable: decreasing confidence, equal confidences in input order, `NaN`
/// last. numpy's default sort is not stable (with AVX-512 it is x86-simd-sort, whose order among
/// equal keys depends on the CPU), so on equal confidences within one class Ultralytics' own
/// numbers vary from machine to machine; a stable order is the reproducible choice.
pub(super) fn order_by_confidence(conf: &[f32]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..conf.len()).collect();
    order.sort_by(|&a, &b| super::score_descending(conf[a], conf[b]));
    order
}

/// One class's curves: P and R on the confidence axis, AP at each threshold.
struct ClassCurves {
    precision: Vec<f64>,
    recall: Vec<f64>,
    ap: [f64; N_IOU],
}

/// Curves of one class from its predictions (already by decreasing confidence).
fn class_curves(tp: &[&TruePositives], conf: &[f64], labels: usize, px: &[f64]) -> ClassCurves {
    const EPS: f64 = 1e-16;
    let mut recall = vec![[0.0f64; N_IOU]; tp.len()];
    let mut precision = vec![[0.0f64; N_IOU]; tp.len()];
    let mut tpc = [0u64; N_IOU];
    let mut fpc = [0u64; N_IOU];
    for (k, row) in tp.iter().enumerate() {
        for t in 0..N_IOU {
            tpc[t] += u64::from(row[t]);
            fpc[t] += u64::from(!row[t]);
            recall[k][t] = tpc[t] as f64 / (labels as f64 + EPS);
            precision[k][t] = tpc[t] as f64 / (tpc[t] + fpc[t]) as f64;
        }
    }
    // np.interp(-x, -conf, curve[:, 0], left=...): conf decreases, so -conf increases.
    let neg_conf: Vec<f64> = conf.iter().map(|c| -c).collect();
    let recall_0: Vec<f64> = recall.iter().map(|r| r[0]).collect();
    let precision_0: Vec<f64> = precision.iter().map(|p| p[0]).collect();
    let at = |curve: &[f64], left: f64| -> Vec<f64> {
        let right = curve.last().copied().unwrap_or(left);
        px.iter().map(|&x| interp(-x, &neg_conf, curve, left, right)).collect()
    };
    let ap = class_ap(tp.iter().map(|&row| (row, 1)), labels, &mut ApWork::default());
    ClassCurves { precision: at(&precision_0, 1.0), recall: at(&recall_0, 0.0), ap }
}

/// AP at each IoU threshold of one class: `rows` are its predictions' true-positive flags by
/// decreasing confidence, each with how many times in a row it occurs, `labels` (> 0) its
/// ground-truth boxes. All 0 without predictions (as
/// [`ap_per_class`] leaves such a class).
///
/// Of each run of points with the same recall (a true positive and the false positives after it,
/// or the false positives before the first true positive) only the first and the last go to
/// [`compute_ap`]: the result is bit-identical. Inside a run precision only falls, so the
/// envelope at the kept points is unchanged, and `np.interp` only reads a run of equal `xp` at its
/// first point (interpolating from the left) and its last (at that recall and to the right).
pub(super) fn class_ap<'a>(
    rows: impl Iterator<Item = (&'a TruePositives, u64)>,
    labels: usize,
    work: &mut ApWork,
) -> [f64; N_IOU] {
    const EPS: f64 = 1e-16;
    let mut kept = KeptPoints { points: std::mem::take(&mut work.points), ..KeptPoints::default() };
    kept.points.iter_mut().for_each(Vec::clear);
    // False positives at every threshold not yet counted (the common case, handled in one go).
    let mut misses = 0u64;
    for (row, count) in rows {
        if row.iter().any(|&hit| hit) {
            kept.misses(misses);
            misses = 0;
            for _ in 0..count {
                kept.row(row);
            }
        } else {
            misses += count;
        }
    }
    kept.misses(misses);
    let points = kept.points;
    let mut ap = [0.0; N_IOU];
    if points[0].is_empty() {
        work.points = points;
        return ap;
    }
    let (mut recall, mut precision) = (std::mem::take(&mut work.recall), std::mem::take(&mut work.precision));
    for t in 0..N_IOU {
        if t > 0 && points[t] == points[t - 1] {
            // Same points, same AP.
            ap[t] = ap[t - 1];
            continue;
        }
        let (value, kept) = (&mut ap[t], &points[t]);
        recall.clear();
        precision.clear();
        for &(tp, fp) in kept {
            recall.push(tp as f64 / (labels as f64 + EPS));
            precision.push(tp as f64 / (tp + fp) as f64);
        }
        *value = work.compute_ap(&recall, &precision);
    }
    (work.recall, work.precision, work.points) = (recall, precision, points);
    ap
}

/// The points [`class_ap`] keeps, per threshold, as (true positives, false positives) so far.
#[derive(Default)]
struct KeptPoints {
    points: [Vec<(u64, u64)>; N_IOU],
    /// Whether the last point kept is the first of its run (so the next one of the run is
    /// appended, not written over it).
    run_start: [bool; N_IOU],
    tp: [u64; N_IOU],
    fp: [u64; N_IOU],
}

impl KeptPoints {
    /// One prediction.
    fn row(&mut self, row: &TruePositives) {
        for (t, &hit) in row.iter().enumerate() {
            let kept = &mut self.points[t];
            if hit {
                self.tp[t] += 1;
                self.run_start[t] = true;
                kept.push((self.tp[t], self.fp[t]));
            } else {
                self.fp[t] += 1;
                if kept.is_empty() || self.run_start[t] {
                    self.run_start[t] = kept.is_empty();
                    kept.push((self.tp[t], self.fp[t]));
                } else if let Some(last) = kept.last_mut() {
                    *last = (self.tp[t], self.fp[t]);
                }
            }
        }
    }

    /// `count` predictions in a row, false positives at every threshold.
    fn misses(&mut self, count: u64) {
        if count == 0 {
            return;
        }
        for t in 0..N_IOU {
            let kept = &mut self.points[t];
            let (tp, first, last) = (self.tp[t], self.fp[t] + 1, self.fp[t] + count);
            self.fp[t] = last;
            if kept.is_empty() {
                // The first point, and the last of its run if there are more.
                kept.push((tp, first));
                self.run_start[t] = count == 1;
                if count > 1 {
                    kept.push((tp, last));
                }
            } else if self.run_start[t] {
                self.run_start[t] = false;
                kept.push((tp, last));
            } else if let Some(point) = kept.last_mut() {
                *point = (tp, last);
            }
        }
    }
}

/// Ultralytics' `ap_per_class(tp, conf, pred_cls, target_cls)`.
///
/// Predictions are ordered by decreasing confidence (stably, see the module notes). Classes are
/// those present in `target_cls`; predictions of other classes are ignored. A class with ground
/// truth but no prediction has AP, P and R 0 and still counts in every mean. The P, R and F1
/// curves are interpolated at 1000 confidences; the mean F1 over classes is smoothed by
/// `smooth(f1, 0.1)` and P and R are read where it peaks.
///
/// `tp`, `conf` and `pred_cls` must have the same length (extra entries of the longer ones are
/// ignored).
pub fn ap_per_class(
    tp: &[TruePositives],
    conf: &[f32],
    pred_cls: &[usize],
    target_cls: &[usize],
) -> ApPerClass {
    let n = tp.len().min(conf.len()).min(pred_cls.len());
    let order = order_by_confidence(&conf[..n]);
    let mut classes: Vec<usize> = target_cls.to_vec();
    classes.sort_unstable();
    classes.dedup();
    let instances: Vec<usize> =
        classes.iter().map(|&c| target_cls.iter().filter(|&&t| t == c).count()).collect();
    let px = linspace_unit(CURVE_POINTS);

    let mut ap = vec![[0.0; N_IOU]; classes.len()];
    let mut p_curve = vec![vec![0.0; CURVE_POINTS]; classes.len()];
    let mut r_curve = vec![vec![0.0; CURVE_POINTS]; classes.len()];
    for (ci, &class) in classes.iter().enumerate() {
        let picked: Vec<usize> = order.iter().copied().filter(|&i| pred_cls[i] == class).collect();
        if picked.is_empty() {
            continue;
        }
        let rows: Vec<&TruePositives> = picked.iter().map(|&i| &tp[i]).collect();
        let confs: Vec<f64> = picked.iter().map(|&i| f64::from(conf[i])).collect();
        let curves = class_curves(&rows, &confs, instances[ci], &px);
        ap[ci] = curves.ap;
        p_curve[ci] = curves.precision;
        r_curve[ci] = curves.recall;
    }

    const EPS: f64 = 1e-16;
    let f1_curve: Vec<Vec<f64>> = p_curve
        .iter()
        .zip(&r_curve)
        .map(|(p, r)| p.iter().zip(r).map(|(&p, &r)| 2.0 * p * r / (p + r + EPS)).collect())
        .collect();
    let best_f1_index = if classes.is_empty() {
        0
    } else {
        // f1_curve.mean(0): rows added in order, then divided by the number of classes.
        let mut mean_f1 = vec![0.0; CURVE_POINTS];
        for row in &f1_curve {
            for (m, v) in mean_f1.iter_mut().zip(row) {
                *m += v;
            }
        }
        mean_f1.iter_mut().for_each(|m| *m /= classes.len() as f64);
        argmax(&smooth(&mean_f1, 0.1))
    };
    let pick = |curves: &[Vec<f64>]| curves.iter().map(|c| c[best_f1_index]).collect::<Vec<f64>>();
    ApPerClass {
        precision: pick(&p_curve),
        recall: pick(&r_curve),
        f1: pick(&f1_curve),
        classes,
        instances,
        ap,
        best_f1_index,
    }
}

impl ApPerClass {
    /// Mean precision over classes (`Metric.mp`); 0 with no class.
    pub fn mean_precision(&self) -> f64 {
        mean_or_zero(&self.precision)
    }

    /// Mean recall over classes (`Metric.mr`); 0 with no class.
    pub fn mean_recall(&self) -> f64 {
        mean_or_zero(&self.recall)
    }

    /// Mean AP at IoU 0.5 over classes (`Metric.map50`); 0 with no class.
    pub fn map50(&self) -> f64 {
        mean_or_zero(&self.ap.iter().map(|a| a[0]).collect::<Vec<_>>())
    }

    /// Mean AP over classes and the 10 thresholds (`Metric.map`); 0 with no class.
    pub fn map50_95(&self) -> f64 {
        mean_or_zero(&self.ap.iter().flatten().copied().collect::<Vec<_>>())
    }

    /// AP over the 10 thresholds of the `index`-th class (`Metric.ap[index]`).
    pub fn ap50_95(&self, index: usize) -> f64 {
        self.ap.get(index).map_or(0.0, |a| mean(a))
    }
}

pub(super) fn mean_or_zero(values: &[f64]) -> f64 {
    if values.is_empty() { 0.0 } else { mean(values) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_perfect_detection_gives_0_995() {
        let ap = compute_ap(&[1.0], &[1.0]);
        assert!((ap - 0.995).abs() < 1e-12, "{ap}");
        let result = ap_per_class(&[[true; N_IOU]], &[0.9], &[0], &[0]);
        assert_eq!(result.classes, vec![0]);
        for a in result.ap[0] {
            assert!((a - 0.995).abs() < 1e-12);
        }
        assert!((result.map50_95() - 0.995).abs() < 1e-12);
        assert_eq!((result.precision[0], result.recall[0]), (1.0, 1.0));
    }

    #[test]
    fn half_recall_at_full_precision() {
        // 1 of 2 labels found. np.interp at recall exactly 0.5 takes the last of the repeated 0.5
        // points, whose envelope is 0: samples 0, 0.01, …, 0.49 are 1, the rest 0, so the
        // trapezoid gives 0.49 + 0.005 (Ultralytics' compute_ap([0.5], [1.0]) = 0.495).
        let ap = compute_ap(&[0.5], &[1.0]);
        assert!((ap - 0.495).abs() < 1e-12, "{ap}");
        // Both found, the second after a false positive: Ultralytics gives 0.913333….
        let ap = compute_ap(&[0.5, 1.0], &[1.0, 2.0 / 3.0]);
        assert!((ap - 0.913_333_333_333_333_3).abs() < 1e-12, "{ap}");
    }

    #[test]
    fn class_without_predictions_counts_as_zero() {
        let result = ap_per_class(&[[true; N_IOU]], &[0.9], &[0], &[0, 1]);
        assert_eq!(result.classes, vec![0, 1]);
        assert_eq!(result.ap[1], [0.0; N_IOU]);
        assert!((result.map50() - 0.995 / 2.0).abs() < 1e-12);
    }

    #[test]
    fn predictions_of_unlabelled_classes_are_ignored() {
        let with = ap_per_class(&[[true; N_IOU], [false; N_IOU]], &[0.9, 0.95], &[0, 2], &[0]);
        let without = ap_per_class(&[[true; N_IOU]], &[0.9], &[0], &[0]);
        assert_eq!(with, without);
    }

    #[test]
    fn no_labels_gives_zeros() {
        let result = ap_per_class(&[[false; N_IOU]], &[0.5], &[0], &[]);
        assert!(result.classes.is_empty());
        assert_eq!((result.map50(), result.map50_95(), result.mean_precision()), (0.0, 0.0, 0.0));
    }

    /// `class_ap` without its shortcuts: every point to `compute_ap`.
    fn class_ap_reference(rows: &[TruePositives], labels: usize) -> [f64; N_IOU] {
        let mut ap = [0.0; N_IOU];
        if rows.is_empty() {
            return ap;
        }
        for (t, value) in ap.iter_mut().enumerate() {
            let (mut tpc, mut fpc, mut recall, mut precision) = (0u64, 0u64, Vec::new(), Vec::new());
            for row in rows {
                tpc += u64::from(row[t]);
                fpc += u64::from(!row[t]);
                recall.push(tpc as f64 / (labels as f64 + 1e-16));
                precision.push(tpc as f64 / (tpc + fpc) as f64);
            }
            *value = compute_ap(&recall, &precision);
        }
        ap
    }

    proptest::proptest! {
        #[test]
        fn class_ap_equals_every_point_ap(
            hits in proptest::collection::vec((proptest::bool::weighted(0.3), 0usize..=N_IOU), 0..60),
            extra_labels in 0usize..5,
        ) {
            // A hit up to some threshold (as IoU matching gives), or none.
            let rows: Vec<TruePositives> = hits
                .iter()
                .map(|&(hit, up_to)| std::array::from_fn(|t| hit && t < up_to))
                .collect();
            let labels = rows.iter().filter(|r| r[0]).count() + extra_labels;
            proptest::prop_assume!(labels > 0);
            let fast = class_ap(rows.iter().map(|row| (row, 1)), labels, &mut ApWork::default());
            proptest::prop_assert_eq!(fast, class_ap_reference(&rows, labels));
            // The same rows with repeats run together.
            let mut runs: Vec<(&TruePositives, u64)> = Vec::new();
            for row in &rows {
                match runs.last_mut() {
                    Some((last, count)) if *last == row => *count += 1,
                    _ => runs.push((row, 1)),
                }
            }
            proptest::prop_assert_eq!(class_ap(runs.into_iter(), labels, &mut ApWork::default()), fast);
        }
    }

    #[test]
    fn equal_confidences_keep_input_order() {
        assert_eq!(order_by_confidence(&[0.5, 0.9, 0.5, f32::NAN, 0.9]), vec![1, 4, 0, 2, 3]);
    }
}
