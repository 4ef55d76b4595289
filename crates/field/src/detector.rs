//! What the loop reads of a detector file: its class names and input size, the facts a model that
//! replaces the deployed one must share with it. A leaf: `inputs`, `served` and `deploy` read
//! detectors the same way through it.

use std::path::Path;

use crate::Context as _;

/// What a model that replaces the deployed one must share with it.
#[derive(Debug, Clone, PartialEq)]
pub struct DetectorFacts {
    /// Class names, in class order (`names` metadata).
    pub names: Vec<String>,
    /// The input `[h, w]` (the static size, else the metadata `imgsz`).
    pub input_size: [i64; 2],
}

/// Reads `path` as a detector, as `field run` checks the deployed model: an ONNX file headroom
/// reads as a detector, with class names. Errors name `flag` and the file.
pub fn detector(flag: &str, path: &Path) -> crate::Result<DetectorFacts> {
    // The model's errors name the file: say which flag gave it.
    // A deployed INT8 file is read as the float graph it was made from.
    let (model, _) = headroom_onnx::Model::load_dequantized(path)
        .map_err(|e| crate::Error::refused(format!("{flag}: {e}")))?;
    let inspection = headroom_onnx::inspect::inspect(&model)
        .with_context(|| format!("{flag} {}: not a detector headroom can read", path.display()))?;
    let names = inspection.names.with_context(|| {
        format!(
            "{flag} {}: the model has no class names (`names` metadata of an Ultralytics export)",
            path.display()
        )
    })?;
    Ok(DetectorFacts { names, input_size: inspection.inspected_size })
}

/// The class names of a detector.
pub fn class_names(flag: &str, path: &Path) -> crate::Result<Vec<String>> {
    Ok(detector(flag, path)?.names)
}
