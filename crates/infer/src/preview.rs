//! Mosaics of images with their boxes, as Ultralytics draws `val_batch0_pred.jpg` and
//! `val_batch0_labels.jpg`: the predictions and labels of a training run's val images, and the
//! pseudo-labels of `headroom label` (`labels_preview.jpg`).

use std::path::Path;

use headroom_core::boxes::Xyxy;
use headroom_plot::{DrawBox, Tile};
use image::RgbImage;
use image::imageops::{self, FilterType};

/// Images in a mosaic at most (Ultralytics' `max_subplots`).
pub const MOSAIC_IMAGES: usize = 16;

/// A tile's longest side, in pixels: larger images are scaled down to it first (Ultralytics draws
/// its 640-pixel model inputs), so 16 camera frames never sit in memory at full size.
pub const TILE_SIDE: u32 = 640;

/// Predictions drawn in a mosaic score above this (Ultralytics' `plot_images` `conf_thres`).
pub const DRAW_CONF: f32 = 0.25;

/// One box to draw: class, corners in the image's pixels, and the confidence when it is a
/// prediction (`None`: a label, drawn with its name alone).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreviewBox {
    /// Class id.
    pub class: usize,
    /// Corners in the pixels of the image the box belongs to.
    pub bbox: Xyxy,
    /// Confidence of a prediction.
    pub score: Option<f32>,
}

/// A mosaic tile: `image` scaled down to at most [`TILE_SIDE`] on its longest side, the boxes
/// scaled with it, titled with the file name of `path`.
pub fn tile(image: RgbImage, boxes: &[PreviewBox], path: &Path) -> Tile {
    let (w, h) = image.dimensions();
    let scale = (TILE_SIDE as f32 / w.max(h).max(1) as f32).min(1.0);
    let image = if scale < 1.0 {
        let (nw, nh) =
            (((w as f32 * scale).round() as u32).max(1), ((h as f32 * scale).round() as u32).max(1));
        imageops::resize(&image, nw, nh, FilterType::Triangle)
    } else {
        image
    };
    let boxes = boxes
        .iter()
        .map(|b| DrawBox {
            class: b.class,
            xyxy: [b.bbox.x1, b.bbox.y1, b.bbox.x2, b.bbox.y2].map(|v| v * scale),
            score: b.score,
        })
        .collect();
    let title = path.file_name().map(|n| n.to_string_lossy().chars().take(40).collect());
    Tile { image, boxes, title }
}

/// Reads the image at `path` and makes its [`tile`].
pub fn read_tile(path: &Path, boxes: impl FnOnce(u32, u32) -> Vec<PreviewBox>) -> crate::Result<Tile> {
    let image = headroom_core::imageio::read_rgb(path)?;
    let boxes = boxes(image.width(), image.height());
    Ok(tile(image, &boxes, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_images_are_scaled_down_with_their_boxes() {
        let image = RgbImage::new(1280, 720);
        let b = PreviewBox { class: 1, bbox: Xyxy::new(100.0, 50.0, 300.0, 250.0), score: Some(0.5) };
        let t = tile(image, &[b], Path::new("/data/scene/frame_0001.jpg"));
        assert_eq!(t.image.dimensions(), (640, 360));
        assert_eq!(t.boxes[0].xyxy, [50.0, 25.0, 150.0, 125.0]);
        assert_eq!((t.boxes[0].class, t.boxes[0].score), (1, Some(0.5)));
        assert_eq!(t.title.as_deref(), Some("frame_0001.jpg"));
        let small = tile(RgbImage::new(320, 200), &[b], Path::new("x.png"));
        assert_eq!((small.image.dimensions(), small.boxes[0].xyxy[2]), ((320, 200), 300.0));
    }
}
