//! Execution provider arguments (`--ep`, threads, TensorRT and CUDA options), shared by every
//! command that runs an ONNX model.

use std::path::PathBuf;

use headroom_infer::provider::{ExecutionProvider, SessionOptions, SessionRequest, TensorrtOptions};

use super::device_arg::{DEVICE_VALUES, device_arg};
use headroom_plan::DeviceChoice;

/// Execution provider choice, shared by the commands that run ONNX models.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderArgs {
    /// Where the model runs: cpu, cuda or cuda:N (the GPU of the CUDA and TensorRT providers);
    /// auto: cuda:0 when this build has the CUDA provider and a GPU is visible, else cpu.
    #[arg(long, default_value = "auto", value_name = DEVICE_VALUES, value_parser = device_arg)]
    pub device: DeviceChoice,
    /// Execution providers in order of preference, e.g. `tensorrt,cuda,cpu` [default: cuda when
    /// --device is (or auto finds) a GPU, else cpu]. With --device cpu only `cpu`.
    #[arg(long, value_enum, value_delimiter = ',')]
    pub ep: Option<Vec<ExecutionProvider>>,
    /// Skip a provider that fails to register (with a warning) instead of stopping.
    #[arg(long)]
    pub ep_fallback: bool,
    /// ONNX Runtime intra-op threads of the CPU provider (0: ONNX Runtime decides; at most 256).
    #[arg(long, default_value_t = 0, value_parser = count_arg::<0, 256>)]
    pub threads: usize,
    /// Deprecated: `--device cuda:N`.
    #[arg(long, hide = true, value_name = "N")]
    pub device_id: Option<u16>,
    /// TensorRT: build FP16 engines.
    #[arg(long)]
    pub trt_fp16: bool,
    /// TensorRT: build INT8 engines (with --trt-int8-table for a model without Q/DQ nodes).
    #[arg(long)]
    pub trt_int8: bool,
    /// TensorRT: INT8 calibration table (TensorRT's native format).
    #[arg(long, value_name = "FILE")]
    pub trt_int8_table: Option<PathBuf>,
    /// TensorRT: cache built engines in this folder (the first run builds them, minutes on Jetson).
    #[arg(long, value_name = "DIR")]
    pub trt_engine_cache: Option<PathBuf>,
    /// TensorRT: builder workspace limit, MiB.
    #[arg(long, value_parser = whole_arg::<usize>, value_name = "MIB")]
    pub trt_workspace_mib: Option<usize>,
    /// TensorRT: keep the tactic timing cache in this folder.
    #[arg(long, value_name = "DIR")]
    pub trt_timing_cache: Option<PathBuf>,
}

/// A count in `MIN..=MAX`, for thread, worker and batch options: an absurd value (`--threads
/// 100000`) is refused at once instead of exhausting memory while threads are created.
pub fn count_arg<const MIN: usize, const MAX: usize>(text: &str) -> Result<usize, String> {
    let n: usize = text.trim().parse().map_err(|_| format!("`{text}` is not a whole number"))?;
    if !(MIN..=MAX).contains(&n) {
        return Err(format!("{n} is outside {MIN}..={MAX}"));
    }
    Ok(n)
}

/// A whole number of type `T` (`--patience 10`): `-1` or `ten` are refused as "not a whole number
/// (0 or more)" rather than with Rust's "invalid digit found in string".
pub fn whole_arg<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.trim().parse::<T>().map_err(|_| format!("`{text}` is not a whole number (0 or more)"))
}

/// A number of type `T` (`--lr0 0.01`): `abc` is refused as "not a number" rather than with Rust's
/// "invalid float literal". Ranges are checked where the value is used.
pub fn number_arg<T: std::str::FromStr>(text: &str) -> Result<T, String> {
    text.trim().parse::<T>().map_err(|_| format!("`{text}` is not a number"))
}

impl ProviderArgs {
    /// What these arguments ask for (`headroom_infer::provider::SessionRequest`).
    pub fn request(&self) -> anyhow::Result<SessionRequest> {
        Ok(SessionRequest {
            device: self.device_with_deprecated_id()?,
            providers: self.ep.clone(),
            fallback: self.ep_fallback,
            threads: self.threads,
            tensorrt: TensorrtOptions {
                fp16: self.trt_fp16,
                int8: self.trt_int8,
                int8_calibration_table: self.trt_int8_table.clone(),
                engine_cache: self.trt_engine_cache.clone(),
                workspace_bytes: self.trt_workspace_mib.map(|m| m << 20),
                timing_cache: self.trt_timing_cache.clone(),
            },
        })
    }

    /// The session options these arguments ask for: `--ep` (or the provider `--device` implies)
    /// on the GPU `--device` names; `--device-id N` still works, with a warning naming
    /// `--device cuda:N`.
    pub fn session_options(&self) -> anyhow::Result<SessionOptions> {
        Ok(self.request()?.options()?)
    }

    /// `--device`, with the deprecated `--device-id N` read as `cuda:N`.
    fn device_with_deprecated_id(&self) -> anyhow::Result<DeviceChoice> {
        let Some(id) = self.device_id else { return Ok(self.device) };
        let id = usize::from(id);
        tracing::warn!("--device-id is deprecated: use --device cuda:{id}");
        let cpu_only = self.ep.as_ref().is_some_and(|ep| ep.iter().all(|p| *p == ExecutionProvider::Cpu));
        match self.device {
            // `--ep cpu --device-id N` was accepted and meant nothing; it still does.
            DeviceChoice::Auto if cpu_only => Ok(DeviceChoice::Auto),
            DeviceChoice::Auto => Ok(DeviceChoice::Cuda(Some(id))),
            DeviceChoice::Cuda(n) if n.unwrap_or(0) == id => Ok(DeviceChoice::Cuda(Some(id))),
            other => {
                anyhow::bail!("--device {other} and --device-id {id} disagree: give --device cuda:{id} alone")
            }
        }
    }
}
