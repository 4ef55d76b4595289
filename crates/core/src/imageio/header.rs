//! An image's headers — format, size, EXIF orientation — read without decoding a pixel, and the
//! size checked against [`MAX_PIXELS`]. A leaf of `imageio`: the integrity checks
//! (`crate::dataset::verify`) and the readers in `imageio` both build on it.

use std::io::Cursor;
use std::path::Path;

use image::metadata::Orientation;
use image::{ImageDecoder, ImageFormat, ImageReader};

use super::jpeg;
use crate::{Error, ImageProblem, Result};

/// The most pixels an image may have: Pillow's `DecompressionBombError` threshold (twice its
/// `MAX_IMAGE_PIXELS` of 89,478,485), so headroom refuses what Ultralytics' checks refuse. About
/// 537 MB as RGB, e.g. 16384×10922.
pub const MAX_PIXELS: u64 = 178_956_970;

/// An image's format, size and orientation, from its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageHeader {
    /// The container format.
    pub format: ImageFormat,
    /// Stored width, before orientation.
    pub width: u32,
    /// Stored height, before orientation.
    pub height: u32,
    /// EXIF orientation (`NoTransforms` when absent).
    pub orientation: Orientation,
}

impl ImageHeader {
    /// Width and height as displayed (and as OpenCV reads the image): swapped by a 90° orientation.
    pub fn displayed_size(&self) -> (u32, u32) {
        match self.orientation {
            Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH => (self.height, self.width),
            _ => (self.width, self.height),
        }
    }
}

/// Reads the headers of an image (format, size, orientation) without decoding its pixels, and
/// checks the size against [`MAX_PIXELS`].
pub fn read_header(path: &Path, bytes: &[u8]) -> Result<ImageHeader> {
    let header = if jpeg::is_jpeg(bytes) {
        let h = jpeg::read_header(bytes).map_err(|message| Error::CorruptImage {
            path: path.to_path_buf(),
            problem: ImageProblem::Jpeg { message },
        })?;
        ImageHeader {
            format: ImageFormat::Jpeg,
            width: h.width,
            height: h.height,
            orientation: h.orientation,
        }
    } else {
        let reader = guessed(path, bytes)?;
        let format = reader.format().ok_or_else(|| unknown(path))?;
        let mut decoder =
            reader.into_decoder().map_err(|source| Error::Image { path: path.into(), source })?;
        header_of(&mut decoder, format)
    };
    check_size(path, header.width, header.height)?;
    Ok(header)
}

pub(super) fn header_of(decoder: &mut impl ImageDecoder, format: ImageFormat) -> ImageHeader {
    let (width, height) = decoder.dimensions();
    let orientation = decoder.orientation().unwrap_or(Orientation::NoTransforms);
    ImageHeader { format, width, height, orientation }
}

pub(super) fn guessed<'a>(path: &Path, bytes: &'a [u8]) -> Result<ImageReader<Cursor<&'a [u8]>>> {
    ImageReader::new(Cursor::new(bytes)).with_guessed_format().map_err(|e| Error::io(path, e))
}

pub(super) fn unknown(path: &Path) -> Error {
    Error::CorruptImage { path: path.to_path_buf(), problem: ImageProblem::UnknownFormat }
}

pub(super) fn too_large(width: u32, height: u32) -> ImageProblem {
    ImageProblem::TooLarge { width, height, limit: MAX_PIXELS }
}

pub(super) fn check_size(path: &Path, width: u32, height: u32) -> Result<()> {
    if u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(Error::CorruptImage { path: path.to_path_buf(), problem: too_large(width, height) });
    }
    Ok(())
}
