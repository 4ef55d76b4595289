//! Replacing the deployed model: only ever by rename(2) of a complete copy in the deployed file's
//! own folder (so the service reads the old model or the new one, never a part, and a deployed path
//! on another filesystem than the run folder costs a copy, not atomicity), with the previous model
//! kept beside it as `<file>.prev` for `headroom field rollback`.
//!
//! A replaced file keeps its owner, group and mode (the service may run as another user than the
//! loop). A deployed path that is a symbolic link stays one: the file it points to is replaced, by
//! a temporary in that file's folder.

use std::path::{Path, PathBuf};

use crate::{Context as _, bail, ensure};
use headroom_core::fsio::Ownership;

use crate::detector::{DetectorFacts, detector};
use headroom_core::hash::sha256_file;

/// The scratch copy of the deployed model a rollback makes before anything moves (in the state
/// folder); its presence marks a rollback in progress.
const ROLLBACK_CURRENT: &str = "rollback-current.onnx";

/// `<deployed>.prev` (beside the path given, also when it is a symbolic link).
pub fn previous_path(deployed: &Path) -> PathBuf {
    let mut name = deployed.file_name().unwrap_or_default().to_os_string();
    name.push(".prev");
    deployed.with_file_name(name)
}

/// The file that writing `path` replaces: `path` itself, or, when it is a symbolic link, the file
/// at the end of its chain of links (which need not exist).
pub fn link_target(path: &Path) -> crate::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)
                    .with_context(|| format!("reading the symbolic link {}", current.display()))?;
                current = match current.parent() {
                    Some(folder) if link.is_relative() => folder.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    bail!("{}: more than 40 symbolic links in a row (a loop?): point it at the model file", path.display())
}

/// Copies `src` over `dst` atomically (a synced temporary in the folder of the file `dst` names,
/// then a rename). The file replaced keeps its owner, group and mode; a new one gets `src`'s.
pub(crate) fn copy_atomic(src: &Path, dst: &Path) -> crate::Result<()> {
    let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    let target = link_target(dst)?;
    let ownership = match Ownership::of(&target)? {
        Some(kept) => kept,
        None => Ownership::of(src)?.with_context(|| format!("{}: no such file", src.display()))?,
    };
    headroom_core::fsio::write_atomic_owned(&target, &bytes, ownership)
        .map_err(|e| refused_write(&target, ownership, e))?;
    sync_folder(&target);
    Ok(())
}

/// The rename itself, made durable.
fn sync_folder(target: &Path) {
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all();
    }
}

/// A failed write of `target` with its owner, group and mode, and what to do about it: a full file
/// system is named as one (not as a question of ownership), a refused owner change as one.
fn refused_write(target: &Path, ownership: Ownership, e: headroom_core::Error) -> crate::Error {
    let kind = match &e {
        headroom_core::Error::Io { source, .. } => Some(source.kind()),
        _ => None,
    };
    let folder = target.parent().unwrap_or(Path::new(".")).display().to_string();
    let context = match kind {
        Some(std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded) => format!(
            "writing {}: the file system of {folder} is full (or its quota spent): free space there; the \
             deployed model is unchanged",
            target.display()
        ),
        Some(std::io::ErrorKind::PermissionDenied) => format!(
            "writing {} as owner {}, group {}, mode {:04o} (those of the file it replaces): run as root or \
             as that owner",
            target.display(),
            ownership.uid,
            ownership.gid,
            ownership.mode
        ),
        _ => format!("writing {}", target.display()),
    };
    crate::Error::Context { context, source: Box::new(e.into()) }
}

/// Removes the temporaries a deploy or rollback killed midway left behind (`.<name>.<pid>.tmp` of
/// the deployed file, its `.prev`, the file a symbolic link points to, and the rollback's scratch
/// copy) whose process no longer runs; nothing else is touched.
pub fn remove_stale_temporaries(deployed: &Path, work: &Path) -> crate::Result<()> {
    let name_of = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let folder_of = |p: &Path| p.parent().map(Path::to_path_buf).unwrap_or_default();
    let target = link_target(deployed)?;
    let mut places = vec![
        (folder_of(deployed), vec![name_of(deployed), name_of(&previous_path(deployed))]),
        (work.to_path_buf(), vec![ROLLBACK_CURRENT.to_string()]),
    ];
    if target != deployed {
        places.push((folder_of(&target), vec![name_of(&target)]));
    }
    for (folder, names) in places {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        for removed in headroom_core::fsio::remove_stale_temporaries(&folder, &names)? {
            tracing::warn!("removed {}, left by a deploy or rollback that was killed", removed.display());
        }
    }
    Ok(())
}

/// How [`swap_in`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swap {
    /// `src` is the deployed file (now, or already before).
    Done,
    /// The deployed file is not the model the run started from (replaced before the deploy, or
    /// while it ran): it was left as it is. Its sha256.
    Superseded(String),
}

/// What replacing a file, or writing into it, changes: device, inode, size and modification time
/// of the file a path names (through symbolic links).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn identity(path: &Path) -> crate::Result<Identity> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(Identity {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    })
}

/// Makes `src` the deployed file, keeping the current one as `.prev`, only when the deployed file
/// is still the model the run started from (sha256 `started_from`). Each step is a rename in the
/// deployed file's folder; rerunning after a kill at any point ends in the same state.
///
/// Another updater may replace the deployed file at any moment (the service's own `mv`). Its
/// identity is taken with its hash, and checked again after `.prev` is written, immediately before
/// the rename: any change leaves the file as it is ([`Swap::Superseded`]), so a model this run did
/// not start from is never overwritten. `between` runs after `.prev` is written (a kill point; a
/// test's concurrent updater).
pub fn swap_in(
    deployed: &Path,
    src: &Path,
    started_from: &str,
    between: &mut dyn FnMut(),
) -> crate::Result<Swap> {
    let incoming = sha256_file(src)?;
    let before = identity(deployed)?;
    let current = sha256_file(deployed)?;
    if current == incoming {
        return Ok(Swap::Done); // already in place
    }
    if current != started_from || identity(deployed)? != before {
        return Ok(Swap::Superseded(current));
    }
    let previous = previous_path(deployed);
    let kept = previous.is_file() && sha256_file(&previous)? == current;
    if !kept {
        copy_atomic(deployed, &previous).context("keeping the deployed model for rollback")?;
    }
    between();
    let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    let target = link_target(deployed)?;
    let ownership = Ownership::of(&target)?.with_context(|| format!("{}: no such file", target.display()))?;
    let replaced = headroom_core::fsio::write_atomic_owned_if(&target, &bytes, ownership, || {
        Ok(identity(deployed).is_ok_and(|now| now == before))
    })
    .map_err(|e| refused_write(&target, ownership, e))
    .context("replacing the deployed model")?;
    if !replaced {
        return Ok(Swap::Superseded(sha256_file(deployed)?));
    }
    sync_folder(&target);
    Ok(Swap::Done)
}

/// `headroom field rollback`: the previous model back in place, and the one rolled back from kept
/// as `.prev` (so a second rollback undoes the first). `.prev` must be a detector with the deployed
/// model's classes and input size; with no deployed file, `.prev` is put in its place (and kept).
/// `at("rollback-swap")` is called once the previous model is in place and before the rolled-back
/// one is kept as `.prev`, where a kill leaves the most to finish (a test stands in a kill there).
pub fn rollback(deployed: &Path, scratch: &Path, at: &mut dyn FnMut(&str)) -> crate::Result<String> {
    let previous = previous_path(deployed);
    ensure!(
        previous.is_file(),
        "no previous model to roll back to: {} does not exist (nothing was deployed by `headroom field run` here)",
        previous.display()
    );
    check_previous(&previous, deployed)?;
    if !deployed.is_file() {
        tracing::warn!(
            "{} does not exist: putting {} in its place (and keeping it)",
            deployed.display(),
            previous.display()
        );
        copy_atomic(&previous, deployed).context("putting the previous model back")?;
        return Ok(sha256_file(deployed)?);
    }
    // The current model is saved whole before anything moves; its presence marks a rollback in
    // progress, which a rerun finishes (after a kill at any point) instead of starting another.
    let current = scratch.join(ROLLBACK_CURRENT);
    if !current.is_file() {
        copy_atomic(deployed, &current).context("saving the deployed model before the rollback")?;
    } else if sha256_file(&current)? == sha256_file(&previous)? {
        // Killed after the rollback completed, before the marker went.
        std::fs::remove_file(&current).with_context(|| format!("removing {}", current.display()))?;
        return Ok(sha256_file(deployed)?);
    } else {
        tracing::info!("finishing the rollback that was interrupted ({} exists)", current.display());
    }
    let before = sha256_file(&current)?;
    copy_atomic(&previous, deployed).context("putting the previous model back")?;
    at("rollback-swap");
    copy_atomic(&current, &previous).context("keeping the rolled-back model")?;
    std::fs::remove_file(&current).with_context(|| format!("removing {}", current.display()))?;
    tracing::info!("rolled back {}: was sha256 {before}", deployed.display());
    Ok(sha256_file(deployed)?)
}

/// Refuses a `.prev` the service could not use in place of the deployed model: not a detector, or
/// other classes or another input size than the deployed one (when that one can be read).
fn check_previous(previous: &Path, deployed: &Path) -> crate::Result<()> {
    let refuse = |why: String| {
        crate::Error::refused(format!(
            "not rolling back to {}: {why}; nothing was changed (put the model to roll back to there, or \
             deploy one with `headroom field run`)",
            previous.display()
        ))
    };
    let prev = detector("the previous model", previous).map_err(|e| refuse(e.chain()))?;
    if !deployed.is_file() {
        return Ok(());
    }
    let current: DetectorFacts = match detector("--model", deployed) {
        Ok(facts) => facts,
        Err(e) => {
            tracing::warn!("{}: rolling back without comparing classes and input size", e.chain());
            return Ok(());
        }
    };
    if prev.names != current.names {
        return Err(refuse(format!(
            "its {} classes ({}) are not the deployed model's {} ({})",
            prev.names.len(),
            prev.names.join(", "),
            current.names.len(),
            current.names.join(", ")
        )));
    }
    if prev.input_size != current.input_size {
        let [(ph, pw), (ch, cw)] = [prev.input_size, current.input_size].map(|[h, w]| (h, w));
        return Err(refuse(format!("its input is {ph}x{pw}, the deployed model's {ch}x{cw}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Swap, previous_path, swap_in};
    use headroom_core::hash::sha256_hex;
    use std::path::Path;

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).expect("write");
    }

    fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).expect("read")
    }

    /// The deployed model, the candidate, and the sha256 the run started from.
    fn setup() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf, String) {
        let dir = tempfile::tempdir().expect("tempdir");
        let deployed = dir.path().join("model.onnx");
        let candidate = dir.path().join("best.onnx");
        write(&deployed, b"the model the run started from");
        write(&candidate, b"the candidate");
        let started = sha256_hex(b"the model the run started from");
        (dir, deployed, candidate, started)
    }

    fn temporaries(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    /// A full disk at deploy is named as one, not sent the operator's way as an ownership problem.
    #[test]
    fn a_failed_write_names_its_cause() {
        let owner = headroom_core::fsio::Ownership { uid: 1000, gid: 1000, mode: 0o644 };
        let target = Path::new("/opt/detector/model.onnx");
        let said = |kind: std::io::ErrorKind| {
            let e = headroom_core::Error::io(target, std::io::Error::from(kind));
            super::refused_write(target, owner, e).chain()
        };
        let full = said(std::io::ErrorKind::StorageFull);
        assert!(full.contains("/opt/detector is full") && !full.contains("owner"), "{full}");
        let denied = said(std::io::ErrorKind::PermissionDenied);
        assert!(denied.contains("run as root or as that owner"), "{denied}");
        let other = said(std::io::ErrorKind::Other);
        assert!(!other.contains("owner") && !other.contains("full"), "{other}");
    }

    #[test]
    fn a_deploy_replaces_the_model_it_started_from_and_keeps_it_as_prev() {
        let (dir, deployed, candidate, started) = setup();
        let swap = swap_in(&deployed, &candidate, &started, &mut || {}).expect("deploy");
        assert_eq!(swap, Swap::Done);
        assert_eq!(read(&deployed), b"the candidate");
        assert_eq!(read(&previous_path(&deployed)), b"the model the run started from");
        assert!(temporaries(dir.path()).is_empty());
    }

    #[test]
    fn an_updater_that_moves_its_model_in_while_prev_is_written_keeps_it() {
        let (dir, deployed, candidate, started) = setup();
        // The service's own updater: an atomic `mv` of its model over the deployed path, landing
        // after `.prev` is written and before the deploy's rename.
        let theirs = dir.path().join("incoming.onnx");
        write(&theirs, b"the updater's model");
        let swap = swap_in(&deployed, &candidate, &started, &mut || {
            std::fs::rename(&theirs, &deployed).expect("the updater's mv");
        })
        .expect("deploy");
        assert_eq!(swap, Swap::Superseded(sha256_hex(b"the updater's model")));
        assert_eq!(read(&deployed), b"the updater's model", "the updater's model is kept");
        assert!(temporaries(dir.path()).is_empty(), "{:?}", temporaries(dir.path()));
    }

    #[test]
    fn a_model_written_in_place_during_the_deploy_is_not_overwritten() {
        let (_dir, deployed, candidate, started) = setup();
        let swap = swap_in(&deployed, &candidate, &started, &mut || {
            write(&deployed, b"rewritten in place, a longer model file");
        })
        .expect("deploy");
        assert!(matches!(swap, Swap::Superseded(_)), "{swap:?}");
        assert_eq!(read(&deployed), b"rewritten in place, a longer model file");
    }

    #[test]
    fn a_model_replaced_before_the_deploy_is_left_alone_and_prev_untouched() {
        let (_dir, deployed, candidate, started) = setup();
        write(&deployed, b"given to the service during training");
        let swap =
            swap_in(&deployed, &candidate, &started, &mut || panic!("nothing is written")).expect("deploy");
        assert_eq!(swap, Swap::Superseded(sha256_hex(b"given to the service during training")));
        assert_eq!(read(&deployed), b"given to the service during training");
        assert!(!previous_path(&deployed).exists());
    }
}
