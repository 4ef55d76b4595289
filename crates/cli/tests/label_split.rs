//! `headroom label --val-fraction/--seed` through the real binary: the held-out split is seeded,
//! stable when a run is resumed or more images are added, readable by headroom's loader and by
//! `eval`, and bad fractions are refused before anything is written.

mod common;

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};

    use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};

    use crate::common::{demo_model, headroom, s};

    /// `n` synthetic images (`dir/synth/images/val/000000.png`…), sorted.
    fn synth(dir: &Path, n: usize) -> Vec<PathBuf> {
        let out = dir.join("synth");
        let n = n.to_string();
        let run = headroom(&["-q", "synth", "--seed", "5", "--train", "1", "--val", &n, "--out", s(&out)]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let mut images: Vec<PathBuf> = std::fs::read_dir(out.join("images/val"))
            .expect("list")
            .map(|e| e.expect("entry").path())
            .collect();
        images.sort();
        images
    }

    /// Copies `images` into `folder` (created).
    fn copy_into(images: &[PathBuf], folder: &Path) {
        std::fs::create_dir_all(folder).expect("mkdir");
        for image in images {
            std::fs::copy(image, folder.join(image.file_name().expect("name"))).expect("copy");
        }
    }

    fn label(images: &Path, out: &Path, extra: &[&str]) -> (serde_json::Value, std::process::Output) {
        let model = demo_model();
        let mut args =
            vec!["label", "--teacher", s(&model), "--images", s(images), "--out", s(out), "--json"];
        args.extend_from_slice(extra);
        let run = headroom(&args);
        let manifest = serde_json::from_slice(&run.stdout).unwrap_or(serde_json::Value::Null);
        (manifest, run)
    }

    fn ok(run: &std::process::Output) {
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    }

    /// Image file name → held out, from the dataset's list files.
    fn assignment(dataset: &Path) -> BTreeMap<String, bool> {
        let mut out = BTreeMap::new();
        for (list, val) in [("train.txt", false), ("val.txt", true)] {
            let text = std::fs::read_to_string(dataset.join(list)).expect("list file");
            for line in text.lines() {
                let name = line.strip_prefix("./images/").expect("./images/ entry");
                assert!(out.insert(name.to_string(), val).is_none(), "{name} is in both splits");
            }
        }
        out
    }

    /// The data.yaml loads with headroom's loader; returns the images of train and val.
    fn loaded(dataset: &Path) -> (usize, usize) {
        let config = DataConfig::load(&dataset.join("data.yaml")).expect("data.yaml");
        assert_eq!(config.names, ["circle", "square", "triangle"]);
        let count =
            |split| load_split(&config, split, LoadOptions { strict: true }).expect("split").images.len();
        (count(Split::Train), count(Split::Val))
    }

    fn split_counts(manifest: &serde_json::Value) -> (u64, u64) {
        let split = &manifest["split"];
        (split["train"].as_u64().unwrap_or(99), split["val"].as_u64().unwrap_or(99))
    }

    #[test]
    fn the_split_is_seeded_and_stable_under_resume_and_added_images() {
        let dir = tempfile::tempdir().expect("tempdir");
        let all = synth(dir.path(), 25);
        let folder = dir.path().join("field");
        copy_into(&all[..20], &folder);
        let out = dir.path().join("ds");
        let (manifest, run) = label(&folder, &out, &[]);
        ok(&run);
        assert_eq!(manifest["split"]["val_fraction"], 0.2, "the default from 10 images on");
        assert_eq!(manifest["split"]["seed"], 0);
        let first = assignment(&out);
        assert_eq!(first.len(), 20);
        let val = first.values().filter(|v| **v).count() as u64;
        assert!((1..20).contains(&val), "{val} of 20 held out");
        assert_eq!(split_counts(&manifest), (20 - val, val));
        assert_eq!(loaded(&out), ((20 - val) as usize, val as usize));
        let saved: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest"))
                .expect("json");
        assert_eq!(saved["split"], manifest["split"]);

        // `eval` on the written data.yaml evaluates the held-out images only.
        let metrics = dir.path().join("eval.json");
        let run = headroom(&[
            "-q",
            "eval",
            "--model",
            s(&demo_model()),
            "--data",
            s(&out.join("data.yaml")),
            "--json-out",
            s(&metrics),
        ]);
        ok(&run);
        let metrics: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&metrics).expect("eval json")).expect("json");
        assert_eq!(metrics["metrics"]["images"].as_u64(), Some(val));

        // A resumed run keeps the split.
        let (again, run) = label(&folder, &out, &[]);
        ok(&run);
        assert_eq!(again["counts"]["already_done"].as_u64(), Some(20));
        assert_eq!(assignment(&out), first);

        // Five more images: no earlier image changes split.
        copy_into(&all[20..], &folder);
        let (grown, run) = label(&folder, &out, &[]);
        ok(&run);
        assert_eq!(grown["counts"]["labelled"].as_u64(), Some(5));
        let after = assignment(&out);
        assert_eq!(after.len(), 25);
        for (name, val) in &first {
            assert_eq!(after.get(name), Some(val), "{name} moved");
        }
        let (train, val) = split_counts(&grown);
        assert_eq!(train + val, 25);
        assert_eq!(loaded(&out), (train as usize, val as usize));

        // Labelling all 25 at once splits them the same way; another seed splits them otherwise.
        let (_, run) = label(&folder, &dir.path().join("at-once"), &["--seed", "0"]);
        ok(&run);
        assert_eq!(assignment(&dir.path().join("at-once")), after);
        let (other, run) = label(&folder, &dir.path().join("seed-7"), &["--seed", "7"]);
        ok(&run);
        assert_eq!(other["split"]["seed"], 7);
        assert_ne!(assignment(&dir.path().join("seed-7")), after);

        // Another split of a split dataset would move held-out images into training: refused.
        let (_, run) = label(&folder, &out, &["--val-fraction", "0.3"]);
        assert_eq!(run.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("--val-fraction 0.2") && stderr.contains("--force"), "{stderr}");
        assert_eq!(assignment(&out), after, "a refused run changes nothing");
    }

    #[test]
    fn no_held_out_split_warns_and_validates_on_the_training_images() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 12);
        let twelve = images[0].parent().expect("folder").to_path_buf();
        let six = dir.path().join("six");
        copy_into(&images[..6], &six);
        // The default below 10 images, and --val-fraction 0 where the default would split.
        let cases = [
            (&six, &[][..], "6 images, fewer than 10", 6),
            (&twelve, &["--val-fraction", "0"][..], "--val-fraction 0", 12),
        ];
        for (folder, extra, why, n) in cases {
            let out = dir.path().join(format!("ds-{n}"));
            let (manifest, run) = label(folder, &out, extra);
            ok(&run);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(stderr.contains("no held-out split") && stderr.contains(why), "{stderr}");
            assert_eq!(manifest["split"]["val_fraction"], 0.0);
            assert_eq!(split_counts(&manifest), (n as u64, 0));
            let yaml = std::fs::read_to_string(out.join("data.yaml")).expect("data.yaml");
            assert!(yaml.contains("train: images\nval: images\n"), "{yaml}");
            assert!(!out.join("train.txt").exists() && !out.join("val.txt").exists());
            assert_eq!(loaded(&out), (n, n));
        }
    }

    #[test]
    fn bad_fractions_are_errors_and_write_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 2);
        let folder = images[0].parent().expect("folder").to_path_buf();
        for bad in ["1", "1.5", "-0.1", "NaN", "inf", "a fifth"] {
            let out = dir.path().join("ds");
            let (_, run) = label(&folder, &out, &["--val-fraction", bad]);
            assert_eq!(run.status.code(), Some(2), "{bad}");
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert!(stderr.contains("--val-fraction"), "{bad}: {stderr}");
            assert!(!out.exists(), "{bad}: nothing written");
        }
        // A fraction that leaves no image to train on.
        let out = dir.path().join("ds");
        let (_, run) = label(&folder, &out, &["--val-fraction", "0.999"]);
        assert_eq!(run.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("leaves none to train on"), "{stderr}");
        assert!(!out.exists(), "nothing written");
    }
}

#[test]
fn help_explains_the_split() {
    let run = common::headroom(&["label", "--help"]);
    assert!(run.status.success());
    let help = String::from_utf8_lossy(&run.stdout);
    assert!(help.contains("--val-fraction") && help.contains("nothing is held out"), "{help}");
}
