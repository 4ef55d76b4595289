//! What this process has loaded, as the kernel maps it (`/proc/self/maps`, Linux).

use std::path::PathBuf;

/// The files of the shared libraries mapped into this process, each once, in the order first
/// mapped; empty where `/proc/self/maps` cannot be read.
pub fn mapped_libraries() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut files: Vec<PathBuf> = Vec::new();
    for path in maps.lines().filter_map(|line| line.split_whitespace().nth(5)).filter(|p| p.starts_with('/'))
    {
        let path = PathBuf::from(path);
        if !files.contains(&path) {
            files.push(path);
        }
    }
    files
}

/// The file of the first shared library mapped into this process whose file name starts with
/// `stem` (`libtorch_cpu.so`): where the loader really found it, whatever path was asked for.
pub fn loaded_library(stem: &str) -> Option<PathBuf> {
    mapped_libraries()
        .into_iter()
        .find(|path| path.file_name().and_then(|n| n.to_str()).is_some_and(|name| name.starts_with(stem)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_maps_its_c_library() {
        if !std::path::Path::new("/proc/self/maps").exists() {
            return;
        }
        let libc = loaded_library("libc.so").or_else(|| loaded_library("libc-"));
        assert!(libc.is_some_and(|p| p.is_file()), "{:?}", mapped_libraries());
        assert!(loaded_library("libno-such-library.so").is_none());
    }
}

/// One check of `headroom doctor`: whether a native library loaded and computed, in words, with the
/// file it was loaded from and its version when they can be told.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Check {
    /// Whether it passed.
    pub ok: bool,
    /// What was found, or why it failed.
    pub detail: String,
    /// The file the library was loaded from (as the process mapped it), when it loaded.
    pub library: Option<PathBuf>,
    /// The library's version, when it says.
    pub version: Option<String>,
}

impl Check {
    /// A failed check.
    pub fn failed(detail: String) -> Check {
        Check { ok: false, detail, library: None, version: None }
    }
}
