//! Box arithmetic of the loss, as Ultralytics writes it (`dist2bbox`, `bbox2dist`, `bbox_iou` with
//! CIoU), so that the numbers and gradients agree.

use tch::Tensor;

/// Distances `(l, t, r, b)` from anchor points to `xyxy`.
pub fn dist2bbox(distance: &Tensor, anchor_points: &Tensor) -> Tensor {
    let parts = distance.chunk(2, -1);
    Tensor::cat(&[anchor_points - &parts[0], anchor_points + &parts[1]], -1)
}

/// `xyxy` to distances `(l, t, r, b)` from anchor points, clamped to `[0, reg_max - 0.01]` when given.
pub fn bbox2dist(anchor_points: &Tensor, bbox: &Tensor, reg_max: Option<i64>) -> Tensor {
    let parts = bbox.chunk(2, -1);
    let dist = Tensor::cat(&[anchor_points - &parts[0], &parts[1] - anchor_points], -1);
    match reg_max {
        Some(r) => dist.clamp(0.0, r as f64 - 0.01),
        None => dist,
    }
}

/// Complete IoU of `xyxy` boxes pairwise along the last axis (`[..., 1]`); the aspect-ratio weight
/// `alpha` carries no gradient, as in Ultralytics.
pub fn ciou(box1: &Tensor, box2: &Tensor) -> Tensor {
    const EPS: f64 = 1e-7;
    let b1 = box1.chunk(4, -1);
    let b2 = box2.chunk(4, -1);
    let (b1_x1, b1_y1, b1_x2, b1_y2) = (&b1[0], &b1[1], &b1[2], &b1[3]);
    let (b2_x1, b2_y1, b2_x2, b2_y2) = (&b2[0], &b2[1], &b2[2], &b2[3]);
    let (w1, h1) = (b1_x2 - b1_x1, b1_y2 - b1_y1 + EPS);
    let (w2, h2) = (b2_x2 - b2_x1, b2_y2 - b2_y1 + EPS);
    let inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp_min(0.0)
        * (b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)).clamp_min(0.0);
    let union = &w1 * &h1 + &w2 * &h2 - &inter + EPS;
    let iou = inter / union;
    let cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1);
    let ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1);
    let c2 = cw.pow_tensor_scalar(2) + ch.pow_tensor_scalar(2) + EPS;
    let rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow_tensor_scalar(2)
        + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow_tensor_scalar(2))
        / 4.0;
    let v = ((w2 / h2).atan() - (w1 / h1).atan()).pow_tensor_scalar(2) * (4.0 / std::f64::consts::PI.powi(2));
    let alpha = tch::no_grad(|| &v / (1.0 - &iou + &v + EPS));
    iou - (rho2 / c2 + v * alpha)
}
