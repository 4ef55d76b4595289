//! Pixel probes for the tests: where a colour is, so that a test can check what a picture shows.

use std::path::Path;

use image::{Rgb, RgbImage};
use plotters::style::RGBColor;

/// `path` decoded as RGB.
pub(crate) fn open(path: &Path) -> RgbImage {
    image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).to_rgb8()
}

/// `colour` as an image pixel.
pub(crate) fn rgb(colour: RGBColor) -> Rgb<u8> {
    Rgb([colour.0, colour.1, colour.2])
}

/// How many pixels of row `y`, between columns `x0..x1`, are exactly `colour`.
pub(crate) fn count_in_row(image: &RgbImage, y: u32, x0: u32, x1: u32, colour: Rgb<u8>) -> usize {
    (x0..x1.min(image.width())).filter(|&x| *image.get_pixel(x, y) == colour).count()
}

/// The rows with at least `least` pixels of `colour` (between columns `x0..x1`).
pub(crate) fn rows_with(image: &RgbImage, colour: Rgb<u8>, least: usize, x0: u32, x1: u32) -> Vec<u32> {
    (0..image.height()).filter(|&y| count_in_row(image, y, x0, x1, colour) >= least).collect()
}

/// The columns with at least `least` pixels of `colour`.
pub(crate) fn columns_with(image: &RgbImage, colour: Rgb<u8>, least: usize) -> Vec<u32> {
    (0..image.width())
        .filter(|&x| (0..image.height()).filter(|&y| *image.get_pixel(x, y) == colour).count() >= least)
        .collect()
}

/// The mean of `rows`, panicking with `what` when there are none.
pub(crate) fn centre(rows: &[u32], what: &str) -> f64 {
    assert!(!rows.is_empty(), "no rows of {what}");
    rows.iter().map(|&r| f64::from(r)).sum::<f64>() / rows.len() as f64
}

/// The files in `dir`, by name.
pub(crate) fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The longest run of `colour` in row `y`: `(first column, length)`.
pub(crate) fn longest_run(image: &RgbImage, y: u32, colour: Rgb<u8>) -> (u32, u32) {
    let (mut best, mut start, mut length) = ((0, 0), 0, 0);
    for x in 0..image.width() {
        if *image.get_pixel(x, y) == colour {
            if length == 0 {
                start = x;
            }
            length += 1;
            if length > best.1 {
                best = (start, length);
            }
        } else {
            length = 0;
        }
    }
    best
}
