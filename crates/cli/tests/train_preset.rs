//! `headroom train --preset NAME|FILE`: a run preset sets the flags the command line did not give
//! (`plan = "auto"` plans the run as `--plan auto` does); a preset that distils needs --teacher; an
//! unknown preset names the built-in ones.

mod common;

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod with_libraries {
    use crate::common::{demo_model, headroom, output_text as text, s, synth_field};

    #[test]
    fn a_preset_sets_what_the_command_line_left_unset() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = synth_field(dir.path(), 6, 2);
        let preset = dir.path().join("mine.toml");
        let keys = "epochs = 1\ntrain = \"neck+head\"\nnbs = 2\naugment = true\ndistill = true\ndense_kd = 2.5\n\
                    optimizer = \"adamw\"\nlr0 = 0.003\nplan = \"auto\"\n";
        std::fs::write(&preset, keys).expect("write");
        let project = dir.path().join("runs");
        let out = headroom(&[
            "-q",
            "train",
            "--model",
            s(&demo_model()),
            "--data",
            s(&data),
            "--preset",
            s(&preset),
            "--teacher",
            s(&demo_model()),
            "--epochs",
            "2",
            "--project",
            s(&project),
            "--name",
            "p",
            "--threads",
            "1",
        ]);
        assert!(out.status.success(), "{}", text(&out));
        let config = std::fs::read_to_string(project.join("p/config.toml")).expect("config.toml");
        for line in [
            "part = \"neck+head\"",
            "epochs = 2",
            "nbs = 2",
            "mosaic = 1.0",
            "scale = 0.5",
            "hsv_s = 0.7",
            "dense_kd = 2.5",
            "optimizer = \"adamw\"",
            "lr0 = 0.003",
        ] {
            assert!(config.lines().any(|l| l.trim() == line), "`{line}` in {config}");
        }
        // `plan = "auto"`: the run was planned for this machine's budget, as `--plan auto` plans it.
        assert!(config.lines().any(|l| l.trim() == "[plan]"), "a planned run: {config}");
        assert!(config.contains("rung = "), "the rung the plan chose: {config}");
    }

    #[test]
    fn bad_presets_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data.yaml");
        let model = demo_model();
        let base = ["train", "--model", s(&model), "--data", s(&data), "--preset"];
        let out = headroom(&[&base[..], &["field-accurate"]].concat());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("give --teacher"), "{}", text(&out));
        let out = headroom(&[&base[..], &["nope"]].concat());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("built in: field-accurate, field-quick"), "{}", text(&out));
        let bad = dir.path().join("bad.toml");
        std::fs::write(&bad, "epochs = 1\nepoch = 3\n").expect("write");
        let out = headroom(&[&base[..], &[s(&bad)]].concat());
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(text(&out).contains("bad.toml") && text(&out).contains("epoch"), "{}", text(&out));
    }
}
