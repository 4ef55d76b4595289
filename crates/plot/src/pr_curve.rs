//! Ultralytics' `BoxPR_curve.png`: precision against recall, a thin line per class and the mean
//! over classes as a thick one.

use std::path::Path;

use plotters::prelude::*;

use crate::Result;
use crate::canvas::{self, DrawResult, FAMILY, FRAME, TAB10};
use crate::error::invalid;

/// Width of the PR curve, in pixels.
pub const PR_WIDTH: u32 = 900;
/// Height of the PR curve, in pixels.
pub const PR_HEIGHT: u32 = 600;
/// The mean curve's colour (Ultralytics draws it blue).
pub(crate) const MEAN_COLOUR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);

/// One named line of points `(x[i], y[i])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// The legend entry, printed as given (e.g. `circle 0.912`).
    pub label: String,
    /// Horizontal coordinates.
    pub x: Vec<f64>,
    /// Vertical coordinates, as many as `x`.
    pub y: Vec<f64>,
}

/// Ultralytics' `BoxPR_curve.png`: one thin line per class (label "name 0.xxx"), the mean as a
/// thick line ("all classes 0.xxx mAP@0.5"), recall on x, precision on y, both 0..1. Labels are
/// printed as given. PNG or JPEG by the extension of `path`, written atomically.
///
/// Errors: a curve whose `x` and `y` differ in length, or which holds a non-finite value, named by
/// its label, before anything is written; a file that cannot be drawn or written.
pub fn write_pr_curve(path: &Path, per_class: &[Curve], mean: &Curve) -> Result<()> {
    for curve in per_class.iter().chain([mean]) {
        check(curve)?;
    }
    canvas::save(path, || canvas::draw(PR_WIDTH, PR_HEIGHT, |root| render(root, per_class, mean)))
}

fn check(curve: &Curve) -> Result<()> {
    let what = || format!("curve `{}`", curve.label);
    if curve.x.len() != curve.y.len() {
        return Err(invalid(what(), format!("{} x values but {} y values", curve.x.len(), curve.y.len())));
    }
    if let Some(v) = curve.x.iter().chain(&curve.y).find(|v| !v.is_finite()) {
        return Err(invalid(what(), format!("holds {v}, every value must be finite")));
    }
    Ok(())
}

fn points(curve: &Curve) -> impl Iterator<Item = (f64, f64)> + '_ {
    curve.x.iter().copied().zip(curve.y.iter().copied())
}

fn render(root: &canvas::Area, per_class: &[Curve], mean: &Curve) -> DrawResult {
    let mut ctx = ChartBuilder::on(root)
        .caption("Precision-Recall Curve", (FAMILY, 22))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..1f64, 0f64..1f64)?;
    ctx.configure_mesh()
        .x_desc("Recall")
        .y_desc("Precision")
        .x_labels(6)
        .y_labels(6)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .bold_line_style(RGBColor(225, 225, 225))
        .light_line_style(WHITE)
        .draw()?;
    for (curve, &colour) in per_class.iter().zip(TAB10.iter().skip(1).cycle()) {
        let style = colour.stroke_width(1);
        ctx.draw_series(LineSeries::new(points(curve), style))?
            .label(&curve.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    let style = MEAN_COLOUR.stroke_width(3);
    ctx.draw_series(LineSeries::new(points(mean), style))?
        .label(&mean.label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    ctx.configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(FRAME)
        .label_font((FAMILY, 14))
        .draw()?;
    Ok(())
}
