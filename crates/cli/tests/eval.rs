//! `headroom eval` and `headroom doctor` through the real binary, on the shipped demo model.

mod common;
use common::{headroom, repo_root};

fn demo_model() -> String {
    repo_root().join("models/demo/yolov8n-shapes-160.onnx").display().to_string()
}

#[cfg(feature = "onnxruntime")]
#[test]
fn evaluates_the_demo_model_on_its_own_domain_and_on_the_shifted_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut map = Vec::new();
    for preset in ["base", "field"] {
        let out = dir.path().join(preset);
        let out = out.to_str().expect("utf-8 path");
        let synth = headroom(&[
            "-q", "synth", "--preset", preset, "--seed", "11", "--train", "1", "--val", "24", "--out", out,
        ]);
        assert!(synth.status.success(), "{}", String::from_utf8_lossy(&synth.stderr));
        let data = format!("{out}/data.yaml");
        let json_out = format!("{out}/eval.json");
        let eval = headroom(&[
            "-q",
            "eval",
            "--model",
            &demo_model(),
            "--data",
            &data,
            "--json",
            "--json-out",
            &json_out,
        ]);
        assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
        let report: serde_json::Value = serde_json::from_slice(&eval.stdout).expect("JSON on stdout");
        let saved: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json_out).expect("--json-out written"))
                .expect("json");
        assert_eq!(report, saved);
        assert_eq!(report["metrics"]["images"], 24);
        assert_eq!(report["metrics"]["per_class"].as_array().map(Vec::len), Some(3));
        map.push(report["metrics"]["map50_95"].as_f64().expect("mAP50-95"));
    }
    // The demo model was trained on `base`: good there, clearly worse under the `field` shift.
    assert!(map[0] > 0.4, "mAP50-95 on base {}", map[0]);
    assert!(map[1] < map[0] - 0.1, "field {} is not clearly below base {}", map[1], map[0]);
}

#[test]
fn a_missing_data_yaml_is_named_in_the_error() {
    let out = headroom(&["eval", "--model", &demo_model(), "--data", "/nonexistent/data.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("error:") && stderr.contains("/nonexistent/data.yaml"), "{stderr}");
}

#[cfg(feature = "onnxruntime")]
#[test]
fn a_dataset_with_other_classes_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().to_str().expect("utf-8 path");
    let synth = headroom(&["-q", "synth", "--train", "1", "--val", "2", "--out", out]);
    assert!(synth.status.success());
    let yaml = dir.path().join("data.yaml");
    let text = std::fs::read_to_string(&yaml).expect("data.yaml");
    let text = text.replace("nc: 3\n", "").replace("- triangle\n", "");
    std::fs::write(&yaml, text).expect("write");
    let eval = headroom(&["eval", "--model", &demo_model(), "--data", yaml.to_str().expect("utf-8")]);
    assert_eq!(eval.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&eval.stderr);
    assert!(stderr.contains("3 classes") && stderr.contains("has 2"), "{stderr}");
}

#[test]
fn doctor_reports_each_native_library() {
    let out = headroom(&["doctor", "--json", "--model", &demo_model()]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let ok = |name: &str| report[name]["ok"].as_bool().expect("ok flag");
    assert_eq!(ok("onnxruntime"), cfg!(feature = "onnxruntime"), "{report}");
    assert_eq!(ok("libtorch"), cfg!(feature = "libtorch"), "{report}");
    let all_ok = cfg!(feature = "onnxruntime") && cfg!(feature = "libtorch");
    assert_eq!(out.status.code(), Some(if all_ok { 0 } else { 1 }));
    if !cfg!(feature = "onnxruntime") {
        assert!(report["onnxruntime"]["detail"].as_str().unwrap_or("").contains("onnxruntime"));
    }
}
