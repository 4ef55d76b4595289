//! headroom-trt: TensorRT engines, built on the device by driving `trtexec` (present on every
//! JetPack), written as raw plans with a JSON sidecar.
//!
//! Today: finding `trtexec`. The engine build, the calibration cache and the sidecar build on it.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// Where JetPack installs `trtexec`.
pub const JETPACK_TRTEXEC: &str = "/usr/src/tensorrt/bin/trtexec";

/// Finds `trtexec`: `TRTEXEC` if set, else the JetPack location, else the first on `PATH`.
pub fn find_trtexec() -> Option<PathBuf> {
    let explicit = std::env::var_os("TRTEXEC").map(PathBuf::from);
    let path = std::env::var_os("PATH");
    find_trtexec_in(explicit.as_deref(), Path::new(JETPACK_TRTEXEC), path.as_deref())
}

/// [`find_trtexec`] with its inputs explicit: an explicit path (must exist), the JetPack location,
/// and a `PATH`-style list of folders.
pub fn find_trtexec_in(explicit: Option<&Path>, jetpack: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    if jetpack.is_file() {
        return Some(jetpack.to_path_buf());
    }
    path.into_iter().flat_map(std::env::split_paths).map(|dir| dir.join("trtexec")).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_order_is_explicit_then_jetpack_then_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let on_path = bin.join("trtexec");
        std::fs::write(&on_path, b"#!/bin/sh\n").expect("write");
        let jetpack = dir.path().join("jetpack-trtexec");
        let path_var = std::env::join_paths([dir.path().join("empty"), bin.clone()]).expect("join");

        assert_eq!(find_trtexec_in(None, &jetpack, Some(&path_var)), Some(on_path.clone()));
        std::fs::write(&jetpack, b"#!/bin/sh\n").expect("write");
        assert_eq!(find_trtexec_in(None, &jetpack, Some(&path_var)), Some(jetpack.clone()));
        assert_eq!(find_trtexec_in(Some(&on_path), &jetpack, None), Some(on_path.clone()));
        assert_eq!(find_trtexec_in(Some(&dir.path().join("missing")), &jetpack, None), None);
        assert_eq!(find_trtexec_in(None, &dir.path().join("no"), None), None);
    }
}
