//! Engine files: named per device and TensorRT version (an engine runs only on the GPU and the
//! TensorRT it was built with), and described by a JSON sidecar `<engine>.json` beside the raw plan.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A TensorRT version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct TrtVersion {
    /// Major (10).
    pub major: u32,
    /// Minor (3).
    pub minor: u32,
    /// Patch (0).
    pub patch: u32,
}

impl TrtVersion {
    /// From `NV_TENSORRT_VERSION` (what trtexec prints as `[TensorRT v100300]`): major·10000 +
    /// minor·100 + patch since TensorRT 10, major·1000 + minor·100 + patch before (`8601`).
    pub fn from_int(value: u32) -> TrtVersion {
        if value >= 100_000 {
            TrtVersion { major: value / 10_000, minor: value / 100 % 100, patch: value % 100 }
        } else {
            TrtVersion { major: value / 1_000, minor: value / 100 % 10, patch: value % 100 }
        }
    }

    /// As `NV_TENSORRT_VERSION` (the calibration cache header's number).
    pub fn as_int(&self) -> u32 {
        headroom_onnx::calib_cache::version_int(self.major, self.minor, self.patch)
    }
}

impl fmt::Display for TrtVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl FromStr for TrtVersion {
    type Err = String;

    /// `10.3`, `10.3.0` or JetPack's package version `10.3.0.30-1+cuda12.5` (build and suffix ignored).
    fn from_str(text: &str) -> Result<TrtVersion, String> {
        let numeric = text.split(['-', '+']).next().unwrap_or_default();
        let parts: Vec<&str> = numeric.split('.').collect();
        let number = |i: usize| parts.get(i).map_or(Ok(0), |p| p.parse::<u32>());
        match (parts.len() >= 2, number(0), number(1), number(2)) {
            (true, Ok(major), Ok(minor), Ok(patch)) => Ok(TrtVersion { major, minor, patch }),
            _ => Err(format!("`{text}` is not a TensorRT version like 10.3.0")),
        }
    }
}

impl From<TrtVersion> for String {
    fn from(v: TrtVersion) -> String {
        v.to_string()
    }
}

impl TryFrom<String> for TrtVersion {
    type Error = String;
    fn try_from(text: String) -> Result<TrtVersion, String> {
        text.parse()
    }
}

/// The precision of an engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Precision {
    /// float16 kernels allowed (`--fp16`).
    Fp16,
    /// A Q/DQ (explicitly quantized) model: int8 where the model says, float16 elsewhere.
    Int8Qdq,
    /// Implicit INT8 from a TensorRT calibration cache (TensorRT ≤ 10), float16 elsewhere.
    Int8Cache {
        /// The cache (`headroom_onnx::calib_cache`).
        cache: PathBuf,
    },
}

impl Precision {
    /// Its name in engine file names and sidecars: `fp16`, `int8-qdq`, `int8-cache`.
    pub fn label(&self) -> &'static str {
        match self {
            Precision::Fp16 => "fp16",
            Precision::Int8Qdq => "int8-qdq",
            Precision::Int8Cache { .. } => "int8-cache",
        }
    }
}

/// The engine file name for a model on a device: `<stem>.<precision>.<device>.trt<major>.<minor>.engine`,
/// e.g. `best.fp16.orin-nano-8.trt10.3.engine`. The stem is the ONNX file's, without a `.fp16` or
/// `.int8` the export added; the device name is lowercased with anything but letters, digits, `-`
/// and `_` replaced by `-`.
pub fn engine_file_name(onnx: &Path, precision: &Precision, device: &str, version: &TrtVersion) -> String {
    let stem = onnx.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = stem.strip_suffix(".fp16").or_else(|| stem.strip_suffix(".int8")).unwrap_or(&stem);
    let device: String = device
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    format!("{stem}.{}.{device}.trt{}.{}.engine", precision.label(), version.major, version.minor)
}

/// The input an engine takes: one shape for a static engine, a range for a dynamic one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InputShape {
    /// The input's name (`images`).
    pub name: String,
    /// Smallest shape.
    pub min: Vec<u64>,
    /// The shape the engine is tuned for.
    pub opt: Vec<u64>,
    /// Largest shape.
    pub max: Vec<u64>,
}

impl InputShape {
    /// A static input.
    pub fn fixed(name: &str, dims: &[u64]) -> InputShape {
        InputShape { name: name.to_string(), min: dims.to_vec(), opt: dims.to_vec(), max: dims.to_vec() }
    }
}

/// What an engine is, written beside it as `<engine>.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineInfo {
    /// The engine's file name.
    pub engine: String,
    /// Its input.
    pub input: InputShape,
    /// Class names, in output order.
    pub classes: Vec<String>,
    /// `fp16`, `int8-qdq` or `int8-cache` ([`Precision::label`]).
    pub precision: String,
    /// The TensorRT that built it (and alone can run it).
    pub tensorrt: TrtVersion,
    /// The GPU it was built on, as trtexec names it (`Orin`).
    pub gpu: String,
    /// The device preset (`orin-nano-8`).
    pub device: String,
    /// sha256 of the ONNX model it was built from.
    pub onnx_sha256: String,
    /// sha256 of the calibration cache (implicit INT8 only).
    pub calibration_sha256: Option<String>,
    /// The headroom version that built it.
    pub headroom_version: String,
}

impl EngineInfo {
    /// The sidecar of `engine`: its path with `.json` appended.
    pub fn sidecar_path(engine: &Path) -> PathBuf {
        let mut name = engine.as_os_str().to_owned();
        name.push(".json");
        PathBuf::from(name)
    }

    /// Writes the sidecar of `engine` atomically (pretty JSON); returns its path.
    pub fn write(&self, engine: &Path) -> Result<PathBuf> {
        let path = EngineInfo::sidecar_path(engine);
        headroom_core::fsio::write_atomic(&path, self.to_json(engine)?.as_bytes())?;
        Ok(path)
    }

    /// The sidecar of `engine` as [`EngineInfo::write`] writes it (pretty JSON, one newline).
    pub fn to_json(&self, engine: &Path) -> Result<String> {
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| Error::Sidecar { path: EngineInfo::sidecar_path(engine), reason: e.to_string() })?;
        text.push('\n');
        Ok(text)
    }

    /// Reads the sidecar of `engine`.
    pub fn read(engine: &Path) -> Result<EngineInfo> {
        let path = EngineInfo::sidecar_path(engine);
        let text =
            std::fs::read_to_string(&path).map_err(|source| Error::Io { path: path.clone(), source })?;
        serde_json::from_str(&text).map_err(|e| Error::Sidecar { path, reason: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> TrtVersion {
        text.parse().expect("version")
    }

    #[test]
    fn versions_parse_print_and_match_nv_tensorrt_version() {
        assert_eq!(v("10.3.0.30-1+cuda12.5"), TrtVersion { major: 10, minor: 3, patch: 0 });
        assert_eq!(v("10.3").to_string(), "10.3.0");
        assert_eq!(v("10.3.0").as_int(), 100300);
        assert_eq!(TrtVersion::from_int(100300), v("10.3.0"));
        assert_eq!(TrtVersion::from_int(8601), v("8.6.1"));
        assert_eq!(v("8.6.1").as_int(), 8601);
        assert!("ten".parse::<TrtVersion>().is_err() && "10".parse::<TrtVersion>().is_err());
    }

    #[test]
    fn engine_names_carry_precision_device_and_version() {
        let trt = v("10.3.0");
        let name =
            |onnx: &str, p: &Precision, device: &str| engine_file_name(Path::new(onnx), p, device, &trt);
        assert_eq!(
            name("runs/x/best.onnx", &Precision::Fp16, "orin-nano-8"),
            "best.fp16.orin-nano-8.trt10.3.engine"
        );
        assert_eq!(
            name("best.int8.onnx", &Precision::Int8Qdq, "Orin NX 16"),
            "best.int8-qdq.orin-nx-16.trt10.3.engine"
        );
        let cache = Precision::Int8Cache { cache: "best.int8.calib".into() };
        assert_eq!(name("best.onnx", &cache, "orin-agx-64"), "best.int8-cache.orin-agx-64.trt10.3.engine");
    }

    #[test]
    fn the_sidecar_round_trips_beside_the_engine() {
        let dir = tempfile::tempdir().expect("temp dir");
        let onnx = dir.path().join("best.onnx");
        std::fs::write(&onnx, b"abc").expect("write");
        let engine = dir.path().join("best.fp16.orin-nano-8.trt10.3.engine");
        let info = EngineInfo {
            engine: "best.fp16.orin-nano-8.trt10.3.engine".into(),
            input: InputShape::fixed("images", &[1, 3, 640, 640]),
            classes: vec!["circle".into(), "square".into(), "triangle".into()],
            precision: Precision::Fp16.label().into(),
            tensorrt: v("10.3.0"),
            gpu: "Orin".into(),
            device: "orin-nano-8".into(),
            onnx_sha256: headroom_core::hash::sha256_file(&onnx).expect("hash"),
            calibration_sha256: None,
            headroom_version: "0.1.0".into(),
        };
        assert_eq!(info.onnx_sha256, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        let path = info.write(&engine).expect("write");
        assert_eq!(path, dir.path().join("best.fp16.orin-nano-8.trt10.3.engine.json"));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("\"tensorrt\": \"10.3.0\""), "{text}");
        assert_eq!(EngineInfo::read(&engine).expect("read"), info);
        std::fs::write(&path, text.replace("\"gpu\"", "\"colour\"")).expect("write");
        let e = EngineInfo::read(&engine).expect_err("unknown field").to_string();
        assert!(e.contains("not an engine sidecar") && e.contains("colour"), "{e}");
    }
}
