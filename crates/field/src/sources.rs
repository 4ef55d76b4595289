//! Each image is labelled once per content: `<work>/labelled/field-sources.json` records the
//! SHA-256 of every image labelled, and an image whose bytes changed since (a camera that reuses
//! file names) has its teacher labels removed so that `headroom label` labels it again. Human
//! labels are never touched.

use std::collections::BTreeMap;
use std::path::Path;

use crate::Context as _;
use headroom_core::hash::sha256_hex;
use headroom_infer::label::output::{JobState, job_state, plan_jobs};

const INDEX: &str = "field-sources.json";

/// Beside the index: each indexed image's size and modification time when it was hashed, so that
/// a later look can tell, without reading every image, which ones may have changed.
const STATS: &str = "field-sources-stat.json";

/// Size and modification time (ns since the epoch) of a file, following links.
fn stat(path: &Path) -> Option<(u64, i128)> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec())))
}

/// The index as the last sync left it: each image's SHA-256 and its size and time when it was
/// hashed. An image whose size and time are still those is not read again (the quiet-night look
/// and the label step's sync would otherwise hash every image twice a night).
#[derive(Debug, Default)]
pub struct Known {
    index: BTreeMap<String, String>,
    stats: BTreeMap<String, (u64, i128)>,
}

impl Known {
    /// The index of the labelled set in `labelled` (empty when it is missing or does not read).
    pub fn read(labelled: &Path) -> Known {
        let read = |name: &str| std::fs::read_to_string(labelled.join(name)).ok();
        Known {
            index: read(INDEX).and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
            stats: read(STATS).and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default(),
        }
    }

    /// The SHA-256 of `source`, indexed under `key`: the recorded one when the file's size and time
    /// are unchanged since it was hashed, else read and hashed now (`None`: it does not read).
    pub fn sha256(&self, key: &str, source: &Path) -> Option<String> {
        if let (Some(seen), Some(sha)) = (self.stats.get(key), self.index.get(key))
            && stat(source) == Some(*seen)
        {
            return Some(sha.clone());
        }
        headroom_core::fsio::read_regular(source).ok().map(|bytes| sha256_hex(&bytes))
    }
}

/// Brings the labelled dataset in line with the images' contents. Returns whether every image must
/// be relabelled because the teacher changed (the labelled set was made by another teacher file).
pub fn sync(images: &Path, labelled: &Path, teacher: &Path) -> crate::Result<bool> {
    let manifest = headroom_infer::label::LabelManifest::read(labelled).or_else(|e| {
        set_aside_damaged(&labelled.join(headroom_infer::label::manifest::MANIFEST_FILE), &e)?;
        Ok::<_, crate::Error>(None)
    })?;
    let teacher_changed = match manifest {
        Some(manifest) => {
            let bytes = std::fs::read(teacher).with_context(|| format!("reading {}", teacher.display()))?;
            let changed = manifest.teacher.sha256 != sha256_hex(&bytes);
            if changed {
                tracing::warn!(
                    "the teacher differs from the one that labelled {} (sha256 {}): relabelling every image",
                    labelled.display(),
                    manifest.teacher.sha256
                );
            }
            changed
        }
        None => false,
    };
    let index_path = labelled.join(INDEX);
    let recorded: BTreeMap<String, String> = match std::fs::read_to_string(&index_path) {
        Ok(text) => match serde_json::from_str(&text) {
            Ok(index) => index,
            Err(e) => {
                // Without it, a changed image keeps its old labels until relabelled: less harm than
                // a loop that stops every night.
                set_aside_damaged(&index_path, &e)?;
                BTreeMap::new()
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", index_path.display())),
    };
    let (jobs, _skipped) = plan_jobs(images, labelled)?;
    let known = Known { index: recorded.clone(), stats: Known::read(labelled).stats };
    let mut now = BTreeMap::new();
    let mut stats: BTreeMap<String, (u64, i128)> = BTreeMap::new();
    let mut invalidated = 0usize;
    for job in &jobs {
        let key = job.source.strip_prefix(images).unwrap_or(&job.source).display().to_string();
        // An image that cannot be read (removed since the listing, unreadable) keeps what the index
        // held: label skips it with the warning that names it, and a later run compares it again.
        let Some(sha) = known.sha256(&key, &job.source) else {
            tracing::debug!("not indexed: {} does not read", job.source.display());
            if let Some(was) = recorded.get(&key) {
                now.insert(key, was.clone());
            }
            continue;
        };
        if let Some(seen) = stat(&job.source) {
            stats.insert(key.clone(), seen);
        }
        if recorded.get(&key).is_some_and(|was| *was != sha) {
            let ours = match job_state(job, false) {
                JobState::Done(None) => Some(&job.label),
                JobState::Done(Some(_)) => Some(&job.teacher_label),
                JobState::Todo { .. } => None,
            };
            if let Some(label) = ours {
                for file in [label, &job.scores] {
                    match std::fs::remove_file(file) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(e).with_context(|| format!("removing {}", file.display())),
                    }
                }
                invalidated += 1;
            }
        }
        now.insert(key, sha);
    }
    if invalidated > 0 {
        tracing::info!("{invalidated} images changed since they were labelled: labelling them again");
    }
    std::fs::create_dir_all(labelled).with_context(|| format!("creating {}", labelled.display()))?;
    let text = serde_json::to_string_pretty(&now)? + "\n";
    headroom_core::fsio::write_atomic(&index_path, text.as_bytes())?;
    let text = serde_json::to_string(&stats)? + "\n";
    headroom_core::fsio::write_atomic(&labelled.join(STATS), text.as_bytes())?;
    Ok(teacher_changed)
}

/// The labelled images whose bytes are no longer those that were labelled: a camera that reuses
/// its file names and rewrote one in place after the label step (a hard link shares the rewrite).
/// Only the images whose size or time moved since they were hashed are read again.
pub fn changed_since_labelled(labelled: &Path) -> crate::Result<Vec<String>> {
    let read = |name: &str| -> Option<String> { std::fs::read_to_string(labelled.join(name)).ok() };
    let (Some(index), Some(stats)) = (read(INDEX), read(STATS)) else { return Ok(Vec::new()) };
    let index: BTreeMap<String, String> = serde_json::from_str(&index).unwrap_or_default();
    let stats: BTreeMap<String, (u64, i128)> = serde_json::from_str(&stats).unwrap_or_default();
    let mut changed = Vec::new();
    for (key, seen) in &stats {
        let image = labelled.join("images").join(key);
        let Some(now) = stat(&image) else { continue };
        if now == *seen {
            continue;
        }
        let Some(sha) = index.get(key) else { continue };
        if headroom_core::fsio::read_regular(&image).is_ok_and(|bytes| sha256_hex(&bytes) != *sha) {
            changed.push(key.clone());
        }
    }
    Ok(changed)
}

/// The contents the labelled set in `labelled` indexed (their SHA-256), as the last sync left them.
pub fn indexed(labelled: &Path) -> crate::Result<std::collections::BTreeSet<String>> {
    let path = labelled.join(INDEX);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let index: BTreeMap<String, String> =
        serde_json::from_str(&text).with_context(|| format!("{}: not an index of images", path.display()))?;
    Ok(index.into_values().collect())
}

/// Moves a damaged state file aside (`<name>.damaged-<time>`), saying so: the run goes on without it.
fn set_aside_damaged(path: &Path, error: &dyn std::fmt::Display) -> crate::Result<()> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".damaged-{}", crate::state::utc_id()));
    let to = path.with_file_name(name);
    std::fs::rename(path, &to).with_context(|| format!("moving {} to {}", path.display(), to.display()))?;
    tracing::warn!(
        "{}: damaged ({error}); kept as {} and the run goes on without it",
        path.display(),
        to.display()
    );
    Ok(())
}
