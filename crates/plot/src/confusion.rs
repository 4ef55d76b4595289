//! Ultralytics' `confusion_matrix.png` and `confusion_matrix_normalized.png`: a heat map of
//! predicted class (rows) against true class (columns), "background" last on both axes.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::Result;
use crate::canvas::{self, DrawResult, FAMILY, FRAME};
use crate::error::invalid;

/// matplotlib's `Blues` colour map, the heat map of Ultralytics' confusion matrix: 9 stops, 0 to 1.
const BLUES: [(u8, u8, u8); 9] = [
    (247, 251, 255),
    (222, 235, 247),
    (198, 219, 239),
    (158, 202, 225),
    (107, 174, 214),
    (66, 146, 198),
    (33, 113, 181),
    (8, 81, 156),
    (8, 48, 107),
];
/// Cells whose value is below this are left blank, as in Ultralytics (an empty cell reads faster
/// than a wall of zeros).
const BLANK_BELOW: f64 = 0.005;

/// Ultralytics' `confusion_matrix.png` / `confusion_matrix_normalized.png`: `matrix` is
/// (nc+1)x(nc+1), rows = predicted class, columns = true class, the last row/column "background";
/// with `normalize` each column is divided by its sum (a column summing to 0 stays 0). Cell values
/// are printed (2 decimals normalised, counts otherwise; values under 0.005 left blank) while the
/// cells are large enough to hold them; class names on both axes; axis titles "True" (x) and
/// "Predicted" (y); a colour bar on the right. PNG or JPEG by the extension of `path`, written
/// atomically.
///
/// Errors: no names, a matrix that is not square or not `names.len() + 1` on a side, a negative or
/// non-finite value (named by row and column), before anything is written; a file that cannot be
/// drawn or written.
pub fn write_confusion_matrix(
    path: &Path,
    matrix: &[Vec<f64>],
    names: &[String],
    normalize: bool,
) -> Result<()> {
    check(matrix, names)?;
    let values = if normalize { normalized(matrix) } else { matrix.to_vec() };
    let mut labels: Vec<String> = names.to_vec();
    labels.push("background".to_string());
    let title = if normalize { "Confusion Matrix Normalized" } else { "Confusion Matrix" };
    canvas::save(path, || {
        let layout = Layout::new(&labels)?;
        canvas::draw(layout.width, layout.height, |root| {
            render(root, &layout, &values, &labels, title, normalize)
        })
    })
}

fn check(matrix: &[Vec<f64>], names: &[String]) -> Result<()> {
    let side = names.len() + 1;
    if names.is_empty() {
        return Err(invalid("confusion matrix", "no class names"));
    }
    if matrix.len() != side {
        return Err(invalid(
            "confusion matrix",
            format!("{} rows, expected {side} ({} classes + background)", matrix.len(), names.len()),
        ));
    }
    for (r, row) in matrix.iter().enumerate() {
        if row.len() != side {
            return Err(invalid(
                "confusion matrix",
                format!(
                    "row {r} has {} columns, expected {side} (square, {} classes + background)",
                    row.len(),
                    names.len()
                ),
            ));
        }
        if let Some((c, v)) = row.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v >= 0.0)) {
            return Err(invalid(
                "confusion matrix",
                format!("row {r}, column {c} is {v}, counts are finite and >= 0"),
            ));
        }
    }
    Ok(())
}

/// `matrix` with each column divided by its sum.
fn normalized(matrix: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let side = matrix.len();
    let sums: Vec<f64> = (0..side).map(|c| matrix.iter().map(|row| row[c]).sum()).collect();
    matrix
        .iter()
        .map(|row| row.iter().zip(&sums).map(|(v, s)| if *s > 0.0 { v / s } else { 0.0 }).collect())
        .collect()
}

/// The colour of `t` (0..1, clamped) on [`BLUES`].
pub(crate) fn blues(t: f64) -> RGBColor {
    let t = if t.is_finite() { t.clamp(0.0, 1.0) } else { 0.0 };
    let scaled = t * (BLUES.len() - 1) as f64;
    let i = (scaled.floor() as usize).min(BLUES.len() - 2);
    let f = scaled - i as f64;
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (a, b) = (BLUES[i], BLUES[i + 1]);
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// Where everything goes, in pixels.
pub(crate) struct Layout {
    pub(crate) width: u32,
    pub(crate) height: u32,
    /// Top-left corner of the grid.
    pub(crate) left: i32,
    pub(crate) top: i32,
    /// Side of one cell.
    pub(crate) cell: i32,
    /// Side count.
    pub(crate) side: usize,
    label_size: f64,
    /// Whether the column names are written vertically (they do not fit across a cell).
    rotate: bool,
    /// Width of the longest name.
    longest: i32,
}

const TITLE_HEIGHT: i32 = 56;
const AXIS_TITLE: i32 = 34;
const COLOUR_BAR: i32 = 110;

impl Layout {
    fn new(labels: &[String]) -> DrawResult<Layout> {
        let side = labels.len();
        let cell = (640 / side as i32).clamp(10, 110);
        let label_size = f64::from(cell).mul_add(0.3, 0.0).clamp(9.0, 15.0);
        let font = (FAMILY, label_size).into_font();
        let mut longest = 0;
        let mut tallest = 0;
        for label in labels {
            let (w, h) = font.box_size(label)?;
            longest = longest.max(w as i32);
            tallest = tallest.max(h as i32);
        }
        let rotate = longest + 6 > cell;
        let below = if rotate { longest } else { tallest } + 8;
        let left = AXIS_TITLE + longest + 10;
        let top = TITLE_HEIGHT;
        let grid = cell * side as i32;
        let width = (left + grid + COLOUR_BAR) as u32;
        let height = (top + grid + below + AXIS_TITLE + 10) as u32;
        Ok(Layout { width, height, left, top, cell, side, label_size, rotate, longest })
    }

    /// Top-left pixel of the cell at `row`, `column`.
    pub(crate) fn corner(&self, row: usize, column: usize) -> (i32, i32) {
        (self.left + self.cell * column as i32, self.top + self.cell * row as i32)
    }
}

/// The text of a cell, `None` when left blank.
fn cell_text(v: f64, normalize: bool) -> Option<String> {
    if v < BLANK_BELOW {
        None
    } else if normalize {
        Some(format!("{v:.2}"))
    } else if v.fract() == 0.0 {
        Some(format!("{v:.0}"))
    } else {
        Some(format!("{v:.1}"))
    }
}

fn render(
    root: &canvas::Area,
    layout: &Layout,
    values: &[Vec<f64>],
    labels: &[String],
    title: &str,
    normalize: bool,
) -> DrawResult {
    let high = values.iter().flatten().copied().fold(0.0, f64::max);
    let scale = if normalize { 1.0 } else { high.max(1.0) };
    let grid = layout.cell * layout.side as i32;
    let centre = Pos::new(HPos::Center, VPos::Center);
    let title_style = TextStyle::from((FAMILY, 22).into_font()).pos(centre);
    root.draw(&Text::new(title, (layout.left + grid / 2, TITLE_HEIGHT / 2), title_style))?;
    let value_size = (f64::from(layout.cell) * 0.28).clamp(8.0, 16.0);
    for (r, row) in values.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            let (x, y) = layout.corner(r, c);
            let fill = blues(v / scale);
            root.draw(&Rectangle::new([(x, y), (x + layout.cell, y + layout.cell)], fill.filled()))?;
            let Some(text) = cell_text(v, normalize).filter(|_| layout.cell >= 22) else { continue };
            let ink = if v / scale > 0.5 { WHITE } else { BLACK };
            let style = TextStyle::from((FAMILY, value_size).into_font()).color(&ink).pos(centre);
            root.draw(&Text::new(text, (x + layout.cell / 2, y + layout.cell / 2), style))?;
        }
    }
    root.draw(&Rectangle::new(
        [(layout.left, layout.top), (layout.left + grid, layout.top + grid)],
        FRAME.stroke_width(1),
    ))?;
    axis_labels(root, layout, labels)?;
    colour_bar(root, layout, scale, normalize)
}

/// Names left of the rows and under the columns, and the axis titles.
fn axis_labels(root: &canvas::Area, layout: &Layout, labels: &[String]) -> DrawResult {
    let font = (FAMILY, layout.label_size).into_font();
    let grid = layout.cell * layout.side as i32;
    let bottom = layout.top + grid;
    for (i, label) in labels.iter().enumerate() {
        let middle = layout.cell * i as i32 + layout.cell / 2;
        let right = TextStyle::from(font.clone()).pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(label.as_str(), (layout.left - 6, layout.top + middle), right))?;
        let x = layout.left + middle;
        if layout.rotate {
            let style = TextStyle::from(font.clone().transform(FontTransform::Rotate270))
                .pos(Pos::new(HPos::Right, VPos::Center));
            root.draw(&Text::new(label.as_str(), (x, bottom + 6), style))?;
        } else {
            let style = TextStyle::from(font.clone()).pos(Pos::new(HPos::Center, VPos::Top));
            root.draw(&Text::new(label.as_str(), (x, bottom + 6), style))?;
        }
    }
    let axis_font = (FAMILY, 17).into_font();
    let below = if layout.rotate { layout.longest } else { layout.label_size as i32 + 4 };
    let centre = Pos::new(HPos::Center, VPos::Center);
    let x_title = TextStyle::from(axis_font.clone()).pos(centre);
    root.draw(&Text::new("True", (layout.left + grid / 2, bottom + below + 14 + AXIS_TITLE / 2), x_title))?;
    let y_title = TextStyle::from(axis_font.transform(FontTransform::Rotate270)).pos(centre);
    root.draw(&Text::new("Predicted", (AXIS_TITLE / 2 + 2, layout.top + grid / 2), y_title))?;
    Ok(())
}

/// The scale beside the grid: the colour map from 0 (bottom) to `scale` (top), five ticks.
fn colour_bar(root: &canvas::Area, layout: &Layout, scale: f64, normalize: bool) -> DrawResult {
    let grid = layout.cell * layout.side as i32;
    let x = layout.left + grid + 20;
    let (top, height) = (layout.top, grid);
    for dy in 0..height {
        let t = 1.0 - f64::from(dy) / f64::from(height.max(1));
        root.draw(&PathElement::new(vec![(x, top + dy), (x + 18, top + dy)], blues(t)))?;
    }
    root.draw(&Rectangle::new([(x, top), (x + 18, top + height)], FRAME.stroke_width(1)))?;
    let style = TextStyle::from((FAMILY, 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for k in 0..=4 {
        let t = f64::from(k) / 4.0;
        let y = top + height - (f64::from(height) * t).round() as i32;
        let value = t * scale;
        let text = if normalize || scale < 10.0 { format!("{value:.2}") } else { format!("{value:.0}") };
        root.draw(&PathElement::new(vec![(x + 18, y), (x + 22, y)], BLACK))?;
        root.draw(&Text::new(text, (x + 25, y), style.clone()))?;
    }
    Ok(())
}
