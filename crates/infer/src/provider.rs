//! Execution provider settings: plain data that always compiles. Only [`crate::runtime`] maps them
//! onto ONNX Runtime (the CUDA and TensorRT mappings behind the `cuda` and `tensorrt` features).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// An ONNX Runtime execution provider.
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
