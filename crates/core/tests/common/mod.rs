//! Shared by the golden tests (letterbox, val preprocessing, JPEG decoding).
#![allow(dead_code)] // each test crate uses a part of this module

use std::path::PathBuf;

/// tests/fixtures/letterbox.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/letterbox")
}

/// Largest per-channel difference, where, and the share of pixels that differ at all.
pub fn compare(ours: &image::RgbImage, theirs: &image::RgbImage) -> (u8, (u32, u32), f64) {
    let (mut max, mut differing, mut worst) = (0u8, 0usize, (0, 0));
    for (x, y, p) in ours.enumerate_pixels() {
        let q = theirs.get_pixel(x, y);
        let d = (0..3).map(|c| p[c].abs_diff(q[c])).max().unwrap_or(0);
        differing += usize::from(d > 0);
        if d > max {
            (max, worst) = (d, (x, y));
        }
    }
    (max, worst, differing as f64 / f64::from(ours.width() * ours.height()))
}
