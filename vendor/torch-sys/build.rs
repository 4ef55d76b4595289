//! headroom's build of torch-sys 0.26.0 (vendored through `[patch.crates-io]`; vendor/torch-sys/README.md).
//!
//! Upstream compiles tch's whole C++ wrapper (2,609 generated functions, one per ATen operator of
//! libtorch 2.13) and accepts exactly libtorch 2.13.0. This build compiles the hand-written part
//! (`libtch/torch_api.cpp`) and only the generated functions headroom calls
//! (`libtch/headroom_ops.cpp`, made by `scripts/dev/tch-ops.py`), which exist with the same
//! signatures in every libtorch from [`OLDEST`] to [`NEWEST`]; so one source tree builds against
//! the libtorch a device ships (JetPack 6's 2.5–2.8, JetPack 7.2's 2.10, PyPI's 2.13).
//!
//! Inputs (environment): LIBTORCH (a folder with `include/` and `lib/`: an unpacked libtorch, or a
//! Python `site-packages/torch`), optionally LIBTORCH_INCLUDE / LIBTORCH_LIB (folders holding
//! `include/` and `lib/` when they differ), LIBTORCH_CXX11_ABI (0 or 1; default: read from libc10),
//! LIBTORCH_BYPASS_VERSION_CHECK (accept a version outside the range; unsupported).
//! Outputs for dependents (`links = "tch"`): DEP_TCH_LIBTORCH_LIB, DEP_TCH_LIBTORCH_VERSION,
//! DEP_TCH_LIBTORCH_CUDA (1 when the libtorch has libtorch_cuda.so), DEP_TCH_CUDA_MEMORY (1 when
//! `libtch/headroom_cuda.cpp` was compiled with the CUDA runtime headers: HEADROOM_CUDA_INCLUDE,
//! CUDA_HOME or /usr/local/cuda).

use std::env;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The oldest libtorch (major, minor) the wrapper compiles against and is tested with in CI.
const OLDEST: (u32, u32) = (2, 5);
/// The newest libtorch (major, minor): what tch 0.26's Rust side was generated from.
const NEWEST: (u32, u32) = (2, 13);

fn env_var(name: &str) -> Option<String> {
    println!("cargo:rerun-if-env-changed={name}");
    env::var(name).ok().filter(|v| !v.is_empty())
}

/// `MAJOR.MINOR.PATCH` from torch's version header (newer libtorch: torch/headeronly/version.h,
/// older: torch/csrc/api/include/torch/version.h).
fn header_version(include: &Path) -> Option<(u32, u32, u32)> {
    ["torch/headeronly/version.h", "torch/csrc/api/include/torch/version.h"].iter().find_map(|file| {
        let header = include.join(file);
        println!("cargo:rerun-if-changed={}", header.display());
        let text = std::fs::read_to_string(header).ok()?;
        let part = |name: &str| {
            text.lines().find_map(|line| line.trim().strip_prefix("#define ")?.strip_prefix(name)?.trim().parse().ok())
        };
        Some((part("TORCH_VERSION_MAJOR")?, part("TORCH_VERSION_MINOR")?, part("TORCH_VERSION_PATCH")?))
    })
}

/// Whether libc10 was built with the C++11 string ABI (its exported names carry `B5cxx11`).
fn cxx11_abi(lib: &Path) -> Option<bool> {
    let bytes = std::fs::read(lib.join("libc10.so")).ok()?;
    Some(bytes.windows(7).any(|w| w == b"B5cxx11"))
}

/// The folder holding the CUDA runtime headers (`cuda_runtime.h` and its `crt/host_config.h`):
/// HEADROOM_CUDA_INCLUDE (scripts/setup.sh writes it: the headers of the pinned CUDA runtime
/// wheels), else CUDA_HOME's, else /usr/local/cuda's (JetPack's toolkit).
fn cuda_headers() -> Option<PathBuf> {
    let complete = |dir: &Path| dir.join("cuda_runtime.h").is_file() && dir.join("crt/host_config.h").is_file();
    if let Some(dir) = env_var("HEADROOM_CUDA_INCLUDE").map(PathBuf::from) {
        // Given explicitly: headers unpacked after a build (or removed) rebuild the wrapper.
        for file in ["cuda_runtime.h", "crt/host_config.h"] {
            println!("cargo:rerun-if-changed={}", dir.join(file).display());
        }
        if complete(&dir) {
            return Some(dir);
        }
        println!(
            "cargo:warning=HEADROOM_CUDA_INCLUDE={} has no cuda_runtime.h with crt/host_config.h: CUDA memory readings left out",
            dir.display()
        );
        return None;
    }
    let home = env_var("CUDA_HOME").map(|home| PathBuf::from(home).join("include"));
    home.into_iter().chain([PathBuf::from("/usr/local/cuda/include")]).find(|dir| complete(dir))
}

fn main() -> Result<()> {
    if cfg!(feature = "doc-only") {
        return Ok(());
    }
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if target_os != "linux" {
        bail!("headroom's torch-sys builds for Linux only (target OS '{target_os}')");
    }
    let libtorch = env_var("LIBTORCH").map(PathBuf::from).context(
        "LIBTORCH is not set: run scripts/setup.sh and `source .deps/env.sh` (or point LIBTORCH at a \
         libtorch folder with include/ and lib/, e.g. JetPack's site-packages/torch)",
    )?;
    let include_root = env_var("LIBTORCH_INCLUDE").map(PathBuf::from).unwrap_or_else(|| libtorch.clone());
    let lib_root = env_var("LIBTORCH_LIB").map(PathBuf::from).unwrap_or_else(|| libtorch.clone());
    let include = include_root.join("include");
    let lib = lib_root.join("lib");
    if !include.join("torch").is_dir() {
        bail!("{} has no torch/ headers: LIBTORCH must hold include/ and lib/", include.display());
    }
    let version = header_version(&include)
        .with_context(|| format!("no TORCH_VERSION_MAJOR/MINOR/PATCH in {}/torch/**/version.h", include.display()))?;
    let (major, minor, patch) = version;
    if ((major, minor) < OLDEST || (major, minor) > NEWEST) && env_var("LIBTORCH_BYPASS_VERSION_CHECK").is_none() {
        bail!(
            "libtorch {major}.{minor}.{patch} in {} is outside what headroom builds against: {}.{} to {}.{} \
             (set LIBTORCH_BYPASS_VERSION_CHECK=1 to try anyway; untested)",
            libtorch.display(),
            OLDEST.0,
            OLDEST.1,
            NEWEST.0,
            NEWEST.1
        );
    }
    let abi = match env_var("LIBTORCH_CXX11_ABI").as_deref() {
        Some("0") => false,
        Some("1") => true,
        Some(other) => bail!("LIBTORCH_CXX11_ABI is '{other}': 0 or 1"),
        None => cxx11_abi(&lib).unwrap_or(true),
    };

    println!("cargo:libtorch_lib={}", lib.display());
    println!("cargo:libtorch_version={major}.{minor}.{patch}");
    for file in
        ["torch_api.cpp", "torch_api.h", "headroom_ops.cpp", "headroom_api.cpp", "headroom_cuda.cpp", "headroom_cpu_pool.cpp", "torch_api_generated.h"]
    {
        println!("cargo:rerun-if-changed=libtch/{file}");
    }
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .pic(true)
        .warnings(false)
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        .flag("-std=c++17")
        .flag(format!("-D_GLIBCXX_USE_CXX11_ABI={}", u8::from(abi)))
        .flag("-DGLOG_USE_GLOG_EXPORT")
        .files(["libtch/torch_api.cpp", "libtch/headroom_ops.cpp", "libtch/headroom_api.cpp", "libtch/headroom_cuda.cpp", "libtch/headroom_cpu_pool.cpp"]);
    // The CUDA memory readings need the CUDA runtime headers (c10/cuda includes cuda_runtime.h),
    // never a CUDA library: with them, the same binary reads the allocator wherever libtorch's CUDA
    // part is loaded at run time.
    let cuda_include = cuda_headers();
    println!("cargo:cuda_memory={}", u8::from(cuda_include.is_some()));
    if let Some(dir) = &cuda_include {
        build.include(dir).define("HEADROOM_CUDA_HEADERS", None);
    }
    build.compile("tch");

    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=static=tch");
    let cuda = lib.join("libtorch_cuda.so").exists();
    println!("cargo:libtorch_cuda={}", u8::from(cuda));
    if cuda {
        println!("cargo:rustc-link-lib=torch_cuda");
    }
    for name in ["torch_cpu", "torch", "c10"] {
        println!("cargo:rustc-link-lib={name}");
    }
    // The wrapper calls no OpenMP itself; libtorch_cpu needs its own libgomp (libgomp.so.1, or
    // libgomp-HASH.so.1 in a wheel) and finds it beside itself. Link it only where it is meant to be
    // found by name (an unpacked libtorch), never the compiler's: two OpenMP runtimes in a process.
    if lib.join("libgomp.so").exists() {
        println!("cargo:rustc-link-lib=gomp");
    }
    Ok(())
}
