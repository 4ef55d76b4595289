//! Background textures: every pixel is a blend of two colours by a pattern value `t` in [0, 1].

use image::{Rgb, RgbImage};
use rand::RngExt;

use super::SynthRng;
use super::math::{hsv, lattice, sin_cos_turns, smoothstep, uniform};
use super::preset::{PresetParams, Texture};

/// The pattern of one image, with everything sampled up front.
struct Pattern {
    texture: Texture,
    /// Feature size in pixels.
    scale: f32,
    sin: f32,
    cos: f32,
    /// Stripe edge sharpness (1 = triangle wave).
    sharpness: f32,
    salt: u64,
}

impl Pattern {
    fn value(&self, x: f32, y: f32, (u_min, u_max): (f32, f32)) -> f32 {
        let u = x * self.cos + y * self.sin;
        let v = y * self.cos - x * self.sin;
        match self.texture {
            Texture::Gradient => (u - u_min) / (u_max - u_min).max(1.0),
            Texture::Stripes => {
                let phase = u / self.scale;
                let triangle = ((phase - phase.floor()) * 2.0 - 1.0).abs();
                ((triangle - 0.5) * self.sharpness + 0.5).clamp(0.0, 1.0)
            }
            Texture::Checker => {
                let parity = (u / self.scale).floor() as i64 + (v / self.scale).floor() as i64;
                (parity & 1) as f32
            }
            Texture::SmoothNoise => stretch(fbm(u / self.scale, v / self.scale, 2, self.salt)),
            Texture::RoughNoise => stretch(fbm(x / self.scale, y / self.scale, 4, self.salt)),
            Texture::Streaks => stretch(fbm(u / (self.scale * 6.0), v / (self.scale * 0.6), 3, self.salt)),
        }
    }
}

/// Fills `image` with a background drawn from `params`.
pub(crate) fn paint_background(image: &mut RgbImage, params: &PresetParams, rng: &mut SynthRng) {
    let (width, height) = image.dimensions();
    let short_side = width.min(height) as f32;
    let texture = pick_texture(params.textures, rng);
    let (sin, cos) = sin_cos_turns(rng.random());
    let pattern = Pattern {
        texture,
        scale: (uniform(rng, params.texture_scale) * short_side).max(2.0),
        sin,
        cos,
        sharpness: uniform(rng, (1.0, 4.0)),
        salt: rng.random(),
    };
    let [c0, c1] = background_colours(params, rng);
    let corners = [(0.0, 0.0), (width as f32, 0.0), (0.0, height as f32), (width as f32, height as f32)];
    let projections = corners.map(|(x, y)| x * cos + y * sin);
    let u_range = (
        projections.iter().copied().fold(f32::INFINITY, f32::min),
        projections.iter().copied().fold(f32::NEG_INFINITY, f32::max),
    );
    for (x, y, pixel) in image.enumerate_pixels_mut() {
        let t = pattern.value(x as f32 + 0.5, y as f32 + 0.5, u_range);
        *pixel = Rgb(std::array::from_fn(|c| (c0[c] + (c1[c] - c0[c]) * t).round().clamp(0.0, 255.0) as u8));
    }
}

/// Two colours of similar hue whose brightness differs by the preset's texture contrast.
fn background_colours(params: &PresetParams, rng: &mut SynthRng) -> [[f32; 3]; 2] {
    let hue: f32 = rng.random();
    let saturation = uniform(rng, params.background_saturation);
    let value = uniform(rng, (0.3, 0.85));
    let contrast = uniform(rng, params.texture_contrast);
    let other = if value + contrast <= 0.95 { value + contrast } else { value - contrast };
    let hue_shift = uniform(rng, (-0.08, 0.08));
    [hsv(hue, saturation, value), hsv(hue + hue_shift, saturation, other.max(0.03))]
}

fn pick_texture(weights: &[(Texture, u32)], rng: &mut SynthRng) -> Texture {
    let total: u32 = weights.iter().map(|(_, w)| w).sum();
    let mut pick = super::math::uniform_int(rng, (0, total.saturating_sub(1)));
    for &(texture, weight) in weights {
        if pick < weight {
            return texture;
        }
        pick -= weight;
    }
    Texture::Gradient
}

/// Fractal value noise in [0, 1]: `octaves` layers, each twice as fine and half as strong.
fn fbm(x: f32, y: f32, octaves: u32, salt: u64) -> f32 {
    let (mut sum, mut norm, mut amplitude, mut frequency) = (0.0, 0.0, 1.0, 1.0);
    for octave in 0..octaves {
        sum += amplitude * value_noise(x * frequency, y * frequency, salt.wrapping_add(u64::from(octave)));
        norm += amplitude;
        amplitude *= 0.5;
        frequency *= 2.0;
    }
    sum / norm
}

/// Bilinear interpolation (with smoothstep fade) of random values on the integer lattice.
fn value_noise(x: f32, y: f32, salt: u64) -> f32 {
    let (fx, fy) = (x.floor(), y.floor());
    let (ix, iy) = (fx as i32, fy as i32);
    let (tx, ty) = (smoothstep(x - fx), smoothstep(y - fy));
    let top = lattice(ix, iy, salt) + (lattice(ix + 1, iy, salt) - lattice(ix, iy, salt)) * tx;
    let bottom = lattice(ix, iy + 1, salt) + (lattice(ix + 1, iy + 1, salt) - lattice(ix, iy + 1, salt)) * tx;
    top + (bottom - top) * ty
}

/// Spreads noise (which clusters around 0.5) over most of [0, 1].
fn stretch(n: f32) -> f32 {
    ((n - 0.5) * 2.2 + 0.5).clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn every_texture_spans_both_colours() {
        let all = [
            Texture::Gradient,
            Texture::Stripes,
            Texture::Checker,
            Texture::SmoothNoise,
            Texture::RoughNoise,
            Texture::Streaks,
        ];
        for texture in all {
            let pattern = Pattern { texture, scale: 12.0, sin: 0.6, cos: 0.8, sharpness: 2.0, salt: 7 };
            let values: Vec<f32> = (0..64 * 48)
                .map(|i| pattern.value((i % 64) as f32 + 0.5, (i / 64) as f32 + 0.5, (0.0, 80.0)))
                .collect();
            let (lo, hi) = values.iter().fold((1f32, 0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)));
            assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi), "{texture:?}");
            assert!(hi - lo > 0.5, "{texture:?} spans only {lo}..{hi}");
        }
    }

    #[test]
    fn picks_follow_weights() {
        let mut rng = SynthRng::seed_from_u64(3);
        let weights = [(Texture::Gradient, 1), (Texture::Checker, 3)];
        let checkers = (0..4000).filter(|_| pick_texture(&weights, &mut rng) == Texture::Checker).count();
        assert!((2800..3200).contains(&checkers), "{checkers}");
    }
}
