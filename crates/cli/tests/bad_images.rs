//! One bad image never stops a run (issue 32): every step reads images through one filter
//! (`headroom_core::imageio::usable_image`), so an image `label` skips is skipped by `export --calib`,
//! `eval` and `train` too, each time with a warning naming it and the reason. The bad files are what
//! a camera folder holds after a bad night: a 0-byte JPEG (still being written), a truncated JPEG, a
//! 1×1 PNG, and a BMP whose header is whole but whose pixels stop half-way.

mod common;

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use std::path::{Path, PathBuf};

    use crate::common::{demo_model, headroom, repo_root, s, synth_field};

    fn stderr(output: &std::process::Output) -> String {
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// Writes the bad files into `dir`; returns each with the reason the warning must give.
    fn bad_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
        let photo = std::fs::read(repo_root().join("tests/fixtures/jpeg/photo_422.jpg")).expect("fixture");
        std::fs::write(dir.join("writing.jpg"), b"").expect("write");
        std::fs::write(dir.join("cut.jpg"), &photo[..photo.len() / 2]).expect("write");
        image::RgbImage::from_pixel(1, 1, image::Rgb([200, 10, 10])).save(dir.join("dot.png")).expect("png");
        vec![
            (dir.join("writing.jpg"), "empty file (0 bytes): a camera may still be writing it"),
            (dir.join("cut.jpg"), "corrupt image: JPEG ends before its end marker FF D9 (truncated)"),
            (dir.join("dot.png"), "corrupt image: image size 1x1 is under 10 pixels on a side"),
        ]
    }

    /// A BMP (40×40) cut in half: its header is whole, its pixels do not decode.
    fn cut_bmp(path: &Path) {
        let mut bytes = Vec::new();
        image::RgbImage::from_pixel(40, 40, image::Rgb([90, 90, 90]))
            .write_to(&mut std::io::Cursor::new(&mut bytes), image::ImageFormat::Bmp)
            .expect("bmp");
        std::fs::write(path, &bytes[..bytes.len() / 2]).expect("write");
    }

    fn assert_warned(stderr: &str, bad: &[(PathBuf, &str)]) {
        for (path, reason) in bad {
            let line = format!("skipping {}: {reason}", path.display());
            assert_eq!(stderr.matches(&line).count(), 1, "one warning `{line}` in:\n{stderr}");
        }
    }

    #[test]
    fn regression_export_calib_skips_bad_images_with_one_warning_each_and_label_skips_the_same() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 3, 1);
        let calib = data.parent().expect("synth folder").join("images/train");
        let good = std::fs::read_dir(&calib).expect("images").count();
        let bad = bad_files(&calib);
        cut_bmp(&calib.join("half.bmp"));
        let mut bad = bad;
        bad.push((calib.join("half.bmp"), "cannot decode image"));
        let model = demo_model();
        let out = dir.path().join("export");
        let run = headroom(&[
            "export",
            "--model",
            s(&model),
            "--int8",
            "--calib",
            s(&calib),
            "--out",
            s(&out),
            "--threads",
            "1",
            "--json",
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        assert_warned(&stderr(&run), &bad);
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json report");
        assert_eq!(report["int8"]["calibration_images"], good, "{report}");
        let skipped = report["int8"]["skipped_images"].as_array().expect("skipped_images");
        assert_eq!(skipped.len(), bad.len(), "{report}");
        assert!(out.join("yolov8n-shapes-160.int8.onnx").is_file());

        // The same folder through `label`: the same files skipped, for the same reasons.
        let labelled = dir.path().join("labelled");
        let label =
            headroom(&["label", "--teacher", s(&model), "--images", s(&calib), "--out", s(&labelled)]);
        assert!(label.status.success(), "{}", stderr(&label));
        assert_warned(&stderr(&label), &bad);
        let text = std::fs::read_to_string(labelled.join("manifest.json")).expect("manifest");
        let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
        assert_eq!(manifest["counts"]["labelled"], good, "{manifest}");
        assert_eq!(manifest["counts"]["skipped"], bad.len(), "{manifest}");

        // Only bad images left: a clear error, nothing written.
        let worse = dir.path().join("worse");
        std::fs::create_dir_all(&worse).expect("mkdir");
        let only_bad = bad_files(&worse);
        let out = dir.path().join("none");
        let run =
            headroom(&["export", "--model", s(&model), "--int8", "--calib", s(&worse), "--out", s(&out)]);
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(
            stderr(&run).contains("error: none of the 3 calibration images can be used"),
            "{}",
            stderr(&run)
        );
        assert_warned(&stderr(&run), &only_bad);
        assert!(!out.join("yolov8n-shapes-160.int8.onnx").exists());
    }

    #[test]
    fn regression_eval_skips_an_image_that_does_not_decode_with_a_warning() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 1, 4);
        let val = data.parent().expect("synth folder").join("images/val");
        let cut = std::fs::read(val.join(first_image(&val))).expect("read");
        std::fs::write(val.join("cut.jpg"), &cut[..cut.len() / 2]).expect("write");
        cut_bmp(&val.join("half.bmp"));
        let run = headroom(&["eval", "--model", s(&demo_model()), "--data", s(&data), "--json"]);
        assert!(run.status.success(), "{}", stderr(&run));
        let text = stderr(&run);
        assert!(
            text.contains(&format!("skipped: {}: cannot decode image", val.join("half.bmp").display())),
            "{text}"
        );
        assert!(
            text.contains(&format!("skipped: {}: corrupt image", val.join("cut.jpg").display())),
            "{text}"
        );
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
        assert_eq!(report["metrics"]["images"], 4, "{report}");
    }

    /// A frame over `--max-pixels` (what `field run` sizes for the board) is skipped before decoding
    /// with a warning naming the cap and what decoding it would hold; the others are labelled.
    #[test]
    fn label_skips_a_frame_over_the_pixel_cap_naming_the_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 3, 1);
        let images = data.parent().expect("synth folder").join("images/train");
        let good = std::fs::read_dir(&images).expect("images").count();
        let large = images.join("large.png");
        image::RgbImage::from_pixel(400, 300, image::Rgb([90, 90, 90])).save(&large).expect("png");
        let labelled = dir.path().join("labelled");
        let label = headroom(&[
            "label",
            "--teacher",
            s(&demo_model()),
            "--images",
            s(&images),
            "--out",
            s(&labelled),
            "--max-pixels",
            "100000",
            "--settle",
            "0",
        ]);
        assert!(label.status.success(), "{}", stderr(&label));
        let reason =
            "400x300 is more than the cap of 100000 pixels (--max-pixels; decoding it would hold 0 MiB)";
        assert_warned(&stderr(&label), &[(large.clone(), reason)]);
        let text = std::fs::read_to_string(labelled.join("manifest.json")).expect("manifest");
        let manifest: serde_json::Value = serde_json::from_str(&text).expect("manifest JSON");
        assert_eq!(
            (&manifest["counts"]["labelled"], &manifest["counts"]["skipped"]),
            (&good.into(), &1.into())
        );
    }

    /// The name of the first image in `folder`, sorted.
    fn first_image(folder: &Path) -> String {
        let mut names: Vec<String> = std::fs::read_dir(folder)
            .expect("folder")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names.remove(0)
    }

    #[cfg(feature = "libtorch")]
    #[test]
    fn regression_train_skips_an_image_that_does_not_decode_with_a_warning() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 4, 2);
        let train = data.parent().expect("synth folder").join("images/train");
        cut_bmp(&train.join("half.bmp"));
        let run = crate::common::short_train(&data, &dir.path().join("runs"), "bad", "1", false, &[]);
        assert!(run.status.success(), "{}", stderr(&run));
        let text = stderr(&run);
        let line = format!("skipped: {}: cannot decode image", train.join("half.bmp").display());
        assert!(text.contains(&line), "{text}");
        assert!(dir.path().join("runs/bad/best.onnx").is_file(), "{text}");
    }
}
