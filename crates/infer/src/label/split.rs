//! The train/val split of a labelled dataset (docs/LABEL.md, "The split").
//!
//! An image is held out for validation when a hash of the seed and its path under `images/` falls
//! below the fraction: the same image lands in the same split for the same seed and fraction,
//! whatever else is in the folder, so a resumed or incremental run never moves an image between
//! the splits, and a larger fraction only moves training images into val. The splits are written as
//! list files beside `data.yaml` (`./images/<path>` per line, which Ultralytics and headroom both read
//! relative to the list), so the images stay where `label` puts them.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::output::Job;
use crate::{Error, Result};

/// The held-out fraction when `--val-fraction` is not given and the folder has at least
/// [`MIN_IMAGES_FOR_DEFAULT_SPLIT`] images.
pub const DEFAULT_VAL_FRACTION: f64 = 0.2;
/// Below this many images the default fraction is 0 (no held-out split).
pub const MIN_IMAGES_FOR_DEFAULT_SPLIT: usize = 10;
/// The training list, beside `data.yaml`.
pub const TRAIN_LIST: &str = "train.txt";
/// The validation list, beside `data.yaml`.
pub const VAL_LIST: &str = "val.txt";

/// The split a run used, as recorded in the manifest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitSummary {
    /// Fraction of the images held out for validation (0: none; val is then the training images).
    pub val_fraction: f64,
    /// Seed of the hash that assigns images to splits.
    pub seed: u64,
    /// Labelled images in the training split.
    pub train: usize,
    /// Labelled images held out for validation (0 when none is).
    pub val: usize,
}

/// Checks a requested fraction: finite, 0 ≤ `fraction` < 1.
pub fn check_fraction(fraction: f64) -> std::result::Result<(), String> {
    if fraction.is_finite() && (0.0..1.0).contains(&fraction) {
        Ok(())
    } else {
        Err(format!("{fraction} is outside 0 ≤ F < 1 (0: no held-out split; 0.2: a fifth of the images)"))
    }
}

/// The fraction and seed of this run: the ones given, else those the dataset was split with
/// (`previous`), else the default ([`DEFAULT_VAL_FRACTION`] for `images` ≥
/// [`MIN_IMAGES_FOR_DEFAULT_SPLIT`], else 0) and seed 0. A dataset that has a held-out split keeps it:
/// another fraction or seed would move held-out images into training, which is refused unless
/// `force`.
pub fn resolve(
    fraction: Option<f64>,
    seed: Option<u64>,
    previous: Option<&SplitSummary>,
    images: usize,
    force: bool,
) -> std::result::Result<(f64, u64), String> {
    let seed = seed.or(previous.map(|p| p.seed)).unwrap_or(0);
    let held_out_before = previous.filter(|p| p.val_fraction > 0.0);
    let fraction = match (fraction, held_out_before) {
        (Some(f), _) => f,
        (None, Some(p)) => p.val_fraction,
        (None, None) if images >= MIN_IMAGES_FOR_DEFAULT_SPLIT => DEFAULT_VAL_FRACTION,
        (None, None) => 0.0,
    };
    check_fraction(fraction).map_err(|e| format!("--val-fraction {e}"))?;
    if let Some(p) = held_out_before
        && (p.val_fraction != fraction || p.seed != seed)
        && !force
    {
        return Err(format!(
            "was split with --val-fraction {} --seed {} (now {fraction}, seed {seed}); another split would \
             move held-out images into training: rerun with those values, label into a new --out, or pass \
             --force",
            p.val_fraction, p.seed
        ));
    }
    Ok((fraction, seed))
}

/// Whether the image at `key` (its path under `images/`, `/`-separated) is held out for validation:
/// the first 53 bits of SHA-256(`seed` little-endian ‖ `key`), as a number in [0, 1), are below
/// `fraction`.
pub fn is_val(key: &str, seed: u64, fraction: f64) -> bool {
    let mut hash = Sha256::new();
    hash.update(seed.to_le_bytes());
    hash.update(key.as_bytes());
    let digest = hash.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    let unit = (u64::from_be_bytes(first) >> 11) as f64 / (1u64 << 53) as f64;
    unit < fraction
}

/// The split key of a job: its image's path under `dataset/images`, `/`-separated.
pub fn key(job: &Job, dataset: &Path) -> String {
    let images = dataset.join("images");
    let relative = job.image.strip_prefix(&images).unwrap_or(&job.image);
    let parts: Vec<String> = relative
        .components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(part.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    parts.join("/")
}

/// Writes the split of the finished images (`(key, held out)`, in list order) and the `data.yaml`
/// that names it; returns the counts. With no image held out, `data.yaml` names `images` for both
/// splits (validation on the training images) and no list is written. `data.yaml` is replaced only
/// while it is one `label` writes (comments aside); an edited one is left as it is, with a warning.
pub fn write_split(
    dataset: &Path,
    finished: &[(String, bool)],
    header: &str,
    names: &[String],
    summary: &mut SplitSummary,
) -> Result<()> {
    summary.val = finished.iter().filter(|(_, val)| *val).count();
    summary.train = finished.len() - summary.val;
    let names_text = serde_json::to_string(names).unwrap_or_default();
    let yaml_for = |train: &str, val: &str| {
        format!("{header}train: {train}\nval: {val}\nnc: {}\nnames: {names_text}\n", names.len())
    };
    let (unsplit, split) = (yaml_for("images", "images"), yaml_for(TRAIN_LIST, VAL_LIST));
    let wanted = if summary.val > 0 {
        for (list, want_val) in [(TRAIN_LIST, false), (VAL_LIST, true)] {
            let lines: String = finished
                .iter()
                .filter(|(_, val)| *val == want_val)
                .map(|(key, _)| format!("./images/{key}\n"))
                .collect();
            headroom_core::fsio::write_atomic(&dataset.join(list), lines.as_bytes())?;
        }
        &split
    } else {
        // Lists a --force run with another split left behind would only mislead.
        for list in [TRAIN_LIST, VAL_LIST] {
            match std::fs::remove_file(dataset.join(list)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::Core(headroom_core::Error::io(dataset.join(list), e)));
                }
                _ => {}
            }
        }
        &unsplit
    };
    let yaml = dataset.join("data.yaml");
    let existing = match std::fs::read_to_string(&yaml) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(Error::Core(headroom_core::Error::io(&yaml, e))),
    };
    match existing {
        Some(text) if &text == wanted => {}
        Some(text) if ![&unsplit, &split].iter().any(|ours| same_keys(&text, ours)) => {
            tracing::warn!(
                "{} was edited and is left as it is; check that its names are {names_text}{}",
                yaml.display(),
                if summary.val > 0 {
                    format!(" and that it names the split: `train: {TRAIN_LIST}`, `val: {VAL_LIST}`")
                } else {
                    String::new()
                }
            );
        }
        _ => headroom_core::fsio::write_atomic(&yaml, wanted.as_bytes())?,
    }
    Ok(())
}

/// Whether two data.yaml texts have the same lines, comment lines aside.
fn same_keys(a: &str, b: &str) -> bool {
    data_lines(a).eq(data_lines(b))
}

/// The lines of a data.yaml text that are not comments.
fn data_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|line| !line.trim_start().starts_with('#'))
}

/// Checks, before anything is written, that the split leaves images to train on.
pub fn check_train_not_empty(keys: &[String], seed: u64, fraction: f64) -> std::result::Result<(), String> {
    if fraction > 0.0 && !keys.is_empty() && keys.iter().all(|k| is_val(k, seed, fraction)) {
        return Err(format!(
            "--val-fraction {fraction} (seed {seed}) holds out all {} images and leaves none to train on; \
             lower it or label more images",
            keys.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("img_{i:05}.png")).collect()
    }

    #[test]
    fn the_split_depends_only_on_key_seed_and_fraction() {
        let all = keys(2000);
        let val: Vec<bool> = all.iter().map(|k| is_val(k, 0, 0.2)).collect();
        let held_out = val.iter().filter(|v| **v).count();
        assert!((340..460).contains(&held_out), "about a fifth held out: {held_out}");
        // A larger fraction only moves training images into val.
        assert!(all.iter().filter(|k| is_val(k, 0, 0.2)).all(|k| is_val(k, 0, 0.3)));
        // Another seed is another split.
        assert_ne!(val, all.iter().map(|k| is_val(k, 1, 0.2)).collect::<Vec<_>>());
        assert!(!all.iter().any(|k| is_val(k, 0, 0.0)));
    }

    #[test]
    fn fractions_outside_zero_to_one_are_refused() {
        for bad in [-0.1, 1.0, 1.5, f64::NAN, f64::INFINITY] {
            assert!(check_fraction(bad).is_err(), "{bad}");
        }
        for good in [0.0, 0.2, 0.999] {
            assert!(check_fraction(good).is_ok(), "{good}");
        }
    }

    #[test]
    fn resolve_defaults_by_count_and_keeps_a_recorded_split() {
        assert_eq!(resolve(None, None, None, 9, false), Ok((0.0, 0)));
        assert_eq!(resolve(None, None, None, 10, false), Ok((DEFAULT_VAL_FRACTION, 0)));
        assert_eq!(resolve(Some(0.3), Some(4), None, 3, false), Ok((0.3, 4)));
        let previous = SplitSummary { val_fraction: 0.3, seed: 4, train: 7, val: 3 };
        assert_eq!(resolve(None, None, Some(&previous), 100, false), Ok((0.3, 4)));
        let moved = resolve(Some(0.2), None, Some(&previous), 100, false).expect_err("refused");
        assert!(moved.contains("--force"), "{moved}");
        assert!(resolve(None, Some(5), Some(&previous), 100, false).is_err());
        assert_eq!(resolve(Some(0.2), None, Some(&previous), 100, true), Ok((0.2, 4)));
        // A dataset with no held-out split may get one: images move from train to val only.
        let unsplit = SplitSummary { val_fraction: 0.0, seed: 0, train: 8, val: 0 };
        assert_eq!(resolve(None, None, Some(&unsplit), 12, false), Ok((DEFAULT_VAL_FRACTION, 0)));
    }

    #[test]
    fn a_split_that_holds_out_everything_is_refused() {
        let few = keys(2);
        let fraction = 0.999;
        assert!(check_train_not_empty(&few, 0, fraction).is_err());
        assert!(check_train_not_empty(&few, 0, 0.0).is_ok());
        assert!(check_train_not_empty(&keys(100), 0, 0.2).is_ok());
    }

    #[test]
    fn data_yaml_is_written_replaced_while_ours_and_kept_once_edited() {
        let dir = tempfile::tempdir().expect("tempdir");
        let names = ["a".to_string()];
        let mut summary = SplitSummary { val_fraction: 0.5, seed: 0, ..Default::default() };
        let header = "# Written by a test.\n";
        write_split(dir.path(), &[("x.png".into(), false)], header, &names, &mut summary).expect("write");
        let yaml = std::fs::read_to_string(dir.path().join("data.yaml")).expect("yaml");
        assert!(yaml.contains("train: images\nval: images\n"), "{yaml}");
        assert!(!dir.path().join(TRAIN_LIST).exists());
        let finished = [("x.png".into(), false), ("sub/y.png".into(), true)];
        write_split(dir.path(), &finished, "# Another comment.\n", &names, &mut summary).expect("write");
        assert_eq!((summary.train, summary.val), (1, 1));
        let yaml = std::fs::read_to_string(dir.path().join("data.yaml")).expect("yaml");
        assert!(yaml.contains("train: train.txt\nval: val.txt\n"), "{yaml}");
        let val = std::fs::read_to_string(dir.path().join(VAL_LIST)).expect("val list");
        assert_eq!(val, "./images/sub/y.png\n");
        write_split(dir.path(), &finished[..1], header, &names, &mut summary).expect("write");
        assert!(!dir.path().join(TRAIN_LIST).exists() && !dir.path().join(VAL_LIST).exists());
        let yaml = std::fs::read_to_string(dir.path().join("data.yaml")).expect("yaml");
        assert!(yaml.contains("train: images\nval: images\n"), "{yaml}");
        let edited = "train: images\nval: ../elsewhere\nnames: [a]\n";
        std::fs::write(dir.path().join("data.yaml"), edited).expect("edit");
        write_split(dir.path(), &finished, header, &names, &mut summary).expect("write");
        assert_eq!(std::fs::read_to_string(dir.path().join("data.yaml")).expect("yaml"), edited);
    }
}
