//! Shared by the model-rewrite tests: the repository root and every model they run on.

use std::path::{Path, PathBuf};

/// The repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every fixture family (tests/fixtures/onnx) and the demo model.
pub fn all_models() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(root().join("tests/fixtures/onnx"))
        .expect("fixtures")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 11, "{paths:?}");
    paths.push(root().join("models/demo/yolov8n-shapes-160.onnx"));
    paths
}
