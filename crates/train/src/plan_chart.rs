//! The memory plan as a PNG: one horizontal bar per candidate of the fit ladder, stacked by
//! component, the budget as a vertical line (same pure-Rust drawing as [`crate::plots`]).

use std::error::Error as StdError;
use std::path::Path;

use headroom_plan::Plan;
use plotters::backend::RGBPixel;
use plotters::prelude::*;

use crate::plots::{FAMILY, register_embedded_font};
use crate::{Error, Result};

/// Width of the chart, in pixels.
pub const WIDTH: u32 = 1000;

/// Component colours: tab20-like, one per [`headroom_plan::Components::at_peak`] entry.
const COLOURS: [RGBColor; 13] = [
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xc7, 0xc7, 0xc7),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xae, 0xc7, 0xe8),
    RGBColor(0x9e, 0xda, 0xe5),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0xff, 0xbb, 0x78),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xe3, 0x77, 0xc2),
];

/// Draws `plan` to `path` (PNG, written atomically): a bar per candidate, its estimated peak split
/// by component in MiB, the budget as a red line, the chosen candidate marked `*`.
pub fn write_chart(plan: &Plan, title: &str, path: &Path) -> Result<()> {
    register_embedded_font()?;
    let png = render(plan, title).map_err(|e| Error::File {
        path: path.to_path_buf(),
        reason: format!("cannot draw the chart: {e}"),
    })?;
    Ok(headroom_core::fsio::write_atomic(path, &png)?)
}

fn render(plan: &Plan, title: &str) -> std::result::Result<Vec<u8>, Box<dyn StdError>> {
    let n = plan.candidates.len().max(1);
    let height = (140 + 34 * n) as u32;
    let mib = |b: u64| b as f64 / f64::from(1u32 << 20);
    let top = plan.candidates.iter().map(|c| mib(c.estimate.peak)).fold(mib(plan.budget), f64::max) * 1.08;
    let labels: Vec<String> = plan
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{}{}", if plan.chosen == Some(i) { "* " } else { "" }, c.rung))
        .collect();
    let mut pixels = vec![0u8; (WIDTH * height * 3) as usize];
    {
        let backend = BitMapBackend::<RGBPixel>::with_buffer_and_format(&mut pixels, (WIDTH, height))?;
        let root = backend.into_drawing_area();
        root.fill(&WHITE)?;
        let mut ctx = ChartBuilder::on(&root)
            .caption(title, (FAMILY, 22))
            .margin(14)
            .x_label_area_size(40)
            .y_label_area_size(150)
            .build_cartesian_2d(0f64..top.max(1.0), -0.5f64..(n as f64 - 0.5))?;
        let label = |y: &f64| {
            let i = y.round();
            if (y - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(n - 1 - i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        ctx.configure_mesh()
            .x_desc("estimated peak, MiB")
            .y_labels(n * 2 + 1)
            .y_label_formatter(&label)
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15))
            .disable_y_mesh()
            .light_line_style(RGBColor(240, 240, 240))
            .draw()?;
        let names: Vec<&str> = plan
            .candidates
            .first()
            .map(|c| c.estimate.components.at_peak().iter().map(|(n, _)| *n).collect())
            .unwrap_or_default();
        for (k, name) in names.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let bars = plan.candidates.iter().enumerate().filter_map(|(i, c)| {
                let parts = c.estimate.components.at_peak();
                let start: u64 = parts[..k].iter().map(|(_, v)| v).sum();
                let value = parts.get(k).map_or(0, |(_, v)| *v);
                let y = (n - 1 - i) as f64;
                (value > 0).then(|| {
                    Rectangle::new([(mib(start), y - 0.35), (mib(start + value), y + 0.35)], colour.filled())
                })
            });
            ctx.draw_series(bars)?
                .label(*name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        }
        let budget = mib(plan.budget);
        ctx.draw_series(LineSeries::new([(budget, -0.5), (budget, n as f64 - 0.5)], RED.stroke_width(2)))?
            .label("budget")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], RED.stroke_width(2)));
        ctx.configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(160, 160, 160))
            .label_font((FAMILY, 12))
            .draw()?;
        root.present()?;
    }
    let image =
        image::RgbImage::from_raw(WIDTH, height, pixels).ok_or("the pixel buffer has the wrong size")?;
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)?;
    Ok(png)
}
