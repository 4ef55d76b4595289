//! COCO JSON: instances files in, ground truth and detection results out.
//!
//! Reading ([`read_coco`]) turns a COCO instances file into the records [`super::load_split`] gives:
//! categories, whatever their ids, become classes `0..nc` in id order; `bbox` `[x, y, w, h]` in pixels
//! becomes a normalised [`YoloLabel`]. Like Ultralytics' `convert_coco`, crowd annotations and boxes
//! without area are skipped (and counted); boxes reaching outside the image are clipped to it (and
//! counted), since Ultralytics would otherwise reject the whole image for coordinates past 1.01.
//! Extra keys (`info`, `segmentation`, `licenses`, …) are ignored; the keys used are required.
//!
//! Writing uses [`CocoIds`] to give images and classes their COCO ids: the ids read from a file, or
//! [`CocoIds::sequential`] (1-based, as Ultralytics' validator numbers the classes of a custom
//! dataset). Coordinates are written with 3 decimals and scores with 5, as Ultralytics writes them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::labels::YoloLabel;
use super::layout::label_path_for;
use super::load::ImageRecord;
use crate::boxes::{Detection, Xyxy};
use crate::{Error, Result};

/// The COCO ids of a dataset's images (in record order) and classes (index = class id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CocoIds {
    /// The id of each image, in the order of the records.
    pub image_ids: Vec<i64>,
    /// The category id of each class.
    pub category_ids: Vec<i64>,
}

impl CocoIds {
    /// Ids `1..=images` for images and `1..=nc` for classes.
    pub fn sequential(images: usize, nc: usize) -> Self {
        let ids = |n: usize| (1..=n as i64).collect();
        Self { image_ids: ids(images), category_ids: ids(nc) }
    }
}

/// A COCO instances file read into dataset records.
#[derive(Debug, Clone, PartialEq)]
pub struct CocoDataset {
    /// Class names, index = class id (categories sorted by COCO id).
    pub names: Vec<String>,
    /// The images, in file order: `image_dir` joined with `file_name`, the size given in the file
    /// (the image is not opened), [`label_path_for`] as label path, and the boxes.
    pub images: Vec<ImageRecord>,
    /// The COCO ids of the images and classes.
    pub ids: CocoIds,
    /// Crowd annotations skipped.
    pub crowd_skipped: usize,
    /// Boxes without area (`w` or `h` ≤ 0, also after clipping) skipped.
    pub empty_skipped: usize,
    /// Boxes clipped to their image.
    pub clipped: usize,
}

#[derive(Deserialize)]
struct CocoFile {
    images: Vec<Value>,
    #[serde(default)]
    annotations: Vec<Value>,
    categories: Vec<Value>,
}

#[derive(Deserialize)]
struct CocoImage {
    id: i64,
    file_name: String,
    width: u32,
    height: u32,
}

#[derive(Deserialize)]
struct CocoAnnotation {
    image_id: i64,
    category_id: i64,
    bbox: [f64; 4],
    #[serde(default)]
    iscrowd: Value,
}

#[derive(Deserialize)]
struct CocoCategory {
    id: i64,
    name: String,
}

/// Reads a COCO instances JSON; image paths are `image_dir` joined with each `file_name`. Errors name
/// `json` and the offending image, annotation or category (index in its list and id).
pub fn read_coco(json: &Path, image_dir: &Path) -> Result<CocoDataset> {
    let bytes = std::fs::read(json).map_err(|e| Error::io(json, e))?;
    let file: CocoFile =
        serde_json::from_slice(&bytes).map_err(|source| Error::Json { path: json.to_path_buf(), source })?;
    let fail = |message: String| Error::Dataset { path: json.to_path_buf(), message };

    let categories = read_categories(json, file.categories)?;
    let class_of: HashMap<i64, usize> = categories.iter().enumerate().map(|(i, c)| (c.id, i)).collect();

    let images: Vec<CocoImage> = parse_items(json, "images", file.images)?;
    let mut index_of = HashMap::with_capacity(images.len());
    for (i, image) in images.iter().enumerate() {
        if image.width == 0 || image.height == 0 {
            return Err(fail(format!(
                "image id {} (`{}`) has zero width or height",
                image.id, image.file_name
            )));
        }
        if index_of.insert(image.id, i).is_some() {
            return Err(fail(format!("image id {} appears twice in `images`", image.id)));
        }
    }
    let mut records: Vec<ImageRecord> = images
        .iter()
        .map(|im| {
            let image = image_dir.join(&im.file_name);
            let label = label_path_for(&image);
            ImageRecord { image, label, width: im.width, height: im.height, labels: Vec::new() }
        })
        .collect();

    let mut dataset = CocoDataset {
        names: categories.iter().map(|c| c.name.clone()).collect(),
        images: Vec::new(),
        ids: CocoIds {
            image_ids: images.iter().map(|im| im.id).collect(),
            category_ids: categories.iter().map(|c| c.id).collect(),
        },
        crowd_skipped: 0,
        empty_skipped: 0,
        clipped: 0,
    };
    let ids: Vec<String> = file.annotations.iter().map(id_text).collect();
    let annotations: Vec<CocoAnnotation> = parse_items(json, "annotations", file.annotations)?;
    for (annotation, id) in annotations.into_iter().zip(ids) {
        let what = || format!("annotation id {id}");
        let &index = index_of.get(&annotation.image_id).ok_or_else(|| {
            fail(format!("{}: image_id {} is not in `images`", what(), annotation.image_id))
        })?;
        let &class = class_of.get(&annotation.category_id).ok_or_else(|| {
            fail(format!("{}: category_id {} is not in `categories`", what(), annotation.category_id))
        })?;
        if is_truthy(&annotation.iscrowd) {
            dataset.crowd_skipped += 1;
            continue;
        }
        if let Some(v) = annotation.bbox.iter().find(|v| !v.is_finite()) {
            return Err(fail(format!("{}: bbox value {v} is not a number", what())));
        }
        let record = &mut records[index];
        let [x, y, w, h] = annotation.bbox.map(|v| v as f32);
        let bbox = Xyxy::from_xywh(x, y, w, h);
        let clipped = bbox.clip(record.width as f32, record.height as f32);
        if w <= 0.0 || h <= 0.0 || clipped.width() <= 0.0 || clipped.height() <= 0.0 {
            dataset.empty_skipped += 1;
            continue;
        }
        if clipped != bbox {
            dataset.clipped += 1;
        }
        record.labels.push(YoloLabel::from_pixels(class, clipped, record.width, record.height));
    }
    dataset.images = records;
    Ok(dataset)
}

/// The categories, sorted by id; they must be unique and at least one.
fn read_categories(json: &Path, values: Vec<Value>) -> Result<Vec<CocoCategory>> {
    let fail = |message: String| Error::Dataset { path: json.to_path_buf(), message };
    let mut categories: Vec<CocoCategory> = parse_items(json, "categories", values)?;
    categories.sort_by_key(|c| c.id);
    if let Some(pair) = categories.windows(2).find(|p| p[0].id == p[1].id) {
        return Err(fail(format!("category id {} appears twice in `categories`", pair[0].id)));
    }
    if categories.is_empty() {
        return Err(fail("`categories` is empty; at least one class is required".into()));
    }
    Ok(categories)
}

/// Parses each element of the list `key`; errors name `json`, the list, the index and the id.
fn parse_items<T: for<'de> Deserialize<'de>>(json: &Path, key: &str, items: Vec<Value>) -> Result<Vec<T>> {
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let id = id_text(&item);
            serde_json::from_value(item).map_err(|e| Error::Dataset {
                path: json.to_path_buf(),
                message: format!("`{key}[{i}]` (id {id}): {e}"),
            })
        })
        .collect()
}

/// The `id` of a JSON object, for messages.
fn id_text(item: &Value) -> String {
    item.get("id").map_or_else(|| "missing".into(), Value::to_string)
}

/// COCO writes `iscrowd` as 0/1; some tools write booleans.
fn is_truthy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|v| v != 0.0),
        _ => false,
    }
}

/// `v` rounded to `decimals` decimals, as Ultralytics rounds what it writes.
fn round(v: f32, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (f64::from(v) * scale).round() / scale
}

/// `[x, y, w, h]` of a pixel box, rounded to 3 decimals.
fn xywh(bbox: Xyxy) -> [f64; 4] {
    bbox.to_xywh().map(|v| round(v, 3))
}

#[derive(Serialize)]
struct GroundTruth<'a> {
    info: serde_json::Map<String, Value>,
    images: Vec<Value>,
    annotations: Vec<Value>,
    categories: Vec<Value>,
    licenses: &'a [Value],
}

/// Writes `images` (with their boxes) as a COCO instances file, atomically. `file_name` is each image's
/// path relative to `image_dir` (with `/`), or the full path for an image outside it. Annotation ids
/// run from 1. Fails if `ids` does not have one id per image and per name.
pub fn write_coco_ground_truth(
    path: &Path,
    images: &[ImageRecord],
    names: &[String],
    ids: &CocoIds,
    image_dir: &Path,
) -> Result<()> {
    check_ids(ids, images.len(), names.len())?;
    let mut annotations = Vec::new();
    for (record, &image_id) in images.iter().zip(&ids.image_ids) {
        for label in &record.labels {
            let category_id = class_id(ids, label.class)?;
            let bbox = xywh(label.to_pixels(record.width, record.height));
            annotations.push(serde_json::json!({
                "id": annotations.len() + 1,
                "image_id": image_id,
                "category_id": category_id,
                "bbox": bbox,
                "area": round((bbox[2] * bbox[3]) as f32, 3),
                "iscrowd": 0,
            }));
        }
    }
    let images = images
        .iter()
        .zip(&ids.image_ids)
        .map(|(record, id)| {
            let file_name: PathBuf = record.image.strip_prefix(image_dir).unwrap_or(&record.image).to_path_buf();
            let file_name = file_name.to_string_lossy().replace('\\', "/");
            serde_json::json!({"id": id, "file_name": file_name, "width": record.width, "height": record.height})
        })
        .collect();
    let categories = names
        .iter()
        .zip(&ids.category_ids)
        .map(|(name, id)| serde_json::json!({"id": id, "name": name, "supercategory": ""}))
        .collect();
    let mut info = serde_json::Map::new();
    info.insert("description".into(), Value::from("written by headroom"));
    let file = GroundTruth { info, images, annotations, categories, licenses: &[] };
    let bytes =
        serde_json::to_vec(&file).map_err(|source| Error::Json { path: path.to_path_buf(), source })?;
    crate::fsio::write_atomic(path, &bytes)
}

/// Writes detections as a COCO results file (`[{image_id, category_id, bbox, score}]`), atomically.
/// `detections[i]` are the detections of image `ids.image_ids[i]`, boxes in that image's pixels.
pub fn write_coco_detections(path: &Path, detections: &[Vec<Detection>], ids: &CocoIds) -> Result<()> {
    check_ids(ids, detections.len(), ids.category_ids.len())?;
    let mut results = Vec::new();
    for (dets, &image_id) in detections.iter().zip(&ids.image_ids) {
        for det in dets {
            results.push(serde_json::json!({
                "image_id": image_id,
                "category_id": class_id(ids, det.class)?,
                "bbox": xywh(det.bbox),
                "score": round(det.score, 5),
            }));
        }
    }
    let bytes =
        serde_json::to_vec(&results).map_err(|source| Error::Json { path: path.to_path_buf(), source })?;
    crate::fsio::write_atomic(path, &bytes)
}

fn check_ids(ids: &CocoIds, images: usize, nc: usize) -> Result<()> {
    if ids.image_ids.len() != images || ids.category_ids.len() != nc {
        return Err(Error::InvalidArgument {
            name: "ids",
            message: format!(
                "{} image ids and {} category ids for {images} images and {nc} classes",
                ids.image_ids.len(),
                ids.category_ids.len()
            ),
        });
    }
    Ok(())
}

fn class_id(ids: &CocoIds, class: usize) -> Result<i64> {
    ids.category_ids.get(class).copied().ok_or_else(|| Error::InvalidArgument {
        name: "class",
        message: format!("class {class} has no category id ({} classes)", ids.category_ids.len()),
    })
}

#[cfg(test)]
#[path = "coco_tests.rs"]
mod tests;
