//! ONNX Runtime is really loaded and runs a real Ultralytics export: the demo model's raw output
//! equals Python onnxruntime's on the same input (tests/fixtures/ort, scripts/fixtures/ort_golden.py).
#![cfg(feature = "onnxruntime")]

use std::path::PathBuf;

use headroom_infer::decode::DecodeOptions;
use headroom_infer::detector::{Detector, to_nchw};
use headroom_infer::provider::SessionOptions;
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    shape: Vec<usize>,
    output: Vec<f32>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn demo_model_output_matches_python_onnxruntime() {
    let root = root();
    let golden: Golden = serde_json::from_str(
        &std::fs::read_to_string(root.join("tests/fixtures/ort/output.json")).expect("output.json"),
    )
    .expect("json");
    let input =
        headroom_core::imageio::read_rgb(&root.join("tests/fixtures/ort/input.png")).expect("input.png");
    let model = root.join("models/demo/yolov8n-shapes-160.onnx");
    let (output, shape) = Detector::open(&model, &SessionOptions::default())
        .expect("ONNX Runtime loads the demo model (run scripts/setup.sh and source .deps/env.sh)")
        .raw_output(&to_nchw(&input))
        .expect("runs");
    assert_eq!(shape, golden.shape);
    let (worst, index) = output
        .iter()
        .zip(&golden.output)
        .enumerate()
        .map(|(i, (a, b))| ((a - b).abs() / b.abs().max(1.0), i))
        .fold((0f32, 0), |acc, x| if x.0 > acc.0 { x } else { acc });
    assert!(worst < 1e-4, "largest relative difference {worst:.2e} at flat index {index}");
}

#[test]
fn demo_model_finds_the_shapes_of_its_own_domain() {
    let root = root();
    let model = root.join("models/demo/yolov8n-shapes-160.onnx");
    let mut detector =
        Detector::open(&model, &SessionOptions { intra_threads: 1, ..Default::default() }).expect("opens");
    assert_eq!(detector.metadata().names.as_ref().map(Vec::len), Some(3));
    let image =
        headroom_core::imageio::read_rgb(&root.join("tests/fixtures/letterbox/source.png")).expect("png");
    let detections = detector.detect(&image, &DecodeOptions::predict()).expect("detects");
    assert!(!detections.is_empty(), "the demo model sees nothing in a base image");
    for d in &detections {
        assert!(d.bbox.x1 >= 0.0 && d.bbox.x2 <= image.width() as f32 && d.bbox.y2 <= image.height() as f32);
    }
}

#[test]
fn a_file_that_is_not_onnx_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.onnx");
    std::fs::write(&bad, b"this is not a model").expect("write");
    let err = Detector::open(&bad, &SessionOptions::default()).expect_err("not ONNX");
    assert!(err.to_string().contains("bad.onnx"), "{err}");
    let missing =
        Detector::open(&dir.path().join("missing.onnx"), &SessionOptions::default()).expect_err("missing");
    assert!(missing.to_string().contains("missing.onnx"), "{missing}");
}
