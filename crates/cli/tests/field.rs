//! `headroom field` end to end on the CPU with the demo models, with no Python (an empty PATH):
//! killed with SIGKILL at every step, each rerun continues and the deployed file is always the
//! original, whole, until the gate deploys; rollback twice; the lock; a gate that keeps the model;
//! a deployed file changed behind the run's back; bad input; the systemd units.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use std::os::unix::process::ExitStatusExt as _;
    use std::path::Path;

    use crate::common::field::{add_frame, field_args, run, scene, sha, synth, work};
    use crate::common::{demo_model, headroom, output_text as text, repo_root, s, settle_images};

    #[test]
    fn killed_at_every_step_the_deployed_model_stays_whole_and_reruns_finish_rollback_lock_and_gate() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        let work = work(&scene);
        // A stand-in trtexec found through $TRTEXEC, as JetPack's is found off PATH (builtins only:
        // the runs have an empty PATH).
        let trtexec = scene.root.join("trtexec");
        // Each engine holds the command that built it: one engine is told from another.
        std::fs::write(
            &trtexec,
            "#!/bin/sh\nfor a in \"$@\"; do case \"$a\" in --saveEngine=*) printf 'plan %s' \"$*\" > \"${a#--saveEngine=}\";; esac; done\n\
             echo '[TensorRT v100300] [b30] # trtexec'\necho '[I] Selected Device: Orin'\n",
        )
        .expect("write trtexec");
        std::fs::set_permissions(&trtexec, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        let with_trtexec = ("TRTEXEC", s(&trtexec));
        for point in ["label:mid", "train", "train:mid", "export:mid", "eval", "deploy", "deploy-swap"] {
            let out = run(&args, &[("HEADROOM_FIELD_KILL_AT", point), with_trtexec]);
            assert_eq!(out.status.signal(), Some(9), "killed at {point}: {}", text(&out));
            assert!(text(&out).contains(&format!("HEADROOM_FIELD_KILL_AT={point}")), "{}", text(&out));
            assert_eq!(
                sha(&scene.deployed),
                scene.original,
                "after the kill at {point} the deployed model changed"
            );
            let state = std::fs::read_to_string(work.join("run/state.json")).unwrap_or_default();
            assert!(!state.contains("\"finished\": true"), "after the kill at {point} the run is finished");
        }
        let prev = scene.root.join("app/model.onnx.prev");
        assert_eq!(sha(&prev), scene.original, "the kill before the swap kept the original as .prev");

        // Killed between the model's rename and the engine's: the model is the candidate's, the
        // rerun puts its engine beside it.
        let out = run(&args, &[("HEADROOM_FIELD_KILL_AT", "deploy-engine"), with_trtexec]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        // The default precision, fp16: the FP16 file is deployed, gated against the FP32
        // deployment's own FP16 export (the upgrade's first night), which the night names.
        let candidate = sha(&work.join("run/export/best.fp16.onnx"));
        assert_eq!(sha(&scene.deployed), candidate, "the candidate's FP16 file is deployed");
        let engine = scene.root.join("app/model.engine");
        assert!(!engine.exists(), "killed before the engine's deploy");
        let out = run(&args, &[with_trtexec]);
        assert!(out.status.success(), "the rerun finishes: {}", text(&out));
        assert!(text(&out).contains("continuing field run"), "{}", text(&out));
        assert_eq!(sha(&scene.deployed), candidate, "the candidate is deployed");
        assert_eq!(sha(&prev), scene.original, "the original is kept as .prev");
        let built = std::fs::read_to_string(&engine).expect("the engine is deployed beside the model");
        assert!(built.contains("best.onnx") && built.contains("--fp16"), "the FP16 engine: {built}");
        let gate: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(work.join("run/gate.json")).expect("gate"))
                .expect("gate json");
        assert_eq!(gate["compared"]["precision"], "fp16", "{gate}");
        assert!(
            gate["compared"]["deployed"]
                .as_str()
                .is_some_and(|p| p.ends_with("export-serving/base.fp16.onnx")),
            "{gate}"
        );
        assert!(
            gate["compared"]["note"].as_str().is_some_and(|n| n.contains("the deployed model is fp32")),
            "{gate}"
        );
        let report = std::fs::read_to_string(work.join("run/report.md")).expect("report.md");
        assert!(report.contains("the deployed model is fp32, this run deploys fp16"), "{report}");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(work.join("run/summary.json")).expect("summary"))
                .expect("summary json");
        assert_eq!(summary["decision"], "deployed", "{summary}");
        for step in ["label", "train", "export", "eval", "deploy"] {
            assert!(summary["step_seconds"][step].is_number(), "{step} timed: {summary}");
        }
        // Engines built through the trtexec that $TRTEXEC named (issue 33: not only one on PATH).
        let engines = summary["engines"].as_array().cloned().unwrap_or_default();
        assert_eq!(engines.len(), 2, "an fp16 and an int8 engine: {summary}");
        for engine in &engines {
            let file = engine["engine"].as_str().unwrap_or_default();
            assert!(std::fs::read(file).unwrap_or_default().starts_with(b"plan"), "{engine}");
        }
        let report = std::fs::read_to_string(work.join("run/report.md")).expect("report.md");
        assert!(report.contains("| gain |") && report.contains("| old-scenes |"), "{report}");
        let leftovers: Vec<_> = std::fs::read_dir(scene.root.join("app"))
            .expect("ls")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty() || leftovers.iter().all(|n| n.starts_with('.')), "{leftovers:?}");
        let eval = headroom(&["-q", "eval", "--model", s(&scene.deployed), "--data", s(&scene.holdout)]);
        assert!(eval.status.success(), "ONNX Runtime runs the deployed file: {}", text(&eval));

        // Rollback, twice.
        let rollback: Vec<String> =
            ["field", "rollback", "--model", s(&scene.deployed)].iter().map(|a| a.to_string()).collect();
        // The engine goes with its model: the original had none, so none stays beside it.
        let out = run(&rollback, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!((sha(&scene.deployed), sha(&prev)), (scene.original.clone(), candidate.clone()));
        let engine_prev = scene.root.join("app/model.engine.prev");
        assert!(!engine.exists(), "no engine beside the FP32 original");
        assert_eq!(std::fs::read_to_string(&engine_prev).expect("the engine went to .prev"), built);
        // Killed in the middle of a rollback, the rerun finishes it, the engine back in place.
        let out = run(&rollback, &[("HEADROOM_FIELD_KILL_AT", "rollback-swap")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        let out = run(&rollback, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert_eq!((sha(&scene.deployed), sha(&prev)), (candidate.clone(), scene.original.clone()));
        assert_eq!(std::fs::read_to_string(&engine).expect("the engine is back"), built);
        // The next night trains from the deployed FP16 file's FP32 source.
        let source = work.join(format!("deployed/{candidate}.fp32.onnx"));
        assert_eq!(sha(&source), sha(&work.join("run/train/best.onnx")), "its FP32 source is kept");

        // The lock: a field command while another process holds it exits 3 and says so.
        let lock =
            std::fs::OpenOptions::new().read(true).write(true).open(work.join("lock")).expect("lock file");
        #[allow(unsafe_code)]
        // SAFETY: flock on an open descriptor.
        let held =
            unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&lock), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(held, 0, "the test takes the lock");
        let out = run(&rollback, &[]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        assert!(text(&out).contains("field loop"), "{}", text(&out));
        let out = run(&args, &[]);
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        drop(lock);

        // The default gate on a 1-epoch candidate, after the camera added a frame: kept (within the
        // noise), the last run archived, only the new frame labelled.
        add_frame(&scene, 31);
        let deployed_before = sha(&scene.deployed);
        let quick = field_args(&scene, Path::new("field-quick"));
        let mut quick_args = quick.clone();
        quick_args.extend(["--epochs".into(), "1".into(), "--json".into()]);
        let out = run(&quick_args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains("no trtexec ($TRTEXEC, /usr/src/tensorrt/bin/trtexec, PATH)"),
            "{}",
            text(&out)
        );
        let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json summary");
        assert!(summary["engines"].is_null(), "no engines without trtexec: {summary}");
        assert_eq!(summary["decision"], "kept", "{summary}");
        assert_eq!(summary["decided_by"], "gain", "{summary}");
        assert_eq!(sha(&scene.deployed), deployed_before);
        assert_eq!(std::fs::read_dir(work.join("history")).expect("history").count(), 1);
        assert!(summary["labelled"]["labelled_now"] == 1, "only the new frame labelled: {summary}");

        // A quiet night: no frame the last run was not gated on. Nothing is labelled, trained or
        // gated again, nothing is set aside, and the night ends 0 saying so.
        let run_state = std::fs::read(work.join("run/state.json")).expect("the last run's state");
        let out = run(&quick_args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        let id = summary["run"].as_str().expect("run id");
        assert!(
            text(&out).contains(&format!("nothing new since run {id}: 21 images, all seen")),
            "{}",
            text(&out)
        );
        let night: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--json");
        assert_eq!(night["decision"], "nothing-new", "{night}");
        assert_eq!(std::fs::read(work.join("run/state.json")).expect("state"), run_state, "no new run");
        assert_eq!(std::fs::read_dir(work.join("history")).expect("history").count(), 1);
        assert_eq!(sha(&scene.deployed), deployed_before);
        // The same frames under other names (the folder moved, a camera that renames) are not new.
        let moved = scene.root.join("moved");
        std::fs::rename(&scene.images, &moved).expect("move the folder");
        std::fs::create_dir_all(&scene.images).expect("mkdir");
        for (i, entry) in std::fs::read_dir(&moved).expect("ls").enumerate() {
            let from = entry.expect("entry").path();
            std::fs::copy(&from, scene.images.join(format!("renamed-{i}.png"))).expect("copy");
        }
        settle_images(&scene.images);
        let out = run(&quick_args, &[]);
        assert!(out.status.success() && text(&out).contains("nothing new since run"), "{}", text(&out));
    }

    #[test]
    fn a_deployed_model_changed_behind_the_runs_back_is_never_replaced() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        let out = run(&args, &[("HEADROOM_FIELD_KILL_AT", "deploy")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        // The service was given another model meanwhile.
        let other = repo_root().join("models/demo/teacher-shapes-160.onnx");
        std::fs::copy(&other, &scene.deployed).expect("replace");
        // The old run is set aside (never continued, never deployed); a fresh run starts from the
        // new model, and what it deploys was trained from that model.
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("replaced since"), "{}", text(&out));
        let history = work(&scene).join("history");
        let names: Vec<String> = std::fs::read_dir(&history)
            .expect("history")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        assert!(names.len() == 1 && names[0].ends_with("-superseded"), "{names:?}");
        let state: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(work(&scene).join("run/state.json")).expect("state"),
        )
        .expect("state json");
        assert_eq!(state["base_sha256"], sha(&other), "the fresh run starts from the new model");
        assert_eq!(sha(&scene.root.join("app/model.onnx.prev")), sha(&other), "the new model is .prev");
    }

    /// The service's own updater moves its model in (an atomic `mv`) while the deploy is under way,
    /// after `.prev` was written (the deploy killed there, then the `mv`): the interrupted run is
    /// superseded, never deploying over the updater's model, which a fresh run trains from and keeps
    /// as `.prev` (the updater's model was gone, neither deployed file nor `.prev`, 2 of 2 tries).
    #[test]
    fn an_updaters_model_moved_in_during_the_deploy_is_kept() {
        let scene = scene();
        let args = field_args(&scene, &scene.always);
        let out = run(&args, &[("HEADROOM_FIELD_KILL_AT", "deploy-swap")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        assert_eq!(sha(&scene.root.join("app/model.onnx.prev")), scene.original, ".prev was written");
        let theirs = scene.root.join("app/incoming.onnx");
        std::fs::copy(repo_root().join("models/demo/teacher-shapes-160.onnx"), &theirs).expect("copy");
        let updated = sha(&theirs);
        std::fs::rename(&theirs, &scene.deployed).expect("the updater's mv");
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("replaced since"), "{}", text(&out));
        // The interrupted run is set aside as superseded; a fresh run trains from the updater's model,
        // and its deploy keeps that model as `.prev`.
        let history: Vec<String> = std::fs::read_dir(work(&scene).join("history"))
            .expect("history")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        assert!(history.len() == 1 && history[0].ends_with("-superseded"), "{history:?}");
        assert_eq!(sha(&scene.root.join("app/model.onnx.prev")), updated, "the updater's model is .prev");
        assert_ne!(sha(&scene.deployed), scene.original);
    }

    #[test]
    fn a_deployed_model_on_another_filesystem_is_replaced_whole() {
        // /dev/shm is a tmpfs; the state folder stays on the temporary folder's filesystem.
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            eprintln!("no /dev/shm here: the case is covered where it exists (Linux CI)");
            return;
        }
        let scene = scene();
        let app = tempfile::tempdir_in(shm).expect("a folder in /dev/shm");
        let deployed = app.path().join("model.onnx");
        std::fs::copy(demo_model(), &deployed).expect("copy");
        let mut args = field_args(&scene, &scene.always);
        let at = args.iter().position(|a| a == "--model").expect("--model");
        args[at + 1] = s(&deployed).to_string();
        args.extend(["--work".into(), s(&scene.root.join("work")).to_string()]);
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        let candidate = sha(&scene.root.join("work/run/export/best.fp16.onnx"));
        assert_eq!(sha(&deployed), candidate);
        assert_eq!(sha(&app.path().join("model.onnx.prev")), scene.original);
    }

    #[test]
    fn bad_input_is_a_clear_error_before_anything_runs() {
        let scene = scene();
        let base = field_args(&scene, &scene.always);
        let with = |flag: &str, value: &str| {
            let mut a = base.clone();
            let at = a.iter().position(|x| x == flag).expect("flag");
            a[at + 1] = value.to_string();
            a
        };
        let wrong_classes = repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160.onnx");
        let no_labels = scene.root.join("nolabels");
        synth(&no_labels, "field", 14, 1, 3);
        std::fs::remove_dir_all(no_labels.join("labels")).expect("remove labels");
        let not_onnx = scene.root.join("not.onnx");
        std::fs::write(&not_onnx, b"not a model").expect("write");
        let cases: Vec<(Vec<String>, &str)> = vec![
            (with("--preset", "nope"), "built in: field-accurate, field-quick"),
            (with("--teacher", s(&wrong_classes)), "would train the wrong classes"),
            (with("--teacher", s(&not_onnx)), "not.onnx"),
            (with("--model", s(&scene.root.join("app/missing.onnx"))), "missing.onnx: no such file"),
            (
                with("--holdout", s(&no_labels.join("data.yaml"))),
                "no image of its val split has a label file",
            ),
            (with("--holdout", s(&scene.root.join("nowhere.yaml"))), "nowhere.yaml: no such file"),
            // A setting a step would refuse: refused before any work.
            ([base.clone(), vec!["--train".into(), "bogus".into()]].concat(), "'bogus' for '--train <PART>'"),
        ];
        for (args, expected) in cases {
            let out = run(&args, &[]);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
            assert!(text(&out).contains(expected), "{args:?}: expected `{expected}` in {}", text(&out));
            assert_eq!(sha(&scene.deployed), scene.original);
            assert!(!scene.root.join("app/model.onnx.prev").exists());
        }
        assert!(!work(&scene).exists(), "nothing written before the checks passed");
        // A run left with other flags is not continued: set aside whole, and a new run goes on.
        let epochs = [base.clone(), vec!["--epochs".into(), "2".into()]].concat();
        let out = run(&epochs, &[("HEADROOM_FIELD_KILL_AT", "train")]);
        assert_eq!(out.status.signal(), Some(9), "{}", text(&out));
        let out = run(&base, &[]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("was started with other settings"), "{}", text(&out));
        let history = work(&scene).join("history");
        let names: Vec<String> = std::fs::read_dir(&history)
            .expect("history")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        assert!(names.len() == 1 && names[0].ends_with("-abandoned"), "{names:?}");

        // Precision: a precision that does not exist; a gate of two files of other precisions; a
        // deployed INT8 file whose FP32 source this loop never saw.
        let out = run(&[base.clone(), vec!["--deploy".into(), "int4".into()]].concat(), &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("one of fp32, fp16, int8"), "{}", text(&out));
        let exports = scene.root.join("exports");
        let export = headroom(&[
            "-q",
            "export",
            "--model",
            s(&demo_model()),
            "--fp16",
            "--int8",
            "--calib",
            s(&scene.images),
            "--out",
            s(&exports),
        ]);
        assert!(export.status.success(), "{}", text(&export));
        let (fp16, int8) =
            (exports.join("yolov8n-shapes-160.fp16.onnx"), exports.join("yolov8n-shapes-160.int8.onnx"));
        let gate = headroom(&[
            "field",
            "gate",
            "--candidate",
            s(&fp16),
            "--model",
            s(&demo_model()),
            "--holdout",
            s(&scene.holdout),
        ]);
        assert_eq!(gate.status.code(), Some(2), "{}", text(&gate));
        assert!(
            text(&gate)
                .contains("--candidate is fp16, --model fp32: the gate compares files of one precision"),
            "{}",
            text(&gate)
        );
        std::fs::copy(&int8, &scene.deployed).expect("an INT8 file deployed by hand");
        add_frame(&scene, 41); // not a quiet night
        let out = run(&base, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let where_to = format!("deployed/{}.fp32.onnx", sha(&int8));
        assert!(
            text(&out).contains("is an INT8 export that this loop did not deploy")
                && text(&out).contains(&where_to),
            "{}",
            text(&out)
        );
        assert_eq!(sha(&scene.deployed), sha(&int8), "nothing deployed");
    }

    #[test]
    fn install_service_writes_the_units_with_this_binary_and_checks_the_flags() {
        let dir = tempfile::tempdir().expect("tempdir");
        let units = dir.path().join("units");
        let env = dir.path().join("etc/field.env");
        let mut args: Vec<String> =
            ["field", "install-service", "--unit-dir", s(&units), "--env-file", s(&env), "--"]
                .iter()
                .map(|a| a.to_string())
                .collect();
        let d = dir.path().display().to_string();
        for file in ["opt/t.onnx", "opt/m.onnx", "data/h.yaml", "data/my holdout.yaml"] {
            std::fs::create_dir_all(dir.path().join(file).parent().expect("parent")).expect("mkdir");
            std::fs::write(dir.path().join(file), b"").expect("touch");
        }
        std::fs::create_dir_all(dir.path().join("data/new")).expect("mkdir");
        args.extend([
            "--images".into(),
            format!("{d}/data/new"),
            "--teacher".into(),
            format!("{d}/opt/t.onnx"),
            "--model".into(),
            format!("{d}/opt/m.onnx"),
            "--holdout".into(),
            format!("{d}/data/h.yaml"),
        ]);
        let out = run(&args, &[]);
        assert!(out.status.success(), "{}", text(&out));
        let service = std::fs::read_to_string(units.join("headroom-field.service")).expect("service");
        let exe = env!("CARGO_BIN_EXE_headroom");
        assert!(service.contains(&format!("ExecStart={exe} field run $HEADROOM_FIELD_ARGS")), "{service}");
        assert!(service.contains(&format!("EnvironmentFile={}", env.display())), "{service}");
        let timer = std::fs::read_to_string(units.join("headroom-field.timer")).expect("timer");
        assert!(timer.contains("OnCalendar=*-*-* 02:00:00"), "{timer}");
        let env_text = std::fs::read_to_string(&env).expect("env file");
        assert!(
            env_text
                .contains(&format!("HEADROOM_FIELD_ARGS=\"--images {d}/data/new --teacher {d}/opt/t.onnx")),
            "{env_text}"
        );

        let mut bad = args.clone();
        bad.push("--bogus".into());
        let out = run(&bad, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("--bogus"), "{}", text(&out));
        let mut spaced = args.clone();
        spaced[args.len() - 1] = format!("{d}/data/my holdout.yaml");
        let out = run(&spaced, &[]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("my holdout.yaml"), "{}", text(&out));
    }
}
