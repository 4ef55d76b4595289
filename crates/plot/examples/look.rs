//! Writes one of every picture headroom-plot draws, from realistic data (three classes: circle,
//! square, triangle), to look at: `cargo run -p headroom-plot --example look [-- DIR]`
//! (default `/tmp/plots-look`).

use std::path::PathBuf;

use headroom_plot::{Curve, DrawBox, MemoryLines, PlanChart, PlanRung, Tile};
use image::{Rgb, RgbImage};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "/tmp/plots-look".into()));
    std::fs::create_dir_all(&dir)?;
    let names: Vec<String> = ["circle", "square", "triangle"].map(String::from).to_vec();

    let mut csv = String::from(
        "epoch,box_loss,cls_loss,dfl_loss,kd_loss,lr,bad_steps,seconds,peak_rss_mb,precision,recall,map50,map50_95,fitness\n",
    );
    for e in 0..30 {
        let t = f64::from(e);
        let decay = (-t / 8.0).exp();
        let map = 0.85 * (1.0 - decay);
        csv += &format!(
            "{e},{:.4},{:.4},{:.4},0,{:.2e},0,60,{:.1},{:.3},{:.3},{map:.3},{:.3},{:.3}\n",
            0.9 + 1.0 * decay,
            0.5 + 2.5 * decay,
            0.9 + 0.7 * decay,
            1e-3 * (1.0 - t / 30.0) + 1e-5,
            287.0 + 4.0 * (1.0 - decay) + (t * 1.7).sin(),
            0.9 * (1.0 - decay * 0.8),
            0.8 * (1.0 - decay * 0.9),
            map * 0.7,
            map * 0.7,
        );
    }
    let lines = MemoryLines { budget_mb: Some(1200.0), estimate_mb: Some(312.0) };
    for path in headroom_plot::write_plots(&csv, &dir, &lines)? {
        println!("{}", path.display());
    }

    let component_names = [
        "runtime",
        "weights",
        "gradients",
        "optimizer",
        "averages",
        "warmup",
        "cache",
        "input",
        "trunk",
        "cut",
        "activations",
        "backward",
        "loss",
        "eval",
    ];
    let rung = |label: &str, values: [f64; 14]| PlanRung {
        label: label.to_string(),
        components: component_names.iter().zip(values).map(|(n, v)| (n.to_string(), v)).collect(),
    };
    let plan = PlanChart {
        title: "yolov8n.onnx on jetson-orin-nano-4gb".into(),
        budget_mib: 900.0,
        rungs: vec![
            rung("start", [180., 12., 12., 24., 12., 0., 0., 40., 260., 30., 610., 280., 0., 0.]),
            rung("batch 8", [180., 12., 12., 24., 12., 0., 0., 20., 130., 15., 305., 140., 0., 0.]),
            rung("checkpoint", [180., 12., 12., 24., 12., 0., 0., 20., 130., 15., 120., 140., 0., 0.]),
            rung("amp", [180., 12., 12., 24., 12., 0., 0., 10., 65., 8., 60., 70., 0., 0.]),
            rung("train head", [180., 12., 3., 6., 12., 0., 0., 10., 65., 8., 30., 35., 0., 0.]),
            rung("cache", [180., 12., 3., 6., 12., 0., 90., 0., 0., 8., 30., 35., 0., 0.]),
        ],
        chosen: Some(2),
    };
    headroom_plot::write_plan_chart(&dir.join("plan.png"), &plan)?;
    let small = PlanChart {
        title: "tiny.onnx on cpu (budget far above)".into(),
        budget_mib: 2500.0,
        rungs: vec![
            rung("start", [250., 6., 6., 12., 6., 0., 0., 2., 0., 0., 0., 0., 0., 20.]),
            rung("batch 8", [250., 6., 6., 12., 6., 0., 0., 1., 0., 0., 0., 0., 0., 14.]),
        ],
        chosen: Some(0),
    };
    headroom_plot::write_plan_chart(&dir.join("plan_small.png"), &small)?;
    let none =
        PlanChart { title: "yolov8s.onnx: nothing fits".into(), budget_mib: 200.0, chosen: None, ..plan };
    headroom_plot::write_plan_chart(&dir.join("plan_none.png"), &none)?;

    let pr = |ap: f64| {
        let x: Vec<f64> = (0..=100).map(|i| f64::from(i) / 100.0).collect();
        let y = x.iter().map(|r| (1.0 - r.powf(1.0 / (1.0 - ap).max(0.05) * 0.3)).clamp(0.0, 1.0)).collect();
        (x, y)
    };
    let per_class: Vec<Curve> = names
        .iter()
        .zip([0.91, 0.84, 0.62])
        .map(|(name, ap)| {
            let (x, y) = pr(ap);
            Curve { label: format!("{name} {ap:.3}"), x, y }
        })
        .collect();
    let (x, y) = pr(0.79);
    let mean = Curve { label: "all classes 0.790 mAP@0.5".into(), x, y };
    headroom_plot::write_pr_curve(&dir.join("BoxPR_curve.png"), &per_class, &mean)?;

    let matrix = vec![
        vec![52.0, 1.0, 3.0, 4.0],
        vec![2.0, 47.0, 0.0, 6.0],
        vec![1.0, 0.0, 38.0, 9.0],
        vec![5.0, 2.0, 11.0, 0.0],
    ];
    headroom_plot::write_confusion_matrix(&dir.join("confusion_matrix.png"), &matrix, &names, false)?;
    headroom_plot::write_confusion_matrix(
        &dir.join("confusion_matrix_normalized.png"),
        &matrix,
        &names,
        true,
    )?;

    // Many classes with long names: the column names turn vertical, the values stay while they fit.
    let coco: Vec<String> = [
        "person",
        "bicycle",
        "car",
        "motorcycle",
        "airplane",
        "bus",
        "train",
        "truck",
        "boat",
        "traffic light",
        "fire hydrant",
        "stop sign",
        "parking meter",
        "bench",
        "bird",
        "cat",
        "dog",
        "horse",
    ]
    .map(String::from)
    .to_vec();
    let side = coco.len() + 1;
    let big: Vec<Vec<f64>> = (0..side)
        .map(|r| {
            (0..side)
                .map(|c| if r == c { 40.0 + r as f64 } else { ((r * 7 + c * 3) % 11) as f64 / 3.0 })
                .collect()
        })
        .collect();
    headroom_plot::write_confusion_matrix(&dir.join("confusion_matrix_18_classes.png"), &big, &coco, true)?;

    let tiles: Vec<Tile> = (0..16).map(|i| scene(i as u32)).collect();
    headroom_plot::write_mosaic(&dir.join("val_batch0_pred.jpg"), &tiles, &names)?;
    // The same as PNG, for viewers without JPEG.
    headroom_plot::write_mosaic(&dir.join("val_batch0_pred.png"), &tiles, &names)?;
    headroom_plot::write_mosaic(&dir.join("val_batch0_labels.png"), &tiles[..3], &names)?;
    println!("wrote {}", dir.display());
    Ok(())
}

/// A 640x480 synthetic scene with a circle, a square and a triangle, and their boxes.
fn scene(seed: u32) -> Tile {
    let (w, h) = (640u32, 480u32);
    let shade = 90 + (seed * 37 % 120) as u8;
    let mut image = RgbImage::from_pixel(w, h, Rgb([shade, shade / 2 + 60, 200 - shade / 2]));
    // Circle in the left third, square in the middle, triangle on the right, heights varying.
    let jitter = |k: u32, span: u32| ((seed * 97 + k * 211) % span) as f32;
    let (cx, cy, r) = (60.0 + jitter(1, 100), 60.0 + jitter(2, 340), 45.0f32);
    let (sx, sy, s) = (240.0 + jitter(3, 60), 20.0 + jitter(4, 350), 90.0f32);
    let (tx, ty, t) = (470.0 + jitter(5, 110), 20.0 + jitter(6, 340), 100.0f32);
    for y in 0..h {
        for x in 0..w {
            let (fx, fy) = (x as f32, y as f32);
            if (fx - cx).powi(2) + (fy - cy).powi(2) < r * r {
                image.put_pixel(x, y, Rgb([230, 230, 60]));
            } else if (sx..sx + s).contains(&fx) && (sy..sy + s).contains(&fy) {
                image.put_pixel(x, y, Rgb([40, 40, 40]));
            } else if fy >= ty && fy <= ty + t && (fx - tx).abs() <= (fy - ty) / 2.0 {
                image.put_pixel(x, y, Rgb([240, 120, 120]));
            }
        }
    }
    let score = |k: u32| Some(0.5 + ((seed * 13 + k * 7) % 50) as f32 / 100.0);
    let boxes = vec![
        DrawBox { class: 0, xyxy: [cx - r, cy - r, cx + r, cy + r], score: score(1) },
        DrawBox { class: 1, xyxy: [sx, sy, sx + s, sy + s], score: score(2) },
        DrawBox { class: 2, xyxy: [tx - t / 2.0, ty, tx + t / 2.0, ty + t], score: score(3) },
    ];
    Tile { image, boxes, title: Some(format!("scene_{seed:03}.jpg")) }
}
