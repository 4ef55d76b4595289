//! A served file's precision and the FP32 model it came from: what a night trains when the
//! deployed file is an FP16 or INT8 export (docs/FIELD.md "Precision"). The sources are kept in the
//! state folder under the served file's sha256 (`<work>/deployed/<sha256>.fp32.onnx`);
//! [`crate::deployment`] writes them when it deploys.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{bail, ensure};
use headroom_core::hash::sha256_file;

/// The precision of a deployed ONNX file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// The trained float32 model.
    Fp32,
    /// Its float16 export (`headroom export --fp16`).
    Fp16,
    /// Its Q/DQ INT8 export (`headroom export --int8`).
    Int8,
}

/// What `field run` deploys when not told: FP16. TensorRT on an Orin runs FP16 on its tensor
/// cores at about twice FP32's speed, and it cost nothing measurable here (docs/BENCHMARKS.md
/// "Export FP16 and INT8 accuracy"); INT8 is faster still but costs points until quantization-aware training
/// closes the gap (issue 49), so it is asked for, not given.
pub const DEFAULT: Precision = Precision::Fp16;

impl Precision {
    /// Every precision, in order.
    pub const ALL: [Precision; 3] = [Precision::Fp32, Precision::Fp16, Precision::Int8];

    /// `fp32`, `fp16`, `int8` (the export report's names).
    pub fn name(self) -> &'static str {
        match self {
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Int8 => "int8",
        }
    }

    /// The precision of an ONNX file: INT8 with Q/DQ nodes, FP16 with float16 weights, else FP32.
    pub fn of_model(path: &Path) -> crate::Result<Precision> {
        let (model, qdq) = headroom_onnx::Model::load_dequantized(path)?;
        Ok(if qdq > 0 {
            Precision::Int8
        } else if model.has_float16_weights() {
            Precision::Fp16
        } else {
            Precision::Fp32
        })
    }

    /// The file of this precision an export of `fp32` into `dir` writes (`best.onnx` →
    /// `dir/best.fp16.onnx`); `fp32` itself for FP32.
    pub fn export_of(self, fp32: &Path, dir: &Path) -> PathBuf {
        let stem = fp32.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        match self {
            Precision::Fp32 => fp32.to_path_buf(),
            other => dir.join(format!("{stem}.{}.onnx", other.name())),
        }
    }

    /// Whether `engine` (an export report's engine precision: `fp16`, `int8-qdq`, `int8-cache`)
    /// runs this precision's file.
    pub fn runs_engine(self, engine: &str) -> bool {
        match self {
            Precision::Fp32 => false,
            Precision::Fp16 => engine == "fp16",
            Precision::Int8 => engine.starts_with("int8"),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name() == text)
            .ok_or_else(|| format!("`{text}`: one of fp32, fp16, int8"))
    }
}

/// The folder of the records (`<work>/deployed`).
pub(crate) fn store(work: &Path) -> PathBuf {
    work.join("deployed")
}

/// The FP32 model the served file with this sha256 came from, when the state folder has it.
pub fn fp32_source(work: &Path, served_sha256: &str) -> Option<PathBuf> {
    Some(store(work).join(format!("{served_sha256}.fp32.onnx"))).filter(|p| p.is_file())
}

/// Where [`fp32_source`] looks: to name it in an error.
pub fn fp32_source_path(work: &Path, served_sha256: &str) -> PathBuf {
    store(work).join(format!("{served_sha256}.fp32.onnx"))
}

/// The FP32 model a served file of `precision` (sha256 `served_sha256`) came from: the file itself
/// for FP32, else the state folder's copy; refused, with what to do, when the state folder has none.
pub fn source_of(
    served: &Path,
    precision: Precision,
    served_sha256: &str,
    work: &Path,
) -> crate::Result<PathBuf> {
    if precision == Precision::Fp32 {
        return Ok(served.to_path_buf());
    }
    match fp32_source(work, served_sha256) {
        Some(source) => Ok(source),
        None => bail!(
            "{} is an {} export that this loop did not deploy: training needs the FP32 model it was \
             exported from; copy that model to {} (the file is matched by the served file's sha256), or \
             deploy the FP32 model once",
            served.display(),
            precision.name().to_uppercase(),
            fp32_source_path(work, served_sha256).display()
        ),
    }
}

/// The FP32 model a night trains from when `deployed` is served: the file itself, or (FP16, INT8)
/// the source the state folder `work` keeps for it; refused, with what to do, when it has none.
pub fn trains_from(deployed: &Path, work: &Path) -> crate::Result<PathBuf> {
    let precision = Precision::of_model(deployed)?;
    if precision == Precision::Fp32 {
        return Ok(deployed.to_path_buf());
    }
    source_of(deployed, precision, &sha256_file(deployed)?, work)
}

/// Refuses a served file and its FP32 source that do not describe the same detector (classes and
/// input size).
pub fn check_source(served: &Path, source: &Path) -> crate::Result<()> {
    use crate::detector::detector;
    ensure!(
        detector("the served model", served)? == detector("its FP32 model", source)?,
        "{} is not the FP32 model of {}: its classes or input size differ",
        source.display(),
        served.display()
    );
    Ok(())
}
