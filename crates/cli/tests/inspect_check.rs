//! `headroom inspect --check` (ONNX Runtime vs the libtorch executor) on every fixture family, size
//! and export form, and trained weights written back into the ONNX file.
#![cfg(all(feature = "onnxruntime", feature = "libtorch"))]

mod common;
use std::collections::BTreeMap;

use common::{headroom, repo_root};
use headroom_onnx::{Model, Trainable, patch};
use headroom_train::Student;
use headroom_train::tch::{Device, Kind, Tensor};

fn fixture(name: &str) -> String {
    repo_root().join("tests/fixtures/onnx").join(name).to_string_lossy().into_owned()
}

fn check(model: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["inspect", model, "--check", "--json", "--threads", "1"];
    args.extend(extra);
    let run = headroom(&args);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{model}: {e}; stderr: {}", String::from_utf8_lossy(&run.stderr)));
    let check = report["check"].clone();
    assert!(run.status.success(), "{model} {extra:?}: {check:#}");
    check
}

#[test]
fn every_fixture_family_runs_in_the_executor_as_in_onnx_runtime() {
    // (file, extra args): static 160 of every family, static 640, dynamic at 160 and 640,
    // un-simplified, and Ultralytics 8.2 (per-level concat head).
    let cases: &[(&str, &[&str])] = &[
        ("yolov8n-w00625-nc3-160.onnx", &[]),
        ("yolo11n-w00625-nc3-160.onnx", &[]),
        ("yolov5nu-w00625-nc3-160.onnx", &[]),
        ("yolov10n-w00625-nc3-160-e2e.onnx", &[]),
        ("yolo26n-w00625-nc3-160.onnx", &[]),
        ("yolov8n-w00625-nc3-640.onnx", &[]),
        ("yolov8n-w00625-nc3-160-dynamic.onnx", &[]),
        ("yolov8n-w00625-nc3-160-dynamic.onnx", &["--imgsz", "640"]),
        ("yolo26n-w00625-nc3-160-dynamic.onnx", &["--imgsz", "640"]),
        ("yolov8n-w00625-nc3-160-unsimplified.onnx", &[]),
        ("yolov8n-w00625-nc3-160-u8.2.onnx", &[]),
        ("yolov8n-w00625-nc3-160-dynamic-u8.2.onnx", &["--imgsz", "640"]),
    ];
    for (file, extra) in cases {
        let report = check(&fixture(file), extra);
        let max_rel = report["max_rel"].as_f64().expect("max_rel");
        println!("{file} {extra:?}: largest relative difference {max_rel:.3e}");
        assert!(max_rel <= 1e-4, "{file}: {report:#}");
        let tensors = report["tensors"].as_array().expect("tensors");
        assert_eq!(tensors.iter().filter(|t| t["role"] == "head").count(), 6, "{file}");
        assert!(tensors.iter().any(|t| t["role"] == "output"), "{file}");
    }
    let big = check(&fixture("yolov8n-w00625-nc3-160-dynamic.onnx"), &["--imgsz", "640"]);
    assert_eq!(big["input_shape"], serde_json::json!([1, 3, 640, 640]));
}

#[test]
fn a_real_image_and_the_demo_model_pass() {
    let demo = repo_root().join("models/demo/yolov8n-shapes-160.onnx");
    let image = repo_root().join("tests/fixtures/letterbox/source.png");
    let mut args = vec![];
    let image_arg = image.to_string_lossy().into_owned();
    if image.is_file() {
        args.extend(["--image", image_arg.as_str()]);
    }
    let report = check(&demo.to_string_lossy(), &args);
    assert!(report["passed"].as_bool() == Some(true), "{report:#}");
}

#[test]
fn a_static_model_refuses_another_size() {
    let run = headroom(&["inspect", &fixture("yolov8n-w00625-nc3-160.onnx"), "--check", "--imgsz", "640"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("static"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn trained_weights_written_back_run_in_onnx_runtime_as_in_the_executor() {
    let path = repo_root().join("models/demo/yolov8n-shapes-160.onnx");
    let bytes = std::fs::read(&path).expect("demo model");
    let model = Model::from_bytes(&bytes, &path).expect("load");
    let student = Student::new(&model, Trainable::Freeze(10), Device::Cpu).expect("student");
    headroom_train::tch::manual_seed(1);
    let images = Tensor::rand([2, 3, 160, 160], (Kind::Float, Device::Cpu));
    let cut = student.trunk(&images).expect("trunk");
    // A few plain SGD steps that push the class logits up: the weights really move.
    for _ in 0..3 {
        student.zero_grad();
        student
            .backward_checkpointed(&cut, |heads| {
                Ok(-heads.iter().map(|h| h.mean(Kind::Float)).sum::<Tensor>())
            })
            .expect("backward");
        let _guard = headroom_train::tch::no_grad_guard();
        for (_, p) in student.parameters() {
            let mut p = p.shallow_clone();
            let g = p.grad();
            let _ = p.f_sub_(&(g * 0.05)).expect("sgd step");
        }
    }
    let trained: BTreeMap<String, Vec<f32>> = student.trained_weights().expect("weights");
    assert_eq!(trained.len(), student.partition().parameters.len());
    let meta = vec![(patch::KEY_VERSION.to_string(), env!("CARGO_PKG_VERSION").to_string())];
    let written = patch::write_weights(&bytes, &path, &trained, &meta).expect("write back");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("trained.onnx");
    std::fs::write(&out, &written).expect("write");

    let report = check(&out.to_string_lossy(), &[]);
    assert!(report["max_rel"].as_f64().expect("max_rel") <= 1e-4, "{report:#}");
    // ONNX Runtime on the new file vs the executor holding the trained tensors in memory.
    let reloaded = Model::load(&out).expect("reload");
    let input: Vec<f32> = Vec::<f32>::try_from(&images.get(0).reshape([-1])).expect("values");
    let names: Vec<String> = reloaded.graph.outputs.iter().map(|o| o.name.clone()).collect();
    let ort = headroom_infer::probe::run_tensors(
        &reloaded,
        &[1, 3, 160, 160],
        &input,
        &names,
        &headroom_infer::provider::SessionOptions::default(),
    )
    .expect("onnx runtime");
    let ours = {
        let _guard = headroom_train::tch::no_grad_guard();
        let exec = student.executor();
        exec.run(vec![(exec.input_names()[0].clone(), images.get(0).unsqueeze(0))], &[]).expect("executor")
    };
    let ours: Vec<f32> = Vec::<f32>::try_from(&ours[0].reshape([-1])).expect("values");
    let (_, rel) = headroom_infer::probe::max_difference(&ours, &ort[0].values);
    assert!(rel <= 1e-4, "ONNX Runtime on the written file vs executor: {rel:.3e}");
    let original = headroom_infer::probe::run_tensors(
        &model,
        &[1, 3, 160, 160],
        &input,
        &names,
        &headroom_infer::provider::SessionOptions::default(),
    )
    .expect("onnx runtime");
    let (_, moved) = headroom_infer::probe::max_difference(&original[0].values, &ort[0].values);
    assert!(moved > 1e-3, "the trained weights must change the output ({moved:.3e})");
    assert_eq!(reloaded.graph.nodes, model.graph.nodes);
    assert!(reloaded.metadata_props.iter().any(|(k, _)| k == patch::KEY_VERSION));
}
