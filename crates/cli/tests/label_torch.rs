//! `headroom label --runtime torch` (the teacher in headroom's libtorch executor, the route to a
//! Jetson's GPU where ONNX Runtime has none) labels as ONNX Runtime does, on the CPU: on the
//! synthetic set and on real photos (the JPEG fixtures, crops of a camera photo), with teachers of
//! several families, at least 99 % of ONNX Runtime's boxes have a label of the same class with
//! IoU ≥ 0.9 (and no more than 1 % extra), and the kept boxes' and the pre-NMS candidates' class
//! scores agree within 1e-4.
#![cfg(all(feature = "onnxruntime", feature = "libtorch"))]

#[allow(dead_code)]
mod common;

use std::path::{Path, PathBuf};

use common::{headroom, repo_root, s};
use headroom_infer::soft_scores::{SCORE_STEP, SoftRecord, read_soft_scores};

const MATCH_IOU: f32 = 0.9;
const MIN_SHARE: f64 = 0.99;
/// Class scores are stored quantised to 1/65535: the tolerance is 1e-4 plus one step.
const SCORE_TOLERANCE: f32 = 1e-4 + SCORE_STEP;

/// Labels `images` with `teacher` on the CPU through `runtime` into `out`; the run's stdout.
fn label(teacher: &Path, images: &Path, out: &Path, runtime: &str, conf: &str) -> String {
    let run = headroom(&[
        "-q",
        "label",
        "--teacher",
        s(teacher),
        "--images",
        s(images),
        "--out",
        s(out),
        "--runtime",
        runtime,
        "--device",
        "cpu",
        "--conf",
        conf,
        "--topk",
        "20",
        "--val-fraction",
        "0",
        "--settle",
        "0",
        "--json",
    ]);
    let text = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "label --runtime {runtime}: {}\n{text}",
        String::from_utf8_lossy(&run.stderr)
    );
    text
}

fn iou(a: [f32; 4], b: [f32; 4]) -> f32 {
    let corners = |[cx, cy, w, h]: [f32; 4]| [cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0];
    let (a, b) = (corners(a), corners(b));
    let w = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let h = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = w * h;
    let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    if union > 0.0 { inter / union } else { 0.0 }
}

/// Boxes of `reference` with a match in `other` (same class, IoU ≥ 0.9, each used once), and the
/// largest class-score difference over the matched pairs.
fn matched(reference: &[SoftRecord], other: &[SoftRecord]) -> (usize, f32) {
    let mut used = vec![false; other.len()];
    let (mut count, mut largest) = (0, 0f32);
    for r in reference {
        let best = other
            .iter()
            .enumerate()
            .filter(|(i, o)| {
                !used[*i] && o.teacher_class == r.teacher_class && iou(r.bbox, o.bbox) >= MATCH_IOU
            })
            // Boxes clipped at the image's edge can overlap after NMS (which ran unclipped): of the
            // same-class boxes at IoU ≥ 0.9, the one whose confidence is closest is the same box.
            .min_by(|a, b| (a.1.score - r.score).abs().total_cmp(&(b.1.score - r.score).abs()));
        if let Some((i, o)) = best {
            used[i] = true;
            count += 1;
            for (x, y) in r.scores.iter().zip(&o.scores) {
                largest = largest.max((x - y).abs());
            }
        }
    }
    (count, largest)
}

/// Compares the two labelled datasets image by image: (ORT boxes, matched, torch boxes, largest
/// score difference of the kept boxes, of the top-k candidates).
fn compare(ort: &Path, torch: &Path) -> (usize, usize, usize, f32, f32) {
    let (mut reference, mut found, mut theirs, mut kept_diff, mut top_diff) = (0, 0, 0, 0f32, 0f32);
    let mut files: Vec<PathBuf> = std::fs::read_dir(ort.join("labels"))
        .expect("labels")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".scores.bin"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no soft-score files in {}", ort.display());
    for file in files {
        let a = read_soft_scores(&file).expect("ORT scores");
        let b = read_soft_scores(&torch.join("labels").join(file.file_name().expect("name")))
            .expect("torch scores");
        let (m, diff) = matched(&a.kept, &b.kept);
        reference += a.kept.len();
        theirs += b.kept.len();
        found += m;
        kept_diff = kept_diff.max(diff);
        let (_, diff) = matched(&a.top_k, &b.top_k);
        top_diff = top_diff.max(diff);
    }
    (reference, found, theirs, kept_diff, top_diff)
}

/// The real photos of the JPEG fixtures (crops of a camera photo, every chroma layout).
fn photos(dir: &Path) -> PathBuf {
    let out = dir.join("photos");
    std::fs::create_dir_all(&out).expect("mkdir");
    for entry in std::fs::read_dir(repo_root().join("tests/fixtures/jpeg")).expect("fixtures") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        if name.starts_with("photo_") && name.ends_with(".jpg") {
            std::fs::copy(&path, out.join(&name)).expect("copy");
        }
    }
    out
}

#[test]
fn the_torch_runtime_labels_as_onnx_runtime_does_on_photos_and_the_synthetic_set() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = common::synth_field(dir.path(), 24, 2);
    let synthetic = data.parent().expect("data").join("images/train");
    let photos = photos(dir.path());
    // The demo teacher (trained: Ultralytics' default threshold would do), and untrained exports of
    // three more families, whose low scores need a low threshold to give boxes at all.
    let teachers = [
        (repo_root().join("models/demo/teacher-shapes-160.onnx"), "0.05"),
        (repo_root().join("tests/fixtures/onnx/yolo11n-w00625-nc3-160.onnx"), "0.001"),
        (repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx"), "0.001"),
        (repo_root().join("tests/fixtures/onnx/yolov10n-w00625-nc3-160-e2e.onnx"), "0.001"),
    ];
    let mut report = Vec::new();
    for (teacher, conf) in &teachers {
        for (set, images) in [("synthetic", &synthetic), ("photos", &photos)] {
            let name = format!("{}-{set}", teacher.file_stem().and_then(|n| n.to_str()).unwrap_or("t"));
            let (ort, torch) =
                (dir.path().join(format!("{name}-ort")), dir.path().join(format!("{name}-torch")));
            label(teacher, images, &ort, "onnxruntime", conf);
            let manifest = label(teacher, images, &torch, "torch", conf);
            assert!(
                manifest.contains("\"runtime\": \"torch\""),
                "the manifest names the runtime:\n{manifest}"
            );
            let (reference, found, theirs, kept, top) = compare(&ort, &torch);
            report.push(format!("{name}: {found}/{reference} matched, {theirs} torch boxes, scores ±{kept:.1e} kept, ±{top:.1e} top-k"));
            assert!(reference > 0, "{name}: no boxes to compare (a vacuous check)\n{}", report.join("\n"));
            let share = found as f64 / reference as f64;
            assert!(
                share >= MIN_SHARE,
                "{name}: {found} of {reference} ONNX Runtime boxes matched\n{}",
                report.join("\n")
            );
            assert!(
                theirs as f64 <= reference as f64 * (2.0 - MIN_SHARE),
                "{name}: {theirs} torch boxes against {reference}"
            );
            assert!(
                kept <= SCORE_TOLERANCE && top <= SCORE_TOLERANCE,
                "{name}: scores differ by {kept} / {top}"
            );
        }
    }
    eprintln!("{}", report.join("\n"));
}

#[test]
fn the_torch_runtime_refuses_onnx_runtime_options_and_a_missing_gpu() {
    let dir = tempfile::tempdir().expect("tempdir");
    let teacher = repo_root().join("models/demo/teacher-shapes-160.onnx");
    let images = dir.path().join("none");
    std::fs::create_dir_all(&images).expect("mkdir");
    let run = |extra: &[&str]| {
        let mut args = vec!["label", "--teacher", s(&teacher), "--images", s(&images), "--out"];
        let out = dir.path().join("out");
        let out = out.to_str().expect("utf-8").to_string();
        args.push(&out);
        args.extend_from_slice(extra);
        let run = headroom(&args);
        (run.status.code(), common::output_text(&run))
    };
    let (code, text) = run(&["--runtime", "torch", "--ep", "cpu"]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("--ep names ONNX Runtime's providers"), "{text}");
    if !headroom_train::cuda_available() {
        let (code, text) = run(&["--runtime", "torch", "--device", "cuda"]);
        assert_eq!(code, Some(2), "{text}");
        assert!(text.contains("sees no CUDA device"), "{text}");
    }
}
