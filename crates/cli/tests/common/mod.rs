//! Shared by the CLI tests: running the real `headroom` binary.

use std::path::PathBuf;
use std::process::{Command, Output};

/// A command for the `headroom` binary under test. Under the aarch64 cross test (docs/CROSS.md)
/// the binary runs through `HEADROOM_TEST_RUNNER` (qemu), since the kernel cannot execute it.
pub fn headroom_command() -> Command {
    command_of(std::path::Path::new(env!("CARGO_BIN_EXE_headroom")))
}

/// The variable of the faulty binary's kill point ([`faulty_command`]).
#[allow(dead_code)]
pub const KILL_AT: &str = "HEADROOM_FIELD_KILL_AT";

/// A command for the `headroom` binary with kill points (crates/cli/examples/faulty.rs: `KILL_AT`
/// names where it SIGKILLs itself), which `cargo test` builds beside this test's folder.
#[allow(dead_code)]
pub fn faulty_command() -> Command {
    let exe = std::env::current_exe().expect("this test's path");
    let profile = exe.parent().and_then(std::path::Path::parent).expect("target/<profile>/deps/<test>");
    let bin = profile.join("examples/faulty");
    assert!(
        bin.is_file(),
        "{}: not built; `cargo test` builds it, or `cargo build -p headroom-cli --example faulty`",
        bin.display()
    );
    command_of(&bin)
}

/// `bin` as a command, through `HEADROOM_TEST_RUNNER` when it is set.
fn command_of(bin: &std::path::Path) -> Command {
    match std::env::var_os("HEADROOM_TEST_RUNNER") {
        Some(runner) if !runner.is_empty() => {
            let mut command = Command::new(runner);
            command.arg(bin);
            command
        }
        _ => Command::new(bin),
    }
}

/// Runs `headroom` with `args` and returns its output.
pub fn headroom(args: &[&str]) -> Output {
    headroom_command().args(args).output().expect("the headroom binary runs")
}

/// Everything a command printed, stdout then stderr (for assertion messages and searches).
#[allow(dead_code)]
pub fn output_text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// The repository root.
#[allow(dead_code)]
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shipped demo model (YOLOv8n, 3 classes, 160 px).
#[allow(dead_code)]
pub fn demo_model() -> PathBuf {
    repo_root().join("models/demo/yolov8n-shapes-160.onnx")
}

/// A path as a command-line argument (test paths are UTF-8).
#[allow(dead_code)]
pub fn s(path: &std::path::Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A synthetic `field` dataset (seed 3) of `train` + `val` images under `dir/data`; its data.yaml.
#[allow(dead_code)]
pub fn synth_field(dir: &std::path::Path, train: usize, val: usize) -> PathBuf {
    let out = dir.join("data");
    let (train, val) = (train.to_string(), val.to_string());
    let run = headroom(&[
        "-q",
        "synth",
        "--preset",
        "field",
        "--seed",
        "3",
        "--train",
        &train,
        "--val",
        &val,
        "--out",
        s(&out),
    ]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    out.join("data.yaml")
}

/// Dates every file under `folder` a minute back, so that a step with a settle time (`field run`
/// passes `--settle 2` to label and export) does not leave images a test just wrote for later.
#[allow(dead_code)]
pub fn settle_images(folder: &std::path::Path) {
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let mut stack = vec![folder.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read folder").flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file() {
                let file = std::fs::File::options().write(true).open(&path).expect("open");
                file.set_modified(minute_ago).expect("set modification time");
            }
        }
    }
}

/// `metrics.csv` rows of a run (header skipped), split into columns.
#[allow(dead_code)]
pub fn metrics_rows(dir: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("metrics.csv")).unwrap_or_default();
    text.lines().skip(1).map(|l| l.split(',').map(str::to_string).collect()).collect()
}

/// The `columns` of every row as in `expected`, to float noise (1e-5 relative): what a resumed
/// run must end with against the uninterrupted one.
#[allow(dead_code)]
pub fn assert_same_columns(rows: &[Vec<String>], expected: &[Vec<String>], columns: &[usize]) {
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for (a, b) in rows.iter().zip(expected) {
        for &column in columns {
            let (x, y) = (a[column].parse::<f64>().expect("num"), b[column].parse::<f64>().expect("num"));
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "epoch {} column {column}: {x} vs {y}", a[0]);
        }
    }
}

/// A short training run (`--nbs 2`, one thread) of the demo model on `data` into `project/name`;
/// `quiet` puts `-q` before the verb, `extra` flags go after it.
#[allow(dead_code)]
pub fn short_train(
    data: &std::path::Path,
    project: &std::path::Path,
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

/// `headroom field` scenes: a deployed demo model, new images, a holdout and old scenes.
pub mod field {
    #![allow(dead_code)]

    use std::path::{Path, PathBuf};
    use std::process::Output;

    use super::{demo_model, headroom, headroom_command, repo_root, s};

    /// SHA-256 of a file, as lowercase hex.
    pub fn sha(path: &Path) -> String {
        use sha2::Digest as _;
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    /// `headroom synth --preset PRESET` into `out`; its data.yaml.
    pub fn synth(out: &Path, preset: &str, seed: u64, train: usize, val: usize) -> PathBuf {
        let (seed, train, val) = (seed.to_string(), train.to_string(), val.to_string());
        let run = headroom(&[
            "-q",
            "synth",
            "--preset",
            preset,
            "--seed",
            &seed,
            "--train",
            &train,
            "--val",
            &val,
            "--out",
            s(out),
        ]);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        out.join("data.yaml")
    }

    /// A field scene in a temporary folder.
    pub struct Scene {
        /// Removed when the scene is dropped.
        pub _dir: tempfile::TempDir,
        /// The temporary folder.
        pub root: PathBuf,
        /// The new images (20 `field` images).
        pub images: PathBuf,
        /// The holdout data.yaml (12 val images).
        pub holdout: PathBuf,
        /// The old scenes' data.yaml.
        pub old: PathBuf,
        /// `app/model.onnx`, a copy of the demo model.
        pub deployed: PathBuf,
        /// Its sha256.
        pub original: String,
        /// A preset of 1 head-only epoch whose gate deploys any candidate.
        pub always: PathBuf,
    }

    /// A new scene.
    pub fn scene() -> Scene {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        synth(&root.join("new"), "field", 11, 20, 1);
        super::settle_images(&root.join("new/images"));
        let holdout = synth(&root.join("holdout"), "field", 12, 1, 12);
        let old = synth(&root.join("old"), "base", 13, 8, 8);
        std::fs::create_dir_all(root.join("app")).expect("mkdir");
        let deployed = root.join("app/model.onnx");
        std::fs::copy(demo_model(), &deployed).expect("copy the demo model");
        // A gate that deploys any candidate: the kill test is about the steps, not the decision.
        let always = root.join("always.toml");
        std::fs::write(
            &always,
            "epochs = 1\ntrain = \"head\"\n[gate]\nmin_gain = -100\nold_tolerance = 100\nclass_tolerance = 100\nresamples = 50\n",
        )
        .expect("write preset");
        let original = sha(&deployed);
        Scene {
            images: root.join("new/images/train"),
            holdout,
            old,
            deployed,
            original,
            always,
            root,
            _dir: dir,
        }
    }

    /// A new frame in the scene's images (a `field` image of another seed, settled): what a camera
    /// adds between two nights. Its path.
    pub fn add_frame(scene: &Scene, seed: u64) -> PathBuf {
        let out = scene.root.join(format!("frame-{seed}"));
        synth(&out, "field", seed, 1, 1);
        let made = std::fs::read_dir(out.join("images/train"))
            .expect("the synthesized frame")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .next()
            .expect("one image");
        let extension = made.extension().and_then(|e| e.to_str()).unwrap_or("png").to_string();
        let frame = scene.images.join(format!("camera-{seed}.{extension}"));
        std::fs::copy(&made, &frame).expect("copy the frame");
        let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let file = std::fs::File::options().write(true).open(&frame).expect("open the frame");
        file.set_modified(minute_ago).expect("settle the frame");
        frame
    }

    /// `field run` on the scene with this preset and 2 threads.
    pub fn field_args(scene: &Scene, preset: &Path) -> Vec<String> {
        let teacher = repo_root().join("models/demo/teacher-shapes-160.onnx");
        [
            "field",
            "run",
            "--images",
            s(&scene.images),
            "--teacher",
            s(&teacher),
            "--model",
            s(&scene.deployed),
            "--holdout",
            s(&scene.holdout),
            "--old",
            s(&scene.old),
            "--preset",
            s(preset),
            "--threads",
            "2",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect()
    }

    /// Runs `headroom ARGS` with no Python reachable (an empty PATH) and these variables; with a
    /// kill point among them, the faulty binary ([`super::faulty_command`]).
    pub fn run(args: &[String], env: &[(&str, &str)]) -> Output {
        let mut command = if env.iter().any(|(k, _)| *k == super::KILL_AT) {
            super::faulty_command()
        } else {
            headroom_command()
        };
        command.args(args).env("PATH", "").env_remove(super::KILL_AT).env_remove("TRTEXEC");
        for (k, v) in env {
            command.env(k, v);
        }
        command.output().expect("headroom runs")
    }

    /// The scene's default state folder.
    pub fn work(scene: &Scene) -> PathBuf {
        scene.root.join("app/.headroom-field/model.onnx")
    }
}
