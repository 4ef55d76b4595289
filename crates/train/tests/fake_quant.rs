//! Quantization-aware training's fake quantization: its forward pass is the rounding the Q/DQ
//! export writes (`headroom_onnx::quant`), and its gradient is the straight-through estimate, checked
//! against central finite differences of the unrounded function (clamped where int8 clamps).
#![cfg(feature = "libtorch")]

use headroom_train::fake_quant;
use headroom_train::tch::{Device, Kind, Tensor};

fn values(t: &Tensor) -> Vec<f32> {
    let t = t.detach().to_kind(Kind::Float).flatten(0, -1);
    Vec::<f32>::try_from(&t).expect("values")
}

/// Central differences of `f` at `x` for each listed element.
fn finite_difference(f: impl Fn(&Tensor) -> f64, x: &Tensor, at: &[i64], eps: f64) -> Vec<f64> {
    at.iter()
        .map(|&i| {
            let bump = |d: f64| {
                let y = x.detach().copy();
                let flat = y.view([-1]);
                let _ = flat.get(i).f_add_(&Tensor::from(d as f32)).expect("bump");
                f(&y)
            };
            (bump(eps) - bump(-eps)) / (2.0 * eps)
        })
        .collect()
}

#[test]
fn the_weight_rounds_as_the_int8_file_does() {
    let w = Tensor::randn([4, 3, 3, 3], (Kind::Float, Device::Cpu)) * 0.2;
    // One channel all zeros: scale 1, as the export gives it.
    let _ = w.get(2).zero_();
    let flat = values(&w);
    let (q, scales) = headroom_onnx::quant::quantize_weight(&flat, 4);
    let expected: Vec<f32> = q.iter().enumerate().map(|(i, v)| f32::from(*v) * scales[i / 27]).collect();
    let got = values(&fake_quant::weight(&w).expect("fake quant"));
    for (i, (a, b)) in got.iter().zip(&expected).enumerate() {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1.0), "element {i}: {a} vs the file's {b}");
    }
    // It is not the float weight: the rounding is there.
    assert!(got.iter().zip(&flat).any(|(a, b)| (a - b).abs() > 1e-5));
}

#[test]
fn the_activation_rounds_and_clamps_as_quantize_linear_does() {
    let scale = 2.0 / 127.0;
    let x = Tensor::from_slice(&[0.0f32, 0.01, -0.5, 1.999, 2.5, -2.5, -3.0]);
    let got = values(&fake_quant::activation(&x, scale).expect("fake quant"));
    // round(x / s) clamped to −128..127, times s (ONNX QuantizeLinear then DequantizeLinear).
    let expected: Vec<f32> = values(&x)
        .iter()
        .map(|v| ((f64::from(*v) / scale).round_ties_even().clamp(-128.0, 127.0) * scale) as f32)
        .collect();
    for (a, b) in got.iter().zip(&expected) {
        assert!((a - b).abs() < 1e-6, "{got:?} vs {expected:?}");
    }
}

/// A Conv on fake-quantized activation and weight: the gradient with respect to the weight is that
/// of the float Conv (finite differences of `sum(conv(x̂, w)·r)`, linear in `w`), and with respect to
/// the activation that of the float Conv on the clamped activation: 0 where int8 clamps.
#[test]
fn the_gradient_is_straight_through_as_finite_differences_show() {
    let options = (Kind::Double, Device::Cpu);
    let scale = 1.0 / 127.0; // the activation's range is ±1: some of x below is clamped
    let x = (Tensor::rand([1, 2, 5, 5], options) * 3.0 - 1.5).set_requires_grad(true);
    let w = (Tensor::randn([3, 2, 3, 3], options) * 0.3).set_requires_grad(true);
    let r = Tensor::randn([1, 3, 3, 3], options);
    let conv = |x: &Tensor, w: &Tensor| x.conv2d(w, None::<Tensor>, [1, 1], [0, 0], [1, 1], 1);
    // fake quantization is defined on float32.
    let fq_x = |x: &Tensor| {
        fake_quant::activation(&x.to_kind(Kind::Float), scale).expect("activation").to_kind(Kind::Double)
    };
    let fq_w =
        |w: &Tensor| fake_quant::weight(&w.to_kind(Kind::Float)).expect("weight").to_kind(Kind::Double);
    let loss = (conv(&fq_x(&x), &fq_w(&w)) * &r).sum(Kind::Double);
    loss.backward();
    let (gx, gw) = (x.grad(), w.grad());

    let x_hat = fq_x(&x).detach();
    let w_hat = fq_w(&w).detach();
    let at: Vec<i64> = (0..50).collect();
    // With respect to the weight: the float Conv at the rounded activation and weight.
    let float_w = |w: &Tensor| f64::try_from((conv(&x_hat, w) * &r).sum(Kind::Double)).expect("scalar");
    let fd = finite_difference(float_w, &w_hat, &at, 1e-4);
    let grad = values(&gw);
    for (i, d) in at.iter().zip(&fd) {
        let g = f64::from(grad[*i as usize]);
        assert!((g - d).abs() < 1e-4 * d.abs().max(1.0), "dL/dw[{i}]: {g} vs finite difference {d}");
    }
    // With respect to the activation: the float Conv at the clamped activation (−128·s..127·s).
    let (low, high) = (-128.0 * scale, 127.0 * scale);
    let clamped = |x: &Tensor| {
        f64::try_from((conv(&x.clamp(low, high), &w_hat) * &r).sum(Kind::Double)).expect("scalar")
    };
    let xs = values(&x);
    // Away from the clamp's edges by a step: there int8 rounds to the edge before it clamps.
    let at: Vec<i64> = (0..50)
        .filter(|&i| {
            let v = f64::from(xs[i as usize]);
            (v - low).abs() > scale && (v - high).abs() > scale
        })
        .collect();
    let fd = finite_difference(clamped, &x.detach(), &at, 1e-5);
    let grad = values(&gx);
    let (mut inside, mut outside) = (0, 0);
    for (i, d) in at.iter().zip(&fd) {
        let g = f64::from(grad[*i as usize]);
        assert!((g - d).abs() < 1e-4 * d.abs().max(1.0), "dL/dx[{i}]: {g} vs finite difference {d}");
        if d.abs() > 0.0 { inside += 1 } else { outside += 1 }
    }
    assert!(
        inside > 5 && outside > 5,
        "both sides of the clamp are checked: {inside} inside, {outside} outside"
    );
}
