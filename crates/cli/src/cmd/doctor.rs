//! `headroom doctor`: proves that the native libraries load and compute.

use std::path::{Path, PathBuf};

use headroom_infer::provider::SessionOptions;

use super::Outcome;

/// Arguments of `headroom doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also run this ONNX model once through ONNX Runtime on a grey image (by default only the
    /// libraries are loaded and checked).
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, serde::Serialize)]
struct Report {
    headroom: &'static str,
    onnxruntime: Check,
    libtorch: Check,
    /// libtorch's CUDA part: where `libtorch_cuda.so` came from, or the loader's words.
    cuda: Check,
}

#[derive(Debug, serde::Serialize)]
struct Check {
    ok: bool,
    detail: String,
    /// The file the library was loaded from (as the process mapped it), when it loaded.
    library: Option<PathBuf>,
    /// The library's version, when it says.
    version: Option<String>,
}

impl Check {
    fn failed(detail: String) -> Self {
        Self { ok: false, detail, library: None, version: None }
    }
}

/// The file of the first shared library mapped into this process whose name starts with `stem`.
pub(super) fn loaded_library(stem: &str) -> Option<PathBuf> {
    headroom_core::process::loaded_library(stem)
}

fn check_onnxruntime(model: Option<PathBuf>) -> Check {
    #[cfg(feature = "onnxruntime")]
    {
        let path = headroom_infer::runtime::library_path();
        let result = headroom_infer::runtime::environment().and_then(|_| match &model {
            Some(model) => {
                let mut detector =
                    headroom_infer::detector::Detector::open(model, &SessionOptions::default())?;
                let (w, h) = detector.input_size();
                let image = image::RgbImage::from_pixel(w, h, image::Rgb([114, 114, 114]));
                let dets = detector.detect(&image, &headroom_infer::decode::DecodeOptions::predict())?;
                Ok(format!("ran {} on a grey image: {} detections", model.display(), dets.len()))
            }
            None => Ok("loaded (no model given to run)".to_string()),
        });
        match result {
            Ok(detail) => {
                let library = loaded_library("libonnxruntime.so").or(Some(path));
                let version = headroom_infer::runtime::loaded_version();
                let from = library.as_deref().unwrap_or_else(|| std::path::Path::new("?")).display();
                Check {
                    ok: true,
                    detail: format!(
                        "ONNX Runtime {} from {from} (providers: {}) — {detail}",
                        version.as_deref().unwrap_or("(version unknown)"),
                        providers()
                    ),
                    library,
                    version,
                }
            }
            Err(e) => Check::failed(e.to_string()),
        }
    }
    #[cfg(not(feature = "onnxruntime"))]
    {
        let _ = (model, SessionOptions::default());
        Check::failed("built without the `onnxruntime` feature".into())
    }
}

/// The loaded ONNX Runtime's providers, short names (`TensorRT, CUDA, CPU`), with a note for the ones
/// this binary was built without.
#[cfg(feature = "onnxruntime")]
pub(super) fn providers() -> String {
    let names = headroom_infer::runtime::available_providers();
    if names.is_empty() {
        return "unknown".into();
    }
    names
        .iter()
        .map(|name| {
            let short = name.strip_suffix("ExecutionProvider").unwrap_or(name);
            let off = match short {
                "CUDA" if !cfg!(feature = "cuda") => " (not built in: feature `cuda`)",
                "Tensorrt" if !cfg!(feature = "tensorrt") => " (not built in: feature `tensorrt`)",
                _ => "",
            };
            format!("{short}{off}")
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The version of the libtorch at `library` (a `libtorch_cpu.so` as mapped): a wheel's
/// `torch/version.py` (`torch/lib/..`), or a libtorch archive's `build-version` (`lib/..`).
pub(super) fn libtorch_file_version(library: &Path) -> Option<String> {
    let root = library.parent()?.parent()?;
    if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
        let version = text.lines().find_map(|l| l.trim().strip_prefix("__version__ = "))?;
        return Some(version.trim_matches(['\'', '"']).split('+').next()?.to_string());
    }
    let text = std::fs::read_to_string(root.join("build-version")).ok()?;
    Some(text.trim().split('+').next()?.to_string())
}

/// The loaded libtorch: its file and version (as libtorch says it, else as its files say), when they
/// can be told.
pub(super) fn loaded_libtorch() -> (Option<PathBuf>, Option<String>) {
    let library = loaded_library("libtorch_cpu.so").or_else(|| loaded_library("libtorch.so"));
    let version = headroom_train::libtorch_loaded_version()
        .or_else(|| library.as_deref().and_then(libtorch_file_version));
    (library, version)
}

/// [`headroom_train::libtorch_mismatch`] (the message `train` refuses with) of the libtorch this
/// process loaded, if it can tell its version.
pub(super) fn libtorch_file_version_mismatch(compiled: &str) -> Option<String> {
    headroom_train::libtorch_mismatch(compiled, &loaded_libtorch().1?)
}

fn check_libtorch() -> Check {
    match headroom_train::libtorch_check() {
        Ok(r) => {
            let (library, loaded) = loaded_libtorch();
            let from = library.as_deref().map(|p| format!(" from {}", p.display())).unwrap_or_default();
            let mismatch = loaded.as_deref().and_then(|l| headroom_train::libtorch_mismatch(r.version, l));
            Check {
                ok: r.loss_after < r.loss_before && mismatch.is_none(),
                detail: match mismatch {
                    Some(why) => why,
                    None => format!(
                        "libtorch {} (built against {}){from} ({} threads, CUDA {}): conv + Adam loss {:.4} -> \
                         {:.4}",
                        loaded.as_deref().unwrap_or("(version unknown)"),
                        r.version,
                        r.threads,
                        if r.cuda_available { "available" } else { "not available" },
                        r.loss_before,
                        r.loss_after
                    ),
                },
                library,
                version: loaded.or(Some(r.version.to_string())),
            }
        }
        Err(e) => Check::failed(e.to_string()),
    }
}

/// libtorch's CUDA part: a CPU libtorch passes (training runs on the CPU); a CUDA libtorch passes
/// when `libtorch_cuda.so` loaded, with or without a device; a `libtorch_cuda.so` the loader
/// refused fails, with its message and what to install.
fn check_cuda() -> Check {
    use headroom_train::CudaLibrary;
    let library = headroom_train::libtorch_cuda();
    match &library {
        CudaLibrary::Absent => Check {
            ok: true,
            detail: "CPU libtorch: no libtorch_cuda.so beside libtorch_cpu.so or on the loader's path (training runs \
                     on the CPU)"
                .into(),
            library: None,
            version: None,
        },
        CudaLibrary::Loaded { path } => {
            let devices = if headroom_train::cuda_available() {
                format!("{} CUDA device(s)", headroom_train::cuda_device_count())
            } else {
                "no CUDA device visible (no GPU, or the driver's libcuda.so.1 not found): training would run \
                 on the CPU"
                    .to_string()
            };
            // The caching allocator's readings (vendor/torch-sys/libtch/headroom_cuda.cpp): found
            // through libc10_cuda.so's own symbol, whether or not a device is there.
            use headroom_train::CudaMemoryUnavailable as No;
            let readings = match headroom_train::cuda_memory(0) {
                Ok(m) => format!("{} MiB reserved", m.reserved >> 20),
                Err(No::NotStarted | No::NoSuchDevice) => "ready".into(),
                Err(No::NotLoaded) => "the allocator's symbol is not in the loaded libc10_cuda.so".into(),
                Err(No::NotBuiltIn) => "not built in (built without the CUDA runtime headers)".into(),
            };
            Check {
                ok: true,
                detail: format!(
                    "libtorch_cuda.so from {}; {devices}; CUDA allocator readings: {readings}",
                    path.display()
                ),
                library: Some(path.clone()),
                version: None,
            }
        }
        CudaLibrary::Failed { path, error } => Check::failed(format!(
            "cannot load {}: {error}{}",
            path.display(),
            library.advice().map(|a| format!(" — install {a}")).unwrap_or_default()
        )),
    }
}

/// Runs `headroom doctor`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let report = Report {
        headroom: env!("CARGO_PKG_VERSION"),
        onnxruntime: check_onnxruntime(args.model.clone()),
        libtorch: check_libtorch(),
        cuda: check_cuda(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("headroom {}", report.headroom);
        for (name, check) in
            [("onnxruntime", &report.onnxruntime), ("libtorch", &report.libtorch), ("cuda", &report.cuda)]
        {
            println!("{name:12} {} {}", if check.ok { "ok  " } else { "FAIL" }, check.detail);
        }
    }
    let ok = report.onnxruntime.ok && report.libtorch.ok && report.cuda.ok;
    Ok(if ok { Outcome::Success } else { Outcome::CheckFailed })
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_train::libtorch_mismatch;

    #[test]
    fn a_libtorch_tells_its_version_by_its_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let wheel = dir.path().join("torch");
        std::fs::create_dir_all(wheel.join("lib")).expect("mkdir");
        std::fs::write(wheel.join("version.py"), "__version__ = '2.8.0+cu126'\ngit_version = 'x'\n")
            .expect("write");
        assert_eq!(libtorch_file_version(&wheel.join("lib/libtorch_cpu.so")).as_deref(), Some("2.8.0"));
        let archive = dir.path().join("libtorch");
        std::fs::create_dir_all(archive.join("lib")).expect("mkdir");
        std::fs::write(archive.join("build-version"), "2.10.0+cpu\n").expect("write");
        assert_eq!(libtorch_file_version(&archive.join("lib/libtorch.so")).as_deref(), Some("2.10.0"));
        assert_eq!(libtorch_file_version(&dir.path().join("nowhere/lib/libtorch.so")), None);
    }

    #[test]
    fn another_minor_version_is_a_mismatch_naming_both() {
        assert!(libtorch_mismatch("2.13.0", "2.13.1").is_none());
        let why = libtorch_mismatch("2.13.0", "2.8.0").expect("mismatch");
        assert!(why.contains("2.13.0") && why.contains("2.8.0"), "{why}");
        assert!(libtorch_mismatch("unknown", "2.8.0").is_none());
    }
}
