//! libtorch's CUDA part: loading `libtorch_cuda.so` at run time (the linker's `--as-needed` drops
//! it from the binary, nothing referencing it by symbol), what came of it, the devices, and the
//! CUDA caching allocator's memory readings (vendor/torch-sys/libtch/headroom_cuda.cpp).

/// libtorch's CUDA part (`libtorch_cuda.so`) in this process: [`libtorch_cuda`] says which.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum CudaLibrary {
    /// No `libtorch_cuda.so` beside the loaded `libtorch_cpu.so` nor on the loader's path: a CPU
    /// libtorch (or a binary without the `libtorch` feature). Training runs on the CPU.
    Absent,
    /// Loaded, from this file (as the process maps it).
    Loaded {
        /// The file.
        path: std::path::PathBuf,
    },
    /// There, but the loader refused it: its words (`dlerror`), which name the library missing.
    Failed {
        /// The file asked for (a bare name when none lay beside `libtorch_cpu.so`).
        path: std::path::PathBuf,
        /// The loader's message.
        error: String,
    },
}

impl CudaLibrary {
    /// What to install for the library a [`CudaLibrary::Failed`] message names, when it is one
    /// that JetPack or the CUDA wheels are known to leave out.
    pub fn advice(&self) -> Option<&'static str> {
        let CudaLibrary::Failed { error, .. } = self else { return None };
        const KNOWN: [(&str, &str); 8] = [
            (
                "libcuda.so",
                "the NVIDIA driver's libcuda.so.1 (on a Jetson: L4T's nvidia-l4t-cuda, part of JetPack)",
            ),
            ("libcudnn", "cuDNN 9 (JetPack: apt install cudnn9-cuda-12 or the `cudnn` package of its CUDA)"),
            (
                "libcudss",
                "cuDSS (the Jetson AI Lab torch 2.8 wheels need it: NVIDIA's cudss package, docs/GUIDE.md)",
            ),
            ("libcusparseLt", "cuSPARSELt (NVIDIA's libcusparselt package, docs/GUIDE.md)"),
            ("libopenblas", "OpenBLAS (apt install libopenblas0)"),
            ("libnccl", "NCCL (the wheel's nvidia-nccl, or NVIDIA's libnccl2)"),
            (
                "GLIBCXX_",
                "a newer libstdc++ (the wheel was built with a newer GCC than the system's; docs/GUIDE.md)",
            ),
            (
                "libcu",
                "the CUDA toolkit's libraries of the version libtorch was built for (JetPack's cuda-libraries)",
            ),
        ];
        KNOWN.iter().find(|(needle, _)| error.contains(needle)).map(|(_, what)| *what)
    }
}

/// Sorts a failed `dlopen` of `candidate`: with no file beside `libtorch_cpu.so`, a loader that
/// cannot find `libtorch_cuda.so` itself means a CPU libtorch; anything else is a failure.
#[cfg_attr(not(feature = "libtorch"), allow(dead_code))]
fn cuda_library_outcome(
    beside: Option<std::path::PathBuf>,
    candidate: std::path::PathBuf,
    error: String,
) -> CudaLibrary {
    let missing_itself =
        error.contains("libtorch_cuda.so: cannot open shared object file") && !error.contains('/');
    if beside.is_none() && missing_itself {
        return CudaLibrary::Absent;
    }
    tracing::warn!("cannot load {} for CUDA: {error}", candidate.display());
    CudaLibrary::Failed { path: candidate, error }
}

/// Loads libtorch's CUDA part once and says what came of it. A CUDA libtorch whose
/// `libtorch_cuda.so` the binary does not link (it was built against a CPU libtorch of the same
/// version, or the linker's `--as-needed` dropped the library that nothing references by name) is
/// loaded at run time from beside the loaded `libtorch_cpu.so` (a bundle's `lib/`), else by name:
/// loading it registers libtorch's CUDA backend. A failure is logged and kept with the loader's
/// message, so `doctor` can say which library is missing.
pub fn libtorch_cuda() -> CudaLibrary {
    #[cfg(feature = "libtorch")]
    {
        native::load_libtorch_cuda().clone()
    }
    #[cfg(not(feature = "libtorch"))]
    {
        CudaLibrary::Absent
    }
}

/// Whether libtorch sees a CUDA device (false without the `libtorch` feature); loads
/// `libtorch_cuda.so` first ([`libtorch_cuda`]).
pub fn cuda_available() -> bool {
    #[cfg(feature = "libtorch")]
    {
        native::load_libtorch_cuda();
        tch::Cuda::is_available()
    }
    #[cfg(not(feature = "libtorch"))]
    {
        false
    }
}

/// How many CUDA devices libtorch sees (0 without the `libtorch` feature or without
/// `libtorch_cuda.so`).
pub fn cuda_device_count() -> i64 {
    #[cfg(feature = "libtorch")]
    {
        native::load_libtorch_cuda();
        tch::Cuda::device_count()
    }
    #[cfg(not(feature = "libtorch"))]
    {
        0
    }
}

/// The compute capability of CUDA device `device` (`8.7` on an Orin), asked of the CUDA runtime
/// libtorch loaded (`cudaDeviceGetAttribute`); `None` without a device or a runtime to ask.
pub fn cuda_capability(device: usize) -> Option<headroom_core::cuda_code::ComputeCapability> {
    #[cfg(feature = "libtorch")]
    {
        if !cuda_available() {
            return None;
        }
        native::capability(device)
    }
    #[cfg(not(feature = "libtorch"))]
    {
        let _ = device;
        None
    }
}

/// The CUDA caching allocator's bytes on one device, all pools (`torch.cuda.memory_stats()`'s
/// `allocated_bytes.all` and `reserved_bytes.all`; peaks since [`reset_cuda_peak`]). Reserved is
/// what the process holds on the device (what `nvidia-smi` shows it using, less the CUDA context).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CudaMemory {
    /// Bytes in tensors now.
    pub allocated: u64,
    /// Most bytes in tensors at once.
    pub allocated_peak: u64,
    /// Bytes the allocator holds from the device now (tensors and its cache).
    pub reserved: u64,
    /// Most bytes it held at once.
    pub reserved_peak: u64,
}

/// Why [`cuda_memory`] has no reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaMemoryUnavailable {
    /// libtorch's CUDA part is not loaded (a CPU libtorch, or nothing asked for CUDA yet).
    NotLoaded,
    /// The allocator is not set up: no CUDA tensor yet.
    NotStarted,
    /// libtorch refused the device index.
    NoSuchDevice,
    /// This binary was built without the CUDA runtime headers (vendor/torch-sys/build.rs), or
    /// without the `libtorch` feature.
    NotBuiltIn,
}

impl CudaMemoryUnavailable {
    #[cfg_attr(not(feature = "libtorch"), allow(dead_code))]
    fn from_code(code: std::ffi::c_long) -> Self {
        match code {
            -1 => Self::NotLoaded,
            -2 => Self::NotStarted,
            -3 => Self::NoSuchDevice,
            _ => Self::NotBuiltIn,
        }
    }
}

/// The caching allocator's bytes on CUDA device `device`.
pub fn cuda_memory(device: usize) -> Result<CudaMemory, CudaMemoryUnavailable> {
    #[cfg(feature = "libtorch")]
    {
        let values = native::cuda_memory(device)?;
        let [allocated, allocated_peak, reserved, reserved_peak] =
            values.map(|v| u64::try_from(v).unwrap_or(0));
        Ok(CudaMemory { allocated, allocated_peak, reserved, reserved_peak })
    }
    #[cfg(not(feature = "libtorch"))]
    {
        let _ = device;
        Err(CudaMemoryUnavailable::NotBuiltIn)
    }
}

/// Resets the peaks of [`cuda_memory`] on `device`; false where there is no reading to reset.
pub fn reset_cuda_peak(device: usize) -> bool {
    #[cfg(feature = "libtorch")]
    {
        native::reset_cuda_peak(device)
    }
    #[cfg(not(feature = "libtorch"))]
    {
        let _ = device;
        false
    }
}

#[cfg(feature = "libtorch")]
#[allow(unsafe_code)]
mod native {
    use std::ffi::{c_int, c_long};

    unsafe extern "C" {
        /// vendor/torch-sys/libtch/headroom_cuda.cpp.
        fn headroom_cuda_memory(device: c_int, out: *mut i64) -> c_long;
        fn headroom_cuda_reset_peak(device: c_int) -> c_long;
    }

    /// Loads `libtorch_cuda.so` once (see [`super::libtorch_cuda`]).
    pub(super) fn load_libtorch_cuda() -> &'static super::CudaLibrary {
        static LOADED: std::sync::OnceLock<super::CudaLibrary> = std::sync::OnceLock::new();
        LOADED.get_or_init(|| {
            use super::CudaLibrary;
            if let Some(path) = headroom_core::process::loaded_library("libtorch_cuda.so") {
                return CudaLibrary::Loaded { path };
            }
            // Beside the libtorch_cpu.so the loader found (a bundle's lib/, a wheel's torch/lib),
            // else by name, through the loader's own search.
            let beside = headroom_core::process::loaded_library("libtorch_cpu.so")
                .and_then(|cpu| Some(cpu.parent()?.join("libtorch_cuda.so")))
                .filter(|path| path.is_file());
            let candidate = beside.clone().unwrap_or_else(|| std::path::PathBuf::from("libtorch_cuda.so"));
            let Ok(name) = std::ffi::CString::new(candidate.as_os_str().as_encoded_bytes()) else {
                return CudaLibrary::Absent;
            };
            // SAFETY: dlopen with a NUL-terminated path; the handle is kept for the process' life
            // (never closed), as a linked library would be.
            let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
            if !handle.is_null() {
                let path = headroom_core::process::loaded_library("libtorch_cuda.so").unwrap_or(candidate);
                tracing::debug!("loaded {} for CUDA", path.display());
                return CudaLibrary::Loaded { path };
            }
            // SAFETY: dlerror returns a NUL-terminated message owned by the loader (or null),
            // read at once on this thread.
            let error = unsafe {
                let text = libc::dlerror();
                if text.is_null() {
                    String::from("dlopen failed (no message)")
                } else {
                    std::ffi::CStr::from_ptr(text).to_string_lossy().into_owned()
                }
            };
            super::cuda_library_outcome(beside, candidate, error)
        })
    }

    pub(super) fn cuda_memory(device: usize) -> Result<[i64; 4], super::CudaMemoryUnavailable> {
        let device = c_int::try_from(device).map_err(|_| super::CudaMemoryUnavailable::NoSuchDevice)?;
        let mut out = [0i64; 4];
        // SAFETY: `out` holds the four values the function writes.
        let code = unsafe { headroom_cuda_memory(device, out.as_mut_ptr()) };
        if code == 0 { Ok(out) } else { Err(super::CudaMemoryUnavailable::from_code(code)) }
    }

    pub(super) fn capability(device: usize) -> Option<headroom_core::cuda_code::ComputeCapability> {
        type GetAttribute = unsafe extern "C" fn(*mut c_int, c_int, c_int) -> c_int;
        // cudaDevAttrComputeCapabilityMajor and Minor (driver_types.h).
        const MAJOR: c_int = 75;
        const MINOR: c_int = 76;
        let device = c_int::try_from(device).ok()?;
        // SAFETY: dlsym with a NUL-terminated name; the symbol, when found, is the CUDA runtime's
        // `cudaError_t cudaDeviceGetAttribute(int*, cudaDeviceAttr, int)`.
        let get: GetAttribute = unsafe {
            let symbol = libc::dlsym(libc::RTLD_DEFAULT, c"cudaDeviceGetAttribute".as_ptr());
            if symbol.is_null() {
                return None;
            }
            std::mem::transmute::<*mut libc::c_void, GetAttribute>(symbol)
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: each call writes one int through a valid pointer.
        let ok = unsafe { get(&mut major, MAJOR, device) == 0 && get(&mut minor, MINOR, device) == 0 };
        (ok && major > 0).then(|| headroom_core::cuda_code::ComputeCapability {
            major: major.unsigned_abs(),
            minor: minor.unsigned_abs(),
        })
    }

    pub(super) fn reset_cuda_peak(device: usize) -> bool {
        let Ok(device) = c_int::try_from(device) else { return false };
        // SAFETY: a plain call with an integer.
        unsafe { headroom_cuda_reset_peak(device) == 0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loader_that_cannot_find_libtorch_cuda_by_name_means_a_cpu_libtorch() {
        let error = "libtorch_cuda.so: cannot open shared object file: No such file or directory".to_string();
        assert_eq!(cuda_library_outcome(None, "libtorch_cuda.so".into(), error), CudaLibrary::Absent);
    }

    #[test]
    fn a_libtorch_cuda_whose_dependency_is_missing_is_a_failure_naming_it_and_what_to_install() {
        let beside = std::path::PathBuf::from("/opt/headroom/lib/libtorch_cuda.so");
        let error = "libcudnn.so.9: cannot open shared object file: No such file or directory".to_string();
        let outcome = cuda_library_outcome(Some(beside.clone()), beside.clone(), error.clone());
        assert_eq!(outcome, CudaLibrary::Failed { path: beside, error });
        assert!(outcome.advice().is_some_and(|a| a.contains("cuDNN")), "{:?}", outcome.advice());
        // By name, a dependency missing is a failure too (not a CPU libtorch).
        let error = "libcudss.so.0: cannot open shared object file: No such file or directory".to_string();
        let outcome = cuda_library_outcome(None, "libtorch_cuda.so".into(), error);
        assert!(matches!(outcome, CudaLibrary::Failed { .. }), "{outcome:?}");
        assert!(outcome.advice().is_some_and(|a| a.contains("cuDSS")));
        assert_eq!(CudaLibrary::Absent.advice(), None);
    }
}
