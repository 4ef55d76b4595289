//! `headroom doctor`: proves that the native libraries load and compute.

use std::path::PathBuf;

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

/// The file of the first shared library mapped into this process whose name starts with `stem`
/// (`libtorch_cpu.so`): where the loader really found it, whatever path was asked for.
fn loaded_library(stem: &str) -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .map(PathBuf::from)
        .find(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(|name| name.starts_with(stem)))
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
                        "ONNX Runtime {} from {from} — {detail}",
                        version.as_deref().unwrap_or("(version unknown)")
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

fn check_libtorch() -> Check {
    match headroom_train::libtorch_check() {
        Ok(r) => {
            let library = loaded_library("libtorch_cpu.so").or_else(|| loaded_library("libtorch.so"));
            let from = library.as_deref().map(|p| format!(" from {}", p.display())).unwrap_or_default();
            Check {
                ok: r.loss_after < r.loss_before,
                detail: format!(
                    "libtorch {}{from} ({} threads, CUDA {}): conv + Adam loss {:.4} -> {:.4}",
                    r.version,
                    r.threads,
                    if r.cuda_available { "available" } else { "not available" },
                    r.loss_before,
                    r.loss_after
                ),
                library,
                version: Some(r.version.to_string()),
            }
        }
        Err(e) => Check::failed(e.to_string()),
    }
}

/// Runs `headroom doctor`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let report = Report {
        headroom: env!("CARGO_PKG_VERSION"),
        onnxruntime: check_onnxruntime(args.model.clone()),
        libtorch: check_libtorch(),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("headroom {}", report.headroom);
        for (name, check) in [("onnxruntime", &report.onnxruntime), ("libtorch", &report.libtorch)] {
            println!("{name:12} {} {}", if check.ok { "ok  " } else { "FAIL" }, check.detail);
        }
    }
    Ok(if report.onnxruntime.ok && report.libtorch.ok { Outcome::Success } else { Outcome::CheckFailed })
}
