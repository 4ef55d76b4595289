//! Issue 32, night after night: settings that a step would refuse are refused before any work; a
//! step that fails is retried, then its run set aside so that a fresh one starts; damaged state
//! files are set aside; each deployed model has its own state; the labelled set and `history/`
//! stay within their bounds.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::os::unix::process::ExitStatusExt as _;
    use std::path::{Path, PathBuf};

    use crate::common::field::{Scene, add_frame, field_args, run, scene, sha, work};
    use crate::common::{demo_model, headroom, headroom_command, output_text as text, repo_root, s};

    fn fixture(name: &str) -> PathBuf {
        repo_root().join("tests/fixtures/onnx").join(name)
    }

    /// `args` with `flag`'s value replaced (or the pair added).
    fn with(args: &[String], flag: &str, value: &str) -> Vec<String> {
        let mut a = args.to_vec();
        match a.iter().position(|x| x == flag) {
            Some(at) => a[at + 1] = value.to_string(),
            None => a.extend([flag.to_string(), value.to_string()]),
        }
        a
    }

    /// The entries of a folder, sorted (none when it does not exist).
    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .map(|e| e.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned())).collect())
            .unwrap_or_default();
        names.sort();
        names
    }

    fn state(run: &Path) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(run.join("state.json")).expect("state.json"))
            .expect("state json")
    }

    /// A night killed once its training started: the training's config.toml and its text.
    fn killed_while_training(scene: &Scene, args: &[String]) -> (PathBuf, String) {
        let out = run(args, &[("HEADROOM_FIELD_KILL_AT", "train:mid")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        let config = work(scene).join("run/train/config.toml");
        let toml = std::fs::read_to_string(&config).expect("config.toml");
        (config, toml)
    }

    /// A preset file in the scene: the scene's always-deploying preset with `extra` lines.
    fn preset(scene: &Scene, name: &str, extra: &str) -> PathBuf {
        let always = std::fs::read_to_string(&scene.always).expect("preset");
        let path = scene.root.join(name);
        std::fs::write(&path, format!("{extra}\n{always}")).expect("write preset");
        path
    }

    #[test]
    fn settings_a_step_would_refuse_are_refused_before_labelling() {
        let scene = scene();
        let base = field_args(&scene, &scene.always);
        // An FP16 export of the deployed model.
        let fp16_dir = scene.root.join("fp16");
        let out = headroom(&["-q", "export", "--model", s(&scene.deployed), "--fp16", "--out", s(&fp16_dir)]);
        assert!(out.status.success(), "{}", text(&out));
        let fp16 = std::fs::read_dir(&fp16_dir)
            .expect("exports")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.to_string_lossy().ends_with(".fp16.onnx"))
            .expect("an .fp16.onnx");
        let fp16_app = scene.root.join("app/fp16.onnx");
        std::fs::copy(&fp16, &fp16_app).expect("copy");
        // A teacher taking 640x640 only, with a 160 student of the same classes (0, 1, 2): the
        // holdout and the old scenes named alike.
        let student = scene.root.join("app/student.onnx");
        std::fs::copy(fixture("yolov8n-w00625-nc3-160.onnx"), &student).expect("copy");
        let mut paired = with(&base, "--model", s(&student));
        for (flag, data) in [("--holdout", &scene.holdout), ("--old", &scene.old)] {
            let yaml = std::fs::read_to_string(data).expect("data.yaml");
            let renamed = yaml.replace("- circle\n- square\n- triangle", "- '0'\n- '1'\n- '2'");
            assert_ne!(renamed, yaml, "the names are rewritten");
            let copy = data.with_file_name("numbered.yaml");
            std::fs::write(&copy, renamed).expect("write");
            paired = with(&paired, flag, s(&copy));
        }
        let teacher = fixture("yolov8n-w00625-nc3-640.onnx");
        let paired = with(&with(&paired, "--teacher", s(&teacher)), "--preset", "field-accurate");
        let cases: Vec<(Vec<String>, &str)> = vec![
            (with(&base, "--preset", s(&preset(&scene, "nbs0.toml", "nbs = 0"))), "nbs = 0"),
            (
                with(&base, "--preset", s(&preset(&scene, "bogus.toml", "train = \"bogus\"\nnbs = 8"))),
                "bogus",
            ),
            (with(&base, "--train", "bogus"), "'bogus' for '--train <PART>'"),
            (with(&base, "--reserve", "1000GiB"), "leaves nothing of the budget"),
            (with(&base, "--model", s(&fp16_app)), "is an FP16 export that this loop did not deploy"),
            (paired.clone(), "takes 640x640 images only"),
        ];
        for (args, expected) in cases {
            let out = run(&args, &[]);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
            assert!(text(&out).contains(expected), "{args:?}: expected `{expected}` in {}", text(&out));
            assert!(
                !scene.root.join("app/.headroom-field").exists(),
                "{args:?}: nothing labelled or written: {}",
                text(&out)
            );
        }
        // The pairing's message says what to do; the same teacher passes with a preset that does
        // not distil (killed as labelling starts: the checks passed).
        let out = run(&paired, &[]);
        assert!(text(&out).contains("--preset field-quick"), "{}", text(&out));
        let quick = with(&paired, "--preset", "field-quick");
        let out = run(&quick, &[("HEADROOM_FIELD_KILL_AT", "label")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
    }

    #[test]
    fn a_step_failing_twice_alike_sets_the_run_aside_and_a_fresh_run_deploys() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        // A trtexec that always fails: the export step fails the same way every night.
        let trtexec = scene.root.join("trtexec");
        std::fs::write(&trtexec, "#!/bin/sh\necho 'no GPU here' >&2\nexit 1\n").expect("write");
        std::fs::set_permissions(&trtexec, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let failing = [("TRTEXEC", s(&trtexec))];
        let out = run(&args, &failing);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("step export failed (start 1 of 2"), "{}", text(&out));
        assert!(text(&out).contains("the next start retries it"), "{}", text(&out));
        let failure = &state(&work(&scene).join("run"))["failure"];
        assert_eq!(
            (failure["step"].as_str(), failure["tries"].as_u64()),
            (Some("export"), Some(1)),
            "{failure}"
        );
        assert!(
            failure["error"].as_str().is_some_and(|e| e.contains("trtexec")),
            "the child's own error: {failure}"
        );

        let out = run(&args, &failing);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("continuing field run"), "retried, not redone: {}", text(&out));
        assert!(text(&out).contains("the run is set aside in"), "{}", text(&out));
        let history = work(&scene).join("history");
        let set_aside = names(&history);
        assert!(set_aside.len() == 1 && set_aside[0].ends_with("-failed"), "{set_aside:?}");
        let failed = state(&history.join(&set_aside[0]));
        assert_eq!(failed["failure"]["tries"], 2, "{failed}");
        assert!(!work(&scene).join("run").exists(), "no run left to continue");
        assert_eq!(sha(&scene.deployed), scene.original);

        // The cause gone, the next night is a fresh run, and it deploys.
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(!text(&out).contains("continuing field run"), "{}", text(&out));
        assert_eq!(sha(&scene.deployed), sha(&work(&scene).join("run/export/best.fp16.onnx")));
    }

    #[test]
    fn damaged_state_files_and_an_edited_training_are_set_aside_and_the_loop_goes_on() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        let work = work(&scene);
        // Killed once the training started; its settings then edited by hand to another dataset.
        let (config, toml) = killed_while_training(&scene, &args);
        let labelled = work.join("labelled/data.yaml");
        let edited = toml.replace(s(&labelled), s(&scene.holdout));
        assert_ne!(edited, toml, "the data path is edited");
        std::fs::write(&config, edited).expect("edit");
        let out = run(&args, &[("HEADROOM_FIELD_KILL_AT", "export")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        assert!(text(&out).contains("the training starts anew"), "{}", text(&out));
        let run_dir = work.join("run");
        assert!(names(&run_dir).iter().any(|n| n.starts_with("train.set-aside-")), "{:?}", names(&run_dir));
        let spec = std::fs::read_to_string(run_dir.join("train/config.toml")).expect("config.toml");
        assert!(spec.contains(s(&labelled)), "the new training is on the labelled set: {spec}");

        // The labelled set's index and manifest and the run's state, damaged.
        for file in [work.join("labelled/manifest.json"), work.join("labelled/field-sources.json")] {
            std::fs::write(&file, b"{\"trunc").expect("damage");
        }
        std::fs::write(run_dir.join("state.json"), b"{\"id\": ").expect("damage");
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("the unfinished run's state is damaged"), "{}", text(&out));
        let history = names(&work.join("history"));
        assert!(history.len() == 1 && history[0].ends_with("-damaged"), "{history:?}");
        let labelled_files = names(&work.join("labelled"));
        for damaged in ["manifest.json.damaged-", "field-sources.json.damaged-"] {
            assert!(labelled_files.iter().any(|n| n.starts_with(damaged)), "{damaged}: {labelled_files:?}");
        }
        assert!(labelled_files.contains(&"manifest.json".to_string()), "written anew: {labelled_files:?}");
        assert_eq!(sha(&scene.deployed), sha(&run_dir.join("export/best.fp16.onnx")), "deployed");
    }

    /// A training's epochs edited by hand in its config.toml (1 → 3) are not silently honoured: the
    /// training is set aside and starts anew with the run's own settings.
    #[test]
    fn a_hand_edited_epoch_count_is_set_aside_not_honoured() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        let work = work(&scene);
        let (config, toml) = killed_while_training(&scene, &args);
        let edited = toml.replace("epochs = 1\n", "epochs = 3\n");
        assert_ne!(edited, toml, "the epochs are edited: {toml}");
        std::fs::write(&config, edited).expect("edit");
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("its config.toml says 3 epochs, this run asks for 1"), "{}", text(&out));
        let spec = std::fs::read_to_string(work.join("run/train/config.toml")).expect("config.toml");
        assert!(spec.contains("epochs = 1\n"), "{spec}");
    }

    #[test]
    fn bad_and_unfinished_frames_among_the_images_never_stop_the_night() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        // A camera's JPEG: one of the scene's images, encoded as one.
        let first = names(&scene.images).into_iter().next().expect("an image");
        let jpeg = scene.root.join("frame.jpg");
        image::open(scene.images.join(first)).expect("decode").to_rgb8().save(&jpeg).expect("encode");
        let bytes = std::fs::read(&jpeg).expect("read");
        // A 0-byte frame, a truncated one, a 1x1 PNG: finished an hour ago. And a whole frame the
        // camera is still writing (modified now): left for a later night.
        std::fs::write(scene.images.join("writing.jpg"), b"").expect("write");
        std::fs::write(scene.images.join("cut.jpg"), &bytes[..bytes.len() / 3]).expect("write");
        let png = image::RgbImage::from_pixel(1, 1, image::Rgb([9, 9, 9]));
        png.save(scene.images.join("tiny.png")).expect("png");
        let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
        for name in ["writing.jpg", "cut.jpg", "tiny.png"] {
            let file = std::fs::File::options().write(true).open(scene.images.join(name)).expect("open");
            file.set_modified(hour_ago).expect("mtime");
        }
        // The camera keeps writing it through the run: its modification time stays "now".
        let fresh = scene.images.join("fresh.jpg");
        std::fs::write(&fresh, &bytes).expect("write");
        let writing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let camera = {
            let (writing, fresh) = (writing.clone(), fresh.clone());
            std::thread::spawn(move || {
                while writing.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(file) = std::fs::File::options().write(true).open(&fresh) {
                        let _ = file.set_modified(std::time::SystemTime::now());
                    }
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
            })
        };
        let out = run(&args, &[]);
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        camera.join().expect("the camera thread");
        assert!(out.status.success(), "{}", text(&out));
        for name in ["writing.jpg", "cut.jpg", "tiny.png", "fresh.jpg"] {
            assert!(text(&out).contains(name), "{name} named: {}", text(&out));
        }
        assert_eq!(sha(&scene.deployed), sha(&work(&scene).join("run/export/best.fp16.onnx")), "deployed");
        let export: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(work(&scene).join("run/export.json")).expect("export.json"),
        )
        .expect("export json");
        assert!(export.to_string().contains("cut.jpg"), "the calibration skipped it: {export}");
    }

    #[test]
    fn a_truncated_checkpoint_is_retried_then_set_aside_and_a_fresh_run_deploys() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        let out = run(&args, &[("HEADROOM_FIELD_KILL_AT", "export")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        // The training's checkpoint cut short, its end undone (as a kill mid-epoch leaves it).
        let run_dir = work(&scene).join("run");
        let checkpoint = run_dir.join("train/ckpt/last.pt");
        let bytes = std::fs::read(&checkpoint).expect("last.pt");
        std::fs::write(&checkpoint, &bytes[..bytes.len() / 2]).expect("truncate");
        std::fs::remove_file(run_dir.join("train/results.json")).expect("results.json");
        let mut run_state = state(&run_dir);
        run_state["done"] = serde_json::json!(["label"]);
        std::fs::write(run_dir.join("state.json"), run_state.to_string()).expect("state");
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("step train failed (start 1 of 2"), "{}", text(&out));
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("the run is set aside in"), "{}", text(&out));
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        let history = names(&work(&scene).join("history"));
        assert!(history.len() == 1 && history[0].ends_with("-failed"), "{history:?}");
        assert_eq!(sha(&scene.deployed), sha(&work(&scene).join("run/export/best.fp16.onnx")), "deployed");
    }

    #[test]
    fn two_models_in_one_folder_keep_separate_runs_and_an_old_state_folder_moves_to_its_model() {
        let scene = scene();
        let b = scene.root.join("app/b.onnx");
        std::fs::copy(demo_model(), &b).expect("copy");
        let a_args = field_args(&scene, &scene.always);
        let b_args = with(&a_args, "--model", s(&b));
        let out = run(&a_args, &[("HEADROOM_FIELD_KILL_AT", "train")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        let out = run(&b_args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(!text(&out).contains("continuing field run"), "b never continues a's run: {}", text(&out));
        let root = scene.root.join("app/.headroom-field");
        assert_eq!(names(&root), ["b.onnx", "model.onnx"]);
        assert_eq!(
            state(&root.join("model.onnx/run"))["done"],
            serde_json::json!(["label"]),
            "a's run is a's"
        );
        assert_eq!(sha(&scene.deployed), scene.original, "a untouched");
        assert_eq!(
            sha(&b),
            sha(&root.join("b.onnx/run/export/best.fp16.onnx")),
            "b deployed from its own run"
        );

        // One --work for both: a run for another model is set aside, never continued. (b is FP32
        // again: the FP32 source of its deployed FP16 file is in its own state folder.)
        std::fs::copy(demo_model(), &b).expect("copy");
        let shared = scene.root.join("shared");
        let out = run(&with(&a_args, "--work", s(&shared)), &[("HEADROOM_FIELD_KILL_AT", "train")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        let out = run(&with(&b_args, "--work", s(&shared)), &[("HEADROOM_FIELD_KILL_AT", "train")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        assert!(text(&out).contains(&format!("is for {}", s(&scene.deployed))), "{}", text(&out));
        let history = names(&shared.join("history"));
        assert!(history.len() == 1 && history[0].ends_with("-abandoned"), "{history:?}");

        // The layout of earlier versions (one state folder beside the models) moves to the first
        // model that runs.
        let old = scene.root.join("old-app");
        std::fs::create_dir_all(old.join(".headroom-field/labelled")).expect("mkdir");
        std::fs::write(old.join(".headroom-field/labelled/marker"), b"x").expect("write");
        std::fs::copy(demo_model(), old.join("m.onnx")).expect("copy");
        let out =
            run(&["field".into(), "rollback".into(), "--model".into(), s(&old.join("m.onnx")).into()], &[]);
        assert_eq!(out.status.code(), Some(2), "no .prev to roll back to: {}", text(&out));
        assert!(old.join(".headroom-field/m.onnx/labelled/marker").is_file(), "{}", text(&out));
    }

    /// The labelled set heals: after the camera folder moved to another path with the same frames (a
    /// USB drive remounted `usb0` → `usb1`), and after a cleaner removed `labelled/images/`, the next
    /// night with a new frame trains and ends 0 (both were exit 2 every night: "no usable image").
    #[test]
    fn a_moved_camera_folder_and_removed_labelled_images_heal_the_next_night() {
        let mut scene = scene();
        let out = run(&field_args(&scene, &scene.always), &[]);
        assert!(out.status.success(), "the first night: {}", text(&out));
        let labelled = work(&scene).join("labelled/images");
        let resolving = |scene: &Scene| {
            let entries = names(&labelled);
            assert!(!entries.is_empty());
            for name in &entries {
                assert!(labelled.join(name).exists(), "{name} resolves ({})", scene.images.display());
            }
            entries.len()
        };
        assert_eq!(resolving(&scene), 20);
        // The folder moves (same files), and the camera adds a frame there.
        let moved = scene.root.join("usb1/camera");
        std::fs::create_dir_all(moved.parent().expect("parent")).expect("mkdir");
        std::fs::rename(&scene.images, &moved).expect("move the folder");
        scene.images = moved;
        add_frame(&scene, 51);
        let out = run(&field_args(&scene, &scene.always), &[]);
        assert!(out.status.success(), "after the move: {}", text(&out));
        assert_eq!(resolving(&scene), 21);
        // A cleaner empties the labelled images; the camera adds a frame.
        std::fs::remove_dir_all(&labelled).expect("rm -r labelled/images");
        add_frame(&scene, 52);
        let out = run(&field_args(&scene, &scene.always), &[]);
        assert!(out.status.success(), "after labelled/images went: {}", text(&out));
        assert!(text(&out).contains("21 labelled images had no image"), "{}", text(&out));
        assert_eq!(resolving(&scene), 22);
        // The labelled set holds its own pixels (hard links here): the camera deleting a frame
        // takes nothing from it.
        let entry = labelled.join(&names(&labelled)[0]);
        assert!(!entry.symlink_metadata().expect("entry").file_type().is_symlink(), "{}", entry.display());
        let summary = state(&work(&scene).join("run"));
        assert_eq!(summary["finished"], true, "{summary}");
    }

    /// `--json` with stdout on a full disk, after a deploy: the night ends 0 (the deploy stands) with a
    /// warning naming the summary file (was: a panic, exit 101, after a successful deploy).
    #[test]
    fn a_full_stdout_after_a_deploy_is_a_warning_not_a_panic() {
        let full = Path::new("/dev/full");
        assert!(full.exists(), "/dev/full is part of every Linux");
        let scene = scene();
        let mut args = field_args(&scene, &scene.always);
        args.push("--json".into());
        let stdout = std::fs::File::options().write(true).open(full).expect("/dev/full");
        let out = headroom_command().args(&args).stdout(stdout).output().expect("runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(err.contains("could not write the JSON to stdout") && err.contains("summary.json"), "{err}");
        assert_ne!(sha(&scene.deployed), scene.original, "deployed");
    }

    /// SIGTERM to the loop's PID alone (systemd's stop, `kill PID`) reaches the running step: training
    /// stops at its next step, saved, and the night ends 143 (the step ran to its end before).
    #[test]
    fn sigterm_to_the_loop_alone_stops_the_running_step_cleanly() {
        let scene = scene();
        let mut args = field_args(&scene, &scene.always);
        args.extend(["--epochs".into(), "500".into()]);
        let mut child = headroom_command()
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("field run starts");
        let started = work(&scene).join("run/train/config.toml");
        while !started.exists() {
            assert!(child.try_wait().expect("wait").is_none(), "field run ended before training");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
        #[allow(unsafe_code)]
        // SAFETY: kill(2) on our own child, still running.
        let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(sent, 0);
        let out = child.wait_with_output().expect("field run ends");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(143), "{err}");
        assert!(
            err.contains("stopped by SIGTERM: the run is saved at its last checkpoint"),
            "the step was told: {err}"
        );
        let state = state(&work(&scene).join("run"));
        assert!(!state["done"].as_array().expect("done").iter().any(|s| s == "train"), "{state}");
    }

    /// The holdout's and the old scenes' val images copied into the folder of new images (other
    /// names): labelling leaves them out by content, with one warning and the count in the summary
    /// and report, so the gate never scores training images (they were labelled and trained on).
    #[test]
    fn holdout_and_old_images_among_the_new_ones_are_never_labelled() {
        let scene = scene();
        let mut copied = 0;
        for (data, prefix) in [(&scene.holdout, "h"), (&scene.old, "o")] {
            let val = data.parent().expect("dataset").join("images/val");
            for (i, entry) in std::fs::read_dir(&val).expect("val images").enumerate() {
                let from = entry.expect("entry").path();
                let ext = from.extension().expect("ext").to_string_lossy().into_owned();
                std::fs::copy(&from, scene.images.join(format!("{prefix}-copy-{i}.{ext}"))).expect("copy");
                copied += 1;
            }
        }
        crate::common::settle_images(&scene.images);
        let mut args = field_args(&scene, &scene.always);
        args.push("--json".into());
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains(&format!("{copied} images under --images")), "{}", text(&out));
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json summary");
        assert_eq!(summary["labelled"]["excluded"], copied, "{summary}");
        assert_eq!(summary["labelled"]["labelled_now"], 20, "{summary}");
        let labels = names(&work(&scene).join("labelled/labels"));
        assert!(labels.iter().all(|n| !n.contains("-copy-")), "{labels:?}");
        let report = std::fs::read_to_string(work(&scene).join("run/report.md")).expect("report");
        assert!(report.contains(&format!("{copied} left out")), "{report}");
    }

    /// An empty camera folder (a camera offline) is a quiet night, night after night: exit 0, no
    /// run begun, nothing set aside. (It was exit 2 and a `-failed` run every second night.)
    #[test]
    fn an_empty_camera_folder_is_a_quiet_night_every_night() {
        let scene = scene();
        let empty = scene.root.join("offline-camera");
        std::fs::create_dir_all(&empty).expect("mkdir");
        let args = with(&field_args(&scene, &scene.always), "--images", s(&empty));
        for night in 0..3 {
            let out = run(&args, &[]);
            assert!(out.status.success(), "night {night}: {}", text(&out));
            assert!(text(&out).contains("nothing new: no image in"), "night {night}: {}", text(&out));
        }
        assert!(
            names(&work(&scene)).iter().all(|n| n != "run" && n != "history"),
            "{:?}",
            names(&work(&scene))
        );
        assert_eq!(sha(&scene.deployed), scene.original);
    }

    #[test]
    fn the_labelled_set_and_history_stay_within_their_bounds() {
        let scene = scene();
        let args = [field_args(&scene, &scene.always), ["--max-images".into(), "5".into()].to_vec()].concat();
        let args = with(&args, "--keep-runs", "1");
        // The 6 newest of the 20 images by modification time: 5 of them are kept.
        let mut images: Vec<PathBuf> = names(&scene.images).iter().map(|n| scene.images.join(n)).collect();
        images.sort();
        let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(86_400);
        for (i, image) in images.iter().enumerate() {
            let when = long_ago + std::time::Duration::from_secs(i as u64 * 60);
            std::fs::File::options()
                .write(true)
                .open(image)
                .expect("open")
                .set_modified(when)
                .expect("mtime");
        }
        // A run from a night when the clock was ahead (an RTC or GPS error): named 2099…, begun first.
        let ahead = work(&scene).join("history/20991231T230000Z");
        std::fs::create_dir_all(&ahead).expect("mkdir");
        std::fs::write(ahead.join("state.json"), r#"{"id": "20991231T230000Z", "seq": 1}"#).expect("state");
        std::fs::write(ahead.join("summary.json"), "{}").expect("summary");
        for night in 0..3 {
            if night > 0 {
                // A frame the camera added, older than the five kept: new to the gate, not labelled.
                let frame = add_frame(&scene, 40 + night);
                let file = std::fs::File::options().write(true).open(&frame).expect("open");
                file.set_modified(long_ago - std::time::Duration::from_secs(3600)).expect("mtime");
            }
            let out = run(&args, &[]);
            assert!(out.status.success(), "night {night}: {}", text(&out));
            assert!(!text(&out).contains("nothing new"), "night {night}: {}", text(&out));
        }
        let labelled = work(&scene).join("labelled");
        let linked = names(&labelled.join("images"));
        assert_eq!(linked.len(), 5, "{linked:?}");
        let newest: Vec<String> =
            images[15..].iter().map(|p| p.file_name().expect("a name").to_string_lossy().into()).collect();
        assert_eq!(linked, newest, "the newest five");
        let labels = names(&labelled.join("labels"));
        assert_eq!(labels.iter().filter(|n| n.ends_with(".txt")).count(), 5, "{labels:?}");
        let history = names(&work(&scene).join("history"));
        assert_eq!(history.len(), 1, "{history:?}");
        assert_ne!(
            history[0], "20991231T230000Z",
            "the wrong clock's run goes first, the last real run stays"
        );
        let kept = work(&scene).join("history").join(&history[0]);
        assert!(kept.join("train/best.onnx").is_file() && kept.join("summary.json").is_file());
        assert!(!kept.join("base.onnx").exists() && !kept.join("train/ckpt").exists(), "{:?}", names(&kept));
    }
}
