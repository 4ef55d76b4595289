//! Reading images as the models see them: the RGB bytes `cv2.imread(path, IMREAD_COLOR)` gives
//! (what Ultralytics trains, validates and predicts on), EXIF orientation applied.
//!
//! JPEG goes through libjpeg-turbo's code ([`jpeg`]); PNG, BMP and WebP through the `image` crate,
//! whose lossless decoders give the same bytes as OpenCV's. Every image's declared size is checked
//! against [`MAX_PIXELS`] before any pixel is decoded, so a header claiming 100000×100000 pixels is
//! refused instead of aborting the process on a 30 GB allocation.
//!
//! Steps that read images they did not just write (`label`, `export --calib`, dataset loading) go
//! through [`usable_image`], the one filter that says whether an image file can be used.

pub mod header;
pub mod jpeg;
mod usable;

use std::path::Path;

use image::metadata::Orientation;
use image::{DynamicImage, ImageDecoder, ImageFormat, RgbImage};

use crate::{Error, ImageProblem, Result};

pub use header::{ImageHeader, MAX_PIXELS, read_header};
use header::{check_size, guessed, header_of, too_large, unknown};
pub use usable::{SETTLE_TIME, UsableImage, pixel_cap_for, usable_image, usable_image_within};

/// Reads an image file as 8-bit RGB with its EXIF orientation applied, as `cv2.imread` does.
/// Errors name the file; an image over [`MAX_PIXELS`] is refused before decoding, and a FIFO, socket
/// or device before opening it ([`crate::fsio::read_regular`]).
pub fn read_rgb(path: &Path) -> Result<RgbImage> {
    let bytes = crate::fsio::read_regular(path)?;
    decode_rgb(path, &bytes)
}

/// [`read_rgb`] on the bytes of `path`, already read.
pub fn decode_rgb(path: &Path, bytes: &[u8]) -> Result<RgbImage> {
    let corrupt = |problem| Error::CorruptImage { path: path.to_path_buf(), problem };
    if jpeg::is_jpeg(bytes) {
        let (image, orientation) = jpeg::decode(bytes, MAX_PIXELS).map_err(|e| match e {
            jpeg::DecodeError::TooLarge { width, height } => corrupt(too_large(width, height)),
            jpeg::DecodeError::Invalid(message) => corrupt(ImageProblem::Jpeg { message }),
        })?;
        return Ok(oriented(image, orientation));
    }
    let image_error = |source| Error::Image { path: path.to_path_buf(), source };
    let reader = guessed(path, bytes)?;
    let format = reader.format().ok_or_else(|| unknown(path))?;
    let mut decoder = reader.into_decoder().map_err(image_error)?;
    let header = header_of(&mut decoder, format);
    check_size(path, header.width, header.height)?;
    let image = DynamicImage::from_decoder(decoder).map_err(image_error)?;
    Ok(oriented(image.into_rgb8(), header.orientation))
}

/// The bytes [`read_rgb`] holds at once reading `path` (whose bytes are `bytes`): the file, the
/// decoder's pixels, the RGB copy of a decoder whose pixels are not 8-bit RGB (a PNG with alpha, a
/// 16-bit TIFF), and the rotated copy of a 90° EXIF orientation (flips and 180° turn in place).
/// What the memory planner counts for the data's largest frame ([`largest_read_cost`]).
pub fn read_cost(path: &Path, bytes: &[u8]) -> Result<u64> {
    read_cost_from(path, bytes, bytes.len() as u64)
}

/// [`read_cost`] from the start of a file of `file_len` bytes, enough of it for the headers.
fn read_cost_from(path: &Path, bytes: &[u8], file_len: u64) -> Result<u64> {
    let header = read_header(path, bytes)?;
    let pixels = u64::from(header.width) * u64::from(header.height);
    let rgb = pixels * 3;
    let native = if header.format == ImageFormat::Jpeg {
        rgb
    } else {
        let decoder = guessed(path, bytes)?
            .into_decoder()
            .map_err(|source| Error::Image { path: path.to_path_buf(), source })?;
        let color = decoder.color_type();
        let per_pixel = u64::from(color.bytes_per_pixel());
        pixels * per_pixel + if color == image::ColorType::Rgb8 { 0 } else { rgb }
    };
    let rotated = matches!(
        header.orientation,
        Orientation::Rotate90
            | Orientation::Rotate270
            | Orientation::Rotate90FlipH
            | Orientation::Rotate270FlipH
    );
    Ok(file_len + native + if rotated { rgb } else { 0 })
}

/// How much of a file [`read_cost_of_file`] reads first: a camera frame's headers with its EXIF
/// block (an APP segment is at most 64 KiB); where they reach further, the whole file is read.
const HEADER_PREFIX: u64 = 128 << 10;

/// [`read_cost`] of the file at `path`, reading only its start where that holds its headers (a
/// TIFF whose directory lies at its end is read whole).
pub fn read_cost_of_file(path: &Path) -> Result<u64> {
    use std::io::Read as _;
    let file_len = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
    if crate::fsio::special_file(path).is_none() && file_len > HEADER_PREFIX {
        let mut prefix = Vec::with_capacity(HEADER_PREFIX as usize);
        let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        file.take(HEADER_PREFIX).read_to_end(&mut prefix).map_err(|e| Error::io(path, e))?;
        if let Ok(cost) = read_cost_from(path, &prefix, file_len) {
            return Ok(cost);
        }
    }
    let bytes = crate::fsio::read_regular(path)?;
    read_cost_from(path, &bytes, bytes.len() as u64)
}

/// The largest [`read_cost`] of `paths`: what reading the data's largest frame holds. Files that
/// cannot be read or decoded count nothing (loading the data names them). Reads the start of each
/// file ([`read_cost_of_file`]).
pub fn largest_read_cost<'a>(paths: impl IntoIterator<Item = &'a Path>) -> u64 {
    paths.into_iter().filter_map(|path| read_cost_of_file(path).ok()).max().unwrap_or(0)
}

fn oriented(image: RgbImage, orientation: Orientation) -> RgbImage {
    if orientation == Orientation::NoTransforms {
        return image;
    }
    let mut image = DynamicImage::ImageRgb8(image);
    image.apply_orientation(orientation);
    image.into_rgb8()
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;

    #[test]
    fn reads_png_and_reports_garbage_with_its_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let good = dir.path().join("a.png");
        RgbImage::from_pixel(12, 10, image::Rgb([1, 2, 3])).save(&good).expect("save");
        let img = read_rgb(&good).expect("decodes");
        assert_eq!((img.dimensions(), img.get_pixel(0, 0).0), ((12, 10), [1, 2, 3]));
        let bad = dir.path().join("b.png");
        std::fs::write(&bad, b"not an image").expect("write");
        let err = read_rgb(&bad).expect_err("garbage");
        assert!(err.to_string().contains("b.png"), "{err}");
        assert!(
            read_rgb(&dir.path().join("missing.png"))
                .expect_err("missing")
                .to_string()
                .contains("missing.png")
        );
    }

    /// A real 16×16 image whose header is patched to declare `width`×`height` pixels.
    pub(crate) fn huge_header(format: image::ImageFormat, width: u32, height: u32) -> Vec<u8> {
        let mut bytes = Vec::new();
        RgbImage::from_pixel(16, 16, image::Rgb([9, 99, 199]))
            .write_to(&mut Cursor::new(&mut bytes), format)
            .expect("encode");
        if format == ImageFormat::Png {
            bytes[16..20].copy_from_slice(&width.to_be_bytes());
            bytes[20..24].copy_from_slice(&height.to_be_bytes());
            let crc = crc32fast::hash(&bytes[12..29]);
            bytes[29..33].copy_from_slice(&crc.to_be_bytes());
        } else {
            let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).expect("baseline SOF0");
            bytes[sof + 5..sof + 7].copy_from_slice(&(height as u16).to_be_bytes());
            bytes[sof + 7..sof + 9].copy_from_slice(&(width as u16).to_be_bytes());
        }
        bytes
    }

    #[test]
    fn regression_a_header_claiming_a_huge_image_is_refused_before_decoding() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, format, w, h) in [
            ("huge.png", ImageFormat::Png, 100_000, 100_000),
            ("huge.jpg", ImageFormat::Jpeg, 65_000, 60_000),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, huge_header(format, w, h)).expect("write");
            let err = read_rgb(&path).expect_err(name).to_string();
            assert!(err.contains(name) && err.contains(&format!("{w}x{h}")), "{err}");
            assert!(err.contains("more than 178956970 pixels"), "{err}");
            let bytes = std::fs::read(&path).expect("read");
            assert!(read_header(&path, &bytes).is_err(), "{name}");
        }
    }
}
