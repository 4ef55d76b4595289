//! What reading an image holds at once, as the memory planner counts it: the file's bytes, the
//! decoder's pixels, the RGB copy of other pixel layouts, and the copy a 90° EXIF turn makes.

use std::path::{Path, PathBuf};

use headroom_core::imageio::{largest_read_cost, read_cost, read_header};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/jpeg").join(name)
}

fn cost(path: &Path) -> (u64, u64, u64) {
    let bytes = std::fs::read(path).expect("read");
    let header = read_header(path, &bytes).expect("header");
    let pixels = u64::from(header.width) * u64::from(header.height);
    (read_cost(path, &bytes).expect("cost"), bytes.len() as u64, pixels)
}

#[test]
fn a_jpeg_holds_its_file_and_its_pixels_and_a_90_degree_turn_one_copy_more() {
    // EXIF 1 (as stored), 3 (180°, turned in place) and 6 and 8 (90°, a new buffer).
    for (name, copies) in [("exif_1.jpg", 1), ("exif_3.jpg", 1), ("exif_6.jpg", 2), ("exif_8.jpg", 2)] {
        let (cost, file, pixels) = cost(&fixture(name));
        assert_eq!(cost, file + copies * pixels * 3, "{name}");
    }
}

#[test]
fn a_png_with_alpha_holds_its_rgba_pixels_and_their_rgb_copy() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let (rgb, rgba) = (tmp.path().join("rgb.png"), tmp.path().join("rgba.png"));
    image::RgbImage::new(40, 30).save(&rgb).expect("rgb png");
    image::RgbaImage::new(40, 30).save(&rgba).expect("rgba png");
    let (cost_rgb, file_rgb, pixels) = cost(&rgb);
    assert_eq!(cost_rgb, file_rgb + pixels * 3);
    let (cost_rgba, file_rgba, _) = cost(&rgba);
    assert_eq!(cost_rgba, file_rgba + pixels * (4 + 3));
    // The largest of a set; unreadable files count nothing.
    let missing = tmp.path().join("gone.png");
    let paths = [rgb.as_path(), missing.as_path(), rgba.as_path()];
    assert_eq!(largest_read_cost(paths), cost_rgba);
    assert_eq!(largest_read_cost([missing.as_path()]), 0);
}

/// A file larger than the prefix read for its headers costs what the whole file's bytes say: a
/// camera-sized JPEG from its start, a TIFF (whose directory the encoder writes at its end) read
/// whole.
#[test]
fn a_large_file_is_costed_from_its_start_as_from_all_of_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut noise = image::RgbImage::new(1200, 900);
    for (i, p) in noise.pixels_mut().enumerate() {
        let v = (i.wrapping_mul(2_654_435_761) >> 7) as u8;
        *p = image::Rgb([v, v.wrapping_mul(3), v.wrapping_add(91)]);
    }
    for (name, format) in [("frame.jpg", image::ImageFormat::Jpeg), ("frame.tiff", image::ImageFormat::Tiff)]
    {
        let path = tmp.path().join(name);
        noise.save_with_format(&path, format).expect("write");
        let bytes = std::fs::read(&path).expect("read");
        assert!(bytes.len() > 128 << 10, "{name}: {} bytes, not past the prefix", bytes.len());
        let whole = read_cost(&path, &bytes).expect("cost");
        assert_eq!(headroom_core::imageio::read_cost_of_file(&path).expect("from the file"), whole, "{name}");
        assert_eq!(largest_read_cost([path.as_path()]), whole, "{name}");
    }
}
