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

use crate::faults::kill_point;
use crate::inputs::{DetectorFacts, detector};
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
fn copy_atomic(src: &Path, dst: &Path) -> crate::Result<()> {
    let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    let target = link_target(dst)?;
    let ownership = match Ownership::of(&target)? {
        Some(kept) => kept,
        None => Ownership::of(src)?.with_context(|| format!("{}: no such file", src.display()))?,
    };
    headroom_core::fsio::write_atomic_owned(&target, &bytes, ownership).with_context(|| {
        format!(
            "writing {} as owner {}, group {}, mode {:04o} (those of the file it replaces): run as root \
             or as that owner",
            target.display(),
            ownership.uid,
            ownership.gid,
            ownership.mode
        )
    })?;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all(); // the rename itself, durable
    }
    Ok(())
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

/// Makes `src` the deployed file, keeping the current one as `.prev`. Each step is a rename in the
/// deployed file's folder; rerunning after a kill at any point ends in the same state.
pub fn swap_in(deployed: &Path, src: &Path) -> crate::Result<()> {
    let incoming = sha256_file(src)?;
    let current = sha256_file(deployed)?;
    if current == incoming {
        return Ok(()); // already in place
    }
    let previous = previous_path(deployed);
    let kept = previous.is_file() && sha256_file(&previous)? == current;
    if !kept {
        copy_atomic(deployed, &previous).context("keeping the deployed model for rollback")?;
    }
    kill_point("deploy-swap");
    copy_atomic(src, deployed).context("replacing the deployed model")?;
    Ok(())
}

/// `headroom field rollback`: the previous model back in place, and the one rolled back from kept
/// as `.prev` (so a second rollback undoes the first). `.prev` must be a detector with the deployed
/// model's classes and input size; with no deployed file, `.prev` is put in its place (and kept).
pub fn rollback(deployed: &Path, scratch: &Path) -> crate::Result<String> {
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
    kill_point("rollback-swap");
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
