//! Dense distillation (`--teacher T.onnx`): the teacher runs on the very batch the student trains
//! on — augmented, mosaicked, replayed images alike — and the student's raw head outputs are pulled
//! toward the teacher's at every anchor, not only at the objects the pseudo-labels kept. Detectors of
//! one head layout share the anchor grid at a given input size (strides 8/16/32, row-major per
//! level), so anchor `a` of the student and of the teacher look at the same place.
//!
//! Two terms, each on the scale of the matching term of the detection loss:
//! - classes: the binary KL divergence `Σ_c r·ln(r/p) + (1−r)·ln((1−r)/(1−p))` between the
//!   teacher's probabilities `r = σ(t)` and the student's `p = σ(s)`, summed over anchors and
//!   classes and divided by `Σ r` (the detection loss divides its class term by the sum of the
//!   target scores), times the class gain;
//! - boxes: for distribution heads (reg_max > 1) the KL divergence between the teacher's and the
//!   student's softmax over the bins of each side, averaged over the four sides; for reg_max 1 the
//!   L1 distance of the side distances; both weighted per anchor by the teacher's highest class
//!   probability (background anchors barely count), divided by the sum of those weights, times
//!   the dfl gain.

use tch::{Kind, Reduction, Tensor};

use super::LossConfig;
use crate::{Error, Result};

/// A teacher's raw head outputs on the batch being trained, in the student's layout: box
/// distributions `[B, 4·reg_max, A]` and class logits `[B, nc, A]`.
#[derive(Debug, Clone, Copy)]
pub struct DenseTargets<'a> {
    /// Gain of the two terms together.
    pub weight: f64,
    /// The teacher's box distributions.
    pub boxes: &'a Tensor,
    /// The teacher's class logits.
    pub scores: &'a Tensor,
}

/// The dense distillation term (with its gain) of student outputs `pred_distri` `[B, A, 4·reg_max]`
/// and `pred_scores` `[B, A, nc]` (logits, anchors first, as the detection loss holds them).
pub(crate) fn dense_distillation(
    config: &LossConfig,
    pred_distri: &Tensor,
    pred_scores: &Tensor,
    teacher: &DenseTargets<'_>,
) -> Result<Tensor> {
    let (sb, ss) = (pred_distri.size(), pred_scores.size());
    let (tb, ts) = (teacher.boxes.size(), teacher.scores.size());
    if tb.len() != 3 || ts.len() != 3 || [tb[0], tb[2], tb[1]] != sb[..] || [ts[0], ts[2], ts[1]] != ss[..] {
        return Err(Error::Loss {
            reason: format!(
                "the teacher's head outputs {tb:?} and {ts:?} do not match the student's {sb:?} and {ss:?} \
                 (anchors first): the teacher needs the same classes, reg_max and input size"
            ),
        });
    }
    let [_, gain_cls, gain_dfl] = config.gains;
    let teacher_boxes = teacher.boxes.f_permute([0, 2, 1])?.f_detach()?;
    let teacher_scores = teacher.scores.f_permute([0, 2, 1])?.f_detach()?;
    // Classes.
    let r = teacher_scores.f_sigmoid()?.f_clamp(1e-6, 1.0 - 1e-6)?;
    let rest = r.f_neg()?.f_add_scalar(1.0)?;
    let entropy = r.f_mul(&r.f_log()?)?.f_add(&rest.f_mul(&rest.f_log()?)?)?.f_neg()?;
    let bce = pred_scores.f_binary_cross_entropy_with_logits::<Tensor>(&r, None, None, Reduction::None)?;
    let cls = bce.f_sub(&entropy)?.f_sum(Kind::Float)?.f_div(&r.f_sum(Kind::Float)?.f_clamp_min(1.0)?)?;
    // Boxes, weighted by how much the teacher sees an object at each anchor.
    let weight = r.f_amax([-1].as_slice(), false)?; // [B, A]
    let (batch, anchors) = (sb[0], sb[1]);
    let per_anchor = if config.reg_max > 1 {
        let shape = [batch, anchors, 4, config.reg_max];
        let target = teacher_boxes.f_view(shape)?.f_softmax(-1, Kind::Float)?;
        let log_target = teacher_boxes.f_view(shape)?.f_log_softmax(-1, Kind::Float)?;
        let log_pred = pred_distri.f_view(shape)?.f_log_softmax(-1, Kind::Float)?;
        target
            .f_mul(&log_target.f_sub(&log_pred)?)?
            .f_sum_dim_intlist([-1].as_slice(), false, Kind::Float)?
            .f_mean_dim([-1].as_slice(), false, Kind::Float)?
    } else {
        pred_distri.f_sub(&teacher_boxes)?.f_abs()?.f_mean_dim([-1].as_slice(), false, Kind::Float)?
    };
    let boxes = per_anchor
        .f_mul(&weight)?
        .f_sum(Kind::Float)?
        .f_div(&weight.f_sum(Kind::Float)?.f_clamp_min(1.0)?)?;
    Ok(cls.f_mul_scalar(gain_cls)?.f_add(&boxes.f_mul_scalar(gain_dfl)?)?.f_mul_scalar(teacher.weight)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LossConfig {
        LossConfig::one_to_many(3, 16, vec![8, 16, 32])
    }

    #[test]
    fn zero_when_the_student_equals_the_teacher_and_positive_otherwise() {
        tch::manual_seed(0);
        let (b, a) = (2, 21);
        let boxes = Tensor::randn([b, 64, a], (Kind::Float, tch::Device::Cpu));
        let scores = Tensor::randn([b, 3, a], (Kind::Float, tch::Device::Cpu));
        let teacher = DenseTargets { weight: 1.0, boxes: &boxes, scores: &scores };
        let same =
            dense_distillation(&config(), &boxes.permute([0, 2, 1]), &scores.permute([0, 2, 1]), &teacher)
                .expect("loss");
        assert!(same.double_value(&[]).abs() < 1e-5, "{}", same.double_value(&[]));
        let other = Tensor::randn([b, a, 3], (Kind::Float, tch::Device::Cpu));
        let differ =
            dense_distillation(&config(), &boxes.permute([0, 2, 1]), &other, &teacher).expect("loss");
        assert!(differ.double_value(&[]) > 0.01, "{}", differ.double_value(&[]));
    }

    #[test]
    fn gradients_pull_the_student_toward_the_teacher() {
        tch::manual_seed(1);
        let (b, a) = (1, 5);
        let boxes = Tensor::randn([b, 64, a], (Kind::Float, tch::Device::Cpu));
        let scores = Tensor::full([b, 3, a], 2.0, (Kind::Float, tch::Device::Cpu));
        let teacher = DenseTargets { weight: 1.0, boxes: &boxes, scores: &scores };
        let student_scores =
            Tensor::zeros([b, a, 3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
        let loss = dense_distillation(&config(), &boxes.permute([0, 2, 1]), &student_scores, &teacher)
            .expect("loss");
        loss.backward();
        // The teacher is confident (σ(2) = 0.88), the student at 0.5: descent raises its logits.
        assert!(student_scores.grad().max().double_value(&[]) < 0.0);
    }

    #[test]
    fn a_teacher_of_another_layout_is_an_error() {
        let boxes = Tensor::zeros([1, 64, 10], (Kind::Float, tch::Device::Cpu));
        let scores = Tensor::zeros([1, 80, 10], (Kind::Float, tch::Device::Cpu));
        let teacher = DenseTargets { weight: 1.0, boxes: &boxes, scores: &scores };
        let student_boxes = Tensor::zeros([1, 10, 64], (Kind::Float, tch::Device::Cpu));
        let student_scores = Tensor::zeros([1, 10, 3], (Kind::Float, tch::Device::Cpu));
        let err = dense_distillation(&config(), &student_boxes, &student_scores, &teacher)
            .expect_err("80 vs 3 classes")
            .to_string();
        assert!(err.contains("same classes"), "{err}");
    }
}
