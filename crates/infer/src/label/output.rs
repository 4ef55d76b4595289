//! The output dataset of `headroom label`: where each image's files go, whether a rerun can skip
//! it, what each image's detections become, and writing them so that a crash leaves nothing partial.
//!
//! Per image, in this order: the image link (or copy), `labels/<stem>.scores.bin` (holding the
//! SHA-256 of the label text to come), then the label file. An image is finished when its soft-score
//! file parses and names the SHA-256 of the label file beside it. A label file with no soft-score
//! file, or one whose bytes differ from the recorded hash (edited since), is a human's and is never
//! overwritten: the teacher's labels then go to `labels/<stem>.teacher.txt`.

use std::path::{Path, PathBuf};

use headroom_core::boxes::Xyxy;
use headroom_core::dataset::YoloLabel;
use headroom_core::dataset::labels::format_labels;
use headroom_core::fsio::{DurableBatch, write_atomic};
use headroom_core::letterbox::Letterbox;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::class_map::ClassMap;
use crate::decode::{SoftDecoded, SoftDetection};
use crate::soft_scores::{SoftRecord, SoftScores, read_soft_scores, write_soft_scores_in};
use crate::{Error, Result};

/// Where one source image's outputs go.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The source image.
    pub source: PathBuf,
    /// `DATASET/images/<relative path>`.
    pub image: PathBuf,
    /// `DATASET/labels/<stem>.txt`.
    pub label: PathBuf,
    /// `DATASET/labels/<stem>.teacher.txt`, used beside a human label.
    pub teacher_label: PathBuf,
    /// `DATASET/labels/<stem>.scores.bin`.
    pub scores: PathBuf,
}

/// An image that was not labelled, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkippedImage {
    /// The source image.
    pub path: PathBuf,
    /// Why.
    pub reason: String,
}

/// A human label file found where the teacher's would go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conflict {
    /// The source image.
    pub image: PathBuf,
    /// The human label file, left untouched.
    pub human_label: PathBuf,
    /// Where the teacher's labels went instead.
    pub teacher_label: PathBuf,
}

/// What to do with one job.
#[derive(Debug, Clone, PartialEq)]
pub enum JobState {
    /// Finished by an earlier run (with the conflict it had, if any).
    Done(Option<Conflict>),
    /// To label, writing the labels to `target`.
    Todo {
        /// The label file to write.
        target: PathBuf,
        /// `target` is the `.teacher.txt` beside a human label.
        conflict: Option<Conflict>,
    },
}

/// Lists the images under `images` (recursively, sorted, hidden entries skipped) and where their
/// outputs go under `dataset`. Images with the same stem in one folder (`gray.jpg`, `gray.png`) would
/// share a label file: each of them keeps its whole name in the dataset (`gray.jpg.jpg` labelled in
/// `gray.jpg.txt`, as Ultralytics finds a label: the name less its last extension), whichever came
/// first, so that no image takes over labels made for another. An image whose path under `images`
/// holds a line break is skipped: it would split its line of the dataset's lists (`train.txt`,
/// `val.txt`) in two.
pub fn plan_jobs(images: &Path, dataset: &Path) -> Result<(Vec<Job>, Vec<SkippedImage>)> {
    if !images.is_dir() {
        let reason = "is not a folder of images".to_string();
        return Err(Error::Output { path: images.to_path_buf(), reason });
    }
    // The output folder may lie inside the images (it holds links to them): never label it.
    let listed = headroom_core::dataset::layout::list_images_excluding(
        images,
        "--images",
        &[images.to_path_buf()],
        &[dataset.to_path_buf()],
    )?;
    let (mut jobs, mut skipped) = (Vec::with_capacity(listed.len()), Vec::new());
    let label_of = |relative: &Path| dataset.join("labels").join(relative).with_extension("txt");
    let mut sharing = std::collections::HashMap::<PathBuf, usize>::new();
    for source in &listed {
        *sharing.entry(label_of(source.strip_prefix(images).unwrap_or(source))).or_default() += 1;
    }
    let mut seen = std::collections::HashSet::new();
    for source in listed {
        let relative = source.strip_prefix(images).unwrap_or(&source).to_path_buf();
        if relative.as_os_str().as_encoded_bytes().iter().any(|b| matches!(b, b'\n' | b'\r')) {
            let reason = "its name holds a line break (newline or carriage return), which would split its \
                          line in the dataset's lists (train.txt, val.txt): rename it to label it"
                .to_string();
            skipped.push(SkippedImage { path: source, reason });
            continue;
        }
        let mut relative = relative;
        if sharing.get(&label_of(&relative)).is_some_and(|n| *n > 1)
            && let Some(extension) = relative.extension().map(std::ffi::OsStr::to_os_string)
        {
            let mut whole = relative.clone().into_os_string();
            whole.push(".");
            whole.push(&extension);
            relative = PathBuf::from(whole);
        }
        let label = label_of(&relative);
        if !seen.insert(label.clone()) {
            let reason = format!("another image has the same name and would share {}", label.display());
            skipped.push(SkippedImage { path: source, reason });
            continue;
        }
        jobs.push(Job {
            image: dataset.join("images").join(&relative),
            teacher_label: label.with_extension("teacher.txt"),
            scores: label.with_extension("scores.bin"),
            label,
            source,
        });
    }
    Ok((jobs, skipped))
}

/// Whether `job` is finished (and `force` is off), or else where its labels go.
pub fn job_state(job: &Job, force: bool) -> JobState {
    let conflict = || Conflict {
        image: job.source.clone(),
        human_label: job.label.clone(),
        teacher_label: job.teacher_label.clone(),
    };
    let ours = read_soft_scores(&job.scores).ok().and_then(|soft| {
        let target = if soft.beside_human { &job.teacher_label } else { &job.label };
        let bytes = std::fs::read(target).ok()?;
        (<[u8; 32]>::from(Sha256::digest(&bytes)) == soft.label_sha256).then_some(soft.beside_human)
    });
    match ours {
        Some(beside_human) if !force => JobState::Done(beside_human.then(conflict)),
        Some(false) => JobState::Todo { target: job.label.clone(), conflict: None },
        _ if job.label.exists() => {
            JobState::Todo { target: job.teacher_label.clone(), conflict: Some(conflict()) }
        }
        _ => JobState::Todo { target: job.label.clone(), conflict: None },
    }
}

/// Splits `jobs` into those the dataset keeps under a cap of `max` images and those beyond it: every
/// image with a human label is kept, and of the others the newest by modification time (ties by
/// path) up to `max` in all. Both keep the sorted order of `jobs`.
pub fn keep_newest(jobs: Vec<Job>, max: usize) -> Result<(Vec<Job>, Vec<Job>)> {
    if jobs.len() <= max {
        return Ok((jobs, Vec::new()));
    }
    let human = |job: &Job| match job_state(job, false) {
        JobState::Done(conflict) => conflict.is_some(),
        JobState::Todo { conflict, .. } => conflict.is_some(),
    };
    let mut order: Vec<(bool, std::time::SystemTime, usize)> = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.iter().enumerate() {
        let modified = std::fs::metadata(&job.source)
            .and_then(|m| m.modified())
            .map_err(|e| Error::Core(headroom_core::Error::io(&job.source, e)))?;
        order.push((human(job), modified, i));
    }
    // Human-labelled first, then newest first; a later path wins a tie.
    order.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
    let humans = order.iter().filter(|o| o.0).count();
    let mut keep = vec![false; jobs.len()];
    for (_, _, i) in order.iter().take(max.max(humans)) {
        keep[*i] = true;
    }
    let (mut kept, mut beyond) = (Vec::new(), Vec::new());
    for (job, keep) in jobs.into_iter().zip(keep) {
        if keep { kept.push(job) } else { beyond.push(job) }
    }
    Ok((kept, beyond))
}

/// Removes what `headroom label` wrote for these images (the image link or copy, the soft scores,
/// the teacher's label file); a human label is never touched. Returns how many had teacher labels.
pub fn remove_teacher_outputs(jobs: &[Job]) -> Result<usize> {
    let remove = |path: &Path| match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::Core(headroom_core::Error::io(path, e))),
    };
    let mut removed = 0;
    for job in jobs {
        let ours = match job_state(job, false) {
            JobState::Done(None) => Some(&job.label),
            JobState::Done(Some(_)) => Some(&job.teacher_label),
            // Unfinished: a `.teacher.txt` is ours; a label without our scores is a human's.
            JobState::Todo { .. } => Some(&job.teacher_label),
        };
        let mut had = false;
        if let Some(label) = ours {
            had |= remove(label)?;
        }
        remove(&job.scores)?;
        remove(&job.image)?;
        removed += usize::from(had);
    }
    Ok(removed)
}

/// Counts of boxes dropped while turning detections into labels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dropped {
    /// Teacher class not in the class map.
    pub unmapped: usize,
    /// Narrower or lower than `--min-box` pixels.
    pub small: usize,
}

/// Turns one image's decoded detections (input pixels) into label rows and soft-score records, in the
/// same order. `min_box` is in image pixels.
pub fn image_records(
    decoded: &SoftDecoded,
    geometry: &Letterbox,
    class_map: &ClassMap,
    min_box: f32,
) -> (Vec<YoloLabel>, SoftScores, Dropped) {
    let (width, height) = geometry.src;
    let mut dropped = Dropped::default();
    let record = |d: &SoftDetection, class: Option<usize>| -> (YoloLabel, SoftRecord) {
        let bbox: Xyxy = geometry.unmap(d.detection.bbox);
        let label = YoloLabel::from_pixels(class.unwrap_or(0), bbox, width, height);
        let soft = SoftRecord {
            class,
            teacher_class: d.detection.class,
            score: d.detection.score,
            bbox: [label.cx, label.cy, label.w, label.h],
            scores: class_map.project(&d.scores),
        };
        (label, soft)
    };
    let (mut labels, mut kept) = (Vec::new(), Vec::new());
    for d in &decoded.kept {
        let Some(class) = class_map.map(d.detection.class) else {
            dropped.unmapped += 1;
            continue;
        };
        let bbox = geometry.unmap(d.detection.bbox);
        if bbox.width() < min_box || bbox.height() < min_box {
            dropped.small += 1;
            continue;
        }
        let (label, soft) = record(d, Some(class));
        labels.push(label);
        kept.push(soft);
    }
    let top_k = decoded.top_k.iter().map(|d| record(d, class_map.map(d.detection.class)).1).collect();
    let nc = if decoded.kept.iter().chain(&decoded.top_k).any(|d| d.scores.is_empty()) {
        0
    } else {
        class_map.names.len()
    };
    let mut soft = SoftScores { beside_human: false, nc, label_sha256: [0; 32], kept, top_k };
    if nc == 0 {
        soft.kept.iter_mut().chain(soft.top_k.iter_mut()).for_each(|r| r.scores.clear());
    }
    (labels, soft, dropped)
}

/// How an image is put into `DATASET/images`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// A symbolic link to the image under `--images` (no space taken; follows the file).
    #[default]
    Symlink,
    /// A hard link (the same bytes, kept when the camera deletes or renames its file, and when the
    /// folder moves), or a copy where the two are on different file systems.
    Hardlink,
    /// A copy.
    Copy,
}

/// Writes one finished image: image link or copy, then soft-score file and label file into `batch`
/// (they appear, in that order, when it commits).
pub fn write_image(
    batch: &mut DurableBatch,
    job: &Job,
    target: &Path,
    labels: &[YoloLabel],
    mut soft: SoftScores,
    placement: Placement,
) -> Result<()> {
    place_image(job, placement)?;
    let text = format_labels(labels);
    soft.label_sha256 = Sha256::digest(text.as_bytes()).into();
    soft.beside_human = target == job.teacher_label;
    write_soft_scores_in(batch, &job.scores, &soft)?;
    batch.write(target, text.as_bytes())?;
    Ok(())
}

/// Makes the image entry of a finished job resolve again when it does not: a link left dangling by
/// an images folder that moved or was remounted at another path, or an entry removed (a cleaner
/// emptied `DATASET/images`). The entry is made anew from `job.source`, the same file under
/// `--images` (a caller that tracks contents, as the field loop does, has relabelled those whose
/// contents changed). Returns whether it did.
pub fn restore_image(job: &Job, placement: Placement) -> Result<bool> {
    if job.image.exists() || !job.source.is_file() {
        return Ok(false);
    }
    if job.image.symlink_metadata().is_ok() {
        std::fs::remove_file(&job.image).map_err(|e| Error::Core(headroom_core::Error::io(&job.image, e)))?;
    }
    place_image(job, placement)?;
    Ok(true)
}

/// Puts the image into `DATASET/images`: nothing to do when the same file is already there (labelling
/// in place), an error when another file is.
fn place_image(job: &Job, placement: Placement) -> Result<()> {
    if job.image.symlink_metadata().is_ok() {
        let same = match (job.image.canonicalize(), job.source.canonicalize()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        };
        let read = |path: &Path| headroom_core::fsio::read_regular(path).ok();
        if same || placement != Placement::Symlink && read(&job.image) == read(&job.source) {
            return Ok(());
        }
        let reason = format!(
            "already exists and is not {}; move it away or label into a new --out",
            job.source.display()
        );
        return Err(Error::Output { path: job.image.clone(), reason });
    }
    let copy = |job: &Job| -> Result<()> {
        let bytes = headroom_core::fsio::read_regular(&job.source)?;
        Ok(write_atomic(&job.image, &bytes)?)
    };
    match placement {
        Placement::Copy => copy(job),
        _ if cfg!(not(unix)) => copy(job),
        Placement::Hardlink => match hard_link_atomic(&job.source, &job.image) {
            Ok(()) => Ok(()),
            // Another file system (a USB drive, a network mount), or links refused: a copy.
            Err(_) => copy(job),
        },
        Placement::Symlink => link_atomic(&job.source, &job.image),
    }
}

/// A hard link to `source` (its real file, links resolved) at `link`, through a temporary and a
/// rename.
fn hard_link_atomic(source: &Path, link: &Path) -> Result<()> {
    let io = |path: &Path, e| Error::Core(headroom_core::Error::io(path, e));
    let target = source.canonicalize().map_err(|e| io(source, e))?;
    let parent = link.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let tmp = headroom_core::fsio::temporary_path(link);
    let _ = std::fs::remove_file(&tmp);
    std::fs::hard_link(&target, &tmp).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, link).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(link, e)
    })
}

#[cfg(unix)]
fn link_atomic(source: &Path, link: &Path) -> Result<()> {
    let io = |path: &Path, e| Error::Core(headroom_core::Error::io(path, e));
    let target = source.canonicalize().map_err(|e| io(source, e))?;
    let parent = link.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let name = link.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(&target, &tmp).map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, link).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(link, e)
    })
}

#[cfg(not(unix))]
fn link_atomic(source: &Path, link: &Path) -> Result<()> {
    let bytes = std::fs::read(source).map_err(|e| Error::Core(headroom_core::Error::io(source, e)))?;
    Ok(write_atomic(link, &bytes)?)
}

/// Removes the temporary files (`.<name>.<pid>.tmp`) a killed run left under `folder`.
pub fn remove_stale_temporaries(folder: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(folder) else { return 0 };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            removed += remove_stale_temporaries(&path);
        } else if is_temporary_name(&name) && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

fn is_temporary_name(name: &str) -> bool {
    let Some(stem) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else { return false };
    stem.rsplit_once('.').is_some_and(|(_, pid)| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
