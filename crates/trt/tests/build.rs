//! `build_engine` against a stand-in `trtexec` (a shell script printing what TensorRT 10.3's prints
//! and writing `--saveEngine`), and without any: the error carries the command to run on a device.

#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use headroom_trt::{EngineRequest, Error, Precision, Shapes, build_engine_with, trtexec_args};

/// One test at a time: a script being written while another test forks can fail to exec with
/// "text file busy" (the child holds the write descriptor until it execs).
static SERIAL: Mutex<()> = Mutex::new(());

fn fake_trtexec(dir: &Path, body: &str) -> PathBuf {
    let path = dir.join("trtexec");
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

fn request(dir: &Path) -> EngineRequest {
    EngineRequest {
        onnx: dir.join("best.fp16.onnx"),
        precision: Precision::Fp16,
        workspace_bytes: Some(512 << 20),
        timing_cache: None,
        shapes: Shapes::Static,
        out: dir.join("best.fp16.orin-nano-8.trt10.3.engine"),
    }
}

/// Writes "plan" to the `--saveEngine=` argument, prints trtexec's banner and device.
const WRITES_ENGINE: &str = r#"for a in "$@"; do case "$a" in --saveEngine=*) printf plan > "${a#--saveEngine=}";; esac; done
echo "&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec $*"
echo "[I] Selected Device: Orin"
echo "&&&& PASSED""#;

#[test]
fn a_successful_build_moves_the_plan_into_place_and_reports_version_and_gpu() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let trtexec = fake_trtexec(dir.path(), WRITES_ENGINE);
    let r = request(dir.path());
    let built = build_engine_with(&r, Some(&trtexec)).expect("builds");
    assert_eq!(std::fs::read(&r.out).expect("engine"), b"plan");
    assert_eq!(built.version.map(|v| v.to_string()), Some("10.3.0".into()));
    assert_eq!(built.gpu.as_deref(), Some("Orin"));
    assert!(built.log.contains("--memPoolSize=workspace:512M"), "{}", built.log);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").filter_map(|e| e.ok()).collect();
    assert_eq!(leftovers.len(), 2, "only trtexec and the engine: {leftovers:?}");
}

#[test]
fn a_failed_build_leaves_no_engine_and_shows_the_log_tail() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let r = request(dir.path());
    let failing = fake_trtexec(dir.path(), "echo '[E] Error[4]: network has dynamic input'; exit 1");
    let e = build_engine_with(&r, Some(&failing)).expect_err("fails").to_string();
    assert!(
        e.contains("exit status: 1") && e.contains("dynamic input") && e.contains("--saveEngine="),
        "{e}"
    );
    assert!(!r.out.exists());
    let silent = fake_trtexec(dir.path(), "exit 0");
    let e = build_engine_with(&r, Some(&silent)).expect_err("no engine").to_string();
    assert!(e.contains("no engine written"), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1, "only the stand-in is left");
}

#[test]
fn without_trtexec_the_error_is_the_command_to_run_on_the_device() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().expect("temp dir");
    let mut r = request(dir.path());
    r.precision = Precision::Int8Cache { cache: dir.path().join("best.int8.calib") };
    let e = build_engine_with(&r, None).expect_err("not found");
    let Error::TrtexecNotFound { command } = &e else { panic!("{e}") };
    let expected = format!("/usr/src/tensorrt/bin/trtexec {}", trtexec_args(&r).join(" "));
    assert_eq!(command, &expected);
    assert!(command.contains("--int8 --fp16 --calib=") && command.ends_with("--skipInference"), "{command}");
    let message = e.to_string();
    assert!(message.contains("trtexec not found") && message.contains(&expected), "{message}");
}
