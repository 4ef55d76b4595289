//! Replacing the deployed model: only ever by rename(2) of a complete copy in the deployed file's
//! own folder (so the service reads the old model or the new one, never a part, and a deployed path
//! on another filesystem than the run folder costs a copy, not atomicity), with the previous model
//! kept beside it as `<file>.prev` for `headroom field rollback`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::kill_point;

/// SHA-256 of a file, as lowercase hex.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(headroom_infer::label::output::sha256_hex(&bytes))
}

/// `<deployed>.prev`.
pub fn previous_path(deployed: &Path) -> PathBuf {
    let mut name = deployed.file_name().unwrap_or_default().to_os_string();
    name.push(".prev");
    deployed.with_file_name(name)
}

/// Copies `src` over `dst` atomically (a synced temporary in `dst`'s folder, then a rename).
fn copy_atomic(src: &Path, dst: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    headroom_core::fsio::write_atomic(dst, &bytes).with_context(|| format!("writing {}", dst.display()))?;
    if let Some(dir) = dst.parent().filter(|d| !d.as_os_str().is_empty())
        && let Ok(dir) = std::fs::File::open(dir)
    {
        let _ = dir.sync_all(); // the rename itself, durable
    }
    Ok(())
}

/// Makes `src` the deployed file, keeping the current one as `.prev`. Each step is a rename in the
/// deployed file's folder; rerunning after a kill at any point ends in the same state.
pub fn swap_in(deployed: &Path, src: &Path) -> anyhow::Result<()> {
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
/// as `.prev` (so a second rollback undoes the first).
pub fn rollback(deployed: &Path, scratch: &Path) -> anyhow::Result<String> {
    let previous = previous_path(deployed);
    anyhow::ensure!(
        previous.is_file(),
        "no previous model to roll back to: {} does not exist (nothing was deployed by `headroom field run` here)",
        previous.display()
    );
    anyhow::ensure!(deployed.is_file(), "{}: no such file (the deployed model)", deployed.display());
    // The current model is saved whole before anything moves; its presence marks a rollback in
    // progress, which a rerun finishes (after a kill at any point) instead of starting another.
    let current = scratch.join("rollback-current.onnx");
    if !current.is_file() {
        copy_atomic(deployed, &current).context("saving the deployed model before the rollback")?;
    } else if sha256_file(&current)? == sha256_file(&previous)? {
        // Killed after the rollback completed, before the marker went.
        std::fs::remove_file(&current).with_context(|| format!("removing {}", current.display()))?;
        return sha256_file(deployed);
    } else {
        tracing::info!("finishing the rollback that was interrupted ({} exists)", current.display());
    }
    let before = sha256_file(&current)?;
    copy_atomic(&previous, deployed).context("putting the previous model back")?;
    kill_point("rollback-swap");
    copy_atomic(&current, &previous).context("keeping the rolled-back model")?;
    std::fs::remove_file(&current).with_context(|| format!("removing {}", current.display()))?;
    tracing::info!("rolled back {}: was sha256 {before}", deployed.display());
    sha256_file(deployed)
}
