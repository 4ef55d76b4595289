//! The task-aligned assigner of Ultralytics 8.4.190 (`TaskAlignedAssigner`, alpha 0.5, beta 6):
//! anchors whose centre lies in an object (objects with a side under the middle stride are enlarged
//! to it about their centre) are ranked by `score^alpha · CIoU^beta`; the top-k of each object are
//! candidates; an anchor claimed by several objects goes to the one it overlaps most; with a second
//! top-k (one-to-one heads) each object keeps its best anchors only. Target scores are the one-hot
//! class scaled by the normalised alignment. Runs without gradients.

use tch::{Kind, Tensor};

use super::LossConfig;
use super::boxes::ciou;

const ALPHA: f64 = 0.5;
const BETA: f64 = 6.0;
const EPS: f64 = 1e-9;

/// What [`Assigner::assign`] returns, per anchor.
pub struct Assignment {
    /// Assigned object's box, `[B, A, 4]` (pixels).
    pub bboxes: Tensor,
    /// Soft one-hot class targets, `[B, A, nc]`.
    pub scores: Tensor,
    /// Whether the anchor is assigned, `[B, A]` (bool).
    pub foreground: Tensor,
    /// Index of the assigned object within its image, `[B, A]` (int64; 0 off the foreground).
    pub object: Tensor,
}

pub struct Assigner {
    topk: i64,
    topk2: i64,
    nc: i64,
    /// Smallest object side considered when selecting anchors inside objects.
    stride_val: f64,
}

impl Assigner {
    pub fn new(config: &LossConfig) -> Assigner {
        let stride_val = config.strides.get(1).or(config.strides.first()).copied().unwrap_or(8) as f64;
        Assigner { topk: config.topk, topk2: config.topk2, nc: config.nc, stride_val }
    }

    /// Assigns anchors (`anchor_points` `[A, 2]` pixels) to objects (`gt_labels` `[B, n, 1]`,
    /// `gt_bboxes` `[B, n, 4]` pixels, `mask_gt` `[B, n, 1]`) given the predictions `pd_scores`
    /// `[B, A, nc]` (probabilities) and `pd_bboxes` `[B, A, 4]` (pixels).
    pub fn assign(
        &self,
        pd_scores: &Tensor,
        pd_bboxes: &Tensor,
        anchor_points: &Tensor,
        gt_labels: &Tensor,
        gt_bboxes: &Tensor,
        mask_gt: &Tensor,
    ) -> Assignment {
        let n_max = gt_bboxes.size()[1];
        if n_max == 0 {
            return Assignment {
                bboxes: pd_bboxes.zeros_like(),
                scores: pd_scores.zeros_like(),
                foreground: pd_scores.select(-1, 0).zeros_like().to_kind(Kind::Bool),
                object: pd_scores.select(-1, 0).zeros_like().to_kind(Kind::Int64),
            };
        }
        let mask_gt_f = mask_gt.to_kind(Kind::Float);
        let mask_in_gts = self.candidates_in_gts(anchor_points, gt_bboxes, &mask_gt_f);
        let (align_metric, overlaps) =
            self.box_metrics(pd_scores, pd_bboxes, gt_labels, gt_bboxes, &(&mask_in_gts * &mask_gt_f));
        let topk_mask = mask_gt.expand([-1, -1, self.topk], false).to_kind(Kind::Bool);
        let mask_topk = self.topk_candidates(&align_metric, &topk_mask);
        let mask_pos = mask_topk * &mask_in_gts * &mask_gt_f;
        let (target_gt_idx, foreground, mask_pos) =
            self.highest_overlaps(&mask_pos, &overlaps, n_max, &align_metric);
        let (bboxes, scores) = self.targets(gt_labels, gt_bboxes, &target_gt_idx, &foreground, n_max);
        let align_metric = align_metric * &mask_pos;
        let pos_align = align_metric.amax([-1].as_slice(), true);
        let pos_overlaps = (overlaps * &mask_pos).amax([-1].as_slice(), true);
        let norm =
            (align_metric * pos_overlaps / (pos_align + EPS)).amax([-2].as_slice(), false).unsqueeze(-1);
        Assignment {
            bboxes,
            scores: scores * norm,
            foreground: foreground.to_kind(Kind::Bool),
            object: target_gt_idx,
        }
    }

    /// `[B, n, A]` (float 0/1): anchor centres strictly inside each object, objects' sides floored
    /// at `stride_val` about their centre.
    fn candidates_in_gts(&self, xy: &Tensor, gt_bboxes: &Tensor, mask_gt: &Tensor) -> Tensor {
        let parts = gt_bboxes.chunk(4, -1);
        let (x1, y1, x2, y2) = (&parts[0], &parts[1], &parts[2], &parts[3]);
        let (cx, cy) = ((x1 + x2) / 2.0, (y1 + y2) / 2.0);
        let (w, h) = (x2 - x1, y2 - y1);
        let floor = |side: Tensor| {
            let small = side.lt(self.stride_val).to_kind(Kind::Float) * mask_gt;
            side.where_scalarother(&small.to_kind(Kind::Bool).logical_not(), self.stride_val)
        };
        let (w, h) = (floor(w), floor(h));
        // xywh → xyxy as Ultralytics' xywh2xyxy (centre ± half size).
        let (x1, y1) = (&cx - &w / 2.0, &cy - &h / 2.0);
        let (x2, y2) = (&cx + &w / 2.0, &cy + &h / 2.0);
        let (px, py) = (xy.select(1, 0), xy.select(1, 1));
        let inside = (&px - &x1)
            .gt(EPS) // [B, n, A] by broadcasting [A] against [B, n, 1]
            .logical_and(&(&py - &y1).gt(EPS))
            .logical_and(&(&x2 - &px).gt(EPS))
            .logical_and(&(&y2 - &py).gt(EPS));
        inside.to_kind(Kind::Float)
    }

    /// Alignment metric and CIoU overlaps, `[B, n, A]`, where `mask` is set.
    fn box_metrics(
        &self,
        pd_scores: &Tensor,
        pd_bboxes: &Tensor,
        gt_labels: &Tensor,
        gt_bboxes: &Tensor,
        mask: &Tensor,
    ) -> (Tensor, Tensor) {
        let index = mask.to_kind(Kind::Bool).nonzero();
        let (b, g, a) = (index.select(1, 0), index.select(1, 1), index.select(1, 2));
        let labels = gt_labels.index(&[Some(&b), Some(&g)]).select(-1, 0).to_kind(Kind::Int64);
        let bbox_scores = pd_scores.index(&[Some(&b), Some(&a), Some(&labels)]);
        let overlap_values =
            ciou(&gt_bboxes.index(&[Some(&b), Some(&g)]), &pd_bboxes.index(&[Some(&b), Some(&a)]))
                .squeeze_dim(-1)
                .clamp_min(0.0);
        let align_values = bbox_scores.pow_tensor_scalar(ALPHA) * overlap_values.pow_tensor_scalar(BETA);
        let shape = mask.size();
        let overlaps = Tensor::zeros(shape.as_slice(), (pd_bboxes.kind(), pd_bboxes.device())).index_put(
            &[Some(&b), Some(&g), Some(&a)],
            &overlap_values,
            false,
        );
        let align = Tensor::zeros(shape.as_slice(), (align_values.kind(), pd_scores.device())).index_put(
            &[Some(&b), Some(&g), Some(&a)],
            &align_values,
            false,
        );
        (align, overlaps)
    }

    /// `[B, n, A]` (float 0/1): each object's top-k anchors by `metrics`; an anchor listed twice in
    /// one object's list (masked entries all point at anchor 0) is dropped.
    fn topk_candidates(&self, metrics: &Tensor, topk_mask: &Tensor) -> Tensor {
        let (_, topk_idxs) = metrics.topk(self.topk, -1, true, true);
        let topk_idxs = topk_idxs.masked_fill(&topk_mask.logical_not(), 0);
        let count =
            metrics.zeros_like().scatter_add(-1, &topk_idxs, &topk_idxs.ones_like().to_kind(Kind::Float));
        count.masked_fill(&count.gt(1.0), 0.0)
    }

    /// Resolves anchors claimed by several objects (highest overlap wins), applies the second top-k,
    /// and returns the object index per anchor `[B, A]`, the foreground `[B, A]` and the final mask.
    fn highest_overlaps(
        &self,
        mask_pos: &Tensor,
        overlaps: &Tensor,
        n_max: i64,
        align_metric: &Tensor,
    ) -> (Tensor, Tensor, Tensor) {
        let fg = mask_pos.sum_dim_intlist(-2, false, Kind::Float);
        let multi = fg.unsqueeze(1).gt(1.0).expand([-1, n_max, -1], false);
        let (_, max_idx) = overlaps.max_dim(1, false);
        let is_max = mask_pos.zeros_like().scatter_value(1, &max_idx.unsqueeze(1), 1.0);
        let mut mask_pos = is_max.where_self(&multi, mask_pos);
        if self.topk2 != self.topk {
            let metric = align_metric * &mask_pos;
            let (_, idx) = metric.topk(self.topk2, -1, true, true);
            let keep = mask_pos.zeros_like().scatter_value(-1, &idx, 1.0);
            mask_pos *= keep;
        }
        let (fg, target_gt_idx) = mask_pos.max_dim(-2, false);
        (target_gt_idx, fg, mask_pos)
    }

    /// Per anchor: the assigned object's box `[B, A, 4]` and one-hot class `[B, A, nc]` (zero off the
    /// foreground).
    fn targets(
        &self,
        gt_labels: &Tensor,
        gt_bboxes: &Tensor,
        target_gt_idx: &Tensor,
        foreground: &Tensor,
        n_max: i64,
    ) -> (Tensor, Tensor) {
        let batch = gt_labels.size()[0];
        let offsets = Tensor::arange(batch, (Kind::Int64, gt_labels.device())).unsqueeze(-1) * n_max;
        let flat = target_gt_idx + offsets;
        let labels = gt_labels.to_kind(Kind::Int64).flatten(0, -1).index(&[Some(&flat)]).clamp_min(0);
        let bboxes = gt_bboxes.view([-1, 4]).index(&[Some(&flat)]);
        let size = labels.size();
        let one_hot = Tensor::zeros([size[0], size[1], self.nc], (Kind::Float, gt_labels.device()))
            .scatter_value(2, &labels.unsqueeze(-1), 1.0);
        let scores = one_hot * foreground.gt(0.0).unsqueeze(-1).to_kind(Kind::Float);
        (bboxes, scores)
    }
}
