//! The binary against what field devices and hostile users produce: images that claim to be huge,
//! truncated or tiny, symbolic-link loops, an output folder inside the input folder, absurd thread
//! counts, two runs on one output, Ctrl-C in the middle, early errors, splits without labels, a FIFO
//! among the images, and a home folder that must stay untouched. Each was a real failure once (see
//! the test names).

mod common;
use common::headroom;

#[test]
fn absurd_thread_worker_and_batch_counts_are_refused_at_once() {
    for (flag, value, want) in [
        ("--threads", "100000", "100000 is outside 0..=256"),
        ("--workers", "0", "0 is outside 1..=256"),
        ("--batch", "99999", "99999 is outside 1..=1024"),
    ] {
        let run = headroom(&["label", "--teacher", "t.onnx", "--images", "i", "--out", "o", flag, value]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{flag} {value}: {stderr}");
        assert!(stderr.contains(want), "{flag} {value}: {stderr}");
    }
}

#[cfg(unix)]
#[test]
fn a_closed_stdout_ends_the_run_quietly_not_in_a_panic() {
    use std::os::unix::process::ExitStatusExt as _;
    // `headroom inspect --json | true`: the reader is gone before headroom writes its first byte.
    let model = common::demo_model();
    let mut child = common::headroom_command()
        .args(["inspect", common::s(&model), "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("waits");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    // Ended by SIGPIPE at its first write, as `cat` would be (before the fix: a panic, exit 101).
    assert_eq!(output.status.signal(), Some(13), "{:?} {stderr}", output.status);
}

#[test]
fn help_lists_what_exists_and_puts_logging_options_last() {
    let run = headroom(&["--help"]);
    let help = String::from_utf8_lossy(&run.stdout);
    assert!(help.contains("plan") && help.contains("export"), "{help}");
    let run = headroom(&["label", "--help"]);
    let help = String::from_utf8_lossy(&run.stdout);
    let (teacher, verbose) =
        (help.find("--teacher").expect("teacher"), help.find("--verbose").expect("verbose"));
    let last_own = help.find("--ep-fallback").expect("ep-fallback");
    assert!(teacher < last_own && last_own < verbose, "-v/-q after the verb's own options:\n{help}");
    assert!(help.contains("[default: 0.25]"), "label's own --conf default:\n{help}");
    let run = headroom(&["eval", "--help"]);
    let help = String::from_utf8_lossy(&run.stdout);
    assert!(
        help.contains("[default: 0.001]") && !help.contains("0.25"),
        "eval's own --conf default:\n{help}"
    );
}

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use std::path::{Path, PathBuf};
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    use super::*;
    use common::{demo_model, headroom_command, s};

    /// `headroom synth` of `n` val images (JPEG when `jpeg`) into `dir/synth`; the val image folder.
    fn synth(dir: &Path, n: usize, jpeg: bool) -> PathBuf {
        let out = dir.join("synth");
        let n = n.to_string();
        let mut args = vec!["-q", "synth", "--seed", "6", "--train", "1", "--val", &n, "--out", s(&out)];
        if jpeg {
            args.extend(["--jpeg", "90"]);
        }
        let run = headroom(&args);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        out.join("images/val")
    }

    fn label_args<'a>(model: &'a Path, images: &'a Path, out: &'a Path) -> Vec<&'a str> {
        vec!["label", "--teacher", s(model), "--images", s(images), "--out", s(out), "--json"]
    }

    fn manifest(out: &Path) -> serde_json::Value {
        let text = std::fs::read_to_string(out.join("manifest.json")).expect("manifest.json");
        serde_json::from_str(&text).expect("manifest JSON")
    }

    /// Every file below `dir` whose name ends in `.tmp` (left-over temporaries).
    fn temporaries(dir: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let path = entry.path();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    stack.push(path);
                } else if path.to_string_lossy().ends_with(".tmp") {
                    found.push(path);
                }
            }
        }
        found
    }

    /// A JPEG that declares `width`×`height` pixels: `template`'s baseline frame header patched.
    fn huge_jpeg(template: &[u8], width: u16, height: u16) -> Vec<u8> {
        let mut bytes = template.to_vec();
        let sof = bytes.windows(2).position(|w| w == [0xFF, 0xC0]).expect("baseline SOF0");
        bytes[sof + 5..sof + 7].copy_from_slice(&height.to_be_bytes());
        bytes[sof + 7..sof + 9].copy_from_slice(&width.to_be_bytes());
        bytes
    }

    /// Regression: a header claiming 65000×60000 pixels aborted the process (a 30 GB allocation),
    /// losing every other image and leaving the manifest `running`; a truncated JPEG was labelled
    /// half grey although `eval` rejects it; a 9-pixel image too.
    #[test]
    fn regression_label_skips_what_eval_skips_and_never_aborts_on_a_huge_header() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 4, true);
        let good = std::fs::read(images.join("000000.jpg")).expect("jpg");
        std::fs::write(images.join("huge.jpg"), huge_jpeg(&good, 65000, 60000)).expect("write");
        std::fs::write(images.join("cut.jpg"), &good[..good.len() * 2 / 3]).expect("write");
        image::RgbImage::from_pixel(9, 40, image::Rgb([1, 2, 3])).save(images.join("tiny.png")).expect("png");
        let out = dir.path().join("ds");
        let run = headroom(&label_args(&demo_model(), &images, &out));
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let m = manifest(&out);
        assert_eq!(m["status"], "complete", "{m}");
        assert_eq!((m["counts"]["labelled"].as_u64(), m["counts"]["skipped"].as_u64()), (Some(4), Some(3)));
        let reasons = m["skipped"].to_string();
        for want in
            ["huge.jpg", "more than 178956970 pixels", "cut.jpg", "truncated", "tiny.png", "under 10 pixels"]
        {
            assert!(reasons.contains(want), "`{want}` missing from {reasons}");
        }
        // eval on the same folder, as a split, skips the same three.
        let yaml = dir.path().join("data.yaml");
        let text = format!(
            "path: {}\ntrain: images/val\nval: images/val\nnames: [circle, square, triangle]\n",
            s(&images.join("../.."))
        );
        std::fs::write(&yaml, text).expect("yaml");
        let run = headroom(&["eval", "--model", s(&demo_model()), "--data", s(&yaml), "--json"]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let report: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
        assert_eq!(report["metrics"]["images"], 4, "{report}");
    }

    /// Regression: one symbolic-link loop labelled one image 41 times (mAP50 0.663 → 0.265 without a
    /// word) and two loops hung; `--out` inside `--images` relabelled its own output on every rerun
    /// (3, then 6, then 9 images).
    #[cfg(unix)]
    #[test]
    fn regression_links_loops_and_an_output_inside_the_images_label_each_image_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 3, false);
        std::os::unix::fs::symlink(&images, images.join("loop")).expect("link");
        std::fs::create_dir_all(images.join("sub")).expect("mkdir");
        std::os::unix::fs::symlink(&images, images.join("sub/back")).expect("link");
        let out = images.join("labelled");
        for round in 0..3 {
            let run = headroom(&label_args(&demo_model(), &images, &out));
            assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
            let m = manifest(&out);
            assert_eq!(m["counts"]["images"], 3, "round {round}: {m}");
            let labelled = if round == 0 { 3 } else { 0 };
            assert_eq!(m["counts"]["labelled"], labelled, "round {round}: {m}");
        }
    }

    /// Early errors write nothing; a folder whose every image is corrupt is a failure, not a success.
    #[test]
    fn early_errors_leave_nothing_behind_and_all_corrupt_images_fail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = demo_model();
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        let file = dir.path().join("file.txt");
        std::fs::write(&file, b"x").expect("write");
        for (images, want) in [
            (dir.path().join("missing"), "--images"),
            (file.clone(), "not a folder of images"),
            (empty.clone(), "no images for --images in this folder"),
        ] {
            let out = dir.path().join("out");
            let run = headroom(&label_args(&model, &images, &out));
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{stderr}");
            assert!(stderr.contains(want), "{}: {stderr}", images.display());
            assert!(!out.exists(), "{}: the output folder was created", images.display());
        }
        let corrupt = dir.path().join("corrupt");
        std::fs::create_dir_all(&corrupt).expect("mkdir");
        for name in ["a.jpg", "b.png"] {
            std::fs::write(corrupt.join(name), b"garbage").expect("write");
        }
        let out = dir.path().join("out2");
        let run = headroom(&label_args(&model, &corrupt, &out));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("none of the 2 images to label could be read"), "{stderr}");
        assert_eq!(manifest(&out)["status"], "failed");
        assert!(temporaries(&out).is_empty());
    }

    /// Regression: a second run on one `--out` deleted the first's temporaries as "left by an
    /// interrupted run" and the first failed. And Ctrl-C used to kill the run where it stood, the
    /// manifest left `running`.
    #[cfg(unix)]
    #[test]
    fn regression_a_second_writer_is_refused_and_ctrl_c_stops_cleanly_then_resumes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 1500, false);
        let out = dir.path().join("ds");
        let model = demo_model();
        let slow = ["--threads", "1", "--streams", "1", "--workers", "1", "--batch", "1"];
        let mut args = label_args(&model, &images, &out);
        args.extend(slow);
        let first = headroom_command()
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // The first run holds the lock once its manifest says `running`.
        let started = Instant::now();
        while !std::fs::read_to_string(out.join("manifest.json")).is_ok_and(|t| t.contains("\"running\"")) {
            assert!(started.elapsed() < Duration::from_secs(60), "the first run never started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let second = headroom(&args);
        let stderr = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(2), "{stderr}");
        let pid = format!("pid {}", first.id());
        assert!(
            stderr.contains("another headroom run is writing this folder") && stderr.contains(&pid),
            "{stderr}"
        );
        std::thread::sleep(Duration::from_millis(1500));
        let kill = std::process::Command::new("kill").args(["-INT", &first.id().to_string()]).status();
        assert!(kill.is_ok_and(|s| s.success()), "kill -INT");
        let output = first.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(130), "{stderr}");
        assert!(stderr.contains("stopped by SIGINT"), "{stderr}");
        let m = manifest(&out);
        assert_eq!(m["status"], "interrupted", "{m}");
        let labelled = m["counts"]["labelled"].as_u64().expect("labelled");
        assert!(labelled < 1500, "the run finished before the signal: make it longer ({m})");
        assert!(temporaries(&out).is_empty(), "{:?}", temporaries(&out));
        let resumed = headroom(&label_args(&model, &images, &out));
        let stderr = String::from_utf8_lossy(&resumed.stderr);
        assert!(resumed.status.success(), "{stderr}");
        assert!(
            stderr.contains("INFO") && !stderr.contains('\u{1b}'),
            "no colour codes when stderr is no terminal"
        );
        let m = manifest(&out);
        assert_eq!(m["status"], "complete");
        // The resumed run's counts describe the whole dataset, not only its own images.
        let mut boxes = 0;
        for entry in std::fs::read_dir(out.join("labels")).expect("labels").flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "txt") {
                boxes += std::fs::read_to_string(&path).expect("label").lines().count();
            }
        }
        assert_eq!(m["counts"]["boxes"].as_u64(), Some(boxes as u64), "{}", m["counts"]);
        assert_eq!(m["counts"]["already_done"].as_u64(), Some(labelled), "{m}");
        assert_eq!(m["counts"]["labelled"].as_u64(), Some(1500 - labelled), "{m}");
    }

    /// Runs `command` to its end, or kills it after `limit` and fails: a regression that hangs
    /// fails the test instead of hanging it. Output goes through files, so a full pipe cannot stall
    /// the child.
    fn output_within(command: &mut std::process::Command, limit: Duration) -> std::process::Output {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
        let mut child = command
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&err).expect("stderr file"))
            .spawn()
            .expect("spawn");
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if started.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = std::fs::read_to_string(&err).unwrap_or_default();
                panic!("still running after {limit:?} (hung?), killed: {stderr}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let read = |p: &Path| std::fs::read(p).expect("output");
        std::process::Output { status, stdout: read(&out), stderr: read(&err) }
    }

    /// Regression: a FIFO named like an image in a dataset hung `eval`, `train`, `label` and
    /// `export --calib` forever (opening it waits for a writer that never comes).
    #[cfg(unix)]
    #[test]
    fn regression_a_fifo_among_the_images_is_skipped_with_a_warning_not_waited_for() {
        let limit = Duration::from_secs(120);
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 3, false);
        let fifo = images.join("pipe.png");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().expect("mkfifo runs");
        assert!(made.success(), "mkfifo");
        let said_so = |stderr: &[u8]| {
            let stderr = String::from_utf8_lossy(stderr);
            assert!(stderr.contains(s(&fifo)) && stderr.contains("a FIFO (named pipe)"), "{stderr}");
        };
        let yaml = dir.path().join("synth/data.yaml");
        let model = demo_model();
        let eval = output_within(
            headroom_command().args(["eval", "--model", s(&model), "--data", s(&yaml), "--json"]),
            limit,
        );
        assert!(eval.status.success(), "{}", String::from_utf8_lossy(&eval.stderr));
        said_so(&eval.stderr);
        let report: serde_json::Value = serde_json::from_slice(&eval.stdout).expect("json");
        assert_eq!(report["metrics"]["images"], 3, "{report}");

        let out = dir.path().join("export");
        let export = output_within(
            headroom_command().args([
                "export",
                "--model",
                s(&model),
                "--int8",
                "--calib",
                s(&images),
                "--out",
                s(&out),
                "--threads",
                "1",
                "--json",
            ]),
            limit,
        );
        assert!(export.status.success(), "{}", String::from_utf8_lossy(&export.stderr));
        said_so(&export.stderr);
        let report: serde_json::Value = serde_json::from_slice(&export.stdout).expect("json");
        assert_eq!(report["int8"]["calibration_images"], 3, "{report}");

        let labelled = dir.path().join("ds");
        let label = output_within(headroom_command().args(label_args(&model, &images, &labelled)), limit);
        assert!(label.status.success(), "{}", String::from_utf8_lossy(&label.stderr));
        said_so(&label.stderr);
        assert_eq!(manifest(&labelled)["counts"]["images"], 3);
    }

    /// `eval` on a split without label files printed zeros and exited 0.
    #[test]
    fn regression_eval_refuses_a_split_without_labels_and_warns_of_missing_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 3, false);
        let yaml = dir.path().join("synth/data.yaml");
        let labels = images.join("../../labels/val");
        std::fs::remove_file(labels.join("000001.txt")).expect("remove one");
        let run = headroom(&["eval", "--model", s(&demo_model()), "--data", s(&yaml)]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        assert!(stderr.contains("1 of 3 images of the val split have no label file"), "{stderr}");
        std::fs::remove_dir_all(&labels).expect("remove all");
        let run = headroom(&["eval", "--model", s(&demo_model()), "--data", s(&yaml)]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("no image of the val split has a label file"), "{stderr}");
    }

    /// ONNX Runtime wrote telemetry state under the user's home on every run that loaded it
    /// (`~/.cache/Microsoft/DeveloperTools/.onnxruntime/`).
    #[test]
    fn regression_nothing_is_written_under_home() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), 2, false);
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("mkdir");
        let out = dir.path().join("ds");
        let run = headroom_command()
            .args(label_args(&demo_model(), &images, &out))
            .env("HOME", &home)
            .env_remove("XDG_CACHE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .expect("runs");
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let written: Vec<_> = std::fs::read_dir(&home).expect("list").flatten().map(|e| e.path()).collect();
        assert!(written.is_empty(), "written under HOME: {written:?}");
    }

    #[test]
    fn a_folder_given_as_a_model_says_so() {
        let dir = tempfile::tempdir().expect("tempdir");
        for args in
            [vec!["inspect", s(dir.path())], vec!["eval", "--model", s(dir.path()), "--data", "missing.yaml"]]
        {
            let run = headroom(&args);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{stderr}");
            if args[0] == "inspect" {
                assert!(stderr.contains("is a folder, not an ONNX model file"), "{stderr}");
            }
        }
        let images = synth(dir.path(), 1, false);
        let run = headroom(&label_args(dir.path(), &images, &dir.path().join("o")));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("is a folder, not an ONNX model file"), "{stderr}");
        assert_eq!(stderr.matches("is a folder").count(), 1, "the cause is not repeated: {stderr}");
    }
}
