//! Device presets (`configs/devices.toml`, embedded in the binary).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The presets shipped in `configs/devices.toml`.
pub const BUILTIN_DEVICES: &str = include_str!("../../../configs/devices.toml");

/// A device whose memory budget training must fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePreset {
    /// Short name used on the command line (`orin-nano-8`).
    pub name: String,
    /// Human description.
    pub description: String,
    /// Total memory shared by CPU and GPU, GiB.
    pub memory_gib: f64,
    /// Memory kept back for the OS, camera pipeline and CUDA context, GiB.
    pub reserve_gib: f64,
    /// Whether CPU and GPU share the memory (Jetson); `--budget auto` then reads `MemAvailable`,
    /// else the GPU's free memory.
    #[serde(default = "yes")]
    pub unified: bool,
    /// Whether training runs on a GPU (AMP is a rung only there).
    #[serde(default = "yes")]
    pub gpu: bool,
    /// Resident memory of the runtime before any model (libtorch and ONNX Runtime libraries and
    /// their allocators), MiB: measured on the x86 CPU preset, assumed elsewhere (devices.toml says which).
    pub runtime_mib: f64,
}

fn yes() -> bool {
    true
}

impl DevicePreset {
    /// Memory available to training, in bytes.
    pub fn budget_bytes(&self) -> u64 {
        ((self.memory_gib - self.reserve_gib).max(0.0) * (1u64 << 30) as f64) as u64
    }

    /// The runtime overhead in bytes.
    pub fn runtime_bytes(&self) -> u64 {
        (self.runtime_mib.max(0.0) * (1u64 << 20) as f64) as u64
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceFile {
    device: Vec<DevicePreset>,
}

/// Parses a device file's text; `path` names it in errors.
pub fn parse_devices(path: &Path, text: &str) -> Result<Vec<DevicePreset>, Error> {
    let invalid = |message: String| Error::Invalid { path: path.to_path_buf(), message };
    let file: DeviceFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    for d in &file.device {
        if !(d.memory_gib > 0.0
            && d.reserve_gib >= 0.0
            && d.reserve_gib < d.memory_gib
            && d.runtime_mib >= 0.0
            && d.runtime_mib < d.memory_gib * 1024.0)
        {
            return Err(invalid(format!(
                "device `{}`: need memory_gib > 0, 0 <= reserve_gib < memory_gib and 0 <= runtime_mib < memory",
                d.name
            )));
        }
    }
    Ok(file.device)
}

/// Reads a device file.
pub fn load_devices(path: &Path) -> Result<Vec<DevicePreset>, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    parse_devices(path, &text)
}

/// The built-in presets.
pub fn builtin_devices() -> Result<Vec<DevicePreset>, Error> {
    parse_devices(Path::new("<builtin configs/devices.toml>"), BUILTIN_DEVICES)
}

/// Finds a preset by name.
pub fn find_device<'a>(devices: &'a [DevicePreset], name: &str) -> Result<&'a DevicePreset, Error> {
    devices.iter().find(|d| d.name == name).ok_or_else(|| Error::UnknownDevice {
        name: name.to_string(),
        known: devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_presets_parse_and_have_budgets() {
        let devices = builtin_devices().expect("builtin presets are valid");
        let nano = find_device(&devices, "orin-nano-4").expect("present");
        assert_eq!(nano.budget_bytes(), (2.25 * (1u64 << 30) as f64) as u64);
        let err = find_device(&devices, "nope").expect_err("unknown");
        assert!(err.to_string().contains("orin-agx-64"), "{err}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_rejected() {
        let p = Path::new("d.toml");
        let extra = "[[device]]\nname='a'\ndescription='b'\nmemory_gib=4.0\nreserve_gib=1.0\nruntime_mib=100.0\ncolour='red'\n";
        let err = parse_devices(p, extra).expect_err("unknown key");
        assert!(err.to_string().starts_with("d.toml:") && err.to_string().contains("colour"), "{err}");
        let bad =
            "[[device]]\nname='a'\ndescription='b'\nmemory_gib=4.0\nreserve_gib=5.0\nruntime_mib=100.0\n";
        assert!(parse_devices(p, bad).expect_err("reserve too big").to_string().contains("device `a`"));
    }
}
