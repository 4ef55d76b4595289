//! What every picture shares: the embedded font, drawing into an RGB buffer, encoding by
//! extension and the atomic write.

use std::error::Error as StdError;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use image::RgbImage;
use plotters::backend::RGBPixel;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::error::invalid;
use crate::{Error, Result};

/// The font that labels every picture (Bitstream Vera licence, `assets/DejaVuSans.LICENSE`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family name plotters asks for; the embedded font is registered under it.
pub(crate) const FAMILY: &str = "sans-serif";
/// What a drawing step returns: plotters' errors are generic over the backend, so boxed.
pub(crate) type DrawResult<T = ()> = std::result::Result<T, Box<dyn StdError>>;
/// The drawing area over a whole buffer.
pub(crate) type Area<'a> = DrawingArea<BitMapBackend<'a, RGBPixel>, Shift>;

/// matplotlib's tab10, the series colours of Ultralytics' plots.
pub(crate) const TAB10: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];
/// Legend frames.
pub(crate) const FRAME: RGBColor = RGBColor(160, 160, 160);

/// Registers the embedded font under [`FAMILY`], once per process.
pub(crate) fn register_embedded_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok { Ok(()) } else { Err(Error::Font) }
}

/// A white `width`x`height` image with `draw` applied to it.
pub(crate) fn draw(width: u32, height: u32, draw: impl FnOnce(&Area) -> DrawResult) -> DrawResult<RgbImage> {
    let mut image = RgbImage::from_pixel(width, height, image::Rgb([255, 255, 255]));
    draw_on(&mut image, draw)?;
    Ok(image)
}

/// `draw` applied over `image` (what is there stays unless drawn over).
pub(crate) fn draw_on(image: &mut RgbImage, draw: impl FnOnce(&Area) -> DrawResult) -> DrawResult {
    let size = image.dimensions();
    let backend = BitMapBackend::<RGBPixel>::with_buffer_and_format(image.as_mut(), size)?;
    let root = backend.into_drawing_area();
    draw(&root)?;
    root.present()?;
    Ok(())
}

/// The pixel width and height of `text` in the embedded font at `size`.
pub(crate) fn text_size(text: &str, size: f64) -> DrawResult<(u32, u32)> {
    Ok((FAMILY, size).into_font().box_size(text)?)
}

/// How [`save`] encodes `path`, from its extension.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Format {
    Png,
    Jpeg,
}

/// The format of `path` by its extension (`.png`, `.jpg`, `.jpeg`, any case).
pub(crate) fn format_of(path: &Path) -> Result<Format> {
    let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match extension.as_str() {
        "png" => Ok(Format::Png),
        "jpg" | "jpeg" => Ok(Format::Jpeg),
        _ => Err(invalid(
            path.display().to_string(),
            "the file name must end in .png, .jpg or .jpeg (the format follows the extension)",
        )),
    }
}

/// Runs `draw`, encodes its image in the format of `path` and writes it atomically. A drawing or
/// encoding failure is an [`Error::Draw`] naming `path`, and writes nothing.
pub(crate) fn save(path: &Path, draw: impl FnOnce() -> DrawResult<RgbImage>) -> Result<()> {
    let format = format_of(path)?;
    register_embedded_font()?;
    let failed = |e: Box<dyn StdError>| Error::Draw { path: path.to_path_buf(), reason: e.to_string() };
    let image = draw().map_err(failed)?;
    let bytes = encode(&image, format).map_err(failed)?;
    write_atomic(path, &bytes)
}

fn encode(image: &RgbImage, format: Format) -> DrawResult<Vec<u8>> {
    let mut bytes = Vec::new();
    match format {
        Format::Png => image.write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Png)?,
        Format::Jpeg => {
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut bytes, 90).encode_image(image)?
        }
    }
    Ok(bytes)
}

/// The temporary beside `path` that an atomic write goes through (`.<name>.<pid>.tmp`, the same
/// pattern as `headroom_core::fsio`, so a run's stale-temporary sweep finds it).
fn temporary_path(path: &Path) -> PathBuf {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    parent.join(format!(".{name}.{}.tmp", std::process::id()))
}

/// Writes `bytes` to `path` through a flushed temporary in the same folder and a rename: a reader
/// sees the old file or the new one, never a part. Creates missing parent folders.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let tmp = temporary_path(path);
    if let Some(parent) = tmp.parent() {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let written = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}
