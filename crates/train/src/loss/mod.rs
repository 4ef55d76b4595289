//! The detection loss Ultralytics 8.4.190 trains with, on the raw head outputs an export holds:
//! `v8DetectionLoss` (v5u, v8, 11: task-aligned assignment top-k 10) and the one-to-one branch of
//! `E2ELoss` (v10, 26: top-k 7 then 1; reg_max 1 for 26, whose dfl slot is an L1 term). CIoU box
//! loss, DFL (or L1), BCE classification, each normalised by the sum of the target scores, times the
//! gains, times the batch size — as Ultralytics computes them, checked against its numbers and
//! gradients (tests/fixtures/loss_golden, crates/train/tests/loss_golden.rs).

mod assigner;
mod boxes;
mod dense;

use tch::{Kind, Reduction, Tensor};

use crate::{Error, Result};
use assigner::Assigner;
use boxes::{bbox2dist, ciou, dist2bbox};
pub use dense::DenseTargets;

/// What the loss needs to know of the head and the training recipe.
#[derive(Debug, Clone, PartialEq)]
pub struct LossConfig {
    /// Classes.
    pub nc: i64,
    /// Bins of the box distribution (16; 1 for heads without DFL, as yolo26).
    pub reg_max: i64,
    /// Strides of the levels, finest first (8, 16, 32).
    pub strides: Vec<i64>,
    /// Candidates per object in the task-aligned assignment.
    pub topk: i64,
    /// Anchors kept per object after the first selection (= `topk` for one-to-many).
    pub topk2: i64,
    /// Gains of the box, classification and dfl (or L1) terms: 7.5, 0.5, 1.5.
    pub gains: [f64; 3],
}

impl LossConfig {
    /// `v8DetectionLoss` (v5u, v8, 11): top-k 10.
    pub fn one_to_many(nc: i64, reg_max: i64, strides: Vec<i64>) -> LossConfig {
        LossConfig { nc, reg_max, strides, topk: 10, topk2: 10, gains: [7.5, 0.5, 1.5] }
    }

    /// The one-to-one branch of `E2ELoss` (v10, 26), the branch an end-to-end export holds: top-k 7,
    /// then 1 anchor per object.
    pub fn one_to_one(nc: i64, reg_max: i64, strides: Vec<i64>) -> LossConfig {
        LossConfig { nc, reg_max, strides, topk: 7, topk2: 1, gains: [7.5, 0.5, 1.5] }
    }
}

/// One labelled object: image index in the batch, class, and the box as normalised `cx cy w h`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// Index of the image in the batch.
    pub image: usize,
    /// Class id.
    pub class: usize,
    /// Centre x, normalised.
    pub cx: f32,
    /// Centre y, normalised.
    pub cy: f32,
    /// Width, normalised.
    pub w: f32,
    /// Height, normalised.
    pub h: f32,
}

/// Distillation from a teacher's soft class scores (`--kd`): for each anchor assigned to an object
/// that has a soft vector `q`, scaled by the anchor's normalised alignment `t` (as the class term's
/// one-hot target is), the binary KL divergence `Σ_c r_c·ln(r_c/p_c) + (1−r_c)·ln((1−r_c)/(1−p_c))`
/// with `r = t·q` and `p = sigmoid(logits)`, averaged over those anchors, times `weight`
/// (docs/TRAIN.md).
#[derive(Debug, Clone, Copy)]
pub struct Distill<'a> {
    /// Gain of the term.
    pub weight: f64,
    /// Per target (aligned with the targets): the teacher's per-class confidences, or `None`
    /// (a human label, a replayed image): no distillation for that object.
    pub soft: &'a [Option<Vec<f32>>],
}

/// The ignore band (`--ignore-band LOW,HIGH`): what the teacher was unsure of counts neither as an
/// object nor as background. The class term skips every anchor that is not assigned to an object
/// and either lies inside one of `boxes` (pseudo-labels kept with a confidence in the band, taken
/// out of the targets by [`split_band`]) or, with a dense teacher, is an anchor whose teacher's
/// highest class probability lies in `[low, high)`. Boxes and DFL terms are unchanged (they only
/// see assigned anchors).
#[derive(Debug, Clone, Copy)]
pub struct Ignore<'a> {
    /// The uncertain boxes (`class` unused).
    pub boxes: &'a [Target],
    /// The band's ends, `0 ≤ low < high ≤ 1`.
    pub band: (f64, f64),
}

/// What the loss adds to the detection terms.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extras<'a> {
    /// Distillation on the pseudo-labels' soft scores (`--kd`).
    pub distill: Option<Distill<'a>>,
    /// Dense distillation on a teacher's outputs for the same batch (`--teacher`).
    pub dense: Option<DenseTargets<'a>>,
    /// The ignore band (`--ignore-band`).
    pub ignore: Option<Ignore<'a>>,
}

/// Splits pseudo-labels by the teacher's confidence (the highest of an object's soft scores) for
/// the ignore band `(low, high)`: objects at or above `high`, and those without soft scores (human
/// labels, replayed images), stay targets (with their soft scores); those in `[low, high)` become
/// ignore boxes; those below `low` are dropped.
pub fn split_band(
    targets: Vec<Target>,
    soft: Vec<Option<Vec<f32>>>,
    (low, high): (f64, f64),
) -> (Vec<Target>, Vec<Option<Vec<f32>>>, Vec<Target>) {
    let (mut kept, mut kept_soft, mut ignored) = (Vec::new(), Vec::new(), Vec::new());
    for (t, q) in targets.into_iter().zip(soft) {
        let confidence = q.as_ref().map(|q| f64::from(q.iter().copied().fold(0f32, f32::max)));
        match confidence {
            Some(c) if c < low => {}
            Some(c) if c < high => ignored.push(t),
            _ => {
                kept.push(t);
                kept_soft.push(q);
            }
        }
    }
    (kept, kept_soft, ignored)
}

/// The loss of one batch.
#[derive(Debug)]
pub struct LossOutput {
    /// What to differentiate: (box + cls + dfl, each with its gain) × batch size, as Ultralytics.
    pub total: Tensor,
    /// Box, classification and dfl (or L1) terms with their gains, before the batch-size factor
    /// (Ultralytics' `loss_items`).
    pub components: [f64; 3],
    /// Anchors assigned to an object.
    pub foreground: i64,
    /// The distillation terms with their gains (0 without [`Distill`] or [`DenseTargets`]),
    /// included in `total`.
    pub kd: f64,
}

/// The loss of raw head outputs `boxes` `[B, 4·reg_max, A]` and `scores` `[B, nc, A]` (logits), for
/// levels of `grids` `(h, w)` (anchors level by level, row-major), against `targets`.
pub fn detection_loss(
    config: &LossConfig,
    boxes: &Tensor,
    scores: &Tensor,
    grids: &[(i64, i64)],
    targets: &[Target],
) -> Result<LossOutput> {
    detection_loss_with(config, boxes, scores, grids, targets, None, None)
}

/// [`detection_loss`] plus, with `distill`, the distillation term on the teacher's soft scores, and
/// with `dense`, the dense distillation term on a teacher's outputs for the same batch.
pub fn detection_loss_with(
    config: &LossConfig,
    boxes: &Tensor,
    scores: &Tensor,
    grids: &[(i64, i64)],
    targets: &[Target],
    distill: Option<Distill<'_>>,
    dense: Option<DenseTargets<'_>>,
) -> Result<LossOutput> {
    detection_loss_extras(config, boxes, scores, grids, targets, Extras { distill, dense, ignore: None })
}

/// [`detection_loss`] plus the terms and the ignore band of `extras`.
pub fn detection_loss_extras(
    config: &LossConfig,
    boxes: &Tensor,
    scores: &Tensor,
    grids: &[(i64, i64)],
    targets: &[Target],
    extras: Extras<'_>,
) -> Result<LossOutput> {
    let Extras { distill, dense, ignore } = extras;
    let batch = check_shapes(config, boxes, scores, grids)?;
    if let Some(d) = &distill
        && (d.soft.len() != targets.len() || d.soft.iter().flatten().any(|q| q.len() != config.nc as usize))
    {
        return Err(Error::Loss {
            reason: format!(
                "soft scores for {} of {} targets, or of another length than {} classes",
                d.soft.len(),
                targets.len(),
                config.nc
            ),
        });
    }
    if let Some(t) = targets.iter().find(|t| t.image >= batch as usize || t.class >= config.nc as usize) {
        return Err(Error::Loss {
            reason: format!("target {t:?} outside the batch of {batch} or the {} classes", config.nc),
        });
    }
    let device = boxes.device();
    let pred_distri = boxes.permute([0, 2, 1]).contiguous();
    let pred_scores = scores.permute([0, 2, 1]).contiguous();
    let (anchor_points, stride_tensor) = make_anchors(grids, &config.strides, device);
    let (image_h, image_w) =
        ((grids[0].0 * config.strides[0]) as f32, (grids[0].1 * config.strides[0]) as f32);
    let (gt_labels, gt_bboxes) = pad_targets(targets, batch, image_w, image_h, device);
    let mask_gt = gt_bboxes.sum_dim_intlist(2, true, Kind::Float).gt(0.0);

    let pred_bboxes = decode(config.reg_max, &anchor_points, &pred_distri);
    let assigner = Assigner::new(config);
    let assigned = tch::no_grad(|| {
        assigner.assign(
            &pred_scores.detach().sigmoid(),
            &(pred_bboxes.detach() * &stride_tensor),
            &(&anchor_points * &stride_tensor),
            &gt_labels,
            &gt_bboxes,
            &mask_gt,
        )
    });
    let target_scores_sum = assigned.scores.sum(Kind::Float).clamp_min(1.0);
    let cls =
        pred_scores.binary_cross_entropy_with_logits::<Tensor>(&assigned.scores, None, None, Reduction::None);
    let cls = match ignore {
        Some(ignore) => {
            let skipped = tch::no_grad(|| {
                ignored_anchors(
                    &ignore,
                    dense.as_ref(),
                    batch,
                    (image_w, image_h),
                    &anchor_points,
                    &stride_tensor,
                )
            })? * assigned.foreground.logical_not().to_kind(Kind::Float);
            let keep: Tensor = 1.0 - skipped;
            cls * keep.unsqueeze(-1)
        }
        None => cls,
    };
    let cls = cls.sum(Kind::Float) / &target_scores_sum;
    let (box_term, dfl_term) = box_losses(
        config.reg_max,
        &pred_distri,
        &pred_bboxes,
        &anchor_points,
        &(&assigned.bboxes / &stride_tensor),
        &assigned.scores,
        &target_scores_sum,
        &assigned.foreground,
        (image_h, image_w),
        &stride_tensor,
    );
    let [gain_box, gain_cls, gain_dfl] = config.gains;
    let terms = [box_term * gain_box, cls * gain_cls, dfl_term * gain_dfl];
    let components = [0, 1, 2].map(|i| terms[i].double_value(&[]));
    let [a, b, c] = terms;
    let mut total = a + b + c;
    let mut kd = 0.0;
    if let Some(d) = distill.filter(|d| d.weight > 0.0) {
        let term = distillation(config, targets, d.soft, batch, &pred_scores, &assigned) * d.weight;
        kd = term.double_value(&[]);
        total += term;
    }
    if let Some(teacher) = dense.filter(|d| d.weight > 0.0) {
        let term = dense::dense_distillation(config, &pred_distri, &pred_scores, &teacher)?;
        kd += term.double_value(&[]);
        total += term;
    }
    let total = total * batch as f64;
    let foreground = assigned.foreground.sum(Kind::Int64).int64_value(&[]);
    Ok(LossOutput { total, components, foreground, kd })
}

/// `[B, A]`, 1 at the anchors the band covers: centres inside an uncertain box of their image, or,
/// with a dense teacher, the teacher's highest class probability in `[low, high)`.
fn ignored_anchors(
    ignore: &Ignore<'_>,
    dense: Option<&DenseTargets<'_>>,
    batch: i64,
    (image_w, image_h): (f32, f32),
    anchor_points: &Tensor,
    stride: &Tensor,
) -> Result<Tensor> {
    // 0/1 floats, joined by `maximum` (the ops the vendored wrapper compiles, vendor/torch-sys).
    let device = anchor_points.device();
    let anchors = anchor_points.size()[0];
    let mut covered = Tensor::zeros([batch, anchors], (Kind::Float, device));
    if !ignore.boxes.is_empty() {
        let (_, boxes) = pad_targets(ignore.boxes, batch, image_w, image_h, device); // [B, m, 4] xyxy px
        let centres = (anchor_points * stride).view([1, 1, anchors, 2]);
        let (x, y) = (centres.select(3, 0), centres.select(3, 1)); // [1, 1, A]
        let side = |i: i64| boxes.select(2, i).unsqueeze(-1); // [B, m, 1]
        let inside = x
            .gt_tensor(&side(0))
            .logical_and(&x.lt_tensor(&side(2)))
            .logical_and(&y.gt_tensor(&side(1)))
            .logical_and(&y.lt_tensor(&side(3)))
            .to_kind(Kind::Float); // [B, m, A]; padding rows are empty boxes
        covered = covered.maximum(&inside.amax([1].as_slice(), false));
    }
    if let Some(teacher) = dense {
        let (low, high) = ignore.band;
        let best = teacher.scores.f_sigmoid()?.f_amax([1].as_slice(), false)?; // [B, A]
        let in_band = best.lt(low).logical_not().logical_and(&best.lt(high)).to_kind(Kind::Float);
        covered = covered.maximum(&in_band);
    }
    Ok(covered)
}

/// The binary KL divergence between the teachers' soft vectors of the assigned objects and the
/// predicted class probabilities, summed over classes, averaged over the foreground anchors whose
/// object has a soft vector (0 when there is none).
fn distillation(
    config: &LossConfig,
    targets: &[Target],
    soft: &[Option<Vec<f32>>],
    batch: i64,
    pred_scores: &Tensor,
    assigned: &assigner::Assignment,
) -> Tensor {
    let nc = config.nc as usize;
    let mut per_image: Vec<Vec<Option<&Vec<f32>>>> = vec![Vec::new(); batch as usize];
    for (t, q) in targets.iter().zip(soft) {
        per_image[t.image].push(q.as_ref());
    }
    let n = per_image.iter().map(Vec::len).max().unwrap_or(0).max(1);
    let mut q = vec![0f32; batch as usize * n * nc];
    let mut has = vec![0f32; batch as usize * n];
    for (i, objects) in per_image.iter().enumerate() {
        for (j, vector) in objects.iter().enumerate() {
            if let Some(vector) = vector {
                q[(i * n + j) * nc..(i * n + j + 1) * nc].copy_from_slice(vector);
                has[i * n + j] = 1.0;
            }
        }
    }
    let device = pred_scores.device();
    let q = Tensor::from_slice(&q).view([batch, n as i64, config.nc]).to_device(device);
    let has = Tensor::from_slice(&has).view([batch, n as i64]).to_device(device);
    // Per anchor: its object's soft vector [B, A, nc] and whether it counts [B, A].
    let index = assigned.object.clamp(0, n as i64 - 1);
    let q_anchor = q.gather(1, &index.unsqueeze(-1).expand([-1, -1, config.nc], false), false);
    let weight = has.gather(1, &index, false) * assigned.foreground.to_kind(Kind::Float);
    // Scaled by the anchor's normalised alignment (what the class term's target is scaled by), so
    // that poorly aligned anchors of an object are not pulled up to the teacher's confidence.
    let alignment = assigned.scores.sum_dim_intlist(-1, true, Kind::Float);
    let q_anchor = (q_anchor * alignment).clamp(1e-6, 1.0 - 1e-6);
    let rest: Tensor = 1.0 - &q_anchor;
    let entropy = -(&q_anchor * q_anchor.log() + &rest * rest.log());
    let bce = pred_scores.binary_cross_entropy_with_logits::<Tensor>(&q_anchor, None, None, Reduction::None);
    let distilled = weight.sum(Kind::Float).clamp_min(1.0);
    ((bce - entropy).sum_dim_intlist(-1, false, Kind::Float) * weight).sum(Kind::Float) / distilled
}

/// The batch size, after checking that the outputs, grids and strides fit together.
fn check_shapes(config: &LossConfig, boxes: &Tensor, scores: &Tensor, grids: &[(i64, i64)]) -> Result<i64> {
    let anchors: i64 = grids.iter().map(|(h, w)| h * w).sum();
    let (b, s) = (boxes.size(), scores.size());
    let expected_boxes = [s.first().copied().unwrap_or(0), 4 * config.reg_max, anchors];
    if grids.len() != config.strides.len() || grids.is_empty() {
        return Err(Error::Loss {
            reason: format!("{} grids for {} strides", grids.len(), config.strides.len()),
        });
    }
    if b != expected_boxes || s.len() != 3 || s[1] != config.nc || s[2] != anchors {
        return Err(Error::Loss {
            reason: format!(
                "head outputs {b:?} and {s:?} do not match {} classes, reg_max {} and {anchors} anchors",
                config.nc, config.reg_max
            ),
        });
    }
    Ok(s[0])
}

/// Anchor centres in grid units (`[A, 2]`, x then y, 0.5 offset) and each anchor's stride (`[A, 1]`).
fn make_anchors(grids: &[(i64, i64)], strides: &[i64], device: tch::Device) -> (Tensor, Tensor) {
    let options = (Kind::Float, device);
    let mut points = Vec::new();
    let mut stride_parts = Vec::new();
    for (&(h, w), &stride) in grids.iter().zip(strides) {
        let sx = Tensor::arange(w, options) + 0.5;
        let sy = Tensor::arange(h, options) + 0.5;
        let grid = Tensor::meshgrid_indexing(&[&sy, &sx], "ij");
        points.push(Tensor::stack(&[&grid[1], &grid[0]], -1).view([-1, 2]));
        stride_parts.push(Tensor::full([h * w, 1], stride as f64, options));
    }
    (Tensor::cat(&points, 0), Tensor::cat(&stride_parts, 0))
}

/// Targets as `[B, n, 1]` classes and `[B, n, 4]` pixel `xyxy`, zero-padded to the most objects of
/// any image (Ultralytics' `preprocess`, objects kept in their order within each image).
fn pad_targets(
    targets: &[Target],
    batch: i64,
    image_w: f32,
    image_h: f32,
    device: tch::Device,
) -> (Tensor, Tensor) {
    let batch = batch as usize;
    let mut per_image = vec![Vec::new(); batch];
    for t in targets {
        per_image[t.image].push(*t);
    }
    let n = per_image.iter().map(Vec::len).max().unwrap_or(0);
    let mut labels = vec![0f32; batch * n];
    let mut bboxes = vec![0f32; batch * n * 4];
    for (i, objects) in per_image.iter().enumerate() {
        for (j, t) in objects.iter().enumerate() {
            labels[i * n + j] = t.class as f32;
            let (cx, cy, w, h) = (t.cx * image_w, t.cy * image_h, t.w * image_w, t.h * image_h);
            bboxes[(i * n + j) * 4..(i * n + j + 1) * 4].copy_from_slice(&[
                cx - w / 2.0,
                cy - h / 2.0,
                cx + w / 2.0,
                cy + h / 2.0,
            ]);
        }
    }
    let n = n as i64;
    (
        Tensor::from_slice(&labels).view([batch as i64, n, 1]).to_device(device),
        Tensor::from_slice(&bboxes).view([batch as i64, n, 4]).to_device(device),
    )
}

/// Box distributions to `xyxy` in grid units: the expectation over the bins (DFL), or the distances
/// themselves when `reg_max` is 1.
fn decode(reg_max: i64, anchor_points: &Tensor, pred_distri: &Tensor) -> Tensor {
    let distances = if reg_max > 1 {
        let size = pred_distri.size();
        let proj = Tensor::arange(reg_max, (Kind::Float, pred_distri.device()));
        pred_distri.view([size[0], size[1], 4, reg_max]).softmax(3, Kind::Float).matmul(&proj)
    } else {
        pred_distri.shallow_clone()
    };
    dist2bbox(&distances, anchor_points)
}

/// `BboxLoss`: CIoU on the foreground weighted by its target scores, and DFL (or, for reg_max 1, L1
/// on distances normalised by the image size).
#[allow(clippy::too_many_arguments)]
fn box_losses(
    reg_max: i64,
    pred_distri: &Tensor,
    pred_bboxes: &Tensor,
    anchor_points: &Tensor,
    target_bboxes: &Tensor,
    target_scores: &Tensor,
    target_scores_sum: &Tensor,
    foreground: &Tensor,
    (image_h, image_w): (f32, f32),
    stride: &Tensor,
) -> (Tensor, Tensor) {
    let fg = foreground.nonzero();
    let (fb, fa) = (fg.select(1, 0), fg.select(1, 1));
    let at = |t: &Tensor| t.index(&[Some(&fb), Some(&fa)]);
    let weight = at(target_scores).sum_dim_intlist(-1, true, Kind::Float);
    let iou = ciou(&at(pred_bboxes), &at(target_bboxes));
    let one_minus: Tensor = 1.0 - iou;
    let loss_iou = (one_minus * &weight).sum(Kind::Float) / target_scores_sum;
    let loss_dfl = if reg_max > 1 {
        let target_ltrb = bbox2dist(anchor_points, target_bboxes, Some(reg_max - 1));
        let dfl = dfl_loss(&at(pred_distri).view([-1, reg_max]), &at(&target_ltrb), reg_max) * &weight;
        dfl.sum(Kind::Float) / target_scores_sum
    } else {
        let scale = Tensor::from_slice(&[1.0 / image_w, 1.0 / image_h, 1.0 / image_w, 1.0 / image_h])
            .to_device(pred_distri.device());
        let target_ltrb = bbox2dist(anchor_points, target_bboxes, None) * stride * &scale;
        let pred = pred_distri * stride * &scale;
        let l1 = (at(&pred) - at(&target_ltrb)).abs().mean_dim(-1, true, Kind::Float) * &weight;
        l1.sum(Kind::Float) / target_scores_sum
    };
    (loss_iou, loss_dfl)
}

/// Distribution focal loss: cross-entropy to the two bins around each target distance, weighted by
/// closeness, averaged over the four sides (`[N, 1]`).
fn dfl_loss(pred_dist: &Tensor, target: &Tensor, reg_max: i64) -> Tensor {
    let target = target.clamp(0.0, reg_max as f64 - 1.0 - 0.01);
    let left = target.to_kind(Kind::Int64);
    let right = &left + 1;
    let weight_left = right.to_kind(Kind::Float) - &target;
    let weight_right = 1.0 - &weight_left;
    let logp = pred_dist.log_softmax(1, Kind::Float);
    let shape = left.size();
    let take = |i: &Tensor| logp.gather(1, &i.view([-1, 1]), false).view(shape.as_slice());
    let both: Tensor = take(&left) * weight_left + take(&right) * weight_right;
    -both.mean_dim(-1, true, Kind::Float)
}
