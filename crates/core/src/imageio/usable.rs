//! The one test of whether an image file can be used, shared by every step that reads images
//! (`label`, `export --calib`, and the dataset loading of `train`, `eval` and the field gate): a file
//! one step skips, every step skips, for the same reason.
//!
//! The rules, in order: the path is a regular file (a FIFO, socket or device is refused unread); the
//! file is not empty; with a settle time, it was not modified within it (a camera may still be
//! writing it: it is left for a later run); its header decodes and declares at most
//! [`super::MAX_PIXELS`] (a decompression bomb is refused before any pixel is decoded); it is at
//! least 10 pixels a side; a PNG's chunks are whole with matching CRCs; a JPEG is not truncated
//! (`crate::dataset::verify`); and its pixels decode.

use std::path::Path;
use std::time::{Duration, SystemTime};

use image::RgbImage;

use crate::dataset::verify::verify_bytes;
use crate::{Error, Result, WriteState};

/// How long a file in a folder a camera writes to must go unmodified before it is read: `field run`
/// passes it to `label` and `export --calib`. A camera writes a frame in well under a second, so two
/// seconds leaves a margin without delaying a frame by more than one nightly run.
pub const SETTLE_TIME: Duration = Duration::from_secs(2);

/// A usable image and what was noticed on the way.
#[derive(Debug)]
pub struct UsableImage {
    /// The pixels, RGB, EXIF orientation applied (as [`super::read_rgb`] gives them).
    pub image: RgbImage,
    /// A problem that does not make the image unusable (a JPEG with data after its end marker).
    pub warning: Option<Error>,
}

/// Reads `path` if it passes every rule of this module, else returns why not; the error names
/// `path`. With `settle` above zero, a file modified less than `settle` ago is refused with
/// [`Error::ImageNotSettled`] (zero: no such check, for datasets whose writer finished each file
/// before listing it). An empty file is always refused as not settled.
pub fn usable_image(path: &Path, settle: Duration) -> Result<UsableImage> {
    usable_image_within(path, settle, super::MAX_PIXELS)
}

/// [`usable_image`] with a cap on the pixels below [`super::MAX_PIXELS`]: a larger image is refused
/// with [`Error::ImageOverCap`] before any pixel is decoded ([`pixel_cap_for`]).
pub fn usable_image_within(path: &Path, settle: Duration, max_pixels: u64) -> Result<UsableImage> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.is_file() {
        check_settled(path, &meta, settle, SystemTime::now())?;
    }
    // Refuses what is not a regular file, unread.
    let bytes = crate::fsio::read_regular(path)?;
    if bytes.is_empty() {
        return Err(Error::ImageNotSettled { path: path.to_path_buf(), state: WriteState::Empty });
    }
    let info = verify_bytes(path, &bytes)?;
    if u64::from(info.width) * u64::from(info.height) > max_pixels {
        let (width, height) = (info.width, info.height);
        return Err(Error::ImageOverCap { path: path.to_path_buf(), width, height, limit: max_pixels });
    }
    let image = super::decode_rgb(path, &bytes)?;
    Ok(UsableImage { image, warning: info.warning })
}

/// The pixel cap of a board with `memory` bytes: a decoded frame (3 bytes a pixel) within a 32nd
/// of its memory, at most [`super::MAX_PIXELS`]. 4 GB: 44.7 million pixels (an 8K frame, 33 million,
/// passes; a 13000² one does not); 8 GB: 89 million; 16 GB and more: [`super::MAX_PIXELS`].
/// `headroom field run`'s default `--max-pixels`: one frame never holds more than the training.
pub fn pixel_cap_for(memory: u64) -> u64 {
    (memory / 96).clamp(1, super::MAX_PIXELS)
}

/// Whether the file `meta` describes looks finished at `now`: not empty, and not modified within
/// `settle` of `now`.
fn check_settled(path: &Path, meta: &std::fs::Metadata, settle: Duration, now: SystemTime) -> Result<()> {
    let not_settled = |state| Err(Error::ImageNotSettled { path: path.to_path_buf(), state });
    if meta.len() == 0 {
        return not_settled(WriteState::Empty);
    }
    if settle.is_zero() {
        return Ok(());
    }
    // A file system without modification times cannot tell: the content checks still apply.
    let Ok(modified) = meta.modified() else { return Ok(()) };
    // A modification time in the future (the clock set back since, a copy that kept its times) is
    // no write in progress: refusing it would skip the file until the clock caught up.
    let Ok(age) = now.duration_since(modified) else { return Ok(()) };
    if age < settle {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        return not_settled(WriteState::Recent { age_ms: millis(age), settle_ms: millis(settle) });
    }
    Ok(())
}

#[cfg(test)]
#[path = "usable_tests.rs"]
mod tests;
