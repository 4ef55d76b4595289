//! Choices of a training run that the planner counts and the trainer and the run act on: one enum
//! each, here in the lowest crate that needs it, re-exported by `headroom-train` and `headroom-run`.
//! Their text (`Display`, `FromStr`, serde) is the one `config.toml`, `plan --json` and the flags
//! use, and round-trips.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The optimiser (its state per trainable parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// SGD with Nesterov momentum: one momentum buffer.
    Sgd,
    /// AdamW (beta1 = the momentum): two moment buffers.
    AdamW,
}

/// What runs the frozen trunk.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrunkRuntime {
    /// ONNX Runtime on the trunk cut out of the same file (the default: faster; a copy of the
    /// trunk's weights in its session).
    Ort,
    /// headroom's libtorch executor.
    Torch,
}

/// Whether a run plans its configuration (`headroom train --plan`, a run preset's `plan` key).
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PlanMode {
    /// Train as given.
    Off,
    /// Train with the first configuration of the fit ladder that fits the device's budget (the
    /// fastest batch that fits, measured, when it fits as asked).
    Auto,
}

/// Whether the next batch is prepared on a second thread while the student's pass runs
/// (`--prefetch`): a process setting, the run's result is the same either way.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prefetch {
    /// On where a core is spare (more cores than `--threads`, or the student on a GPU), without
    /// `--profile`, and, when the run is planned, where its budget holds the teacher's working set
    /// beside the pass.
    #[default]
    Auto,
    /// Always.
    On,
    /// Never: everything on one thread, in turn.
    Off,
}

impl Prefetch {
    /// Every setting.
    pub const ALL: [Prefetch; 3] = [Prefetch::Auto, Prefetch::On, Prefetch::Off];

    /// Its name: `auto`, `on`, `off`.
    pub fn name(self) -> &'static str {
        match self {
            Prefetch::Auto => "auto",
            Prefetch::On => "on",
            Prefetch::Off => "off",
        }
    }
}

impl PlanMode {
    /// Both modes.
    pub const ALL: [PlanMode; 2] = [PlanMode::Off, PlanMode::Auto];

    /// Its name: `off`, `auto`.
    pub fn name(self) -> &'static str {
        match self {
            PlanMode::Off => "off",
            PlanMode::Auto => "auto",
        }
    }
}

impl Optimizer {
    /// Every optimiser.
    pub const ALL: [Optimizer; 2] = [Optimizer::Sgd, Optimizer::AdamW];

    /// Its name: `sgd`, `adamw`.
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::AdamW => "adamw",
        }
    }
}

impl TrunkRuntime {
    /// Every trunk runtime.
    pub const ALL: [TrunkRuntime; 2] = [TrunkRuntime::Ort, TrunkRuntime::Torch];

    /// Its name: `ort`, `torch`.
    pub fn name(self) -> &'static str {
        match self {
            TrunkRuntime::Ort => "ort",
            TrunkRuntime::Torch => "torch",
        }
    }
}

macro_rules! text {
    ($ty:ident, $what:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $ty::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $ty::ALL.iter().map(|v| v.name()).collect();
                    format!("{s:?} is not {} ({})", $what, names.join(", "))
                })
            }
        }
    };
}

text!(Optimizer, "an optimiser");
text!(TrunkRuntime, "a trunk runtime");
text!(PlanMode, "a plan mode");
text!(Prefetch, "a prefetch setting");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_serde_round_trip() {
        for o in Optimizer::ALL {
            assert_eq!(o.to_string().parse::<Optimizer>(), Ok(o));
            assert_eq!(serde_json::to_string(&o).expect("json"), format!("\"{o}\""));
            assert_eq!(serde_json::from_str::<Optimizer>(&format!("\"{o}\"")).expect("back"), o);
        }
        for t in TrunkRuntime::ALL {
            assert_eq!(t.to_string().parse::<TrunkRuntime>(), Ok(t));
            assert_eq!(serde_json::to_string(&t).expect("json"), format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<TrunkRuntime>(&format!("\"{t}\"")).expect("back"), t);
        }
        for m in PlanMode::ALL {
            assert_eq!(m.to_string().parse::<PlanMode>(), Ok(m));
            assert_eq!(serde_json::from_str::<PlanMode>(&format!("\"{m}\"")).expect("back"), m);
        }
        for p in Prefetch::ALL {
            assert_eq!(p.to_string().parse::<Prefetch>(), Ok(p));
            assert_eq!(serde_json::from_str::<Prefetch>(&format!("\"{p}\"")).expect("back"), p);
        }
        assert_eq!(
            "yes".parse::<Prefetch>(),
            Err("\"yes\" is not a prefetch setting (auto, on, off)".to_string())
        );
        assert_eq!("on".parse::<PlanMode>(), Err("\"on\" is not a plan mode (off, auto)".to_string()));
        assert_eq!("adam".parse::<Optimizer>(), Err("\"adam\" is not an optimiser (sgd, adamw)".to_string()));
        assert!("onnx".parse::<TrunkRuntime>().is_err());
    }
}

/// Where the work runs (`--device`): `cpu`, `cuda`, `cuda:N`, or `auto`. Serialized as that text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceChoice {
    /// CUDA device 0 when this build can use CUDA and a GPU is visible, else the CPU.
    Auto,
    /// The CPU.
    Cpu,
    /// A CUDA device: `cuda` (None, device 0) or `cuda:N`.
    Cuda(Option<usize>),
}

/// Where the work runs, once `auto` is decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunsOn {
    /// The CPU.
    Cpu,
    /// A CUDA device, by index.
    Cuda(usize),
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Cuda(None) => f.write_str("cuda"),
            DeviceChoice::Cuda(Some(n)) => write!(f, "cuda:{n}"),
        }
    }
}

impl Serialize for DeviceChoice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for DeviceChoice {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;

    /// `cpu`, `cuda`, `cuda:N` or `auto`; a board preset's name gets the one-line error naming
    /// `--board` ([`board_given_as_device`]).
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        match text {
            "auto" => return Ok(DeviceChoice::Auto),
            "cpu" => return Ok(DeviceChoice::Cpu),
            "cuda" => return Ok(DeviceChoice::Cuda(None)),
            _ => {}
        }
        if let Some(n) = text.strip_prefix("cuda:") {
            return n
                .parse::<usize>()
                .ok()
                .filter(|&n| n < 1024)
                .map(|n| DeviceChoice::Cuda(Some(n)))
                .ok_or_else(|| format!("`{text}`: cuda:N takes a device number, e.g. cuda:0"));
        }
        let known = crate::devices::builtin_devices().is_ok_and(|d| d.iter().any(|p| p.name == text));
        if known || text == "jetson" || text == "measured" {
            Err(board_given_as_device(text))
        } else {
            Err(format!(
                "`--device` says where the work runs (cpu, cuda, cuda:N, auto), not `{text}`; a board preset \
                 goes to --board {text}"
            ))
        }
    }
}

/// The one-line refusal of a board name given as a device.
pub fn board_given_as_device(name: &str) -> String {
    format!(
        "`--device` says where the work runs (cpu, cuda, cuda:N, auto); {name} is a board: use --board {name}"
    )
}

impl DeviceChoice {
    /// `auto` decided by `gpu` (whether this build can use CUDA and sees a GPU), logged at info
    /// with `why` (what was checked); the others as given.
    pub fn resolve(self, gpu: bool, why: &str) -> RunsOn {
        match self {
            DeviceChoice::Cpu => RunsOn::Cpu,
            DeviceChoice::Cuda(n) => RunsOn::Cuda(n.unwrap_or(0)),
            DeviceChoice::Auto if gpu => {
                tracing::info!("--device auto: cuda:0 ({why})");
                RunsOn::Cuda(0)
            }
            DeviceChoice::Auto => {
                tracing::info!("--device auto: cpu ({why})");
                RunsOn::Cpu
            }
        }
    }

    /// Where a plan for `board` counts the training: `auto` follows the board (its GPU when it
    /// has one). A GPU on a board without one (an x86 PC detected from its memory) is counted as
    /// the CPU, with a warning naming the way to plan for the GPU.
    pub fn planned_on(self, board: &crate::DevicePreset) -> RunsOn {
        let resolved = match self {
            DeviceChoice::Auto if board.gpu => RunsOn::Cuda(0),
            DeviceChoice::Auto => RunsOn::Cpu,
            given => given.resolve(false, ""),
        };
        if resolved.is_gpu() && !board.gpu {
            tracing::warn!(
                "--device {self}: the board {} ({}) has no GPU in its preset; the plan counts its memory as \
                 for the CPU, without an AMP rung (a discrete GPU: --board gpu-8, or a preset of it with --devices)",
                board.name,
                board.description
            );
            return RunsOn::Cpu;
        }
        resolved
    }
}

impl fmt::Display for RunsOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunsOn::Cpu => f.write_str("cpu"),
            RunsOn::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl RunsOn {
    /// Whether the work runs on a GPU.
    pub fn is_gpu(self) -> bool {
        matches!(self, RunsOn::Cuda(_))
    }

    /// The memory pool a plan for it counts.
    pub fn pool(self) -> crate::Pool {
        match self {
            RunsOn::Cuda(n) => crate::Pool::Gpu(n),
            RunsOn::Cpu => crate::Pool::Cpu,
        }
    }
}

#[cfg(test)]
mod device_tests {
    use super::*;

    #[test]
    fn device_values_parse_and_print_back() {
        for text in ["auto", "cpu", "cuda", "cuda:0", "cuda:1"] {
            assert_eq!(text.parse::<DeviceChoice>().expect(text).to_string(), text);
        }
        assert_eq!("cuda:1".parse(), Ok(DeviceChoice::Cuda(Some(1))));
        assert!("cuda:x".parse::<DeviceChoice>().expect_err("bad index").contains("cuda:N"));
    }

    #[test]
    fn a_board_through_device_names_board() {
        let err = "orin-nano-4".parse::<DeviceChoice>().expect_err("a board");
        assert_eq!(
            err,
            "`--device` says where the work runs (cpu, cuda, cuda:N, auto); orin-nano-4 is a board: use --board orin-nano-4"
        );
        assert!("gpu".parse::<DeviceChoice>().expect_err("unknown").contains("--board gpu"));
    }

    #[test]
    fn auto_follows_the_gpu() {
        assert_eq!(DeviceChoice::Auto.resolve(true, "test"), RunsOn::Cuda(0));
        assert_eq!(DeviceChoice::Auto.resolve(false, "test"), RunsOn::Cpu);
        assert_eq!(DeviceChoice::Cuda(Some(2)).resolve(false, "test"), RunsOn::Cuda(2));
    }
}
