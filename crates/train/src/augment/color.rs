//! Ultralytics' `RandomHSV` on 8-bit RGB through OpenCV's 8-bit HSV (hue 0..180).
//!
//! `cv2.cvtColor(…, COLOR_BGR2HSV)` is integer arithmetic with rounded reciprocal tables.
//! `COLOR_HSV2BGR` is `f32` arithmetic with `1 - s·f` fused into one FMA; OpenCV's vector loop
//! (x86-64 AVX2: blocks of [`VECTOR_BLOCK`] pixels from the start of each row) *truncates* the
//! result `·255`, its scalar loop (the rest of the row) rounds it. Both are reproduced bit for bit:
//! all 2²⁴ inputs of each direction equal opencv-python 5.0.0's output (the tests hold checksums).

use image::RgbImage;
use rand::{Rng, RngExt};

/// Pixels per iteration of OpenCV's `HSV2RGB_b` vector loop with 256-bit registers (4 · 8 lanes).
const VECTOR_BLOCK: u32 = 32;

/// Fixed-point shift of OpenCV's `RGB2HSV_b` tables.
const HSV_SHIFT: u32 = 12;

/// Ultralytics' `RandomHSV`: draws `r = uniform(-1, 1)³ · (h, s, v)`, shifts hue by `r₀ · 180`
/// (OpenCV hue units, modulo 180) and multiplies saturation and value by `1 + r₁` and `1 + r₂`
/// (clipped to 255, truncated), through lookup tables on the 8-bit HSV image. All gains zero:
/// nothing is drawn and the image is untouched, as in Ultralytics.
pub fn hsv<R: Rng + ?Sized>(image: &mut RgbImage, h: f32, s: f32, v: f32, rng: &mut R) {
    if h == 0.0 && s == 0.0 && v == 0.0 {
        return;
    }
    let gains = [h, s, v].map(|g| (2.0 * rng.random::<f64>() - 1.0) * f64::from(g));
    apply_gains(image, gains);
}

/// [`hsv`] with the random factors `r` already drawn (each in `[-gain, gain]`). Its fused
/// multiply-adds are one instruction where the CPU has them (see `warp::warp_affine`).
pub(crate) fn apply_gains(image: &mut RgbImage, r: [f64; 3]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        #[allow(unsafe_code)]
        // SAFETY: the CPU has FMA, the one feature `apply_gains_fma` is compiled for.
        return unsafe { apply_gains_fma(image, r) };
    }
    convert_pixels(image, r);
}

/// [`convert_pixels`] compiled with FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
fn apply_gains_fma(image: &mut RgbImage, r: [f64; 3]) {
    convert_pixels(image, r);
}

/// [`apply_gains`]'s work, inlined into each of its dispatch targets.
#[inline(always)]
fn convert_pixels(image: &mut RgbImage, r: [f64; 3]) {
    let luts = lookup_tables(r);
    let tables = RgbToHsvTables::new();
    let vector_end = image.width() / VECTOR_BLOCK * VECTOR_BLOCK;
    for (x, _, pixel) in image.enumerate_pixels_mut() {
        let [h, s, v] = tables.convert(pixel.0);
        let shifted = [luts[0][h as usize], luts[1][s as usize], luts[2][v as usize]];
        pixel.0 = hsv_to_rgb(shifted, x < vector_end);
    }
}

/// Ultralytics' three tables: `(x + r₀·180) % 180`, `clip(x·(1 + r₁), 0, 255)`,
/// `clip(x·(1 + r₂), 0, 255)`, each cast to `u8` by truncation (in `f64`, as NumPy does).
fn lookup_tables(r: [f64; 3]) -> [[u8; 256]; 3] {
    let gain =
        |g: f64| -> [u8; 256] { std::array::from_fn(|x| (x as f64 * (g + 1.0)).clamp(0.0, 255.0) as u8) };
    // Python's float `%` is Euclidean for a positive divisor; a tiny negative sum can round up to
    // 180.0, which the cast keeps (OpenCV wraps hue 180 to 0 when converting back).
    let hue = std::array::from_fn(|x| (x as f64 + r[0] * 180.0).rem_euclid(180.0) as u8);
    [hue, gain(r[1]), gain(r[2])]
}

/// OpenCV's reciprocal tables of `RGB2HSV_b` for hue range 180.
pub(crate) struct RgbToHsvTables {
    saturation: [i32; 256],
    hue: [i32; 256],
}

impl RgbToHsvTables {
    /// `sdiv[i] = round(255·2¹² / i)`, `hdiv[i] = round(180·2¹² / (6i))`, both 0 at 0
    /// (`saturate_cast<int>` rounds half to even).
    pub(crate) fn new() -> Self {
        let mut saturation = [0i32; 256];
        let mut hue = [0i32; 256];
        for i in 1..256 {
            let d = i as f64;
            saturation[i] = (f64::from(255 << HSV_SHIFT) / d).round_ties_even() as i32;
            hue[i] = (f64::from(180 << HSV_SHIFT) / (6.0 * d)).round_ties_even() as i32;
        }
        Self { saturation, hue }
    }

    /// `cv2.cvtColor(rgb, COLOR_RGB2HSV)` for one pixel: `[h (0..180), s, v]`.
    #[inline(always)]
    pub(crate) fn convert(&self, [r, g, b]: [u8; 3]) -> [u8; 3] {
        let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
        let v = r.max(g).max(b);
        let diff = v - r.min(g).min(b);
        let round = 1 << (HSV_SHIFT - 1);
        let s = (diff * self.saturation[v as usize] + round) >> HSV_SHIFT;
        let h = if v == r {
            g - b
        } else if v == g {
            b - r + 2 * diff
        } else {
            r - g + 4 * diff
        };
        let mut h = (h * self.hue[diff as usize] + round) >> HSV_SHIFT;
        if h < 0 {
            h += 180;
        }
        [h as u8, s as u8, v as u8]
    }
}

/// `cv2.cvtColor(hsv, COLOR_HSV2RGB)` for one 8-bit pixel (hue 0..180; larger hues wrap): `f32`
/// throughout, `1 - s·f` and `1 - s·(1-f)` each one fused multiply-add, the result `·255`
/// truncated when OpenCV's `vector` loop converts the pixel, rounded half to even otherwise.
#[inline(always)]
pub(crate) fn hsv_to_rgb([h, s, v]: [u8; 3], vector: bool) -> [u8; 3] {
    let hue = f32::from(h) * (6.0f32 / 180.0);
    let s = f32::from(s) * (1.0f32 / 255.0);
    let v = f32::from(v) * (1.0f32 / 255.0);
    // Casts truncate exactly like `trunc` for these small non-negative values, without the libm
    // call `trunc` costs on baseline x86-64.
    let whole = (hue as u32) as f32;
    let f = hue - whole;
    let sector = (whole - ((whole * (1.0f32 / 6.0)) as u32) as f32 * 6.0) as usize;
    let tab = [v, v * (1.0 - s), v * (-s).mul_add(f, 1.0), v * (-s).mul_add(1.0 - f, 1.0)];
    // Indices into `tab` of (r, g, b) per sector (OpenCV's table lists b, g, r).
    const SECTORS: [[usize; 3]; 6] = [[0, 3, 1], [2, 0, 1], [1, 0, 3], [1, 2, 0], [3, 1, 0], [0, 1, 2]];
    // `as u8` truncates and saturates, as `v_trunc` and `v_pack_u` do.
    let to_byte = |c: f32| if vector { c as u8 } else { round_half_even(c).clamp(0.0, 255.0) as u8 };
    SECTORS[sector.min(5)].map(|i| to_byte(tab[i] * 255.0))
}

/// `v` rounded to the nearest integer, ties to even (`cvRound`), for `|v| < 2²²`: adding
/// 1.5·2²³ puts the units digit at the last bit, where IEEE rounding does the work.
#[inline(always)]
pub(crate) fn round_half_even(v: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    (v + MAGIC) - MAGIC
}
