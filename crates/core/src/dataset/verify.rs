//! The content checks of an image's bytes, after Ultralytics' `check_image`: the header must
//! decode, the image must be at least 10×10, a PNG's chunks must be whole with matching CRCs (what
//! Pillow's `verify` checks), and a JPEG must reach its end marker `FF D9`. Ultralytics calls a JPEG
//! that does not end with `FF D9` corrupt and decodes it again with Pillow: a truncated one fails
//! (skipped), one with data after the marker decodes (rewritten, kept). headroom walks the JPEG
//! markers to tell the two apart, skips the first and keeps the second with a warning.
//!
//! Every step reads images through [`crate::imageio::usable_image`], which applies these checks and
//! then decodes the pixels; they are not a filter of their own.

use std::path::Path;

use image::ImageFormat;

use crate::imageio::header::read_header;
use crate::{Error, ImageProblem, Result};

/// What [`verify_bytes`] learned about an image that passed.
#[derive(Debug)]
pub struct ImageInfo {
    /// Width in pixels as the image is displayed (EXIF orientation applied, as OpenCV reads it).
    pub width: u32,
    /// Height in pixels as the image is displayed.
    pub height: u32,
    /// A problem that does not make the image unusable (a JPEG with data after its end marker).
    pub warning: Option<Error>,
}

/// Checks the bytes of the image file `path` without decoding its pixels. An error means the image
/// must be skipped: not an image, a header that does not decode, smaller than 10 pixels or larger
/// than [`crate::imageio::MAX_PIXELS`], a broken PNG, or a truncated JPEG. Every error names `path`.
/// Pixels that do not decode pass here: [`crate::imageio::usable_image`] decodes them.
pub fn verify_bytes(path: &Path, bytes: &[u8]) -> Result<ImageInfo> {
    let corrupt = |problem| Error::CorruptImage { path: path.to_path_buf(), problem };
    let header = read_header(path, bytes)?;
    let (width, height) = header.displayed_size();
    if width < 10 || height < 10 {
        return Err(corrupt(ImageProblem::TooSmall { width, height }));
    }
    let mut warning = None;
    match header.format {
        ImageFormat::Png => check_png_chunks(bytes).map_err(corrupt)?,
        ImageFormat::Jpeg if !bytes.ends_with(&[0xFF, 0xD9]) => {
            if !jpeg_reaches_end_marker(bytes) {
                return Err(corrupt(ImageProblem::JpegTruncated));
            }
            warning = Some(corrupt(ImageProblem::JpegTrailingData));
        }
        _ => {}
    }
    Ok(ImageInfo { width, height, warning })
}

/// Whether the marker structure of a JPEG reaches its end-of-image marker (`FF D9`) before the data
/// ends. Segments are skipped by their length (so an EXIF thumbnail's own `FF D9` does not count);
/// entropy-coded data runs to the next marker that is not a stuffed `FF 00` or a restart `FF D0-D7`.
fn jpeg_reaches_end_marker(bytes: &[u8]) -> bool {
    const SOI: u8 = 0xD8;
    const EOI: u8 = 0xD9;
    const SOS: u8 = 0xDA;
    let mut at = 2; // after SOI
    while at + 1 < bytes.len() {
        if bytes[at] != 0xFF {
            return false;
        }
        let marker = bytes[at + 1];
        match marker {
            0xFF => at += 1, // fill byte
            EOI => return true,
            SOI | 0x01 | 0xD0..=0xD7 => at += 2,
            _ => {
                let Some(length) = bytes.get(at + 2..at + 4) else { return false };
                at += 2 + usize::from(u16::from_be_bytes([length[0], length[1]]));
                if marker == SOS {
                    while at + 1 < bytes.len()
                        && !(bytes[at] == 0xFF
                            && bytes[at + 1] != 0
                            && !(0xD0..=0xD7).contains(&bytes[at + 1]))
                    {
                        at += 1;
                    }
                }
            }
        }
    }
    false
}

/// Walks the chunks of a PNG: each must be complete and match its CRC, up to `IEND`.
fn check_png_chunks(bytes: &[u8]) -> std::result::Result<(), ImageProblem> {
    const SIGNATURE: usize = 8;
    let mut offset = SIGNATURE;
    let problem = |offset, reason: &str| ImageProblem::PngChunk { offset, reason: reason.into() };
    loop {
        let header = bytes.get(offset..offset + 8).ok_or_else(|| problem(offset, "file ends before IEND"))?;
        let length = u32::from_be_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let end = offset + 8 + length;
        let stored = bytes
            .get(end..end + 4)
            .ok_or_else(|| problem(offset, "file ends inside the chunk (truncated)"))?;
        let stored = u32::from_be_bytes([stored[0], stored[1], stored[2], stored[3]]);
        if crc32fast::hash(&bytes[offset + 4..end]) != stored {
            return Err(problem(offset, "CRC mismatch (damaged data)"));
        }
        if &header[4..8] == b"IEND" {
            return Ok(());
        }
        offset = end + 4;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The one filter, with no settle time, as the dataset loader applies it.
    fn verify_image(path: &Path) -> Result<crate::imageio::UsableImage> {
        crate::imageio::usable_image(path, std::time::Duration::ZERO)
    }

    /// Writes a real `width`×`height` image in the format of `path`'s extension.
    pub(crate) fn write_image(path: &Path, width: u32, height: u32) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let image =
            image::RgbImage::from_fn(width, height, |x, y| image::Rgb([(x * 7) as u8, (y * 5) as u8, 90]));
        image.save(path).expect("save image");
    }

    #[test]
    fn crc_of_iend() {
        assert_eq!(crc32fast::hash(b"IEND"), 0xAE42_6082);
    }

    #[test]
    fn good_images_give_their_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        for name in ["a.png", "a.jpg", "a.bmp"] {
            let path = dir.path().join(name);
            write_image(&path, 40, 24);
            let info = verify_image(&path).expect("valid");
            assert_eq!(info.image.dimensions(), (40, 24), "{name}");
            assert!(info.warning.is_none(), "{name}");
        }
    }

    #[test]
    fn tiny_garbled_and_truncated_images_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        write_image(&d.join("tiny.png"), 9, 20);
        std::fs::write(d.join("text.png"), b"not an image at all").expect("write");
        write_image(&d.join("cut.png"), 40, 40);
        let png = std::fs::read(d.join("cut.png")).expect("read");
        std::fs::write(d.join("cut.png"), &png[..png.len() - 20]).expect("truncate");
        let mut garbled = png.clone();
        let middle = garbled.len() / 2;
        garbled[middle] ^= 0xFF;
        std::fs::write(d.join("garbled.png"), garbled).expect("write");
        std::fs::write(d.join("header.png"), &png[..20]).expect("write");
        let cases = [
            ("tiny.png", "corrupt image: image size 9x20 is under 10 pixels"),
            ("text.png", "corrupt image: not a PNG, JPEG, BMP or WebP file"),
            ("cut.png", "(truncated)"),
            ("garbled.png", "CRC mismatch"),
            ("header.png", "cannot decode image"),
        ];
        for (name, want) in cases {
            let err = verify_image(&d.join(name)).expect_err(name).to_string();
            assert!(err.contains(name) && err.contains(want), "{name}: `{err}` lacks `{want}`");
        }
    }

    #[test]
    fn truncated_jpeg_is_corrupt_trailing_data_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.jpg");
        write_image(&path, 64, 64);
        let jpeg = std::fs::read(&path).expect("read");
        assert!(jpeg_reaches_end_marker(&jpeg));
        // As Pillow (and so Ultralytics) sees them: even only the end marker missing is truncated.
        for (name, cut) in [("marker.jpg", 2), ("half.jpg", jpeg.len() / 2)] {
            let path = dir.path().join(name);
            std::fs::write(&path, &jpeg[..jpeg.len() - cut]).expect("write");
            let err = verify_image(&path).expect_err(name).to_string();
            assert_eq!(
                err,
                format!(
                    "{}: corrupt image: JPEG ends before its end marker FF D9 (truncated)",
                    path.display()
                )
            );
        }
        let trailing = dir.path().join("trailing.jpg");
        std::fs::write(&trailing, [jpeg.as_slice(), b"\x00camera data"].concat()).expect("write");
        let info = verify_image(&trailing).expect("decodes");
        let warning = info.warning.expect("warned").to_string();
        assert!(
            warning.contains("trailing.jpg") && warning.contains("data after its end marker"),
            "{warning}"
        );
    }
}
