//! What a user sees (issue 21): a 2-epoch run, in a pipe and in a real pseudo-terminal, leaves
//! Ultralytics' table (a header and one finished row per epoch, the val rows), no
//! library readiness lines, no distillation column with distillation off, and "results saved to";
//! JSON on stdout only with --json; -q leaves warnings and errors only. `inspect --model` works as
//! the other verbs take the model; a size flag is parsed whenever it is given.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {

    use crate::common::{demo_model, headroom, s, synth_field};

    fn stderr(out: &std::process::Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    use crate::common::short_train as train;

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
        check_epoch_table(&text, 2);
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

    /// Ultralytics' training table in `text`: a header before each of `epochs` epochs, each
    /// epoch's finished row once, each followed by the val header and its `all` row; no line
    /// printed twice in a row, no library readiness line, no distillation column.
    fn check_epoch_table(text: &str, epochs: usize) {
        let header = ["Epoch", "RAM", "box_loss", "cls_loss", "dfl_loss", "Instances", "Size"];
        let headers = text.lines().filter(|l| l.split_whitespace().eq(header.iter().copied())).count();
        assert_eq!(headers, epochs, "one training header per epoch in:\n{text}");
        for epoch in 1..=epochs {
            let row = format!("{epoch}/{epochs}");
            let finished: Vec<&str> = text
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(row.as_str()) && l.contains("100%"))
                .collect();
            assert_eq!(finished.len(), 1, "epoch {row}'s finished row once in:\n{text}");
            // epoch, RAM, three loss terms, instances, size: numbers under their columns.
            let fields: Vec<&str> = finished[0].split_whitespace().collect();
            assert!(fields[1].ends_with('G') && fields[6].trim_end_matches(':') == "160", "{}", finished[0]);
            for loss in &fields[2..5] {
                assert!(loss.parse::<f64>().is_ok_and(f64::is_finite), "loss `{loss}` in {}", finished[0]);
            }
        }
        let val =
            text.lines().filter(|l| l.trim_start().starts_with("Class") && l.contains("mAP50-95")).count();
        assert_eq!(val, epochs + 1, "a val header per epoch and the final table in:\n{text}");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(lines.windows(2).all(|w| w[0] != w[1]), "a line printed twice in a row:\n{text}");
        assert!(!text.contains("session ready") && !text.contains("detector ready"), "{text}");
        assert!(!text.contains("kd_loss"), "{text}");
    }

    /// What a terminal shows of `raw` (a pseudo-terminal's bytes): escape sequences removed, each
    /// line as it was left after its last carriage return.
    fn screen(raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let mut plain = String::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                // CSI: ESC [ parameters final-byte.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for p in chars.by_ref() {
                        if ('@'..='~').contains(&p) {
                            break;
                        }
                    }
                }
                continue;
            }
            plain.push(c);
        }
        plain
            .split('\n')
            .map(|line| line.rsplit('\r').find(|part| !part.is_empty()).unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A 2-epoch run in a real pseudo-terminal (util-linux `script`): the bars draw and go, and
    /// what stays on the screen is Ultralytics' table.
    #[test]
    fn a_two_epoch_run_in_a_terminal_leaves_ultralytics_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 24, 2);
        let project = dir.path().join("runs");
        let command = crate::common::headroom_command();
        let mut words: Vec<String> = vec![command.get_program().to_string_lossy().into_owned()];
        words.extend(command.get_args().map(|a| a.to_string_lossy().into_owned()));
        let model = demo_model();
        for arg in ["train", "--model", s(&model), "--data", s(&data), "--epochs", "2", "--nbs", "2"] {
            words.push(arg.to_string());
        }
        for arg in ["--threads", "1", "--project", s(&project), "--name", "tty"] {
            words.push(arg.to_string());
        }
        let quoted: Vec<String> = words.iter().map(|w| format!("'{}'", w.replace('\'', "'\\''"))).collect();
        let out = std::process::Command::new("script")
            .args(["-qec", &quoted.join(" "), "/dev/null"])
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .output()
            .expect("util-linux `script` runs (apt-get install bsdutils)");
        let text = screen(&out.stdout);
        assert!(out.status.success(), "{text}\n{}", stderr(&out));
        check_epoch_table(&text, 2);
        assert!(out.stdout.windows(2).any(|w| w == b"\x1b["), "no escape sequence: not a terminal?\n{text}");
        let saved = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
        assert!(saved.starts_with("results saved to "), "{text}");
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
