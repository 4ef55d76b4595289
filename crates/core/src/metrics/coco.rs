//! Evaluating a COCO results file (Ultralytics' `predictions.json` from `val save_json=True`)
//! against YOLO labels.
//!
//! Ultralytics writes one entry per kept detection: `image_id` (the image stem as an integer when
//! it is all digits, else the stem), `category_id` (`class_map[class]`: `class + 1` for custom
//! datasets, the COCO-91 id for COCO), `bbox` `[x, y, w, h]` in **original image pixels** (after
//! `scale_boxes`, which also clips to the image) rounded to 3 decimals, and `score` rounded to 5
//! decimals. Entries of one image follow NMS order (decreasing score); [`DetectionStats`] sorts
//! stably, so rounding a score onto its neighbour's value keeps their order.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DetectionStats, Metrics};
use crate::boxes::{Detection, Xyxy};
use crate::dataset::labels::{YoloLabel, read_label_file};
use crate::{Error, Result};

/// A COCO `image_id`: Ultralytics writes an integer for all-digit stems and the stem otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum CocoImageId {
    /// A numeric id (`"000123.jpg"` → 123).
    Number(i64),
    /// The image stem.
    Name(String),
}

impl CocoImageId {
    /// The id Ultralytics gives the image file `path`: `int(stem)` if the stem is all digits,
    /// else the stem.
    pub fn for_image(path: &Path) -> Self {
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        match stem.parse::<i64>() {
            Ok(n) if !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()) => Self::Number(n),
            _ => Self::Name(stem),
        }
    }
}

impl std::fmt::Display for CocoImageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::Name(s) => write!(f, "{s:?}"),
        }
    }
}

/// One detection of a COCO results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CocoPrediction {
    /// The image it belongs to.
    pub image_id: CocoImageId,
    /// The COCO category id (see [`ultralytics_class_map`]).
    pub category_id: i64,
    /// `[x, y, w, h]`, top-left corner and size, in pixels of the original image.
    pub bbox: [f32; 4],
    /// Confidence.
    pub score: f32,
}

/// A COCO results file: the predictions and the file they came from (named in errors).
#[derive(Debug, Clone, PartialEq)]
pub struct CocoResults {
    /// The file read.
    pub path: PathBuf,
    /// Its entries, in file order.
    pub predictions: Vec<CocoPrediction>,
}

/// The ground truth of one image: its id, size in pixels and YOLO labels.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelledImage {
    /// The id predictions refer to it by.
    pub id: CocoImageId,
    /// Width in pixels of the original image.
    pub width: u32,
    /// Height in pixels of the original image.
    pub height: u32,
    /// Its labels (normalised); empty for a background image.
    pub labels: Vec<YoloLabel>,
}

impl LabelledImage {
    /// Reads the size of `image` from its header and the labels of `label_file` (a missing label
    /// file means no boxes, as in Ultralytics). `nc` is the number of classes.
    pub fn read(image: &Path, label_file: &Path, nc: usize) -> Result<Self> {
        if let Some(kind) = crate::fsio::special_file(image) {
            return Err(Error::NotRegularFile { path: image.to_path_buf(), kind });
        }
        let (width, height) = image::image_dimensions(image)
            .map_err(|source| Error::Image { path: image.to_path_buf(), source })?;
        let labels = if label_file.exists() { read_label_file(label_file, nc)? } else { Vec::new() };
        Ok(Self { id: CocoImageId::for_image(image), width, height, labels })
    }
}

/// The `class_map` of Ultralytics' validator for a custom dataset: class `c` is category `c + 1`.
pub fn ultralytics_class_map(nc: usize) -> Vec<i64> {
    (1..=nc as i64).collect()
}

/// Reads a COCO results file (a JSON array of `{image_id, category_id, bbox, score}`; other keys
/// such as `file_name` are ignored).
pub fn read_coco_results(path: &Path) -> Result<CocoResults> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let predictions =
        serde_json::from_str(&text).map_err(|source| Error::Json { path: path.to_path_buf(), source })?;
    Ok(CocoResults { path: path.to_path_buf(), predictions })
}

impl CocoResults {
    /// Evaluates the predictions against `images` (every image of the set, with or without
    /// predictions or labels). `class_map[c]` is the category id of class `c` (see
    /// [`ultralytics_class_map`]); `class_map.len()` is the number of classes.
    ///
    /// Ground truth is taken in original pixels (`label × size`), like the predictions. Errors on a
    /// prediction for an image not in `images`, an unknown category, or two images with one id.
    pub fn evaluate(&self, images: &[LabelledImage], class_map: &[i64]) -> Result<Metrics> {
        let problem = |message: String| Error::Dataset { path: self.path.clone(), message };
        let class_of: HashMap<i64, usize> = class_map.iter().enumerate().map(|(c, &id)| (id, c)).collect();
        let mut index: HashMap<&CocoImageId, usize> = HashMap::with_capacity(images.len());
        for (i, image) in images.iter().enumerate() {
            if index.insert(&image.id, i).is_some() {
                return Err(problem(format!("two images have the id {}; ids must be unique", image.id)));
            }
        }
        let mut per_image: Vec<Vec<Detection>> = vec![Vec::new(); images.len()];
        for (n, p) in self.predictions.iter().enumerate() {
            let Some(&i) = index.get(&p.image_id) else {
                return Err(problem(format!(
                    "entry {n}: image_id {} is not an image of the set",
                    p.image_id
                )));
            };
            let Some(&class) = class_of.get(&p.category_id) else {
                return Err(problem(format!(
                    "entry {n}: category_id {} is not in the class map {class_map:?}",
                    p.category_id
                )));
            };
            let [x, y, w, h] = p.bbox;
            per_image[i].push(Detection { bbox: Xyxy::from_xywh(x, y, w, h), score: p.score, class });
        }
        let mut stats = DetectionStats::new();
        for (image, predictions) in images.iter().zip(&per_image) {
            let ground_truth: Vec<(usize, Xyxy)> =
                image.labels.iter().map(|l| (l.class, l.to_pixels(image.width, image.height))).collect();
            stats.add_image(predictions, &ground_truth);
        }
        stats.finish(class_map.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_ids_follow_ultralytics() {
        assert_eq!(CocoImageId::for_image(Path::new("a/000123.jpg")), CocoImageId::Number(123));
        assert_eq!(CocoImageId::for_image(Path::new("a/im_7.png")), CocoImageId::Name("im_7".into()));
        assert_eq!(CocoImageId::for_image(Path::new("-5.png")), CocoImageId::Name("-5".into()));
    }

    fn results(json: &str) -> CocoResults {
        CocoResults {
            path: "p.json".into(),
            predictions: serde_json::from_str(json).expect("test JSON is valid"),
        }
    }

    #[test]
    fn evaluates_a_results_file() {
        let r = results(
            r#"[{"image_id": 1, "category_id": 1, "bbox": [10, 20, 30, 40], "score": 0.9, "file_name": "1.jpg"},
                {"image_id": "b", "category_id": 2, "bbox": [0, 0, 5, 5], "score": 0.3}]"#,
        );
        let label = YoloLabel { class: 0, cx: 25.0 / 100.0, cy: 40.0 / 100.0, w: 0.3, h: 0.4 };
        let images = [
            LabelledImage { id: CocoImageId::Number(1), width: 100, height: 100, labels: vec![label] },
            LabelledImage { id: CocoImageId::Name("b".into()), width: 50, height: 50, labels: vec![] },
        ];
        let m = r.evaluate(&images, &ultralytics_class_map(2)).expect("ids and categories are known");
        assert_eq!((m.images, m.instances, m.per_class.len()), (2, 1, 1));
        assert!((m.map50_95 - 0.995).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn unknown_image_or_category_is_an_error() {
        let images = [LabelledImage { id: CocoImageId::Number(1), width: 10, height: 10, labels: vec![] }];
        let r = results(r#"[{"image_id": 2, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}]"#);
        let e =
            r.evaluate(&images, &ultralytics_class_map(1)).expect_err("unknown id or category").to_string();
        assert!(e.contains("p.json") && e.contains("image_id 2"), "{e}");
        let r = results(r#"[{"image_id": 1, "category_id": 0, "bbox": [0, 0, 1, 1], "score": 0.5}]"#);
        let e =
            r.evaluate(&images, &ultralytics_class_map(1)).expect_err("unknown id or category").to_string();
        assert!(e.contains("category_id 0"), "{e}");
    }

    #[test]
    fn bad_json_names_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("predictions.json");
        std::fs::write(&path, "[{\"image_id\": 1}]").expect("write");
        let e = read_coco_results(&path).expect_err("entry lacks keys").to_string();
        assert!(e.contains("predictions.json"), "{e}");
    }
}
