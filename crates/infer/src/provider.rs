//! Execution provider settings: plain data that always compiles. Only [`crate::runtime`] maps them
//! onto ONNX Runtime.

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

/// How to create sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOptions {
    /// Providers in order of preference; the first that registers runs the model.
    pub providers: Vec<ExecutionProvider>,
    /// Intra-op threads (0: ONNX Runtime decides).
    pub intra_threads: usize,
    /// Fall back to the next provider when one fails to register, instead of failing.
    pub fallback: bool,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self { providers: vec![ExecutionProvider::Cpu], intra_threads: 0, fallback: false }
    }
}
