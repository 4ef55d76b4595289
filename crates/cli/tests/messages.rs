//! Messages (issue 21, part 5): an error says what is wrong and what to do in a line or two, names
//! the file or the flag, and shows no Rust Debug text (`Some(..)`, `["1", "3"]`). One test per case
//! of the issue, named after it.

mod common;

use std::process::Output;

use common::{demo_model, headroom, s};

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Exit code 2, `want` in stderr, in at most two lines (clap's "For more information" aside), no
/// doubled prefix and no Debug text.
fn assert_refused(args: &[&str], want: &str) {
    let out = headroom(args);
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
    assert!(text.contains(want), "{args:?}: `{want}` not in:\n{text}");
    assert_short(&text);
}

/// An error in at most two lines (warnings before it aside), without Rust's Debug shapes.
fn assert_short(text: &str) {
    let from_error = &text[text.find("error:").unwrap_or(0)..];
    let lines: Vec<&str> = from_error
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("For more information"))
        .collect();
    assert!(lines.len() <= 2, "{} lines:\n{text}", lines.len());
    assert!(!text.contains("error: error:"), "{text}");
    for debug in
        ["Some(", "None", "[\"", "Known(", "Symbol(", "os error 21", "training data:", "invalid argument `"]
    {
        assert!(!text.contains(debug), "`{debug}` in:\n{text}");
    }
}

#[test]
fn case5_a_zero_or_tiny_memory_size_is_refused_when_parsed_in_a_unit_people_read() {
    let model = demo_model();
    for (flag, value) in [("--memory-cap", "0"), ("--memory-cap", "100KiB")] {
        let args = ["train", "--model", s(&model), "--data", "d.yaml", flag, value];
        assert_refused(&args, "is less than 1 MiB: give a size such as 512MiB");
    }
    assert_refused(&["plan", "--model", s(&model), "--board", "x86-cpu", "--budget", "0"], "--budget");
    assert_refused(&["plan", "--model", s(&model), "--board", "x86-cpu", "--imgsz", "0"], "--imgsz");
}

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use super::*;
    use crate::common::synth_field;

    #[test]
    fn case3_an_empty_calibration_folder_names_the_flag_not_a_yaml_key() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        let model = demo_model();
        let out = dir.path().join("out");
        let args = ["export", "--model", s(&model), "--int8", "--calib", s(&empty), "--out", s(&out)];
        assert_refused(&args, "empty: no images for --calib in this folder");
        let text = stderr(&headroom(&args));
        assert!(!text.contains("key `"), "{text}");
    }

    #[test]
    fn case2_shapes_and_class_lists_print_without_rust_debug_text() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 2, 2);
        let calib = data.parent().expect("dataset").join("images/train");
        let out = dir.path().join("out");
        let model = demo_model();
        // A static export asked for another size: the shape as [1, 3, 160, 160].
        let args = [
            "export",
            "--model",
            s(&model),
            "--int8",
            "--imgsz",
            "320",
            "--calib",
            s(&calib),
            "--out",
            s(&out),
        ];
        assert_refused(
            &args,
            "has a static input [1, 3, 160, 160]: export it again at that size, or drop --imgsz",
        );
        // A dynamic export without --imgsz: its symbolic dims, and the metadata's size as WxH.
        let dynamic = common::repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx");
        let args = ["export", "--model", s(&dynamic), "--int8", "--calib", s(&calib), "--out", s(&out)];
        assert_refused(&args, "the input is dynamic [batch, 3, height, width]");
        assert_refused(&args, "give --imgsz (it was exported at 160x160)");
        // A dataset of other classes: the names as a list people read.
        let yaml = std::fs::read_to_string(&data).expect("data.yaml");
        let names_at = yaml.find("nc:").expect("nc");
        let two = dir.path().join("data/two.yaml");
        std::fs::write(&two, format!("{}names: [a, b]\n", &yaml[..names_at])).expect("write");
        let out = headroom(&["eval", "--model", s(&model), "--data", s(&two)]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(
            text.contains("the model has 3 classes (circle, square, triangle) but the dataset has 2 (a, b)"),
            "{text}"
        );
        assert!(!text.contains("[\""), "{text}");
    }

    #[test]
    fn case4_a_class_id_out_of_range_says_so_with_file_line_and_the_ids_there_are() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 2, 2);
        let labels = data.parent().expect("dataset").join("labels/val");
        let mut files: Vec<_> =
            std::fs::read_dir(&labels).expect("labels").flatten().map(|e| e.path()).collect();
        files.sort();
        std::fs::write(&files[0], "7 0.5 0.5 0.1 0.1\n").expect("write");
        std::fs::write(&files[1], "0 0.5 0.5 0.1 0.1\n1.5 0.5 0.5 0.2 0.2\n").expect("write");
        let model = demo_model();
        let out = headroom(&["eval", "--model", s(&model), "--data", s(&data)]);
        let text = stderr(&out);
        let first =
            format!("{}:1: class 7 is out of range: data.yaml has 3 classes, ids 0 to 2", files[0].display());
        assert!(text.contains(&first), "{text}");
        let second = format!(
            "{}:2: class `1.5` is not a whole number: data.yaml has 3 classes, ids 0 to 2",
            files[1].display()
        );
        assert!(text.contains(&second), "{text}");
    }

    #[test]
    fn case7_the_lock_names_its_holder_s_start_in_utc_not_unix_seconds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 1, 2);
        let images = data.parent().expect("dataset").join("images/val");
        let out = dir.path().join("labelled");
        std::fs::create_dir_all(&out).expect("mkdir");
        let _held = headroom_core::fsio::OutputLock::acquire(&out, "headroom label").expect("lock");
        let model = demo_model();
        let run = headroom(&["label", "--teacher", s(&model), "--images", s(&images), "--out", s(&out)]);
        let text = stderr(&run);
        assert_eq!(run.status.code(), Some(2), "{text}");
        assert!(text.contains("another headroom run is writing this folder"), "{text}");
        let since = text.find("since ").expect("since") + "since ".len();
        let stamp = &text[since..since + "2026-12-02 06:30:00 UTC".len()];
        assert!(
            stamp.starts_with("20") && stamp.ends_with(" UTC") && stamp.as_bytes()[10] == b' ',
            "{stamp}"
        );
    }

    /// Every verb given a missing file, a folder for a file, an empty or text file for a model, a
    /// data.yaml without a key, or a negative or zero number.
    #[test]
    fn case8_wrong_inputs_to_each_verb_name_the_file_or_flag_in_a_line_or_two() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let data = synth_field(d, 2, 2);
        let images = data.parent().expect("dataset").join("images/val");
        let (text, empty, no_val) = (d.join("text.onnx"), d.join("empty.onnx"), d.join("no-val.yaml"));
        std::fs::write(&text, "not a model\n").expect("write");
        std::fs::write(&empty, "").expect("write");
        std::fs::write(&no_val, "train: images\nnames: [a]\n").expect("write");
        let model = demo_model();
        let (m, y, i, o) = (s(&model), s(&data), s(&images), s(d));
        let (out, nowhere) = (d.join("out"), d.join("nope"));
        let cases: Vec<(Vec<&str>, &str)> = vec![
            (vec!["inspect", s(&text)], "text.onnx is not an ONNX model or is truncated"),
            (
                vec!["inspect", s(&empty)],
                "empty.onnx is not an ONNX model or is truncated: the file is empty",
            ),
            (vec!["inspect", o], "is a folder, not an ONNX model file"),
            (
                vec!["eval", "--model", s(&text), "--data", y],
                "text.onnx: ONNX Runtime: not an ONNX model, or truncated",
            ),
            (
                vec!["eval", "--model", s(&empty), "--data", y],
                "empty.onnx: the file is empty, not an ONNX model",
            ),
            (vec!["eval", "--model", m, "--data", o], "is a folder: give the data.yaml in it"),
            (
                vec!["eval", "--model", m, "--data", s(&nowhere)],
                "nope: no such file: give a dataset's data.yaml",
            ),
            (vec!["eval", "--model", m, "--data", s(&no_val)], "no-val.yaml: key `val:` is missing"),
            (vec!["eval", "--model", m, "--data", y, "--conf", "-1"], "--conf -1 is not in [0, 1]"),
            (vec!["eval", "--model", m, "--data", y, "--conf", "x"], "'--conf <CONF>': `x` is not a number"),
            (vec!["label", "--teacher", m, "--images", s(&nowhere), "--out", s(&out)], "--images"),
            (vec!["label", "--teacher", m, "--images", i, "--out", s(&text)], "--out"),
            (vec!["label", "--teacher", m, "--images", i, "--out", s(&out), "--threads", "-1"], "--threads"),
            (vec!["export", "--model", m, "--fp16", "--out", s(&text)], "exists and is not a folder"),
            (
                vec!["export", "--model", s(&text), "--fp16", "--out", s(&out)],
                "text.onnx is not an ONNX model",
            ),
            (vec!["synth", "--out", s(&out), "--train", "0"], "--train"),
            (vec!["synth", "--out", s(&out), "--size", "0x0"], "'--size <WxH>': `0x0`: each side must be"),
            (vec!["synth", "--out", s(&out), "--val", "-2"], "--val"),
            (vec!["train", "--model", m, "--data", y, "--epochs", "-3"], "--epochs"),
            (vec!["train", "--resume", o], "no run to resume"),
            (
                vec!["train", "--model", m, "--data", y, "--patience", "-1"],
                "`-1` is not a whole number (0 or more)",
            ),
            (vec!["plan", "--model", m, "--board", "x86-cpu", "--batch", "x"], "`x` is not a whole number"),
            (vec!["plan", "--model", s(&text), "--board", "x86-cpu"], "text.onnx is not an ONNX model"),
            (
                vec!["plan", "--model", m, "--board", "x86-cpu", "--reserve", "100GiB"],
                "--reserve 100.00 GiB leaves nothing",
            ),
        ];
        for (args, want) in cases {
            assert_refused(&args, want);
        }
        assert!(!out.exists(), "a refused command wrote {}", out.display());
    }
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::path::Path;

    use super::*;
    use crate::common::synth_field;

    /// A quiet 1-epoch run of the demo model on `data` into `project/name`, with `extra` flags.
    fn train(data: &Path, project: &Path, name: &str, extra: &[&str]) -> Output {
        crate::common::short_train(data, project, name, "1", true, extra)
    }

    #[test]
    fn case1_errors_outside_the_training_data_carry_no_training_data_prefix() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 4, 2);
        let project = dir.path().join("runs");
        let missing = dir.path().join("missing.onnx");
        let out = train(&data, &project, "teacher", &["--teacher", s(&missing)]);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("--teacher: cannot read "), "{}", stderr(&out));
        assert_short(&stderr(&out));
        // A damaged checkpoint: named, in one line (libtorch's C++ stack trace left out).
        let out = train(&data, &project, "ckpt", &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let run = project.join("ckpt");
        std::fs::write(run.join("ckpt/last.pt"), "garbage").expect("write");
        let out = headroom(&["train", "--resume", s(&run), "--epochs", "2", "--threads", "1"]);
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(
            text.contains("last.pt: not a readable checkpoint (") && text.contains("restore it"),
            "{text}"
        );
        assert!(!text.contains("Exception raised from") && !text.contains("frame #"), "{text}");
        assert_short(&text);
        // A damaged config.toml: its line, not TOML's drawing of it.
        std::fs::write(run.join("config.toml"), "garbage [\n").expect("write");
        let out = headroom(&["train", "--resume", s(&run), "--epochs", "2"]);
        assert!(stderr(&out).contains("config.toml: line 1: "), "{}", stderr(&out));
        assert_short(&stderr(&out));
    }

    #[test]
    fn case6_headroom_s_own_exports_are_shown_run_and_checked_and_training_them_is_refused_in_a_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 4, 2);
        let calib = data.parent().expect("dataset").join("images/train");
        let out_dir = dir.path().join("export");
        let model = demo_model();
        let args = [
            "-q",
            "export",
            "--model",
            s(&model),
            "--fp16",
            "--int8",
            "--calib",
            s(&calib),
            "--out",
            s(&out_dir),
        ];
        let export = headroom(&args);
        assert!(export.status.success(), "{}", stderr(&export));
        let fp16 = out_dir.join("yolov8n-shapes-160.fp16.onnx");
        let int8 = out_dir.join("yolov8n-shapes-160.int8.onnx");
        let fp32 = "train the FP32 file it came from (yolov8n-shapes-160.onnx)";
        // Both run in eval; the FP16 one passes the check (its head tensors are float16).
        for export in [&fp16, &int8] {
            let eval = headroom(&["-q", "eval", "--model", s(export), "--data", s(&data)]);
            assert!(eval.status.success(), "{}: {}", export.display(), stderr(&eval));
        }
        let check = headroom(&["inspect", s(&fp16), "--check"]);
        let stdout = String::from_utf8_lossy(&check.stdout);
        assert!(check.status.success(), "{stdout}{}", stderr(&check));
        assert!(
            stdout.contains("PASS: the executor runs it as ONNX Runtime does; FP16") && stdout.contains(fp32)
        );
        // The INT8 one is shown as the float graph it was made from; its check says what it is (exit 1).
        let shown = headroom(&["inspect", s(&int8)]);
        let stdout = String::from_utf8_lossy(&shown.stdout);
        assert!(shown.status.success(), "{}", stderr(&shown));
        assert!(
            stdout.contains("head        model.22")
                && stdout.contains("QuantizeLinear/DequantizeLinear nodes")
        );
        assert!(stdout.contains(fp32), "{stdout}");
        let check = headroom(&["inspect", s(&int8), "--check"]);
        let stdout = String::from_utf8_lossy(&check.stdout);
        assert_eq!(check.status.code(), Some(1), "{stdout}{}", stderr(&check));
        assert!(stdout.contains("result      FAIL: INT8 (") && stdout.contains(fp32), "{stdout}");
        // Neither trains or plans: one line naming the file to train ("valid freeze points" never).
        for (export, what) in
            [(&fp16, "this is an FP16 export; "), (&int8, "nodes: this is an INT8 export; ")]
        {
            for args in [
                vec!["train", "--model", s(export), "--data", s(&data)],
                vec!["plan", "--model", s(export), "--board", "x86-cpu"],
            ] {
                assert_refused(&args, &format!("{what}{fp32}"));
                let text = stderr(&headroom(&args));
                assert!(
                    text.len() < 300 && !text.contains("freeze points"),
                    "{} characters: {text}",
                    text.len()
                );
            }
        }
        // Nor are they exported again: the FP32 file is.
        let again = dir.path().join("again");
        for (export, what) in [(&fp16, "FP16"), (&int8, "INT8")] {
            let args = ["export", "--model", s(export), "--fp16", "--out", s(&again)];
            assert_refused(
                &args,
                &format!("this is an {what} export already; export the FP32 file it came from"),
            );
        }
        // The FP16 export teaches as a dense-distillation teacher: its float16 head is read as float32.
        let project = dir.path().join("runs");
        let out = train(&data, &project, "fp16-teacher", &["--teacher", s(&fp16)]);
        assert!(out.status.success(), "{}", stderr(&out));
        let out = train(&data, &project, "int8-teacher", &["--teacher", s(&int8)]);
        assert_refused_output(&out, "--teacher: ");
        assert!(stderr(&out).contains(fp32), "{}", stderr(&out));
    }

    /// `field run` given a text file as the teacher, a folder as the holdout, an INT8 export as the
    /// deployed model, a file as its state folder: each named by its flag, in a line.
    #[test]
    fn case8_field_run_names_the_flag_of_a_wrong_input_in_a_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let data = synth_field(d, 2, 2);
        let dataset = data.parent().expect("dataset");
        let images = dataset.join("images/val");
        let text = d.join("text.onnx");
        std::fs::write(&text, "not a model\n").expect("write");
        let export_dir = d.join("export");
        let int8 = export_dir.join("yolov8n-shapes-160.int8.onnx");
        let model = demo_model();
        let calib = dataset.join("images/train");
        let export =
            ["-q", "export", "--model", s(&model), "--int8", "--calib", s(&calib), "--out", s(&export_dir)];
        assert!(headroom(&export).status.success());
        let work = d.join("work");
        let run = |teacher: &Path, model: &Path, holdout: &Path, work: &Path| {
            let args = [
                "field",
                "run",
                "--images",
                s(&images),
                "--teacher",
                s(teacher),
                "--model",
                s(model),
                "--holdout",
                s(holdout),
                "--work",
                s(work),
            ];
            headroom(&args)
        };
        let cases = [
            (run(&text, &model, &data, &work), "--teacher: "),
            (run(&model, &model, dataset, &work), "--holdout"),
            (run(&model, &int8, &data, &work), "--model: "),
            (run(&model, &model, &data, &text), "exists and is not a folder: give --work another path"),
        ];
        for (out, want) in &cases {
            assert_refused_output(out, want);
        }
        let negative = [
            "field",
            "run",
            "--images",
            "i",
            "--teacher",
            "t",
            "--model",
            "m",
            "--holdout",
            "h",
            "--epochs",
            "-1",
        ];
        assert_refused(&negative, "invalid value '-1' for '--epochs <EPOCHS>'");
        // Deployed INT8 trains from its FP32 source, which this state folder does not have.
        let said = stderr(&cases[2].0);
        assert!(said.contains("is an INT8 export that this loop did not deploy"), "{said}");
        assert!(
            said.contains(&format!("{}/deployed/", work.display())),
            "names where its source goes: {said}"
        );
    }

    /// A freeze point the model does not have: the model named once, the points as a range.
    #[test]
    fn case8_a_freeze_point_out_of_range_names_the_model_once_and_the_points_as_a_range() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 2, 2);
        let out = train(&data, &dir.path().join("runs"), "frozen", &["--train", "99"]);
        assert_refused_output(&out, "valid freeze points are 0 to 22 (10 is neck+head, 22 is head)");
        let model = demo_model();
        assert_eq!(stderr(&out).matches(s(&model)).count(), 1, "{}", stderr(&out));
    }

    fn assert_refused_output(out: &Output, want: &str) {
        let text = stderr(out);
        assert_eq!(out.status.code(), Some(2), "{text}");
        assert!(text.contains(want), "`{want}` not in:\n{text}");
        assert_short(&text);
    }
}
