//! What an export made, as `headroom export --json` prints it and `headroom field` reads it back
//! (`export.json`): [`ExportReport`].

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The files of one export, measured, with what the INT8 export and the engine builds did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ExportReport {
    /// The FP32 model, then each file written.
    pub files: Vec<FileRow>,
    /// What the INT8 export did, when it was asked for.
    pub int8: Option<Int8Summary>,
    /// The engines built, when they were asked for and all could be built here.
    pub engines: Option<Vec<EngineRow>>,
    /// Why engines were asked for and not built (trtexec missing: the commands to run on the
    /// device; or a failed build). Not in the JSON report: the CLI prints it and exits 1.
    #[serde(skip)]
    pub engines_not_built: Option<String>,
}

/// One file of the report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileRow {
    /// `fp32`, `fp16` or `int8`.
    pub precision: String,
    /// Where the file is published.
    pub path: PathBuf,
    /// Its size.
    pub bytes: u64,
    /// ONNX Runtime time per image (median of 20 runs on a grey image, decoding included); `None`
    /// without ONNX Runtime.
    pub ms_per_image: Option<f64>,
    /// mAP50-95 on the request's val split, when one was given.
    pub map50_95: Option<f64>,
}

/// What the INT8 export did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Int8Summary {
    /// The calibration method (`percentile-99.99`, …).
    pub method: String,
    /// `--method auto`: each candidate method and its INT8 file's output error against FP32 on
    /// calibration images (summed relative error; the smallest was kept). Empty for a fixed method.
    #[serde(default)]
    pub method_errors: Vec<(String, f64)>,
    /// Calibration images used.
    pub calibration_images: usize,
    /// Calibration images skipped, each with its file and why.
    pub skipped_images: Vec<String>,
    /// Convs quantized.
    pub quantized_convs: usize,
    /// Convs kept float (by the sensitivity search).
    pub float_convs: Vec<String>,
    /// Convs left unquantized, each with why.
    pub skipped_convs: Vec<(String, String)>,
    /// Tensors in the TensorRT calibration cache.
    pub cache_tensors: usize,
    /// The TensorRT version the cache is for.
    pub trt_version: String,
    /// The sensitivity search's steps.
    pub sensitivity: Vec<SensitivityStep>,
}

/// One step of the sensitivity search: Convs kept float and the mAP50-95 then.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SensitivityStep {
    /// Convs kept float.
    pub float_convs: usize,
    /// mAP50-95 of the model with them float.
    pub map50_95: f64,
}

/// An engine built, and its sidecar.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineRow {
    /// `fp16` or `int8`.
    pub precision: String,
    /// The engine file.
    pub engine: PathBuf,
    /// Its JSON sidecar (input, classes, TensorRT version, GPU, board, the ONNX file's sha256).
    pub sidecar: PathBuf,
}

impl ExportReport {
    /// The file of this precision (`fp32`, `fp16`, `int8`), when the export has one.
    pub fn file(&self, precision: &str) -> Option<&FileRow> {
        self.files.iter().find(|f| f.precision == precision)
    }
}

/// The report as `headroom export` prints it: a row per file (size, speed, accuracy), the INT8
/// calibration, the engines built.
impl std::fmt::Display for ExportReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{:<6} {:>10} {:>14} {:>10}  file", "", "MB", "ms per image", "mAP50-95")?;
        for r in &self.files {
            let ms = r.ms_per_image.map_or("-".into(), |v| format!("{v:.2}"));
            let map = r.map50_95.map_or("-".into(), |v| format!("{v:.4}"));
            let mb = r.bytes as f64 / 1e6;
            writeln!(f, "{:<6} {mb:>10.2} {ms:>14} {map:>10}  {}", r.precision, r.path.display())?;
        }
        if let Some(s) = &self.int8 {
            let skipped = match s.skipped_images.len() {
                0 => String::new(),
                n => format!(", {n} skipped"),
            };
            let floats = if s.float_convs.is_empty() {
                String::new()
            } else {
                format!(" ({})", s.float_convs.join(", "))
            };
            writeln!(
                f,
                "int8: {}{} calibration ({} images{skipped}), {} Convs int8, {} kept float{floats}; cache: {} tensors \
                 for TensorRT {}",
                s.method,
                if s.method_errors.is_empty() {
                    String::new()
                } else {
                    let errors: Vec<String> =
                        s.method_errors.iter().map(|(m, e)| format!("{m} {e:.3}")).collect();
                    format!(" (auto, output error against FP32: {})", errors.join(", "))
                },
                s.calibration_images,
                s.quantized_convs,
                s.float_convs.len(),
                s.cache_tensors,
                s.trt_version
            )?;
        }
        for e in self.engines.iter().flatten() {
            writeln!(f, "engine {}: {} (+ {})", e.precision, e.engine.display(), e.sidecar.display())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_report_reads_back_without_the_cli_only_field() {
        let report = ExportReport {
            files: vec![FileRow {
                precision: "fp16".into(),
                path: "/o/best.fp16.onnx".into(),
                bytes: 7,
                ms_per_image: Some(1.5),
                map50_95: None,
            }],
            int8: None,
            engines: Some(Vec::new()),
            engines_not_built: Some("no trtexec".into()),
        };
        let text = serde_json::to_string(&report).expect("json");
        assert!(!text.contains("engines_not_built"), "{text}");
        let back: ExportReport = serde_json::from_str(&text).expect("reads back");
        assert_eq!(back.file("fp16").map(|f| f.bytes), Some(7));
        assert!(back.file("int8").is_none());
        assert_eq!(back.engines.map(|e| e.len()), Some(0));
    }
}
