//! What the camera adds after the scene is drawn: optical blur, uneven lighting with shadows, a
//! colour cast, and sensor noise.

use image::RgbImage;
use rand::RngExt;

use super::SynthRng;
use super::math::{chance, gauss, sin_cos_turns, uniform, uniform_int};
use super::preset::PresetParams;

/// The photometric effects of one image, sampled up front.
struct Exposure {
    brightness: f32,
    /// Direction (sin, cos) and strength of the linear light falloff.
    gradient: (f32, f32, f32),
    /// Centre, radius and depth of a soft shadow (depth 0: none).
    shadow: (f32, f32, f32, f32),
    /// Per-channel gain: colour cast and white-balance error.
    channel_gain: [f32; 3],
    noise_sigma: f32,
}

/// Applies blur, lighting, colour cast and noise from `params` to `image`.
pub(crate) fn apply(image: &mut RgbImage, params: &PresetParams, rng: &mut SynthRng) {
    for _ in 0..uniform_int(rng, params.blur_passes) {
        blur_binomial(image);
    }
    let exposure = sample_exposure(image.dimensions(), params, rng);
    expose(image, &exposure, rng);
}

fn sample_exposure((width, height): (u32, u32), params: &PresetParams, rng: &mut SynthRng) -> Exposure {
    let brightness = uniform(rng, params.brightness);
    let (sin, cos) = sin_cos_turns(rng.random());
    let gradient = (sin, cos, uniform(rng, params.light_gradient));
    let shadow = if chance(rng, params.shadow_chance) {
        let short_side = width.min(height) as f32;
        (
            uniform(rng, (0.0, width as f32)),
            uniform(rng, (0.0, height as f32)),
            uniform(rng, (0.3, 0.8)) * short_side,
            uniform(rng, params.shadow_depth),
        )
    } else {
        (0.0, 0.0, 1.0, 0.0)
    };
    let cast = uniform(rng, params.colour_cast);
    let jitter = params.white_balance_jitter;
    let warm = [1.0 + cast, 1.0 + cast * 0.4, 1.0 - cast];
    let channel_gain = warm.map(|g| g * (1.0 + uniform(rng, (-jitter, jitter))));
    Exposure { brightness, gradient, shadow, channel_gain, noise_sigma: uniform(rng, params.noise_sigma) }
}

/// Multiplies each pixel by the light at its position and the channel gains, then adds noise.
fn expose(image: &mut RgbImage, exposure: &Exposure, rng: &mut SynthRng) {
    let (width, height) = image.dimensions();
    let (half_w, half_h) = (width as f32 / 2.0, height as f32 / 2.0);
    let (sin, cos, strength) = exposure.gradient;
    // Normalises the projection so that the image corners lie within ±1.
    let reach = (half_w * cos.abs() + half_h * sin.abs()).max(1.0);
    let (sx, sy, radius, depth) = exposure.shadow;
    for (x, y, pixel) in image.enumerate_pixels_mut() {
        let (px, py) = (x as f32 + 0.5, y as f32 + 0.5);
        let along = ((px - half_w) * cos + (py - half_h) * sin) / reach;
        let (dx, dy) = ((px - sx) / radius, (py - sy) / radius);
        let falloff = (1.0 - (dx * dx + dy * dy)).max(0.0);
        let light = exposure.brightness * (1.0 + strength * along) * (1.0 - depth * falloff * falloff);
        let shared = gauss(rng) * 0.5;
        for (c, value) in pixel.0.iter_mut().enumerate() {
            let noise = exposure.noise_sigma * (shared + gauss(rng) * 0.866);
            let v = f32::from(*value) * light * exposure.channel_gain[c] + noise;
            *value = v.round().clamp(0.0, 255.0) as u8;
        }
    }
}

/// One pass of the separable kernel [1, 2, 1] / 4 in both directions, edges clamped. Integer
/// arithmetic, so exact on every target.
fn blur_binomial(image: &mut RgbImage) {
    let (width, height) = image.dimensions();
    let (w, h) = (width as usize, height as usize);
    if w == 0 || h == 0 {
        return;
    }
    let src: &mut [u8] = image;
    let mut tmp = vec![0u8; src.len()];
    let at = |x: usize, y: usize, c: usize| (y * w + x) * 3 + c;
    for y in 0..h {
        for x in 0..w {
            let (l, r) = (x.saturating_sub(1), (x + 1).min(w - 1));
            for c in 0..3 {
                let sum = u16::from(src[at(l, y, c)])
                    + 2 * u16::from(src[at(x, y, c)])
                    + u16::from(src[at(r, y, c)]);
                tmp[at(x, y, c)] = ((sum + 2) / 4) as u8;
            }
        }
    }
    for y in 0..h {
        let (u, d) = (y.saturating_sub(1), (y + 1).min(h - 1));
        for x in 0..w {
            for c in 0..3 {
                let sum = u16::from(tmp[at(x, u, c)])
                    + 2 * u16::from(tmp[at(x, y, c)])
                    + u16::from(tmp[at(x, d, c)]);
                src[at(x, y, c)] = ((sum + 2) / 4) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use image::Rgb;
    use rand::SeedableRng;

    #[test]
    fn blur_keeps_flat_images_and_spreads_a_dot() {
        let mut flat = RgbImage::from_pixel(5, 4, Rgb([77, 78, 79]));
        blur_binomial(&mut flat);
        assert!(flat.pixels().all(|p| p.0 == [77, 78, 79]));
        let mut dot = RgbImage::new(5, 5);
        dot.put_pixel(2, 2, Rgb([160, 0, 0]));
        blur_binomial(&mut dot);
        assert_eq!(dot.get_pixel(2, 2).0[0], 40);
        assert_eq!(dot.get_pixel(1, 2).0[0], 20);
        assert_eq!(dot.get_pixel(1, 1).0[0], 10);
        blur_binomial(&mut RgbImage::new(0, 0));
    }

    #[test]
    fn exposure_darkens_and_adds_noise() {
        let mut rng = SynthRng::seed_from_u64(9);
        let mut image = RgbImage::from_pixel(64, 48, Rgb([128, 128, 128]));
        let exposure = Exposure {
            brightness: 0.5,
            gradient: (0.0, 1.0, 0.0),
            shadow: (0.0, 0.0, 1.0, 0.0),
            channel_gain: [1.0; 3],
            noise_sigma: 10.0,
        };
        expose(&mut image, &exposure, &mut rng);
        let values: Vec<f32> = image.pixels().flat_map(|p| p.0).map(f32::from).collect();
        let mean = values.iter().sum::<f32>() / values.len() as f32;
        let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / values.len() as f32;
        assert!((mean - 64.0).abs() < 1.0, "mean {mean}");
        assert!((var.sqrt() - 10.0).abs() < 1.0, "std {}", var.sqrt());
    }
}
