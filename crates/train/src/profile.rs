//! A step profile through libtorch's own profiler: every op of forward, backward, optimiser and
//! average, each inside the training phase that ran it, written as a Chrome trace — the same record
//! PyTorch's profiler keeps of Ultralytics' step, so the two can be summed by op and phase side by
//! side (`scripts/bench/step_profile.py`). Spans cost nothing while no trace records.

use std::ffi::{CStr, CString, c_char, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{Error, Result};

#[allow(unsafe_code)]
mod native {
    use std::ffi::{c_char, c_void};

    unsafe extern "C" {
        /// vendor/torch-sys/libtch/headroom_api.cpp.
        pub(super) fn headroom_profile_start(path: *const c_char) -> *mut c_void;
        pub(super) fn headroom_profile_stop(profile: *mut c_void);
        pub(super) fn headroom_scope_enter(name: *const c_char) -> *mut c_void;
        pub(super) fn headroom_scope_exit(span: *mut c_void);
    }
}

/// Whether a trace is recording (spans are made only then).
static RECORDING: AtomicBool = AtomicBool::new(false);

/// Refuses a trace path whose folder does not exist (before a run creates anything).
pub fn check_destination(path: &Path) -> Result<()> {
    let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if folder.is_dir() {
        return Ok(());
    }
    Err(Error::File {
        path: path.to_path_buf(),
        reason: format!("the folder {} does not exist", folder.display()),
    })
}

/// A recording trace: libtorch's profiler on, until [`OpTrace::finish`] writes it.
#[derive(Debug)]
pub struct OpTrace {
    handle: *mut c_void,
    partial: PathBuf,
    path: PathBuf,
}

impl OpTrace {
    /// Starts recording for a trace at `path` (written when finished, atomically).
    pub fn start(path: &Path) -> Result<OpTrace> {
        if RECORDING.swap(true, Ordering::SeqCst) {
            return Err(Error::File {
                path: path.to_path_buf(),
                reason: "another op trace is recording".into(),
            });
        }
        let partial = path.with_extension("json.partial");
        let started = (|| {
            // Fails here, with the file's name, on a folder that is missing or not writable.
            std::fs::write(&partial, b"").map_err(|e| Error::File {
                path: partial.clone(),
                reason: format!("cannot write the trace: {e}"),
            })?;
            let text = partial.to_str().and_then(|s| CString::new(s).ok()).ok_or_else(|| Error::File {
                path: partial.clone(),
                reason: "not a path libtorch can open (not UTF-8, or a NUL in it)".into(),
            })?;
            // SAFETY: a NUL-terminated path, read by the call only.
            #[allow(unsafe_code)]
            let handle = unsafe { native::headroom_profile_start(text.as_ptr()) };
            if handle.is_null() {
                return Err(Error::File {
                    path: path.to_path_buf(),
                    reason: "libtorch's profiler did not start".into(),
                });
            }
            Ok(handle)
        })();
        match started {
            Ok(handle) => Ok(OpTrace { handle, partial, path: path.to_path_buf() }),
            Err(e) => {
                RECORDING.store(false, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// Stops recording and writes the trace; returns its path.
    pub fn finish(mut self) -> Result<PathBuf> {
        self.stop();
        std::fs::rename(&self.partial, &self.path).map_err(|e| Error::File {
            path: self.path.clone(),
            reason: format!("cannot write the trace: {e}"),
        })?;
        Ok(self.path.clone())
    }

    fn stop(&mut self) {
        if !self.handle.is_null() {
            // SAFETY: the handle came from headroom_profile_start and is stopped once (nulled).
            #[allow(unsafe_code)]
            unsafe {
                native::headroom_profile_stop(self.handle)
            };
            self.handle = std::ptr::null_mut();
            RECORDING.store(false, Ordering::SeqCst);
        }
    }
}

impl Drop for OpTrace {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A named span of the trace (PyTorch's `record_function`), open until dropped; nothing while no
/// trace records. Open and drop it on one thread.
#[must_use = "the span ends when this is dropped"]
pub struct Span(*mut c_void);

/// Opens a span named `name` (`headroom::…`).
pub fn span(name: &'static CStr) -> Span {
    if !RECORDING.load(Ordering::Relaxed) {
        return Span(std::ptr::null_mut());
    }
    let name: *const c_char = name.as_ptr();
    // SAFETY: `name` is static, so it outlives the span libtorch keeps it in.
    #[allow(unsafe_code)]
    Span(unsafe { native::headroom_scope_enter(name) })
}

impl Drop for Span {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the pointer came from headroom_scope_enter and is freed once, here.
            #[allow(unsafe_code)]
            unsafe {
                native::headroom_scope_exit(self.0)
            };
        }
    }
}

/// Which passes a run traces: `passes` of them after the first `skip` (the first pass pays for
/// allocations and lazy set-up a step does not), ended early by the end of the epoch (validation
/// is not a step).
#[derive(Debug)]
pub struct ProfileWindow {
    path: PathBuf,
    skip: u64,
    passes: u64,
    seen: u64,
    recorded: u64,
    trace: Option<OpTrace>,
}

impl ProfileWindow {
    /// A window of `passes` passes after the first `skip`, written to `path`.
    pub fn new(path: &Path, skip: u64, passes: u64) -> ProfileWindow {
        ProfileWindow { path: path.to_path_buf(), skip, passes, seen: 0, recorded: 0, trace: None }
    }

    /// Before a pass: starts recording when the window opens.
    pub fn before_pass(&mut self) -> Result<()> {
        if self.trace.is_none() && self.recorded == 0 && self.seen == self.skip && self.passes > 0 {
            self.trace = Some(OpTrace::start(&self.path)?);
        }
        Ok(())
    }

    /// After a pass and its optimiser step: writes the trace once the window's passes are in.
    pub fn after_pass(&mut self) -> Result<()> {
        self.seen += 1;
        if self.trace.is_some() {
            self.recorded += 1;
            if self.recorded >= self.passes {
                self.end()?;
            }
        }
        Ok(())
    }

    /// At the end of an epoch: writes what is recorded.
    pub fn end(&mut self) -> Result<()> {
        if let Some(trace) = self.trace.take() {
            let path = trace.finish()?;
            tracing::info!("op trace of {} passes written to {}", self.recorded, path.display());
        }
        Ok(())
    }
}
