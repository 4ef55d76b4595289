//! Loading ONNX Runtime once per process and opening sessions on it with the chosen execution
//! providers.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;
use ort::session::Session;
use ort::session::builder::SessionBuilder;

use crate::provider::{ExecutionProvider, SessionOptions};
use crate::{Error, Result};

/// The oldest ONNX Runtime headroom loads: ort's `api-20` (JetPack 6 ships 1.20; CI tests 1.20.1,
/// the oldest, and 1.31.1, the newest; newer ones keep the C API).
pub const ORT_VERSION: &str = "1.20";

static ENVIRONMENT: OnceLock<std::result::Result<Environment, String>> = OnceLock::new();

/// Where ONNX Runtime is looked for, in order; the first that exists is loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibrarySearch {
    /// The path that is loaded: `ORT_DYLIB_PATH` when set, else the first `libonnxruntime.so*`
    /// in `<binary's folder>/../lib` (an installed bundle), else `libonnxruntime.so` from the
    /// loader's search path (`LD_LIBRARY_PATH`, the system's folders).
    pub chosen: PathBuf,
    /// Every place looked at, for the error when loading fails.
    pub tried: Vec<String>,
}

/// The library path that [`environment`] loads (see [`LibrarySearch::chosen`]).
pub fn library_path() -> PathBuf {
    library_search().chosen
}

/// Finds ONNX Runtime: `ORT_DYLIB_PATH`, the bundle's `lib/` beside the binary, the loader's path.
pub fn library_search() -> LibrarySearch {
    let exe = std::env::current_exe().ok();
    let bundle_lib = exe.as_deref().and_then(Path::parent).map(|bin| bin.join("../lib"));
    search(
        std::env::var_os("ORT_DYLIB_PATH").filter(|v| !v.is_empty()).map(PathBuf::from),
        bundle_lib.as_deref(),
    )
}

fn search(env_path: Option<PathBuf>, bundle_lib: Option<&Path>) -> LibrarySearch {
    if let Some(path) = env_path {
        return LibrarySearch { tried: vec![format!("ORT_DYLIB_PATH={}", path.display())], chosen: path };
    }
    let mut tried = vec!["ORT_DYLIB_PATH (not set)".to_string()];
    if let Some(lib) = bundle_lib {
        let lib = lib.canonicalize().unwrap_or_else(|_| lib.to_path_buf());
        if let Some(found) = bundled_library(&lib) {
            tried.push(found.display().to_string());
            return LibrarySearch { chosen: found, tried };
        }
        tried.push(format!("{}/libonnxruntime.so* (none)", lib.display()));
    }
    tried.push("libonnxruntime.so on the loader's search path (LD_LIBRARY_PATH, ld.so.cache)".into());
    LibrarySearch { chosen: PathBuf::from("libonnxruntime.so"), tried }
}

/// `dir/libonnxruntime.so` if it exists, else the `libonnxruntime.so.X.Y.Z` with the highest
/// version in `dir` (a bundle ships the versioned file alone).
fn bundled_library(dir: &Path) -> Option<PathBuf> {
    let plain = dir.join("libonnxruntime.so");
    if plain.is_file() {
        return Some(plain);
    }
    let mut versioned: Vec<(Vec<u64>, PathBuf)> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = name.strip_prefix("libonnxruntime.so.")?;
            let parts = version.split('.').map(|p| p.parse::<u64>().ok()).collect::<Option<Vec<_>>>()?;
            entry.path().is_file().then(|| (parts, entry.path()))
        })
        .collect();
    versioned.sort();
    versioned.pop().map(|(_, path)| path)
}

/// The version the loaded ONNX Runtime reports (`OrtGetApiBase()->GetVersionString()`, e.g.
/// `1.31.1`); `None` before [`environment`] succeeded.
#[allow(unsafe_code)]
pub fn loaded_version() -> Option<String> {
    use std::os::unix::ffi::OsStrExt as _;
    ENVIRONMENT.get()?.as_ref().ok()?;
    let path = std::ffi::CString::new(library_path().as_os_str().as_bytes()).ok()?;
    // SAFETY: RTLD_NOLOAD returns the library `ort::init_from` already loaded (or null) and only adds
    // a reference, dropped by the dlclose below. `OrtGetApiBase` has this signature in every ONNX
    // Runtime, and returns a pointer to a static struct whose `GetVersionString` returns a static
    // NUL-terminated string; it is copied before the handle is closed.
    unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        if handle.is_null() {
            return None;
        }
        let symbol = libc::dlsym(handle, c"OrtGetApiBase".as_ptr());
        let mut version = None;
        if !symbol.is_null() {
            let get_api_base: unsafe extern "system" fn() -> *const ort::sys::OrtApiBase =
                std::mem::transmute(symbol);
            let base = get_api_base();
            if !base.is_null() {
                let text = ((*base).GetVersionString)();
                if !text.is_null() {
                    version = std::ffi::CStr::from_ptr(text).to_str().ok().map(str::to_string);
                }
            }
        }
        libc::dlclose(handle);
        version
    }
}

/// The execution providers the loaded ONNX Runtime was built with (`GetAvailableProviders`, e.g.
/// `TensorrtExecutionProvider, CUDAExecutionProvider, CPUExecutionProvider`); empty before
/// [`environment`] succeeded. Built in is not usable: a provider's libraries may still be missing.
#[allow(unsafe_code)]
pub fn available_providers() -> Vec<String> {
    if !ENVIRONMENT.get().is_some_and(|env| env.is_ok()) {
        return Vec::new();
    }
    let api = ort::api();
    let mut list: *mut *mut std::ffi::c_char = std::ptr::null_mut();
    let mut count: std::ffi::c_int = 0;
    // SAFETY: ONNX Runtime is loaded (the environment exists); GetAvailableProviders fills a list of
    // `count` NUL-terminated strings that ReleaseAvailableProviders frees; the names are copied first.
    // A non-null status is an error we do not inspect (it leaks one small status object).
    unsafe {
        if !(api.GetAvailableProviders)(&mut list, &mut count).0.is_null() || list.is_null() {
            return Vec::new();
        }
        let names = (0..usize::try_from(count).unwrap_or(0))
            .filter_map(|i| {
                let name = *list.add(i);
                (!name.is_null()).then(|| std::ffi::CStr::from_ptr(name).to_string_lossy().into_owned())
            })
            .collect();
        let _ = (api.ReleaseAvailableProviders)(list, count);
        names
    }
}

/// Loads ONNX Runtime (once; later calls return the same environment or the same error).
pub fn environment() -> Result<Environment> {
    let LibrarySearch { chosen: path, tried } = library_search();
    let env = ENVIRONMENT.get_or_init(|| {
        let builder = ort::init_from(&path).map_err(|e| e.to_string())?;
        // Nothing phones home, and nothing is written under the user's home (docs/ARCHITECTURE.md).
        builder.with_name("headroom").with_telemetry(false).build().map_err(|e| e.to_string())
    });
    env.clone().map_err(|reason| Error::RuntimeLoad { path, tried: tried.join("; "), reason })
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
    if std::fs::metadata(model).is_ok_and(|m| m.len() == 0) {
        let empty = std::io::Error::other("the file is empty, not an ONNX model");
        return Err(Error::Core(headroom_core::Error::io(model, empty)));
    }
    open(model, options, |builder| builder.commit_from_file(model)).map_err(|e| match e {
        // ONNX Runtime's own words for a file that is not a model repeat the path without a space.
        Error::Session { path, reason } if reason.contains("Protobuf parsing failed") => Error::Session {
            path,
            reason: "not an ONNX model, or truncated (Protobuf parsing failed)".into(),
        },
        other => other,
    })
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
                tracing::warn!("execution provider {provider} not used: {e}; falling back");
            }
            Err(e) => return Err(e),
        }
    }
    let provider = registered.first().copied().unwrap_or(ExecutionProvider::Cpu);
    if registered.is_empty() {
        tracing::warn!("no requested execution provider registered; running on the CPU provider");
    }
    let session = commit(&mut builder).map_err(|e| session_err(&e))?;
    tracing::debug!(model = %model.display(), ?provider, ?registered, "session ready");
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

    /// Regression for issue 22: an installed bundle (`bin/headroom`, `lib/libonnxruntime.so.X`)
    /// finds ONNX Runtime with no ORT_DYLIB_PATH; the newest versioned file wins, and the
    /// environment variable still comes first.
    #[test]
    fn onnxruntime_is_found_in_the_bundle_lib_folder() {
        let dir = tempfile::tempdir().expect("temp dir");
        let lib = dir.path().join("lib");
        std::fs::create_dir(&lib).expect("lib");
        let none = search(None, Some(&lib));
        assert_eq!(none.chosen, PathBuf::from("libonnxruntime.so"));
        assert_eq!(none.tried.len(), 3, "{:?}", none.tried);
        for name in
            ["libonnxruntime.so.1.9.0", "libonnxruntime.so.1.31.1", "libonnxruntime_providers_shared.so"]
        {
            std::fs::write(lib.join(name), b"").expect("write");
        }
        let found = search(None, Some(&lib));
        assert_eq!(found.chosen.file_name().and_then(|n| n.to_str()), Some("libonnxruntime.so.1.31.1"));
        let env = search(Some(PathBuf::from("/x/libonnxruntime.so.1.31.1")), Some(&lib));
        assert_eq!(env.chosen, PathBuf::from("/x/libonnxruntime.so.1.31.1"));
        assert_eq!(env.tried, vec!["ORT_DYLIB_PATH=/x/libonnxruntime.so.1.31.1".to_string()]);
    }

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
