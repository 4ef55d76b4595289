//! File writing that never leaves a half-written file behind, and file reading that never hangs on
//! something that is not a file.

mod publish;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use publish::{FileSet, Recovery, recover_file_set};

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

/// [`write_atomic`] for bytes made as they are written (a large serialisation that should not be
/// held in memory whole): `write` fills the temporary through a buffered writer; an error from it
/// removes the temporary and leaves `path` as it was.
pub fn write_atomic_with(
    path: &Path,
    write: impl FnOnce(&mut std::io::BufWriter<std::fs::File>) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = temporary_path(path);
    if let Some(parent) = tmp.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let result = (|| {
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        write(&mut out)?;
        out.into_inner().map_err(std::io::IntoInnerError::into_error)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::io(path, e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// Owner, group and permission bits of a file: what a service that reads it depends on.
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ownership {
    /// Owning user id.
    pub uid: u32,
    /// Owning group id.
    pub gid: u32,
    /// Permission bits (`0o7777` of `st_mode`).
    pub mode: u32,
}

#[cfg(unix)]
impl Ownership {
    /// Those of the file at `path`, following symbolic links; `None` when there is no such file.
    pub fn of(path: &Path) -> Result<Option<Ownership>> {
        use std::os::unix::fs::MetadataExt as _;
        match std::fs::metadata(path) {
            Ok(meta) => Ok(Some(Ownership { uid: meta.uid(), gid: meta.gid(), mode: meta.mode() & 0o7777 })),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(path, e)),
        }
    }
}

/// [`write_atomic`], the new file given `ownership` (owner and group, then the permission bits)
/// before it is flushed and renamed into place, so no reader ever sees it with other ones. Changing
/// the owner takes the right to (root, or the same owner and one of its groups): without it the
/// temporary is removed and the error names `path`.
#[cfg(unix)]
pub fn write_atomic_owned(path: &Path, bytes: &[u8], ownership: Ownership) -> Result<()> {
    let tmp = write_temporary_with(path, bytes, true, |file| {
        use std::os::unix::fs::PermissionsExt as _;
        std::os::unix::fs::fchown(file, Some(ownership.uid), Some(ownership.gid))?;
        // After the owner: chown(2) may clear the set-id bits.
        file.set_permissions(std::fs::Permissions::from_mode(ownership.mode))
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// [`write_atomic_owned`], asking `still` between the synced temporary and the rename whether the
/// replacement is still wanted: when it answers `false` (the file to be replaced changed meanwhile,
/// say), the temporary is removed, `path` is left as it is, and the answer is `false`.
#[cfg(unix)]
pub fn write_atomic_owned_if(
    path: &Path,
    bytes: &[u8],
    ownership: Ownership,
    still: impl FnOnce() -> Result<bool>,
) -> Result<bool> {
    let tmp = write_temporary_with(path, bytes, true, |file| {
        use std::os::unix::fs::PermissionsExt as _;
        std::os::unix::fs::fchown(file, Some(ownership.uid), Some(ownership.gid))?;
        file.set_permissions(std::fs::Permissions::from_mode(ownership.mode))
    })?;
    let wanted = still().inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    if !wanted {
        std::fs::remove_file(&tmp).map_err(|e| Error::io(&tmp, e))?;
        return Ok(false);
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })?;
    Ok(true)
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

/// Removes, in `folder`, the temporaries ([`temporary_path`]: `.<name>.<pid>.tmp`) of the targets
/// `names` whose writer is no longer running, and returns what it removed. Only files of exactly
/// that pattern, for exactly those names, are touched: another program's files, and the
/// temporaries of a live process (this one included), stay. A missing folder holds nothing.
///
/// Whether a pid runs is read from `/proc/<pid>` on Linux; elsewhere every writer counts as alive
/// and nothing is removed. A pid reused by an unrelated process keeps its temporaries until that
/// process ends (never too much removed, at worst too little).
pub fn remove_stale_temporaries(folder: &Path, names: &[&str]) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(folder, e)),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(folder, e))?;
        let Some(pid) = entry.file_name().to_str().and_then(|name| temporary_writer(name, names)) else {
            continue;
        };
        if entry.file_type().is_ok_and(|t| t.is_dir()) || process_runs(pid) {
            continue;
        }
        let path = entry.path();
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
    removed.sort();
    Ok(removed)
}

/// The pid in `file_name` when it is the temporary of one of `names` (`.<name>.<pid>.tmp`).
fn temporary_writer(file_name: &str, names: &[&str]) -> Option<u32> {
    let inner = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (name, pid) = inner.rsplit_once('.')?;
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    if digits && names.contains(&name) { pid.parse().ok() } else { None }
}

/// Whether process `pid` exists (always true where that cannot be known).
fn process_runs(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    if cfg!(target_os = "linux") { Path::new("/proc").join(pid.to_string()).exists() } else { true }
}

/// What a file of type `file_type` is when it is neither a regular file, a folder nor a symbolic
/// link: `a FIFO (named pipe)`, `a socket`, `a character device`, `a block device`, or `not a
/// regular file` for anything else. Opening a FIFO waits for a writer, reading a character device
/// may never end: walks and readers skip these.
pub fn special_file_kind(file_type: std::fs::FileType) -> Option<&'static str> {
    if file_type.is_file() || file_type.is_dir() || file_type.is_symlink() {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        let kinds = [
            (file_type.is_fifo(), "a FIFO (named pipe)"),
            (file_type.is_socket(), "a socket"),
            (file_type.is_char_device(), "a character device"),
            (file_type.is_block_device(), "a block device"),
        ];
        if let Some((_, kind)) = kinds.iter().find(|(is, _)| *is) {
            return Some(kind);
        }
    }
    Some("not a regular file")
}

/// [`special_file_kind`] of what `path` names, links followed; `None` for a regular file, a
/// folder, or a path that cannot be read (the reader then reports why).
pub fn special_file(path: &Path) -> Option<&'static str> {
    std::fs::metadata(path).ok().and_then(|m| special_file_kind(m.file_type()))
}

/// Reads the whole of `path`, which must be a regular file (links followed): a FIFO, socket or
/// device is refused with [`Error::NotRegularFile`] without blocking. On Linux the file is opened
/// non-blocking and checked on the open descriptor, so a file swapped for a FIFO after a walk
/// listed it is refused too.
pub fn read_regular(path: &Path) -> Result<Vec<u8>> {
    let mut file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| Error::io(path, e))?;
    Ok(bytes)
}

#[cfg(target_os = "linux")]
fn open_regular(path: &Path) -> Result<std::fs::File> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let not_regular = |kind| Error::NotRegularFile { path: path.to_path_buf(), kind };
    // A socket cannot be opened at all (ENXIO): say what it is rather than what open said.
    let fd = rustix::fs::open(path, flags, Mode::empty())
        .map_err(|e| special_file(path).map_or_else(|| Error::io(path, e.into()), not_regular))?;
    let file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(|e| Error::io(path, e))?;
    match special_file_kind(meta.file_type()) {
        Some(kind) => Err(not_regular(kind)),
        // O_NONBLOCK changes nothing for a regular file (and a folder fails its first read).
        None => Ok(file),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_regular(path: &Path) -> Result<std::fs::File> {
    if let Some(kind) = special_file(path) {
        return Err(Error::NotRegularFile { path: path.to_path_buf(), kind });
    }
    std::fs::File::open(path).map_err(|e| Error::io(path, e))
}

fn write_temporary(path: &Path, bytes: &[u8], sync: bool) -> Result<PathBuf> {
    write_temporary_with(path, bytes, sync, |_| Ok(()))
}

/// Writes the temporary of `path`; `prepare` runs on it after the bytes, before the flush.
fn write_temporary_with(
    path: &Path,
    bytes: &[u8],
    sync: bool,
    prepare: impl FnOnce(&std::fs::File) -> std::io::Result<()>,
) -> Result<PathBuf> {
    let tmp = temporary_path(path);
    if let Some(parent) = tmp.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        prepare(&file)?;
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

/// An exclusive lock on an output folder (or on some outputs in it), so that two runs never write
/// into it at once.
///
/// An advisory `flock` on `<folder>/.headroom.lock` (or the file [`OutputLock::acquire_named`] is
/// given), which records who holds it (pid, command, start time). The kernel releases it when the process ends, however it ends, so it never goes
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
        OutputLock::acquire_named(folder, LOCK_FILE, "this folder", command)
    }

    /// A lock on part of `folder` (which must exist): the hidden lock file `name` in it (e.g.
    /// `.best.export.lock` for the files of one export), independent of the whole-folder lock of
    /// [`OutputLock::acquire`]. `scope` says what it guards in the refusal (`the export of best
    /// here`).
    pub fn acquire_named(folder: &Path, name: &str, scope: &str, command: &str) -> Result<OutputLock> {
        let path = folder.join(name);
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
            let holder = if holder.is_empty() { "its holder is not named".to_string() } else { holder };
            return Err(Error::Locked { path, scope: scope.to_string(), holder });
        }
        let text = format!("pid {}\ncommand {command}\nsince {}\n", std::process::id(), utc_now());
        (|| {
            file.set_len(0)?;
            file.write_all(text.as_bytes())
        })()
        .map_err(|e| Error::io(&path, e))?;
        Ok(OutputLock { _file: file })
    }
}

/// The current time in UTC, as `2026-12-02 06:30:00 UTC` (for messages people read).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc_string(secs)
}

/// Seconds since 1970-01-01 in UTC, as `2026-12-02 06:30:00 UTC`.
pub fn utc_string(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rest / 3600, rest % 3600 / 60, rest % 60)
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
    #[test]
    fn utc_string_is_the_civil_date() {
        assert_eq!(super::utc_string(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(super::utc_string(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(super::utc_string(1_796_194_200), "2026-12-02 06:50:00 UTC");
    }

    use super::*;

    #[cfg(unix)]
    #[test]
    fn an_owned_write_has_the_given_mode_and_owner_and_leaves_no_temporary() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("model.onnx");
        std::fs::write(&path, b"old").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).expect("chmod");
        let before = Ownership::of(&path).expect("stat").expect("exists");
        assert_eq!(before.mode, 0o640);
        write_atomic_owned(&path, b"new", before).expect("write");
        assert_eq!(std::fs::read(&path).expect("read"), b"new");
        assert_eq!(Ownership::of(&path).expect("stat"), Some(before));
        assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1, "no temporary left");
        assert_eq!(Ownership::of(&dir.path().join("absent")).expect("stat"), None);
    }

    #[test]
    fn a_streamed_write_replaces_whole_or_leaves_the_old_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("ckpt/last.pt");
        write_atomic_with(&path, |out| out.write_all(b"one")).expect("first write");
        let failed = write_atomic_with(&path, |out| {
            out.write_all(b"half")?;
            Err(std::io::Error::other("the disk is full"))
        });
        let text = failed.expect_err("the writer failed").to_string();
        assert!(text.contains("last.pt") && text.contains("the disk is full"), "{text}");
        assert_eq!(std::fs::read(&path).expect("read"), b"one", "the old file stays whole");
        write_atomic_with(&path, |out| out.write_all(b"two")).expect("second write");
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
        assert_eq!(std::fs::read_dir(dir.path().join("ckpt")).expect("ls").count(), 1, "no temporary left");
    }

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

    #[cfg(target_os = "linux")]
    #[test]
    fn stale_temporaries_of_the_names_asked_are_removed_and_nothing_else() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        // Pid 4194304 is above Linux's largest (2^22), so no process has it.
        let dead = 4_194_304;
        let live = std::process::id();
        let files = [
            format!(".m.int8.onnx.{dead}.tmp"),
            format!(".m.int8.calib.{dead}.tmp"),
            format!(".m.int8.onnx.{live}.tmp"),
            format!(".other.onnx.{dead}.tmp"),
            format!("m.int8.onnx.{dead}.tmp"),
            format!(".m.int8.onnx.{dead}x.tmp"),
            format!(".m.int8.onnx.{dead}.tmp.bak"),
            ".m.int8.onnx..tmp".to_string(),
            "m.int8.onnx".to_string(),
        ];
        for name in &files {
            std::fs::write(d.join(name), b"x").expect("write");
        }
        std::fs::create_dir(d.join(format!(".m.fp16.onnx.{dead}.tmp"))).expect("a folder of that name");
        let removed =
            remove_stale_temporaries(d, &["m.int8.onnx", "m.int8.calib", "m.fp16.onnx"]).expect("sweep");
        assert_eq!(removed, [d.join(&files[1]), d.join(&files[0])]);
        for name in &files[2..] {
            assert!(d.join(name).exists(), "{name} kept");
        }
        assert!(d.join(format!(".m.fp16.onnx.{dead}.tmp")).is_dir());
        assert_eq!(
            remove_stale_temporaries(&d.join("missing"), &["x"]).expect("no folder"),
            Vec::<PathBuf>::new()
        );
    }

    #[cfg(unix)]
    #[test]
    fn fifos_sockets_and_devices_are_named_and_refused_unread() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let fifo = d.join("pipe.jpg");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success());
        let socket = d.join("socket.png");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("socket");
        let device = d.join("zero.jpg");
        std::os::unix::fs::symlink("/dev/zero", &device).expect("link");
        std::fs::write(d.join("file.jpg"), b"bytes").expect("write");
        std::os::unix::fs::symlink(d.join("file.jpg"), d.join("link.jpg")).expect("link");
        for (path, kind) in
            [(&fifo, "a FIFO (named pipe)"), (&socket, "a socket"), (&device, "a character device")]
        {
            assert_eq!(special_file(path), Some(kind));
            // A FIFO without writer would block this read forever, /dev/zero would never end.
            let err = read_regular(path).expect_err("refused");
            assert!(matches!(err, Error::NotRegularFile { .. }), "{err}");
            assert!(
                err.to_string().contains(kind) && err.to_string().contains(&*path.to_string_lossy()),
                "{err}"
            );
        }
        assert_eq!(special_file(&d.join("link.jpg")), None, "a link to a file is a file");
        assert_eq!(read_regular(&d.join("link.jpg")).expect("reads"), b"bytes");
        assert_eq!(special_file(d), None);
        assert_eq!(special_file(&d.join("missing")), None);
        assert!(matches!(read_regular(&d.join("missing")), Err(Error::Io { .. })));
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
