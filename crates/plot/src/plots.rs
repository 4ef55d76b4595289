//! PNG plots of a training run, drawn from its `metrics.csv`: loss, validation metrics, learning
//! rate and peak memory per epoch.
//!
use std::ops::Range;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::canvas::{self, DrawResult, FAMILY, FRAME, TAB10};
use crate::error::invalid;
use crate::{Error, Result};

/// Width of every plot, in pixels.
pub const WIDTH: u32 = 800;
/// Height of every plot, in pixels.
pub const HEIGHT: u32 = 500;

/// The budget line of `memory.png` (red, dashed).
pub(crate) const BUDGET_COLOUR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
/// The planner's estimate on `memory.png` (orange, dashed).
pub(crate) const ESTIMATE_COLOUR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
/// Series with at most this many points also get a marker per point (a single epoch is only a
/// marker); longer runs would be a smear of circles.
const MARKERS_UP_TO: usize = 40;

/// The reference lines of `memory.png`, in MB like `peak_rss_mb`; each is drawn (dashed, named in
/// the legend) when known.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MemoryLines {
    /// The memory budget the run was planned for.
    pub budget_mb: Option<f64>,
    /// The planner's estimated peak for the chosen configuration.
    pub estimate_mb: Option<f64>,
}

/// Draws the plots of a run from the text of its `metrics.csv` into `dir` and returns the paths
/// written, in this order:
///
/// - `loss.png`: `box_loss`, `cls_loss`, `dfl_loss`, and `kd_loss` when present and not all zero;
/// - `map.png`: `precision`, `recall`, `map50`, `map50_95`;
/// - `lr.png`: `lr`, on a log axis when it spans a decade or more;
/// - `memory.png`: `peak_rss_mb` (and on CUDA `peak_gpu_mb`, the caching allocator's reserved peak)
///   on an axis from 0, with the budget and the planner's estimate of
///   `memory` as dashed lines when they are known (finite and positive).
///
/// Columns are found by header name; a missing column or an empty field is left out of the plot,
/// and a plot with nothing left to draw (older runs have no `peak_rss_mb`) is not written. Fields
/// that read as NaN or infinity are left out too. A csv with a header and no rows writes nothing.
/// Each file is [`WIDTH`]x[`HEIGHT`] RGB, replaced atomically; `dir` is created when missing.
///
/// Errors: no `epoch` column, a row with more fields than the header, or a plotted field (or an
/// epoch) that is not a number, each named by line and column, before any file is written; and a
/// plot that cannot be drawn, encoded or written, named by its path.
pub fn write_plots(metrics_csv: &str, dir: &Path, memory: &MemoryLines) -> Result<Vec<PathBuf>> {
    let table = Table::parse(metrics_csv)?;
    let charts = charts(&table, memory)?;
    let mut written = Vec::with_capacity(charts.len());
    for chart in &charts {
        let path = dir.join(chart.file);
        canvas::save(&path, || canvas::draw(WIDTH, HEIGHT, |root| render(root, chart)))?;
        written.push(path);
    }
    Ok(written)
}

/// The rows of `metrics.csv`, kept as text until a column is asked for, so that a column nobody
/// plots may hold anything.
struct Table<'a> {
    header: Vec<&'a str>,
    /// (1-based line number, fields) per data row.
    rows: Vec<(usize, Vec<&'a str>)>,
    /// The epoch of each row.
    epochs: Vec<i64>,
}

impl<'a> Table<'a> {
    fn parse(text: &'a str) -> Result<Table<'a>> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut lines =
            text.lines().enumerate().map(|(i, line)| (i + 1, line)).filter(|(_, l)| !l.trim().is_empty());
        let Some((header_number, header_line)) = lines.next() else {
            return Err(data("empty: a header row is expected".to_string()));
        };
        let header: Vec<&str> = header_line.split(',').map(str::trim).collect();
        let mut rows = Vec::new();
        for (line, text) in lines {
            let fields: Vec<&str> = text.split(',').map(str::trim).collect();
            if fields.len() > header.len() {
                return Err(data(format!(
                    "metrics.csv line {line}: {} fields, the header names {}",
                    fields.len(),
                    header.len()
                )));
            }
            rows.push((line, fields));
        }
        let mut table = Table { header, rows, epochs: Vec::new() };
        let epoch_column = table.index("epoch").ok_or_else(|| {
            data(format!("line {header_number}: no `epoch` column in the header `{header_line}`"))
        })?;
        table.epochs = table
            .rows
            .iter()
            .map(|(line, fields)| match fields.get(epoch_column).copied().unwrap_or("") {
                "" => Err(data(format!("line {line}, column `epoch`: empty (every row needs one)"))),
                text => match text.parse::<f64>() {
                    Ok(v) if v.is_finite() && v.fract() == 0.0 => Ok(v as i64),
                    _ => Err(data(format!(
                        "metrics.csv line {line}, column `epoch`: `{text}` is not an integer"
                    ))),
                },
            })
            .collect::<Result<_>>()?;
        Ok(table)
    }

    fn index(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| *h == name)
    }

    /// The (epoch, value) points of column `name`, without empty and non-finite fields; `None`
    /// when the header has no such column.
    fn column(&self, name: &str) -> Result<Option<Vec<(i64, f64)>>> {
        let Some(index) = self.index(name) else { return Ok(None) };
        let mut points = Vec::with_capacity(self.rows.len());
        for ((line, fields), &epoch) in self.rows.iter().zip(&self.epochs) {
            let text = fields.get(index).copied().unwrap_or("");
            if text.is_empty() {
                continue;
            }
            let value: f64 = text.parse().map_err(|_| {
                data(format!(
                    "metrics.csv line {line}, column `{name}` (field {}): `{text}` is not a number",
                    index + 1
                ))
            })?;
            if value.is_finite() {
                points.push((epoch, value));
            }
        }
        Ok(Some(points))
    }
}

fn data(reason: String) -> Error {
    invalid("metrics.csv", reason)
}

/// One line of a plot.
struct Series {
    name: &'static str,
    points: Vec<(i64, f64)>,
}

/// One plot, ready to draw.
struct Chart {
    file: &'static str,
    title: &'static str,
    y_desc: &'static str,
    series: Vec<Series>,
    y_range: Range<f64>,
    y_format: fn(&f64) -> String,
    legend: SeriesLabelPosition,
    /// Horizontal reference lines across the whole plot.
    levels: Vec<Level>,
}

/// A dashed horizontal line at `value`, named in the legend.
struct Level {
    name: String,
    value: f64,
    colour: RGBColor,
}

/// The plots that `table` has data for, in the order [`write_plots`] documents.
fn charts(table: &Table, lines: &MemoryLines) -> Result<Vec<Chart>> {
    let series = |columns: &[(&'static str, &'static str)]| -> Result<Vec<Series>> {
        let mut out = Vec::new();
        for &(column, name) in columns {
            if let Some(points) = table.column(column)?.filter(|p| !p.is_empty()) {
                out.push(Series { name, points });
            }
        }
        Ok(out)
    };
    let mut loss =
        series(&[("box_loss", "box"), ("cls_loss", "cls"), ("dfl_loss", "dfl"), ("kd_loss", "kd")])?;
    loss.retain(|s| s.name != "kd" || s.points.iter().any(|&(_, v)| v != 0.0));
    let metrics = series(&[
        ("precision", "precision"),
        ("recall", "recall"),
        ("map50", "mAP50"),
        ("map50_95", "mAP50-95"),
    ])?;
    let lr = series(&[("lr", "learning rate")])?;
    let memory =
        series(&[("peak_rss_mb", "peak RSS"), ("peak_gpu_mb", "peak GPU (CUDA allocator, reserved)")])?;

    let mut charts = Vec::new();
    if !loss.is_empty() {
        charts.push(Chart {
            file: "loss.png",
            title: "Training loss",
            y_desc: "loss",
            y_range: from_zero(&loss, None),
            series: loss,
            y_format: short,
            legend: SeriesLabelPosition::UpperRight,
            levels: Vec::new(),
        });
    }
    if !metrics.is_empty() {
        charts.push(Chart {
            file: "map.png",
            title: "Validation metrics",
            y_desc: "value",
            y_range: from_zero(&metrics, Some(1.0)),
            series: metrics,
            y_format: short,
            legend: SeriesLabelPosition::LowerRight,
            levels: Vec::new(),
        });
    }
    if !lr.is_empty() {
        charts.push(lr_chart(lr));
    }
    if !memory.is_empty() {
        charts.push(memory_chart(memory, lines));
    }
    Ok(charts)
}

/// `memory.png`: peak RSS from 0 (a drift of a few MB must not fill the plot), with the budget and
/// the planner's estimate when known, and the legend where it covers the least.
fn memory_chart(memory: Vec<Series>, lines: &MemoryLines) -> Chart {
    let known = |v: Option<f64>| v.filter(|v| v.is_finite() && *v > 0.0);
    let mut levels = Vec::new();
    if let Some(value) = known(lines.budget_mb) {
        levels.push(Level { name: format!("budget {value:.0} MB"), value, colour: BUDGET_COLOUR });
    }
    if let Some(value) = known(lines.estimate_mb) {
        levels.push(Level {
            name: format!("planner estimate {value:.0} MB"),
            value,
            colour: ESTIMATE_COLOUR,
        });
    }
    let (_, high) = extent(&memory);
    let high = levels.iter().map(|l| l.value).fold(high, f64::max);
    let y_range = 0.0..if high > 0.0 { high * 1.08 } else { 1.0 };
    let legend = quietest_corner(&memory, &levels, &y_range);
    Chart {
        file: "memory.png",
        title: "Peak memory (resident set)",
        y_desc: "peak RSS (MB)",
        y_range,
        series: memory,
        y_format: short,
        legend,
        levels,
    }
}

/// Of the right-hand legend places (lower, middle, upper), the one whose height band holds the
/// fewest of the levels and of the series' later half, the lower one on a tie.
fn quietest_corner(series: &[Series], levels: &[Level], range: &Range<f64>) -> SeriesLabelPosition {
    let span = range.end - range.start;
    let fraction = |v: f64| (v - range.start) / span;
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.points[s.points.len() / 2..].iter().map(|&(_, v)| v))
        .chain(levels.iter().map(|l| l.value))
        .map(fraction)
        .collect();
    let bands = [
        (SeriesLabelPosition::LowerRight, 0.0..0.3),
        (SeriesLabelPosition::MiddleRight, 0.35..0.65),
        (SeriesLabelPosition::UpperRight, 0.7..1.0),
    ];
    let mut best = (usize::MAX, SeriesLabelPosition::LowerRight);
    for (position, band) in bands {
        let inside = values.iter().filter(|v| band.contains(*v)).count();
        if inside < best.0 {
            best = (inside, position);
        }
    }
    best.1
}

/// The learning-rate plot: on a log axis (values drawn as log10, labelled as powers) when every
/// rate is positive and they span at least a decade, else linear; labels in scientific notation
/// either way, so 1e-4..1e-6 stays readable.
fn lr_chart(mut lr: Vec<Series>) -> Chart {
    let values = || lr.iter().flat_map(|s| s.points.iter().map(|&(_, v)| v));
    let (low, high) = values().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let log = low > 0.0 && high / low >= 10.0;
    if log {
        for s in &mut lr {
            for point in &mut s.points {
                point.1 = point.1.log10();
            }
        }
    }
    Chart {
        file: "lr.png",
        title: "Learning rate",
        y_desc: if log { "learning rate (log scale)" } else { "learning rate" },
        y_range: fitted(&lr),
        series: lr,
        y_format: if log { |v| format!("{:.1e}", 10f64.powf(*v)) } else { |v| format!("{v:.2e}") },
        legend: SeriesLabelPosition::UpperRight,
        levels: Vec::new(),
    }
}

/// `v` without float noise or trailing zeros: `0.5`, `3`, `5120.5`.
fn short(v: &f64) -> String {
    format!("{}", (v * 1e6).round() / 1e6)
}

/// Epoch labels; none left of 0, where a single epoch 0 widens the axis.
fn epoch_label(e: &i64) -> String {
    if *e < 0 { String::new() } else { e.to_string() }
}

fn extent(series: &[Series]) -> (f64, f64) {
    series
        .iter()
        .flat_map(|s| s.points.iter().map(|&(_, v)| v))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// 0 (or the lowest value, when negative) to 5% above the highest, at most `cap` when every value
/// is within it.
fn from_zero(series: &[Series], cap: Option<f64>) -> Range<f64> {
    let (low, high) = extent(series);
    let low = low.min(0.0);
    let mut top = high + (high - low) * 0.05;
    if let Some(cap) = cap.filter(|&c| high <= c) {
        top = top.min(cap);
    }
    if top <= low { low..low + 1.0 } else { low..top }
}

/// The values' extent with 5% padding either side (10% of the value when all are equal).
fn fitted(series: &[Series]) -> Range<f64> {
    let (low, high) = extent(series);
    let pad = if high > low {
        (high - low) * 0.05
    } else if low != 0.0 {
        low.abs() * 0.1
    } else {
        1.0
    };
    low - pad..high + pad
}

/// The epochs shown: the rows' extent, widened by one either side for a single epoch.
fn x_range(series: &[Series]) -> Range<i64> {
    let epochs = series.iter().flat_map(|s| s.points.iter().map(|&(e, _)| e));
    let (low, high) = epochs.fold((i64::MAX, i64::MIN), |(lo, hi), e| (lo.min(e), hi.max(e)));
    if low >= high { low.saturating_sub(1)..high.saturating_add(1) } else { low..high }
}

/// `chart` drawn on `root`.
fn render(root: &canvas::Area, chart: &Chart) -> DrawResult {
    let x = x_range(&chart.series);
    let mut ctx = ChartBuilder::on(root)
        .caption(chart.title, (FAMILY, 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d(x.clone(), chart.y_range.clone())?;
    ctx.configure_mesh()
        .x_desc("epoch")
        .y_desc(chart.y_desc)
        .x_labels(10)
        .x_label_formatter(&epoch_label)
        .y_labels(8)
        .y_label_formatter(&chart.y_format)
        .label_style((FAMILY, 14))
        .axis_desc_style((FAMILY, 16))
        .bold_line_style(RGBColor(210, 210, 210))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()?;
    for level in &chart.levels {
        let style = level.colour.stroke_width(2);
        let line = [(x.start, level.value), (x.end, level.value)];
        ctx.draw_series(DashedLineSeries::new(line, 10, 6, style))?
            .label(&level.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
    }
    for (series, &color) in chart.series.iter().zip(TAB10.iter().cycle()) {
        ctx.draw_series(LineSeries::new(series.points.iter().copied(), color.stroke_width(2)))?
            .label(series.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
        if series.points.len() <= MARKERS_UP_TO {
            ctx.draw_series(series.points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
        }
    }
    ctx.configure_series_labels()
        .position(chart.legend.clone())
        .background_style(WHITE.mix(0.85))
        .border_style(FRAME)
        .label_font((FAMILY, 14))
        .draw()?;
    Ok(())
}

#[cfg(test)]
#[path = "plots_tests.rs"]
mod tests;
