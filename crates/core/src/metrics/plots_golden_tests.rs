//! Parity of the plot data with Ultralytics 8.4.190: `tests/fixtures/metrics/plots.json`, made by
//! `scripts/fixtures/confusion_golden.py` with Ultralytics' own `ap_per_class` (PR curves) and
//! `ConfusionMatrix.process_batch`.

use std::path::PathBuf;

use serde::Deserialize;

use super::*;

const TOLERANCE: f64 = 1e-6;

#[derive(Deserialize)]
struct Fixture {
    confusion_conf: Vec<f32>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    nc: usize,
    images: Vec<Image>,
    pr: Pr,
    confusion: Vec<Confusion>,
}

#[derive(Deserialize)]
struct Image {
    /// `[class, x1, y1, x2, y2]`.
    gt: Vec<[f64; 5]>,
    /// `[x1, y1, x2, y2, conf, class]`, by decreasing confidence.
    pred: Vec<[f64; 6]>,
}

#[derive(Deserialize)]
struct Pr {
    classes: Vec<usize>,
    ap50: Vec<f64>,
    precision: Vec<Vec<f64>>,
    mean: Vec<f64>,
}

#[derive(Deserialize)]
struct Confusion {
    conf: f32,
    matrix: Vec<Vec<f64>>,
    normalized: Vec<Vec<f64>>,
}

fn load() -> Fixture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/metrics/plots.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn boxes(image: &Image) -> (Vec<Detection>, Vec<(usize, Xyxy)>) {
    let xyxy = |v: &[f64]| Xyxy::new(v[0] as f32, v[1] as f32, v[2] as f32, v[3] as f32);
    let predictions = image
        .pred
        .iter()
        .map(|p| Detection { bbox: xyxy(&p[..4]), score: p[4] as f32, class: p[5] as usize })
        .collect();
    (predictions, image.gt.iter().map(|g| (g[0] as usize, xyxy(&g[1..]))).collect())
}

/// The largest absolute difference and where it is.
#[derive(Default)]
struct Worst {
    error: f64,
    place: String,
    count: usize,
}

impl Worst {
    fn check(&mut self, place: impl Fn() -> String, got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{}: length", place());
        for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
            let error = if g.is_nan() || w.is_nan() { f64::INFINITY } else { (g - w).abs() };
            self.count += 1;
            if error > self.error {
                self.error = error;
                self.place = format!("{}[{i}]: got {g}, Ultralytics {w}", place());
            }
        }
    }
}

#[test]
fn pr_curves_and_confusion_matrices_match_ultralytics() {
    let fixture = load();
    let mut worst = Worst::default();
    for case in &fixture.cases {
        let name = &case.name;
        let mut stats = DetectionStats::new();
        let mut matrices: Vec<ConfusionMatrix> = fixture
            .confusion_conf
            .iter()
            .map(|&conf| ConfusionMatrix::with_thresholds(case.nc, conf, ConfusionMatrix::IOU_THRESHOLD))
            .collect();
        for image in &case.images {
            let (predictions, truth) = boxes(image);
            stats.add_image(&predictions, &truth);
            for m in &mut matrices {
                m.add_image(&predictions, &truth).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
        let curves = stats.pr_curves();
        assert_eq!(curves.classes, case.pr.classes, "{name}: classes");
        assert_eq!(curves.recall.len(), PR_POINTS);
        worst.check(|| format!("{name} ap50"), &curves.ap50, &case.pr.ap50);
        for (i, (got, want)) in curves.precision.iter().zip(&case.pr.precision).enumerate() {
            worst.check(|| format!("{name} class {} precision", curves.classes[i]), got, want);
        }
        worst.check(|| format!("{name} mean precision"), &curves.mean(), &case.pr.mean);
        for (m, want) in matrices.iter().zip(&case.confusion) {
            assert_eq!(m.conf(), want.conf);
            assert_eq!(m.rows(), want.matrix, "{name}: matrix at conf {}", want.conf);
            for (row, (got, want)) in m.normalized().iter().zip(&want.normalized).enumerate() {
                worst.check(|| format!("{name} conf {} normalized row {row}", m.conf()), got, want);
            }
        }
    }
    assert!(worst.count > 5000, "only {} numbers compared", worst.count);
    assert!(worst.error <= TOLERANCE, "largest error {:e} at {}", worst.error, worst.place);
    eprintln!("{} numbers compared, largest error {:e} ({})", worst.count, worst.error, worst.place);
}

#[test]
fn the_default_confusion_thresholds_are_process_batch_defaults() {
    let fixture = load();
    assert_eq!(fixture.confusion_conf[0], ConfusionMatrix::CONF);
    assert_eq!(ConfusionMatrix::new(3), ConfusionMatrix::with_thresholds(3, 0.25, 0.45));
}
