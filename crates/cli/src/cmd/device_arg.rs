//! The two words every verb shares: `--device` says where the work runs (`cpu`, `cuda`, `cuda:N`,
//! `auto`), `--board` names the memory preset of the board the work is for (configs/devices.toml,
//! plus `--devices FILE`). A board name given to `--device` (the old vocabulary) is refused in one
//! line naming `--board`.

use std::fmt;
use std::path::{Path, PathBuf};

use headroom_plan::DevicePreset;

/// `--device`: where the work runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceArg {
    /// CUDA device 0 when this build can use CUDA and a GPU is visible, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// A CUDA device: `cuda` (None, device 0) or `cuda:N`.
    Cuda(Option<usize>),
}

/// Help text of `--device`, shared by the verbs.
pub const DEVICE_VALUES: &str = "cpu|cuda|cuda:N|auto";

impl fmt::Display for DeviceArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceArg::Auto => f.write_str("auto"),
            DeviceArg::Cpu => f.write_str("cpu"),
            DeviceArg::Cuda(None) => f.write_str("cuda"),
            DeviceArg::Cuda(Some(n)) => write!(f, "cuda:{n}"),
        }
    }
}

/// Parses `--device`; a board preset's name gets the one-line error naming `--board`.
pub fn device_arg(text: &str) -> Result<DeviceArg, String> {
    let text = text.trim();
    match text {
        "auto" => return Ok(DeviceArg::Auto),
        "cpu" => return Ok(DeviceArg::Cpu),
        "cuda" => return Ok(DeviceArg::Cuda(None)),
        _ => {}
    }
    if let Some(n) = text.strip_prefix("cuda:") {
        return n
            .parse::<usize>()
            .ok()
            .filter(|&n| n < 1024)
            .map(|n| DeviceArg::Cuda(Some(n)))
            .ok_or_else(|| format!("`{text}`: cuda:N takes a device number, e.g. cuda:0"));
    }
    let known = headroom_plan::builtin_devices().is_ok_and(|d| d.iter().any(|p| p.name == text));
    if known || text == "jetson" || text == "measured" {
        Err(board_error(text))
    } else {
        Err(format!(
            "`--device` says where the work runs (cpu, cuda, cuda:N, auto), not `{text}`; a board preset \
             goes to --board {text}"
        ))
    }
}

/// The one-line refusal of a board name given to `--device`.
pub fn board_error(name: &str) -> String {
    format!(
        "`--device` says where the work runs (cpu, cuda, cuda:N, auto); {name} is a board: use --board {name}"
    )
}

/// Where the work runs, once `auto` is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    /// The CPU.
    Cpu,
    /// A CUDA device, by index.
    Cuda(usize),
}

impl fmt::Display for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Resolved::Cpu => f.write_str("cpu"),
            Resolved::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl Resolved {
    /// Whether the work runs on a GPU.
    pub fn is_gpu(self) -> bool {
        matches!(self, Resolved::Cuda(_))
    }
}

impl DeviceArg {
    /// `auto` decided by `gpu` (whether this build can use CUDA and sees a GPU), logged at info
    /// with `why` (what was checked); the others as given.
    pub fn resolve(self, gpu: bool, why: &str) -> Resolved {
        match self {
            DeviceArg::Cpu => Resolved::Cpu,
            DeviceArg::Cuda(n) => Resolved::Cuda(n.unwrap_or(0)),
            DeviceArg::Auto if gpu => {
                tracing::info!("--device auto: cuda:0 ({why})");
                Resolved::Cuda(0)
            }
            DeviceArg::Auto => {
                tracing::info!("--device auto: cpu ({why})");
                Resolved::Cpu
            }
        }
    }

    /// For libtorch (`headroom train`): `cpu`, `cuda` or `cuda:N` as given, `auto` decided by
    /// whether this libtorch sees a CUDA device.
    #[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
    pub fn torch_text(self) -> String {
        if self != DeviceArg::Auto {
            return self.to_string();
        }
        let cuda = headroom_run::device::cuda_available();
        let why = if cuda { "this libtorch sees a CUDA device" } else { "this libtorch sees no CUDA device" };
        match self.resolve(cuda, why) {
            Resolved::Cpu => "cpu".into(),
            Resolved::Cuda(_) => "cuda".into(),
        }
    }
}

/// Whether ONNX Runtime can run on a GPU here: this build has the CUDA or TensorRT provider
/// (`--features cuda`/`tensorrt`) and an NVIDIA device node is visible (`/dev/nvidia0` on a PC,
/// `/dev/nvhost-ctrl-gpu` or `/dev/nvgpu` on a Jetson), and the reason, for the log.
pub fn onnxruntime_gpu() -> (bool, &'static str) {
    if !cfg!(any(feature = "cuda", feature = "tensorrt")) {
        return (false, "this build has no CUDA provider: rebuild with `--features cuda`");
    }
    let visible =
        ["/dev/nvidia0", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu"].iter().any(|p| Path::new(p).exists());
    if visible { (true, "CUDA provider built in, a GPU is visible") } else { (false, "no GPU is visible") }
}

/// `--board` and `--devices`, shared by `plan`, `train`, `export` and `field`.
#[derive(Debug, Clone, clap::Args)]
pub struct BoardArgs {
    /// The board the memory plan is for, a preset of configs/devices.toml (orin-agx-64,
    /// orin-agx-32, orin-nx-16, orin-nx-8, orin-nano-8, orin-nano-4, x86-cpu, gpu-8) or of
    /// --devices; `auto`: the preset of this board (its /proc/device-tree/model and memory), else
    /// one made from its measured memory.
    #[arg(long, value_name = "NAME|auto")]
    pub board: Option<String>,
    /// More board presets (the form of configs/devices.toml), read after the built-ins and
    /// /etc/headroom/devices.toml: a preset of the same name replaces theirs, a new one adds a
    /// board for --board NAME and --board auto.
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
}

/// The preset `--board NAME|auto` names, from the built-ins, /etc/headroom/devices.toml and
/// `devices_file` (`--devices`). `auto` detects the board (`headroom_plan::detect`), logging
/// why, with a warning when no preset knows it.
pub fn resolve_board(name: &str, devices_file: Option<&Path>) -> anyhow::Result<DevicePreset> {
    let devices = headroom_plan::load_all(devices_file)?;
    if name != "auto" {
        return headroom_plan::find_device(&devices, name)
            .cloned()
            .map_err(|e| anyhow::anyhow!("--board {name}: {e}"));
    }
    let (model, mem) = headroom_plan::read_board();
    let found = headroom_plan::detect(&devices, model.as_deref(), mem)?;
    if found.known {
        tracing::info!("--board auto: {}", found.reason);
    } else {
        tracing::warn!("--board auto: {}", found.reason);
    }
    Ok(found.preset)
}

/// Whether this machine is the board `preset` (detected as `--board auto` would), and what it is
/// otherwise, for the warning of `--budget auto`: `None` when it is, or when neither can be told
/// (a preset without board `models`, such as x86-cpu, on a machine no preset knows).
pub fn other_machine(preset: &DevicePreset, devices_file: Option<&Path>) -> Option<String> {
    let devices = headroom_plan::load_all(devices_file).ok()?;
    let (model, mem) = headroom_plan::read_board();
    let found = headroom_plan::detect(&devices, model.as_deref(), mem).ok();
    match found {
        Some(found) if found.known && found.preset.name == preset.name => None,
        Some(found) if found.known => Some(format!("{} ({})", found.preset.description, found.preset.name)),
        _ if preset.models.is_empty() => None,
        _ => Some(match model {
            Some(model) => format!("board `{model}`"),
            None => "a machine without a board model".to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_values_parse_and_print_back() {
        for text in ["auto", "cpu", "cuda", "cuda:0", "cuda:1"] {
            assert_eq!(device_arg(text).expect(text).to_string(), text);
        }
        assert_eq!(device_arg("cuda:1"), Ok(DeviceArg::Cuda(Some(1))));
        assert!(device_arg("cuda:x").expect_err("bad index").contains("cuda:N"));
    }

    #[test]
    fn a_board_through_device_names_board() {
        let err = device_arg("orin-nano-4").expect_err("a board");
        assert_eq!(
            err,
            "`--device` says where the work runs (cpu, cuda, cuda:N, auto); orin-nano-4 is a board: use --board orin-nano-4"
        );
        assert!(device_arg("gpu").expect_err("unknown").contains("--board gpu"));
    }

    #[test]
    fn auto_follows_the_gpu() {
        assert_eq!(DeviceArg::Auto.resolve(true, "test"), Resolved::Cuda(0));
        assert_eq!(DeviceArg::Auto.resolve(false, "test"), Resolved::Cpu);
        assert_eq!(DeviceArg::Cuda(Some(2)).resolve(false, "test"), Resolved::Cuda(2));
    }
}
