//! `headroom --version`: the version, the compiled features, and the native libraries this binary
//! was built against and loads (libtorch, ONNX Runtime), with CUDA's availability.

/// The ONNX Runtime C API level the `ort` crate is built for (its `api-20` feature): the oldest
/// ONNX Runtime that loads (JetPack 6's 1.20; CI tests 1.20.1 and 1.31.1).
const ORT_API: &str = "1.20";

/// The text of `headroom --version` (`-V` stays the one-line version).
pub fn long() -> String {
    let mut features = Vec::new();
    for (on, name) in [
        (cfg!(feature = "onnxruntime"), "onnxruntime"),
        (cfg!(feature = "libtorch"), "libtorch"),
        (cfg!(feature = "cuda"), "cuda"),
        (cfg!(feature = "tensorrt"), "tensorrt"),
    ] {
        if on {
            features.push(name);
        }
    }
    let features = if features.is_empty() { "none".to_string() } else { features.join(", ") };
    format!(
        "{}\nfeatures: {features}\nlibtorch: {}\nONNX Runtime: {}\ntarget: {}-{}",
        env!("CARGO_PKG_VERSION"),
        libtorch(),
        onnxruntime(),
        std::env::consts::ARCH,
        std::env::consts::OS
    )
}

fn libtorch() -> String {
    if !cfg!(feature = "libtorch") {
        return "not built in (feature `libtorch` off)".into();
    }
    let compiled = headroom_train::LIBTORCH_HEADERS;
    let cuda = if headroom_train::cuda_available() { "CUDA available" } else { "CUDA not available" };
    let (library, loaded) = headroom_train::doctor::loaded_libtorch();
    let loaded = match (&library, &loaded) {
        (Some(path), Some(version)) => format!("loaded {version} from {}", path.display()),
        (Some(path), None) => format!("loaded from {} (version unknown)", path.display()),
        _ => "loaded library not found in this process' maps".into(),
    };
    let mismatch = headroom_train::doctor::libtorch_file_version_mismatch(compiled);
    format!(
        "built against {compiled}; {loaded}; {cuda}{}",
        mismatch.map(|m| format!("\n  WARNING: {m}")).unwrap_or_default()
    )
}

fn onnxruntime() -> String {
    #[cfg(feature = "onnxruntime")]
    {
        match headroom_infer::runtime::environment() {
            Ok(_) => format!(
                "API {ORT_API} (ONNX Runtime {ORT_API} or newer); loaded {} from {}; providers: {}",
                headroom_infer::runtime::loaded_version().as_deref().unwrap_or("(version unknown)"),
                headroom_infer::runtime::library_path().display(),
                headroom_infer::doctor::providers()
            ),
            Err(e) => format!("API {ORT_API} (ONNX Runtime {ORT_API} or newer); not loaded: {e}"),
        }
    }
    #[cfg(not(feature = "onnxruntime"))]
    {
        format!("not built in (feature `onnxruntime` off; the API level would be {ORT_API})")
    }
}
