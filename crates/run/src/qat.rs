//! Quantization-aware training's sites: the Convs a Q/DQ file (`headroom export --int8` of the
//! model being trained) quantizes, each with its activation scale. The run fake-quantizes exactly
//! those (`headroom_train::fake_quant`), so that an export of the trained model at the same scales
//! computes what training saw.

use std::collections::HashMap;
use std::path::Path;

use headroom_onnx::Model;

use crate::{Error, Result};

/// Conv node name → activation scale, for every Conv `qat` quantizes; refused when the file
/// quantizes no Conv, or one that `model` does not have.
pub fn sites(qat: &Path, model: &Model) -> Result<HashMap<String, f64>> {
    let refuse = |reason: String| Error::Input { path: qat.to_path_buf(), reason };
    let bytes = std::fs::read(qat).map_err(|e| refuse(format!("--qat: {e}")))?;
    let proto = headroom_onnx::model::decode(&bytes, qat).map_err(|e| refuse(e.to_string()))?;
    let scales = headroom_onnx::quant::dequantize::activation_scales(&proto, qat)
        .map_err(|e| refuse(e.to_string()))?;
    if scales.is_empty() {
        return Err(refuse(
            "no Conv reads a quantized activation: give the `headroom export --int8` file of the model"
                .into(),
        ));
    }
    let convs: Vec<&str> =
        model.graph.nodes.iter().filter(|n| n.op.op_type() == "Conv").map(|n| n.name.as_str()).collect();
    if let Some(missing) = scales.keys().find(|name| !convs.contains(&name.as_str())) {
        return Err(refuse(format!(
            "its Conv `{missing}` is not a Conv of {}: give the INT8 export of this model",
            model.path.display()
        )));
    }
    Ok(scales.into_iter().map(|(name, scale)| (name, f64::from(scale))).collect())
}
