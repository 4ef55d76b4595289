//! From an image's pixels to a model input, the way Ultralytics prepares it for `predict` or for `val`,
//! and the pixel space in which each one's boxes live.
//!
//! `predict` letterboxes the original image straight to the model input ([`Letterbox`], enlarging
//! allowed). `val` (8.4.190, `BaseDataset.load_image` then the val dataset's
//! `LetterBox(scaleup=False)`) goes in two steps: first the long side is resized to the larger input
//! side — each side `min(ceil(side · r), imgsz)`, `cv2.INTER_LINEAR`, enlarging as well as shrinking —
//! then the result is letterboxed without enlarging (`auto=False`, centred). The two differ whenever
//! `ceil` and round-half-even disagree on the short side, and for non-square inputs (a second resize).
//! `val` then matches predictions and labels in the letterboxed input's pixels, predictions unclipped:
//! [`InputGeometry::map_label`] maps a label there with Ultralytics' own sequence of `f32` operations.
//!
//! What `val` does for a model with a dynamic input shape (rectangular batches whose shape depends on
//! the batch's aspect ratios) is not reproduced: [`Preprocess::Val`] is `val` on a fixed-shape model.

use std::borrow::Cow;

use image::RgbImage;
use serde::{Deserialize, Serialize};

use crate::boxes::Xyxy;
use crate::dataset::YoloLabel;
use crate::letterbox::{Letterbox, LetterboxOptions, resize_bilinear_like_opencv};

/// Which Ultralytics pipeline to reproduce when preparing images for a model.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preprocess {
    /// `predict`: one letterbox from the original image to the model input, enlarging allowed.
    #[default]
    Predict,
    /// `val` on a fixed-shape model: resize the long side to the larger input side (`ceil`,
    /// INTER_LINEAR), then letterbox with `scaleup=False`, `auto=False`, centred.
    Val,
}

/// The geometry of one image's way to the model input: an optional first resize (`val`'s
/// `load_image`) to `loaded`, then a letterbox from `loaded`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InputGeometry {
    /// Original width and height.
    pub src: (u32, u32),
    /// Width and height after the first resize (`src` when there is none).
    pub loaded: (u32, u32),
    /// The letterbox from `loaded` to the model input.
    pub letterbox: Letterbox,
}

/// The size `val`'s `load_image` resizes an image `width` × `height` to: the long side to `imgsz`,
/// each side `min(ceil(side · r), imgsz)` with `r = imgsz / long side`; unchanged when `r == 1`.
pub fn val_load_size(width: u32, height: u32, imgsz: u32) -> (u32, u32) {
    let (width, height) = (width.max(1), height.max(1));
    let r = f64::from(imgsz) / f64::from(width.max(height));
    if r == 1.0 {
        return (width, height);
    }
    // Same f64 operations as Python's `math.ceil(w0 * r)`; the cap absorbs `160.00000000000003`.
    let side = |s: u32| ((f64::from(s) * r).ceil() as u32).clamp(1, imgsz.max(1));
    (side(width), side(height))
}

impl InputGeometry {
    /// The geometry for an image `src_width` × `src_height` and a model input `target`. With
    /// [`Preprocess::Val`] only `target`'s width and height count: `val`'s letterbox is always
    /// `scaleup=False`, `auto=False`, centred.
    pub fn new(preprocess: Preprocess, src_width: u32, src_height: u32, target: &LetterboxOptions) -> Self {
        let src = (src_width, src_height);
        match preprocess {
            Preprocess::Predict => {
                Self { src, loaded: src, letterbox: Letterbox::new(src_width, src_height, target) }
            }
            Preprocess::Val => {
                let loaded = val_load_size(src_width, src_height, target.width.max(target.height));
                let options = LetterboxOptions { auto: false, scaleup: false, center: true, ..*target };
                Self { src, loaded, letterbox: Letterbox::new(loaded.0, loaded.1, &options) }
            }
        }
    }

    /// The model input's width and height.
    pub fn output_size(&self) -> (u32, u32) {
        self.letterbox.output_size()
    }

    /// Prepares `image` (which must be `src` in size): the first resize, then the letterbox.
    pub fn apply(&self, image: &RgbImage) -> RgbImage {
        let loaded = if image.dimensions() == self.loaded {
            Cow::Borrowed(image)
        } else {
            Cow::Owned(resize_bilinear_like_opencv(image, self.loaded.0, self.loaded.1))
        };
        self.letterbox.apply(&loaded)
    }

    /// Maps a box from model-input pixels back to original pixels, clipped to the original image.
    pub fn unmap(&self, bbox: Xyxy) -> Xyxy {
        let in_loaded = self.letterbox.unmap(bbox);
        if self.loaded == self.src {
            return in_loaded;
        }
        let gx = self.src.0 as f32 / self.loaded.0 as f32;
        let gy = self.src.1 as f32 / self.loaded.1 as f32;
        in_loaded.scale(gx, gy).clip(self.src.0 as f32, self.src.1 as f32)
    }

    /// A label in model-input pixels, computed as Ultralytics' val dataset and validator compute it
    /// (same `f32` operations in the same order, so the same bits): `cxcywh → xyxy`, × `loaded` size
    /// (`LetterBox._update_labels`), × ratio, + padding; `Format` back to `cxcywh` normalised by the
    /// input size; the validator's `xywh2xyxy` × input size.
    pub fn map_label(&self, label: YoloLabel) -> Xyxy {
        let (w1, h1) = (self.loaded.0 as f32, self.loaded.1 as f32);
        let ratio = self.letterbox.ratio as f32;
        let (pad_x, pad_y) = (self.letterbox.pad.0 as f32, self.letterbox.pad.1 as f32);
        let (w2, h2) = self.output_size();
        let (w2, h2) = (w2 as f32, h2 as f32);
        let (half_w, half_h) = (label.w / 2.0, label.h / 2.0);
        let x = [label.cx - half_w, label.cx + half_w].map(|v| v * w1 * ratio + pad_x);
        let y = [label.cy - half_h, label.cy + half_h].map(|v| v * h1 * ratio + pad_y);
        let (cx, w) = ((x[0] + x[1]) / 2.0 / w2, (x[1] - x[0]) / w2);
        let (cy, h) = ((y[0] + y[1]) / 2.0 / h2, (y[1] - y[0]) / h2);
        let (half_w, half_h) = (w / 2.0, h / 2.0);
        Xyxy::new((cx - half_w) * w2, (cy - half_h) * h2, (cx + half_w) * w2, (cy + half_h) * h2)
    }
}

/// An RGB image as a model input plane by plane (`[3, H, W]`, red first), values scaled to [0, 1]
/// as Ultralytics feeds them.
pub fn to_chw(image: &RgbImage) -> Vec<f32> {
    let plane = image.width() as usize * image.height() as usize;
    let mut out = vec![0f32; 3 * plane];
    let (r, rest) = out.split_at_mut(plane);
    let (g, b) = rest.split_at_mut(plane);
    for (i, px) in image.as_raw().chunks_exact(3).enumerate() {
        r[i] = f32::from(px[0]) / 255.0;
        g[i] = f32::from(px[1]) / 255.0;
        b[i] = f32::from(px[2]) / 255.0;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn val_load_size_uses_ceil_and_caps_at_imgsz() {
        // 180 · 0.64 = 115.2: `val` loads 116 rows where `predict` letterboxes to 115.
        assert_eq!(val_load_size(250, 180, 160), (160, 116));
        assert_eq!(Letterbox::new(250, 180, &LetterboxOptions::square(160)).resized, (160, 115));
        assert_eq!(val_load_size(256, 192, 160), (160, 120));
        // Enlarging too: 77 · 1.6 = 123.2 → 124.
        assert_eq!(val_load_size(100, 77, 160), (160, 124));
        assert_eq!(val_load_size(160, 90, 160), (160, 90));
        assert_eq!(val_load_size(1, 5000, 160), (1, 160));
    }

    #[test]
    fn val_never_enlarges_in_the_letterbox_and_predict_is_one_letterbox() {
        let square = LetterboxOptions::square(160);
        let val = InputGeometry::new(Preprocess::Val, 100, 77, &square);
        assert_eq!(val.loaded, (160, 124));
        assert_eq!(val.letterbox.resized, (160, 124));
        assert_eq!(val.letterbox.pad, (0, 18, 0, 18));
        let predict = InputGeometry::new(Preprocess::Predict, 100, 77, &square);
        assert_eq!(predict.loaded, (100, 77));
        assert_eq!(predict.letterbox.resized, (160, 123));
        // A non-square input: load to the long side 160, then shrink again into 160 × 128.
        let wide = LetterboxOptions { height: 128, ..square };
        let tall = InputGeometry::new(Preprocess::Val, 61, 190, &wide);
        assert_eq!(tall.loaded, (52, 160));
        assert_eq!(tall.letterbox.resized, (42, 128));
        assert_eq!(tall.output_size(), (160, 128));
    }

    #[test]
    fn labels_map_into_the_input_and_back() {
        let geometry = InputGeometry::new(Preprocess::Val, 250, 180, &LetterboxOptions::square(160));
        let label = YoloLabel { class: 0, cx: 0.5, cy: 0.25, w: 0.2, h: 0.1 };
        let mapped = geometry.map_label(label);
        let pad = geometry.letterbox.pad.1 as f32;
        let expected = Xyxy::new(64.0, 0.2 * 116.0 + pad, 96.0, 0.3 * 116.0 + pad);
        for (a, b) in [(mapped.x1, expected.x1), (mapped.y1, expected.y1), (mapped.x2, expected.x2)] {
            assert!((a - b).abs() < 1e-4, "{mapped:?} vs {expected:?}");
        }
        let back = geometry.unmap(mapped);
        let original = label.to_pixels(250, 180);
        for (a, b) in [(back.x1, original.x1), (back.y1, original.y1), (back.y2, original.y2)] {
            assert!((a - b).abs() < 1e-3, "{back:?} vs {original:?}");
        }
    }
}
