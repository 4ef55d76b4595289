//! Execution provider settings: plain data that always compiles. Only [`crate::runtime`] maps them
//! onto ONNX Runtime (the CUDA and TensorRT mappings behind the `cuda` and `tensorrt` features).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// An ONNX Runtime execution provider.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionProvider {
    /// The CPU provider, always available.
    Cpu,
    /// NVIDIA CUDA (needs a build with `--features cuda` and a GPU).
    Cuda,
    /// NVIDIA TensorRT (needs a build with `--features tensorrt`; Jetson).
    Tensorrt,
}

/// The name `--ep` takes: `cpu`, `cuda`, `tensorrt`.
impl std::fmt::Display for ExecutionProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
            Self::Tensorrt => "tensorrt",
        })
    }
}

impl ExecutionProvider {
    /// The cargo feature that compiles this provider's registration (`None`: always compiled).
    pub fn feature(self) -> Option<&'static str> {
        match self {
            Self::Cpu => None,
            Self::Cuda => Some("cuda"),
            Self::Tensorrt => Some("tensorrt"),
        }
    }
}

/// Options of the TensorRT execution provider (ONNX Runtime's `trt_*` options).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TensorrtOptions {
    /// Build FP16 engines (`trt_fp16_enable`).
    pub fp16: bool,
    /// Build INT8 engines (`trt_int8_enable`); needs `int8_calibration_table` for a model without Q/DQ.
    pub int8: bool,
    /// A TensorRT calibration table (`trt_int8_calibration_table_name`, native format).
    pub int8_calibration_table: Option<PathBuf>,
    /// Cache built engines in this folder (`trt_engine_cache_enable` + `_path`).
    pub engine_cache: Option<PathBuf>,
    /// Builder workspace limit in bytes (`trt_max_workspace_size`).
    pub workspace_bytes: Option<usize>,
    /// Keep the tactic timing cache in this folder (`trt_timing_cache_enable` + `_path`).
    pub timing_cache: Option<PathBuf>,
}

/// How to create sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    /// Providers in order of preference. Every one is registered in this order (ONNX Runtime gives each
    /// node to the first that supports it, and the CPU provider takes what is left); the first is the
    /// one reported as running the model.
    pub providers: Vec<ExecutionProvider>,
    /// Intra-op threads of the CPU provider (0: ONNX Runtime decides).
    pub intra_threads: usize,
    /// Let those threads spin-wait for work between runs and keep a memory arena (ONNX Runtime's
    /// defaults; faster for a session that runs back to back). Off for a session that runs between
    /// libtorch's work, as the frozen trunk does in training: spinning burns the cores libtorch
    /// needs, and the arena keeps its largest allocation for the session's life.
    #[serde(default = "spinning_default")]
    pub spinning: bool,
    /// Skip a provider that fails to register (with a warning) instead of failing.
    pub fallback: bool,
    /// GPU for the CUDA and TensorRT providers.
    pub device_id: i32,
    /// TensorRT options.
    pub tensorrt: TensorrtOptions,
}

fn spinning_default() -> bool {
    true
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            providers: vec![ExecutionProvider::Cpu],
            intra_threads: 0,
            spinning: true,
            fallback: false,
            device_id: 0,
            tensorrt: TensorrtOptions::default(),
        }
    }
}

/// Where sessions run and on which providers, as a command line asks it (`--device`, `--ep`,
/// threads, TensorRT's options); [`SessionRequest::options`] resolves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionRequest {
    /// Where the model runs (`auto`: the GPU when this build has its provider and one is visible).
    pub device: headroom_plan::DeviceChoice,
    /// The providers in order of preference [default: the one `device` implies].
    pub providers: Option<Vec<ExecutionProvider>>,
    /// Skip a provider that fails to register instead of failing.
    pub fallback: bool,
    /// Intra-op threads of the CPU provider (0: ONNX Runtime decides).
    pub threads: usize,
    /// TensorRT's options.
    pub tensorrt: TensorrtOptions,
}

impl SessionRequest {
    /// Sessions on the CPU provider with these threads.
    pub fn cpu(threads: usize) -> SessionRequest {
        SessionRequest {
            device: headroom_plan::DeviceChoice::Cpu,
            providers: Some(vec![ExecutionProvider::Cpu]),
            fallback: true,
            threads,
            tensorrt: TensorrtOptions::default(),
        }
    }

    /// The session options asked for: the providers given (or the one the device implies) on the
    /// GPU the device names. Refuses a device and providers that disagree (`cpu` with `cuda`).
    pub fn options(&self) -> crate::Result<SessionOptions> {
        use headroom_plan::{DeviceChoice, RunsOn};
        let providers = match &self.providers {
            Some(list) => {
                check_device_and_providers(self.device, list)?;
                list.clone()
            }
            None => {
                let (gpu, why) = gpu_available();
                match self.device.resolve(gpu, why) {
                    RunsOn::Cpu => vec![ExecutionProvider::Cpu],
                    RunsOn::Cuda(_) => vec![ExecutionProvider::Cuda],
                }
            }
        };
        let device_id = match self.device {
            DeviceChoice::Cuda(n) => n.unwrap_or(0),
            DeviceChoice::Auto | DeviceChoice::Cpu => 0,
        };
        Ok(SessionOptions {
            providers,
            intra_threads: self.threads,
            spinning: true,
            fallback: self.fallback,
            device_id: i32::try_from(device_id).unwrap_or(0),
            tensorrt: self.tensorrt.clone(),
        })
    }
}

/// Whether ONNX Runtime can run on a GPU here: this build has the CUDA or TensorRT provider
/// (`--features cuda`/`tensorrt`) and an NVIDIA device node is visible (`/dev/nvidia0` on a PC,
/// `/dev/nvhost-ctrl-gpu` or `/dev/nvgpu` on a Jetson), and the reason, for the log.
pub fn gpu_available() -> (bool, &'static str) {
    if !cfg!(any(feature = "cuda", feature = "tensorrt")) {
        return (false, "this build has no CUDA provider: rebuild with `--features cuda`");
    }
    let nodes = ["/dev/nvidia0", "/dev/nvhost-ctrl-gpu", "/dev/nvgpu"];
    if nodes.iter().any(|p| std::path::Path::new(p).exists()) {
        (true, "CUDA provider built in, a GPU is visible")
    } else {
        (false, "no GPU is visible")
    }
}

/// A CPU device runs nothing on a GPU provider, and a CUDA device needs one.
fn check_device_and_providers(
    device: headroom_plan::DeviceChoice,
    providers: &[ExecutionProvider],
) -> crate::Result<()> {
    use headroom_plan::DeviceChoice;
    let list = providers.iter().map(ToString::to_string).collect::<Vec<_>>().join(",");
    let gpu = providers.iter().any(|p| *p != ExecutionProvider::Cpu);
    let message = match device {
        DeviceChoice::Cpu if gpu => format!(
            "--device cpu with --ep {list}: the CUDA and TensorRT providers run on a GPU; give --device cuda \
             (or cuda:N), or --ep cpu"
        ),
        DeviceChoice::Cuda(_) if !gpu => format!(
            "--device {device} with --ep {list}: the CPU provider runs on the CPU; give --ep cuda (or \
             tensorrt,cuda,cpu), or --device cpu"
        ),
        _ => return Ok(()),
    };
    Err(crate::Error::Settings { message })
}

#[cfg(test)]
mod request_tests {
    use headroom_plan::DeviceChoice;

    use super::*;

    #[test]
    fn a_request_resolves_to_its_providers_and_refuses_a_device_that_disagrees() {
        let cpu = SessionRequest::cpu(3).options().expect("cpu");
        assert_eq!((cpu.providers, cpu.intra_threads, cpu.device_id), (vec![ExecutionProvider::Cpu], 3, 0));
        let on_gpu = SessionRequest {
            device: DeviceChoice::Cuda(Some(1)),
            providers: Some(vec![ExecutionProvider::Tensorrt, ExecutionProvider::Cuda]),
            ..SessionRequest::cpu(0)
        };
        let options = on_gpu.options().expect("cuda:1");
        assert_eq!(options.device_id, 1);
        assert_eq!(options.providers[0], ExecutionProvider::Tensorrt);
        let wrong = SessionRequest { device: DeviceChoice::Cpu, ..on_gpu.clone() };
        let err = wrong.options().expect_err("cpu with tensorrt").to_string();
        assert!(err.contains("--device cpu with --ep tensorrt,cuda"), "{err}");
        let wrong = SessionRequest { providers: Some(vec![ExecutionProvider::Cpu]), ..on_gpu };
        let err = wrong.options().expect_err("cuda:1 with cpu").to_string();
        assert!(err.contains("--device cuda:1 with --ep cpu"), "{err}");
        // Cpu by default where no GPU provider is built in.
        let auto = SessionRequest { device: DeviceChoice::Auto, providers: None, ..SessionRequest::cpu(0) };
        if !gpu_available().0 {
            assert_eq!(auto.options().expect("auto").providers, vec![ExecutionProvider::Cpu]);
        }
    }
}
