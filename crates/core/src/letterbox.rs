//! Ultralytics' letterbox: scale an image to fit a target size keeping its aspect ratio, pad the rest
//! with grey 114, and map boxes back to the original image.
//!
//! The geometry follows `ultralytics.data.augment.LetterBox` (8.4) exactly: Python's round-half-even,
//! `max(round(side · r), 1)`, centred padding split as `round(d/2 − 0.1)` / `round(d/2 + 0.1)`, and
//! `auto` padding to a stride multiple. The resize reproduces OpenCV's `cv2.resize(INTER_LINEAR)` on
//! 8-bit images bit for bit: pixel-centre sampling, 11-bit fixed-point weights, OpenCV's rounding,
//! and the switch to area averaging that OpenCV makes for an exact 2× downscale. No maintained crate
//! resizes this way (the `image` and `fast_image_resize` filters widen their kernel when
//! downscaling), and teachers, students and goldens must see the pixels Ultralytics feeds its models.
//! [`crate::preprocess`] composes this into Ultralytics' `val` preparation.

use image::{Rgb, RgbImage};
use serde::{Deserialize, Serialize};

use crate::boxes::Xyxy;

/// The value of padding pixels, as Ultralytics uses.
pub const PAD_VALUE: u8 = 114;

/// How to letterbox (the arguments of Ultralytics' `LetterBox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LetterboxOptions {
    /// Target width.
    pub width: u32,
    /// Target height.
    pub height: u32,
    /// Pad only to the next multiple of `stride` instead of the full target (Ultralytics `auto`).
    pub auto: bool,
    /// Stride for `auto`.
    pub stride: u32,
    /// Allow enlarging small images (Ultralytics `scaleup`; validation uses `false`).
    pub scaleup: bool,
    /// Centre the image (`true`) or place it top-left.
    pub center: bool,
}

impl LetterboxOptions {
    /// A square `size` × `size` target as Ultralytics' `predict` uses for a fixed-shape model.
    pub fn square(size: u32) -> Self {
        Self { width: size, height: size, auto: false, stride: 32, scaleup: true, center: true }
    }
}

/// The geometry of one letterbox: where the resized image sits inside the output.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Letterbox {
    /// Original width and height.
    pub src: (u32, u32),
    /// Resized (unpadded) width and height.
    pub resized: (u32, u32),
    /// Padding left, top, right, bottom.
    pub pad: (u32, u32, u32, u32),
    /// The scale ratio `r` applied to both axes.
    pub ratio: f64,
}

/// Python's `round()` for floats: half to even.
fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 { 2.0 * (x / 2.0).round() } else { r }
}

impl Letterbox {
    /// Computes the geometry for an image `src_width` × `src_height` (both ≥ 1).
    pub fn new(src_width: u32, src_height: u32, options: &LetterboxOptions) -> Self {
        let (w0, h0) = (f64::from(src_width.max(1)), f64::from(src_height.max(1)));
        let (tw, th) = (f64::from(options.width), f64::from(options.height));
        let mut r = (th / h0).min(tw / w0);
        if !options.scaleup {
            r = r.min(1.0);
        }
        let new_w = round_half_even(w0 * r).max(1.0);
        let new_h = round_half_even(h0 * r).max(1.0);
        let (mut dw, mut dh) = (tw - new_w, th - new_h);
        if options.auto {
            let s = f64::from(options.stride.max(1));
            dw = dw.rem_euclid(s);
            dh = dh.rem_euclid(s);
        }
        let (left, top, right, bottom) = if options.center {
            let (dw, dh) = (dw / 2.0, dh / 2.0);
            (
                round_half_even(dw - 0.1),
                round_half_even(dh - 0.1),
                round_half_even(dw + 0.1),
                round_half_even(dh + 0.1),
            )
        } else {
            (0.0, 0.0, round_half_even(dw + 0.1), round_half_even(dh + 0.1))
        };
        let px = |v: f64| v.max(0.0) as u32;
        Self {
            src: (src_width, src_height),
            resized: (new_w as u32, new_h as u32),
            pad: (px(left), px(top), px(right), px(bottom)),
            ratio: r,
        }
    }

    /// Output width and height (resized plus padding).
    pub fn output_size(&self) -> (u32, u32) {
        (self.resized.0 + self.pad.0 + self.pad.2, self.resized.1 + self.pad.1 + self.pad.3)
    }

    /// Letterboxes `image` (which must be `src` in size).
    pub fn apply(&self, image: &RgbImage) -> RgbImage {
        let resized = if image.dimensions() == self.resized {
            image.clone()
        } else {
            resize_bilinear_like_opencv(image, self.resized.0, self.resized.1)
        };
        let (out_w, out_h) = self.output_size();
        let mut out = RgbImage::from_pixel(out_w, out_h, Rgb([PAD_VALUE; 3]));
        image::imageops::replace(&mut out, &resized, i64::from(self.pad.0), i64::from(self.pad.1));
        out
    }

    /// Maps a box from letterboxed pixels back to original pixels, clipped to the original image,
    /// as Ultralytics' `scale_boxes` does (per-axis gains from the rounded resized size).
    pub fn unmap(&self, bbox: Xyxy) -> Xyxy {
        let (w0, h0) = (self.src.0 as f32, self.src.1 as f32);
        let gx = self.resized.0 as f32 / w0;
        let gy = self.resized.1 as f32 / h0;
        let (px, py) = (self.pad.0 as f32, self.pad.1 as f32);
        Xyxy::new((bbox.x1 - px) / gx, (bbox.y1 - py) / gy, (bbox.x2 - px) / gx, (bbox.y2 - py) / gy)
            .clip(w0, h0)
    }

    /// Maps a box from original pixels into letterboxed pixels.
    pub fn map(&self, bbox: Xyxy) -> Xyxy {
        let gx = self.resized.0 as f32 / self.src.0 as f32;
        let gy = self.resized.1 as f32 / self.src.1 as f32;
        let (px, py) = (self.pad.0 as f32, self.pad.1 as f32);
        Xyxy::new(bbox.x1 * gx + px, bbox.y1 * gy + py, bbox.x2 * gx + px, bbox.y2 * gy + py)
    }
}

/// Letterboxes `image` with `options`, returning the image and its geometry.
pub fn letterbox(image: &RgbImage, options: &LetterboxOptions) -> (RgbImage, Letterbox) {
    let geometry = Letterbox::new(image.width(), image.height(), options);
    (geometry.apply(image), geometry)
}

const COEF_BITS: u32 = 11;
const COEF_SCALE: f32 = (1 << COEF_BITS) as f32;

/// The sampling position of each destination coordinate as OpenCV's `resize` computes it for
/// `INTER_LINEAR`: `floor` and fraction of `(d + 0.5) · src/dst − 0.5`, in `f32`.
fn linear_positions(src: u32, dst: u32) -> impl Iterator<Item = (i64, f32)> {
    let scale = f64::from(src) / f64::from(dst);
    (0..dst).map(move |d| {
        let f = ((f64::from(d) + 0.5) * scale - 0.5) as f32;
        let s = f.floor() as i64;
        (s, f - s as f32)
    })
}

/// Fixed-point weights (summing to 2048) of a fraction; `saturate_cast<short>(float)` rounds half
/// to even.
fn fixed_weights(frac: f32) -> [i32; 2] {
    [((1.0 - frac) * COEF_SCALE).round_ties_even() as i32, (frac * COEF_SCALE).round_ties_even() as i32]
}

/// Horizontal taps: source index and weights per destination column. At the borders OpenCV clamps
/// the index and zeroes the fraction.
fn linear_taps(src: u32, dst: u32) -> Vec<(usize, [i32; 2])> {
    let last = i64::from(src) - 1;
    linear_positions(src, dst)
        .map(|(s, frac)| {
            let (s, frac) = if s < 0 {
                (0, 0.0)
            } else if s >= last {
                (last, 0.0)
            } else {
                (s, frac)
            };
            (s as usize, fixed_weights(frac))
        })
        .collect()
}

/// Vertical taps: the two source rows and their weights per destination row. Unlike columns, OpenCV
/// keeps the fraction at the borders and clamps only the row indices, so a border row blends a row
/// with itself (which rounds differently from a weight of 2048 on one row).
fn vertical_taps(src: u32, dst: u32) -> Vec<([usize; 2], [i32; 2])> {
    let clamp = |s: i64| s.clamp(0, i64::from(src) - 1) as usize;
    linear_positions(src, dst).map(|(s, frac)| ([clamp(s), clamp(s + 1)], fixed_weights(frac))).collect()
}

/// `cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)` for 8-bit RGB, bit-exact
/// against opencv-python 5.0.0 (the version next to Ultralytics 8.4.190 in the reference
/// environment) when shrinking and when enlarging: pixel-centre sampling, 11-bit fixed-point
/// weights, OpenCV's vectorised rounding for every byte, unclamped fractions at the top and bottom
/// borders, and the switch to area averaging for an exact 2× downscale. The goldens
/// (crates/core/tests/letterbox_golden.rs, val_preprocess_golden.rs) hold it to that. Older OpenCV
/// builds that round the last bytes of each row with a scalar formula can differ there by one level.
pub fn resize_bilinear_like_opencv(image: &RgbImage, width: u32, height: u32) -> RgbImage {
    let (sw, sh) = image.dimensions();
    if sw == 2 * width && sh == 2 * height {
        return resize_area_half(image);
    }
    let xs = linear_taps(sw, width);
    let ys = vertical_taps(sh, height);
    let src = image.as_raw();
    let row_stride = sw as usize * 3;
    let last = sw as usize - 1;
    // Byte offsets of both taps per destination column (the second clamped: its weight is 0 there).
    let taps: Vec<(usize, usize, i32, i32)> =
        xs.iter().map(|&(sx, [w0, w1])| (sx * 3, (sx + 1).min(last) * 3, w0, w1)).collect();
    let dst_stride = width as usize * 3;
    // Horizontal pass, only for the source rows some destination row reads, into fixed-point
    // intermediates (scaled by 2048), one flat buffer.
    let mut needed = vec![false; sh as usize];
    for &([y0, y1], _) in &ys {
        needed[y0] = true;
        needed[y1] = true;
    }
    let mut rows = vec![0i32; sh as usize * dst_stride];
    for (y, line) in rows.chunks_exact_mut(dst_stride).enumerate().filter(|(y, _)| needed[*y]) {
        let row = &src[y * row_stride..(y + 1) * row_stride];
        for (out, &(a, b, w0, w1)) in line.chunks_exact_mut(3).zip(&taps) {
            for c in 0..3 {
                out[c] = i32::from(row[a + c]) * w0 + i32::from(row[b + c]) * w1;
            }
        }
    }
    let mut out = RgbImage::new(width, height);
    let dst = &mut *out;
    for (line, &([y0, y1], [b0, b1])) in dst.chunks_exact_mut(dst_stride).zip(&ys) {
        let r0 = &rows[y0 * dst_stride..(y0 + 1) * dst_stride];
        let r1 = &rows[y1 * dst_stride..(y1 + 1) * dst_stride];
        for ((px, &s0), &s1) in line.iter_mut().zip(r0).zip(r1) {
            *px = vertical_blend(s0, s1, b0, b1);
        }
    }
    out
}

/// OpenCV's vectorised vertical blend (`VResizeLinearVec_32s8u`):
/// `((b0·(s0>>4))>>16 + (b1·(s1>>4))>>16 + 2) >> 2`, with the 16-bit saturation of `v_pack`.
fn vertical_blend(s0: i32, s1: i32, b0: i32, b1: i32) -> u8 {
    let hi = |s: i32, b: i32| ((s >> 4).clamp(-32768, 32767) * b) >> 16;
    ((hi(s0, b0) + hi(s1, b1) + 2) >> 2).clamp(0, 255) as u8
}

/// OpenCV's `INTER_AREA` fast path for an exact 2× downscale: the rounded mean of each 2×2 block.
fn resize_area_half(image: &RgbImage) -> RgbImage {
    let (w, h) = (image.width() / 2, image.height() / 2);
    RgbImage::from_fn(w, h, |x, y| {
        let mut sum = [0u32; 3];
        for (dx, dy) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let p = image.get_pixel(2 * x + dx, 2 * y + dy);
            for c in 0..3 {
                sum[c] += u32::from(p[c]);
            }
        }
        Rgb(sum.map(|s| ((s + 2) >> 2) as u8))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_rounding() {
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(3.5), 4.0);
        assert_eq!(round_half_even(-0.5), -0.0);
        assert_eq!(round_half_even(2.4), 2.0);
    }

    #[test]
    fn geometry_of_a_wide_image() {
        let lb = Letterbox::new(256, 192, &LetterboxOptions::square(160));
        assert_eq!(lb.resized, (160, 120));
        assert_eq!(lb.pad, (0, 20, 0, 20));
        assert_eq!(lb.output_size(), (160, 160));
        // Odd padding: 23 rows split 11 above, 12 below (round(11.4), round(11.6)).
        let lb = Letterbox::new(100, 77, &LetterboxOptions::square(100));
        assert_eq!(lb.pad, (0, 11, 0, 12));
        let auto = LetterboxOptions { auto: true, ..LetterboxOptions::square(160) };
        let lb = Letterbox::new(256, 192, &auto);
        assert_eq!(lb.output_size(), (160, 128));
        let no_up = LetterboxOptions { scaleup: false, ..LetterboxOptions::square(640) };
        assert_eq!(Letterbox::new(256, 192, &no_up).resized, (256, 192));
    }

    #[test]
    fn unmap_inverts_map() {
        let lb = Letterbox::new(257, 191, &LetterboxOptions::square(160));
        let b = Xyxy::new(10.0, 20.0, 100.0, 150.0);
        let back = lb.unmap(lb.map(b));
        for (a, b) in [(back.x1, b.x1), (back.y1, b.y1), (back.x2, b.x2), (back.y2, b.y2)] {
            assert!((a - b).abs() < 1e-3, "{back:?} vs {b:?}");
        }
    }

    #[test]
    fn constant_image_stays_constant_and_pads_grey() {
        let img = RgbImage::from_pixel(90, 60, Rgb([10, 200, 30]));
        let (out, lb) = letterbox(&img, &LetterboxOptions::square(64));
        assert_eq!(out.dimensions(), (64, 64));
        let (x, y) = (lb.pad.0 + 5, lb.pad.1 + 5);
        assert_eq!(out.get_pixel(x, y), &Rgb([10, 200, 30]));
        assert_eq!(out.get_pixel(0, 0), &Rgb([PAD_VALUE; 3]));
    }

    #[test]
    fn taps_sum_to_scale() {
        for (s, d) in [(256, 160), (100, 333), (7, 3)] {
            for (i, [a, b]) in linear_taps(s, d) {
                assert_eq!(a + b, 2048);
                assert!(i < s as usize);
            }
            for ([r0, r1], [a, b]) in vertical_taps(s, d) {
                assert_eq!(a + b, 2048);
                assert!(r0 <= r1 && r1 < s as usize);
            }
        }
    }

    #[test]
    fn border_rows_keep_their_fraction_when_enlarging() {
        // 4 → 8 rows: the first destination row samples at −0.25, the last at 3.25.
        let taps = vertical_taps(4, 8);
        assert_eq!(taps[0], ([0, 0], [512, 1536]));
        assert_eq!(taps[7], ([3, 3], [1536, 512]));
        assert_eq!(linear_taps(4, 8)[0], (0, [2048, 0]));
    }
}
