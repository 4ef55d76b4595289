//! Training batches from a dataset split. Without augmentation each image is prepared as
//! Ultralytics' `val` prepares it (long side resized to the model input, letterboxed without
//! enlarging — the pixels the deployed model sees, see `headroom_core::preprocess`), its labels
//! mapped into the model input and normalised, optionally flipped left-right. With augmentation
//! (`crate::augment`): mosaic of four images, or scale/translate of the letterboxed one, then HSV,
//! then the flip, as Ultralytics orders them. Each object keeps its teacher's soft scores.

use std::collections::HashMap;
use std::path::PathBuf;

use headroom_core::dataset::ImageRecord;
use headroom_core::letterbox::LetterboxOptions;
use headroom_core::preprocess::{InputGeometry, Preprocess};
use rand::RngExt;
use tch::{Device, Tensor};

use crate::augment::{self, Sample};
use crate::config::TrainConfig;
use crate::loss::Target;
use crate::{Error, Result};

/// The teacher's per-class confidences of each object, by image path, aligned with
/// [`ImageRecord::labels`] (`None` for an object without them, e.g. a human label).
pub type SoftTargets = HashMap<PathBuf, Vec<Option<Vec<f32>>>>;

/// Images `[B, 3, H, W]` (float in [0, 1]) and their objects in input-normalised `cx cy w h`.
#[derive(Debug)]
pub struct Batch {
    /// The images.
    pub images: Tensor,
    /// Every object of the batch, `image` indexing `images`.
    pub targets: Vec<Target>,
    /// The teacher's soft scores of each target (aligned with `targets`).
    pub soft: Vec<Option<Vec<f32>>>,
}

/// Reads and prepares `records` for a model input of `width` × `height`; `flip[i]` mirrors image
/// `i` left-right (with its labels). No other augmentation.
pub fn make_batch(
    records: &[&ImageRecord],
    width: u32,
    height: u32,
    flip: &[bool],
    device: Device,
) -> Result<Batch> {
    let mut samples = Vec::with_capacity(records.len());
    for (i, record) in records.iter().enumerate() {
        let mut sample = letterboxed(record, width, height)?;
        if flip.get(i).copied().unwrap_or(false) {
            augment::flip_left_right(&mut sample);
        }
        samples.push(sample);
    }
    Ok(to_batch(&samples, records, &SoftTargets::new(), device))
}

/// The batch of `records` for a training pass: augmented as `config` says with `rng` (mosaic draws
/// its three other images from `all`), with the soft scores of `soft`.
pub fn augmented_batch<R: rand::Rng + ?Sized>(
    records: &[&ImageRecord],
    all: &[ImageRecord],
    config: &TrainConfig,
    rng: &mut R,
    soft: &SoftTargets,
    device: Device,
) -> Result<Batch> {
    let [width, height] = config.imgsz;
    let aug = &config.augment;
    let mut samples = Vec::with_capacity(records.len());
    let mut sources: Vec<Vec<&ImageRecord>> = Vec::with_capacity(records.len());
    for record in records {
        let (mut sample, used) = if aug.draw_mosaic(rng) {
            let others: Vec<&ImageRecord> = (0..3).map(|_| &all[rng.random_range(0..all.len())]).collect();
            let group = [*record, others[0], others[1], others[2]];
            let loaded = group
                .iter()
                .enumerate()
                .map(|(k, r)| resized(r, width, k))
                .collect::<Result<Vec<Sample>>>()?;
            let tiles = [&loaded[0], &loaded[1], &loaded[2], &loaded[3]];
            let mosaic = augment::mosaic(tiles, width, aug.translate, aug.scale, rng);
            (mosaic, group.to_vec())
        } else {
            let mut sample = letterboxed(record, width, height)?;
            if aug.translate > 0.0 || aug.scale > 0.0 {
                sample = augment::affine(&sample, width, height, aug.translate, aug.scale, rng);
            }
            (sample, vec![*record])
        };
        if aug.hsv_h > 0.0 || aug.hsv_s > 0.0 || aug.hsv_v > 0.0 {
            augment::hsv(&mut sample.image, aug.hsv_h, aug.hsv_s, aug.hsv_v, rng);
        }
        if rng.random::<f64>() < config.flip {
            augment::flip_left_right(&mut sample);
        }
        samples.push(sample);
        sources.push(used);
    }
    Ok(to_batch_from(&samples, &sources, soft, device))
}

/// `record` letterboxed to the input as `val` does; box ids are label indices.
fn letterboxed(record: &ImageRecord, width: u32, height: u32) -> Result<Sample> {
    let image = read(record)?;
    let geometry = geometry(image.width(), image.height(), width, height);
    Ok(Sample { image: geometry.apply(&image), boxes: label_boxes(record, &geometry) })
}

fn geometry(image_w: u32, image_h: u32, width: u32, height: u32) -> InputGeometry {
    let target = LetterboxOptions { width, height, ..LetterboxOptions::square(width) };
    InputGeometry::new(Preprocess::Val, image_w, image_h, &target)
}

/// The labels of `record` in input pixels (ids: label indices).
fn label_boxes(record: &ImageRecord, geometry: &InputGeometry) -> Vec<augment::ObjectBox> {
    record
        .labels
        .iter()
        .enumerate()
        .map(|(i, label)| augment::ObjectBox { class: i, bbox: geometry.map_label(*label) })
        .collect()
}

/// The targets (and soft scores) of `records` letterboxed as `val` does and mirrored where `flips`
/// says, without reading the images (their size is in the records): what goes with cached features.
pub fn targets_for(
    records: &[&ImageRecord],
    flips: &[bool],
    imgsz: [u32; 2],
    soft: &SoftTargets,
) -> (Vec<Target>, Vec<Option<Vec<f32>>>) {
    let (mut targets, mut soft_out) = (Vec::new(), Vec::new());
    let (w, h) = (imgsz[0] as f32, imgsz[1] as f32);
    for (i, record) in records.iter().enumerate() {
        let geometry = geometry(record.width, record.height, imgsz[0], imgsz[1]);
        for object in label_boxes(record, &geometry) {
            let (index, b) = (object.class, object.bbox);
            let (x1, x2) =
                if flips.get(i).copied().unwrap_or(false) { (w - b.x2, w - b.x1) } else { (b.x1, b.x2) };
            let label = &record.labels[index];
            targets.push(Target {
                image: i,
                class: label.class,
                cx: (x1 + x2) / 2.0 / w,
                cy: (b.y1 + b.y2) / 2.0 / h,
                w: (x2 - x1) / w,
                h: (b.y2 - b.y1) / h,
            });
            soft_out.push(soft.get(&record.image).and_then(|v| v.get(index).cloned().flatten()));
        }
    }
    (targets, soft_out)
}

/// `record` resized as Ultralytics' `load_image` does (a mosaic tile); box ids are
/// `group · 65536 + label index`.
fn resized(record: &ImageRecord, size: u32, group: usize) -> Result<Sample> {
    let mut sample = Sample::read(record, size)?;
    for (i, b) in sample.boxes.iter_mut().enumerate() {
        b.class = group * 65536 + i;
    }
    Ok(sample)
}

fn read(record: &ImageRecord) -> Result<image::RgbImage> {
    headroom_core::imageio::read_rgb(&record.image).map_err(|e| Error::Data { reason: e.to_string() })
}

/// Samples whose box ids are label indices of `records`.
fn to_batch(samples: &[Sample], records: &[&ImageRecord], soft: &SoftTargets, device: Device) -> Batch {
    let sources: Vec<Vec<&ImageRecord>> = records.iter().map(|r| vec![*r]).collect();
    to_batch_from(samples, &sources, soft, device)
}

/// Samples whose box ids are `group · 65536 + label index` into `sources[i][group]`.
fn to_batch_from(
    samples: &[Sample],
    sources: &[Vec<&ImageRecord>],
    soft: &SoftTargets,
    device: Device,
) -> Batch {
    let (width, height) = samples.first().map_or((1, 1), |s| (s.image.width(), s.image.height()));
    let (mut targets, mut soft_out) = (Vec::new(), Vec::new());
    for (i, sample) in samples.iter().enumerate() {
        for object in &sample.boxes {
            let (group, index, b) = (object.class / 65536, object.class % 65536, object.bbox);
            let Some(record) = sources[i].get(group) else { continue };
            let Some(label) = record.labels.get(index) else { continue };
            targets.push(Target {
                image: i,
                class: label.class,
                cx: (b.x1 + b.x2) / 2.0 / width as f32,
                cy: (b.y1 + b.y2) / 2.0 / height as f32,
                w: (b.x2 - b.x1) / width as f32,
                h: (b.y2 - b.y1) / height as f32,
            });
            soft_out.push(soft.get(&record.image).and_then(|v| v.get(index).cloned().flatten()));
        }
    }
    Batch { images: to_images(samples, width, height, device), targets, soft: soft_out }
}

/// The samples' pixels as `[B, 3, H, W]` floats in [0, 1] on `device`, as Ultralytics makes them
/// (`img.float() / 255`, the same correctly rounded division as `f32::from(byte) / 255.0`). The
/// bytes go to the device as they are (a quarter of the floats' size) and are converted there, in
/// tensors from libtorch's allocator (the pool on the CPU: no fresh pages every pass).
fn to_images(samples: &[Sample], width: u32, height: u32, device: Device) -> Tensor {
    let shape = [i64::from(height), i64::from(width), 3];
    let each: Vec<Tensor> =
        samples.iter().map(|s| Tensor::from_slice(s.image.as_raw()).view(shape)).collect();
    let bytes = if each.is_empty() {
        Tensor::zeros([0, i64::from(height), i64::from(width), 3], (tch::Kind::Uint8, Device::Cpu))
    } else {
        Tensor::stack(&each, 0)
    };
    bytes.to_device(device).permute([0, 3, 1, 2]).contiguous().to_kind(tch::Kind::Float) / 255.0
}
