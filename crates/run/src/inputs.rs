//! What a run reads besides the model: the dataset's train and val splits, the teacher's soft
//! scores beside pseudo-labels (`labels/<stem>.scores.bin`, written by `headroom label`), `remap`
//! of dataset classes onto the student's, and the replay set. Every check that can refuse a run
//! on its data happens here, before the run folder exists.

use std::collections::HashMap;
use std::path::Path;

use headroom_core::dataset::{DataConfig, ImageRecord, LoadOptions, Split, load_split};
use headroom_onnx::inspect::Inspection;
use headroom_train::data::SoftTargets;

use crate::spec::RunSpec;
use crate::{Error, Result};

/// The data of a run.
pub struct Inputs {
    /// The dataset.
    pub data: DataConfig,
    /// Training images with their labels (remapped).
    pub train: Vec<ImageRecord>,
    /// Validation images (what picks `best.onnx`).
    pub val: Vec<ImageRecord>,
    /// The teacher's soft scores of the training images.
    pub soft: SoftTargets,
    /// Old-domain images replayed each epoch.
    pub replay: Vec<ImageRecord>,
}

impl Inputs {
    /// Reads the data of `spec` for a student described by `model`.
    pub fn read(spec: &RunSpec, model: &Inspection) -> Result<Inputs> {
        let data = DataConfig::load(&spec.data)?;
        let mut train = load_split(&data, Split::Train, LoadOptions::default())?.images;
        let mut val = load_split(&data, Split::Val, LoadOptions::default())?.images;
        if train.is_empty() {
            return Err(Error::Input {
                path: spec.data.clone(),
                reason: "the train split has no usable image".into(),
            });
        }
        let (mut soft, objects) = load_soft_targets(&train, model.classes)?;
        let kd = spec.settings.kd;
        if kd > 0.0 && objects == 0 {
            return Err(Error::Input {
                path: spec.data.clone(),
                reason:
                    "--kd needs the teacher's soft scores (labels/<stem>.scores.bin, written by `headroom \
                         label`): the train split has none"
                        .into(),
            });
        }
        if kd > 0.0 {
            let total: usize = train.iter().map(|r| r.labels.len()).sum();
            tracing::info!("distillation: {objects} of {total} objects have the teacher's soft scores");
        }
        let student_names: Vec<String> =
            model.names.clone().unwrap_or_else(|| (0..model.classes).map(|i| i.to_string()).collect());
        match &spec.remap {
            Some(text) => {
                let remap = Remap::parse(text, &data.names, &student_names)?;
                remap.apply(&mut train, &mut soft, &data.names)?;
                remap.apply(&mut val, &mut SoftTargets::new(), &data.names)?;
            }
            None => check_classes(model.names.as_deref(), model.classes, &data.names, &spec.data)?,
        }
        let replay = match &spec.replay {
            Some(path) => {
                let old = DataConfig::load(path)?;
                if old.names.len() != model.classes {
                    return Err(Error::Input {
                        path: path.clone(),
                        reason: format!(
                            "the replay dataset has {} classes, the model {}",
                            old.names.len(),
                            model.classes
                        ),
                    });
                }
                // Replayed images teach the model's own classes: other names are another dataset.
                if let Some(names) = model.names.as_deref()
                    && names != old.names.as_slice()
                {
                    return Err(Error::Input {
                        path: path.clone(),
                        reason: format!(
                            "the replay dataset's classes ({}) are not the model's ({}): replay images of \
                             the scenes the model was trained on, labelled with its classes",
                            old.names.join(", "),
                            names.join(", ")
                        ),
                    });
                }
                load_split(&old, Split::Train, LoadOptions::default())?.images
            }
            None => Vec::new(),
        };
        warn_if_empty(&spec.data, &train, &val);
        Ok(Inputs { data, train, val, soft, replay })
    }

    /// The epoch's images: the new ones, plus `fraction` as many drawn from the replay set (without
    /// repetition while there are enough; seeded by the run's seed and the epoch, so a resumed run
    /// draws the same).
    pub fn epoch_images(&self, fraction: f64, seed: u64, epoch: usize) -> Vec<ImageRecord> {
        let mut images = self.train.clone();
        if self.replay.is_empty() {
            return images;
        }
        let wanted = (self.train.len() as f64 * fraction).round() as usize;
        // A seeded stride walk through the replay set: every image once before any repeats.
        let start = (seed as usize).wrapping_mul(31).wrapping_add(epoch.wrapping_mul(wanted.max(1)));
        images.extend((0..wanted).map(|i| self.replay[(start + i) % self.replay.len()].clone()));
        images
    }
}

/// Training on labels with no object teaches the model to see nothing, and a val split with no
/// object measures nothing (every mAP 0, so `best.onnx` is the first epoch): both are warned.
fn warn_if_empty(data: &Path, train: &[ImageRecord], val: &[ImageRecord]) {
    let objects = |images: &[ImageRecord]| images.iter().map(|r| r.labels.len()).sum::<usize>();
    if objects(train) == 0 {
        tracing::warn!(
            "{}: the {} training images hold no object in their labels: training on them teaches the model \
             to find nothing (check the label files, or the teacher's --conf in `headroom label`)",
            data.display(),
            train.len()
        );
    }
    if !val.is_empty() && objects(val) == 0 {
        tracing::warn!(
            "{}: the {} val images hold no object: every mAP will be 0 and best.onnx the first epoch",
            data.display(),
            val.len()
        );
    }
}

/// The soft scores of every record whose soft-score file belongs to its label file; the number of
/// objects that have them. A label file edited since labelling (its SHA-256 differs) or a teacher
/// label kept beside a human one gets none (the human's labels win).
pub fn load_soft_targets(records: &[ImageRecord], nc: usize) -> Result<(SoftTargets, usize)> {
    use sha2::Digest as _;
    let mut soft = SoftTargets::new();
    let mut objects = 0;
    for record in records {
        let path = record.label.with_extension("scores.bin");
        if !path.exists() {
            continue;
        }
        let scores = headroom_infer::soft_scores::read_soft_scores(&path)?;
        if scores.beside_human || scores.nc == 0 {
            continue;
        }
        if scores.nc != nc {
            return Err(Error::Input {
                path,
                reason: format!(
                    "soft scores over {} classes, the student has {nc} (labelled for another model?)",
                    scores.nc
                ),
            });
        }
        let label_bytes = std::fs::read(&record.label).unwrap_or_default();
        if <[u8; 32]>::from(sha2::Sha256::digest(&label_bytes)) != scores.label_sha256 {
            tracing::warn!(
                "{}: edited since `headroom label` wrote it; its objects train without soft scores",
                record.label.display()
            );
            continue;
        }
        let per_label: Vec<Option<Vec<f32>>> = record
            .labels
            .iter()
            .map(|l| {
                let bbox = [l.cx, l.cy, l.w, l.h];
                scores
                    .kept
                    .iter()
                    .find(|k| {
                        k.class == Some(l.class) && k.bbox.iter().zip(bbox).all(|(a, b)| (a - b).abs() < 2e-6)
                    })
                    .map(|k| k.scores.clone())
            })
            .collect();
        objects += per_label.iter().flatten().count();
        soft.insert(record.image.clone(), per_label);
    }
    Ok((soft, objects))
}

/// `remap = "SRC=DST,..."`: dataset class (id or name) → student class (id or name) or `drop`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Remap(pub HashMap<usize, Option<usize>>);

fn remap_error(reason: String) -> Error {
    Error::Spec { key: "--remap".into(), reason }
}

impl Remap {
    /// Parses `text` against the dataset's and the student's class names.
    pub fn parse(text: &str, data_names: &[String], student_names: &[String]) -> Result<Remap> {
        let find = |token: &str, names: &[String], what: &str| -> Result<usize> {
            let token = token.trim();
            token
                .parse::<usize>()
                .ok()
                .filter(|&i| i < names.len())
                .or_else(|| names.iter().position(|n| n == token))
                .ok_or_else(|| remap_error(format!("`{token}` is not a {what} class ({})", names.join(", "))))
        };
        let mut map = HashMap::new();
        for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (src, dst) =
                pair.split_once('=').ok_or_else(|| remap_error(format!("`{pair}` is not SRC=DST")))?;
            let src = find(src, data_names, "dataset")?;
            let dst = if dst.trim() == "drop" { None } else { Some(find(dst, student_names, "student")?) };
            if map.insert(src, dst).is_some() {
                return Err(remap_error(format!("dataset class {src} is mapped twice")));
            }
        }
        Ok(Remap(map))
    }

    /// Maps the labels of `records` (and their soft scores' alignment), dropping `drop`ped objects.
    /// A class without a mapping is an error naming it and a file that has it.
    pub fn apply(
        &self,
        records: &mut [ImageRecord],
        soft: &mut SoftTargets,
        data_names: &[String],
    ) -> Result<()> {
        for record in records.iter_mut() {
            let mut kept_soft = Vec::new();
            let old_soft = soft.remove(&record.image);
            let mut labels = Vec::new();
            for (i, label) in record.labels.iter().enumerate() {
                let target = self.0.get(&label.class).ok_or_else(|| Error::Input {
                    path: record.label.clone(),
                    reason: format!(
                        "class {} ({}) has no --remap entry: add {}=STUDENT_CLASS or {}=drop",
                        label.class,
                        data_names.get(label.class).map_or("?", String::as_str),
                        label.class,
                        label.class
                    ),
                })?;
                if let Some(class) = target {
                    labels.push(headroom_core::dataset::YoloLabel { class: *class, ..*label });
                    kept_soft.push(old_soft.as_ref().and_then(|s| s.get(i).cloned().flatten()));
                }
            }
            record.labels = labels;
            if old_soft.is_some() {
                soft.insert(record.image.clone(), kept_soft);
            }
        }
        Ok(())
    }
}

/// The model's classes and the dataset's must agree in number (and in names when the model has
/// them), unless `remap` maps them.
pub fn check_classes(
    model_names: Option<&[String]>,
    nc: usize,
    data_names: &[String],
    data: &Path,
) -> Result<()> {
    if data_names.len() != nc {
        return Err(Error::Input {
            path: data.to_path_buf(),
            reason: format!(
                "the dataset has {} classes ({}), the model {nc}: map them with --remap SRC=DST,... (dataset class \
                 = student class or drop), or relabel with `headroom label --class-map`",
                data_names.len(),
                data_names.join(", ")
            ),
        });
    }
    if let Some(names) = model_names
        && names != data_names
    {
        tracing::warn!(
            "{}: class names ({}) differ from the model's ({}); training by class id (--remap maps them by name)",
            data.display(),
            data_names.join(", "),
            names.join(", ")
        );
    }
    Ok(())
}
