//! Loading ONNX Runtime once per process and opening sessions on it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;

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
        builder.with_name("headroom").build().map_err(|e| e.to_string())
    });
    env.clone().map_err(|reason| Error::RuntimeLoad { path, reason })
}

/// Opens `model` with `options`. Returns the session and the provider that will run it.
pub fn open_session(model: &Path, options: &SessionOptions) -> Result<(Session, ExecutionProvider)> {
    let env = environment()?;
    let session_err =
        |e: &dyn std::fmt::Display| Error::Session { path: model.to_path_buf(), reason: e.to_string() };
    if !model.is_file() {
        return Err(Error::Core(headroom_core::Error::io(
            model,
            std::io::Error::new(std::io::ErrorKind::NotFound, "model file not found"),
        )));
    }
    let mut chosen = None;
    for provider in &options.providers {
        match provider {
            ExecutionProvider::Cpu => {
                chosen = Some(ExecutionProvider::Cpu);
                break;
            }
            ExecutionProvider::Cuda | ExecutionProvider::Tensorrt => {
                let feature = if *provider == ExecutionProvider::Cuda { "cuda" } else { "tensorrt" };
                if !options.fallback {
                    return Err(Error::FeatureDisabled { feature });
                }
                tracing::warn!("execution provider {provider:?} unavailable in this build; falling back");
            }
        }
    }
    let provider = chosen.ok_or(Error::FeatureDisabled { feature: "cuda" })?;
    let mut builder = Session::builder(&env).map_err(|e| session_err(&e))?;
    if options.intra_threads > 0 {
        builder = builder.with_intra_threads(options.intra_threads).map_err(|e| session_err(&e))?;
    }
    let session = builder.commit_from_file(model).map_err(|e| session_err(&e))?;
    tracing::debug!(model = %model.display(), ?provider, "session ready");
    Ok((session, provider))
}
