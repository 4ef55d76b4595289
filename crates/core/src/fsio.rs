//! File writing that never leaves a half-written file behind.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// Writes `bytes` to `path` atomically: into a temporary file in the same folder, flushed to disk,
/// then renamed over `path`. A reader sees the old file or the new one, never a part; a crash
/// leaves at most a `*.tmp` file beside it. Creates missing parent folders.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| Error::io(&parent, e))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replaces_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a/b/file.txt");
        write_atomic(&path, b"one").expect("first write");
        write_atomic(&path, b"two").expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("a/b")).expect("list").collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn error_names_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"x").expect("write");
        let err = write_atomic(&blocker.join("child.txt"), b"y").expect_err("parent is a file");
        assert!(err.to_string().contains("file"), "{err}");
    }
}
