//! File writing that never leaves a half-written file behind.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// Writes `bytes` to `path` atomically: into a temporary file in the same folder, flushed to disk,
/// then renamed over `path`. A reader sees the old file or the new one, never a part; a crash
/// leaves at most a `*.tmp` file beside it. Creates missing parent folders.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = write_temporary(path, bytes, true)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// The temporary beside `path` that an atomic write goes through (`.<name>.<pid>.tmp`).
pub fn temporary_path(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    parent.join(format!(".{name}.{}.tmp", std::process::id()))
}

fn write_temporary(path: &Path, bytes: &[u8], sync: bool) -> Result<PathBuf> {
    let tmp = temporary_path(path);
    if let Some(parent) = tmp.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        if sync { file.sync_all() } else { Ok(()) }
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    Ok(tmp)
}

/// Atomic writes made durable together, for the many small files of a long run.
///
/// [`DurableBatch::write`] puts the bytes in a temporary file beside the target without flushing it;
/// [`DurableBatch::commit`] flushes the filesystem once (`syncfs` on Linux, one `fsync` per file
/// elsewhere) and only then renames every temporary over its target, in write order. So, as with
/// [`write_atomic`], a target is either absent/old or complete — also after a power cut — but a
/// batch costs one flush instead of one per file (an `fsync` costs ~4 ms on this machine's disk,
/// more than a small model's inference). A commit happens by itself when `limit` files are pending
/// or `interval` has passed since the last one; call [`DurableBatch::commit`] at the end. Files not
/// yet committed when the process dies stay as `.*.tmp` temporaries, for the next run to remove.
#[derive(Debug)]
pub struct DurableBatch {
    pending: Vec<(PathBuf, PathBuf)>,
    limit: usize,
    interval: Duration,
    last: Instant,
}

impl DurableBatch {
    /// A batch committed every `limit` files or `interval`, whichever comes first.
    pub fn new(limit: usize, interval: Duration) -> DurableBatch {
        DurableBatch { pending: Vec::new(), limit: limit.max(1), interval, last: Instant::now() }
    }

    /// Writes `bytes` for `path` (visible under `path` after the next commit).
    pub fn write(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let tmp = write_temporary(path, bytes, false)?;
        self.pending.push((tmp, path.to_path_buf()));
        if self.pending.len() >= self.limit || self.last.elapsed() >= self.interval {
            self.commit()?;
        }
        Ok(())
    }

    /// Files written and not yet committed.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Flushes the pending files to disk, then renames them over their targets.
    pub fn commit(&mut self) -> Result<()> {
        self.last = Instant::now();
        let Some((first, target)) = self.pending.first() else { return Ok(()) };
        flush(first, &self.pending).map_err(|e| Error::io(target, e))?;
        for (tmp, path) in std::mem::take(&mut self.pending) {
            std::fs::rename(&tmp, &path).map_err(|e| {
                let _ = std::fs::remove_file(&tmp);
                Error::io(&path, e)
            })?;
        }
        Ok(())
    }
}

impl Drop for DurableBatch {
    /// Files written but never committed (the run failed before its commit, or the commit failed)
    /// are removed: an error exit leaves no temporaries behind.
    fn drop(&mut self) {
        for (tmp, _) in self.pending.drain(..) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The lock file [`OutputLock`] takes in an output folder (hidden, so dataset walks skip it).
pub const LOCK_FILE: &str = ".headroom.lock";

/// An exclusive lock on an output folder, so that two runs never write into it at once.
///
/// An advisory `flock` on `<folder>/.headroom.lock`, which records who holds it (pid, command,
/// start time). The kernel releases it when the process ends, however it ends, so it never goes
/// stale after a crash or `kill -9`; the file itself stays (removing it could let two runs lock two
/// different files). Released when dropped. On systems without `flock` it locks nothing.
#[derive(Debug)]
pub struct OutputLock {
    _file: std::fs::File,
}

impl OutputLock {
    /// Takes the lock on `folder` (which must exist) for `command` (e.g. `headroom label`), or says
    /// who holds it.
    pub fn acquire(folder: &Path, command: &str) -> Result<OutputLock> {
        let path = folder.join(LOCK_FILE);
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        if !try_lock(&file).map_err(|e| Error::io(&path, e))? {
            let holder = std::fs::read_to_string(&path).unwrap_or_default();
            let holder = holder.lines().collect::<Vec<_>>().join(", ");
            return Err(Error::Locked { path, holder });
        }
        let since =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let text = format!("pid {}\ncommand {command}\nsince {since} (Unix time)\n", std::process::id());
        (|| {
            file.set_len(0)?;
            file.write_all(text.as_bytes())
        })()
        .map_err(|e| Error::io(&path, e))?;
        Ok(OutputLock { _file: file })
    }
}

#[cfg(target_os = "linux")]
fn try_lock(file: &std::fs::File) -> std::io::Result<bool> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn try_lock(_file: &std::fs::File) -> std::io::Result<bool> {
    Ok(true)
}

#[cfg(target_os = "linux")]
fn flush(any: &Path, _pending: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
    // One open file is enough: syncfs flushes the whole filesystem it lives on.
    let file = std::fs::File::open(any)?;
    Ok(rustix::fs::syncfs(&file)?)
}

#[cfg(not(target_os = "linux"))]
fn flush(_any: &Path, pending: &[(PathBuf, PathBuf)]) -> std::io::Result<()> {
    for (tmp, _) in pending {
        std::fs::File::open(tmp)?.sync_all()?;
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
    fn a_batch_shows_nothing_before_its_commit_and_everything_after() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut batch = DurableBatch::new(3, Duration::from_secs(3600));
        let (a, b) = (dir.path().join("x/a.txt"), dir.path().join("x/b.txt"));
        std::fs::create_dir_all(dir.path().join("x")).expect("mkdir");
        std::fs::write(&b, b"old").expect("old b");
        batch.write(&a, b"A").expect("write a");
        batch.write(&b, b"B").expect("write b");
        assert!(!a.exists(), "not visible before the commit");
        assert_eq!(std::fs::read(&b).expect("old b"), b"old");
        assert_eq!(batch.pending(), 2);
        batch.write(&dir.path().join("x/c.txt"), b"C").expect("third write commits");
        assert_eq!(batch.pending(), 0);
        assert_eq!(
            (std::fs::read(&a).expect("a"), std::fs::read(&b).expect("b")),
            (b"A".to_vec(), b"B".to_vec())
        );
        let names: Vec<_> = std::fs::read_dir(dir.path().join("x")).expect("list").collect();
        assert_eq!(names.len(), 3, "no temporaries left");
        batch.commit().expect("empty commit is fine");
    }

    #[test]
    fn a_dropped_batch_removes_what_it_never_committed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut batch = DurableBatch::new(100, Duration::from_secs(3600));
        batch.write(&dir.path().join("a.txt"), b"A").expect("write");
        drop(batch);
        let names: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_second_writer_is_refused_and_told_who_holds_the_lock() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = OutputLock::acquire(dir.path(), "headroom label").expect("first");
        let err = OutputLock::acquire(dir.path(), "headroom label").expect_err("second").to_string();
        let pid = format!("pid {}", std::process::id());
        assert!(err.contains(LOCK_FILE) && err.contains(&pid) && err.contains("headroom label"), "{err}");
        drop(first);
        OutputLock::acquire(dir.path(), "headroom label").expect("free again after the first ends");
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
