//! Our metrics against a real Ultralytics `val` run (tests/fixtures/val_golden/val_run.json, made by
//! scripts/fixtures/train_demo_model.py): the boxes the validator matched, per image, and the metrics
//! it printed. Recomputed here, every number must agree within 1e-3.

use std::path::PathBuf;

use headroom_core::boxes::{Detection, Xyxy};
use headroom_core::metrics::DetectionStats;
use serde::Deserialize;

#[derive(Deserialize)]
struct Run {
    nc: usize,
    metrics: Summary,
    per_class: Vec<ClassRow>,
    images: Vec<ImageRow>,
}

#[derive(Deserialize)]
struct Summary {
    precision: f64,
    recall: f64,
    map50: f64,
    map50_95: f64,
}

#[derive(Deserialize)]
struct ClassRow {
    class: usize,
    precision: f64,
    recall: f64,
    ap50: f64,
    ap50_95: f64,
}

#[derive(Deserialize)]
struct ImageRow {
    gt_boxes: Vec<[f32; 4]>,
    gt_classes: Vec<usize>,
    pred_boxes: Vec<[f32; 4]>,
    pred_scores: Vec<f32>,
    pred_classes: Vec<usize>,
}

fn xyxy(b: [f32; 4]) -> Xyxy {
    Xyxy::new(b[0], b[1], b[2], b[3])
}

#[test]
fn metrics_match_a_real_ultralytics_val_run() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/val_golden/val_run.json");
    let run: Run =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("val_run.json")).expect("json");
    let mut stats = DetectionStats::new();
    for image in &run.images {
        let predictions: Vec<Detection> = (0..image.pred_boxes.len())
            .map(|i| Detection {
                bbox: xyxy(image.pred_boxes[i]),
                score: image.pred_scores[i],
                class: image.pred_classes[i],
            })
            .collect();
        let truth: Vec<(usize, Xyxy)> =
            image.gt_classes.iter().zip(&image.gt_boxes).map(|(c, b)| (*c, xyxy(*b))).collect();
        stats.add_image(&predictions, &truth);
    }
    let ours = stats.finish(run.nc).expect("metrics");
    let mut checks = vec![
        ("precision", ours.precision, run.metrics.precision),
        ("recall", ours.recall, run.metrics.recall),
        ("mAP50", ours.map50, run.metrics.map50),
        ("mAP50-95", ours.map50_95, run.metrics.map50_95),
    ];
    assert_eq!(ours.per_class.len(), run.per_class.len());
    for (o, t) in ours.per_class.iter().zip(&run.per_class) {
        assert_eq!(o.class, t.class);
        checks.push(("class precision", o.precision, t.precision));
        checks.push(("class recall", o.recall, t.recall));
        checks.push(("class AP50", o.ap50, t.ap50));
        checks.push(("class AP50-95", o.ap50_95, t.ap50_95));
    }
    let worst = checks
        .iter()
        .map(|(name, a, b)| (name, a, b, (a - b).abs()))
        .max_by(|x, y| x.3.total_cmp(&y.3))
        .expect("checks");
    assert!(
        worst.3 <= 1e-3,
        "largest difference {:.2e} in {}: ours {} vs Ultralytics {}",
        worst.3,
        worst.0,
        worst.1,
        worst.2
    );
    assert!(run.metrics.map50_95 > 0.3, "the golden run should be of a trained model");
}
