//! Loading ONNX Runtime once per process and opening sessions on it with the chosen execution
//! providers.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::SessionBuilder;

use crate::provider::{ExecutionProvider, SessionOptions};
use crate::{Error, Result};

/// The ONNX Runtime version headroom is built for (ort's `api-31`).
pub const ORT_VERSION: &str = "1.31";

static ENVIRONMENT: OnceLock<std::result::Result<Environment, String>> = OnceLock::new();

/// The library path: `ORT_DYLIB_PATH`, else `libonnxruntime.so` from the loader's search path.
pub fn library_path() -> PathBuf {
    std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("libonnxruntime.so"))
}

/// Loads ONNX Runtime (once; later calls return the same environment or the same error).
pub fn environment() -> Result<Environment> {
    let path = library_path();
    let env = ENVIRONMENT.get_or_init(|| {
        let builder = ort::init_from(&path).map_err(|e| e.to_string())?;
        // Nothing phones home, and nothing is written under the user's home (DESIGN.md).
        builder.with_name("headroom").with_telemetry(false).build().map_err(|e| e.to_string())
    });
    env.clone().map_err(|reason| Error::RuntimeLoad { path, reason })
}

/// Opens `model` with `options`. Returns the session and the provider that runs it: the first of
/// `options.providers` that registered. A provider that fails to register (not compiled in, or
/// rejected by this ONNX Runtime) is an error unless `options.fallback`.
pub fn open_session(model: &Path, options: &SessionOptions) -> Result<(Session, ExecutionProvider)> {
    if !model.is_file() {
        let why = if model.is_dir() { "is a folder, not an ONNX model file" } else { "model file not found" };
        return Err(Error::Core(headroom_core::Error::io(
            model,
            std::io::Error::new(std::io::ErrorKind::NotFound, why),
        )));
    }
    open(model, options, |builder| builder.commit_from_file(model))
}

/// Opens a model held in memory (`bytes`; `name` labels errors), as [`open_session`] does.
pub fn open_session_from_memory(
    bytes: &[u8],
    name: &Path,
    options: &SessionOptions,
) -> Result<(Session, ExecutionProvider)> {
    open(name, options, |builder| builder.commit_from_memory(bytes))
}

fn open(
    model: &Path,
    options: &SessionOptions,
    commit: impl FnOnce(&mut SessionBuilder) -> ort::Result<Session>,
) -> Result<(Session, ExecutionProvider)> {
    let env = environment()?;
    let session_err =
        |e: &dyn std::fmt::Display| Error::Session { path: model.to_path_buf(), reason: e.to_string() };
    let mut builder = Session::builder(&env).map_err(|e| session_err(&e))?;
    if options.intra_threads > 0 {
        builder = builder.with_intra_threads(options.intra_threads).map_err(|e| session_err(&e))?;
    }
    if !options.spinning {
        builder = builder.with_intra_op_spinning(false).map_err(|e| session_err(&e))?;
    }
    let mut registered = Vec::new();
    for &provider in &options.providers {
        match register(&mut builder, provider, options) {
            Ok(()) => registered.push(provider),
            Err(e) if options.fallback => {
                tracing::warn!("execution provider {provider:?} not used: {e}; falling back");
            }
            Err(e) => return Err(e),
        }
    }
    let provider = registered.first().copied().unwrap_or(ExecutionProvider::Cpu);
    if registered.is_empty() {
        tracing::warn!("no requested execution provider registered; running on the CPU provider");
    }
    let session = commit(&mut builder).map_err(|e| session_err(&e))?;
    tracing::info!(model = %model.display(), ?provider, ?registered, "session ready");
    Ok((session, provider))
}

/// Registers one provider on `builder`; an error when it is not compiled in or ONNX Runtime rejects it.
fn register(
    builder: &mut SessionBuilder,
    provider: ExecutionProvider,
    options: &SessionOptions,
) -> Result<()> {
    match provider {
        ExecutionProvider::Cpu if !options.spinning => {
            // A session run between libtorch's work (the training trunk) also gives its memory back:
            // no arena that keeps its largest allocation for the session's life.
            use ort::ep::ExecutionProvider as _;
            let cpu = ort::ep::CPU::default().with_arena_allocator(false);
            cpu.register(builder)
                .map_err(|e| Error::Session { path: PathBuf::from("<cpu provider>"), reason: e.to_string() })
        }
        ExecutionProvider::Cpu => Ok(()),
        ExecutionProvider::Cuda => register_cuda(builder, options),
        ExecutionProvider::Tensorrt => register_tensorrt(builder, options),
    }
}

#[cfg(any(feature = "cuda", feature = "tensorrt"))]
fn rejected(provider: ExecutionProvider, e: &ort::Error) -> Error {
    Error::ProviderUnavailable {
        provider,
        reason: format!("{e} (does this ONNX Runtime, {}, include it?)", library_path().display()),
    }
}

#[cfg(feature = "cuda")]
fn register_cuda(builder: &mut SessionBuilder, options: &SessionOptions) -> Result<()> {
    use ort::ep::ExecutionProvider as _;
    let cuda = ort::ep::CUDA::default().with_device_id(options.device_id);
    cuda.register(builder).map_err(|e| rejected(ExecutionProvider::Cuda, &e))
}

#[cfg(not(feature = "cuda"))]
fn register_cuda(_builder: &mut SessionBuilder, _options: &SessionOptions) -> Result<()> {
    Err(Error::FeatureDisabled { feature: "cuda" })
}

#[cfg(feature = "tensorrt")]
fn register_tensorrt(builder: &mut SessionBuilder, options: &SessionOptions) -> Result<()> {
    use ort::ep::ExecutionProvider as _;
    let o = &options.tensorrt;
    let mut trt =
        ort::ep::TensorRT::default().with_device_id(options.device_id).with_fp16(o.fp16).with_int8(o.int8);
    if let Some(table) = &o.int8_calibration_table {
        trt = trt
            .with_int8_calibration_table_name(table.display())
            .with_int8_use_native_calibration_table(true);
    }
    if let Some(folder) = &o.engine_cache {
        trt = trt.with_engine_cache(true).with_engine_cache_path(folder.display());
    }
    if let Some(bytes) = o.workspace_bytes {
        trt = trt.with_max_workspace_size(bytes);
    }
    if let Some(folder) = &o.timing_cache {
        trt = trt.with_timing_cache(true).with_timing_cache_path(folder.display());
    }
    trt.register(builder).map_err(|e| rejected(ExecutionProvider::Tensorrt, &e))
}

#[cfg(not(feature = "tensorrt"))]
fn register_tensorrt(_builder: &mut SessionBuilder, _options: &SessionOptions) -> Result<()> {
    Err(Error::FeatureDisabled { feature: "tensorrt" })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPU-only ONNX Runtime here has neither GPU provider: asking for one is an error naming it
    /// (not compiled in, or rejected at registration), and `fallback` runs on the CPU instead.
    #[test]
    fn an_unavailable_provider_is_an_error_unless_fallback() {
        if environment().is_err() {
            eprintln!("ONNX Runtime not loadable here (ORT_DYLIB_PATH); skipping");
            return;
        }
        let model =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/demo/yolov8n-shapes-160.onnx");
        for provider in [ExecutionProvider::Cuda, ExecutionProvider::Tensorrt] {
            let options = SessionOptions {
                providers: vec![provider, ExecutionProvider::Cpu],
                ..SessionOptions::default()
            };
            let err = open_session(&model, &options).err().map(|e| e.to_string()).unwrap_or_default();
            let name = provider.feature().unwrap_or("cpu");
            assert!(err.to_lowercase().contains(name), "{provider:?}: `{err}`");
            let fallback = SessionOptions { fallback: true, ..options };
            let (_, ran) = open_session(&model, &fallback).expect("falls back");
            assert_eq!(ran, ExecutionProvider::Cpu);
        }
    }
}
