//! `headroom doctor`'s ONNX Runtime check: the library loads, says its version and providers, and
//! (given a model) runs it once on a grey image.

use std::path::Path;

use headroom_core::process::Check;

use crate::provider::SessionOptions;

/// ONNX Runtime loaded (and `model`, when given, run once on a grey image).
pub fn onnxruntime(model: Option<&Path>) -> Check {
    let path = crate::runtime::library_path();
    let result = crate::runtime::environment().and_then(|_| match model {
        Some(model) => {
            let mut detector = crate::detector::Detector::open(model, &SessionOptions::default())?;
            let (w, h) = detector.input_size();
            let image = image::RgbImage::from_pixel(w, h, image::Rgb([114, 114, 114]));
            let dets = detector.detect(&image, &crate::decode::DecodeOptions::predict())?;
            Ok(format!("ran {} on a grey image: {} detections", model.display(), dets.len()))
        }
        None => Ok("loaded (no model given to run)".to_string()),
    });
    match result {
        Ok(detail) => {
            let library = headroom_core::process::loaded_library("libonnxruntime.so").or(Some(path));
            let version = crate::runtime::loaded_version();
            let from = library.as_deref().unwrap_or_else(|| Path::new("?")).display();
            Check {
                ok: true,
                detail: format!(
                    "ONNX Runtime {} from {from} (providers: {}) — {detail}",
                    version.as_deref().unwrap_or("(version unknown)"),
                    providers()
                ),
                library,
                version,
            }
        }
        Err(e) => Check::failed(e.to_string()),
    }
}

/// The loaded ONNX Runtime's providers, short names (`TensorRT, CUDA, CPU`), with a note for the ones
/// this build has not built in.
pub fn providers() -> String {
    let names = crate::runtime::available_providers();
    if names.is_empty() {
        return "unknown".into();
    }
    names
        .iter()
        .map(|name| {
            let short = name.strip_suffix("ExecutionProvider").unwrap_or(name);
            let off = match short {
                "CUDA" if !cfg!(feature = "cuda") => " (not built in: feature `cuda`)",
                "Tensorrt" if !cfg!(feature = "tensorrt") => " (not built in: feature `tensorrt`)",
                _ => "",
            };
            format!("{short}{off}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}
