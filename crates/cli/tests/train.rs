//! `headroom train` through the real binary on the demo model and a synthetic field split: the run
//! folder, ONNX files that ONNX Runtime runs and `headroom eval` scores, a `kill -9` between epochs
//! or within one followed by `--resume` that ends where the uninterrupted run ends, distillation
//! from `headroom label`'s soft scores, the feature cache, and bad requests.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::path::Path;
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use crate::common::{
        assert_same_columns, demo_model, headroom, headroom_command, metrics_rows, s, synth_field,
    };

    fn synth(dir: &Path) -> std::path::PathBuf {
        synth_field(dir, 12, 6)
    }

    fn args<'a>(data: &'a Path, project: &'a Path, name: &'a str) -> Vec<&'a str> {
        let model = Box::leak(demo_model().into_boxed_path());
        vec![
            "train",
            "--model",
            s(model),
            "--data",
            s(data),
            "--epochs",
            "3",
            "--project",
            s(project),
            "--name",
            name,
            "--threads",
            "1",
        ]
    }

    /// `args` with `--epochs` set to `epochs`.
    fn epochs<'a>(mut args: Vec<&'a str>, epochs: &'a str) -> Vec<&'a str> {
        let at = args.iter().position(|a| *a == "--epochs").expect("--epochs");
        args[at + 1] = epochs;
        args
    }

    fn rows(dir: &Path) -> Vec<Vec<String>> {
        metrics_rows(dir)
    }

    #[test]
    fn a_run_writes_onnx_that_eval_scores_and_kill_then_resume_ends_as_the_straight_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let project = dir.path().join("runs");
        let run = headroom(&args(&data, &project, "straight"));
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let straight = project.join("straight");
        for file in [
            "best.onnx",
            "last.onnx",
            "config.toml",
            "metrics.csv",
            "results.json",
            "ckpt/last.pt",
            "loss.png",
            "map.png",
            "lr.png",
            "memory.png",
        ] {
            assert!(straight.join(file).exists(), "{file}");
        }
        let straight_rows = rows(&straight);
        assert_eq!(straight_rows.len(), 3);
        let eval =
            headroom(&["eval", "--model", s(&straight.join("best.onnx")), "--data", s(&data), "--json"]);
        assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
        let report: serde_json::Value = serde_json::from_slice(&eval.stdout).expect("json");
        let best = straight_rows.iter().map(|r| r[MAP].parse::<f64>().expect("map50_95")).fold(0.0, f64::max);
        let scored = report["metrics"]["map50_95"].as_f64().expect("map");
        assert!((scored - best).abs() < 1e-6, "eval of best.onnx {scored} vs the run's best {best}");
        // The executor and ONNX Runtime agree on the written file (what was measured is what trains).
        let check = headroom(&["-q", "inspect", s(&straight.join("last.onnx")), "--check"]);
        assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stdout));
        let existing = headroom(&args(&data, &project, "straight"));
        assert!(String::from_utf8_lossy(&existing.stderr).contains("exists: choose another --name"));

        // The same run, killed with SIGKILL once its first epoch is saved, then resumed; and one
        // killed before its first checkpoint, which resuming starts again.
        let (killed, early) = (project.join("killed"), project.join("early"));
        kill_when(&args(&data, &project, "killed"), || !rows(&killed).is_empty());
        kill_when(&args(&data, &project, "early"), || early.join("config.toml").exists());
        for name in ["killed", "early"] {
            let mut resume = args(&data, &project, name);
            resume.push("--resume");
            let run = headroom(&resume);
            assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
            assert_same_rows(&rows(&project.join(name)), &straight_rows);
        }
    }

    /// Starts `headroom` with `args` and kills it with SIGKILL as soon as `ready()`.
    fn kill_when(args: &[&str], ready: impl Fn() -> bool) {
        let child =
            headroom_command().args(args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("spawn");
        let started = Instant::now();
        while !ready() {
            assert!(started.elapsed() < Duration::from_secs(120), "{args:?}: never ready");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = std::process::Command::new("kill").args(["-9", &child.id().to_string()]).status();
        let _ = child.wait_with_output();
    }

    /// Column of mAP50-95 in metrics.csv.
    const MAP: usize = 12;

    /// Losses and metrics of every epoch as in the straight run (seconds and memory differ).
    fn assert_same_rows(resumed_rows: &[Vec<String>], straight_rows: &[Vec<String>]) {
        assert_same_columns(resumed_rows, straight_rows, &[1, 2, 3, 4, 11, MAP]);
    }

    #[test]
    fn bad_requests_are_clear_errors_and_write_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let yaml = std::fs::read_to_string(&data)
            .expect("yaml")
            .replace("- triangle\n", "")
            .replace("nc: 3", "nc: 2");
        let two = dir.path().join("data/two.yaml");
        std::fs::write(&two, yaml).expect("write");
        let project = dir.path().join("runs");
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (
                args(&two, &project, "a"),
                "the dataset has 2 classes (circle, square), the model 3: map them with --remap",
            ),
            (
                [args(&two, &project, "a2"), vec!["--remap", "circle=circle"]].concat(),
                "class 1 (square) has no --remap entry",
            ),
            (
                [args(&data, &project, "g"), vec!["--kd", "1"]].concat(),
                "--kd needs the teacher's soft scores",
            ),
            ([args(&data, &project, "h"), vec!["--imgsz", "320"]].concat(), "input is fixed at 160x160"),
            (
                [args(&data, &project, "i"), vec!["--device", "cuda"]].concat(),
                "this libtorch sees no CUDA device",
            ),
            (
                [args(&data, &project, "j"), vec!["--cache-features", "--mosaic", "1"]].concat(),
                "turn them off or drop --cache-features",
            ),
            ([args(&data, &project, "k"), vec!["--hsv", "0.1,2"]].concat(), "expected three numbers"),
            (
                [args(&data, &project, "k2"), vec!["--ignore-band", "0.5,0.1"]].concat(),
                "expected LOW,HIGH with 0 <= LOW < HIGH <= 1",
            ),
            (args(&data, &data, "l"), "creating"),
            ([args(&data, &project, "b"), vec!["--train", "99"]].concat(), "cannot train with `freeze=99`"),
            ([args(&data, &project, "b2"), vec!["--freeze", "99"]].concat(), "cannot train with `freeze=99`"),
            ([args(&data, &project, "c"), vec!["--lr0", "5"]].concat(), "--lr0 5 is not in (0, 1)"),
            ([args(&data, &project, "d"), vec!["--resume"]].concat(), "no run to resume"),
            (
                [args(&data, &project, "e"), vec!["--replay", s(&two)]].concat(),
                "the replay dataset has 2 classes",
            ),
        ];
        for (args, want) in cases {
            let run = headroom(&args);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains(want), "{args:?}: `{want}` not in {stderr}");
        }
        // Replay is recorded with the run, so that --resume replays the same data.
        let mut replay = epochs(args(&data, &project, "f"), "1");
        replay.extend(["--replay", s(&data)]);
        let run = headroom(&replay);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let config = std::fs::read_to_string(project.join("f/config.toml")).expect("config.toml");
        assert!(config.contains("replay_fraction = 1.0") && config.contains("data.yaml"), "{config}");
        let leftovers: Vec<_> =
            std::fs::read_dir(&project).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        let with_config = |p: &&std::path::PathBuf| p.join("config.toml").exists();
        assert_eq!(leftovers.iter().filter(with_config).count(), 1, "only run f is a run: {leftovers:?}");
    }

    /// A checkpoint every 2 optimiser steps (one step per pass with --nbs 2): a run killed inside its
    /// first epoch resumes from the last of them and ends with the losses of the uninterrupted run.
    #[test]
    fn kill_within_an_epoch_then_resume_ends_as_the_straight_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let project = dir.path().join("runs");
        let with = |name: &'static str| {
            let mut a = epochs(args(&data, &project, name), "2");
            a.extend(["--nbs", "2", "--save-period", "2"]);
            a
        };
        let run = headroom(&with("straight"));
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let killed = project.join("killed");
        let checkpoint = killed.join("ckpt/last.pt");
        kill_when(&with("killed"), || checkpoint.exists());
        assert!(rows(&killed).is_empty(), "killed inside its first epoch");
        let mut resume = with("killed");
        resume.push("--resume");
        let run = headroom(&resume);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert!(stderr.contains("resuming") && !stderr.contains("pass 0"), "resumed mid-epoch: {stderr}");
        assert_same_rows(&rows(&killed), &rows(&project.join("straight")));
    }

    /// `headroom label` (the demo model as teacher) writes soft scores; `--kd` distils from them
    /// (a positive kd term), and the cached-feature run trains on the same data to nearly the same
    /// losses (fp16 features) as the uncached one, reusing its cache on resume.
    #[test]
    fn distillation_and_the_feature_cache_on_pseudo_labels() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let labelled = dir.path().join("labelled");
        let images = data.parent().expect("dir").join("images/train");
        let model = demo_model();
        let label = headroom(&[
            "-q",
            "label",
            "--teacher",
            s(&model),
            "--images",
            s(&images),
            "--out",
            s(&labelled),
            "--conf",
            "0.1",
        ]);
        assert!(label.status.success(), "{}", String::from_utf8_lossy(&label.stderr));
        let yaml = labelled.join("data.yaml");
        let project = dir.path().join("runs");
        let run_with = |name: &'static str, extra: &[&'static str]| {
            let mut a = epochs(args(&yaml, &project, name), "2");
            a.extend(extra);
            let run = headroom(&a);
            assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
            rows(&project.join(name))
        };
        let kd = run_with("kd", &["--kd", "1"]);
        let kd_loss: f64 = kd[0][4].parse().expect("kd_loss");
        assert!(kd_loss > 0.0, "kd term {kd_loss}");
        // SGD: AdamW's normalised steps turn the features' fp16 rounding into visibly different
        // updates (0.3 % in the second epoch's loss), which would hide what this compares.
        // Without augmentation: the cache turns the default one off, and holds fixed inputs.
        let plain = run_with(
            "plain",
            &["--optimizer", "sgd", "--mosaic", "0", "--scale", "0", "--translate", "0", "--hsv", "0,0,0"],
        );
        let cached = run_with("cached", &["--optimizer", "sgd", "--cache-features"]);
        assert_eq!(plain[0][4], "0.000000");
        for (a, b) in cached.iter().zip(&plain) {
            for column in [1, 2, 3] {
                let (x, y) = (a[column].parse::<f64>().expect("num"), b[column].parse::<f64>().expect("num"));
                assert!((x - y).abs() <= 2e-3 * y.abs().max(1.0), "column {column}: cached {x} vs {y}");
            }
        }
        let index = project.join("cached/cache/index.json");
        let built = std::fs::metadata(&index).and_then(|m| m.modified()).expect("index");
        let mut resume = epochs(args(&yaml, &project, "cached"), "2");
        resume.extend(["--optimizer", "sgd", "--cache-features", "--resume"]);
        let run = headroom(&resume);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        assert_eq!(
            std::fs::metadata(&index).and_then(|m| m.modified()).expect("index"),
            built,
            "cache reused"
        );
    }

    /// `--teacher`: the teacher runs on every batch; its dense term is in the kd column, the
    /// teacher is saved with the run, and a teacher whose anchors or classes differ, or a feature
    /// cache beside it, is refused before anything is written.
    #[test]
    fn dense_distillation_from_a_teacher_run_on_each_batch() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let project = dir.path().join("runs");
        let teacher = crate::common::repo_root().join("models/demo/teacher-shapes-160.onnx");
        let mut dense = epochs(args(&data, &project, "dense"), "1");
        dense.extend(["--teacher", s(&teacher), "--mosaic", "1"]);
        let run = headroom(&dense);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let kd: f64 = rows(&project.join("dense"))[0][4].parse().expect("kd_loss");
        assert!(kd > 0.0 && kd.is_finite(), "dense term {kd}");
        let config = std::fs::read_to_string(project.join("dense/config.toml")).expect("config.toml");
        assert!(config.contains("teacher-shapes-160.onnx") && config.contains("dense_kd = 1.0"), "{config}");
        // With --trunk torch the teacher runs on libtorch too: the same term (the executor matches
        // ONNX Runtime to ~1e-6).
        let mut torch = epochs(args(&data, &project, "dense-torch"), "1");
        torch.extend(["--teacher", s(&teacher), "--mosaic", "1", "--trunk", "torch"]);
        let run = headroom(&torch);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let kd_torch: f64 = rows(&project.join("dense-torch"))[0][4].parse().expect("kd_loss");
        assert!((kd_torch - kd).abs() <= 1e-3 * kd, "ort {kd} torch {kd_torch}");
        // The ignore band is a saved setting and changes the class term only.
        let mut band = epochs(args(&data, &project, "band"), "1");
        band.extend(["--teacher", s(&teacher), "--mosaic", "1", "--ignore-band", "0.05,0.9"]);
        let run = headroom(&band);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let config = std::fs::read_to_string(project.join("band/config.toml")).expect("config.toml");
        let flat: String = config.split_whitespace().collect();
        assert!(flat.contains("ignore_band=[0.05,0.9,]"), "{config}");
        let (plain, banded) = (&rows(&project.join("dense"))[0], &rows(&project.join("band"))[0]);
        assert_ne!(plain[2], banded[2], "the class loss changes with the band: {plain:?} {banded:?}");

        let fixture = |name: &str| crate::common::repo_root().join("tests/fixtures/onnx").join(name);
        let (numbered, garbage) = (fixture("yolov8n-w00625-nc3-640.onnx"), dir.path().join("garbage.onnx"));
        std::fs::write(&garbage, b"not a model").expect("write");
        for (teacher, extra, want) in [
            (numbered.as_path(), None, "classes are 0, 1, 2 but the student's are circle, square, triangle"),
            (garbage.as_path(), None, "--teacher: "),
            (teacher.as_path(), Some("--cache-features"), "drop --cache-features or --teacher"),
        ] {
            let mut a = epochs(args(&data, &project, "refused"), "1");
            a.extend(["--teacher", s(teacher)]);
            a.extend(extra);
            let run = headroom(&a);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{a:?}: {stderr}");
            assert!(stderr.contains(want), "`{want}` not in {stderr}");
            assert!(!project.join("refused").exists(), "{want}: nothing written");
        }
    }

    /// `--profile`: libtorch's profiler records passes 2 and 3 of a run with a teacher; the trace
    /// holds every phase's span, autograd's backward nodes and the fused optimiser; a trace whose
    /// folder is missing is refused before the run starts.
    #[test]
    fn profile_traces_the_ops_of_every_phase() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let project = dir.path().join("runs");
        let teacher = crate::common::repo_root().join("models/demo/teacher-shapes-160.onnx");
        let trace = dir.path().join("trace.json");
        let mut a = epochs(args(&data, &project, "profiled"), "1");
        a.extend(["--teacher", s(&teacher), "--profile", s(&trace), "--profile-passes", "2"]);
        let run = headroom(&a);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let text = std::fs::read_to_string(&trace).expect("the trace is written");
        let events: Vec<serde_json::Value> = serde_json::from_str(&text).expect("a JSON array of events");
        let count = |name: &str| {
            events.iter().filter(|e| e["name"].as_str().is_some_and(|n| n.starts_with(name))).count()
        };
        for span in ["data", "teacher", "forward_backward", "loss", "optimizer", "ema"] {
            assert_eq!(count(&format!("headroom::{span}")), 2, "one `{span}` span per traced pass");
        }
        assert!(count("autograd::engine::evaluate_function") > 100, "backward nodes are traced");
        assert_eq!(count("aten::_fused_adamw_"), 4, "two fused AdamW calls (weights, biases) a step");
        assert!(!dir.path().join("trace.json.partial").exists());

        let missing = dir.path().join("no/such/folder/trace.json");
        let mut a = epochs(args(&data, &project, "refused"), "1");
        a.extend(["--profile", s(&missing)]);
        let run = headroom(&a);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("no/such/folder"), "{stderr}");
        assert!(!project.join("refused").exists(), "nothing written");
    }

    /// `--remap` maps a dataset's classes onto the student's (by name or id, or drops them).
    #[test]
    fn remap_trains_a_dataset_with_other_classes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let yaml = std::fs::read_to_string(&data).expect("yaml").replace("- circle\n", "- disc\n");
        let renamed = dir.path().join("data/renamed.yaml");
        std::fs::write(&renamed, yaml).expect("write");
        let project = dir.path().join("runs");
        let mut a = epochs(args(&renamed, &project, "remapped"), "1");
        a.extend(["--remap", "disc=circle,1=1,triangle=drop"]);
        let run = headroom(&a);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let config = std::fs::read_to_string(project.join("remapped/config.toml")).expect("config");
        assert!(config.contains("remap = \"disc=circle,1=1,triangle=drop\""), "{config}");
        // The dataset's classes are not the model's: no final validation, no pictures of it.
        for file in headroom_run::folder::VAL_PLOT_FILES {
            assert!(!project.join("remapped").join(file).exists(), "{file} with --remap");
        }
        let results = std::fs::read_to_string(project.join("remapped/results.json")).expect("results");
        assert!(results.contains("\"best_val\": null"), "{results}");
    }

    /// Every family trains its head at batch 2, also the static exports whose attention layers hold
    /// batch 1 as a constant (the trunk runs image by image); training those layers at batch 2 is
    /// refused with what to do instead.
    #[test]
    fn every_family_trains_its_head_at_batch_2() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path());
        let project = dir.path().join("runs");
        let fixtures = crate::common::repo_root().join("tests/fixtures/onnx");
        // One epoch of `model` into project/NAME, with `extra` flags.
        let one_epoch = |model: &Path, name: &str, extra: &[&str]| {
            let mut args = vec!["train", "--model", s(model), "--data", s(&data), "--epochs", "1"];
            args.extend(["--threads", "1", "--project", s(&project), "--name", name]);
            args.extend_from_slice(extra);
            headroom(&args)
        };
        for name in [
            "yolov5nu-w00625-nc3-160",
            "yolo11n-w00625-nc3-160",
            "yolov10n-w00625-nc3-160-e2e",
            "yolo26n-w00625-nc3-160",
            "yolov8n-w00625-nc3-160-dynamic",
        ] {
            let run = one_epoch(&fixtures.join(format!("{name}.onnx")), name, &["--train", "head"]);
            assert!(run.status.success(), "{name}: {}", String::from_utf8_lossy(&run.stderr));
            let eval = headroom(&[
                "-q",
                "eval",
                "--model",
                s(&project.join(name).join("best.onnx")),
                "--data",
                s(&data),
            ]);
            assert!(eval.status.success(), "{name}: {}", String::from_utf8_lossy(&eval.stderr));
        }
        let model = fixtures.join("yolo11n-w00625-nc3-160.onnx");
        let run = one_epoch(&model, "batch-2", &["--train", "10", "--batch", "2"]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.code() == Some(2) && stderr.contains("use --batch 1"), "{stderr}");
        // Without --batch the default (2) gives way: the whole model trains at batch 1, said so.
        let run = one_epoch(&model, "defaults", &[]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            run.status.success() && stderr.contains("--batch 1: the export's batch is fixed at 1"),
            "{stderr}"
        );
        let config = std::fs::read_to_string(project.join("defaults/config.toml")).expect("config.toml");
        assert!(config.contains("batch = 1") && config.contains("part = \"freeze=0\""), "{config}");
    }
}
