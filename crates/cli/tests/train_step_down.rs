//! Out of memory in the middle of an epoch: `--memory-cap` (checked by the trainer after every pass,
//! raising the same error as an allocation failure) is hit at batch 8; the run steps down to batch 4
//! (the nominal batch kept through accumulation), reloads its last checkpoint, finishes every epoch,
//! and its run log, results.json and config.toml say which rung it took.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use crate::common::{demo_model, headroom, headroom_command, s, synth_field};

    #[test]
    fn a_memory_cap_hit_mid_epoch_steps_down_and_the_run_finishes() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = synth_field(dir.path(), 16, 4);
        let project = dir.path().join("runs");
        let model = demo_model();
        // Training all of YOLOv8n at 160 without checkpointing: a pass takes ~150 MiB above the
        // start at batch 8 and ~120 MiB at batch 4 (153 and 122 measured, 2026-12-04); the cap sits
        // in between, armed after the first pass so that it is hit at the epoch's second pass,
        // after the checkpoint of the first optimiser step (--nbs 8 --save-period 1).
        // Freed tensors leave the resident set, so that it follows what a pass uses (glibc's
        // threshold; headroom's pool returns the larger passes' pages at the step down).
        let run = headroom_command()
            .env("MALLOC_MMAP_THRESHOLD_", "65536")
            .args([
                "train",
                "--model",
                s(&model),
                "--data",
                s(&data),
                "--epochs",
                "2",
                "--project",
                s(&project),
                "--name",
                "capped",
                "--threads",
                "2",
                "--train",
                "all",
                "--batch",
                "8",
                "--nbs",
                "8",
                "--save-period",
                "1",
                "--no-checkpoint",
                "--memory-cap",
                "145MiB",
                "--memory-cap-after",
                "1",
            ])
            .output()
            .expect("headroom runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        let out = project.join("capped");
        let log = std::fs::read_to_string(out.join("run.log")).expect("run.log");
        assert!(
            log.starts_with("out of memory at epoch 1 pass 1 (memory cap")
                && log.contains("stepped down to batch 4"),
            "{log}"
        );
        assert!(log.contains("resumed from the last checkpoint at epoch 1 pass 2"), "{log}");
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).expect("results"))
                .expect("json");
        let step = &results["steps_down"][0];
        assert_eq!(step["rung"], "batch 4");
        assert_eq!(step["batch"], serde_json::json!([8, 4]));
        assert_eq!(step["accumulate"], 2, "the nominal batch of 8 is kept");
        assert!(results["planner"]["estimate_mb"].as_f64().is_some_and(|v| v > 0.0), "{results}");
        // Nothing lost: both epochs evaluated and written, and a resume continues at batch 4.
        let metrics = std::fs::read_to_string(out.join("metrics.csv")).expect("metrics");
        assert_eq!(metrics.lines().count(), 3, "{metrics}");
        assert!(out.join("best.onnx").exists() && out.join("last.onnx").exists());
        let config = std::fs::read_to_string(out.join("config.toml")).expect("config");
        assert!(config.contains("batch = 4"), "{config}");
    }

    #[test]
    fn plan_auto_trains_the_first_configuration_that_fits_and_refuses_when_none_does() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = dir.path().join("data");
        let synth = headroom(&[
            "-q",
            "synth",
            "--preset",
            "field",
            "--seed",
            "4",
            "--train",
            "4",
            "--val",
            "2",
            "--out",
            s(&data),
        ]);
        assert!(synth.status.success(), "{}", String::from_utf8_lossy(&synth.stderr));
        let project = dir.path().join("runs");
        let model =
            crate::common::repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx");
        let yaml = data.join("data.yaml");
        let with = |name: &'static str, budget: &'static str| {
            headroom(&[
                "train",
                "--model",
                s(&model),
                "--data",
                s(&yaml),
                "--epochs",
                "1",
                "--project",
                s(&project),
                "--name",
                name,
                "--threads",
                "2",
                "--imgsz",
                "320",
                "--plan",
                "auto",
                "--board",
                "orin-nano-4",
                "--budget",
                budget,
            ])
        };
        let run = with("fits", "400MiB");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success() && stderr.contains("--plan auto on orin-nano-4"), "{stderr}");
        let results: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(project.join("fits/results.json")).expect("results"),
        )
        .expect("json");
        let estimate = results["planner"]["estimate_mb"].as_f64().expect("estimate");
        assert!(estimate <= 400.0, "{results}");
        let run = with("none", "64MiB");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("nothing fits") && stderr.contains("alone need"), "{stderr}");
        assert!(!project.join("none").exists(), "nothing written when nothing fits");
    }

    #[test]
    fn plan_auto_on_a_device_file_board_or_board_auto_and_resume_without_the_file() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = synth_field(dir.path(), 4, 2);
        let project = dir.path().join("runs");
        let model =
            crate::common::repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx");
        let devices = dir.path().join("devices.toml");
        std::fs::write(
            &devices,
            "[[device]]\nname = \"myboard\"\ndescription = \"Acme Vision\"\nmemory_gib = 6.0\n\
             reserve_gib = 1.5\nruntime_mib = 145.0\nmodels = [\"Acme Vision\"]\n",
        )
        .expect("write");
        let train = |name: &str, extra: &[&str]| {
            let mut command = headroom_command();
            command.args([
                "train",
                "--model",
                s(&model),
                "--data",
                s(&data),
                "--epochs",
                "1",
                "--project",
                s(&project),
                "--name",
                name,
                "--threads",
                "2",
                "--plan",
                "auto",
                "--budget",
                "400MiB",
            ]);
            command.args(extra);
            command.output().expect("headroom runs")
        };
        let run = train("board", &["--board", "myboard", "--devices", s(&devices)]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success() && stderr.contains("--plan auto on myboard"), "{stderr}");
        let config = std::fs::read_to_string(project.join("board/config.toml")).expect("config");
        assert!(config.contains("[device_preset]") && config.contains("\"Acme Vision\""), "{config}");
        // The run keeps its preset: resuming needs no device file.
        std::fs::remove_file(&devices).expect("remove");
        let board = project.join("board");
        let run = headroom(&["train", "--resume", s(&board), "--epochs", "2", "--threads", "2"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        // `--board auto` on this machine: the board the plan library detects here.
        let found = headroom_plan::System::host().detect(None).expect("this machine's board");
        let run = train("auto", &["--board", "auto"]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert!(
            stderr.contains(&found.reason)
                && stderr.contains(&format!("--plan auto on {}", found.preset.name)),
            "{stderr}"
        );
    }
}
