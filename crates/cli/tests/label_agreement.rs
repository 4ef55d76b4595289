//! `headroom label` against Ultralytics' own `predict` on the same images: at least 99 % of
//! Ultralytics' boxes matched by a label of the same class with IoU ≥ 0.9 (and no more than 1 % extra
//! boxes); on the JPEG splits every box (the pixels are OpenCV's, bit for bit). The reference boxes are committed (tests/fixtures/predict_golden, made by
//! scripts/fixtures/predict_golden.py), so this runs without Python.

#[allow(dead_code)]
mod common;

use serde::Deserialize;

/// tests/fixtures/predict_golden/predictions.json.
#[derive(Debug, Deserialize)]
struct Golden {
    settings: GoldenSettings,
    splits: Vec<GoldenSplit>,
}

#[derive(Debug, Deserialize)]
struct GoldenSettings {
    conf: f32,
    iou: f32,
}

/// One `headroom synth` run; its `val` images.
#[derive(Debug, Deserialize)]
struct GoldenSplit {
    name: String,
    synth: Vec<String>,
    images: Vec<GoldenImage>,
}

#[derive(Debug, Deserialize)]
struct GoldenImage {
    file: String,
    sha256: String,
    width: u32,
    height: u32,
    boxes: Vec<GoldenBox>,
}

#[derive(Debug, Deserialize)]
struct GoldenBox {
    xyxy: [f64; 4],
    class: usize,
    conf: f64,
}

/// A box in image pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Detection {
    class: usize,
    xyxy: [f64; 4],
    conf: f64,
}

const MATCH_IOU: f64 = 0.9;
const MIN_SHARE: f64 = 0.99;

fn load_golden() -> Golden {
    let path = common::repo_root().join("tests/fixtures/predict_golden/predictions.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn iou(a: &[f64; 4], b: &[f64; 4]) -> f64 {
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let area = |r: &[f64; 4]| (r[2] - r[0]) * (r[3] - r[1]);
    let inter = w * h;
    inter / (area(a) + area(b) - inter).max(1e-12)
}

/// Greedy matching as scripts/bench/agreement.py does it: reference boxes by decreasing confidence,
/// each against the unmatched candidate of its class with the highest IoU, matched at IoU ≥
/// `threshold`. Returns (reference, candidate, IoU) per match.
fn match_boxes(
    reference: &[Detection],
    candidates: &[Detection],
    threshold: f64,
) -> Vec<(usize, usize, f64)> {
    let mut order: Vec<usize> = (0..reference.len()).collect();
    order.sort_by(|&a, &b| reference[b].conf.total_cmp(&reference[a].conf));
    let mut used = vec![false; candidates.len()];
    let mut matches = Vec::new();
    for r in order {
        let best = candidates
            .iter()
            .enumerate()
            .filter(|(c, d)| !used[*c] && d.class == reference[r].class)
            .map(|(c, d)| (c, iou(&reference[r].xyxy, &d.xyxy)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((c, overlap)) = best
            && overlap >= threshold
        {
            used[c] = true;
            matches.push((r, c, overlap));
        }
    }
    matches
}

/// Agreement over many images.
#[derive(Debug, Default)]
struct Agreement {
    reference: usize,
    candidates: usize,
    matched: usize,
    lowest_iou: f64,
    largest_conf_diff: f64,
    /// (image, reference boxes, candidate boxes, matched) where they differ.
    disagreeing: Vec<(String, usize, usize, usize)>,
}

impl Agreement {
    fn add(&mut self, image: &str, reference: &[Detection], candidates: &[Detection]) {
        let matches = match_boxes(reference, candidates, MATCH_IOU);
        if self.reference + self.candidates == 0 {
            self.lowest_iou = 1.0;
        }
        for &(r, c, overlap) in &matches {
            self.lowest_iou = self.lowest_iou.min(overlap);
            self.largest_conf_diff =
                self.largest_conf_diff.max((reference[r].conf - candidates[c].conf).abs());
        }
        self.reference += reference.len();
        self.candidates += candidates.len();
        self.matched += matches.len();
        if matches.len() < reference.len().max(candidates.len()) {
            let row = (image.to_string(), reference.len(), candidates.len(), matches.len());
            self.disagreeing.push(row);
        }
    }

    fn share(&self) -> f64 {
        if self.reference == 0 { 1.0 } else { self.matched as f64 / self.reference as f64 }
    }

    fn extra(&self) -> usize {
        self.candidates - self.matched
    }

    /// ≥ 99 % of the reference boxes matched, and at most 1 % of them as extra candidates.
    fn passes(&self) -> bool {
        self.share() >= MIN_SHARE && self.extra() as f64 <= (1.0 - MIN_SHARE) * self.reference as f64
    }

    fn report(&self) -> String {
        let mut worst = self.disagreeing.clone();
        worst.sort_by_key(|(_, r, c, m)| std::cmp::Reverse(r.max(c) - m));
        let worst: Vec<String> = worst
            .iter()
            .take(10)
            .map(|(image, r, c, m)| format!("{image} (Ultralytics {r}, headroom {c}, matched {m})"))
            .collect();
        format!(
            "{}/{} Ultralytics boxes matched ({:.2} %, same class, IoU >= {MATCH_IOU}); {} extra headroom \
             boxes; lowest IoU of a match {:.4}; largest |conf difference| {:.2e}; {} disagreeing images{}{}",
            self.matched,
            self.reference,
            100.0 * self.share(),
            self.extra(),
            self.lowest_iou,
            self.largest_conf_diff,
            self.disagreeing.len(),
            if worst.is_empty() { "" } else { ": " },
            worst.join(", ")
        )
    }
}

fn golden_detections(image: &GoldenImage) -> Vec<Detection> {
    image.boxes.iter().map(|b| Detection { class: b.class, xyxy: b.xyxy, conf: b.conf }).collect()
}

/// The golden is whole: every `--val` image listed, boxes inside their image.
#[test]
fn the_golden_lists_every_image_with_boxes_inside_it() {
    let golden = load_golden();
    for split in &golden.splits {
        let val = split.synth.iter().position(|a| a == "--val").and_then(|i| split.synth.get(i + 1));
        assert_eq!(val, Some(&split.images.len().to_string()), "{}: {:?}", split.name, split.synth);
        for image in &split.images {
            assert!(
                image.sha256.len() == 64 && (image.file.ends_with(".png") || image.file.ends_with(".jpg")),
                "{}/{}",
                split.name,
                image.file
            );
            let (w, h) = (f64::from(image.width), f64::from(image.height));
            for b in &image.boxes {
                let [x1, y1, x2, y2] = b.xyxy;
                let inside = 0.0 <= x1 && x1 < x2 && x2 <= w && 0.0 <= y1 && y1 < y2 && y2 <= h;
                assert!(inside && b.class < 3 && b.conf >= 0.25, "{}/{}: {b:?}", split.name, image.file);
            }
        }
    }
}

/// The golden boxes against altered copies of themselves: the check is able to fail.
#[test]
fn the_agreement_check_fails_on_moved_reclassed_or_missing_boxes() {
    let golden = load_golden();
    let images: Vec<&GoldenImage> = golden.splits.iter().flat_map(|s| &s.images).collect();
    let check = |alter: &dyn Fn(usize, &Detection) -> Option<Detection>| {
        let mut agreement = Agreement::default();
        let mut index = 0;
        for image in &images {
            let reference = golden_detections(image);
            let candidates: Vec<Detection> = reference
                .iter()
                .filter_map(|d| {
                    index += 1;
                    alter(index - 1, d)
                })
                .collect();
            agreement.add(&image.file, &reference, &candidates);
        }
        agreement
    };
    let shift = |d: &Detection, fraction: f64| {
        let dx = fraction * (d.xyxy[2] - d.xyxy[0]);
        Detection { xyxy: [d.xyxy[0] + dx, d.xyxy[1], d.xyxy[2] + dx, d.xyxy[3]], ..*d }
    };
    let same = check(&|_, d| Some(*d));
    assert!(same.passes() && same.matched == same.reference && same.reference > 50, "{}", same.report());
    // A shift by 3 % of the width keeps IoU 0.97 / 1.03 = 0.94: still a match.
    let nudged = check(&|_, d| Some(shift(d, 0.03)));
    assert!(nudged.passes(), "{}", nudged.report());
    // 10 % gives IoU 0.9 / 1.1 = 0.82: no box matches.
    let moved = check(&|_, d| Some(shift(d, 0.10)));
    assert!(!moved.passes() && moved.matched == 0, "{}", moved.report());
    let reclassed = check(&|_, d| Some(Detection { class: (d.class + 1) % 3, ..*d }));
    // A few boxes of another class lie on top of one of this class: those still match.
    assert!(!reclassed.passes(), "{}", reclassed.report());
    // Losing just over 1 % of the boxes is below 99 %, and so is adding as many.
    let n = same.reference / 100 + 1;
    let missing = check(&|i, d| (i >= n).then_some(*d));
    assert!(!missing.passes() && missing.matched == missing.reference - n, "{}", missing.report());
    let extra = check(&|i, d| Some(if i < n { shift(d, 0.5) } else { *d }));
    assert!(!extra.passes(), "{}", extra.report());
    assert!(golden.settings.conf == 0.25 && golden.settings.iou == 0.7, "Ultralytics' predict defaults");
}

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use std::path::Path;

    use super::*;
    use common::headroom;

    /// Reads a written label file (`class cx cy w h`, normalised) as pixel boxes, with the confidences
    /// of the soft-score file beside it.
    fn read_labels(labels: &Path, stem: &str, width: u32, height: u32) -> Vec<Detection> {
        let path = labels.join(format!("{stem}.txt"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let soft = headroom_infer::soft_scores::read_soft_scores(&labels.join(format!("{stem}.scores.bin")))
            .unwrap_or_else(|e| panic!("{stem}: {e}"));
        let (w, h) = (f64::from(width), f64::from(height));
        let rows: Vec<Detection> = text
            .lines()
            .zip(&soft.kept)
            .map(|(line, record)| {
                let v: Vec<f64> = line
                    .split_whitespace()
                    .map(|t| t.parse().unwrap_or_else(|e| panic!("{line}: {e}")))
                    .collect();
                assert_eq!(v.len(), 5, "{}: {line}", path.display());
                let (cx, cy, bw, bh) = (v[1] * w, v[2] * h, v[3] * w, v[4] * h);
                let xyxy = [cx - bw / 2.0, cy - bh / 2.0, cx + bw / 2.0, cy + bh / 2.0];
                Detection { class: v[0] as usize, xyxy, conf: f64::from(record.score) }
            })
            .collect();
        assert_eq!(rows.len(), text.lines().count(), "{}: one soft-score record per line", path.display());
        rows
    }

    #[test]
    fn labels_agree_with_ultralytics_predict_on_the_same_images() {
        let golden = load_golden();
        let dir = tempfile::tempdir().expect("tempdir");
        let teacher = common::repo_root().join("models/demo/yolov8n-shapes-160.onnx");
        let mut agreement = Agreement::default();
        let mut jpeg = Agreement::default();
        for split in &golden.splits {
            let data = dir.path().join(&split.name);
            let mut args = vec!["-q", "synth", "--out", data.to_str().expect("utf-8 path")];
            args.extend(split.synth.iter().map(String::as_str));
            let run = headroom(&args);
            assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
            let images = data.join("images/val");
            let out = dir.path().join(format!("{}-labels", split.name));
            let (conf, iou) = (golden.settings.conf.to_string(), golden.settings.iou.to_string());
            let run = headroom(&[
                "-q",
                "label",
                "--teacher",
                teacher.to_str().expect("utf-8 path"),
                "--images",
                images.to_str().expect("utf-8 path"),
                "--out",
                out.to_str().expect("utf-8 path"),
                "--conf",
                &conf,
                "--iou",
                &iou,
            ]);
            assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
            let found = std::fs::read_dir(&images).expect("list").count();
            assert_eq!(found, split.images.len(), "{}: images written by synth", split.name);
            for image in &split.images {
                let path = images.join(&image.file);
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(
                    headroom_core::hash::sha256_hex(&bytes),
                    image.sha256,
                    "{}: `headroom synth` no longer makes the golden's image; rerun \
                     scripts/fixtures/predict_golden.py",
                    path.display()
                );
                let stem = image.file.trim_end_matches(".png").trim_end_matches(".jpg");
                let ours = read_labels(&out.join("labels"), stem, image.width, image.height);
                let name = format!("{}/{}", split.name, image.file);
                agreement.add(&name, &golden_detections(image), &ours);
                if image.file.ends_with(".jpg") {
                    jpeg.add(&name, &golden_detections(image), &ours);
                }
            }
        }
        let report = agreement.report();
        eprintln!("agreement with Ultralytics predict: {report}");
        assert!(agreement.reference > 50, "too few reference boxes to measure 99 %: {report}");
        assert!(agreement.passes(), "{report}");
        let jpeg_report = jpeg.report();
        eprintln!("of which on the JPEG splits: {jpeg_report}");
        assert!(jpeg.reference > 50, "the golden lost its JPEG splits: {jpeg_report}");
        // Regression: JPEG decoded unlike OpenCV matched 95 % of the boxes; decoded as OpenCV, all.
        assert!(jpeg.matched == jpeg.reference && jpeg.extra() == 0, "{jpeg_report}");
        // Same ONNX Runtime, bit-exact letterbox: the confidences agree too.
        assert!(agreement.largest_conf_diff < 1e-3, "{report}");
    }
}
