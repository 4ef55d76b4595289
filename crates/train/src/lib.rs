//! headroom-train: training on libtorch through tch.
//!
//! - [`Executor`]: an imported ONNX graph run op by op on libtorch with autograd (one lowering per
//!   op in `lower/`, matched exhaustively).
//! - [`Student`]: a detector split by [`headroom_onnx::Partition`] into a frozen trunk (no
//!   gradients) and trainable segments, with a plain or checkpointed backward.
//! - [`loss`]: Ultralytics' detection loss (task-aligned assignment, CIoU, DFL or L1, BCE) on raw
//!   head outputs.
//! - [`libtorch_check`]: proof that libtorch is linked and trains.
//!
//! libtorch is behind the `libtorch` feature (on by default). Without it the crate still builds
//! and every entry point returns [`Error::FeatureDisabled`], so the pure parts of headroom
//! (and the aarch64 build without native libraries) need no libtorch.

#[cfg(feature = "libtorch")]
mod amp;
pub mod augment;
#[cfg(feature = "libtorch")]
pub mod cache;
#[cfg(feature = "libtorch")]
mod check;
#[cfg(feature = "libtorch")]
mod checkpoint;
pub mod config;
pub mod cpu_pool;
mod cuda;
#[cfg(feature = "libtorch")]
pub mod data;
pub mod doctor;
#[cfg(feature = "libtorch")]
pub mod ema;
mod error;
#[cfg(feature = "libtorch")]
pub mod executor;
#[cfg(feature = "libtorch")]
pub mod fake_quant;
#[cfg(feature = "libtorch")]
pub mod foreach;
#[cfg(feature = "libtorch")]
pub mod gpu_probe;
#[cfg(feature = "libtorch")]
pub mod inference;
#[cfg(feature = "libtorch")]
pub mod loss;
#[cfg(feature = "libtorch")]
mod lower;
pub mod memory_guard;
#[cfg(feature = "libtorch")]
pub mod optim;
#[cfg(feature = "libtorch")]
pub mod probe;
#[cfg(feature = "libtorch")]
pub mod profile;
pub mod schedule;
pub mod state;
#[cfg(feature = "libtorch")]
pub mod student;
#[cfg(feature = "libtorch")]
pub mod trainer;

pub use cuda::{
    CudaLibrary, CudaMemory, CudaMemoryUnavailable, cuda_available, cuda_capability, cuda_device_count,
    cuda_memory, libtorch_cuda, reset_cuda_peak,
};
pub use error::{Error, Result};
#[cfg(feature = "libtorch")]
pub use executor::Executor;
#[cfg(feature = "libtorch")]
pub use student::{Cut, Student};
#[cfg(feature = "libtorch")]
pub use tch;

/// The libtorch version whose headers tch's C++ wrapper was compiled against (vendor/torch-sys reads
/// the `TORCH_VERSION_*` defines of its LIBTORCH); `unknown` without the `libtorch` feature.
pub const LIBTORCH_HEADERS: &str = env!("HEADROOM_LIBTORCH_HEADERS");

/// The libtorch versions (major, minor) this source tree builds against and CI tests: the oldest
/// (JetPack 6's NVIDIA build, 2.5) and the newest (tch 0.26's, 2.13). Keep in step with
/// vendor/torch-sys/build.rs.
pub const LIBTORCH_RANGE: ((u32, u32), (u32, u32)) = ((2, 5), (2, 13));

/// The version of the libtorch this process loaded, as libtorch itself says it
/// (`at::show_config()`'s `TORCH_VERSION=`), e.g. `2.5.1`; `None` without the `libtorch` feature or
/// when libtorch does not say.
pub fn libtorch_loaded_version() -> Option<String> {
    #[cfg(feature = "libtorch")]
    {
        let config = native::show_config()?;
        let start = config.find("TORCH_VERSION=")? + "TORCH_VERSION=".len();
        let version: String =
            config[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '.').collect();
        (!version.is_empty()).then_some(version)
    }
    #[cfg(not(feature = "libtorch"))]
    {
        None
    }
}

/// Why the loaded libtorch cannot serve this binary, if it cannot: its major.minor differs from
/// the headers tch was compiled against (libtorch's C++ ABI changes between minor versions). The
/// text names both versions and what to install.
pub fn libtorch_version_mismatch(loaded: &str) -> Option<String> {
    libtorch_mismatch(LIBTORCH_HEADERS, loaded)
}

/// [`libtorch_version_mismatch`] for headers of version `compiled` (`unknown`: never a mismatch).
pub fn libtorch_mismatch(compiled: &str, loaded: &str) -> Option<String> {
    let minor = |v: &str| v.split('.').take(2).collect::<Vec<_>>().join(".");
    (compiled != "unknown" && minor(compiled) != minor(loaded)).then(|| {
        format!(
            "this headroom was built against libtorch {compiled} but loaded libtorch {loaded}: install \
             libtorch {}.x (LD_LIBRARY_PATH, or the bundle's lib/), or rebuild headroom against {loaded} \
             (LIBTORCH; it builds against {}.{} to {}.{})",
            minor(compiled),
            LIBTORCH_RANGE.0.0,
            LIBTORCH_RANGE.0.1,
            LIBTORCH_RANGE.1.0,
            LIBTORCH_RANGE.1.1
        )
    })
}

#[cfg(feature = "libtorch")]
#[allow(unsafe_code)]
mod native {
    use std::ffi::{c_char, c_long};

    unsafe extern "C" {
        /// vendor/torch-sys/libtch/headroom_api.cpp.
        fn headroom_show_config(buf: *mut c_char, len: c_long) -> c_long;
    }

    /// `at::show_config()` of the loaded libtorch.
    pub(crate) fn show_config() -> Option<String> {
        // SAFETY: a null buffer with length 0 only asks for the length.
        let len = unsafe { headroom_show_config(std::ptr::null_mut(), 0) };
        let len = usize::try_from(len).ok()?;
        let mut buf = vec![0u8; len + 1];
        // SAFETY: `buf` holds `len + 1` bytes, the length passed; the function writes at most that
        // many, NUL included.
        let written =
            unsafe { headroom_show_config(buf.as_mut_ptr().cast(), c_long::try_from(buf.len()).ok()?) };
        (written >= 0).then_some(())?;
        buf.truncate(len.min(usize::try_from(written).ok()?));
        String::from_utf8(buf).ok()
    }
}

/// What [`libtorch_check`] measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LibtorchReport {
    /// The libtorch version whose headers tch was compiled against ([`LIBTORCH_HEADERS`]).
    pub version: &'static str,
    /// Whether libtorch sees a CUDA device.
    pub cuda_available: bool,
    /// Intra-op threads libtorch uses.
    pub threads: i32,
    /// Loss of the tiny convolution before the optimiser steps.
    pub loss_before: f64,
    /// Loss after the optimiser steps (lower when autograd and Adam work).
    pub loss_after: f64,
}

/// Runs a small convolution forward, backward and Adam steps on the CPU and reports the loss before
/// and after: proof that libtorch is linked, loads, computes gradients and updates weights.
pub fn libtorch_check() -> Result<LibtorchReport> {
    #[cfg(feature = "libtorch")]
    {
        check::run()
    }
    #[cfg(not(feature = "libtorch"))]
    {
        Err(Error::FeatureDisabled { feature: "libtorch" })
    }
}

#[cfg(all(test, feature = "libtorch"))]
mod version_tests {
    use super::*;

    /// The loaded library says its own version (`at::show_config()` through the vendored wrapper),
    /// and it is the one the headers said at build time: true in both CI runs (2.5.1 and 2.13.0).
    #[cfg(feature = "libtorch")]
    #[test]
    fn the_loaded_libtorch_says_the_version_of_the_headers() {
        let loaded = libtorch_loaded_version().expect("at::show_config() names TORCH_VERSION");
        assert_eq!(loaded, LIBTORCH_HEADERS, "show_config: {:?}", native::show_config());
        assert!(libtorch_version_mismatch(&loaded).is_none());
        let (oldest, newest) = LIBTORCH_RANGE;
        let minor: Vec<u32> = loaded.split('.').take(2).map(|p| p.parse().expect("a number")).collect();
        assert!((oldest.0, oldest.1) <= (minor[0], minor[1]) && (minor[0], minor[1]) <= (newest.0, newest.1));
    }

    #[cfg(feature = "libtorch")]
    #[test]
    fn another_minor_version_is_refused_naming_both_and_the_range() {
        let other = if LIBTORCH_HEADERS.starts_with("2.5.") { "2.13.0" } else { "2.5.1" };
        let why = libtorch_version_mismatch(other).expect("another minor version is a mismatch");
        assert!(
            why.contains(LIBTORCH_HEADERS) && why.contains(other) && why.contains("2.5 to 2.13"),
            "{why}"
        );
        let patch = format!("{}.99", LIBTORCH_HEADERS.rsplit_once('.').expect("major.minor.patch").0);
        assert!(libtorch_version_mismatch(&patch).is_none(), "another patch release of the same minor loads");
    }
}
