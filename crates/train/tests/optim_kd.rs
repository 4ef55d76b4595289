//! headroom's optimisers against libtorch's own (`torch.optim.SGD` with Nesterov momentum and L2
//! decay, `torch.optim.AdamW`), step for step on the same gradients; the clipping of gradient
//! norms; and the distillation term: positive, leaving the other terms alone, pulling the logits
//! toward the teacher's (alignment-scaled) scores, nothing for objects without soft scores.
#![cfg(feature = "libtorch")]

use headroom_train::ema::Ema;
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

#[test]
fn clipping_takes_the_joint_norm_of_every_gradient() {
    // Gradients (3, 4), (12) and a 2x2 of zeros: the joint norm is sqrt(9 + 16 + 144) = 13, each
    // tensor scaled by the same 6.5 / 13.
    let a = Tensor::from_slice(&[3.0f32, 4.0]).set_requires_grad(true);
    let b = Tensor::from_slice(&[12.0f32]).set_requires_grad(true);
    let c = Tensor::zeros([2, 2], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let half = |t: &Tensor| (t * t).sum(Kind::Float).divide_scalar(2.0);
    (half(&a) + half(&b) + half(&c)).backward();
    let before = clip_grad_norm(&[("a", &a), ("b", &b), ("c", &c)], 6.5).expect("clip");
    assert!((before - 13.0).abs() < 1e-9, "{before}");
    let ga = Vec::<f32>::try_from(&a.grad()).expect("grad");
    let gb = Vec::<f32>::try_from(&b.grad()).expect("grad");
    assert!(
        (ga[0] - 1.5).abs() < 1e-5 && (ga[1] - 2.0).abs() < 1e-5 && (gb[0] - 6.0).abs() < 1e-5,
        "{ga:?} {gb:?}"
    );
}

/// AdamW written out tensor by tensor as `torch.optim.AdamW` documents it (decoupled decay on
/// weights only, bias-corrected moments): the reference the fused update is held to.
fn adamw_reference(p: &mut Tensor, g: &Tensor, m: &mut Tensor, v: &mut Tensor, step: i32, lr: f64, wd: f64) {
    let (b1, b2, eps) = (0.9, 0.999, 1e-8);
    *p = &*p * (1.0 - lr * wd);
    *m = &*m * b1 + g * (1.0 - b1);
    *v = &*v * b2 + g * g * (1.0 - b2);
    let denominator = (&*v / (1.0 - b2.powi(step))).sqrt() + eps;
    *p = &*p - (&*m / (1.0 - b1.powi(step))) / denominator * lr;
}

#[test]
fn fused_adamw_over_many_tensors_steps_as_the_per_tensor_formula() {
    headroom_train::tch::manual_seed(7);
    let shapes: [&[i64]; 5] = [&[8, 4, 3, 3], &[8], &[6, 8], &[6], &[3]];
    let params: Vec<Tensor> = shapes
        .iter()
        .map(|s| Tensor::randn(*s, (Kind::Float, Device::Cpu)).set_requires_grad(true))
        .collect();
    let names: Vec<String> = (0..params.len()).map(|i| format!("p{i}")).collect();
    let mut reference: Vec<(Tensor, Tensor, Tensor)> =
        params.iter().map(|p| (p.detach().copy(), p.zeros_like(), p.zeros_like())).collect();
    let mut adam = AdamW::new(0.9, 0.05);
    let (lr_weights, lr_biases) = (0.01, 0.1);
    for step in 1..=6 {
        // The last tensor gets no gradient: it is skipped, as torch skips it.
        for (i, p) in params.iter().enumerate().take(params.len() - 1) {
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
            (p * Tensor::randn(p.size(), (Kind::Float, Device::Cpu))).sum(Kind::Float).backward();
            let (rp, rm, rv) = &mut reference[i];
            let (lr, wd) = if p.dim() >= 2 { (lr_weights, 0.05) } else { (lr_biases, 0.0) };
            adamw_reference(rp, &p.grad(), rm, rv, step, lr, wd);
        }
        let named: Vec<(&str, &Tensor)> = names.iter().map(String::as_str).zip(params.iter()).collect();
        adam.step_with(&named, lr_weights, lr_biases).expect("step");
    }
    for (i, (p, (expected, _, _))) in params.iter().zip(&reference).enumerate() {
        let diff = (p.detach() - expected).abs().max().double_value(&[]);
        let scale = expected.abs().max().double_value(&[]).max(1e-3);
        assert!(diff / scale < 1e-5, "tensor {i}: fused AdamW differs by {diff} (scale {scale})");
    }
    let (steps, state) = adam.state();
    assert_eq!(steps, 6);
    assert_eq!(state.len(), 2 * (params.len() - 1), "moments for the tensors with gradients only");
}

#[test]
fn fused_sgd_over_many_tensors_steps_as_the_per_tensor_formula() {
    headroom_train::tch::manual_seed(11);
    let shapes: [&[i64]; 4] = [&[8, 4, 3, 3], &[8], &[6, 8], &[6]];
    let params: Vec<Tensor> = shapes
        .iter()
        .map(|s| Tensor::randn(*s, (Kind::Float, Device::Cpu)).set_requires_grad(true))
        .collect();
    let names: Vec<String> = (0..params.len()).map(|i| format!("p{i}")).collect();
    // (value, momentum buffer): torch.optim.SGD's per-tensor loop, Nesterov, L2 decay on weights.
    let mut reference: Vec<(Tensor, Option<Tensor>)> =
        params.iter().map(|p| (p.detach().copy(), None)).collect();
    let (momentum, wd) = (0.937, 5e-4);
    let mut sgd = Sgd::new(0.0, momentum, true, wd);
    let (lr_weights, lr_biases) = (0.01, 0.1);
    for step in 0..6 {
        // The first bias joins at the third step: its buffer starts then, the others' go on.
        for (i, p) in params.iter().enumerate() {
            if i == 1 && step < 2 {
                continue;
            }
            let mut g = p.grad();
            if g.defined() {
                let _ = g.zero_();
            }
            (p * Tensor::randn(p.size(), (Kind::Float, Device::Cpu))).sum(Kind::Float).backward();
            let (value, buffer) = &mut reference[i];
            let (lr, decay) = if p.dim() >= 2 { (lr_weights, wd) } else { (lr_biases, 0.0) };
            let g = p.grad() + &*value * decay;
            let b = match buffer.take() {
                Some(b) => b * momentum + &g,
                None => g.copy(),
            };
            *value = &*value - (&g + &b * momentum) * lr;
            *buffer = Some(b);
        }
        let named: Vec<(&str, &Tensor)> = names
            .iter()
            .map(String::as_str)
            .zip(params.iter())
            .enumerate()
            .filter(|(i, _)| !(*i == 1 && step < 2))
            .map(|(_, pair)| pair)
            .collect();
        sgd.step_with(&named, lr_weights, lr_biases).expect("step");
    }
    for (i, (p, (expected, _))) in params.iter().zip(&reference).enumerate() {
        let diff = (p.detach() - expected).abs().max().double_value(&[]);
        let scale = expected.abs().max().double_value(&[]).max(1e-3);
        assert!(diff / scale < 1e-5, "tensor {i}: fused SGD differs by {diff} (scale {scale})");
    }
    assert_eq!(sgd.buffers().len(), params.len());
}

#[test]
fn the_average_and_clipping_cover_every_tensor_in_one_call() {
    headroom_train::tch::manual_seed(3);
    let params: Vec<Tensor> = [&[4i64, 3][..], &[5], &[2, 2, 2]]
        .iter()
        .map(|s| Tensor::randn(*s, (Kind::Float, Device::Cpu)).set_requires_grad(true))
        .collect();
    let names = ["a", "b", "c"];
    let named: Vec<(&str, &Tensor)> = names.iter().copied().zip(params.iter()).collect();
    let mut ema = Ema::new(&named);
    let start: Vec<Tensor> = params.iter().map(|p| p.detach().copy()).collect();
    {
        let _guard = headroom_train::tch::no_grad_guard();
        for p in &params {
            let _ = p.shallow_clone().f_add_(&p.ones_like()).expect("move");
        }
    }
    ema.update(&named, 100).expect("update");
    let d = Ema::decay(100);
    for ((name, p), s) in named.iter().zip(&start) {
        let expected = s * d + p.detach() * (1.0 - d);
        let diff = (&ema.tensors()[*name] - expected).abs().max().double_value(&[]);
        assert!(diff < 1e-6, "average of {name} differs by {diff}");
    }
    for p in &params {
        (p * p).sum(Kind::Float).divide_scalar(2.0).backward(); // grad = p
    }
    let joint =
        params.iter().map(|p| p.detach().square().sum(Kind::Double).double_value(&[])).sum::<f64>().sqrt();
    let before = clip_grad_norm(&named, 1.0).expect("clip");
    assert!((before - joint).abs() < 1e-4 * joint, "joint norm {before}, {joint} expected");
    let after =
        params.iter().map(|p| p.grad().square().sum(Kind::Double).double_value(&[])).sum::<f64>().sqrt();
    assert!((after - 1.0).abs() < 1e-4, "clipped to norm {after}, 1 expected");
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
