//! What a user sees (issue 21, first part): a 2-epoch run in a pipe prints one line per epoch, no
//! library readiness lines, no distillation column with distillation off, and "results saved to";
//! JSON on stdout only with --json; -q leaves warnings and errors only. `inspect --model` works as
//! the other verbs take the model; a size flag is parsed whenever it is given.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::path::Path;

    use crate::common::{demo_model, headroom, s, synth_field};

    fn stderr(out: &std::process::Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    /// A short training run of the demo model on `data` into `project/name`; `quiet` puts `-q`
    /// before the verb, `extra` flags go after it.
    fn train(
        data: &Path,
        project: &Path,
        name: &str,
        epochs: &str,
        quiet: bool,
        extra: &[&str],
    ) -> std::process::Output {
        let model = demo_model();
        let mut args = if quiet { vec!["-q"] } else { Vec::new() };
        args.extend([
            "train",
            "--model",
            s(&model),
            "--data",
            s(data),
            "--epochs",
            epochs,
            "--nbs",
            "2",
            "--threads",
            "1",
            "--project",
            s(project),
            "--name",
            name,
        ]);
        args.extend_from_slice(extra);
        headroom(&args)
    }

    #[test]
    fn a_two_epoch_run_prints_one_line_per_epoch_and_where_its_results_are() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 6, 2);
        let project = dir.path().join("runs");
        let out = train(&data, &project, "plain", "2", false, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stderr(&out);
        assert!(
            out.stdout.is_empty(),
            "nothing on stdout without --json: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        for epoch in ["epoch 1/2:", "epoch 2/2:"] {
            assert_eq!(text.matches(epoch).count(), 1, "`{epoch}` once in:\n{text}");
        }
        assert!(!text.contains("session ready") && !text.contains("detector ready"), "{text}");
        assert!(!text.contains(" kd "), "no distillation column with distillation off:\n{text}");
        assert!(!text.contains("epoch 1 time"), "{text}");
        // Ultralytics' end of a run: best.onnx validated, per class.
        assert!(text.contains("Class") && text.contains("mAP50-95"), "{text}");
        for class in ["all", "circle", "square", "triangle"] {
            assert!(text.lines().any(|l| l.trim_start().starts_with(class)), "row `{class}` in:\n{text}");
        }
        let saved = text.lines().last().unwrap_or_default();
        assert!(saved.starts_with("results saved to ") && saved.contains("best.onnx is epoch"), "{text}");

        let out = train(&data, &project, "json", "2", false, &["--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        let results: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("--json: results on stdout");
        assert_eq!(results["epochs_done"], 2, "{results}");

        let out = train(&data, &project, "quiet", "1", true, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(stderr(&out).trim().is_empty(), "-q: warnings and errors only, got:\n{}", stderr(&out));
    }

    #[test]
    fn labels_without_objects_are_warned() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 3, 1);
        let root = data.parent().expect("dataset");
        for split in ["train", "val"] {
            for entry in std::fs::read_dir(root.join("labels").join(split)).expect("labels") {
                std::fs::write(entry.expect("entry").path(), "").expect("empty the label file");
            }
        }
        let project = dir.path().join("runs");
        let out = train(&data, &project, "empty", "1", false, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = stderr(&out);
        assert!(text.contains("training images hold no object"), "{text}");
        assert!(text.contains("val images hold no object"), "{text}");
    }

    #[test]
    fn inspect_takes_the_model_as_every_verb_does_and_sizes_are_always_parsed() {
        let model = demo_model();
        let positional = headroom(&["inspect", s(&model), "--json"]);
        let flag = headroom(&["inspect", "--model", s(&model), "--json"]);
        assert!(positional.status.success() && flag.status.success(), "{}", stderr(&flag));
        assert_eq!(positional.stdout, flag.stdout);
        let neither = headroom(&["inspect"]);
        assert_eq!(neither.status.code(), Some(2), "{}", stderr(&neither));

        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 2, 1);
        for (flag, value) in [("--budget", "lots"), ("--reserve", "12 parsecs")] {
            let out =
                headroom(&["train", "--model", s(&model), "--data", s(&data), flag, value, "--epochs", "1"]);
            assert_eq!(out.status.code(), Some(2), "{flag} {value}: {}", stderr(&out));
            assert!(stderr(&out).contains(flag), "{flag}: {}", stderr(&out));
        }
    }
}
