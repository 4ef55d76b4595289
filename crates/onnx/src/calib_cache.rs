//! TensorRT calibration caches: the text file implicit INT8 builds read (`trtexec --int8
//! --calib=FILE`, `IInt8Calibrator::readCalibrationCache`), JetPack 6 / TensorRT 10.x. TensorRT 11
//! removed implicit INT8; there the Q/DQ model is the way.
//!
//! ```text
//! TRT-100300-EntropyCalibration2
//! images: 3c010a14
//! /model.0/conv/Conv_output_0: 3d237c3a
//! ```
//!
//! The header names the TensorRT version as `NV_TENSORRT_VERSION` spells it — major·10000 +
//! minor·100 + patch since TensorRT 10 (`100300` = 10.3.0), major·1000 + minor·100 + patch before
//! (`8601` = 8.6.1) — and the calibrator; TensorRT ignores a cache whose header is not its own.
//! Then one line per tensor: its name as TensorRT sees the ONNX tensor, `: `, and the scale as the
//! eight hex digits of its IEEE float32 bits, most significant byte first. The scale maps int8's
//! ±127 onto the tensor's range: `scale = amax / 127` (scale 0.125 = `3e000000` = range ±15.875).

use crate::error::{Error, Result};

/// The calibrator headroom's caches are written for (TensorRT's recommended one for CNNs).
pub const CALIBRATOR: &str = "EntropyCalibration2";

/// TensorRT's version as one integer (`NV_TENSORRT_VERSION`): `version_int(10, 3, 0)` = 100300,
/// `version_int(8, 6, 1)` = 8601.
pub fn version_int(major: u32, minor: u32, patch: u32) -> u32 {
    if major >= 10 { major * 10_000 + minor * 100 + patch } else { major * 1_000 + minor * 100 + patch }
}

/// The scale TensorRT stores for a tensor whose values lie in ±`amax`.
pub fn scale_of(amax: f32) -> f32 {
    amax / 127.0
}

/// The range ±amax a stored scale stands for.
pub fn amax_of(scale: f32) -> f32 {
    scale * 127.0
}

/// The text of a cache for TensorRT `version` (see [`version_int`]): `entries` are tensor names
/// with their calibrated `amax` (finite, ≥ 0), written in the order given. Names must not hold a
/// line break.
pub fn write_cache(version: u32, entries: &[(String, f32)]) -> String {
    let mut text = format!("TRT-{version}-{CALIBRATOR}\n");
    for (name, amax) in entries {
        text.push_str(&format!("{name}: {:08x}\n", scale_of(*amax).to_bits()));
    }
    text
}

fn bad(line: usize, reason: impl Into<String>) -> Error {
    Error::CalibrationCache { line, reason: reason.into() }
}

fn header(line: &str) -> Result<u32> {
    let parts = line.strip_prefix("TRT-").and_then(|rest| rest.split_once('-'));
    let Some((version, calibrator)) = parts else {
        return Err(bad(1, format!("`{line}` is not a header `TRT-<version>-{CALIBRATOR}`")));
    };
    let version = version
        .parse::<u32>()
        .map_err(|_| bad(1, format!("version `{version}` in `{line}` is not a number")))?;
    if calibrator.is_empty() || !calibrator.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Err(bad(1, format!("calibrator `{calibrator}` in `{line}` is not a name")));
    }
    Ok(version)
}

fn entry(number: usize, line: &str) -> Result<(String, f32)> {
    // Names may hold colons (`onnx::Split_595`): the scale follows the last one.
    let Some((name, hex)) = line.rsplit_once(':') else {
        return Err(bad(number, format!("`{line}` is not `tensor: <8 hex digits>`")));
    };
    let hex = hex.trim();
    if name.is_empty() {
        return Err(bad(number, format!("`{line}` has no tensor name")));
    }
    if hex.len() != 8 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(bad(number, format!("scale `{hex}` of `{name}` is not 8 hex digits")));
    }
    let bits = u32::from_str_radix(hex, 16).map_err(|e| bad(number, format!("scale `{hex}`: {e}")))?;
    Ok((name.to_string(), f32::from_bits(bits)))
}

/// Reads a cache: the TensorRT version of its header and each tensor's **scale** (amax / 127, see
/// [`amax_of`]), in file order. Errors name the 1-based line. Empty lines are skipped.
pub fn read_cache(text: &str) -> Result<(u32, Vec<(String, f32)>)> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.trim_end_matches('\r')));
    let (_, first) = lines.next().ok_or_else(|| bad(1, "the cache is empty"))?;
    let version = header(first)?;
    let entries =
        lines.filter(|(_, l)| !l.trim().is_empty()).map(|(n, l)| entry(n, l)).collect::<Result<_>>()?;
    Ok((version, entries))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_known_line_scale_hex_and_range() {
        let text = write_cache(version_int(10, 3, 0), &[("images".into(), 15.875)]);
        assert_eq!(text, "TRT-100300-EntropyCalibration2\nimages: 3e000000\n");
        let (version, entries) = read_cache(&text).expect("reads");
        assert_eq!((version, entries), (100300, vec![("images".to_string(), 0.125)]));
        assert_eq!(amax_of(0.125), 15.875);
        assert_eq!(version_int(8, 6, 1), 8601);
    }

    #[test]
    fn round_trip_keeps_names_order_and_scales() {
        let entries: Vec<(String, f32)> = vec![
            ("images".into(), 1.0),
            ("/model.0/conv/Conv_output_0".into(), 3.25),
            ("onnx::Split_595".into(), 1e-3),
            ("/model.22/Concat_3_output_0".into(), 160.0),
        ];
        let (version, read) = read_cache(&write_cache(8601, &entries)).expect("reads");
        assert_eq!(version, 8601);
        assert_eq!(read.len(), entries.len());
        for ((name, amax), (read_name, scale)) in entries.iter().zip(&read) {
            assert_eq!(name, read_name);
            assert_eq!(scale.to_bits(), scale_of(*amax).to_bits(), "{name}");
        }
    }

    #[test]
    fn reads_what_tensorrt_writes() {
        // From a TensorRT 8.6.1 cache of a YOLOv8 (Ultralytics issue 14121), CRLF line ends.
        let (version, entries) =
            read_cache("TRT-8601-EntropyCalibration2\r\nimages: 3c010a14\r\n168: 3dc6cf6e\r\n")
                .expect("reads");
        assert_eq!(version, 8601);
        assert_eq!(entries[0], ("images".to_string(), f32::from_bits(0x3c01_0a14)));
        assert!((amax_of(entries[0].1) - 1.0).abs() < 1e-3, "images scale ≈ 1/127");
    }

    #[test]
    fn bad_lines_are_errors_naming_the_line() {
        let cases = [
            ("", 1, "empty"),
            ("TRT-x-EntropyCalibration2\n", 1, "not a number"),
            ("EntropyCalibration2\n", 1, "not a header"),
            ("TRT-100300-EntropyCalibration2\nimages: 3e00000\n", 2, "not 8 hex digits"),
            ("TRT-100300-EntropyCalibration2\nimages 3e000000\n", 2, "is not `tensor"),
            ("TRT-100300-EntropyCalibration2\n\na: 3e000000\n: 3e000000\n", 4, "no tensor name"),
            ("TRT-100300-EntropyCalibration2\na: 3e00000g\n", 2, "not 8 hex digits"),
        ];
        for (text, line, what) in cases {
            let e = read_cache(text).expect_err(text).to_string();
            assert!(e.contains(&format!("line {line}:")) && e.contains(what), "{text:?}: {e}");
        }
    }
}
