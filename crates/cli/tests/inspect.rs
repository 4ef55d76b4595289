//! `headroom inspect` through the real binary.

mod common;
use common::{headroom, repo_root};

fn fixture(name: &str) -> String {
    repo_root().join("tests/fixtures/onnx").join(name).to_string_lossy().into_owned()
}

#[test]
fn json_report_of_yolov8n() {
    let run = headroom(&["inspect", &fixture("yolov8n-w00625-nc3-160.onnx"), "--json"]);
    assert!(run.status.success(), "stderr: {}", String::from_utf8_lossy(&run.stderr));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON on stdout");
    assert_eq!(report["family"], "v8");
    assert_eq!(report["end_to_end"], false);
    assert_eq!(report["input_shape"], serde_json::json!([1, 3, 160, 160]));
    assert_eq!(report["classes"], 3);
    assert_eq!(report["strides"], serde_json::json!([8, 16, 32]));
    assert_eq!(report["head"]["module"], 22);
    assert_eq!(report["head"]["box_channels"], 64);
    assert_eq!(report["head"]["class_channels"], 3);
    assert_eq!(report["head"]["levels"].as_array().map(Vec::len), Some(3));
    // Ultralytics: `model.fuse()` then sum(p.numel()) (tests/fixtures/onnx/fixtures.json).
    assert_eq!(report["parameters"], 353_529);
    let modules = report["modules"].as_array().expect("modules");
    assert_eq!(modules.len(), 23);
    let sum: u64 = modules.iter().map(|m| m["parameters"].as_u64().expect("count")).sum();
    assert_eq!(sum, 353_529);
    let points = report["freeze_points"].as_array().expect("freeze points");
    assert_eq!(points.last().map(|p| &p["name"]), Some(&serde_json::json!("head")));
}

#[test]
fn table_of_a_dynamic_end_to_end_and_demo_model() {
    let demo = repo_root().join("models/demo/yolov8n-shapes-160.onnx").to_string_lossy().into_owned();
    for (file, expect) in [
        (fixture("yolov8n-w00625-nc3-160-dynamic.onnx"), "[batch, 3, height, width] (dynamic)"),
        (fixture("yolov10n-w00625-nc3-160-e2e.onnx"), "v10 (end-to-end)"),
        (demo, "circle, square, triangle"),
    ] {
        let run = headroom(&["inspect", &file]);
        assert!(run.status.success(), "stderr: {}", String::from_utf8_lossy(&run.stderr));
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(stdout.contains(expect), "`{expect}` missing from\n{stdout}");
        assert!(stdout.contains("stride  8"), "{stdout}");
    }
}

#[test]
fn bad_input_exits_2_with_the_file_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = tmp.path().join("notes.onnx");
    std::fs::write(&path, "not a model").expect("write");
    let run = headroom(&["inspect", &path.to_string_lossy()]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("error: ") && stderr.contains("notes.onnx") && stderr.contains("not an ONNX model"),
        "{stderr}"
    );
}
