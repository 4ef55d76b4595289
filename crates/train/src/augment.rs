//! Training augmentation as Ultralytics 8.4.190 does it for detection (`v8_transforms`): a
//! 4-image [`mosaic`] with probability [`AugmentConfig::mosaic`], the scale-and-translate
//! [`affine`] (`RandomPerspective` with `degrees`, `shear` and `perspective` 0) that every
//! training image goes through, then [`hsv`] (`RandomHSV`); [`augment`] chains them in that
//! order. Left-right flips stay with the caller ([`flip_left_right`]), as in the trainer.
//!
//! Pixels are OpenCV's: the warp and the colour conversions reproduce opencv-python 5.0.0 byte for
//! byte (see `warp` and `color`). Random draws are Python's distributions (`uniform(a, b)`
//! as `a + (b - a)·u`) on a Rust generator, so a seed gives the same result every time but not
//! the numbers Python's `random` would draw.

mod color;
#[cfg(test)]
mod tests;
mod warp;

use headroom_core::boxes::Xyxy;
use headroom_core::dataset::{ImageRecord, YoloLabel};
use image::{Rgb, RgbImage};
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

pub use color::hsv;

/// Ultralytics' grey for pixels outside an image (mosaic canvas, warp border).
pub const FILL: u8 = 114;

/// One labelled object: its class and its box in pixels of the image it belongs to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectBox {
    /// Class id.
    pub class: usize,
    /// Corners in pixels.
    pub bbox: Xyxy,
}

/// An image and its objects, the unit every augmentation takes and returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The pixels, RGB.
    pub image: RgbImage,
    /// The objects, in pixels of `image`.
    pub boxes: Vec<ObjectBox>,
}

impl Sample {
    /// `image` with YOLO labels (normalised `cx cy w h`) turned into pixel boxes as Ultralytics
    /// does (`xywh2xyxy`, then scaled by the image size).
    pub fn from_labels(image: RgbImage, labels: &[YoloLabel]) -> Self {
        let (w, h) = image.dimensions();
        let boxes = labels.iter().map(|l| ObjectBox { class: l.class, bbox: l.to_pixels(w, h) }).collect();
        Self { image, boxes }
    }

    /// Reads `record` as Ultralytics' training `load_image` does: long side resized to `size`
    /// (each side `min(ceil(side·r), size)`, `cv2.INTER_LINEAR`, enlarging too), no letterbox.
    pub fn read(record: &ImageRecord, size: u32) -> crate::Result<Self> {
        let image = headroom_core::imageio::read_rgb(&record.image)
            .map_err(|e| crate::Error::Data { reason: e.to_string() })?;
        let (w, h) = headroom_core::preprocess::val_load_size(image.width(), image.height(), size);
        let image = if (w, h) == image.dimensions() {
            image
        } else {
            headroom_core::letterbox::resize_bilinear_like_opencv(&image, w, h)
        };
        Ok(Self::from_labels(image, &record.labels))
    }
}

/// Augmentation strengths, Ultralytics' hyperparameters of the same names. The default is all
/// off (0); [`AugmentConfig::ultralytics`] gives Ultralytics' training defaults.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AugmentConfig {
    /// Hue gain: hue shifted by up to ±`hsv_h`·180 OpenCV hue units (half a turn at 1).
    pub hsv_h: f32,
    /// Saturation gain: saturation multiplied by a factor in `[1 - hsv_s, 1 + hsv_s]`.
    pub hsv_s: f32,
    /// Value gain: brightness multiplied by a factor in `[1 - hsv_v, 1 + hsv_v]`.
    pub hsv_v: f32,
    /// Translation: the image centre lands at `uniform(0.5 - t, 0.5 + t)` of the output size.
    pub translate: f32,
    /// Scale: the image is scaled by `uniform(1 - scale, 1 + scale)`.
    pub scale: f32,
    /// Probability of a 4-image mosaic, in `[0, 1]`.
    pub mosaic: f32,
}

/// A field of [`AugmentConfig`] out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("augmentation `{field}` = {value} is outside {range}; Ultralytics' default is {default}")]
pub struct InvalidAugment {
    /// The field.
    pub field: &'static str,
    /// Its value.
    pub value: f32,
    /// The values it may take.
    pub range: &'static str,
    /// Ultralytics' value, a safe choice.
    pub default: f32,
}

impl AugmentConfig {
    /// Ultralytics 8.4.190's defaults (`default.yaml`): hsv 0.015 / 0.7 / 0.4, translate 0.1,
    /// scale 0.5, mosaic 1.0.
    pub fn ultralytics() -> Self {
        Self { hsv_h: 0.015, hsv_s: 0.7, hsv_v: 0.4, translate: 0.1, scale: 0.5, mosaic: 1.0 }
    }

    /// Whether any augmentation is on. When none is, train on the `val` letterbox instead: even
    /// at zero strength Ultralytics' affine centres an image by resampling, not by padding.
    pub fn changes_pixels(&self) -> bool {
        [self.hsv_h, self.hsv_s, self.hsv_v, self.translate, self.scale, self.mosaic]
            .iter()
            .any(|&g| g != 0.0)
    }

    /// Checks every field is finite and in range (gains and scale in `[0, 1]`, translate in
    /// `[0, 0.5]`, mosaic in `[0, 1]`), naming the first that is not.
    pub fn validate(&self) -> Result<(), InvalidAugment> {
        let d = Self::ultralytics();
        let fields = [
            ("hsv_h", self.hsv_h, 1.0, d.hsv_h),
            ("hsv_s", self.hsv_s, 1.0, d.hsv_s),
            ("hsv_v", self.hsv_v, 1.0, d.hsv_v),
            ("translate", self.translate, 0.5, d.translate),
            ("scale", self.scale, 1.0, d.scale),
            ("mosaic", self.mosaic, 1.0, d.mosaic),
        ];
        for (field, value, max, default) in fields {
            if !(0.0..=max).contains(&value) {
                let range = if max == 0.5 { "[0, 0.5]" } else { "[0, 1]" };
                return Err(InvalidAugment { field, value, range, default });
            }
        }
        Ok(())
    }

    /// Draws whether this image becomes a mosaic (probability [`AugmentConfig::mosaic`]);
    /// draws nothing when the answer is certain.
    pub fn draw_mosaic<R: Rng + ?Sized>(&self, rng: &mut R) -> bool {
        match self.mosaic {
            p if p >= 1.0 => true,
            p if p > 0.0 => rng.random::<f64>() < f64::from(p),
            _ => false,
        }
    }
}

/// Python's `random.uniform(lo, hi)`: `lo + (hi - lo)·u`, `u` in `[0, 1)`.
fn uniform<R: Rng + ?Sized>(rng: &mut R, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.random::<f64>()
}

/// Ultralytics' training transform for one image at model input `size`: with probability
/// `config.mosaic` a [`mosaic`] of `first` and three samples from `more` (called only then; each
/// sample long side `size`, see [`Sample::read`]), otherwise [`affine`] of `first` alone into
/// `size` × `size`; then [`hsv`].
pub fn augment<R, E>(
    config: &AugmentConfig,
    first: &Sample,
    size: u32,
    rng: &mut R,
    more: impl FnOnce(&mut R) -> Result<[Sample; 3], E>,
) -> Result<Sample, E>
where
    R: Rng + ?Sized,
{
    let (t, s) = (config.translate, config.scale);
    let mut out = if config.draw_mosaic(rng) {
        let [a, b, c] = more(rng)?;
        mosaic([first, &a, &b, &c], size, t, s, rng)
    } else {
        affine(first, size, size, t, s, rng)
    };
    hsv(&mut out.image, config.hsv_h, config.hsv_s, config.hsv_v, rng);
    Ok(out)
}

/// Ultralytics' `RandomPerspective` restricted to scale and translation, into `out_w` × `out_h`:
/// the image centre moved to the origin, scaled by `s = uniform(1 - scale, 1 + scale)`, moved to
/// `uniform(0.5 - translate, 0.5 + translate)` of the output size (x drawn before y); bilinear
/// warp filled with [`FILL`]. Boxes are mapped, clipped to the output and kept only if they pass
/// [`box_candidates`] against the original box scaled by `s`.
pub fn affine<R: Rng + ?Sized>(
    sample: &Sample,
    out_w: u32,
    out_h: u32,
    translate: f32,
    scale: f32,
    rng: &mut R,
) -> Sample {
    let s = uniform(rng, 1.0 - f64::from(scale), 1.0 + f64::from(scale)) as f32;
    let t = f64::from(translate);
    let tx = (uniform(rng, 0.5 - t, 0.5 + t) * f64::from(out_w)) as f32;
    let ty = (uniform(rng, 0.5 - t, 0.5 + t) * f64::from(out_h)) as f32;
    scale_translate(sample, out_w, out_h, s, tx, ty)
}

/// [`affine`] with its draws made: scale `s`, image centre to `(tx, ty)`. The matrix is the
/// `f32` product `T·R·C` of Ultralytics (`M₀₂ = s·(-w/2) + tx`, each step rounded).
pub(crate) fn scale_translate(sample: &Sample, out_w: u32, out_h: u32, s: f32, tx: f32, ty: f32) -> Sample {
    let (w, h) = sample.image.dimensions();
    let m = [s, 0.0, s * (-(w as f32) / 2.0) + tx, 0.0, s, s * (-(h as f32) / 2.0) + ty];
    let image = warp::warp_affine(&sample.image, &m, out_w, out_h, FILL);
    let (ow, oh) = (out_w as f32, out_h as f32);
    let boxes = sample
        .boxes
        .iter()
        .filter_map(|b| {
            let [x1, x2] = [b.bbox.x1 * m[0] + m[2], b.bbox.x2 * m[0] + m[2]];
            let [y1, y2] = [b.bbox.y1 * m[4] + m[5], b.bbox.y2 * m[4] + m[5]];
            let moved = Xyxy::new(x1.min(x2), y1.min(y2), x1.max(x2), y1.max(y2)).clip(ow, oh);
            box_candidates(b.bbox.scale(s, s), moved).then_some(ObjectBox { class: b.class, bbox: moved })
        })
        .collect();
    Sample { image, boxes }
}

/// Ultralytics' `box_candidates` with its defaults (`wh_thr=2`, `ar_thr=100`, `area_thr=0.1`):
/// whether `after` is wider and taller than 2 px, keeps over 10 % of the area of `before` (the
/// original box at the new scale) and has an aspect ratio under 100.
pub fn box_candidates(before: Xyxy, after: Xyxy) -> bool {
    const EPS: f32 = 1e-16;
    let (w1, h1) = (before.width(), before.height());
    let (w2, h2) = (after.width(), after.height());
    let aspect = (w2 / (h2 + EPS)).max(h2 / (w2 + EPS));
    w2 > 2.0 && h2 > 2.0 && w2 * h2 / (w1 * h1 + EPS) > 0.1 && aspect < 100.0
}

/// Ultralytics' 4-image `Mosaic` followed by its [`affine`]: [`mosaic_canvas`] (`2·size` square),
/// then scaled and translated into `size` × `size` (the canvas centre lands near the output
/// centre, as with Ultralytics' border of `-size/2`).
pub fn mosaic<R: Rng + ?Sized>(
    samples: [&Sample; 4],
    size: u32,
    translate: f32,
    scale: f32,
    rng: &mut R,
) -> Sample {
    let canvas = mosaic_canvas(samples, size, rng);
    affine(&canvas, size, size, translate, scale, rng)
}

/// The canvas of Ultralytics' 4-image mosaic: `2·size` square filled with [`FILL`], a centre
/// `(xc, yc)` drawn in `[size/2, 3·size/2)` (y first), the samples (each long side `size`)
/// placed top-left, top-right, bottom-left and bottom-right of it and cut at the canvas edge;
/// boxes shifted with their sample, clipped to the canvas, those left without area dropped.
pub fn mosaic_canvas<R: Rng + ?Sized>(samples: [&Sample; 4], size: u32, rng: &mut R) -> Sample {
    let s = i64::from(size);
    let border = (-s).div_euclid(2); // Python's `-imgsz // 2`
    let (lo, hi) = (-border as f64, (2 * s + border) as f64);
    let yc = uniform(rng, lo, hi) as i64;
    let xc = uniform(rng, lo, hi) as i64;
    let side = 2 * size;
    let mut canvas = RgbImage::from_pixel(side, side, Rgb([FILL; 3]));
    let mut boxes = Vec::new();
    for (quadrant, sample) in samples.into_iter().enumerate() {
        let (w, h) = (i64::from(sample.image.width()), i64::from(sample.image.height()));
        let tile = place(quadrant, xc, yc, w, h, 2 * s);
        paste(&mut canvas, &sample.image, &tile);
        let (dx, dy) = ((tile.dst[0] - tile.src[0]) as f32, (tile.dst[1] - tile.src[1]) as f32);
        boxes.extend(sample.boxes.iter().map(|b| ObjectBox {
            class: b.class,
            bbox: Xyxy::new(b.bbox.x1 + dx, b.bbox.y1 + dy, b.bbox.x2 + dx, b.bbox.y2 + dy),
        }));
    }
    let edge = side as f32;
    let boxes = boxes
        .into_iter()
        .map(|b| ObjectBox { bbox: b.bbox.clip(edge, edge), ..b })
        .filter(|b| b.bbox.width() * b.bbox.height() > 0.0)
        .collect();
    Sample { image: canvas, boxes }
}

/// Where one mosaic tile goes: `dst` on the canvas and `src` in the sample, `[x1, y1, x2, y2]`.
struct Tile {
    dst: [i64; 4],
    src: [i64; 4],
}

/// Ultralytics' placement of sample `quadrant` (0 top-left, 1 top-right, 2 bottom-left,
/// 3 bottom-right) of size `w` × `h` around `(xc, yc)` on a canvas of side `side`.
fn place(quadrant: usize, xc: i64, yc: i64, w: i64, h: i64, side: i64) -> Tile {
    let (left, top) = (quadrant.is_multiple_of(2), quadrant < 2);
    let (x1a, x2a) = if left { ((xc - w).max(0), xc) } else { (xc, (xc + w).min(side)) };
    let (y1a, y2a) = if top { ((yc - h).max(0), yc) } else { (yc, (yc + h).min(side)) };
    let (x1b, x2b) = if left { (w - (x2a - x1a), w) } else { (0, w.min(x2a - x1a)) };
    let (y1b, y2b) = if top { (h - (y2a - y1a), h) } else { (0, h.min(y2a - y1a)) };
    Tile { dst: [x1a, y1a, x2a, y2a], src: [x1b, y1b, x2b, y2b] }
}

/// Copies `tile.src` of `image` onto `tile.dst` of `canvas` (rows of equal length).
fn paste(canvas: &mut RgbImage, image: &RgbImage, tile: &Tile) {
    let [x1a, y1a, x2a, y2a] = tile.dst.map(|v| v.max(0) as usize);
    let [x1b, y1b, x2b, y2b] = tile.src.map(|v| v.max(0) as usize);
    let width = (x2a.saturating_sub(x1a)).min(x2b.saturating_sub(x1b)) * 3;
    let rows = (y2a.saturating_sub(y1a)).min(y2b.saturating_sub(y1b));
    let (cw, iw) = (canvas.width() as usize * 3, image.width() as usize * 3);
    let (dst, src) = (&mut **canvas, &**image);
    for r in 0..rows {
        let d = (y1a + r) * cw + x1a * 3;
        let s = (y1b + r) * iw + x1b * 3;
        dst[d..d + width].copy_from_slice(&src[s..s + width]);
    }
}

/// Ultralytics' `RandomFlip(direction="horizontal")` applied: the image mirrored left-right,
/// each box `x1' = w - x2`, `x2' = w - x1`.
pub fn flip_left_right(sample: &mut Sample) {
    image::imageops::flip_horizontal_in_place(&mut sample.image);
    let w = sample.image.width() as f32;
    for b in &mut sample.boxes {
        b.bbox = Xyxy::new(w - b.bbox.x2, b.bbox.y1, w - b.bbox.x1, b.bbox.y2);
    }
}
