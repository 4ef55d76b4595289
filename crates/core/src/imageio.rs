//! Reading images as the models see them.

use std::path::Path;

use image::{DynamicImage, ImageDecoder, ImageReader, RgbImage};

use crate::{Error, Result};

/// Reads an image file as 8-bit RGB, with its EXIF orientation applied (as OpenCV's `imread`
/// does, so that boxes in labels line up). Errors name the file.
pub fn read_rgb(path: &Path) -> Result<RgbImage> {
    let image_error = |source| Error::Image { path: path.to_path_buf(), source };
    let reader = ImageReader::open(path)
        .map_err(|e| Error::io(path, e))?
        .with_guessed_format()
        .map_err(|e| Error::io(path, e))?;
    let mut decoder = reader.into_decoder().map_err(image_error)?;
    let orientation = decoder.orientation().map_err(image_error)?;
    let mut image = DynamicImage::from_decoder(decoder).map_err(image_error)?;
    image.apply_orientation(orientation);
    Ok(image.into_rgb8())
}

#[cfg(test)]
mod tests {
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
}
