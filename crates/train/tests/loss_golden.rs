//! headroom's detection loss against Ultralytics 8.4.190's own criterion on the same head outputs
//! and targets (tests/fixtures/loss_golden, made by scripts/fixtures/loss_golden.py): every
//! component (box, cls, dfl or L1) and the gradients of the total with respect to the raw head
//! outputs, within 1e-4 relative, for the three kinds of loss the families train with.
#![cfg(feature = "libtorch")]

use std::path::{Path, PathBuf};

use headroom_train::loss::{LossConfig, Target, detection_loss};
use headroom_train::tch::{Kind, Tensor};
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/loss_golden")
}

fn tensor(path: &Path, shape: &[i64]) -> Tensor {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let values: Vec<f32> =
        bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    Tensor::from_slice(&values).view(shape)
}

/// Largest |a - b| / max(|b|, scale) over the elements, where `scale` is the largest |b|: relative
/// to the tensor's magnitude, so that tiny gradients do not dominate.
fn relative_error(a: &Tensor, b: &Tensor) -> f64 {
    let scale = b.abs().max().double_value(&[]).max(1e-12);
    (a - b).abs().max().double_value(&[]) / scale
}

/// The case's objects: `(batch_idx, class, cx, cy, w, h)` rows.
fn targets(case: &Value) -> Vec<Target> {
    case["targets"]
        .as_array()
        .expect("targets")
        .iter()
        .map(|t| {
            let f = |i: usize| t[i].as_f64().expect("number") as f32;
            Target { image: f(0) as usize, class: f(1) as usize, cx: f(2), cy: f(3), w: f(4), h: f(5) }
        })
        .collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().expect("array").iter().map(|x| x.as_i64().expect("int")).collect()
}

#[test]
fn the_loss_matches_ultralytics_components_and_gradients() {
    let mut report = Vec::new();
    let mut worst = 0f64;
    let mut cases = 0;
    for kind in ["dfl16_topk10", "dfl16_o2o", "l1_o2o"] {
        for scenario in ["boxes", "empty", "none"] {
            let dir = fixtures().join(kind).join(scenario);
            let case: Value =
                serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).expect("case.json"))
                    .expect("json");
            let (nc, reg_max, batch, anchors) = (
                case["nc"].as_i64(),
                case["reg_max"].as_i64(),
                case["batch"].as_i64(),
                case["anchors"].as_i64(),
            );
            let (nc, reg_max, batch, anchors) =
                (nc.expect("nc"), reg_max.expect("reg_max"), batch.expect("batch"), anchors.expect("a"));
            let strides = ints(&case["strides"]);
            let config = if case["tal_topk2"].as_i64() == Some(1) {
                LossConfig::one_to_one(nc, reg_max, strides)
            } else {
                LossConfig::one_to_many(nc, reg_max, strides)
            };
            assert_eq!(
                (config.topk, config.topk2),
                (case["tal_topk"].as_i64().expect("topk"), case["tal_topk2"].as_i64().expect("topk2"))
            );
            let grids: Vec<(i64, i64)> = case["grids_hw"]
                .as_array()
                .expect("grids")
                .iter()
                .map(|g| (g[0].as_i64().expect("h"), g[1].as_i64().expect("w")))
                .collect();
            let targets = targets(&case);
            let boxes =
                tensor(&dir.join("boxes.f32"), &[batch, 4 * reg_max, anchors]).set_requires_grad(true);
            let scores = tensor(&dir.join("scores.f32"), &[batch, nc, anchors]).set_requires_grad(true);
            let out = detection_loss(&config, &boxes, &scores, &grids, &targets).expect("loss");
            out.total.backward();
            let want: Vec<f64> = case["components_with_gains"]
                .as_array()
                .expect("components")
                .iter()
                .map(|v| v.as_f64().expect("f"))
                .collect();
            let mut errors = Vec::new();
            for (i, name) in ["box", "cls", "dfl"].iter().enumerate() {
                let e = (out.components[i] - want[i]).abs() / want[i].abs().max(1e-6);
                errors.push(format!("{name} {:.6} vs {:.6}", out.components[i], want[i]));
                worst = worst.max(if want[i] == 0.0 { out.components[i].abs() } else { e });
            }
            let grad_boxes = relative_error(
                &boxes.grad(),
                &tensor(&dir.join("grad_boxes.f32"), &[batch, 4 * reg_max, anchors]),
            );
            let grad_scores =
                relative_error(&scores.grad(), &tensor(&dir.join("grad_scores.f32"), &[batch, nc, anchors]));
            worst = worst.max(grad_boxes).max(grad_scores);
            let fg = case["fg"].as_i64().expect("fg");
            report.push(format!(
                "{kind}/{scenario}: {}; fg {} vs {fg}; gradients rel. error boxes {grad_boxes:.1e}, scores {grad_scores:.1e}",
                errors.join(", "),
                out.foreground
            ));
            assert_eq!(out.foreground, fg, "{}", report.join("\n"));
            assert_eq!(out.total.kind(), Kind::Float);
            cases += 1;
        }
    }
    println!("{}", report.join("\n"));
    assert_eq!(cases, 9);
    assert!(worst <= 1e-4, "largest relative error {worst:.2e}:\n{}", report.join("\n"));
}

/// The comparison can fail: the one-to-one case computed as one-to-many (top-k 10, every candidate
/// kept) assigns other anchors and gives other numbers; head outputs of the wrong size are refused.
#[test]
fn another_assignment_gives_other_numbers_and_bad_shapes_are_refused() {
    let dir = fixtures().join("dfl16_o2o/boxes");
    let case: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("case.json")).expect("json")).expect("json");
    let boxes = tensor(&dir.join("boxes.f32"), &[2, 64, 126]);
    let scores = tensor(&dir.join("scores.f32"), &[2, 3, 126]);
    let grids = [(8, 12), (4, 6), (2, 3)];
    let targets = targets(&case);
    let wrong = LossConfig::one_to_many(3, 16, vec![8, 16, 32]);
    let out = detection_loss(&wrong, &boxes, &scores, &grids, &targets).expect("loss");
    assert_ne!(out.foreground, case["fg"].as_i64().expect("fg"));
    let box_want = case["components_with_gains"][0].as_f64().expect("box");
    assert!((out.components[0] - box_want).abs() > 1e-3, "{} vs {box_want}", out.components[0]);
    let right = LossConfig::one_to_one(3, 16, vec![8, 16, 32]);
    let err = detection_loss(&right, &boxes, &scores, &grids[..2], &targets).expect_err("two grids");
    assert!(err.to_string().contains("2 grids for 3 strides"), "{err}");
    let err = detection_loss(&right, &scores, &scores, &grids, &targets).expect_err("scores as boxes");
    assert!(err.to_string().contains("do not match 3 classes, reg_max 16 and 126 anchors"), "{err}");
    let outside = [Target { image: 2, ..targets[0] }];
    let err = detection_loss(&right, &boxes, &scores, &grids, &outside).expect_err("image 2 of 2");
    assert!(err.to_string().contains("outside the batch of 2"), "{err}");
}
