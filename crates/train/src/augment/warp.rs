//! `cv2.warpAffine(image, M, dsize, borderValue=114)` with bilinear interpolation, as
//! opencv-python 5.0.0 computes it on x86-64 (AVX2 dispatch): `M` inverted in `f64`, then `f32`
//! source coordinates and `f32` interpolation, rounded half to even. OpenCV's vector loop covers
//! each row in blocks of [`LANES`] pixels with fused multiply-adds; the remaining pixels at the
//! end of a row go through its scalar loop, which rounds every product. Both are reproduced, so
//! the output is OpenCV's byte for byte (the tests hold checksums made with cv2).

use image::RgbImage;

use super::color::round_half_even;

/// Pixels per iteration of OpenCV's vector loop with 256-bit registers (`2 · 8` lanes of `f32`).
const LANES: u32 = 16;

/// A forward affine map `x' = a·x + b·y + c`, `y' = d·x + e·y + f` (`cv2`'s `M[:2]`).
pub(crate) type Affine = [f32; 6];

/// The inverse of `m` as `cv::warpAffine` computes it (in `f64`, then cast to `f32`); a singular
/// `m` gives zeros, as in OpenCV.
fn invert(m: &Affine) -> [f32; 6] {
    let [a, b, c, d, e, f] = m.map(f64::from);
    let det = a * e - b * d;
    let det = if det != 0.0 { 1.0 / det } else { 0.0 };
    let (ia, ib, id, ie) = (e * det, -b * det, -d * det, a * det);
    let (ic, i_f) = (-ia * c - ib * f, -id * c - ie * f);
    [ia, ib, ic, id, ie, i_f].map(|v| v as f32)
}

/// `image` warped by `m` into `width` × `height`, pixels from outside `image` filled with `fill`.
///
/// The fused multiply-adds are one instruction where the CPU has them: on x86-64 this checks for
/// FMA at run time (baseline x86-64 lacks it, and `f32::mul_add` would be a call per product);
/// aarch64 always has them. The result is the same bytes either way.
pub(crate) fn warp_affine(image: &RgbImage, m: &Affine, width: u32, height: u32, fill: u8) -> RgbImage {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has FMA, the one feature `warp_affine_fma` is compiled for.
        return unsafe { warp_affine_fma(image, m, width, height, fill) };
    }
    warp_rows(image, m, width, height, fill)
}

/// [`warp_rows`] compiled with FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn warp_affine_fma(image: &RgbImage, m: &Affine, width: u32, height: u32, fill: u8) -> RgbImage {
    warp_rows(image, m, width, height, fill)
}

/// [`warp_affine`]'s work, inlined into each of its dispatch targets.
#[inline(always)]
fn warp_rows(image: &RgbImage, m: &Affine, width: u32, height: u32, fill: u8) -> RgbImage {
    let inv = invert(m);
    let vector_end = width / LANES * LANES;
    let mut out = RgbImage::new(width, height);
    for (y, row) in out.enumerate_rows_mut() {
        let yf = y as f32;
        // The vector loop's per-row terms, `f32(y·M₁ + M₂)` and `f32(y·M₄ + M₅)`.
        let (row_x, row_y) = (yf * inv[1] + inv[2], yf * inv[4] + inv[5]);
        for (x, _, pixel) in row {
            let xf = x as f32;
            let fused = x < vector_end;
            let (sx, sy) = if fused {
                (inv[0].mul_add(xf, row_x), inv[3].mul_add(xf, row_y))
            } else {
                (xf * inv[0] + yf * inv[1] + inv[2], xf * inv[3] + yf * inv[4] + inv[5])
            };
            pixel.0 = sample(image, sx, sy, fused, fill);
        }
    }
    out
}

/// `⌊v⌋` for `v` within `±2³¹` (beyond, any value outside the image does), without libm.
#[inline(always)]
fn floor(v: f32) -> i64 {
    let t = v.clamp(-2.0e9, 2.0e9) as i64;
    if (t as f32) > v { t - 1 } else { t }
}

/// The bilinear value at `(sx, sy)`; taps outside the image read `fill`.
#[inline(always)]
fn sample(image: &RgbImage, sx: f32, sy: f32, fused: bool, fill: u8) -> [u8; 3] {
    let (ix, iy) = (floor(sx), floor(sy));
    let (ax, ay) = (sx - ix as f32, sy - iy as f32);
    let (w, h) = (i64::from(image.width()), i64::from(image.height()));
    if ix + 1 < 0 || ix >= w || iy + 1 < 0 || iy >= h {
        return [fill; 3];
    }
    let raw = image.as_raw();
    let stride = w as usize * 3;
    let interior = ix >= 0 && iy >= 0 && ix + 1 < w && iy + 1 < h;
    let tap = |dx: i64, dy: i64| -> [f32; 3] {
        let (x, y) = (ix + dx, iy + dy);
        if interior || ((0..w).contains(&x) && (0..h).contains(&y)) {
            let at = y as usize * stride + x as usize * 3;
            [raw[at], raw[at + 1], raw[at + 2]].map(f32::from)
        } else {
            [f32::from(fill); 3]
        }
    };
    let (p00, p01, p10, p11) = (tap(0, 0), tap(1, 0), tap(0, 1), tap(1, 1));
    let lerp = |a: f32, b: f32, t: f32| if fused { t.mul_add(b - a, a) } else { a + t * (b - a) };
    std::array::from_fn(|c| {
        let top = lerp(p00[c], p01[c], ax);
        let bottom = lerp(p10[c], p11[c], ax);
        round_half_even(lerp(top, bottom, ay)).clamp(0.0, 255.0) as u8
    })
}
