//! The student on real Ultralytics exports: partition counts as Ultralytics counts, trunk without
//! gradients, and the checkpointed backward giving the plain backward's gradients.
#![cfg(feature = "libtorch")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use headroom_onnx::{Model, Trainable};
use headroom_train::Student;
use headroom_train::tch::{Device, Kind, Tensor};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn demo() -> Model {
    Model::load(root().join("models/demo/yolov8n-shapes-160.onnx")).expect("demo model")
}

/// A loss that is not linear in the head outputs, with fixed random weights per output.
fn loss(weights: &[Tensor]) -> impl Fn(&[Tensor]) -> headroom_train::Result<Tensor> + '_ {
    move |outputs| {
        let mut total = Tensor::zeros([], (Kind::Float, Device::Cpu));
        for (o, w) in outputs.iter().zip(weights) {
            total = total + (o * w).sum(Kind::Float) + o.square().mean(Kind::Float);
        }
        Ok(total)
    }
}

fn gradients(student: &Student) -> HashMap<String, Tensor> {
    student.parameters().into_iter().map(|(n, p)| (n.to_string(), p.grad().detach().copy())).collect()
}

#[test]
fn freeze_10_trains_what_ultralytics_trains() {
    let model = demo();
    let student = Student::new(&model, Trainable::Freeze(10), Device::Cpu).expect("student");
    let p = student.partition();
    // Ultralytics 8.4.190, yolov8n nc=3 fused: 1,736,089 of 3,006,233 parameters in model.10 and later,
    // 16 of them the DFL's fixed 1x16 conv, which Ultralytics creates with requires_grad(False) and
    // which sits after the raw head: 1,736,073 train.
    assert_eq!(p.parameter_count, 1_736_089 - 16);
    let modules: Vec<Option<usize>> = p.segments.iter().map(|s| s.module).collect();
    // model.10 .. model.21, then the Detect module by branch (cv2.0, cv3.0, ... : 6 of them).
    let expected: Vec<Option<usize>> = (10..=21).map(Some).chain([Some(22); 6]).collect();
    assert_eq!(modules, expected);
    assert_eq!(p.head_outputs.len(), 6);
    // The trunk's weights are constants: no gradient is ever recorded for them.
    let frozen = model.graph.nodes.iter().filter(|n| n.module() == Some(3)).flat_map(|n| n.inputs.iter());
    for name in frozen {
        if let Some(w) = student.executor().weight(name) {
            assert!(!w.requires_grad(), "{name} is frozen");
        }
    }
    let head = Student::new(&model, Trainable::Head, Device::Cpu).expect("head only");
    assert_eq!(head.partition().freeze, 22);
    assert_eq!(head.partition().segments.len(), 6);
    let neck = Student::new(&model, Trainable::NeckHead, Device::Cpu).expect("neck+head");
    assert_eq!(neck.partition().freeze, 10);
}

#[test]
fn checkpointed_backward_gives_the_plain_gradients() {
    let model = demo();
    let student = Student::new(&model, Trainable::Freeze(10), Device::Cpu).expect("student");
    headroom_train::tch::manual_seed(0);
    let images = Tensor::rand([2, 3, 160, 160], (Kind::Float, Device::Cpu));
    let cut = student.trunk(&images).expect("trunk");
    let shapes: Vec<Vec<i64>> = student.head(&cut).expect("head").iter().map(Tensor::size).collect();
    assert_eq!(shapes[0], vec![2, 64, 20, 20]);
    assert_eq!(shapes[1], vec![2, 3, 20, 20]);
    let weights: Vec<Tensor> =
        shapes.iter().map(|s| Tensor::randn(s.as_slice(), (Kind::Float, Device::Cpu))).collect();

    student.zero_grad();
    let plain_loss = student.backward(&cut, loss(&weights)).expect("plain backward");
    let plain = gradients(&student);
    student.zero_grad();
    let ckpt_loss = student.backward_checkpointed(&cut, loss(&weights)).expect("checkpointed backward");
    let ckpt = gradients(&student);

    assert!((plain_loss - ckpt_loss).abs() <= 1e-6 * plain_loss.abs(), "{plain_loss} vs {ckpt_loss}");
    assert_eq!(plain.len(), student.partition().parameters.len());
    let mut worst = (0.0f64, String::new());
    for (name, g) in &plain {
        let other = &ckpt[name];
        let scale = g.abs().max().double_value(&[]).max(1e-12);
        assert!(scale > 1e-12, "parameter {name} got no gradient");
        let rel = (g - other).abs().max().double_value(&[]) / scale;
        if rel > worst.0 {
            worst = (rel, name.clone());
        }
    }
    println!("largest relative gradient difference {:.3e} at {}", worst.0, worst.1);
    assert!(worst.0 <= 1e-6, "largest relative gradient difference {:.3e} at {}", worst.0, worst.1);
}

#[test]
fn every_fixture_family_splits_and_runs_its_head() {
    for file in [
        "yolo11n-w00625-nc3-160.onnx",
        "yolov10n-w00625-nc3-160-e2e.onnx",
        "yolo26n-w00625-nc3-160-dynamic.onnx",
        "yolov5nu-w00625-nc3-160.onnx",
        "yolov8n-w00625-nc3-160-unsimplified.onnx",
        "yolov8n-w00625-nc3-160-dynamic-u8.2.onnx",
    ] {
        let model = Model::load(root().join("tests/fixtures/onnx").join(file)).expect("fixture");
        for spec in [Trainable::Head, Trainable::NeckHead] {
            let student = Student::new(&model, spec, Device::Cpu).unwrap_or_else(|e| panic!("{file}: {e}"));
            let images = Tensor::rand([1, 3, 160, 160], (Kind::Float, Device::Cpu));
            let cut = student.trunk(&images).unwrap_or_else(|e| panic!("{file}: {e}"));
            let weights: Vec<Tensor> = student
                .head(&cut)
                .unwrap_or_else(|e| panic!("{file}: {e}"))
                .iter()
                .map(|t| Tensor::ones(t.size().as_slice(), (Kind::Float, Device::Cpu)))
                .collect();
            student.zero_grad();
            student
                .backward_checkpointed(&cut, loss(&weights))
                .unwrap_or_else(|e| panic!("{file} {spec}: {e}"));
            let with_grad = student.parameters().iter().filter(|(_, p)| p.grad().defined()).count();
            assert_eq!(with_grad, student.partition().parameters.len(), "{file} {spec}");
        }
    }
}

/// `affine`: the head's weights and a scale and shift per channel of every Conv before it train
/// (gradients reach the stem through the whole graph), and the folded write-back is the same network:
/// the written file's outputs equal the reparametrised student's.
#[test]
fn affine_scales_train_through_the_trunk_and_fold_into_the_same_network() {
    let model = demo();
    let student = Student::new(&model, Trainable::Affine, Device::Cpu).expect("affine");
    let names: Vec<String> = student.parameters().iter().map(|(n, _)| n.to_string()).collect();
    assert!(names.iter().any(|n| n == "/model.0/conv/Conv#scale"), "the stem has a scale");
    assert!(
        names.iter().all(|n| n.contains('#') || n.starts_with("model.22")),
        "head weights + scales: {names:?}"
    );
    headroom_train::tch::manual_seed(3);
    let images = Tensor::rand([1, 3, 160, 160], (Kind::Float, Device::Cpu));
    let cut = student.trunk(&images).expect("trunk");
    let weights: Vec<Tensor> = student
        .head(&cut)
        .expect("head")
        .iter()
        .map(|o| Tensor::randn(o.size().as_slice(), (Kind::Float, Device::Cpu)))
        .collect();
    student.zero_grad();
    student.backward_checkpointed(&cut, loss(&weights)).expect("backward");
    let stem = gradients(&student).remove("/model.0/conv/Conv#scale").expect("stem scale");
    assert!(stem.abs().sum(Kind::Float).double_value(&[]) > 0.0, "the stem's scale gets a gradient");

    // Move every scale and shift, then compare the student with its folded file.
    {
        let _guard = headroom_train::tch::no_grad_guard();
        for (name, p) in student.parameters() {
            if name.contains('#') {
                let mut p = p.shallow_clone();
                let _ = p
                    .f_add_(&(Tensor::randn(p.size().as_slice(), (Kind::Float, Device::Cpu)) * 0.05))
                    .expect("move");
            }
        }
    }
    let reparametrised: Vec<Tensor> = headroom_train::tch::no_grad(|| student.head(&cut).expect("head"));
    let trained = student.trained_weights().expect("weights");
    assert!(trained.keys().all(|k| !k.contains('#')), "folded into the graph's own initializers");
    let path = root().join("models/demo/yolov8n-shapes-160.onnx");
    let bytes = std::fs::read(&path).expect("model");
    let written = headroom_onnx::patch::write_weights(&bytes, &path, &trained, &[]).expect("write back");
    let folded =
        Student::new(&Model::from_bytes(&written, &path).expect("written"), Trainable::Head, Device::Cpu)
            .expect("folded");
    let outputs =
        headroom_train::tch::no_grad(|| folded.head(&folded.trunk(&images).expect("trunk")).expect("head"));
    for (a, b) in reparametrised.iter().zip(&outputs) {
        let worst = (a - b).abs().max().double_value(&[]);
        let scale = b.abs().max().double_value(&[]).max(1.0);
        assert!(worst <= 1e-4 * scale, "largest difference {worst} (outputs up to {scale})");
    }
}

/// The graph's `Sigmoid(x)·x` pairs run as one `silu` (the default): the same outputs, loss and
/// gradients as node by node, every layer trained, plain and checkpointed.
#[test]
fn fused_silu_gives_the_unfused_values_and_gradients() {
    let model = demo();
    let mut fused = Student::new(&model, Trainable::Freeze(0), Device::Cpu).expect("student");
    let mut plain = Student::new(&model, Trainable::Freeze(0), Device::Cpu).expect("student");
    fused.set_fusion(true);
    plain.set_fusion(false);
    assert_eq!(fused.executor().silu_count(), 57, "YOLOv8n's SiLUs (every Conv module's activation)");
    headroom_train::tch::manual_seed(1);
    let images = Tensor::rand([2, 3, 160, 160], (Kind::Float, Device::Cpu));
    let outputs = |s: &Student| s.head(&s.trunk(&images).expect("trunk")).expect("head");
    let (a, b) = (outputs(&fused), outputs(&plain));
    let weights: Vec<Tensor> =
        a.iter().map(|t| Tensor::randn(t.size().as_slice(), (Kind::Float, Device::Cpu))).collect();
    for (x, y) in a.iter().zip(&b) {
        let diff = (x - y).abs().max().double_value(&[]);
        assert!(diff <= 1e-5 * y.abs().max().double_value(&[]).max(1.0), "outputs differ by {diff:e}");
    }
    for checkpointed in [false, true] {
        let run = |s: &Student| {
            s.zero_grad();
            let cut = s.trunk(&images).expect("trunk");
            let loss = if checkpointed {
                s.backward_checkpointed(&cut, loss(&weights))
            } else {
                s.backward(&cut, loss(&weights))
            };
            (loss.expect("backward"), gradients(s))
        };
        let ((fused_loss, fused_grads), (plain_loss, plain_grads)) = (run(&fused), run(&plain));
        assert!((fused_loss - plain_loss).abs() <= 1e-5 * plain_loss.abs(), "{fused_loss} vs {plain_loss}");
        let mut worst = 0.0f64;
        for (name, g) in &plain_grads {
            let scale = g.abs().max().double_value(&[]).max(1e-12);
            worst = worst.max((g - &fused_grads[name]).abs().max().double_value(&[]) / scale);
        }
        assert!(
            worst <= 1e-5,
            "checkpointed {checkpointed}: largest relative gradient difference {worst:.3e}"
        );
    }
}
