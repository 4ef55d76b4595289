//! `headroom plan`: the fit ladder from the graph, against device budgets; bad input refused with
//! what to do.

mod common;

use common::{demo_model, headroom, repo_root, s};

fn dynamic_model() -> std::path::PathBuf {
    repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx")
}

#[test]
fn yolov8n_at_640_on_orin_nano_4_gets_a_fitting_configuration() {
    let model = dynamic_model();
    let chart = tempfile::tempdir().expect("tmp");
    let png = chart.path().join("plan.png");
    let run = headroom(&[
        "plan",
        "--model",
        s(&model),
        "--board",
        "orin-nano-4",
        "--imgsz",
        "640",
        "--chart",
        s(&png),
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(run.status.code(), Some(0), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("<- chosen") && stdout.contains("train with: headroom train"), "{stdout}");
    assert!(std::fs::metadata(&png).expect("chart written").len() > 1000);
    let run = headroom(&["plan", "--model", s(&model), "--board", "orin-nano-4", "--imgsz", "640", "--json"]);
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    let plan = &json["plan"];
    let chosen = plan["chosen"].as_u64().expect("chosen") as usize;
    let candidate = &plan["candidates"][chosen];
    assert!(candidate["fits"].as_bool().expect("fits"));
    assert!(candidate["estimate"]["peak"].as_u64() <= plan["budget"].as_u64());
    assert_eq!(candidate["estimate"]["setup"]["imgsz"][0], 640);
}

#[test]
fn a_64_mib_budget_is_refused_with_the_least_that_would_fit() {
    let run = headroom(&["plan", "--model", s(&demo_model()), "--board", "orin-nano-4", "--budget", "64MiB"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("alone need") && stderr.contains("the least budget that fits a rung"),
        "{stderr}"
    );
}

#[test]
fn bad_input_says_what_is_wrong() {
    let demo = demo_model();
    let cases: [(&[&str], &str); 6] = [
        (&["--board", "jetson-tx1"], "known devices: orin-agx-64"),
        (&["--board", "orin-nano-4", "--imgsz", "320"], "fixed at 160x160"),
        (&["--board", "orin-nano-4", "--budget", "lots"], "not a size"),
        (&["--board", "orin-nano-4", "--train", "backbone"], "'backbone' for '--train <PART>'"),
        (&["--board", "orin-nano-4", "--reserve", "3 furlongs"], "unknown unit"),
        (&["--board", "orin-nano-4", "--batch", "0"], "--batch 0"),
    ];
    for (extra, want) in cases {
        let mut args = vec!["plan", "--model", s(&demo)];
        args.extend_from_slice(extra);
        let run = headroom(&args);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
    }
    let dir = tempfile::tempdir().expect("tmp");
    let junk = dir.path().join("junk.onnx");
    std::fs::write(&junk, b"not a model").expect("write");
    let run = headroom(&["plan", "--model", s(&junk), "--board", "orin-nano-4"]);
    assert_eq!(run.status.code(), Some(2));
    // Not a detector: nothing to split for training.
    let neg = repo_root().join("tests/fixtures/onnx_node/test_neg/model.onnx");
    let run = headroom(&["plan", "--model", s(&neg), "--board", "orin-nano-4"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains("error:"), "{stderr}");
    let dynamic = dynamic_model();
    let run = headroom(&["plan", "--model", s(&dynamic), "--board", "orin-nano-4", "--imgsz", "300"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains("multiple of the largest stride"), "{stderr}");
}

#[test]
fn budget_auto_reads_what_is_free_and_reserve_takes_off_it() {
    let run = headroom(&[
        "plan",
        "--model",
        s(&demo_model()),
        "--board",
        "x86-cpu",
        "--budget",
        "auto",
        "--reserve",
        "1GiB",
        "--json",
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    let source = json["budget_source"].as_str().expect("source");
    assert!(source.contains("MemAvailable") && source.contains("--reserve 1.00 GiB"), "{source}");
}

/// `headroom plan ARGS`.
fn plan_cmd(args: &[&str]) -> std::process::Output {
    common::headroom_command().arg("plan").args(args).output().expect("the headroom binary runs")
}

const MY_BOARD: &str = "[[device]]\nname = \"myboard\"\ndescription = \"Acme Vision carrier, 6 GB\"\n\
    memory_gib = 6.0\nreserve_gib = 1.5\nruntime_mib = 145.0\nmodels = [\"Acme Vision\"]\n";

#[test]
fn a_device_file_adds_a_board_for_board_name() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = dir.path().join("devices.toml");
    std::fs::write(&file, MY_BOARD).expect("write");
    let demo = demo_model();
    let run = plan_cmd(&["--model", s(&demo), "--board", "myboard", "--devices", s(&file), "--json"]);
    assert_eq!(run.status.code(), Some(0), "{}", String::from_utf8_lossy(&run.stderr));
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(json["board"]["name"], "myboard");
    assert_eq!(json["plan"]["budget"].as_u64(), Some(9 << 29));
    // Without the file the name is unknown (`auto` finding it by its model string: the plan
    // library's tests, which give it a board of their own).
    let run = plan_cmd(&["--model", s(&demo), "--board", "myboard"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains("known devices: orin-agx-64"), "{stderr}");
    // A bad file is named.
    std::fs::write(&file, "[[device]]\nname = \"x\"\nmemory = \"lots\"\n").expect("write");
    let run = plan_cmd(&["--model", s(&demo), "--board", "x", "--devices", s(&file)]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.code() == Some(2) && stderr.contains(s(&file)), "{stderr}");
}

#[test]
fn board_auto_in_the_binary_is_the_librarys_detection_of_this_machine() {
    // The binary reads this machine only; the library's tests give `System` other boards (a Nano
    // by model and memory, a board of a device file, no device tree, nothing readable).
    let demo = demo_model();
    let run = plan_cmd(&["--model", s(&demo), "--board", "auto", "--json"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    let found = headroom_plan::System::host().detect(None);
    let Ok(found) = found else {
        assert!(run.status.code() == Some(2) && stderr.contains("give --board NAME"), "{stderr}");
        return;
    };
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
    assert_eq!(json["board"]["name"], found.preset.name.as_str());
    assert_eq!(json["board"]["gpu"], found.preset.gpu);
    assert!(stderr.contains(&found.reason), "{stderr}");
    if !found.known {
        // An unknown board (this x86 machine): a budget from the measured memory, with a warning
        // saying what to do.
        assert!(stderr.contains("WARN") && stderr.contains("--devices FILE"), "{stderr}");
        assert_eq!(json["plan"]["budget"].as_u64(), Some(found.preset.budget_bytes()));
    }
}

#[test]
fn the_ladder_starts_from_train_defaults_and_counts_a_teacher() {
    let demo = demo_model();
    let teacher = repo_root().join("models/demo/teacher-shapes-160.onnx");
    let plan = |extra: &[&str]| -> serde_json::Value {
        let mut args =
            vec!["plan", "--model", s(&demo), "--board", "orin-nano-4", "--budget", "1MiB", "--json"];
        args.extend_from_slice(extra);
        let run = headroom(&args);
        // Nothing fits 1 MiB: every rung is listed, and the exit status says so.
        assert_eq!(run.status.code(), Some(1), "{extra:?}: {}", String::from_utf8_lossy(&run.stderr));
        serde_json::from_slice(&run.stdout).expect("json")
    };
    let rungs = |json: &serde_json::Value| -> Vec<String> {
        let candidates = json["plan"]["candidates"].as_array().expect("candidates");
        candidates.iter().map(|c| c["rung"].as_str().unwrap_or_default().to_string()).collect()
    };
    let peak =
        |json: &serde_json::Value| json["plan"]["candidates"][0]["estimate"]["peak"].as_u64().expect("peak");
    // headroom train's defaults: everything trains, with augmentation (so no cache rung).
    let defaults = plan(&[]);
    let first = &defaults["plan"]["candidates"][0]["estimate"]["setup"];
    assert_eq!(first["trainable"], serde_json::json!({ "Freeze": 0 }), "{first}");
    let names = rungs(&defaults);
    assert!(names.contains(&"train head".to_string()) && !names.contains(&"cache".to_string()), "{names:?}");
    assert!(rungs(&plan(&["--no-augment"])).contains(&"cache".to_string()));
    // The teacher: its weights (once on libtorch: nothing is frozen) and outputs on top.
    let taught = plan(&["--teacher", s(&teacher)]);
    assert!(!rungs(&taught).contains(&"cache".to_string()));
    let c = &taught["plan"]["candidates"][0]["estimate"]["components"];
    assert!(c["teacher"].as_u64().expect("teacher") > 11 << 20, "{c}");
    assert!(peak(&taught) > peak(&defaults) + (11 << 20), "{} vs {}", peak(&taught), peak(&defaults));
    // A teacher that is not a model is named.
    let dir = tempfile::tempdir().expect("tmp");
    let junk = dir.path().join("t.onnx");
    std::fs::write(&junk, b"no model").expect("write");
    let run = headroom(&["plan", "--model", s(&demo), "--board", "orin-nano-4", "--teacher", s(&junk)]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.code() == Some(2) && stderr.contains("--teacher") && stderr.contains("t.onnx"),
        "{stderr}"
    );
}
