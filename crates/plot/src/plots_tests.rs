//! Tests of the run plots.

use super::*;
use crate::pixels;

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
    let written = write_plots(&csv, dir.path(), &MemoryLines::default()).expect("plots");
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
    let written = write_plots(csv, dir.path(), &MemoryLines::default()).expect("plots");
    assert_eq!(names(&written), ["loss.png", "map.png", "lr.png"]);
    for path in &written {
        assert_drawn(path);
    }
}

#[test]
fn a_single_epoch_draws() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = format!("{HEADER}\n0,1.9,3.1,1.6,0,2e-4,0,60.5,5120,0.21,0.10,0.08,0.03,0.05\n");
    let written = write_plots(&csv, dir.path(), &MemoryLines::default()).expect("plots");
    assert_eq!(names(&written), ["loss.png", "map.png", "lr.png", "memory.png"]);
    for path in &written {
        assert_drawn(path);
    }
}

#[test]
fn an_all_zero_kd_loss_is_left_out() {
    let csv = format!("{HEADER}\n0,1.9,3.1,1.6,0,2e-4,0,60.5,,,,,,\n1,1.8,3.0,1.5,0.0,2e-4,0,60.5,,,,,,\n");
    let table = Table::parse(&csv).expect("parses");
    let charts = charts(&table, &MemoryLines::default()).expect("charts");
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
    let message =
        write_plots(&csv, dir.path(), &MemoryLines::default()).expect_err("a bad number").to_string();
    assert!(
        message.contains("line 3") && message.contains("`cls_loss`") && message.contains("`3.x`"),
        "{message}"
    );
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 0, "nothing written");
}

#[test]
fn a_header_without_epoch_is_refused() {
    let message = write_plots("step,box_loss\n0,1.0\n", Path::new("unused"), &MemoryLines::default())
        .expect_err("no epoch")
        .to_string();
    assert!(message.contains("line 1") && message.contains("`epoch`"), "{message}");
    let message = write_plots("epoch,box_loss\n,1.0\n", Path::new("unused"), &MemoryLines::default())
        .expect_err("empty epoch")
        .to_string();
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

/// The memory plot's csv: peak RSS drifting 287..291 MB over five epochs.
fn memory_csv() -> String {
    let mut csv = format!("{HEADER}\n");
    for (e, rss) in [287.0, 288.5, 289.0, 290.2, 291.0].iter().enumerate() {
        csv += &format!("{e},1,1,1,0,1e-3,0,60,{rss},,,,,\n");
    }
    csv
}

#[test]
fn memory_png_starts_at_zero_with_the_estimate_and_the_budget_where_they_belong() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lines = MemoryLines { budget_mb: Some(1000.0), estimate_mb: Some(500.0) };
    let written = write_plots(&memory_csv(), dir.path(), &lines).expect("plots");
    let image = pixels::open(&written[written.len() - 1]);
    assert_eq!(image.dimensions(), (WIDTH, HEIGHT));
    // Dashed lines across the plot: hundreds of pixels of their colour in a row (legend swatches
    // are 20 wide).
    let row =
        |colour, what| pixels::centre(&pixels::rows_with(&image, pixels::rgb(colour), 200, 0, WIDTH), what);
    let budget = row(BUDGET_COLOUR, "the budget");
    let estimate = row(ESTIMATE_COLOUR, "the estimate");
    let rss = row(TAB10[0], "peak RSS");
    // y = zero - scale * MB, fixed by the two reference lines.
    let scale = (estimate - budget) / 500.0;
    let zero = estimate + 500.0 * scale;
    let axis = pixels::centre(&pixels::rows_with(&image, pixels::rgb(BLACK), 500, 0, WIDTH), "the x axis");
    assert!(
        (axis - zero).abs() <= 2.0,
        "the x axis at row {axis}, value 0 at row {zero}: the axis starts at 0"
    );
    let expected_rss = zero - 289.0 * scale;
    assert!((rss - expected_rss).abs() <= 4.0, "peak RSS at row {rss}, expected {expected_rss}");
    assert!(budget < estimate && estimate < rss, "budget {budget} above estimate {estimate} above RSS {rss}");
}

#[test]
fn memory_png_without_a_budget_draws_only_the_estimate_and_without_either_starts_at_zero() {
    let table_text = memory_csv();
    let table = Table::parse(&table_text).expect("parses");
    let only_estimate = MemoryLines { budget_mb: None, estimate_mb: Some(400.0) };
    let drawn = charts(&table, &only_estimate).expect("charts");
    let memory = drawn.iter().find(|c| c.file == "memory.png").expect("memory chart");
    let names: Vec<_> = memory.levels.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["planner estimate 400 MB"]);
    assert!(memory.y_range.start == 0.0 && memory.y_range.end >= 400.0, "{:?}", memory.y_range);

    let nothing_known = MemoryLines { budget_mb: Some(f64::NAN), estimate_mb: Some(0.0) };
    let drawn = charts(&table, &nothing_known).expect("charts");
    let memory = drawn.iter().find(|c| c.file == "memory.png").expect("memory chart");
    assert!(memory.levels.is_empty(), "NaN and 0 are not known values");
    assert_eq!(memory.y_range.start, 0.0, "a drift of 4 MB must not fill the plot");
    assert!(memory.y_range.end > 291.0 && memory.y_range.end < 320.0, "{:?}", memory.y_range);

    let dir = tempfile::tempdir().expect("tempdir");
    let written = write_plots(&table_text, dir.path(), &only_estimate).expect("plots");
    let image = pixels::open(&written[written.len() - 1]);
    assert!(
        pixels::rows_with(&image, pixels::rgb(BUDGET_COLOUR), 200, 0, WIDTH).is_empty(),
        "no budget line"
    );
    assert!(
        !pixels::rows_with(&image, pixels::rgb(ESTIMATE_COLOUR), 200, 0, WIDTH).is_empty(),
        "an estimate line"
    );
}

#[test]
fn memory_png_draws_the_cuda_allocator_beside_the_resident_set_when_a_run_has_it() {
    let header = format!("{HEADER},peak_gpu_mb");
    let on_gpu = format!(
        "{header}\n1,1.9,3.1,1.6,0.8,1e-4,0,60.5,900,0.21,0.10,0.08,0.03,0.05,512.0\n\
         2,1.5,2.2,1.4,0.6,1e-5,1,59.0,910,0.45,0.30,0.28,0.14,0.15,530.0\n"
    );
    let table = Table::parse(&on_gpu).expect("parses");
    let drawn = charts(&table, &MemoryLines::default()).expect("charts");
    let memory = drawn.iter().find(|c| c.file == "memory.png").expect("memory chart");
    let names: Vec<_> = memory.series.iter().map(|s| s.name).collect();
    assert_eq!(names, ["peak RSS", "peak GPU (CUDA allocator, reserved)"]);
    // On the CPU the column is empty: the resident set alone.
    let on_cpu = format!("{header}\n1,1.9,3.1,1.6,0.8,1e-4,0,60.5,900,0.21,0.10,0.08,0.03,0.05,\n");
    let table = Table::parse(&on_cpu).expect("parses");
    let drawn = charts(&table, &MemoryLines::default()).expect("charts");
    let memory = drawn.iter().find(|c| c.file == "memory.png").expect("memory chart");
    assert_eq!(memory.series.iter().map(|s| s.name).collect::<Vec<_>>(), ["peak RSS"]);
}
