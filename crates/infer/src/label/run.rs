//! One `headroom label` run: check the output, plan, run the pipeline, write the manifest.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::class_map::ClassMap;
use super::manifest::{LabelCounts, LabelManifest, LabelSettings, RunStatus, TeacherInfo};
use super::output::{self, Conflict, JobState, SkippedImage};
use super::pipeline::{Inferred, PipelineSettings, run_pipeline};
use super::split::{self, SplitSummary};
use super::teacher::TeacherModel;
use crate::decode::{DecodeOptions, OutputLayout, decode_soft};
use crate::{Error, Result};
use headroom_core::fsio::{DurableBatch, OutputLock};

/// What to label and how.
#[derive(Debug, Clone)]
pub struct LabelRequest {
    /// The folder of images (searched recursively).
    pub images: PathBuf,
    /// The dataset folder to write.
    pub out: PathBuf,
    /// Thresholds (`multi_label` should be off: one class per box).
    pub decode: DecodeOptions,
    /// Boxes narrower or lower than this many image pixels are dropped.
    pub min_box: f32,
    /// Pre-NMS candidates to store per image (0: none).
    pub top_k: usize,
    /// The class map's text and where it came from (`None`: identity).
    pub class_map: Option<(String, String)>,
    /// How images are put into `images/` (symbolic links by default).
    pub images_as: output::Placement,
    /// Datasets whose val images must never be labelled: an image under `images` with the same bytes
    /// as one of them is left out (and its earlier teacher labels removed). `headroom field run`
    /// gives its holdout and old scenes, so the gate's data stays out of training.
    pub exclude_like: Vec<PathBuf>,
    /// Keep at most this many images in the dataset: the newest by modification time, besides
    /// every image with a human label; the older ones leave it (their link and teacher labels are
    /// removed, never a human label).
    pub max_images: Option<usize>,
    /// Relabel finished images too, and accept another teacher, other settings or another split.
    pub force: bool,
    /// Fraction of the images held out for validation (0 ≤ F < 1); `None`: the dataset's recorded
    /// split, else [`split::DEFAULT_VAL_FRACTION`] from [`split::MIN_IMAGES_FOR_DEFAULT_SPLIT`]
    /// images on, else 0.
    pub val_fraction: Option<f64>,
    /// Seed of the split's hash; `None`: the dataset's recorded seed, else 0.
    pub seed: Option<u64>,
    /// Threads, batch and queues.
    pub pipeline: PipelineSettings,
    /// Set (by a signal handler) to stop early: the images in flight are written, the manifest is
    /// marked interrupted and [`label_folder`] returns [`Error::Interrupted`]; a rerun resumes.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Labels `request.images` into `request.out` with `detectors` (sessions of the same teacher, one per
/// inference stream, in ONNX Runtime or libtorch); `progress(done, to_do)` after each image.
pub fn label_folder<T: TeacherModel>(
    detectors: &mut [T],
    request: &LabelRequest,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<LabelManifest> {
    let started = Instant::now();
    let streams = detectors.len();
    let detector =
        detectors.first().ok_or_else(|| Error::Mismatch { message: "no teacher session".into() })?;
    let teacher = teacher_info(detector)?;
    let class_map = match &request.class_map {
        Some((source, text)) => ClassMap::parse(text, source, &teacher.names)?,
        None => ClassMap::identity(&teacher.names),
    };
    let settings = LabelSettings {
        confidence: request.decode.confidence,
        iou: request.decode.iou,
        max_detections: request.decode.max_detections,
        agnostic_nms: request.decode.nms == headroom_core::boxes::NmsMode::ClassAgnostic,
        min_box: request.min_box,
        top_k: request.top_k,
        class_map,
    };
    let batch = detector.static_batch().unwrap_or(request.pipeline.batch.max(1));
    let mut manifest = LabelManifest {
        headroom_version: env!("CARGO_PKG_VERSION").to_string(),
        status: RunStatus::Running,
        teacher,
        settings,
        provider: detector.runs_on().1,
        runtime: detector.runs_on().0,
        half: detector.runs_on().2,
        images: request.images.clone(),
        copied_images: request.images_as == output::Placement::Copy,
        hardlinked_images: request.images_as == output::Placement::Hardlink,
        batch,
        workers: request.pipeline.workers.max(1),
        streams,
        counts: LabelCounts::default(),
        split: SplitSummary::default(),
        skipped: Vec::new(),
        conflicts: Vec::new(),
        wall_seconds: 0.0,
        pipeline_seconds: 0.0,
        images_per_second: 0.0,
    };
    // Everything that can refuse the request before anything is written: no output folder, no
    // data.yaml for a wrong --images.
    let (jobs, skipped) = output::plan_jobs(&request.images, &request.out)?;
    for image in &skipped {
        // Debug format: a name with a line break stays on one line, escaped.
        tracing::warn!("skipping {:?}: {}", image.path, image.reason);
    }
    let (jobs, excluded) = exclude_like(jobs, &request.exclude_like)?;
    let (jobs, beyond) = match request.max_images {
        Some(max) => output::keep_newest(jobs, max)?,
        None => (jobs, Vec::new()),
    };
    let keys: Vec<String> = jobs.iter().map(|job| split::key(job, &request.out)).collect();
    manifest.split = plan_split(request, &keys)?;
    std::fs::create_dir_all(&request.out)
        .map_err(|e| Error::Core(headroom_core::Error::io(&request.out, e)))?;
    let _lock = OutputLock::acquire(&request.out, "headroom label")?;
    prepare_output(&request.out, &manifest, request.force)?;
    if !beyond.is_empty() {
        let removed = output::remove_teacher_outputs(&beyond)?;
        tracing::info!(
            "--max-images {}: {} older images leave the dataset ({removed} of them had teacher labels, removed)",
            request.max_images.unwrap_or_default(),
            beyond.len()
        );
    }
    if !excluded.is_empty() {
        let removed = output::remove_teacher_outputs(&excluded)?;
        tracing::warn!(
            "{} images under --images {} have the bytes of val images of {} (a holdout or old scenes in \
             the folder of new images): not labelled, so never trained on{}",
            excluded.len(),
            request.images.display(),
            request.exclude_like.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
            if removed > 0 { format!(" ({removed} had teacher labels, removed)") } else { String::new() }
        );
    }
    manifest.counts.excluded = excluded.len();
    manifest.counts.beyond_max = beyond.len();
    manifest.counts.images = jobs.len() + skipped.len();
    let skipped_by_plan = skipped.len();
    manifest.counts.skipped = skipped.len();
    manifest.skipped = skipped;
    manifest.counts.boxes_per_class = vec![0; manifest.settings.class_map.names.len()];
    let (todo, targets) = plan_states(&jobs, request.force, &mut manifest);
    let mut finished: Vec<bool> = targets.iter().map(Option::is_none).collect();
    // A finished image whose entry no longer resolves (the folder moved, images/ was emptied) is
    // linked again: its labels stay, and training finds its pixels.
    let mut restored = 0usize;
    for (job, done) in jobs.iter().zip(&finished) {
        if *done && output::restore_image(job, request.images_as)? {
            restored += 1;
        }
    }
    if restored > 0 {
        tracing::warn!(
            "{restored} labelled images had no image in {} (the images folder moved, or images/ was \
             removed): linked again to --images {}",
            request.out.join("images").display(),
            request.images.display()
        );
    }
    write_split(&request.out, &keys, &finished, &mut manifest)?;
    manifest.write(&request.out)?;
    tracing::info!(
        images = manifest.counts.images,
        to_label = todo.len(),
        already_done = manifest.counts.already_done,
        provider = ?manifest.provider,
        batch,
        "labelling {} into {}",
        request.images.display(),
        request.out.display()
    );
    let total = todo.len();
    if total > 0 {
        for detector in detectors.iter_mut() {
            detector.warm_up(batch)?;
        }
    }
    let pipeline_started = Instant::now();
    let labelled = {
        // Label files become durable in batches (one filesystem flush per batch, not two fsyncs per
        // image); finished images are committed also when the run fails.
        let batch = DurableBatch::new(COMMIT_EVERY_FILES, COMMIT_EVERY);
        let mut writer = Writer {
            jobs: &jobs,
            targets: &targets,
            request,
            manifest: &mut manifest,
            done: 0,
            finished: &mut finished,
            batch,
        };
        let never = AtomicBool::new(false);
        let cancel = request.cancel.as_deref().unwrap_or(&never);
        let result = run_pipeline(detectors, &jobs, &todo, request.pipeline, cancel, |item| {
            writer.handle(item)?;
            progress(writer.done, total);
            Ok(())
        });
        let committed = writer.batch.commit().map_err(Error::from);
        (result.and(committed), writer.manifest.counts.labelled)
    };
    manifest.pipeline_seconds = pipeline_started.elapsed().as_secs_f64();
    manifest.wall_seconds = started.elapsed().as_secs_f64();
    manifest.images_per_second = labelled.1 as f64 / manifest.pipeline_seconds.max(1e-9);
    manifest.counts.conflicts = manifest.conflicts.len();
    manifest.counts.skipped = manifest.skipped.len();
    let split_written = write_split(&request.out, &keys, &finished, &mut manifest);
    if let Err(e) = labelled.0.and(split_written) {
        manifest.status = RunStatus::Failed;
        let _ = manifest.write(&request.out);
        return Err(e);
    }
    if request.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
        manifest.status = RunStatus::Interrupted;
        manifest.write(&request.out)?;
        return Err(Error::Interrupted { labelled: labelled.1, remaining: total - labelled.1 });
    }
    let failed_now = manifest.skipped.len() - skipped_by_plan;
    if total > 0 && labelled.1 == 0 && manifest.counts.already_done == 0 && failed_now > 0 {
        manifest.status = RunStatus::Failed;
        manifest.write(&request.out)?;
        let reason = format!(
            "none of the {total} images to label could be read ({} skipped; the first: {})",
            failed_now,
            manifest.skipped.last().map_or(String::new(), |s| format!("{}: {}", s.path.display(), s.reason))
        );
        return Err(Error::Output { path: request.images.clone(), reason });
    }
    manifest.status = RunStatus::Complete;
    let names = &manifest.settings.class_map.names;
    match super::preview::write_preview(&request.out, &jobs, &finished, names) {
        Ok(Some(path)) => tracing::debug!("wrote {}", path.display()),
        Ok(None) => tracing::debug!("no labelled image to preview"),
        Err(e) => tracing::warn!("{}: {e}", super::preview::PREVIEW_FILE),
    }
    for conflict in &manifest.conflicts {
        tracing::warn!(
            "{}: a human label exists; the teacher's labels are in {}",
            conflict.human_label.display(),
            conflict.teacher_label.display()
        );
    }
    manifest.write(&request.out)?;
    Ok(manifest)
}

/// Label and soft-score files per durable commit (two per image).
const COMMIT_EVERY_FILES: usize = 128;
/// Longest time between durable commits: at most this much work is redone after a power cut.
const COMMIT_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// Per job: the label file to write and the conflict that sends it there (`None`: finished).
type Targets = Vec<Option<(PathBuf, Option<Conflict>)>>;

/// The jobs to run and where their labels go; finished ones are counted in `manifest`.
/// Splits `jobs` into those to keep and those whose image has the bytes of a val image of one of
/// `datasets` (read by content: another name or folder does not hide it).
fn exclude_like(
    jobs: Vec<output::Job>,
    datasets: &[PathBuf],
) -> Result<(Vec<output::Job>, Vec<output::Job>)> {
    if datasets.is_empty() {
        return Ok((jobs, Vec::new()));
    }
    let sha = |path: &Path| {
        headroom_core::fsio::read_regular(path).ok().map(|b| headroom_core::hash::sha256_hex(&b))
    };
    let mut held = std::collections::HashSet::new();
    for data in datasets {
        let config = headroom_core::dataset::DataConfig::load(data)?;
        let Some(sources) = config.split_sources(headroom_core::dataset::Split::Val) else { continue };
        let images = headroom_core::dataset::layout::list_images(&config.file, "val", sources)?;
        held.extend(images.iter().filter_map(|image| sha(image)));
    }
    Ok(jobs.into_iter().partition(|job| !sha(&job.source).is_some_and(|s| held.contains(&s))))
}

fn plan_states(jobs: &[output::Job], force: bool, manifest: &mut LabelManifest) -> (Vec<usize>, Targets) {
    let mut todo = Vec::new();
    let mut targets = vec![None; jobs.len()];
    for (i, job) in jobs.iter().enumerate() {
        match output::job_state(job, force) {
            JobState::Done(conflict) => {
                manifest.counts.already_done += 1;
                let labels = if conflict.is_some() { &job.teacher_label } else { &job.label };
                count_finished_labels(labels, &mut manifest.counts);
                manifest.conflicts.extend(conflict);
            }
            JobState::Todo { target, conflict } => {
                todo.push(i);
                targets[i] = Some((target, conflict));
            }
        }
    }
    (todo, targets)
}

/// Adds the boxes of a label file finished by an earlier run to `counts`, so that a resumed run's
/// counts describe the whole dataset. The file was just checked against its recorded hash.
fn count_finished_labels(path: &Path, counts: &mut super::manifest::LabelCounts) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for class in text.lines().filter_map(|line| line.split_whitespace().next()?.parse::<usize>().ok()) {
        counts.boxes += 1;
        if let Some(n) = counts.boxes_per_class.get_mut(class) {
            *n += 1;
        }
    }
}

/// Turns inferred images into files and counts.
struct Writer<'a> {
    jobs: &'a [output::Job],
    targets: &'a [Option<(PathBuf, Option<Conflict>)>],
    request: &'a LabelRequest,
    manifest: &'a mut LabelManifest,
    done: usize,
    /// Per job: labelled, by this run or an earlier one.
    finished: &'a mut [bool],
    batch: DurableBatch,
}

impl Writer<'_> {
    fn handle(&mut self, item: Inferred) -> Result<()> {
        self.done += 1;
        let (job_index, geometry, layout, output, dims) = match item {
            Inferred::Failed { job, reason } => {
                tracing::warn!("skipping {}: {reason}", self.jobs[job].source.display());
                let path = self.jobs[job].source.clone();
                self.manifest.skipped.push(SkippedImage { path, reason });
                return Ok(());
            }
            Inferred::Ready { job, geometry, layout, output, dims } => (job, geometry, layout, output, dims),
        };
        let job = &self.jobs[job_index];
        let Some((target, conflict)) = &self.targets[job_index] else { return Ok(()) };
        let decoded = decode_soft(layout, &output, dims, &self.request.decode, self.request.top_k);
        let map = &self.manifest.settings.class_map;
        let (labels, soft, dropped) = output::image_records(&decoded, &geometry, map, self.request.min_box);
        match output::write_image(&mut self.batch, job, target, &labels, soft, self.request.images_as) {
            Ok(()) => {}
            Err(Error::Output { path, reason }) => {
                let reason = format!("{}: {reason}", path.display());
                tracing::warn!("skipping {}: {reason}", job.source.display());
                self.manifest.skipped.push(SkippedImage { path: job.source.clone(), reason });
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        let counts = &mut self.manifest.counts;
        counts.labelled += 1;
        self.finished[job_index] = true;
        counts.boxes += labels.len();
        counts.dropped_unmapped += dropped.unmapped;
        counts.dropped_small += dropped.small;
        for label in &labels {
            if let Some(n) = counts.boxes_per_class.get_mut(label.class) {
                *n += 1;
            }
        }
        self.manifest.conflicts.extend(conflict.clone());
        Ok(())
    }
}

/// The teacher's identity and classes.
fn teacher_info(detector: &impl TeacherModel) -> Result<TeacherInfo> {
    let path = detector.path().to_path_buf();
    let bytes = std::fs::read(&path).map_err(|e| Error::Core(headroom_core::Error::io(&path, e)))?;
    let layout = detector.declared_layout();
    let names = match (&detector.metadata().names, layout) {
        (Some(names), _) => names.clone(),
        (None, Some(OutputLayout::Anchors { nc } | OutputLayout::YoloV5 { nc })) => {
            (0..nc).map(|i| format!("class{i}")).collect()
        }
        (None, _) => {
            let message = format!(
                "{}: the teacher has neither `names` metadata nor a static output shape to count its classes; \
                 export it with Ultralytics (which writes `names`)",
                path.display()
            );
            return Err(Error::Mismatch { message });
        }
    };
    let (w, h) = detector.input_size();
    Ok(TeacherInfo {
        path,
        sha256: headroom_core::hash::sha256_hex(&bytes),
        input_size: [w, h],
        layout,
        names,
    })
}

/// Creates the dataset folder, refuses to mix in another teacher's labels, and clears temporaries a
/// killed run left.
fn prepare_output(out: &Path, manifest: &LabelManifest, force: bool) -> Result<()> {
    std::fs::create_dir_all(out).map_err(|e| Error::Core(headroom_core::Error::io(out, e)))?;
    if let Some(previous) = LabelManifest::read(out)?
        && let Some(why) = manifest.incompatibility(&previous)
        && !force
    {
        let reason = format!("{why}; label into a new --out, or pass --force to relabel every image");
        return Err(Error::Output { path: out.join(super::manifest::MANIFEST_FILE), reason });
    }
    let top_level = [
        "data.yaml",
        split::TRAIN_LIST,
        split::VAL_LIST,
        super::manifest::MANIFEST_FILE,
        super::preview::PREVIEW_FILE,
    ];
    let removed = output::remove_stale_temporaries(&out.join("labels"))
        + output::remove_stale_temporaries(&out.join("images"))
        + headroom_core::fsio::remove_stale_temporaries(out, &top_level)?.len();
    if removed > 0 {
        tracing::info!("removed {removed} temporary files left by an interrupted run");
    }
    Ok(())
}

/// The split of this run (fraction and seed resolved against the dataset's recorded one), checked
/// before anything is written; warns when nothing is held out.
fn plan_split(request: &LabelRequest, keys: &[String]) -> Result<SplitSummary> {
    let refuse = |path: PathBuf, reason: String| Error::Output { path, reason };
    let previous = LabelManifest::read(&request.out)?.map(|m| m.split);
    let (val_fraction, seed) =
        split::resolve(request.val_fraction, request.seed, previous.as_ref(), keys.len(), request.force)
            .map_err(|reason| refuse(request.out.join(super::manifest::MANIFEST_FILE), reason))?;
    split::check_train_not_empty(keys, seed, val_fraction)
        .map_err(|reason| refuse(request.images.clone(), reason))?;
    if val_fraction == 0.0 {
        let why = match request.val_fraction {
            Some(_) => "--val-fraction 0".to_string(),
            None => format!(
                "{} images, fewer than {} (pass --val-fraction to split anyway)",
                keys.len(),
                split::MIN_IMAGES_FOR_DEFAULT_SPLIT
            ),
        };
        tracing::warn!(
            "no held-out split ({why}): data.yaml's val is the training images, so `headroom train` picks \
             best.onnx on images it trained on"
        );
    }
    Ok(SplitSummary { val_fraction, seed, train: 0, val: 0 })
}

/// Writes the split of the finished images and the `data.yaml` naming it; counts them in `manifest`.
fn write_split(out: &Path, keys: &[String], finished: &[bool], manifest: &mut LabelManifest) -> Result<()> {
    let (fraction, seed) = (manifest.split.val_fraction, manifest.split.seed);
    let listed: Vec<(String, bool)> = keys
        .iter()
        .zip(finished)
        .filter(|(_, done)| **done)
        .map(|(key, _)| (key.clone(), split::is_val(key, seed, fraction)))
        .collect();
    let header = format!("# Written by `headroom label` (teacher {}).\n", manifest.teacher.path.display());
    split::write_split(out, &listed, &header, &manifest.settings.class_map.names, &mut manifest.split)
}
