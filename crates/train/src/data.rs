//! Training batches from a dataset split: each image prepared as Ultralytics' `val` prepares it
//! (long side resized to the model input, letterboxed without enlarging — the pixels the deployed
//! model sees, see `headroom_core::preprocess`), its labels mapped into the model input and
//! normalised, optionally flipped left-right.

use headroom_core::dataset::ImageRecord;
use headroom_core::letterbox::LetterboxOptions;
use headroom_core::preprocess::{InputGeometry, Preprocess};
use tch::{Device, Tensor};

use crate::loss::Target;
use crate::{Error, Result};

/// Images `[B, 3, H, W]` (float in [0, 1]) and their objects in input-normalised `cx cy w h`.
#[derive(Debug)]
pub struct Batch {
    /// The images.
    pub images: Tensor,
    /// Every object of the batch, `image` indexing `images`.
    pub targets: Vec<Target>,
}

/// Reads and prepares `records` for a model input of `width` × `height`; `flip[i]` mirrors image
/// `i` left-right (with its labels).
pub fn make_batch(
    records: &[&ImageRecord],
    width: u32,
    height: u32,
    flip: &[bool],
    device: Device,
) -> Result<Batch> {
    let target = LetterboxOptions { width, height, ..LetterboxOptions::square(width) };
    let plane = width as usize * height as usize;
    let mut pixels = vec![0f32; records.len() * 3 * plane];
    let mut targets = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let image = headroom_core::imageio::read_rgb(&record.image)
            .map_err(|e| Error::Data { reason: e.to_string() })?;
        let geometry = InputGeometry::new(Preprocess::Val, image.width(), image.height(), &target);
        let mut prepared = geometry.apply(&image);
        let mirrored = flip.get(i).copied().unwrap_or(false);
        if mirrored {
            image::imageops::flip_horizontal_in_place(&mut prepared);
        }
        pixels[i * 3 * plane..(i + 1) * 3 * plane]
            .copy_from_slice(&headroom_core::preprocess::to_chw(&prepared));
        for label in &record.labels {
            let b = geometry.map_label(*label);
            let (w, h) = ((b.x2 - b.x1) / width as f32, (b.y2 - b.y1) / height as f32);
            let cx = (b.x1 + b.x2) / 2.0 / width as f32;
            let cx = if mirrored { 1.0 - cx } else { cx };
            targets.push(Target {
                image: i,
                class: label.class,
                cx,
                cy: (b.y1 + b.y2) / 2.0 / height as f32,
                w,
                h,
            });
        }
    }
    let images = Tensor::from_slice(&pixels)
        .view([records.len() as i64, 3, height as i64, width as i64])
        .to_device(device);
    Ok(Batch { images, targets })
}
