//! What `headroom train` reads besides images: the teacher's soft scores beside pseudo-labels
//! (`labels/<stem>.scores.bin`, written by `headroom label`) and `--remap` of dataset classes onto
//! the student's.

use std::collections::HashMap;
use std::path::Path;

use headroom_core::dataset::ImageRecord;
use headroom_train::data::SoftTargets;

/// The soft scores of every record whose soft-score file belongs to its label file; the number of
/// objects that have them. A label file edited since labelling (its SHA-256 differs) or a teacher
/// label kept beside a human one gets none (the human's labels win).
pub fn load_soft_targets(records: &[ImageRecord], nc: usize) -> anyhow::Result<(SoftTargets, usize)> {
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
        anyhow::ensure!(
            scores.nc == nc,
            "{}: soft scores over {} classes, the student has {nc} (labelled for another model?)",
            path.display(),
            scores.nc
        );
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

/// `--remap SRC=DST,...`: dataset class (id or name) → student class (id or name) or `drop`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Remap(pub HashMap<usize, Option<usize>>);

impl Remap {
    /// Parses `text` against the dataset's and the student's class names.
    pub fn parse(text: &str, data_names: &[String], student_names: &[String]) -> anyhow::Result<Remap> {
        let find = |token: &str, names: &[String], what: &str| -> anyhow::Result<usize> {
            let token = token.trim();
            token
                .parse::<usize>()
                .ok()
                .filter(|&i| i < names.len())
                .or_else(|| names.iter().position(|n| n == token))
                .ok_or_else(|| {
                    anyhow::anyhow!("--remap: `{token}` is not a {what} class ({})", names.join(", "))
                })
        };
        let mut map = HashMap::new();
        for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (src, dst) =
                pair.split_once('=').ok_or_else(|| anyhow::anyhow!("--remap: `{pair}` is not SRC=DST"))?;
            let src = find(src, data_names, "dataset")?;
            let dst = if dst.trim() == "drop" { None } else { Some(find(dst, student_names, "student")?) };
            anyhow::ensure!(map.insert(src, dst).is_none(), "--remap: dataset class {src} is mapped twice");
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
    ) -> anyhow::Result<()> {
        for record in records.iter_mut() {
            let mut kept_soft = Vec::new();
            let old_soft = soft.remove(&record.image);
            let mut labels = Vec::new();
            for (i, label) in record.labels.iter().enumerate() {
                let target = self.0.get(&label.class).ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: class {} ({}) has no --remap entry: add {}=STUDENT_CLASS or {}=drop",
                        record.label.display(),
                        label.class,
                        data_names.get(label.class).map_or("?", String::as_str),
                        label.class,
                        label.class
                    )
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
/// them), unless `--remap` maps them.
pub fn check_classes(
    model_names: Option<&[String]>,
    nc: usize,
    data_names: &[String],
    data: &Path,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        data_names.len() == nc,
        "{}: the dataset has {} classes ({}), the model {nc}: map them with --remap SRC=DST,... \
         (dataset class = student class or drop), or relabel with `headroom label --class-map`",
        data.display(),
        data_names.len(),
        data_names.join(", ")
    );
    if let Some(names) = model_names
        && names != data_names
    {
        tracing::warn!(
            "{}: class names {:?} differ from the model's {:?}; training by class id (--remap maps them by name)",
            data.display(),
            data_names,
            names
        );
    }
    Ok(())
}
