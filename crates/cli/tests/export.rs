//! `headroom export --fp16` through the real binary: the FP16 file is half the size, ONNX Runtime
//! runs it, its mAP50-95 equals the FP32 file's within 0.01 on a synthetic val split, every fixture
//! family exports and runs, and an existing output is not replaced without `--force`.

mod common;

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use crate::common::{demo_model, headroom, repo_root, s};

    fn rows(stdout: &[u8]) -> Vec<serde_json::Value> {
        serde_json::from_slice::<Vec<serde_json::Value>>(stdout).expect("json report")
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
}
