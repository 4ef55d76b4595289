//! Ultralytics' `val_batch0_pred.jpg` / `train_batch0.jpg`: up to 16 images in a grid, each with
//! its boxes in a per-class colour and a name (and score) tag.

use std::path::Path;

use image::RgbImage;
use image::imageops::{self, FilterType};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::Result;
use crate::canvas::{self, DrawResult, FAMILY};
use crate::error::invalid;

/// At most this many tiles are drawn (the first ones), as Ultralytics' `max_subplots`.
pub const MAX_TILES: usize = 16;
/// The mosaic's longest side is at most this (Ultralytics' `max_size`).
pub const MAX_SIDE: u32 = 1920;

/// Ultralytics' default palette (`ultralytics.utils.plotting.Colors`), class `k` takes
/// `PALETTE[k % 20]`.
pub const PALETTE: [[u8; 3]; 20] = [
    [0x04, 0x2A, 0xFF],
    [0x0B, 0xDB, 0xEB],
    [0xF3, 0xF3, 0xF3],
    [0x00, 0xDF, 0xB7],
    [0x11, 0x1F, 0x68],
    [0xFF, 0x6F, 0xDD],
    [0xFF, 0x44, 0x4F],
    [0xCC, 0xED, 0x00],
    [0x00, 0xF3, 0x44],
    [0xBD, 0x00, 0xFF],
    [0x00, 0xB4, 0xFF],
    [0xDD, 0x00, 0xBA],
    [0x00, 0xFF, 0xFF],
    [0x26, 0xC0, 0x00],
    [0x01, 0xFF, 0xB3],
    [0x7D, 0x24, 0xFF],
    [0x7B, 0x00, 0x68],
    [0xFF, 0x1B, 0x6C],
    [0xFC, 0x6D, 0x2F],
    [0xA2, 0xFF, 0x0B],
];

/// One box to draw on a tile.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawBox {
    /// Class index into the names.
    pub class: usize,
    /// Corners `[x1, y1, x2, y2]` in the tile image's pixels.
    pub xyxy: [f32; 4],
    /// The detection's confidence; `None` for a label (drawn as the name alone).
    pub score: Option<f32>,
}

/// One image of a mosaic with its boxes.
#[derive(Debug, Clone, PartialEq)]
pub struct Tile {
    /// The picture, any size.
    pub image: RgbImage,
    /// Boxes in `image`'s pixels.
    pub boxes: Vec<DrawBox>,
    /// A caption in the tile's top-left corner (the file name, say).
    pub title: Option<String>,
}

/// The colour of class `class`.
pub fn class_colour(class: usize) -> [u8; 3] {
    PALETTE[class % PALETTE.len()]
}

/// Ultralytics' `val_batch0_pred.jpg` / labels mosaic: the first [`MAX_TILES`] tiles in a grid of
/// `ceil(sqrt(n))` columns (4x4 for 16), as many rows as needed; each tile scaled, aspect kept, to
/// fit a cell (the widest tile's width, the highest tile's height, shrunk so that the mosaic is
/// at most [`MAX_SIDE`] on a side) and centred on
/// white; boxes in the class's [`PALETTE`] colour with a "name" or "name 0.87" tag. The format
/// follows the extension (.jpg or .png). Written atomically.
///
/// Errors: no tiles, an empty image, a box whose class is not below `names.len()` or whose
/// corners are not finite (named by tile and box), before anything is written; a file that
/// cannot be drawn or written.
pub fn write_mosaic(path: &Path, tiles: &[Tile], names: &[String]) -> Result<()> {
    check(tiles, names)?;
    let tiles = &tiles[..tiles.len().min(MAX_TILES)];
    canvas::save(path, || {
        let layout = Layout::new(tiles);
        let mut mosaic = RgbImage::from_pixel(layout.width(), layout.height(), image::Rgb([255, 255, 255]));
        let placed: Vec<Placed> =
            tiles.iter().enumerate().map(|(i, t)| layout.place(&mut mosaic, i, t)).collect();
        canvas::draw_on(&mut mosaic, |root| annotate(root, &layout, tiles, &placed, names))?;
        Ok(mosaic)
    })
}

fn check(tiles: &[Tile], names: &[String]) -> Result<()> {
    if tiles.is_empty() {
        return Err(invalid("mosaic", "no tiles to draw"));
    }
    for (t, tile) in tiles.iter().enumerate() {
        if tile.image.width() == 0 || tile.image.height() == 0 {
            return Err(invalid(format!("mosaic tile {t}"), "the image is empty (0 pixels)"));
        }
        for (b, drawn) in tile.boxes.iter().enumerate() {
            let what = || format!("mosaic tile {t}, box {b}");
            if drawn.class >= names.len() {
                return Err(invalid(
                    what(),
                    format!(
                        "class {} but only {} names (classes 0..{})",
                        drawn.class,
                        names.len(),
                        names.len()
                    ),
                ));
            }
            if drawn.xyxy.iter().any(|v| !v.is_finite()) {
                return Err(invalid(what(), format!("corners {:?} are not finite", drawn.xyxy)));
            }
        }
    }
    Ok(())
}

/// The grid: `columns` x `rows` cells of `cell_width` x `cell_height` pixels.
struct Layout {
    columns: u32,
    rows: u32,
    cell_width: u32,
    cell_height: u32,
}

/// Where a tile landed: its top-left pixel in the mosaic and its scale.
#[derive(Debug, Clone, Copy)]
struct Placed {
    x: i32,
    y: i32,
    scale: f64,
}

impl Layout {
    /// Cells as wide as the widest tile and as high as the highest, shrunk (never grown) so that
    /// the mosaic's longer side is at most [`MAX_SIDE`].
    fn new(tiles: &[Tile]) -> Layout {
        let n = tiles.len() as u32;
        let columns = (f64::from(n).sqrt().ceil() as u32).max(1);
        let rows = n.div_ceil(columns);
        let widest = tiles.iter().map(|t| t.image.width()).max().unwrap_or(1);
        let highest = tiles.iter().map(|t| t.image.height()).max().unwrap_or(1);
        let longest = f64::from((columns * widest).max(rows * highest));
        let shrink = (f64::from(MAX_SIDE) / longest).min(1.0);
        let side = |v: u32| ((f64::from(v) * shrink).floor() as u32).max(1);
        Layout { columns, rows, cell_width: side(widest), cell_height: side(highest) }
    }

    fn width(&self) -> u32 {
        self.columns * self.cell_width
    }

    fn height(&self) -> u32 {
        self.rows * self.cell_height
    }

    /// Top-left pixel of cell `i`.
    fn cell_corner(&self, i: usize) -> (u32, u32) {
        let i = i as u32;
        ((i % self.columns) * self.cell_width, (i / self.columns) * self.cell_height)
    }

    /// Copies `tile` into its cell, scaled to fit (aspect kept) and centred.
    fn place(&self, mosaic: &mut RgbImage, i: usize, tile: &Tile) -> Placed {
        let (w, h) = tile.image.dimensions();
        let scale =
            (f64::from(self.cell_width) / f64::from(w)).min(f64::from(self.cell_height) / f64::from(h));
        let sw = ((f64::from(w) * scale).round() as u32).clamp(1, self.cell_width);
        let sh = ((f64::from(h) * scale).round() as u32).clamp(1, self.cell_height);
        let (cx, cy) = self.cell_corner(i);
        let (x, y) = (cx + (self.cell_width - sw) / 2, cy + (self.cell_height - sh) / 2);
        if (sw, sh) == (w, h) {
            imageops::replace(mosaic, &tile.image, i64::from(x), i64::from(y));
        } else {
            let resized = imageops::resize(&tile.image, sw, sh, FilterType::Triangle);
            imageops::replace(mosaic, &resized, i64::from(x), i64::from(y));
        }
        Placed { x: x as i32, y: y as i32, scale: f64::from(sw) / f64::from(w) }
    }
}

/// Black or white, whichever reads better on `colour`.
fn ink_on(colour: [u8; 3]) -> RGBColor {
    let luma = 0.299 * f64::from(colour[0]) + 0.587 * f64::from(colour[1]) + 0.114 * f64::from(colour[2]);
    if luma > 150.0 { BLACK } else { WHITE }
}

/// Boxes, tags, titles and cell borders.
fn annotate(
    root: &canvas::Area,
    layout: &Layout,
    tiles: &[Tile],
    placed: &[Placed],
    names: &[String],
) -> DrawResult {
    let cell_side = layout.cell_width.max(layout.cell_height);
    let line = ((f64::from(cell_side) * 0.004).round() as u32).max(2);
    let text_size = (f64::from(cell_side) / 30.0).clamp(11.0, 22.0);
    for (i, (tile, at)) in tiles.iter().zip(placed).enumerate() {
        let (cx, cy) = layout.cell_corner(i);
        let (cx, cy) = (cx as i32, cy as i32);
        let size = (layout.cell_width, layout.cell_height);
        let cell = root.clone().shrink((cx, cy), size);
        for drawn in &tile.boxes {
            let colour = class_colour(drawn.class);
            let rgb = RGBColor(colour[0], colour[1], colour[2]);
            let map = |v: f32, offset: i32| (f64::from(v) * at.scale).round() as i32 + offset;
            let (x1, y1) = (map(drawn.xyxy[0], at.x - cx), map(drawn.xyxy[1], at.y - cy));
            let (x2, y2) = (map(drawn.xyxy[2], at.x - cx), map(drawn.xyxy[3], at.y - cy));
            cell.draw(&Rectangle::new([(x1, y1), (x2, y2)], rgb.stroke_width(line)))?;
            let name = &names[drawn.class];
            let text = match drawn.score {
                Some(score) => format!("{name} {score:.2}"),
                None => name.clone(),
            };
            tag(&cell, &text, (x1, y1), rgb, ink_on(colour), text_size)?;
        }
        if let Some(title) = &tile.title {
            let corner = (at.x - cx + 2, at.y - cy + text_size as i32 + 6);
            tag(&cell, title, corner, RGBColor(40, 40, 40), WHITE, text_size)?;
        }
        let corner = (cx + size.0 as i32, cy + size.1 as i32);
        root.draw(&Rectangle::new([(cx, cy), corner], WHITE.stroke_width(2)))?;
    }
    Ok(())
}

/// `text` on a filled `background` whose bottom-left is `corner`, moved inside the cell when it
/// would leave it at the top or on the right.
fn tag(
    cell: &canvas::Area,
    text: &str,
    corner: (i32, i32),
    background: RGBColor,
    ink: RGBColor,
    size: f64,
) -> DrawResult {
    let (w, h) = canvas::text_size(text, size)?;
    let (w, h) = (w as i32 + 6, h as i32 + 4);
    let (mut x, mut y) = corner;
    if y - h < 0 {
        y += h;
    }
    let width = cell.dim_in_pixel().0 as i32;
    if x + w > width {
        x = (width - w).max(0);
    }
    cell.draw(&Rectangle::new([(x, y - h), (x + w, y)], background.filled()))?;
    let style =
        TextStyle::from((FAMILY, size).into_font()).color(&ink).pos(Pos::new(HPos::Left, VPos::Center));
    cell.draw(&Text::new(text.to_string(), (x + 3, y - h / 2), style))?;
    Ok(())
}
