//! The pictures Ultralytics users know (issue 21): a finished training run holds `BoxPR_curve.png`,
//! `confusion_matrix.png`, `confusion_matrix_normalized.png`, `val_batch0_pred.jpg` and
//! `val_batch0_labels.jpg` from one last validation of `best.onnx`, whose metrics are also the
//! summary table's; `headroom label` writes `labels_preview.jpg` at the root of its dataset.
//!
//! With `HEADROOM_KEEP_PLOTS=DIR` the pictures are copied into DIR for a look.

mod common;

use std::path::Path;

/// The size of the picture at `path`, which must decode; copied into `$HEADROOM_KEEP_PLOTS` when set.
#[allow(dead_code)]
fn picture(path: &Path, prefix: &str) -> (u32, u32) {
    let image = image::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if let Some(keep) = std::env::var_os("HEADROOM_KEEP_PLOTS") {
        let name = path.file_name().expect("file name").to_string_lossy();
        std::fs::create_dir_all(&keep).expect("keep dir");
        std::fs::copy(path, Path::new(&keep).join(format!("{prefix}{name}"))).expect("copy");
    }
    (image.width(), image.height())
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use headroom_run::folder::{
        CONFUSION_FILE, CONFUSION_NORMALIZED_FILE, LABELS_MOSAIC_FILE, PR_CURVE_FILE, PREDICTIONS_MOSAIC_FILE,
    };

    use super::picture;
    use crate::common::{demo_model, headroom, s, synth_field};

    #[test]
    fn a_finished_run_writes_the_pr_curve_confusion_matrices_and_val_mosaics() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 4, 5);
        let project = dir.path().join("runs");
        let model = demo_model();
        let out = headroom(&[
            "train",
            "--model",
            s(&model),
            "--data",
            s(&data),
            "--epochs",
            "1",
            "--nbs",
            "2",
            "--threads",
            "1",
            "--project",
            s(&project),
            "--name",
            "plots",
            "--json",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains("WARN"), "no warning drawing: {stderr}");
        let results: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
        let best_val = &results["best_val"];
        assert_eq!(best_val["images"], 5, "{results}");
        // The summary table is that validation.
        let map50_95 = best_val["map50_95"].as_f64().expect("mAP50-95");
        // The last `all` row: the epochs' val rows come before the final table.
        let all =
            stderr.lines().rfind(|l| l.trim_start().starts_with("all ")).expect("the table's `all` row");
        assert!(all.ends_with(&format!("{map50_95:.3}")), "{all} vs {map50_95}");

        let run = project.join("plots");
        let (w, h) = picture(&run.join(PR_CURVE_FILE), "train_");
        assert!((600..=2000).contains(&w) && (400..=1500).contains(&h), "PR curve {w}x{h}");
        for file in [CONFUSION_FILE, CONFUSION_NORMALIZED_FILE] {
            let (w, h) = picture(&run.join(file), "train_");
            assert!((400..=3000).contains(&w) && (300..=3000).contains(&h), "{file} {w}x{h}");
        }
        // 5 val images of 256x192 (`field`): a 3x2 grid.
        for file in [PREDICTIONS_MOSAIC_FILE, LABELS_MOSAIC_FILE] {
            let (w, h) = picture(&run.join(file), "train_");
            assert!((300..=1920).contains(&w) && (200..=1920).contains(&h) && w >= h, "{file} {w}x{h}");
        }
        let leftovers: Vec<String> = std::fs::read_dir(&run)
            .expect("run folder")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporaries left: {leftovers:?}");
    }
}

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use super::picture;
    use crate::common::{demo_model, headroom, s};

    #[test]
    fn label_writes_a_preview_of_its_pseudo_labels() {
        let dir = tempfile::tempdir().expect("tempdir");
        let synth = dir.path().join("synth");
        let run =
            headroom(&["-q", "synth", "--seed", "5", "--train", "1", "--val", "20", "--out", s(&synth)]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let out = dir.path().join("ds");
        let model = demo_model();
        let images = synth.join("images/val");
        let run =
            headroom(&["-q", "label", "--teacher", s(&model), "--images", s(&images), "--out", s(&out)]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let preview = out.join("labels_preview.jpg");
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(stdout.contains(&format!("preview: {}", preview.display())), "{stdout}");
        // 20 images of 256x192: 16 shown, a 4x4 grid of cells of their shape.
        let (w, h) = picture(&preview, "label_");
        assert!((400..=1920).contains(&w) && w >= h && h >= w / 2, "labels_preview.jpg {w}x{h}");
        // Not an image of the dataset.
        let train_list = std::fs::read_to_string(out.join("train.txt")).expect("train.txt");
        assert!(!train_list.contains("labels_preview"), "{train_list}");
    }
}
