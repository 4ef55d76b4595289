//! Publishing several files as one: all are written to temporaries first, then a journal listing
//! the renames is written atomically, the renames are done and the journal removed. A process that
//! dies between two renames leaves the journal, and the next run completes what it lists (or, if a
//! temporary has gone, removes what was left of the set), so a reader never finds files of two
//! publications side by side once any run has finished.

use std::path::{Component, Path, PathBuf};

use super::{flush, temporary_path, write_atomic, write_temporary};
use crate::{Error, Result};

/// The journal's content: who wrote it, and the renames in the order they are done.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Journal {
    pid: u32,
    renames: Vec<Rename>,
}

/// One rename, as file names in the journal's folder.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Rename {
    temporary: String,
    target: String,
}

/// Files published together, through a journal (`journal`, beside them).
///
/// [`FileSet::write`] puts a file's bytes in its temporary ([`temporary_path`]) and
/// [`FileSet::adopt`] takes one another program wrote there; nothing is visible under the targets
/// until [`FileSet::publish`]. Every file of the set lies in the journal's folder. Dropped
/// unpublished (an error, a stop request), the set removes its temporaries.
#[derive(Debug)]
pub struct FileSet {
    journal: PathBuf,
    /// (temporary, target), in publication order.
    files: Vec<(PathBuf, PathBuf)>,
}

impl FileSet {
    /// An empty set published through the journal file `journal`.
    pub fn new(journal: impl Into<PathBuf>) -> FileSet {
        FileSet { journal: journal.into(), files: Vec::new() }
    }

    /// Writes `bytes` for `target` into its temporary and returns the temporary's path, which holds
    /// the file until [`FileSet::publish`] (read it there). A second write for one target replaces
    /// the first.
    pub fn write(&mut self, target: &Path, bytes: &[u8]) -> Result<PathBuf> {
        self.check_folder(target)?;
        let tmp = write_temporary(target, bytes, false)?;
        self.add(tmp.clone(), target);
        Ok(tmp)
    }

    /// Adds `target`, whose content another program wrote at [`temporary_path`]`(target)`.
    pub fn adopt(&mut self, target: &Path) -> Result<PathBuf> {
        self.check_folder(target)?;
        let tmp = temporary_path(target);
        std::fs::symlink_metadata(&tmp).map_err(|e| Error::io(&tmp, e))?;
        self.add(tmp.clone(), target);
        Ok(tmp)
    }

    /// The targets, in publication order.
    pub fn targets(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|(_, target)| target.as_path())
    }

    /// Makes the whole set visible: flushes the temporaries to disk, writes the journal, renames
    /// every temporary over its target, removes the journal. Returns the targets.
    pub fn publish(self) -> Result<Vec<PathBuf>> {
        self.publish_observed(|_| {})
    }

    /// [`FileSet::publish`], calling `after_rename(n)` after the `n`-th rename (for tests that stop
    /// the process there). A failed rename leaves the journal and the temporaries for
    /// [`recover_file_set`].
    pub fn publish_observed(mut self, mut after_rename: impl FnMut(usize)) -> Result<Vec<PathBuf>> {
        let files = std::mem::take(&mut self.files);
        let Some((first, target)) = files.first() else { return Ok(Vec::new()) };
        let cleanup = |files: &[(PathBuf, PathBuf)]| {
            for (tmp, _) in files {
                let _ = std::fs::remove_file(tmp);
            }
        };
        if let Err(e) = flush(first, &files) {
            cleanup(&files);
            return Err(Error::io(target, e));
        }
        let renames = files
            .iter()
            .map(|(tmp, target)| Ok(Rename { temporary: file_name(tmp)?, target: file_name(target)? }))
            .collect::<Result<Vec<_>>>();
        let journal = renames.and_then(|renames| {
            let journal = Journal { pid: std::process::id(), renames };
            serde_json::to_vec_pretty(&journal).map_err(|e| self.invalid(e.to_string()))
        });
        if let Err(e) = journal.and_then(|text| write_atomic(&self.journal, &text)) {
            cleanup(&files);
            return Err(e);
        }
        for (n, (tmp, target)) in files.iter().enumerate() {
            std::fs::rename(tmp, target).map_err(|e| Error::io(target, e))?;
            after_rename(n + 1);
        }
        std::fs::remove_file(&self.journal).map_err(|e| Error::io(&self.journal, e))?;
        Ok(files.into_iter().map(|(_, target)| target).collect())
    }

    fn add(&mut self, tmp: PathBuf, target: &Path) {
        self.files.retain(|(_, t)| t != target);
        self.files.push((tmp, target.to_path_buf()));
    }

    fn check_folder(&self, target: &Path) -> Result<()> {
        if target.parent() == self.journal.parent() {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            name: "target",
            message: format!(
                "{} is not in the folder of the journal {}",
                target.display(),
                self.journal.display()
            ),
        })
    }

    fn invalid(&self, reason: String) -> Error {
        Error::Journal { path: self.journal.clone(), reason }
    }
}

impl Drop for FileSet {
    /// A set never published removes its temporaries.
    fn drop(&mut self) {
        for (tmp, _) in self.files.drain(..) {
            let _ = std::fs::remove_file(tmp);
        }
    }
}

/// The file name of `path`, as UTF-8 (what the journal stores).
fn file_name(path: &Path) -> Result<String> {
    path.file_name().and_then(|n| n.to_str()).map(str::to_string).ok_or_else(|| Error::InvalidArgument {
        name: "path",
        message: format!("{}: a published file needs a UTF-8 file name", path.display()),
    })
}

/// What [`recover_file_set`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recovery {
    /// No journal: no publication was left half done.
    Nothing,
    /// A journal whose files were all there (as temporaries, or already renamed): its remaining
    /// renames were done, so its set is whole.
    Completed {
        /// The process that wrote the journal.
        pid: u32,
        /// The targets renamed now.
        renamed: Vec<PathBuf>,
    },
    /// A journal with a temporary gone: the set cannot be made whole, so what was left of it (its
    /// temporaries and the targets it had already renamed) was removed.
    Abandoned {
        /// The process that wrote the journal.
        pid: u32,
        /// The files removed.
        removed: Vec<PathBuf>,
    },
}

/// Finishes the publication a dead process left half done at `journal` (see [`FileSet`]): its
/// renames are done in journal order, so a prefix of the temporaries is gone and their targets are
/// the new files. When every remaining temporary and every renamed target is there, the remaining
/// renames are done; otherwise the temporaries and the renamed targets are removed. Either way the
/// journal is removed. Call it holding the lock that guards the set, so that the journal's writer
/// has ended.
pub fn recover_file_set(journal: &Path) -> Result<Recovery> {
    let text = match std::fs::read(journal) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recovery::Nothing),
        Err(e) => return Err(Error::io(journal, e)),
    };
    let bad = |reason: String| Error::Journal {
        path: journal.to_path_buf(),
        reason: format!("{reason}: not a journal headroom wrote; remove it (and the files it names)"),
    };
    let record: Journal = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
    let folder = journal.parent().unwrap_or(Path::new(""));
    let in_folder = |name: &str| {
        let mut parts = Path::new(name).components();
        match (parts.next(), parts.next()) {
            (Some(Component::Normal(_)), None) => Ok(folder.join(name)),
            _ => Err(bad(format!("`{name}` is not a file name"))),
        }
    };
    let pairs = record
        .renames
        .iter()
        .map(|r| Ok((in_folder(&r.temporary)?, in_folder(&r.target)?)))
        .collect::<Result<Vec<_>>>()?;
    let present = |p: &Path| std::fs::symlink_metadata(p).is_ok();
    let done = pairs.iter().take_while(|(tmp, _)| !present(tmp)).count();
    let whole = pairs[..done].iter().all(|(_, target)| present(target))
        && pairs[done..].iter().all(|(t, _)| present(t));
    let pid = record.pid;
    let recovery = if whole {
        let mut renamed = Vec::new();
        for (tmp, target) in &pairs[done..] {
            std::fs::rename(tmp, target).map_err(|e| Error::io(target, e))?;
            renamed.push(target.clone());
        }
        Recovery::Completed { pid, renamed }
    } else {
        let mut removed = Vec::new();
        let leftovers =
            pairs[..done].iter().map(|(_, target)| target).chain(pairs[done..].iter().map(|(t, _)| t));
        for path in leftovers {
            match std::fs::remove_file(path) {
                Ok(()) => removed.push(path.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(path, e)),
            }
        }
        Recovery::Abandoned { pid, removed }
    };
    std::fs::remove_file(journal).map_err(|e| Error::io(journal, e))?;
    Ok(recovery)
}

#[cfg(test)]
#[path = "publish_tests.rs"]
mod tests;
