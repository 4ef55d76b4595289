//! The two presets: `base` (clean, well lit) and `field` (the domain shift a deployed camera sees).

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// Which distribution the images are drawn from. Both presets draw the same classes.
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Clean images: even lighting, large objects, little clutter, smooth backgrounds.
    #[default]
    Base,
    /// A domain shift from `base`: dark and uneven lighting with shadows, a warm colour cast,
    /// stronger noise and blur, smaller objects, more clutter, busier and finer textures.
    Field,
    /// One part of `field`'s shift: `base` scenes under `field`'s light (dark, uneven, shadows, a
    /// warm cast, white-balance error).
    Dusk,
    /// One part of `field`'s shift: `base` scenes through `field`'s camera (sensor noise, blur).
    Blur,
    /// One part of `field`'s shift: `base` light and camera, `field`'s smaller objects, clutter and
    /// finer textures.
    Small,
}

impl Preset {
    /// Every preset, in declaration order.
    pub const ALL: [Preset; 5] = [Preset::Base, Preset::Field, Preset::Dusk, Preset::Blur, Preset::Small];

    /// The name used on the command line and in `synth.json`.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Base => "base",
            Preset::Field => "field",
            Preset::Dusk => "dusk",
            Preset::Blur => "blur",
            Preset::Small => "small",
        }
    }

    /// The knobs of this preset.
    pub fn params(self) -> &'static PresetParams {
        match self {
            Preset::Base => &BASE,
            Preset::Field => &FIELD,
            Preset::Dusk => &DUSK,
            Preset::Blur => &BLUR,
            Preset::Small => &SMALL,
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        Preset::ALL.into_iter().find(|p| p.name() == text).ok_or_else(|| Error::InvalidArgument {
            name: "preset",
            message: format!("`{text}` is not a preset; expected base, field, dusk, blur or small"),
        })
    }
}

/// A background pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Texture {
    /// A linear ramp between the two colours in a random direction.
    Gradient,
    /// Parallel stripes at a random angle, from soft (sine-like) to hard-edged.
    Stripes,
    /// A rotated checkerboard.
    Checker,
    /// Two octaves of value noise: large soft blotches.
    SmoothNoise,
    /// Four octaves of value noise: fine grain such as gravel or foliage.
    RoughNoise,
    /// Value noise stretched along a random direction: grass, wood grain, brushed metal.
    Streaks,
}

/// The knobs of a preset. Every `(lo, hi)` pair is a range sampled uniformly once per image
/// (per object for object knobs); counts are inclusive.
#[derive(Debug, Clone, PartialEq)]
pub struct PresetParams {
    /// Number of labelled objects attempted per image (placements that would overlap too much
    /// are dropped).
    pub objects: (u32, u32),
    /// Probability that an image has no object at all (a pure background negative).
    pub empty_image_chance: f32,
    /// Object size as a fraction of the shorter image side (diameter of a circle, about the
    /// side of a square or triangle).
    pub object_size: (f32, f32),
    /// Largest fraction of the smaller of two object boxes that the other may cover.
    pub max_overlap: f32,
    /// Number of unlabelled distractors (lines, rings, elongated ellipses) per image.
    pub distractors: (u32, u32),
    /// Background textures with their relative weights.
    pub textures: &'static [(Texture, u32)],
    /// Feature size of the texture (stripe period, checker cell, noise cell) as a fraction of
    /// the shorter image side.
    pub texture_scale: (f32, f32),
    /// Brightness difference between the two colours of the texture, 0–1.
    pub texture_contrast: (f32, f32),
    /// Saturation of the background colours, 0–1.
    pub background_saturation: (f32, f32),
    /// Saturation of object colours, 0–1.
    pub object_saturation: (f32, f32),
    /// Smallest luma difference (0–255) between an object and the background under it.
    pub min_object_contrast: f32,
    /// Global gain applied to the whole image (1 = as rendered).
    pub brightness: (f32, f32),
    /// Strength of a linear light falloff across the image in a random direction: the gain
    /// goes from `1 - g` on one side to `1 + g` on the other.
    pub light_gradient: (f32, f32),
    /// Probability of a soft circular shadow somewhere in the image.
    pub shadow_chance: f32,
    /// How much a shadow darkens its centre, 0–1.
    pub shadow_depth: (f32, f32),
    /// Strength of a warm colour cast (red up, blue down), 0–1.
    pub colour_cast: (f32, f32),
    /// Random per-channel gain jitter (white-balance error), as a fraction.
    pub white_balance_jitter: f32,
    /// Standard deviation of per-pixel sensor noise, in 0–255 units.
    pub noise_sigma: (f32, f32),
    /// Number of 3-tap binomial blur passes (each adds a variance of 0.5 px²).
    pub blur_passes: (u32, u32),
}

const BASE: PresetParams = PresetParams {
    objects: (1, 4),
    empty_image_chance: 0.05,
    object_size: (0.16, 0.38),
    max_overlap: 0.05,
    distractors: (0, 2),
    textures: &[
        (Texture::Gradient, 2),
        (Texture::Stripes, 2),
        (Texture::Checker, 1),
        (Texture::SmoothNoise, 3),
    ],
    texture_scale: (0.15, 0.45),
    texture_contrast: (0.08, 0.3),
    background_saturation: (0.05, 0.45),
    object_saturation: (0.45, 1.0),
    min_object_contrast: 55.0,
    brightness: (0.9, 1.1),
    light_gradient: (0.0, 0.15),
    shadow_chance: 0.0,
    shadow_depth: (0.0, 0.0),
    colour_cast: (0.0, 0.0),
    white_balance_jitter: 0.03,
    noise_sigma: (0.5, 4.0),
    blur_passes: (0, 1),
};

const FIELD: PresetParams = PresetParams {
    objects: (1, 6),
    empty_image_chance: 0.08,
    object_size: (0.08, 0.24),
    max_overlap: 0.15,
    distractors: (3, 7),
    textures: &[
        (Texture::RoughNoise, 3),
        (Texture::Streaks, 3),
        (Texture::Stripes, 1),
        (Texture::Checker, 1),
    ],
    texture_scale: (0.03, 0.14),
    texture_contrast: (0.2, 0.5),
    background_saturation: (0.1, 0.6),
    object_saturation: (0.25, 0.9),
    min_object_contrast: 30.0,
    brightness: (0.45, 0.8),
    light_gradient: (0.2, 0.55),
    shadow_chance: 0.6,
    shadow_depth: (0.3, 0.7),
    colour_cast: (0.1, 0.3),
    white_balance_jitter: 0.08,
    noise_sigma: (7.0, 18.0),
    blur_passes: (1, 4),
};

const DUSK: PresetParams = PresetParams {
    brightness: FIELD.brightness,
    light_gradient: FIELD.light_gradient,
    shadow_chance: FIELD.shadow_chance,
    shadow_depth: FIELD.shadow_depth,
    colour_cast: FIELD.colour_cast,
    white_balance_jitter: FIELD.white_balance_jitter,
    ..BASE
};

const BLUR: PresetParams =
    PresetParams { noise_sigma: FIELD.noise_sigma, blur_passes: FIELD.blur_passes, ..BASE };

const SMALL: PresetParams = PresetParams {
    objects: FIELD.objects,
    empty_image_chance: FIELD.empty_image_chance,
    object_size: FIELD.object_size,
    max_overlap: FIELD.max_overlap,
    distractors: FIELD.distractors,
    textures: FIELD.textures,
    texture_scale: FIELD.texture_scale,
    texture_contrast: FIELD.texture_contrast,
    ..BASE
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for preset in Preset::ALL {
            assert_eq!(preset.name().parse::<Preset>().expect("parses"), preset);
            let json = serde_json::to_string(&preset).expect("serialises");
            assert_eq!(json, format!("\"{preset}\""));
        }
        let err = "night".parse::<Preset>().expect_err("unknown preset");
        assert!(err.to_string().contains("`night` is not a preset"), "{err}");
    }

    #[test]
    fn ranges_are_ordered() {
        for preset in Preset::ALL {
            let p = preset.params();
            let pairs = [
                p.object_size,
                p.texture_scale,
                p.texture_contrast,
                p.brightness,
                p.light_gradient,
                p.noise_sigma,
                p.colour_cast,
            ];
            assert!(pairs.iter().all(|(lo, hi)| lo <= hi), "{preset}");
            assert!(p.objects.0 <= p.objects.1 && p.distractors.0 <= p.distractors.1, "{preset}");
            assert!(p.blur_passes.0 <= p.blur_passes.1 && !p.textures.is_empty(), "{preset}");
        }
    }
}
