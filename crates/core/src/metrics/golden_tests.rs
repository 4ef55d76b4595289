//! Parity with Ultralytics 8.4.190: the cases of `tests/fixtures/metrics/*.json`, made by
//! `scripts/fixtures/metrics_golden.py` with Ultralytics' own `box_iou`, `match_predictions`,
//! `ap_per_class` and `DetMetrics`.

use std::path::PathBuf;

use serde::Deserialize;

use super::*;

const TOLERANCE: f64 = 1e-4;
const CASES: [&str; 6] = ["basic", "ties", "crowded", "sparse", "loose", "no_labels"];

#[derive(Deserialize)]
struct Case {
    nc: usize,
    images: Vec<Image>,
    expected: Expected,
    expected_stable: Expected,
    tie_order_sensitive: bool,
}

#[derive(Deserialize)]
struct Image {
    /// `[class, x1, y1, x2, y2]`.
    gt: Vec<[f64; 5]>,
    /// `[x1, y1, x2, y2, conf, class]`, by decreasing confidence.
    pred: Vec<[f64; 6]>,
    /// Per prediction, "1"/"0" per IoU threshold.
    tp: Vec<String>,
}

#[derive(Deserialize, Debug)]
struct Expected {
    mp: f64,
    mr: f64,
    map50: f64,
    map: f64,
    fitness: f64,
    ap_class_index: Vec<usize>,
    p: Vec<f64>,
    r: Vec<f64>,
    ap50: Vec<f64>,
    ap: Vec<f64>,
    nt_per_class: Vec<usize>,
    nt_per_image: Vec<usize>,
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/metrics")
        .join(format!("{name}.json"))
}

fn load(name: &str) -> Case {
    let path = fixture(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs a case through [`DetectionStats`]; returns the metrics and the tp mismatches.
fn run(case: &Case) -> (Metrics, Vec<String>) {
    let mut stats = DetectionStats::new();
    let mut mismatches = Vec::new();
    for (i, image) in case.images.iter().enumerate() {
        let gt: Vec<(usize, Xyxy)> = image
            .gt
            .iter()
            .map(|g| (g[0] as usize, Xyxy::new(g[1] as f32, g[2] as f32, g[3] as f32, g[4] as f32)))
            .collect();
        let preds: Vec<Detection> = image
            .pred
            .iter()
            .map(|p| Detection {
                bbox: Xyxy::new(p[0] as f32, p[1] as f32, p[2] as f32, p[3] as f32),
                score: p[4] as f32,
                class: p[5] as usize,
            })
            .collect();
        let tp = stats.add_image(&preds, &gt);
        for (j, (row, want)) in tp.iter().zip(&image.tp).enumerate() {
            let got: String = row.iter().map(|&b| if b { '1' } else { '0' }).collect();
            if &got != want {
                mismatches.push(format!("image {i} prediction {j}: tp {got}, Ultralytics {want}"));
            }
        }
        if tp.len() != image.tp.len() {
            mismatches.push(format!("image {i}: {} tp rows, Ultralytics {}", tp.len(), image.tp.len()));
        }
    }
    (stats.finish(case.nc).unwrap_or_else(|e| panic!("finish: {e}")), mismatches)
}

/// The largest absolute difference and where it is.
#[derive(Default)]
struct Worst {
    error: f64,
    place: String,
    count: usize,
}

impl Worst {
    fn check(&mut self, place: impl Into<String>, got: f64, want: f64) {
        let error = (got - want).abs();
        self.count += 1;
        if error > self.error || error.is_nan() {
            self.error = if error.is_nan() { f64::INFINITY } else { error };
            self.place = format!("{}: got {got}, Ultralytics {want}", place.into());
        }
    }
}

fn compare(name: &str, got: &Metrics, want: &Expected, worst: &mut Worst) {
    worst.check(format!("{name} mp"), got.precision, want.mp);
    worst.check(format!("{name} mr"), got.recall, want.mr);
    worst.check(format!("{name} map50"), got.map50, want.map50);
    worst.check(format!("{name} map50-95"), got.map50_95, want.map);
    worst.check(format!("{name} fitness"), got.fitness, want.fitness);
    let classes: Vec<usize> = got.per_class.iter().map(|c| c.class).collect();
    assert_eq!(classes, want.ap_class_index, "{name}: classes with ground truth");
    for (i, c) in got.per_class.iter().enumerate() {
        let at = |what: &str| format!("{name} class {} {what}", c.class);
        worst.check(at("p"), c.precision, want.p[i]);
        worst.check(at("r"), c.recall, want.r[i]);
        worst.check(at("ap50"), c.ap50, want.ap50[i]);
        worst.check(at("ap50-95"), c.ap50_95, want.ap[i]);
        assert_eq!(c.instances, want.nt_per_class[c.class], "{}", at("instances"));
        assert_eq!(c.images, want.nt_per_image[c.class], "{}", at("images"));
    }
    assert_eq!(got.instances, want.nt_per_class.iter().sum::<usize>(), "{name}: instances");
}

#[test]
fn metrics_match_ultralytics_goldens() {
    let mut worst = Worst::default();
    let mut mismatches = Vec::new();
    for name in CASES {
        let case = load(name);
        let (metrics, tp_mismatches) = run(&case);
        mismatches.extend(tp_mismatches.into_iter().map(|m| format!("{name}: {m}")));
        assert_eq!(metrics.images, case.images.len());
        // Our order among equal confidences is stable; the script also ran Ultralytics with a
        // stable argsort. Where the unstable order changes nothing, both goldens are equal.
        compare(name, &metrics, &case.expected_stable, &mut worst);
        if !case.tie_order_sensitive {
            compare(name, &metrics, &case.expected, &mut worst);
        }
    }
    assert!(mismatches.is_empty(), "true positives differ:\n{}", mismatches.join("\n"));
    assert!(worst.count > 100, "only {} numbers compared", worst.count);
    assert!(worst.error <= TOLERANCE, "largest error {:e} at {}", worst.error, worst.place);
    eprintln!("{} numbers compared, largest error {:e} ({})", worst.count, worst.error, worst.place);
}

#[test]
fn metrics_goldens_with_ties_are_close_to_unstable_ultralytics() {
    // Informational bound: numpy's unstable order on equal confidences moves the numbers a little.
    let case = load("ties");
    assert!(case.tie_order_sensitive, "the ties case no longer exercises equal confidences");
    let (metrics, _) = run(&case);
    let mut worst = Worst::default();
    compare("ties (numpy order)", &metrics, &case.expected, &mut worst);
    assert!(worst.error < 0.05, "largest error {:e} at {}", worst.error, worst.place);
    eprintln!("ties vs numpy's unstable order: largest difference {:e} ({})", worst.error, worst.place);
}
