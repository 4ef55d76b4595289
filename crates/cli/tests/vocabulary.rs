//! One vocabulary across the verbs (issue 21): `--device` says where the work runs (cpu, cuda,
//! cuda:N, auto) in every verb that runs something, `--board` names the memory preset; a board given
//! to `--device` is refused in one line; plan starts from train's defaults; `--budget auto` off the
//! named board warns; `--device-id` is deprecated.

// Without the native libraries only the parsing tests run.
#![cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(unused_imports, dead_code))]

mod common;

use std::path::Path;
use std::process::Output;

use common::{demo_model, headroom, headroom_command, output_text, repo_root, s, synth_field};

/// `headroom ARGS` with these variables (a kill point among them: the faulty binary).
fn headroom_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = if env.iter().any(|(k, _)| *k == common::KILL_AT) {
        common::faulty_command()
    } else {
        headroom_command()
    };
    command.args(args);
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the headroom binary runs")
}

// Every verb (`field` included) and the providers need the native libraries.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
#[test]
fn a_board_given_to_device_is_refused_in_one_line_naming_board() {
    let model = demo_model();
    let verbs: [&[&str]; 6] = [
        &["train", "--model", s(&model), "--data", "d.yaml", "--device", "orin-nano-4"],
        &["plan", "--model", s(&model), "--device", "orin-nano-4"],
        &["label", "--teacher", s(&model), "--images", ".", "--out", "o", "--device", "orin-nano-4"],
        &["eval", "--model", s(&model), "--data", "d.yaml", "--device", "orin-nano-4"],
        &["export", "--model", s(&model), "--fp16", "--device", "orin-nano-4"],
        &[
            "field",
            "run",
            "--images",
            ".",
            "--teacher",
            "t",
            "--model",
            "m",
            "--holdout",
            "h",
            "--device",
            "orin-nano-4",
        ],
    ];
    let want = "`--device` says where the work runs (cpu, cuda, cuda:N, auto); orin-nano-4 is a board: use --board orin-nano-4";
    for args in verbs {
        let run = headroom(args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(want)).collect();
        assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
        assert!(lines[0].starts_with("error:"), "{args:?}: {stderr}");
    }
    // The field loop's service checks its flags when it is installed.
    let dir = tempfile::tempdir().expect("tmp");
    let run = headroom(&[
        "field",
        "install-service",
        "--unit-dir",
        s(dir.path()),
        "--env-file",
        s(&dir.path().join("field.env")),
        "--",
        "--images",
        "/data/new",
        "--teacher",
        "/t.onnx",
        "--model",
        "/m.onnx",
        "--holdout",
        "/h.yaml",
        "--device",
        "orin-nx-8",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains("use --board orin-nx-8"), "{stderr}");
    // An unknown word says both.
    let run = headroom(&["plan", "--model", s(&model), "--device", "gpu"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("(cpu, cuda, cuda:N, auto), not `gpu`") && stderr.contains("--board"),
        "{stderr}"
    );
}

// Every verb (`field` included) and the providers need the native libraries.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
#[test]
fn device_cuda_n_is_parsed() {
    let model = demo_model();
    // plan: counted on GPU 1 of a discrete board.
    let run = headroom(&["plan", "--model", s(&model), "--device", "cuda:1", "--board", "gpu-8", "--json"]);
    assert_eq!(run.status.code(), Some(0), "{}", output_text(&run));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!((json["device"].as_str(), json["board"]["name"].as_str()), (Some("cuda:1"), Some("gpu-8")));
    // label: the GPU of the CUDA provider, which disagrees with a CPU-only provider list.
    let dir = tempfile::tempdir().expect("tmp");
    let run = headroom(&[
        "label",
        "--teacher",
        s(&model),
        "--images",
        s(dir.path()),
        "--out",
        s(&dir.path().join("o")),
        "--device",
        "cuda:1",
        "--ep",
        "cpu",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains("--device cuda:1 with --ep cpu"), "{stderr}");
    // `--device cpu` with a GPU provider is as clear.
    let run = headroom(&[
        "label",
        "--teacher",
        s(&model),
        "--images",
        s(dir.path()),
        "--out",
        s(&dir.path().join("o")),
        "--device",
        "cpu",
        "--ep",
        "cuda",
    ]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains("--device cpu with --ep cuda"), "{stderr}");
    let run = headroom(&["plan", "--model", s(&model), "--device", "cuda:x"]);
    assert!(String::from_utf8_lossy(&run.stderr).contains("cuda:N takes a device number"));
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use super::*;

    /// A one-epoch CPU training run of the demo model on `data` with `extra` flags; its folder.
    fn train(data: &Path, project: &Path, name: &str, extra: &[&str]) -> std::path::PathBuf {
        let model = demo_model();
        let mut args = vec![
            "train",
            "--model",
            s(&model),
            "--data",
            s(data),
            "--epochs",
            "1",
            "--threads",
            "2",
            "--project",
            s(project),
            "--name",
            name,
        ];
        args.extend_from_slice(extra);
        let run = headroom(&args);
        assert!(run.status.success(), "{args:?}: {}", output_text(&run));
        project.join(name)
    }

    #[test]
    fn every_verb_runs_with_device_cpu() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = synth_field(dir.path(), 4, 2);
        let model = demo_model();
        let run_dir = train(&data, &dir.path().join("runs"), "cpu", &["--device", "cpu"]);
        let config = std::fs::read_to_string(run_dir.join("config.toml")).expect("config");
        assert!(config.contains("device = \"cpu\""), "{config}");
        let images = dir.path().join("data/images/val");
        let runs: [Vec<&str>; 4] = [
            vec![
                "label",
                "--teacher",
                s(&model),
                "--images",
                s(&images),
                "--out",
                "LABELLED",
                "--device",
                "cpu",
            ],
            vec!["eval", "--model", s(&model), "--data", s(&data), "--device", "cpu"],
            vec!["plan", "--model", s(&model), "--board", "x86-cpu", "--device", "cpu"],
            vec!["export", "--model", s(&model), "--fp16", "--out", "EXPORT", "--device", "cpu"],
        ];
        let labelled = dir.path().join("labelled");
        let export = dir.path().join("export");
        for args in runs {
            let args: Vec<&str> = args
                .iter()
                .map(|a| match *a {
                    "LABELLED" => s(&labelled),
                    "EXPORT" => s(&export),
                    other => other,
                })
                .collect();
            let run = headroom(&args);
            assert!(run.status.success(), "{args:?}: {}", output_text(&run));
        }
        // `--device-id` still works, deprecated.
        let run = headroom(&[
            "label",
            "--teacher",
            s(&model),
            "--images",
            s(&images),
            "--out",
            s(&labelled),
            "--ep",
            "cpu",
            "--device-id",
            "0",
        ]);
        let text = output_text(&run);
        assert!(run.status.success(), "{text}");
        assert!(
            text.contains("WARN") && text.contains("--device-id is deprecated: use --device cuda:0"),
            "{text}"
        );
        let run = headroom(&[
            "eval",
            "--model",
            s(&model),
            "--data",
            s(&data),
            "--device",
            "cpu",
            "--device-id",
            "1",
        ]);
        let text = output_text(&run);
        assert!(run.status.code() == Some(2) && text.contains("give --device cuda:1 alone"), "{text}");
        // `--help` no longer shows it.
        let help = headroom(&["label", "--help"]);
        assert!(!String::from_utf8_lossy(&help.stdout).contains("--device-id"));
    }

    #[test]
    fn plan_starts_from_the_run_train_makes_by_default() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = synth_field(dir.path(), 4, 2);
        let model = demo_model();
        let run = headroom(&["plan", "--model", s(&model), "--board", "x86-cpu", "--json"]);
        assert!(run.status.success(), "{}", output_text(&run));
        let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
        let first = &json["plan"]["candidates"][0];
        assert_eq!(first["rung"], "start");
        let setup = &first["estimate"]["setup"];
        let run_dir = train(&data, &dir.path().join("runs"), "defaults", &[]);
        let config: toml::Value =
            toml::from_str(&std::fs::read_to_string(run_dir.join("config.toml")).expect("config"))
                .expect("toml");
        let settings = &config["settings"];
        let lower = |v: &serde_json::Value| v.as_str().map(str::to_lowercase);
        // `{"Freeze": 0}` in the plan is `freeze=0` in config.toml (everything trains).
        let part = match setup["trainable"].get("Freeze") {
            Some(n) => Some(format!("freeze={n}")),
            None => lower(&setup["trainable"]),
        };
        assert_eq!(part.as_deref(), config["part"].as_str(), "{setup} {config}");
        assert_eq!(config["part"].as_str(), Some("freeze=0"));
        assert_eq!(setup["batch"].as_i64(), settings["batch"].as_integer());
        // Augmentation (train's default) rules out the cache rung; the nominal batch does not
        // change memory (train sizes it to the data: --nbs auto).
        let augment = &settings["augment"];
        assert!(
            augment["mosaic"].as_float() > Some(0.0) && augment["hsv_v"].as_float() > Some(0.0),
            "{config}"
        );
        assert_eq!(setup["augment"].as_bool(), Some(true));
        assert_eq!(setup["checkpoint"].as_bool(), settings["checkpoint"].as_bool());
        assert_eq!(setup["amp"].as_bool(), settings["amp"].as_bool());
        assert_eq!(setup["imgsz"][0].as_i64(), settings["imgsz"][0].as_integer());
        assert_eq!(lower(&setup["optimizer"]), settings["optimizer"].as_str().map(str::to_lowercase));
        assert_eq!((lower(&setup["trunk"]).as_deref(), config["trunk"].as_str()), (Some("ort"), Some("ort")));
        // The table's command for the first rung is train's defaults, spelled out.
        let run = headroom(&["plan", "--model", s(&model), "--board", "x86-cpu"]);
        let stdout = String::from_utf8_lossy(&run.stdout);
        assert!(stdout.contains("--train all --batch 2 --imgsz 160\n"), "{stdout}");
    }

    #[test]
    fn board_names_the_preset_in_train_and_the_field_loop() {
        let dir = tempfile::tempdir().expect("tmp");
        let data = synth_field(dir.path(), 4, 2);
        let run_dir =
            train(&data, &dir.path().join("runs"), "board", &["--board", "orin-nano-4", "--device", "cpu"]);
        let config = std::fs::read_to_string(run_dir.join("config.toml")).expect("config");
        assert!(config.contains("device = \"cpu\"") && config.contains("name = \"orin-nano-4\""), "{config}");
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run_dir.join("results.json")).expect("results"))
                .expect("json");
        assert_eq!(results["planner"]["device"], "orin-nano-4", "{results}");
        // The field loop hands --device and --board to its children and keeps both in its state;
        // killed in training, once its request is written.
        let teacher = repo_root().join("models/demo/teacher-shapes-160.onnx");
        let deployed = dir.path().join("app/model.onnx");
        std::fs::create_dir_all(dir.path().join("app")).expect("mkdir");
        std::fs::copy(demo_model(), &deployed).expect("copy");
        let images = dir.path().join("data/images/train");
        crate::common::settle_images(&images);
        let run = headroom_env(
            &[
                "field",
                "run",
                "--images",
                s(&images),
                "--teacher",
                s(&teacher),
                "--model",
                s(&deployed),
                "--holdout",
                s(&data),
                "--threads",
                "2",
                "--device",
                "cpu",
                "--board",
                "orin-nx-8",
            ],
            &[("HEADROOM_FIELD_KILL_AT", "train:mid"), ("PATH", "")],
        );
        let text = output_text(&run);
        assert!(text.contains("HEADROOM_FIELD_KILL_AT=train:mid"), "{text}");
        let label: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                dir.path().join("app/.headroom-field/model.onnx/run/label.request.json"),
            )
            .expect("the label step's request"),
        )
        .expect("json");
        assert_eq!(label["step"]["label"]["session"]["device"], "cpu", "{label}");
        let state = std::fs::read_to_string(dir.path().join("app/.headroom-field/model.onnx/run/state.json"))
            .expect("state");
        let state: serde_json::Value = serde_json::from_str(&state).expect("json");
        assert_eq!(state["settings"]["board"], "orin-nx-8");
        assert_eq!(state["settings"]["runs_on"], "cpu");
        let request: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(
                dir.path().join("app/.headroom-field/model.onnx/run/train.request.json"),
            )
            .expect("the training's request"),
        )
        .expect("json");
        let request = &request["step"]["train"]["run"]["new"]["request"];
        assert_eq!(
            (request["board"]["name"].as_str(), request["device"].as_str()),
            (Some("orin-nx-8"), Some("cpu"))
        );
        let config =
            std::fs::read_to_string(dir.path().join("app/.headroom-field/model.onnx/run/train/config.toml"))
                .expect("the training's settings");
        assert!(config.contains("device = \"cpu\"") && config.contains("name = \"orin-nx-8\""), "{config}");
    }
}

#[test]
fn budget_auto_off_the_named_board_warns_that_the_plan_is_for_this_machine() {
    // Which machine this is, as the binary reads it (the library's tests give it other boards).
    let system = headroom_plan::System::host();
    let devices = headroom_plan::builtin_devices().expect("the built-in boards");
    let nano = headroom_plan::find_device(&devices, "orin-nano-4").expect("a built-in board");
    let model = demo_model();
    let args = ["plan", "--model", s(&model), "--board", "orin-nano-4", "--budget", "auto"];
    let run = headroom(&args);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    if system.other_machine(nano, None).is_none() {
        assert!(!stderr.contains("the plan is for this machine"), "this is an Orin Nano 4GB: {stderr}");
        return;
    }
    assert!(
        stderr.contains("WARN")
            && stderr.contains("--budget auto: reading this machine's free memory (")
            && stderr.contains("which is not a Jetson Orin Nano 4GB")
            && stderr.contains("the plan is for this machine"),
        "{stderr}"
    );
    // With --board auto the plan is for this machine, whatever it is: no warning.
    let run = headroom(&["plan", "--model", s(&model), "--board", "auto", "--budget", "auto"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success() && !stderr.contains("the plan is for this machine"), "{stderr}");
}
