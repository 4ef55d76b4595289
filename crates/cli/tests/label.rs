//! `headroom label` through the real binary, on the shipped demo model and synthetic images.

mod common;
use common::headroom;

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use headroom_core::dataset::labels::read_label_file;
    use headroom_infer::decode::DecodeOptions;
    use headroom_infer::detector::Detector;
    use headroom_infer::provider::SessionOptions;
    use headroom_infer::soft_scores::read_soft_scores;

    use super::*;
    use common::{demo_model, s};

    /// A synthetic val folder of `n` images; returns the image folder.
    fn synth(dir: &Path, n: usize) -> PathBuf {
        let out = dir.join("synth");
        let n = n.to_string();
        let run = headroom(&["-q", "synth", "--seed", "5", "--train", "1", "--val", &n, "--out", s(&out)]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        out.join("images/val")
    }

    fn label(images: &Path, out: &Path, extra: &[&str]) -> (serde_json::Value, std::process::Output) {
        let model = demo_model();
        let mut args =
            vec!["-q", "label", "--teacher", s(&model), "--images", s(images), "--out", s(out), "--json"];
        args.extend_from_slice(extra);
        let run = headroom(&args);
        let manifest = serde_json::from_slice(&run.stdout).unwrap_or(serde_json::Value::Null);
        (manifest, run)
    }

    fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        for entry in std::fs::read_dir(dir).expect("list") {
            let path = entry.expect("entry").path();
            out.insert(path.clone(), std::fs::read(&path).expect("read"));
        }
        out
    }

    #[test]
    fn labels_agree_with_the_detector_carry_soft_scores_and_a_rerun_resumes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 12);
        let out = dir.path().join("ds");
        let (manifest, run) = label(&images, &out, &["--topk", "5"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let counts = &manifest["counts"];
        assert_eq!(
            (counts["images"].as_u64(), counts["labelled"].as_u64()),
            (Some(12), Some(12)),
            "{manifest}"
        );
        assert_eq!(manifest["status"], "complete");
        assert_eq!(manifest["provider"], "cpu");
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest"))
                .expect("json");
        assert_eq!(saved, manifest);
        let model_bytes = std::fs::read(demo_model()).expect("model");
        assert_eq!(manifest["teacher"]["sha256"], headroom_core::hash::sha256_hex(&model_bytes));

        let mut detector = Detector::open(&demo_model(), &SessionOptions::default()).expect("detector");
        let mut boxes = 0;
        for entry in std::fs::read_dir(&images).expect("list") {
            let image_path = entry.expect("entry").path();
            let stem = image_path.file_stem().and_then(|s| s.to_str()).expect("stem");
            let labels = read_label_file(&out.join(format!("labels/{stem}.txt")), 3).expect("label parses");
            let soft = read_soft_scores(&out.join(format!("labels/{stem}.scores.bin"))).expect("soft scores");
            assert!(out.join(format!("images/{stem}.png")).exists(), "image linked");
            let image = headroom_core::imageio::read_rgb(&image_path).expect("image");
            let detections = detector.detect(&image, &DecodeOptions::predict()).expect("detect");
            assert_eq!(labels.len(), detections.len(), "{stem}");
            assert_eq!(soft.kept.len(), labels.len());
            assert!(soft.top_k.len() == 5 && soft.nc == 3);
            for ((label, d), record) in labels.iter().zip(&detections).zip(&soft.kept) {
                let iou = label.to_pixels(image.width(), image.height()).iou(d.bbox);
                assert!(label.class == d.class && iou > 0.999, "{stem}: {label:?} vs {d:?} (IoU {iou})");
                assert_eq!(record.class, Some(label.class));
                let best = record.scores.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|b| b.0);
                assert_eq!(best, Some(label.class), "{stem}: {:?}", record.scores);
                assert!((record.scores[label.class] - d.score).abs() < 1e-4);
            }
            boxes += labels.len();
        }
        assert_eq!(counts["boxes"].as_u64(), Some(boxes as u64));
        assert!(boxes > 12, "the demo model finds shapes: {boxes}");
        let config = headroom_core::dataset::DataConfig::load(&out.join("data.yaml")).expect("data.yaml");
        assert_eq!(config.names, ["circle", "square", "triangle"]);

        let before = files(&out.join("labels"));
        let (again, run) = label(&images, &out, &["--topk", "5"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(
            (again["counts"]["labelled"].as_u64(), again["counts"]["already_done"].as_u64()),
            (Some(0), Some(12))
        );
        assert_eq!(files(&out.join("labels")), before, "a resumed run changes nothing");
        // Other thresholds would mix two kinds of labels: refused.
        let (_, run) = label(&images, &out, &["--conf", "0.5"]);
        assert_eq!(run.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&run.stderr).contains("--force"));
    }

    /// A TIFF frame, which cameras write and Ultralytics lists, is labelled (it was listed by its
    /// extension, then refused as a format not supported, every night).
    #[test]
    fn a_tiff_frame_is_labelled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 1);
        let png = std::fs::read_dir(&images).expect("list").flatten().next().expect("one image").path();
        image::open(&png)
            .expect("decode")
            .into_rgb8()
            .save_with_format(images.join("frame.tiff"), image::ImageFormat::Tiff)
            .expect("tiff");
        std::fs::remove_file(&png).expect("remove");
        let out = dir.path().join("ds");
        let (manifest, run) = label(&images, &out, &[]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(
            (manifest["counts"]["labelled"].as_u64(), manifest["counts"]["skipped"].as_u64()),
            (Some(1), Some(0)),
            "{manifest}"
        );
        assert!(out.join("labels/frame.txt").is_file() && out.join("images/frame.tiff").exists());
    }

    /// `gray.png` and `gray.jpg` (one camera writing PNG, then JPEG) are both labelled, each under
    /// its whole name, and a second night labels neither again (one of them was skipped every night).
    #[test]
    fn two_images_with_one_stem_are_both_labelled_and_stay_done() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 2);
        let mut found: Vec<PathBuf> =
            std::fs::read_dir(&images).expect("list").flatten().map(|e| e.path()).collect();
        found.sort();
        let jpeg = images.join("gray.jpg");
        let pixels = image::open(&found[1]).expect("decode").into_rgb8();
        pixels.save_with_format(&jpeg, image::ImageFormat::Jpeg).expect("jpeg");
        std::fs::rename(&found[0], images.join("gray.png")).expect("rename");
        std::fs::remove_file(&found[1]).expect("remove");
        let out = dir.path().join("ds");
        let (manifest, run) = label(&images, &out, &[]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(
            (manifest["counts"]["labelled"].as_u64(), manifest["counts"]["skipped"].as_u64()),
            (Some(2), Some(0)),
            "{manifest}"
        );
        for name in ["gray.jpg", "gray.png"] {
            assert!(out.join(format!("images/{name}.{}", &name[5..])).is_file(), "{name}");
            assert!(out.join(format!("labels/{name}.txt")).is_file(), "{name}");
        }
        assert!(!out.join("labels/gray.txt").exists());
        let (again, _) = label(&images, &out, &[]);
        assert_eq!(
            (again["counts"]["already_done"].as_u64(), again["counts"]["skipped"].as_u64()),
            (Some(2), Some(0)),
            "{again}"
        );
        // The training data reads both, each with its own labels.
        let listed = std::fs::read_to_string(out.join("data.yaml")).expect("data.yaml");
        let config =
            headroom_core::dataset::DataConfig::from_yaml_str(&out.join("data.yaml"), &listed).expect("yaml");
        let split = headroom_core::dataset::load_split(
            &config,
            headroom_core::dataset::Split::Train,
            headroom_core::dataset::LoadOptions::default(),
        )
        .expect("train split");
        assert_eq!(split.images.len(), 2);
    }

    #[test]
    fn human_labels_stay_and_unreadable_images_are_listed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 4);
        std::fs::write(images.join("broken.png"), b"not a png").expect("write");
        let out = dir.path().join("ds");
        let first = std::fs::read_dir(&images)
            .expect("list")
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| !p.ends_with("broken.png"))
            .expect("an image");
        let stem = first.file_stem().and_then(|s| s.to_str()).expect("stem").to_string();
        std::fs::create_dir_all(out.join("labels")).expect("mkdir");
        let human = out.join(format!("labels/{stem}.txt"));
        std::fs::write(&human, "1 0.5 0.5 0.1 0.1\n").expect("human label");
        let (manifest, run) = label(&images, &out, &[]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(std::fs::read_to_string(&human).expect("human"), "1 0.5 0.5 0.1 0.1\n");
        assert!(out.join(format!("labels/{stem}.teacher.txt")).exists());
        assert_eq!(manifest["counts"]["conflicts"].as_u64(), Some(1), "{manifest}");
        assert_eq!(manifest["conflicts"][0]["human_label"], s(&human));
        assert_eq!(
            (manifest["counts"]["labelled"].as_u64(), manifest["counts"]["skipped"].as_u64()),
            (Some(4), Some(1))
        );
        assert!(manifest["skipped"][0]["path"].as_str().unwrap_or("").ends_with("broken.png"), "{manifest}");
        assert!(!out.join("labels/broken.txt").exists() && !out.join("labels/broken.scores.bin").exists());
        // A rerun still protects the human label and reports the conflict.
        let (again, _) = label(&images, &out, &[]);
        assert_eq!(
            (again["counts"]["already_done"].as_u64(), again["counts"]["conflicts"].as_u64()),
            (Some(4), Some(1))
        );
    }

    #[test]
    fn a_class_map_renames_and_drops_classes_and_unknown_classes_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 6);
        let (all, run) = label(&images, &dir.path().join("all"), &[]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let out = dir.path().join("mapped");
        let (mapped, run) = label(&images, &out, &["--class-map", "circle=1,2=0"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let total = |m: &serde_json::Value| m["counts"]["boxes"].as_u64().unwrap_or(0);
        let dropped = mapped["counts"]["dropped_unmapped"].as_u64().unwrap_or(0);
        assert_eq!(total(&mapped) + dropped, total(&all));
        assert_eq!(mapped["counts"]["boxes_per_class"][1], all["counts"]["boxes_per_class"][0]);
        assert_eq!(mapped["counts"]["boxes_per_class"][0], all["counts"]["boxes_per_class"][2]);
        let config = headroom_core::dataset::DataConfig::load(&out.join("data.yaml")).expect("data.yaml");
        assert_eq!(config.names, ["triangle", "circle"]);
        let (_, run) = label(&images, &dir.path().join("bad"), &["--class-map", "0=0,dog=1,9=2"]);
        assert_eq!(run.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("`dog`") && stderr.contains("`9`"), "{stderr}");
    }

    #[test]
    fn bad_teachers_outputs_and_providers_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 2);
        let not_onnx = dir.path().join("teacher.onnx");
        std::fs::write(&not_onnx, b"this is not an ONNX model").expect("write");
        let run = headroom(&[
            "label",
            "--teacher",
            s(&not_onnx),
            "--images",
            s(&images),
            "--out",
            s(&dir.path().join("x")),
        ]);
        assert_eq!(run.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&run.stderr).contains("teacher.onnx"));

        let blocker = dir.path().join("file");
        std::fs::write(&blocker, b"x").expect("write");
        let (_, run) = label(&images, &blocker.join("ds"), &[]);
        assert_eq!(run.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&run.stderr).contains("file/ds"),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );

        let (_, run) = label(&images, &dir.path().join("gpu"), &["--ep", "cuda,cpu"]);
        assert_eq!(run.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&run.stderr).to_lowercase().contains("cuda"));
        let (manifest, run) = label(&images, &dir.path().join("gpu"), &["--ep", "cuda,cpu", "--ep-fallback"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(manifest["provider"], "cpu");
    }
}

#[test]
fn label_without_arguments_explains_usage() {
    let run = headroom(&["label"]);
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--teacher"));
}
