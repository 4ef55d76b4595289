//! `headroom doctor`: proves that the native libraries load and compute.

use std::path::{Path, PathBuf};

use headroom_core::process::Check;

use super::Outcome;

/// Arguments of `headroom doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Also run this ONNX model once through ONNX Runtime on a grey image and, where a GPU is
    /// visible, forward in headroom's executor on it (by default only the libraries are loaded and
    /// checked).
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
    /// The GPU code `libtorch_cuda.so` carries (read from the file) and whether it runs on Orin and
    /// on the GPU here.
    gpu_code: Check,
    /// Kernels launched on the visible GPU (conv, GEMM, AMP, allocator, the executor).
    gpu: Check,
}

fn check_onnxruntime(model: Option<&Path>) -> Check {
    #[cfg(feature = "onnxruntime")]
    return headroom_infer::doctor::onnxruntime(model);
    #[cfg(not(feature = "onnxruntime"))]
    {
        let _ = model;
        Check::failed("built without the `onnxruntime` feature".into())
    }
}

/// Runs `headroom doctor`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let report = Report {
        headroom: env!("CARGO_PKG_VERSION"),
        onnxruntime: check_onnxruntime(args.model.as_deref()),
        libtorch: headroom_train::doctor::libtorch(),
        cuda: headroom_train::doctor::cuda(),
        gpu_code: headroom_train::doctor::gpu_code(&headroom_train::libtorch_cuda()),
        gpu: headroom_train::doctor::gpu(args.model.as_deref()),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("headroom {}", report.headroom);
        for (name, check) in [
            ("onnxruntime", &report.onnxruntime),
            ("libtorch", &report.libtorch),
            ("cuda", &report.cuda),
            ("gpu code", &report.gpu_code),
            ("gpu", &report.gpu),
        ] {
            println!("{name:12} {} {}", if check.ok { "ok  " } else { "FAIL" }, check.detail);
        }
    }
    let ok = [&report.onnxruntime, &report.libtorch, &report.cuda, &report.gpu_code, &report.gpu]
        .iter()
        .all(|c| c.ok);
    Ok(if ok { Outcome::Success } else { Outcome::CheckFailed })
}
