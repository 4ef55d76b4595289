//! `headroom train --time HOURS` and `--patience N` (Ultralytics' `time` and `patience`): saved with
//! the run, honoured by resume; a run stopped early is finished.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use crate::common::{demo_model, headroom, output_text as text, s, synth_field};

    #[test]
    fn a_time_budget_stops_the_run_between_epochs_and_resume_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 6, 2);
        let project = dir.path().join("runs");
        let run_dir = project.join("t");
        let out = headroom(&[
            "-q",
            "train",
            "--model",
            s(&demo_model()),
            "--data",
            s(&data),
            "--epochs",
            "4",
            "--time",
            "0.000001",
            "--patience",
            "3",
            "--project",
            s(&project),
            "--name",
            "t",
            "--threads",
            "1",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).expect("results"))
                .expect("json");
        assert_eq!(results["epochs_done"], 1, "{results}");
        assert!(results["stopped_early"].as_str().is_some_and(|w| w.contains("--time")), "{results}");
        // Epoch 1, or the starting model (epoch 0) when epoch 1 did not beat it on the val split.
        let epoch_one = std::fs::read_to_string(run_dir.join("metrics.csv")).expect("csv");
        let fitness: f64 = epoch_one
            .lines()
            .nth(1)
            .and_then(|l| l.split(',').nth(13))
            .expect("fitness")
            .parse()
            .expect("a number");
        let start = results["start_fitness"].as_f64().expect("the start validated");
        let best_epoch = if fitness > start { 1 } else { 0 };
        assert_eq!(results["best_epoch"], best_epoch, "{results}");
        let best = results["best_fitness"].as_f64().expect("best fitness");
        assert!((best - fitness.max(start)).abs() < 1e-5, "{results}");
        let config = std::fs::read_to_string(run_dir.join("config.toml")).expect("config");
        assert!(config.lines().any(|l| l.trim() == "patience = 3"), "{config}");
        assert!(config.lines().any(|l| l.trim() == "time_hours = 0.000001"), "{config}");
        assert_eq!(std::fs::read_to_string(run_dir.join("metrics.csv")).expect("csv").lines().count(), 2);

        // Stopped early is finished; the saved limit is the run's, a different one is refused.
        let out = headroom(&["train", "--resume", s(&run_dir)]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("has finished"), "{}", text(&out));
        let out = headroom(&["train", "--resume", s(&run_dir), "--time", "2"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("time_hours"), "{}", text(&out));
        let out = headroom(&["train", "--model", s(&demo_model()), "--data", s(&data), "--time", "-1"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("hours"), "{}", text(&out));
    }
}
