//! headroom's optimisers against libtorch's own (`torch.optim.SGD` with Nesterov momentum and L2
//! decay, `torch.optim.AdamW`), step for step on the same gradients; the clipping of gradient
//! norms; and the distillation term: positive, leaving the other terms alone, pulling the logits
//! toward the teacher's (alignment-scaled) scores, nothing for objects without soft scores.
#![cfg(feature = "libtorch")]

use headroom_train::loss::{Distill, LossConfig, Target, detection_loss_with};
use headroom_train::optim::{AdamW, Sgd, clip_grad_norm};
use headroom_train::tch::nn::{self, OptimizerConfig};
use headroom_train::tch::{Device, Kind, Tensor};

/// Runs 5 steps of `ours` and of libtorch's optimiser built by `theirs` on `loss(w) = Σ (w·x)²`
/// from the same start and returns the largest difference of the weights.
fn compare(ours: &mut dyn FnMut(&Tensor), theirs: impl OptimizerConfig) -> f64 {
    let start = Tensor::randn([4, 3], (Kind::Float, Device::Cpu));
    let x = Tensor::randn([3, 5], (Kind::Float, Device::Cpu));
    let vs = nn::VarStore::new(Device::Cpu);
    let w_theirs = vs.root().var_copy("w", &start);
    let mut opt = theirs.build(&vs, 0.01).expect("optimizer");
    let w_ours = start.copy().set_requires_grad(true);
    for _ in 0..5 {
        opt.zero_grad();
        w_theirs.matmul(&x).square().sum(Kind::Float).backward();
        opt.step();
        let mut g = w_ours.grad();
        if g.defined() {
            let _ = g.zero_();
        }
        w_ours.matmul(&x).square().sum(Kind::Float).backward();
        ours(&w_ours);
    }
    (&w_ours - &w_theirs).abs().max().double_value(&[])
}

#[test]
fn sgd_and_adamw_step_as_libtorch_does() {
    headroom_train::tch::manual_seed(1);
    let mut sgd = Sgd::new(0.01, 0.937, true, 5e-4);
    let diff = compare(
        &mut |w| sgd.step(&[("w", w)]).expect("step"),
        nn::Sgd { momentum: 0.937, dampening: 0.0, wd: 5e-4, nesterov: true },
    );
    assert!(diff < 1e-5, "SGD differs from libtorch's by {diff}");
    let mut adam = AdamW::new(0.9, 0.05);
    let diff = compare(
        &mut |w| adam.step_with(&[("w", w)], 0.01, 0.01).expect("step"),
        nn::AdamW { beta1: 0.9, beta2: 0.999, wd: 0.05, eps: 1e-8, amsgrad: false },
    );
    assert!(diff < 1e-5, "AdamW differs from libtorch's by {diff}");
}

#[test]
fn clipping_scales_gradients_to_the_norm() {
    let w = Tensor::from_slice(&[3.0f32, 4.0]).set_requires_grad(true);
    (&w * &w).sum(Kind::Float).divide_scalar(2.0).backward(); // grad = w = (3, 4), norm 5
    let before = clip_grad_norm(&[("w", &w)], 1.0).expect("clip");
    assert!((before - 5.0).abs() < 1e-6);
    let g = Vec::<f32>::try_from(&w.grad()).expect("grad");
    assert!((g[0] - 0.6).abs() < 1e-5 && (g[1] - 0.8).abs() < 1e-5, "{g:?}");
    assert!(
        (clip_grad_norm(&[("w", &w)], 10.0).expect("clip") - 1.0).abs() < 1e-4,
        "under the limit: unchanged"
    );
}

/// One object in the middle of a 64×64 input, one level of stride 8 (8×8 anchors), 3 classes.
fn kd_case(logit: f32, teacher: Vec<f32>) -> (f64, f64, Tensor) {
    let config = LossConfig::one_to_many(3, 16, vec![8]);
    let grids = [(8, 8)];
    let boxes = Tensor::zeros([1, 64, 64], (Kind::Float, Device::Cpu));
    let scores =
        Tensor::full([1, 3, 64], f64::from(logit), (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let targets = [Target { image: 0, class: 1, cx: 0.5, cy: 0.5, w: 0.5, h: 0.5 }];
    let soft = [Some(teacher)];
    let with = detection_loss_with(
        &config,
        &boxes,
        &scores,
        &grids,
        &targets,
        Some(Distill { weight: 1.0, soft: &soft }),
        None,
    )
    .expect("loss");
    with.total.backward();
    let without = detection_loss_with(&config, &boxes, &scores, &grids, &targets, None, None).expect("loss");
    assert_eq!(with.components, without.components, "the other terms do not change");
    (with.kd, without.kd, scores.grad())
}

#[test]
fn distillation_is_a_kl_divergence_on_assigned_anchors() {
    // p = sigmoid(0) = 0.5 for every class; the targets are the teacher's scores times the anchors'
    // alignment (≤ 1): classes the teacher calls absent are pushed down.
    let (kd, off, grad) = kd_case(0.0, vec![0.1, 0.9, 0.1]);
    assert!(kd > 0.1 && kd.is_finite() && off == 0.0, "kd {kd}");
    let g = grad.sum_dim_intlist(-1, false, Kind::Float);
    let g = Vec::<f32>::try_from(&g.view([-1])).expect("grad");
    assert!(g[0] > 0.0 && g[2] > 0.0, "classes 0 and 2 pushed down: {g:?}");
    assert!(g[1] < g[0], "class 1 pushed down less than class 0: {g:?}");
    // Logits that already say "absent" for classes 0 and 2 are closer to the teacher: a smaller term.
    let (closer, _, _) = kd_case(-2.0, vec![0.1, 0.9, 0.1]);
    assert!(closer < kd, "{closer} < {kd}");
    // An object without soft scores adds nothing.
    let config = LossConfig::one_to_many(3, 16, vec![8]);
    let boxes = Tensor::zeros([1, 64, 64], (Kind::Float, Device::Cpu));
    let scores = Tensor::zeros([1, 3, 64], (Kind::Float, Device::Cpu));
    let targets = [Target { image: 0, class: 1, cx: 0.5, cy: 0.5, w: 0.5, h: 0.5 }];
    let none = [None];
    let out = detection_loss_with(
        &config,
        &boxes,
        &scores,
        &[(8, 8)],
        &targets,
        Some(Distill { weight: 1.0, soft: &none }),
        None,
    )
    .expect("loss");
    assert_eq!(out.kd, 0.0);
    let wrong = [Some(vec![0.5; 2])];
    let err = detection_loss_with(
        &config,
        &boxes,
        &scores,
        &[(8, 8)],
        &targets,
        Some(Distill { weight: 1.0, soft: &wrong }),
        None,
    );
    assert!(err.is_err(), "a vector of another length is refused");
}
