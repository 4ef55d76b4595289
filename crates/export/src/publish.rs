//! How an export writes its files: under a lock on its stem in the output folder, every
//! file into a temporary first, then all published together through a journal
//! (`headroom_core::fsio::FileSet`), so that a reader never finds the `.int8.onnx` of one model
//! beside the `.int8.calib` of another, even after a kill between two renames.
//!
//! The lock (`.<stem>.export.lock`) guards one stem's outputs, not the folder: two exports of
//! different models into one folder run side by side, and an export into a folder `headroom train`
//! is writing (its `best.onnx`, say) is not refused; two exports of one stem to one folder are.

use std::path::{Path, PathBuf};

use headroom_core::fsio::{self, FileSet, OutputLock, Recovery};

/// The journal of the export of `stem` into `dir`.
pub(crate) fn journal(dir: &Path, stem: &str) -> PathBuf {
    dir.join(format!(".{stem}.export.journal"))
}

/// Takes the lock on the outputs of `stem` in `dir` (which exists), or says who holds it.
pub(crate) fn lock(dir: &Path, stem: &str) -> crate::Result<OutputLock> {
    let scope = format!("the export of `{stem}` here");
    Ok(OutputLock::acquire_named(dir, &format!(".{stem}.export.lock"), &scope, "headroom export")?)
}

/// What an export that stopped left in `dir`: a publication half done is completed (or, a
/// temporary gone, removed), then the temporaries of `targets` (file names) and of the journal
/// that no live process writes are removed. Call it holding [`lock`].
pub(crate) fn clean_up(dir: &Path, stem: &str, targets: &[String]) -> crate::Result<()> {
    let journal = journal(dir, stem);
    match fsio::recover_file_set(&journal)? {
        Recovery::Nothing => {}
        Recovery::Completed { pid, renamed } => tracing::warn!(
            "{}: the export by pid {pid} stopped while publishing its files; finished it ({} more renamed: {})",
            journal.display(),
            renamed.len(),
            list(&renamed)
        ),
        Recovery::Abandoned { pid, removed } => tracing::warn!(
            "{}: the export by pid {pid} stopped while publishing and one of its files is gone; removed the rest of it ({})",
            journal.display(),
            list(&removed)
        ),
    }
    let journal_name = journal.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut names: Vec<&str> = targets.iter().map(String::as_str).collect();
    names.push(&journal_name);
    let removed = fsio::remove_stale_temporaries(dir, &names)?;
    if !removed.is_empty() {
        tracing::info!(
            "removed {} temporary file(s) a stopped export left: {}",
            removed.len(),
            list(&removed)
        );
    }
    Ok(())
}

/// Publishes `set` as a whole (see the module's comment), telling `observer` each rename.
pub(crate) fn publish(set: FileSet, observer: &dyn crate::observer::Observer) -> crate::Result<Vec<PathBuf>> {
    Ok(set.publish_observed(|renamed| observer.published(renamed))?)
}

fn list(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}
