//! `headroom doctor`'s libtorch checks: the loaded libtorch (its file and version), a small
//! convolution trained a few steps, and libtorch's CUDA part (`libtorch_cuda.so`, devices, the
//! caching allocator's readings).

use std::path::{Path, PathBuf};

use headroom_core::process::Check;

/// The version of the libtorch at `library` (a `libtorch_cpu.so` as mapped): a wheel's
/// `torch/version.py` (`torch/lib/..`), or a libtorch archive's `build-version` (`lib/..`).
pub fn libtorch_file_version(library: &Path) -> Option<String> {
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
pub fn loaded_libtorch() -> (Option<PathBuf>, Option<String>) {
    let library = headroom_core::process::loaded_library("libtorch_cpu.so")
        .or_else(|| headroom_core::process::loaded_library("libtorch.so"));
    let version =
        crate::libtorch_loaded_version().or_else(|| library.as_deref().and_then(libtorch_file_version));
    (library, version)
}

/// [`crate::libtorch_mismatch`] (the message `train` refuses with) of the libtorch this
/// process loaded, if it can tell its version.
pub fn libtorch_file_version_mismatch(compiled: &str) -> Option<String> {
    crate::libtorch_mismatch(compiled, &loaded_libtorch().1?)
}

/// libtorch loaded, its version the one headroom was built against (same minor), and a small
/// convolution trained a few steps with Adam: its loss falls.
pub fn libtorch() -> Check {
    match crate::libtorch_check() {
        Ok(r) => {
            let (library, loaded) = loaded_libtorch();
            let from = library.as_deref().map(|p| format!(" from {}", p.display())).unwrap_or_default();
            let mismatch = loaded.as_deref().and_then(|l| crate::libtorch_mismatch(r.version, l));
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
pub fn cuda() -> Check {
    use crate::CudaLibrary;
    let library = crate::libtorch_cuda();
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
            let devices = if crate::cuda_available() {
                format!("{} CUDA device(s)", crate::cuda_device_count())
            } else {
                "no CUDA device visible (no GPU, or the driver's libcuda.so.1 not found): training would run \
                 on the CPU"
                    .to_string()
            };
            // The caching allocator's readings (vendor/torch-sys/libtch/headroom_cuda.cpp): found
            // through libc10_cuda.so's own symbol, whether or not a device is there.
            use crate::CudaMemoryUnavailable as No;
            let readings = match crate::cuda_memory(0) {
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

/// The GPU code a `libtorch_cuda.so` carries (read from the file, loaded or not: [`library`]'s
/// path) and whether it runs on Orin (sm_87) and on the GPU visible here. Fails where it cannot run
/// on the visible GPU, or on this Jetson; passes with the verdicts elsewhere (a CPU machine that
/// reads a Jetson bundle's library is told what the Orin will find).
pub fn gpu_code(library: &crate::CudaLibrary) -> Check {
    use headroom_core::cuda_code::{ComputeCapability, read_cuda_code, tegra_board, verdict};
    let path = match library {
        crate::CudaLibrary::Loaded { path } | crate::CudaLibrary::Failed { path, .. } if path.is_file() => {
            path
        }
        _ => {
            return Check {
                ok: true,
                detail: "no libtorch_cuda.so to read (a CPU libtorch)".into(),
                library: None,
                version: None,
            };
        }
    };
    let code = match read_cuda_code(path) {
        Ok(code) => code,
        Err(e) => return Check::failed(e.to_string()),
    };
    let board = tegra_board(Path::new("/"));
    let orin = verdict(&code, ComputeCapability::ORIN, true);
    let mut lines = vec![format!("{}: {}", path.display(), code.summary()), orin.describe("Orin (sm_87)")];
    let mut ok = board.is_none() || orin.runs();
    if let Some(capability) = crate::cuda_capability(0) {
        let here = verdict(&code, capability, board.is_some());
        lines.push(here.describe(&format!("this GPU ({capability})")));
        ok &= here.runs();
    }
    if let Some(board) = &board {
        lines.push(format!("this machine is a Jetson ({board})"));
    }
    if !orin.runs() {
        lines.push(
            "for an Orin take a torch built for sm_87: JetPack 7.2 scripts/jetson-bundle.sh --jetpack 7, JetPack 6 \
             scripts/jetson-bundle.sh (docs/GUIDE.md)"
                .into(),
        );
    }
    Check { ok, detail: lines.join("; "), library: Some(path.clone()), version: None }
}

/// Real work on CUDA device 0 where one is visible (`gpu_probe::run`: convolution, matrix
/// product, mixed precision, allocator, and `model` in the executor); passes, saying so, where none
/// is.
pub fn gpu(model: Option<&Path>) -> Check {
    if !crate::cuda_available() {
        let detail = "no CUDA device visible: nothing launched (kernels are proven only on a GPU)".into();
        return Check { ok: true, detail, library: None, version: None };
    }
    #[cfg(feature = "libtorch")]
    {
        let steps = crate::gpu_probe::run(0, model);
        let ok = steps.iter().all(|s| s.ok);
        let detail =
            steps.iter().map(|s| format!("{} {}: {}", if s.ok { "ok" } else { "FAIL" }, s.name, s.detail));
        Check { ok, detail: detail.collect::<Vec<_>>().join("; "), library: None, version: None }
    }
    #[cfg(not(feature = "libtorch"))]
    {
        let _ = model;
        Check::failed("built without libtorch".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libtorch_mismatch;

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
    fn without_libtorch_cuda_there_is_no_gpu_code_to_read() {
        let check = gpu_code(&crate::CudaLibrary::Absent);
        assert!(check.ok && check.detail.contains("CPU libtorch"), "{check:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let fake = dir.path().join("libtorch_cuda.so");
        std::fs::write(&fake, b"\x7fELF but cut short").expect("write");
        let check = gpu_code(&crate::CudaLibrary::Failed { path: fake, error: "bad".into() });
        assert!(!check.ok && check.detail.contains("libtorch_cuda.so"), "{check:?}");
    }

    #[test]
    fn another_minor_version_is_a_mismatch_naming_both() {
        assert!(libtorch_mismatch("2.13.0", "2.13.1").is_none());
        let why = libtorch_mismatch("2.13.0", "2.8.0").expect("mismatch");
        assert!(why.contains("2.13.0") && why.contains("2.8.0"), "{why}");
        assert!(libtorch_mismatch("unknown", "2.8.0").is_none());
    }
}
