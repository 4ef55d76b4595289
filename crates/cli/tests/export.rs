//! `headroom export` through the real binary: the FP16 file is half the size and keeps mAP50-95
//! within 0.01; the INT8 Q/DQ file and the TensorRT calibration cache are written, ONNX Runtime runs
//! the Q/DQ file and it keeps mAP50-95 within 2 points on a synthetic val split; `--sensitivity`
//! keeps Convs float until the drop is met; every fixture family exports both and runs; engines are
//! built through a stand-in trtexec, and without one the command for the device is printed; bad
//! input (no or empty calibration folder, dynamic model without --imgsz, a model without a Detect
//! head, existing outputs) gets a clear error. An export holds a lock on its stem in --out,
//! publishes its files as a whole (a kill between two renames is completed by the next export), and
//! SIGTERM publishes nothing and exits 143.

mod common;

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use crate::common::{demo_model, headroom, repo_root, s};

    fn report(stdout: &[u8]) -> serde_json::Value {
        serde_json::from_slice::<serde_json::Value>(stdout).expect("json report")
    }

    fn rows(stdout: &[u8]) -> Vec<serde_json::Value> {
        report(stdout)["files"].as_array().expect("files").clone()
    }

    fn stderr(output: &std::process::Output) -> String {
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// A synthetic dataset (base preset) with `train` and `val` images; returns its data.yaml.
    fn synth(dir: &std::path::Path, train: &str, val: &str) -> std::path::PathBuf {
        let data = dir.join("data");
        let run = headroom(&[
            "-q",
            "synth",
            "--preset",
            "base",
            "--seed",
            "3",
            "--train",
            train,
            "--val",
            val,
            "--out",
            s(&data),
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        data.join("data.yaml")
    }

    #[test]
    fn fp16_keeps_the_demo_models_map_at_half_the_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("val");
        let synth = headroom(&[
            "-q",
            "synth",
            "--preset",
            "base",
            "--seed",
            "2",
            "--train",
            "1",
            "--val",
            "24",
            "--out",
            s(&data),
        ]);
        assert!(synth.status.success(), "{}", String::from_utf8_lossy(&synth.stderr));
        let model = demo_model();
        let out = dir.path().join("out");
        let args =
            ["-q", "export", "--model", s(&model), "--fp16", "--out", s(&out), "--threads", "1", "--json"];
        let run = headroom(&[&args[..], &["--data", s(&data.join("data.yaml"))]].concat());
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        let report = rows(&run.stdout);
        let (fp32, fp16) = (&report[0], &report[1]);
        let size = |r: &serde_json::Value| r["bytes"].as_f64().expect("bytes");
        assert!(size(fp16) < 0.55 * size(fp32), "{report:?}");
        let map = |r: &serde_json::Value| r["map50_95"].as_f64().expect("map");
        assert!(map(fp32) > 0.3 && (map(fp16) - map(fp32)).abs() < 0.01, "{report:?}");
        assert!(out.join("yolov8n-shapes-160.fp16.onnx").exists());

        let again = headroom(&args);
        assert_eq!(again.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&again.stderr).contains("add --force"),
            "{}",
            String::from_utf8_lossy(&again.stderr)
        );
        let forced = headroom(&[&args[..], &["--force"]].concat());
        assert!(forced.status.success(), "{}", String::from_utf8_lossy(&forced.stderr));
        let nothing = headroom(&["export", "--model", s(&model)]);
        assert!(String::from_utf8_lossy(&nothing.stderr).contains("nothing to export"));
    }

    #[test]
    fn int8_writes_qdq_and_a_calibration_cache_and_keeps_the_demo_models_map() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path(), "40", "32");
        let model = demo_model();
        let out = dir.path().join("out");
        let args = [
            "-q",
            "export",
            "--model",
            s(&model),
            "--int8",
            "--calib",
            s(&data),
            "--data",
            s(&data),
            "--out",
            s(&out),
            "--threads",
            "1",
            "--json",
        ];
        let run = headroom(&args);
        assert!(run.status.success(), "{}", stderr(&run));
        let json = report(&run.stdout);
        let files = json["files"].as_array().expect("files");
        let (fp32, int8) = (&files[0], &files[1]);
        assert_eq!(int8["precision"], "int8");
        let size = |r: &serde_json::Value| r["bytes"].as_f64().expect("bytes");
        assert!(size(int8) < 0.3 * size(fp32), "int8 weights take a quarter: {files:?}");
        let map = |r: &serde_json::Value| r["map50_95"].as_f64().expect("map");
        assert!(map(fp32) > 0.3 && map(fp32) - map(int8) < 0.02, "{files:?}");
        let summary = &json["int8"];
        // --method auto (the default): each candidate's INT8 output error against FP32 on
        // calibration images, and the smallest one's method kept.
        let errors = summary["method_errors"].as_array().expect("auto's errors");
        let named: Vec<(&str, f64)> =
            errors.iter().map(|e| (e[0].as_str().expect("method"), e[1].as_f64().expect("error"))).collect();
        let names: Vec<&str> = named.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["minmax", "percentile-99.99", "entropy"], "{summary}");
        assert!(named.iter().all(|(_, e)| e.is_finite() && *e > 0.0), "{summary}");
        let best = named.iter().min_by(|a, b| a.1.total_cmp(&b.1)).expect("a candidate").0;
        assert_eq!(summary["method"], best, "{summary}");
        assert_eq!(summary["calibration_images"], 40);
        assert_eq!(summary["quantized_convs"], 63, "every YOLOv8n Conv but DFL's");
        // Fewer than 32 images warn; 40 do not.
        assert!(!stderr(&run).contains("calibration images in"), "{}", stderr(&run));

        let cache = std::fs::read_to_string(out.join("yolov8n-shapes-160.int8.calib")).expect("cache");
        let (version, entries) = headroom_onnx::calib_cache::read_cache(&cache).expect("a valid cache");
        assert_eq!(version, 100300);
        assert!(entries.len() > 100, "{} tensors", entries.len());
        let images = entries.iter().find(|(n, _)| n == "images").expect("the input has a range");
        let amax = headroom_onnx::calib_cache::amax_of(images.1);
        assert!((amax - 1.0).abs() < 1e-6, "pixels / 255 keep their whole range: {amax}");
        assert!(!entries.iter().any(|(n, _)| n == "output0"), "the decode is not in the cache");

        let again = headroom(&args);
        assert_eq!(again.status.code(), Some(2));
        assert!(stderr(&again).contains("add --force"), "{}", stderr(&again));
    }

    /// `--qat`: the post-training file, a fine-tuning run with fake quantization, and an INT8 file of
    /// the fine-tuned weights at the post-training file's activation scales.
    #[cfg(feature = "libtorch")]
    #[test]
    fn qat_fine_tunes_and_writes_the_int8_file_at_the_scales_it_trained_with() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path(), "8", "4");
        let model = demo_model();
        let out = dir.path().join("out");
        let args = [
            "-q",
            "export",
            "--model",
            s(&model),
            "--int8",
            "--calib",
            s(&data),
            "--qat",
            s(&data),
            "--qat-epochs",
            "1",
            "--data",
            s(&data),
            "--out",
            s(&out),
            "--threads",
            "2",
            "--json",
        ];
        let run = headroom(&args);
        assert!(run.status.success(), "{}", stderr(&run));
        let work = out.join("yolov8n-shapes-160.qat");
        let ptq = work.join("ptq/yolov8n-shapes-160.int8.onnx");
        let tuned = work.join("yolov8n-shapes-160.onnx");
        let config = std::fs::read_to_string(work.join("train/config.toml")).expect("the fine-tuning run");
        assert!(config.contains("qat = ") && config.contains("part = \"freeze=0\""), "{config}");
        assert_ne!(
            std::fs::read(&tuned).expect("tuned"),
            std::fs::read(&model).expect("model"),
            "the weights moved"
        );
        let scales = |path: &std::path::Path| {
            let bytes = std::fs::read(path).expect("read");
            let proto = headroom_onnx::model::decode(&bytes, path).expect("onnx");
            headroom_onnx::quant::dequantize::activation_scales(&proto, path).expect("scales")
        };
        let (before, after) = (scales(&ptq), scales(&out.join("yolov8n-shapes-160.int8.onnx")));
        assert_eq!(before.len(), 63, "every YOLOv8n Conv but DFL's");
        assert_eq!(before, after, "the INT8 file keeps the scales it trained with");
        let files = rows(&run.stdout);
        assert_eq!(files[0]["path"].as_str().map(std::path::PathBuf::from), Some(tuned), "{files:?}");
        // The method auto chose for the post-training file is kept, not chosen again.
        let summary = &report(&run.stdout)["int8"];
        assert!(summary["method_errors"].as_array().is_some_and(Vec::is_empty), "{summary}");
        let method = summary["method"].as_str().expect("method");
        assert!(["minmax", "percentile-99.99", "entropy"].contains(&method), "{summary}");
        // Without --int8 it is refused by the flags; with a missing data.yaml, by name.
        let alone = headroom(&["export", "--model", s(&model), "--fp16", "--qat", s(&data)]);
        assert_eq!(alone.status.code(), Some(2), "{}", stderr(&alone));
        let missing = dir.path().join("missing.yaml");
        let run = headroom(&[
            "-q",
            "export",
            "--model",
            s(&model),
            "--int8",
            "--calib",
            s(&data),
            "--qat",
            s(&missing),
            "--out",
            s(&out),
            "--force",
        ]);
        assert_eq!(run.status.code(), Some(2), "{}", stderr(&run));
        assert!(stderr(&run).contains("missing.yaml: no such file"), "{}", stderr(&run));
    }

    #[test]
    fn sensitivity_keeps_convs_float_until_the_drop_is_met() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path(), "24", "24");
        let model = demo_model();
        let out = dir.path().join("out");
        // --max-drop 0 with entropy (the method that loses most here): the search must go on until
        // no drop is left, which all-float guarantees.
        let run = headroom(&[
            "-q",
            "export",
            "--model",
            s(&model),
            "--int8",
            "--calib",
            s(&data),
            "--data",
            s(&data),
            "--out",
            s(&out),
            "--method",
            "entropy",
            "--sensitivity",
            "--max-drop",
            "0",
            "--threads",
            "1",
            "--json",
        ]);
        assert!(run.status.success(), "{}", stderr(&run));
        let json = report(&run.stdout);
        let steps = json["int8"]["sensitivity"].as_array().expect("steps");
        let fp32 = json["files"][0]["map50_95"].as_f64().expect("fp32 map");
        let last = steps.last().expect("a step");
        assert!(steps.len() >= 2, "{steps:?}");
        assert!(last["map50_95"].as_f64().expect("map") >= fp32 - 1e-9, "{steps:?} vs {fp32}");
        let float = json["int8"]["float_convs"].as_array().expect("float convs").len();
        assert_eq!(float, last["float_convs"].as_u64().expect("count") as usize);
        assert_eq!(json["int8"]["quantized_convs"].as_u64(), Some(63 - float as u64));
        assert!(String::from_utf8_lossy(&run.stderr).contains("only 24 calibration images"));
        let without =
            headroom(&["export", "--model", s(&model), "--int8", "--calib", s(&data), "--sensitivity"]);
        assert_eq!(without.status.code(), Some(2), "--sensitivity needs --data");
    }

    #[test]
    fn every_fixture_family_exports_to_int8_and_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path(), "4", "1");
        let images = data.parent().expect("dir").join("images/train");
        let fixtures = repo_root().join("tests/fixtures/onnx");
        let mut count = 0;
        for entry in std::fs::read_dir(&fixtures).expect("fixtures").flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "onnx") {
                continue;
            }
            let name = path.file_name().and_then(|n| n.to_str()).expect("name").to_string();
            let mut args = vec![
                "-q",
                "export",
                "--model",
                s(&path),
                "--int8",
                "--fp16",
                "--calib",
                s(&images),
                "--out",
                s(dir.path()),
                "--threads",
                "1",
                "--json",
            ];
            if name.contains("dynamic") {
                let refused = headroom(&args);
                assert_eq!(refused.status.code(), Some(2), "{name}: dynamic without --imgsz");
                assert!(stderr(&refused).contains("--imgsz"), "{}", stderr(&refused));
                args.extend(["--imgsz", "160"]);
            }
            let run = headroom(&args);
            assert!(run.status.success(), "{name}: {}", stderr(&run));
            let files = rows(&run.stdout);
            assert_eq!(files.len(), 3, "{name}");
            assert!(files[2]["ms_per_image"].as_f64().is_some(), "{name}: ONNX Runtime ran the Q/DQ file");
            let stem = name.trim_end_matches(".onnx");
            assert!(dir.path().join(format!("{stem}.int8.calib")).is_file(), "{name}");
            assert!(stderr(&run).contains("only 4 calibration images"), "{name}: warns about few images");
            count += 1;
        }
        assert!(count >= 5, "{count} fixtures");
    }

    #[test]
    fn bad_calibration_input_gets_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let model = demo_model();
        let out = dir.path().join("out");
        let base = ["export", "--model", s(&model), "--int8", "--out", s(&out)];
        let no_calib = headroom(&base);
        assert!(stderr(&no_calib).contains("--calib"), "{}", stderr(&no_calib));
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        std::fs::write(empty.join("notes.txt"), "not an image").expect("write");
        let run = headroom(&[&base[..], &["--calib", s(&empty)]].concat());
        assert_eq!(run.status.code(), Some(2));
        assert!(stderr(&run).contains("no images for --calib in this folder"), "{}", stderr(&run));
        let missing = headroom(&[&base[..], &["--calib", s(&dir.path().join("nope"))]].concat());
        assert!(stderr(&missing).contains("no such folder"), "{}", stderr(&missing));
        let broken = dir.path().join("broken");
        std::fs::create_dir_all(&broken).expect("mkdir");
        std::fs::write(broken.join("a.jpg"), b"\xff\xd8 not really").expect("write");
        let run = headroom(&[&base[..], &["--calib", s(&broken)]].concat());
        assert_eq!(run.status.code(), Some(2));
        assert!(stderr(&run).contains("a.jpg"), "names the unreadable image: {}", stderr(&run));
        assert!(!out.join("yolov8n-shapes-160.int8.onnx").exists(), "nothing half-written");
        // A model without a Detect head: the trunk of the demo model, cut out of it.
        let demo = headroom_onnx::Model::load(&model).expect("demo model");
        let trunk =
            headroom_onnx::extract::extract(&demo, &["/model.9/cv2/act/Mul_output_0".into()]).expect("cut");
        let headless = dir.path().join("trunk.onnx");
        std::fs::write(&headless, trunk).expect("write");
        let run = headroom(&["export", "--model", s(&headless), "--fp16", "--out", s(&out)]);
        assert_eq!(run.status.code(), Some(2));
        assert!(stderr(&run).contains("trunk.onnx"), "{}", stderr(&run));
    }

    #[cfg(unix)]
    #[test]
    fn engines_are_built_through_trtexec_or_the_command_is_printed() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let model = demo_model();
        let out = dir.path().join("out");
        let args = [
            "-q",
            "export",
            "--model",
            s(&model),
            "--fp16",
            "--out",
            s(&out),
            "--engine",
            "--board",
            "orin-nano-8",
        ];
        // No trtexec anywhere: the ONNX files are written, the command for the device printed, exit 1.
        let none = headroom_command_env(&args, &[("PATH", "/usr/bin:/bin"), ("TRTEXEC", "")]);
        assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
        assert!(stderr(&none).contains("On the device, run:"), "{}", stderr(&none));
        assert!(stderr(&none).contains("/usr/src/tensorrt/bin/trtexec --onnx="), "{}", stderr(&none));
        assert!(out.join("yolov8n-shapes-160.fp16.onnx").is_file());
        // A stand-in trtexec that writes the plan and prints what TensorRT 10.3 prints.
        let fake = dir.path().join("trtexec");
        std::fs::write(
            &fake,
            "#!/bin/sh\necho \"$@\" >> \"$(dirname \"$0\")/args.txt\"\nfor a in \"$@\"; do case \"$a\" in --saveEngine=*) printf plan > \"${a#--saveEngine=}\";; esac; done\n\
             echo '[TensorRT v100300] [b30] # trtexec'\necho '[I] Selected Device: Orin'\n",
        )
        .expect("write");
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let built = headroom(&[&args[..], &["--force", "--trtexec", s(&fake)]].concat());
        assert!(built.status.success(), "{}", stderr(&built));
        let engine = out.join("yolov8n-shapes-160.fp16.orin-nano-8.trt10.3.engine");
        assert_eq!(std::fs::read(&engine).expect("engine"), b"plan");
        let sidecar: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(format!("{}.json", engine.display())).expect("sidecar"),
        )
        .expect("json");
        assert_eq!(sidecar["gpu"], "Orin");
        assert_eq!(sidecar["tensorrt"], "10.3.0");
        assert_eq!(sidecar["precision"], "fp16");
        assert_eq!(sidecar["classes"].as_array().map(Vec::len), Some(3));
        // orin-nano-8: 8 GiB less its 2.5 GiB reserve, halved = 2816 MiB of builder workspace.
        let seen = std::fs::read_to_string(dir.path().join("args.txt")).expect("trtexec's arguments");
        assert!(seen.contains("--fp16") && seen.contains("--memPoolSize=workspace:2816M"), "{seen}");
        assert!(seen.contains("--timingCacheFile="), "{seen}");
    }

    fn headroom_command_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut command = crate::common::headroom_command();
        for (k, v) in env {
            if v.is_empty() {
                command.env_remove(k);
            } else {
                command.env(k, v);
            }
        }
        command.args(args).output().expect("runs")
    }

    #[test]
    fn every_fixture_family_exports_to_fp16_and_runs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fixtures = repo_root().join("tests/fixtures/onnx");
        let mut count = 0;
        for entry in std::fs::read_dir(&fixtures).expect("fixtures").flatten() {
            let path = entry.path();
            if path.extension().is_none_or(|e| e != "onnx") {
                continue;
            }
            let run = headroom(&[
                "-q",
                "export",
                "--model",
                s(&path),
                "--fp16",
                "--out",
                s(dir.path()),
                "--threads",
                "1",
                "--json",
            ]);
            assert!(run.status.success(), "{}: {}", path.display(), String::from_utf8_lossy(&run.stderr));
            let report = rows(&run.stdout);
            assert!(report[1]["ms_per_image"].as_f64().is_some(), "{}: ONNX Runtime ran it", path.display());
            count += 1;
        }
        assert!(count >= 5, "{count} fixtures");
    }

    /// Every file in `dir` but the hidden lock files (what an export leaves for a reader).
    fn visible_files(dir: &std::path::Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !n.ends_with(".lock"))
            .collect();
        names.sort();
        names
    }

    /// Regression: two exports to one --out interleaved their files.
    #[test]
    fn regression_a_second_export_of_a_stem_to_one_out_is_refused_and_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).expect("mkdir");
        let held = headroom_core::fsio::OutputLock::acquire_named(
            &out,
            ".yolov8n-shapes-160.export.lock",
            "the export of `yolov8n-shapes-160` here",
            "headroom export",
        )
        .expect("lock");
        let model = demo_model();
        let args = ["export", "--model", s(&model), "--fp16", "--out", s(&out), "--threads", "1"];
        let refused = headroom(&args);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        let pid = format!("pid {}", std::process::id());
        let said = stderr(&refused);
        assert!(
            said.contains("another headroom run is writing the export of `yolov8n-shapes-160` here")
                && said.contains(&pid)
                && said.contains("headroom export"),
            "{said}"
        );
        assert_eq!(visible_files(&out), Vec::<String>::new(), "nothing written");
        drop(held);
        let run = headroom(&args);
        assert!(run.status.success(), "{}", stderr(&run));
        assert_eq!(visible_files(&out), ["yolov8n-shapes-160.fp16.onnx"]);
    }

    fn sha(path: &std::path::Path) -> String {
        use sha2::Digest as _;
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sha2::Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Regression: an export killed between its renames left model B's `.fp16.onnx` beside model
    /// A's `.int8.onnx` and `.int8.calib`, and nothing ever repaired it.
    #[cfg(unix)]
    #[test]
    fn regression_an_export_killed_between_its_renames_is_completed_by_the_next_export() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path(), "4", "1");
        let images = data.parent().expect("dir").join("images/train");
        // Two different models of one name: A (the demo student) and B (the teacher).
        let (a, b) = (dir.path().join("a/m.onnx"), dir.path().join("b/m.onnx"));
        for (model, source) in [(&a, "yolov8n-shapes-160.onnx"), (&b, "teacher-shapes-160.onnx")] {
            std::fs::create_dir_all(model.parent().expect("dir")).expect("mkdir");
            std::fs::copy(repo_root().join("models/demo").join(source), model).expect("copy");
        }
        let export = |model: &std::path::Path, out: &std::path::Path, more: &[&str]| {
            let mut args = vec![
                "-q",
                "export",
                "--model",
                s(model),
                "--fp16",
                "--int8",
                "--calib",
                s(&images),
                "--out",
                s(out),
                "--threads",
                "1",
            ];
            args.extend(more);
            headroom(&args)
        };
        let files = ["m.fp16.onnx", "m.int8.calib", "m.int8.onnx"];
        let (out, reference) = (dir.path().join("out"), dir.path().join("reference"));
        let clean = export(&b, &reference, &[]);
        assert!(clean.status.success(), "{}", stderr(&clean));
        let first = export(&a, &out, &[]);
        assert!(first.status.success(), "{}", stderr(&first));
        let of_a: Vec<String> = files.iter().map(|f| sha(&out.join(f))).collect();
        let of_b: Vec<String> = files.iter().map(|f| sha(&reference.join(f))).collect();
        assert!(of_a.iter().zip(&of_b).all(|(x, y)| x != y), "A and B differ in every file");

        // B dies after its first rename (the fp16 file): the folder holds a mix for now. The
        // library's export of B, its observer ending it there as a kill would: the unwinding
        // leaves the journal and the temporaries, as a SIGKILL does.
        struct KilledAfterFirstRename;
        impl headroom_export::Observer for KilledAfterFirstRename {
            fn published(&self, renamed: usize) {
                if renamed == 1 {
                    panic!("killed after the first rename");
                }
            }
        }
        let request = headroom_export::ExportRequest {
            model: b.clone(),
            fp16: true,
            int8: Some(headroom_export::Int8Settings {
                calib: images.clone(),
                calib_images: 128,
                settle: std::time::Duration::ZERO,
                method: headroom_export::Calibration::auto(99.99),
                sensitivity: None,
                scales_from: None,
            }),
            imgsz: None,
            trt_version: "10.3.0".parse().expect("a TensorRT version"),
            engine: None,
            session: headroom_infer::provider::SessionRequest::cpu(1).options().expect("cpu session"),
            out: Some(out.clone()),
            data: None,
            force: true,
        };
        let killed = std::panic::catch_unwind(|| headroom_export::export(&request, &KilledAfterFirstRename));
        assert!(killed.is_err(), "the export ended at its first rename");
        assert_eq!(sha(&out.join("m.fp16.onnx")), of_b[0], "B's fp16 file renamed");
        assert_eq!(sha(&out.join("m.int8.onnx")), of_a[2], "A's int8 file still there");
        assert!(out.join(".m.export.journal").is_file(), "the journal says what is left to do");

        // The next export to that folder, even one that then fails (the files exist, no --force),
        // completes B's publication first.
        let next = export(&b, &out, &[]);
        assert_eq!(next.status.code(), Some(2), "{}", stderr(&next));
        assert!(stderr(&next).contains("add --force"), "{}", stderr(&next));
        let now: Vec<String> = files.iter().map(|f| sha(&out.join(f))).collect();
        assert_eq!(now, of_b, "every file is B's");
        assert_eq!(visible_files(&out), files, "no journal, no temporary left");
    }

    /// Regression: SIGTERM during an export ended it where it stood; now it stops at the next step,
    /// removes what it wrote and exits 143.
    #[cfg(unix)]
    #[test]
    fn regression_sigterm_during_calibration_publishes_nothing_and_exits_143() {
        use std::io::BufRead as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth(dir.path(), "400", "1");
        let images = data.parent().expect("dir").join("images/train");
        let out = dir.path().join("out");
        let mut child = crate::common::headroom_command()
            .args([
                "export",
                "--model",
                s(&demo_model()),
                "--fp16",
                "--int8",
                "--calib",
                s(&images),
                "--out",
                s(&out),
                "--threads",
                "1",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
        let mut said = String::new();
        // The fp16 file is written (unpublished) just before calibration starts.
        for line in lines.by_ref() {
            let line = line.expect("stderr line");
            said.push_str(&line);
            said.push('\n');
            if line.contains("nodes in fp16") {
                break;
            }
        }
        let term = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        assert!(term.is_ok_and(|s| s.success()), "kill -TERM");
        for line in lines {
            said.push_str(&line.expect("stderr line"));
            said.push('\n');
        }
        let status = child.wait().expect("wait");
        assert_eq!(status.code(), Some(143), "{said}");
        assert!(said.contains("stopped by SIGTERM: nothing published"), "{said}");
        let left: Vec<String> = std::fs::read_dir(&out)
            .expect("list")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, [".yolov8n-shapes-160.export.lock"], "no output, no temporary, no journal");
    }
}
