//! The deterministic synthetic shapes dataset behind `headroom synth`.
//!
//! Each image shows a few labelled shapes ([`CLASS_NAMES`]: circle, square, triangle) on a
//! textured background, among unlabelled distractors (lines, rings, elongated ellipses) that a
//! detector must learn to ignore, then goes through a simulated camera: blur, uneven lighting,
//! colour cast and noise. Two presets ([`Preset`]) draw the same classes from different
//! distributions: `field` is a domain shift of `base`.
//!
//! Every image depends only on `(seed, split, index)` and the preset: it is drawn from its own
//! ChaCha8 generator, so images can be made in any order, on any number of threads, and come out
//! bit-identical. Rendering uses only exactly-rounded float operations and integer blurs, so the
//! pixels are also the same on every target (no libm `sin`/`exp`).
//!
//! [`write_dataset`] writes the Ultralytics layout (`data.yaml`, `images/{train,val}/NNNNNN.png`,
//! `labels/{train,val}/NNNNNN.txt`) plus a `synth.json` manifest.

mod camera;
mod math;
mod preset;
mod shapes;
mod texture;
mod writer;

use image::RgbImage;
use rand::SeedableRng;

pub use preset::{Preset, PresetParams, Texture};
pub use writer::{MANIFEST_FILE, SynthManifest, SynthSummary, write_dataset, write_dataset_with_threads};

use crate::dataset::labels::YoloLabel;
use crate::{Error, Result};

/// The class names, in class-id order (written to `data.yaml`).
pub const CLASS_NAMES: [&str; 3] = ["circle", "square", "triangle"];

/// Smallest accepted image side, in pixels.
pub const MIN_SIDE: u32 = 32;
/// Largest accepted image side, in pixels.
pub const MAX_SIDE: u32 = 8192;
/// Largest number of images per split (file names have six digits).
pub const MAX_IMAGES_PER_SPLIT: usize = 999_999;

/// The generator behind every image.
pub(crate) type SynthRng = rand_chacha::ChaCha8Rng;

/// A dataset split.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Split {
    /// The training images (`images/train`).
    Train,
    /// The validation images (`images/val`).
    Val,
}

impl Split {
    /// Both splits, train first.
    pub const ALL: [Split; 2] = [Split::Train, Split::Val];

    /// The folder name (`train`, `val`).
    pub fn name(self) -> &'static str {
        match self {
            Split::Train => "train",
            Split::Val => "val",
        }
    }
}

/// What to generate. [`Default`] gives the documented defaults: preset base, seed 0, 64 train and
/// 32 val images of 256×192 (non-square on purpose, so that consumers exercise letterboxing).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SynthConfig {
    /// The distribution the images are drawn from.
    pub preset: Preset,
    /// The seed: the same seed gives the same bytes.
    pub seed: u64,
    /// Number of training images.
    pub train: usize,
    /// Number of validation images.
    pub val: usize,
    /// Image width in pixels.
    pub width: u32,
    /// Image height in pixels.
    pub height: u32,
    /// Write JPEG of this quality (1–100, baseline 4:2:0 as cameras write) instead of PNG.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jpeg_quality: Option<u8>,
}

impl Default for SynthConfig {
    fn default() -> Self {
        Self {
            preset: Preset::Base,
            seed: 0,
            train: 64,
            val: 32,
            width: 256,
            height: 192,
            jpeg_quality: None,
        }
    }
}

impl SynthConfig {
    /// The number of images of `split`.
    pub fn count(&self, split: Split) -> usize {
        match split {
            Split::Train => self.train,
            Split::Val => self.val,
        }
    }

    /// Checks the sizes ([`MIN_SIDE`]..=[`MAX_SIDE`]) and counts (1..=[`MAX_IMAGES_PER_SPLIT`]).
    pub fn validate(&self) -> Result<()> {
        for (name, side) in [("width", self.width), ("height", self.height)] {
            if !(MIN_SIDE..=MAX_SIDE).contains(&side) {
                return Err(Error::InvalidArgument {
                    name,
                    message: format!("{side} px is outside {MIN_SIDE}..={MAX_SIDE}"),
                });
            }
        }
        if let Some(q) = self.jpeg_quality
            && !(1..=100).contains(&q)
        {
            return Err(Error::InvalidArgument {
                name: "jpeg_quality",
                message: format!("{q} is outside 1..=100"),
            });
        }
        for (name, count) in [("train", self.train), ("val", self.val)] {
            if !(1..=MAX_IMAGES_PER_SPLIT).contains(&count) {
                return Err(Error::InvalidArgument {
                    name,
                    message: format!(
                        "{count} images is outside 1..={MAX_IMAGES_PER_SPLIT} (Ultralytics needs both splits)"
                    ),
                });
            }
        }
        Ok(())
    }
}

/// Parses an image size written `WxH` (e.g. `256x192`; `X` and `×` also accepted), each side in
/// [`MIN_SIDE`]..=[`MAX_SIDE`].
pub fn parse_size(text: &str) -> Result<(u32, u32)> {
    let invalid = |message: String| Error::InvalidArgument { name: "size", message };
    let (w, h) = text
        .split_once(['x', 'X', '×'])
        .ok_or_else(|| invalid(format!("`{text}` is not WIDTHxHEIGHT (e.g. 256x192)")))?;
    let side = |part: &str| {
        part.trim().parse::<u32>().ok().filter(|v| (MIN_SIDE..=MAX_SIDE).contains(v)).ok_or_else(|| {
            invalid(format!("`{text}`: each side must be an integer in {MIN_SIDE}..={MAX_SIDE}"))
        })
    };
    Ok((side(w)?, side(h)?))
}

/// Renders image `index` of `split`: the picture and its labels (tight boxes of the visible part
/// of each shape, normalised, in drawing order). Depends only on `config.preset`, `config.seed`,
/// the size, `split` and `index` — not on the counts. Never panics; sizes under [`MIN_SIDE`]
/// simply hold few or no objects.
pub fn generate_image(config: &SynthConfig, split: Split, index: usize) -> (RgbImage, Vec<YoloLabel>) {
    let mut rng = image_rng(config.seed, split, index);
    let params = config.preset.params();
    let mut image = RgbImage::new(config.width, config.height);
    texture::paint_background(&mut image, params, &mut rng);
    shapes::draw_distractors(&mut image, params, &mut rng);
    let labels = shapes::draw_objects(&mut image, params, &mut rng);
    camera::apply(&mut image, params, &mut rng);
    (image, labels)
}

/// The generator of one image: ChaCha8 keyed by the seed, the split and the index.
fn image_rng(seed: u64, split: Split, index: usize) -> SynthRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(index as u64).to_le_bytes());
    key[16] = match split {
        Split::Train => 1,
        Split::Val => 2,
    };
    key[24..].copy_from_slice(b"headroom");
    SynthRng::from_seed(key)
}

#[cfg(test)]
mod tests;
