//! The field loop's disk, bounded: `history/` keeps the newest `keep_runs` runs, each pruned to what
//! a person reads afterwards (its summary, report, gate, training settings and the trained `best.onnx`; the
//! newest also keeps its exports), and a run checks the free space before training.

use std::path::{Path, PathBuf};

use crate::{Context as _, ensure};

/// Files a pruned run keeps beside its small text files and plots: the trained model.
const KEPT_MODEL: &str = "train/best.onnx";

/// Small files that are kept (summaries, reports, settings, logs, plots).
const KEPT_EXTENSIONS: [&str; 9] = ["json", "md", "csv", "toml", "yaml", "txt", "log", "png", "jsonl"];

/// Removes all but the newest `keep` runs of `history` and prunes the kept ones (the newest keeps
/// its `export/` folder: the engines of the last candidate).
pub fn prune_history(history: &Path, keep: usize) -> crate::Result<()> {
    let mut runs: Vec<(u64, PathBuf)> =
        runs_in(history)?.into_iter().map(|run| (run_seq(&run), run)).collect();
    // Oldest first by the order the runs began in (`seq`), not by their ids: a clock that was once
    // ahead (`2099…`) must not make its run the newest forever. Runs from before runs were counted
    // (seq 0) come first, by id (UTC times).
    runs.sort();
    let runs: Vec<PathBuf> = runs.into_iter().map(|(_, run)| run).collect();
    let cut = runs.len().saturating_sub(keep);
    for old in &runs[..cut] {
        std::fs::remove_dir_all(old).with_context(|| format!("removing the old run {}", old.display()))?;
        tracing::info!("removed {} (history keeps {keep} runs)", old.display());
    }
    let kept = &runs[cut..];
    for (i, run) in kept.iter().enumerate() {
        prune_run(run, i + 1 == kept.len())?;
    }
    Ok(())
}

/// The `seq` of the run in `run` (0 when its `state.json` does not say, or does not read). Read as
/// plain JSON: the state's type lives in `state`, which prunes through this module.
fn run_seq(run: &Path) -> u64 {
    std::fs::read_to_string(run.join("state.json"))
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|state| state["seq"].as_u64())
        .unwrap_or(0)
}

/// The `seq` of every run in `history`.
pub fn history_seqs(history: &Path) -> Vec<u64> {
    runs_in(history).unwrap_or_default().iter().map(|run| run_seq(run)).collect()
}

/// The run folders in `history` (none when it does not exist).
fn runs_in(history: &Path) -> crate::Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(history) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", history.display())),
    };
    let mut runs = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", history.display()))?;
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            runs.push(entry.path());
        }
    }
    Ok(runs)
}

/// Prunes a finished or set-aside run to its small files and `train/best.onnx` (and `export/`
/// when `keep_export`): checkpoints, the base model's copy and feature caches go.
pub fn prune_run(run: &Path, keep_export: bool) -> crate::Result<()> {
    prune_dir(run, run, keep_export)
}

fn prune_dir(root: &Path, dir: &Path, keep_export: bool) -> crate::Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for entry in entries {
        let entry = entry.with_context(|| format!("reading {}", dir.display()))?;
        let path = entry.path();
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let kind = entry.file_type().with_context(|| format!("reading {}", path.display()))?;
        if kind.is_dir() {
            if keep_export && relative == Path::new("export") {
                continue;
            }
            if path.file_name().is_some_and(|n| n == "ckpt") {
                // Checkpoints resume a run; a finished or set-aside one is never resumed.
                std::fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
                continue;
            }
            prune_dir(root, &path, keep_export)?;
            // A folder left empty goes too.
            if std::fs::read_dir(&path).is_ok_and(|mut e| e.next().is_none()) {
                std::fs::remove_dir(&path).with_context(|| format!("removing {}", path.display()))?;
            }
            continue;
        }
        let small = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| KEPT_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        if relative != Path::new(KEPT_MODEL) && !small {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Bytes free to this process on the file system of `path`.
// `fsblkcnt_t` and `c_ulong` are u64 on 64-bit Linux, u32 on 32-bit targets.
#[allow(unsafe_code, clippy::useless_conversion)]
pub fn free_bytes(path: &Path) -> crate::Result<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| crate::Error::refused(format!("{}: a path with a NUL byte", path.display())))?;
    // SAFETY: statvfs writes into the zeroed struct we own; `c` is a valid NUL-terminated path.
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stat) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("reading the free space of {}", path.display()));
    }
    Ok(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

/// What a night's training and export write, from the model's size: checkpoints (`last.pt`: the
/// model, its EMA and the optimiser's two moments), `best.onnx` and `last.onnx`, the FP16 and INT8
/// exports and an engine, plus 64 MiB for plots, logs and caches. Measured on the demo models
/// (docs/BENCHMARKS.md "Field loop gate kills and nights": the state folder).
pub fn needed_bytes(model_bytes: u64) -> u64 {
    model_bytes.saturating_mul(10).saturating_add(64 << 20)
}

/// Refuses to train when the file system of `run` has less free than [`needed_bytes`].
pub fn check_free_space(run: &Path, model_bytes: u64) -> crate::Result<()> {
    let (free, needed) = (free_bytes(run)?, needed_bytes(model_bytes));
    ensure!(
        free >= needed,
        "{} has {} free and this night's training and export need about {}: free space there (or give \
         --work another disk, or lower --keep-runs)",
        run.display(),
        headroom_plan::format_size(free),
        headroom_plan::format_size(needed)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path, bytes: usize) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, vec![0u8; bytes]).expect("write");
    }

    #[test]
    fn history_keeps_the_newest_runs_pruned_to_their_summary_and_best_model() {
        let dir = tempfile::tempdir().expect("tempdir");
        let history = dir.path().join("history");
        for id in ["20261201T020000Z", "20261202T020000Z-failed", "20261203T020000Z"] {
            let run = history.join(id);
            touch(&run.join("summary.json"), 10);
            touch(&run.join("base.onnx"), 100);
            touch(&run.join("train/best.onnx"), 100);
            touch(&run.join("train/last.onnx"), 100);
            touch(&run.join("train/ckpt/last.pt"), 100);
            touch(&run.join("train/ckpt/started-with.json"), 10);
            touch(&run.join("train/metrics.csv"), 10);
            touch(&run.join("export/best.int8.onnx"), 100);
        }
        prune_history(&history, 2).expect("prune");
        let mut left: Vec<String> =
            runs_in(&history).expect("list").iter().map(|p| p.display().to_string()).collect();
        left.sort();
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(left[0].ends_with("20261202T020000Z-failed") && left[1].ends_with("20261203T020000Z"));
        for (run, export) in [("20261202T020000Z-failed", false), ("20261203T020000Z", true)] {
            let run = history.join(run);
            for kept in ["summary.json", "train/best.onnx", "train/metrics.csv"] {
                assert!(run.join(kept).is_file(), "{} kept", run.join(kept).display());
            }
            for gone in ["base.onnx", "train/last.onnx", "train/ckpt"] {
                assert!(!run.join(gone).exists(), "{} removed", run.join(gone).display());
            }
            assert_eq!(run.join("export/best.int8.onnx").is_file(), export, "{}", run.display());
        }
    }

    /// A clock that was once ahead named a run `2099…`: the history is pruned by the order the runs
    /// began in, so it goes first and the real runs stay (it deleted every real run before).
    #[test]
    fn history_is_pruned_by_the_order_runs_began_not_by_a_wrong_clocks_names() {
        let dir = tempfile::tempdir().expect("tempdir");
        let history = dir.path().join("history");
        for (id, seq) in [("20991231T230000Z", 1), ("20261205T020000Z", 2), ("20261206T020000Z", 3)] {
            let state = format!(
                r#"{{"id": "{id}", "base_sha256": "x", "done": [], "seq": {seq}, "settings": {{"images": "/i",
                "teacher": "/t.onnx", "holdout": "/h.yaml", "old": null, "preset": "p", "preset_toml": "",
                "device": "orin-nx-8", "reserve": "0", "overrides": []}}}}"#
            );
            std::fs::create_dir_all(history.join(id)).expect("mkdir");
            std::fs::write(history.join(id).join("state.json"), state).expect("state");
        }
        assert_eq!(history_seqs(&history).iter().max(), Some(&3));
        prune_history(&history, 2).expect("prune");
        let mut left: Vec<String> = runs_in(&history)
            .expect("list")
            .iter()
            .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["20261205T020000Z", "20261206T020000Z"]);
    }

    #[test]
    fn free_space_is_read_and_a_need_beyond_it_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let free = free_bytes(dir.path()).expect("statvfs");
        assert!(free > 0);
        check_free_space(dir.path(), 1).expect("a small model fits");
        let err = check_free_space(dir.path(), free).expect_err("ten times the free space").to_string();
        assert!(err.contains("free") && err.contains("need about"), "{err}");
    }
}
