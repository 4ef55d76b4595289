//! PNG plots of a training run, drawn from its `metrics.csv`: loss, validation metrics, learning
//! rate and peak memory per epoch.
//!
//! Pure Rust end to end: plotters draws into an in-memory RGB buffer, text through ab_glyph with an
//! embedded DejaVu Sans (`assets/DejaVuSans.ttf`, licence beside it), the `image` crate encodes the
//! PNG and every file is written atomically, so a viewer never sees half a plot.

use std::error::Error as StdError;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::backend::RGBPixel;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::{Error, Result};

/// Width of every plot, in pixels.
pub const WIDTH: u32 = 800;
/// Height of every plot, in pixels.
pub const HEIGHT: u32 = 500;

/// The font that labels every plot (Bitstream Vera licence, `assets/DejaVuSans.LICENSE`).
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
/// The family name plotters asks for when a style names no font of its own.
pub(crate) const FAMILY: &str = "sans-serif";
/// Series colours: matplotlib's tab10, as in Ultralytics' plots.
const PALETTE: [RGBColor; 5] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
];
/// Series with at most this many points also get a marker per point (a single epoch is only a
/// marker); longer runs would be a smear of circles.
const MARKERS_UP_TO: usize = 40;

/// Draws the plots of a run from the text of its `metrics.csv` into `dir` and returns the paths
/// written, in this order:
///
/// - `loss.png`: `box_loss`, `cls_loss`, `dfl_loss`, and `kd_loss` when present and not all zero;
/// - `map.png`: `precision`, `recall`, `map50`, `map50_95`;
/// - `lr.png`: `lr`, on a log axis when it spans a decade or more;
/// - `memory.png`: `peak_rss_mb`.
///
/// Columns are found by header name; a missing column or an empty field is left out of the plot,
/// and a plot with nothing left to draw (older runs have no `peak_rss_mb`) is not written. Fields
/// that read as NaN or infinity are left out too. A csv with a header and no rows writes nothing.
/// Each file is `WIDTH`x`HEIGHT` RGB, replaced atomically; `dir` is created when missing.
///
/// Errors: no `epoch` column, a row with more fields than the header, or a plotted field (or an
/// epoch) that is not a number, each named by line and column, before any file is written; and a
/// plot that cannot be drawn, encoded or written, named by its path.
pub fn write_plots(metrics_csv: &str, dir: &Path) -> Result<Vec<PathBuf>> {
    let table = Table::parse(metrics_csv)?;
    let charts = charts(&table)?;
    register_embedded_font()?;
    let mut written = Vec::with_capacity(charts.len());
    for chart in &charts {
        let path = dir.join(chart.file);
        let png = render(chart)
            .map_err(|e| Error::File { path: path.clone(), reason: format!("cannot draw the plot: {e}") })?;
        headroom_core::fsio::write_atomic(&path, &png)?;
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
            return Err(data("metrics.csv is empty: a header row is expected".to_string()));
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
            data(format!("metrics.csv line {header_number}: no `epoch` column in the header `{header_line}`"))
        })?;
        table.epochs = table
            .rows
            .iter()
            .map(|(line, fields)| match fields.get(epoch_column).copied().unwrap_or("") {
                "" => {
                    Err(data(format!("metrics.csv line {line}, column `epoch`: empty (every row needs one)")))
                }
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
    Error::Plot { reason }
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
}

/// The plots that `table` has data for, in the order [`write_plots`] documents.
fn charts(table: &Table) -> Result<Vec<Chart>> {
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
    let memory = series(&[("peak_rss_mb", "peak RSS")])?;

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
        });
    }
    if !lr.is_empty() {
        charts.push(lr_chart(lr));
    }
    if !memory.is_empty() {
        charts.push(Chart {
            file: "memory.png",
            title: "Peak memory (resident set)",
            y_desc: "peak RSS (MB)",
            y_range: fitted(&memory),
            series: memory,
            y_format: short,
            legend: SeriesLabelPosition::LowerRight,
        });
    }
    Ok(charts)
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

/// Registers the embedded font under plotters' default family, once per process.
pub(crate) fn register_embedded_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok { Ok(()) } else { Err(data("the embedded DejaVuSans.ttf does not parse as a font".to_string())) }
}

/// `chart` drawn and encoded as PNG bytes.
fn render(chart: &Chart) -> std::result::Result<Vec<u8>, Box<dyn StdError>> {
    let mut pixels = vec![0u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let backend = BitMapBackend::<RGBPixel>::with_buffer_and_format(&mut pixels, (WIDTH, HEIGHT))?;
        let root = backend.into_drawing_area();
        root.fill(&WHITE)?;
        let mut ctx = ChartBuilder::on(&root)
            .caption(chart.title, (FAMILY, 24))
            .margin(16)
            .x_label_area_size(48)
            .y_label_area_size(80)
            .build_cartesian_2d(x_range(&chart.series), chart.y_range.clone())?;
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
        for (series, &color) in chart.series.iter().zip(PALETTE.iter().cycle()) {
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
            .border_style(RGBColor(160, 160, 160))
            .label_font((FAMILY, 14))
            .draw()?;
        root.present()?;
    }
    let image =
        image::RgbImage::from_raw(WIDTH, HEIGHT, pixels).ok_or("the pixel buffer has the wrong size")?;
    let mut png = Vec::new();
    image.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)?;
    Ok(png)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "epoch,box_loss,cls_loss,dfl_loss,kd_loss,lr,bad_steps,seconds,peak_rss_mb,precision,recall,map50,map50_95,fitness";

    fn names(paths: &[PathBuf]) -> Vec<String> {
        paths.iter().map(|p| p.file_name().expect("file name").to_string_lossy().into_owned()).collect()
    }

    /// Decodes `path` and checks its size and that it is not one flat colour.
    fn assert_drawn(path: &Path) {
        let image = image::open(path).expect("decodes").to_rgb8();
        assert_eq!(image.dimensions(), (WIDTH, HEIGHT), "{}", path.display());
        let background = *image.get_pixel(0, 0);
        let drawn = image.pixels().filter(|p| **p != background).count();
        assert!(drawn > 1000, "{}: only {drawn} pixels differ from the background", path.display());
    }

    #[test]
    fn three_epochs_write_four_plots() {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv = format!(
            "{HEADER}\n\
             1,1.9,3.1,1.6,0.8,1e-4,0,60.5,5120,0.21,0.10,0.08,0.03,0.05\n\
             2,1.5,2.2,1.4,0.6,1e-5,1,59.0,5200,0.45,0.30,0.28,0.14,0.15\n\
             3,1.3,1.8,1.3,0.5,1e-6,0,58.7,5230,0.60,0.41,0.40,0.22,0.24\n"
        );
        let written = write_plots(&csv, dir.path()).expect("plots");
        assert_eq!(names(&written), ["loss.png", "map.png", "lr.png", "memory.png"]);
        for path in &written {
            assert_drawn(path);
        }
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("list").collect();
        assert_eq!(left.len(), 4, "no temporaries left");
    }

    #[test]
    fn an_older_run_without_kd_and_memory_columns_writes_three() {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv = "epoch,box_loss,cls_loss,dfl_loss,lr,bad_steps,seconds,precision,recall,map50,map50_95,fitness\n\
                   0,1.9,3.1,1.6,0.01,0,60.5,0.21,0.10,0.08,0.03,0.05\n\
                   1,nan,2.2,1.4,0.009,0,59.0,,,,,\n\
                   2,1.3,1.8,1.3,0.008,0,58.7,0.60,0.41,0.40,0.22,0.24\n";
        let written = write_plots(csv, dir.path()).expect("plots");
        assert_eq!(names(&written), ["loss.png", "map.png", "lr.png"]);
        for path in &written {
            assert_drawn(path);
        }
    }

    #[test]
    fn a_single_epoch_draws() {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv = format!("{HEADER}\n0,1.9,3.1,1.6,0,2e-4,0,60.5,5120,0.21,0.10,0.08,0.03,0.05\n");
        let written = write_plots(&csv, dir.path()).expect("plots");
        assert_eq!(names(&written), ["loss.png", "map.png", "lr.png", "memory.png"]);
        for path in &written {
            assert_drawn(path);
        }
    }

    #[test]
    fn an_all_zero_kd_loss_is_left_out() {
        let csv =
            format!("{HEADER}\n0,1.9,3.1,1.6,0,2e-4,0,60.5,,,,,,\n1,1.8,3.0,1.5,0.0,2e-4,0,60.5,,,,,,\n");
        let table = Table::parse(&csv).expect("parses");
        let charts = charts(&table).expect("charts");
        let files: Vec<_> = charts.iter().map(|c| c.file).collect();
        assert_eq!(files, ["loss.png", "lr.png"], "no validation or memory values, no plot");
        let loss: Vec<_> = charts[0].series.iter().map(|s| s.name).collect();
        assert_eq!(loss, ["box", "cls", "dfl"]);
    }

    #[test]
    fn a_bad_number_names_its_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let csv = format!(
            "{HEADER}\n0,1.9,3.1,1.6,0,2e-4,0,60.5,5120,0.2,0.1,0.08,0.03,0.05\n1,1.9,3.x,1.6,0,2e-4,0,1,1,1,1,1,1,1\n"
        );
        let message = write_plots(&csv, dir.path()).expect_err("a bad number").to_string();
        assert!(
            message.contains("line 3") && message.contains("`cls_loss`") && message.contains("`3.x`"),
            "{message}"
        );
        assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "nothing written");
    }

    #[test]
    fn a_header_without_epoch_is_refused() {
        let message =
            write_plots("step,box_loss\n0,1.0\n", Path::new("unused")).expect_err("no epoch").to_string();
        assert!(message.contains("line 1") && message.contains("`epoch`"), "{message}");
        let message =
            write_plots("epoch,box_loss\n,1.0\n", Path::new("unused")).expect_err("empty epoch").to_string();
        assert!(message.contains("line 2") && message.contains("`epoch`"), "{message}");
    }

    #[test]
    fn a_learning_rate_spanning_decades_gets_a_log_axis() {
        let lr = vec![Series { name: "learning rate", points: vec![(0, 1e-4), (1, 1e-5), (2, 1e-6)] }];
        let chart = lr_chart(lr);
        assert_eq!(chart.y_desc, "learning rate (log scale)");
        assert!(chart.y_range.start < -6.0 && chart.y_range.end > -4.0, "{:?}", chart.y_range);
        assert_eq!((chart.y_format)(&-5.0), "1.0e-5");
        assert_eq!(
            (short(&0.30000000000000004), short(&3.0), short(&5120.5)),
            ("0.3".into(), "3".into(), "5120.5".into())
        );
        let flat = lr_chart(vec![Series { name: "learning rate", points: vec![(0, 0.01), (1, 0.01)] }]);
        assert_eq!(flat.y_desc, "learning rate");
    }
}
