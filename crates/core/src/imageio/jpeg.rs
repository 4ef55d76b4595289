//! JPEG decoding with libjpeg-turbo's code (the `mozjpeg` crate builds it from source with the C
//! compiler, no system library), configured as OpenCV's `imread` configures it, so that the RGB bytes
//! equal `cv2.imread`'s (tests/fixtures/jpeg, crates/core/tests/jpeg_golden.rs):
//! - the accurate integer IDCT (`JDCT_ISLOW`) and fancy (triangle-filter) chroma upsampling, both
//!   libjpeg's defaults, which OpenCV keeps;
//! - greyscale expanded to three equal channels by libjpeg (OpenCV asks for 3-channel output);
//! - CMYK and YCCK decoded to CMYK by libjpeg, then turned into RGB with OpenCV's own integer formula
//!   (`icvCvt_CMYK2BGR_8u_C4C3R`), which reads the inverted values Adobe applications write;
//! - the EXIF orientation of the APP1 segment, applied by the caller.
//!
//! Why not the pure-Rust decoder of the `image` crate (zune-jpeg): its IDCT and upsampling round
//! differently, and on a teacher near its threshold that changed 5 % of the boxes (docs/DECISIONS.md).

use std::panic::{AssertUnwindSafe, catch_unwind};

use image::RgbImage;
use image::metadata::Orientation;
use mozjpeg::{ColorSpace, Decompress, Marker};

/// A JPEG's size and orientation, read from its headers without decoding the pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JpegHeader {
    /// Width of the stored image, before orientation.
    pub width: u32,
    /// Height of the stored image, before orientation.
    pub height: u32,
    /// The EXIF orientation (`NoTransforms` when absent or invalid).
    pub orientation: Orientation,
}

/// Whether `bytes` start like a JPEG (SOI marker followed by another marker).
pub fn is_jpeg(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0xFF, 0xD8, 0xFF])
}

/// Reads the headers of a JPEG: size and EXIF orientation. Errors carry libjpeg's message.
pub fn read_header(bytes: &[u8]) -> Result<JpegHeader, String> {
    guarded(|| {
        let decompress = open(bytes)?;
        Ok(header_of(&decompress))
    })
}

/// Decodes a JPEG to RGB as `cv2.imread(path, IMREAD_COLOR)` does, before orientation, after
/// checking that it has at most `max_pixels` pixels. Returns the pixels and the EXIF orientation.
pub fn decode(bytes: &[u8], max_pixels: u64) -> Result<(RgbImage, Orientation), DecodeError> {
    let result = guarded(|| {
        let decompress = open(bytes)?;
        let header = header_of(&decompress);
        if u64::from(header.width) * u64::from(header.height) > max_pixels {
            return Ok(Err(DecodeError::TooLarge { width: header.width, height: header.height }));
        }
        let four_channels = matches!(decompress.color_space(), ColorSpace::JCS_CMYK | ColorSpace::JCS_YCCK);
        let rgb = if four_channels {
            let mut started = decompress.to_colorspace(ColorSpace::JCS_CMYK).map_err(|e| e.to_string())?;
            let cmyk: Vec<[u8; 4]> = started.read_scanlines().map_err(|e| e.to_string())?;
            finish(started)?;
            cmyk.iter().flat_map(|&p| cmyk_to_rgb(p)).collect()
        } else {
            let mut started = decompress.rgb().map_err(|e| e.to_string())?;
            let rgb: Vec<u8> = started.read_scanlines().map_err(|e| e.to_string())?;
            finish(started)?;
            rgb
        };
        let image = RgbImage::from_raw(header.width, header.height, rgb)
            .ok_or_else(|| "libjpeg returned fewer rows than the header declares".to_string())?;
        Ok(Ok((image, header.orientation)))
    });
    result.map_err(DecodeError::Invalid)?
}

/// Encodes RGB as cameras and OpenCV write JPEG: libjpeg-turbo's defaults (baseline, Huffman tables
/// of the standard, 4:2:0 chroma, JFIF header) at `quality` (1–100). Deterministic.
pub fn encode(image: &RgbImage, quality: u8) -> Result<Vec<u8>, String> {
    guarded(|| {
        let mut compress = mozjpeg::Compress::new(ColorSpace::JCS_RGB);
        compress.set_fastest_defaults();
        compress.set_quality(f32::from(quality.clamp(1, 100)));
        compress.set_size(image.width() as usize, image.height() as usize);
        let mut started = compress.start_compress(Vec::new()).map_err(|e| e.to_string())?;
        started.write_scanlines(image.as_raw()).map_err(|e| e.to_string())?;
        started.finish().map_err(|e| e.to_string())
    })
}

/// Why [`decode`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// More pixels than allowed: not decoded.
    TooLarge {
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
    },
    /// libjpeg refused the data (its message).
    Invalid(String),
}

fn open(bytes: &[u8]) -> Result<Decompress<&[u8]>, String> {
    Decompress::with_markers(&[Marker::APP(1)]).from_mem(bytes).map_err(|e| e.to_string())
}

fn header_of(decompress: &Decompress<&[u8]>) -> JpegHeader {
    let orientation = decompress
        .markers()
        .filter(|m| m.marker == Marker::APP(1))
        .find_map(|m| m.data.strip_prefix(b"Exif\0\0").and_then(Orientation::from_exif_chunk))
        .unwrap_or(Orientation::NoTransforms);
    // libjpeg limits both sides to 65500, so these fit.
    let (width, height) = decompress.size();
    JpegHeader { width: width as u32, height: height as u32, orientation }
}

/// Ends decompression as OpenCV does (`jpeg_finish_decompress`, whose fatal errors fail the read).
/// A file that ends early still decodes (libjpeg fills the rest grey and warns), as in OpenCV;
/// callers that must refuse truncated files check for the end marker (dataset::verify).
fn finish(started: mozjpeg::decompress::DecompressStarted<&[u8]>) -> Result<(), String> {
    started.finish().map_err(|e| e.to_string())
}

/// OpenCV's CMYK → RGB (`icvCvt_CMYK2BGR_8u_C4C3R`): `k - ((255 - c) * k >> 8)` per channel.
fn cmyk_to_rgb([c, m, y, k]: [u8; 4]) -> [u8; 3] {
    let k = i32::from(k);
    let channel = |v: u8| (k - (((255 - i32::from(v)) * k) >> 8)) as u8;
    [channel(c), channel(m), channel(y)]
}

/// Runs libjpeg code that reports a fatal error by unwinding (the `mozjpeg` crate's error manager
/// resumes an unwind with the message, without calling the panic hook) and turns that into `Err`.
fn guarded<T>(work: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    match catch_unwind(AssertUnwindSafe(work)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "libjpeg failed".to_string());
            Err(message.trim_start_matches("libjpeg fatal error: ").to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmyk_follows_opencv() {
        // Adobe CMYK is stored inverted: 255 is no ink. No ink anywhere is white, full K is black.
        assert_eq!(cmyk_to_rgb([255, 255, 255, 255]), [255, 255, 255]);
        assert_eq!(cmyk_to_rgb([0, 0, 0, 0]), [0, 0, 0]);
        assert_eq!(cmyk_to_rgb([0, 255, 255, 255]), [1, 255, 255]);
        assert_eq!(cmyk_to_rgb([128, 64, 200, 100]), [51, 26, 79]);
    }

    #[test]
    fn encodes_baseline_jpeg_that_decodes_back_closely() {
        let image = RgbImage::from_fn(33, 17, |x, y| image::Rgb([(x * 7) as u8, (y * 13) as u8, 128]));
        let bytes = encode(&image, 95).expect("encodes");
        assert!(is_jpeg(&bytes) && bytes.ends_with(&[0xFF, 0xD9]));
        assert!(bytes.windows(2).any(|w| w == [0xFF, 0xC0]), "baseline SOF0");
        assert_eq!(encode(&image, 95).expect("again"), bytes, "deterministic");
        let (back, orientation) = decode(&bytes, 1 << 20).expect("decodes");
        assert_eq!((back.dimensions(), orientation), ((33, 17), Orientation::NoTransforms));
        let max = back.as_raw().iter().zip(image.as_raw()).map(|(a, b)| a.abs_diff(*b)).max();
        assert!(max.is_some_and(|m| m <= 12), "{max:?}");
    }

    #[test]
    fn garbage_and_truncated_headers_are_errors_not_panics() {
        assert!(read_header(b"\xFF\xD8\xFF\xE0 not really").is_err());
        assert!(read_header(b"").is_err());
        let err = decode(b"\xFF\xD8\xFF\xDB\x00", 1 << 20).expect_err("truncated");
        assert!(matches!(err, DecodeError::Invalid(_)), "{err:?}");
    }
}
