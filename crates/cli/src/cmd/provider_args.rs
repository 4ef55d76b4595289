//! Execution provider arguments (`--ep`, threads, TensorRT and CUDA options), shared by every
//! command that runs an ONNX model.

use std::path::PathBuf;

use headroom_infer::provider::{ExecutionProvider, SessionOptions, TensorrtOptions};

/// Execution provider choice, shared by the commands that run ONNX models.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderArgs {
    /// Execution providers in order of preference, e.g. `tensorrt,cuda,cpu`.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cpu")]
    pub ep: Vec<ProviderArg>,
    /// Skip a provider that fails to register (with a warning) instead of stopping.
    #[arg(long)]
    pub ep_fallback: bool,
    /// ONNX Runtime intra-op threads of the CPU provider (0: ONNX Runtime decides; at most 256).
    #[arg(long, default_value_t = 0, value_parser = count_arg::<0, 256>)]
    pub threads: usize,
    /// GPU for the CUDA and TensorRT providers.
    #[arg(long, default_value_t = 0)]
    pub device_id: i32,
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

/// A memory size on the command line (`512MiB`, `2GiB`), kept as written: refused when it does
/// not parse or is under 1 MiB (`--memory-cap 0` would stop every pass, `--budget 0` fit nothing).
pub fn memory_size_arg(text: &str) -> Result<String, String> {
    let bytes = headroom_plan::parse_size(text)?;
    if bytes < 1 << 20 {
        return Err(format!(
            "{} is less than 1 MiB: give a size such as 512MiB",
            headroom_plan::format_size(bytes)
        ));
    }
    Ok(text.to_string())
}

/// Execution providers, as command-line values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderArg {
    /// NVIDIA TensorRT (build with `--features tensorrt`).
    Tensorrt,
    /// NVIDIA CUDA (build with `--features cuda`).
    Cuda,
    /// The CPU.
    Cpu,
}

impl ProviderArgs {
    /// The session options these arguments ask for.
    pub fn session_options(&self) -> SessionOptions {
        let providers = self
            .ep
            .iter()
            .map(|p| match p {
                ProviderArg::Tensorrt => ExecutionProvider::Tensorrt,
                ProviderArg::Cuda => ExecutionProvider::Cuda,
                ProviderArg::Cpu => ExecutionProvider::Cpu,
            })
            .collect();
        SessionOptions {
            providers,
            intra_threads: self.threads,
            spinning: true,
            fallback: self.ep_fallback,
            device_id: self.device_id,
            tensorrt: TensorrtOptions {
                fp16: self.trt_fp16,
                int8: self.trt_int8,
                int8_calibration_table: self.trt_int8_table.clone(),
                engine_cache: self.trt_engine_cache.clone(),
                workspace_bytes: self.trt_workspace_mib.map(|m| m << 20),
                timing_cache: self.trt_timing_cache.clone(),
            },
        }
    }
}
