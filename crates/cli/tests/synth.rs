//! `headroom synth` through the real binary.

use std::path::Path;

mod common;
use common::headroom;

fn count_files(dir: &Path, extension: &str) -> usize {
    std::fs::read_dir(dir)
        .expect("folder exists")
        .filter(|e| e.as_ref().expect("entry").path().extension().is_some_and(|x| x == extension))
        .count()
}

#[test]
fn writes_a_dataset_ultralytics_can_read() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("shapes");
    let out_text = out.to_str().expect("utf-8 path");
    let args = ["synth", "--out", out_text, "--preset", "field", "--seed", "3", "--train", "6", "--val", "3"];
    let run = headroom(&[&args[..], &["--size", "96x64"]].concat());
    assert!(run.status.success(), "stderr: {}", String::from_utf8_lossy(&run.stderr));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("wrote 6 train + 3 val images (96x64, preset field, seed 3)"), "{stdout}");

    for split in ["train", "val"] {
        let expected = if split == "train" { 6 } else { 3 };
        assert_eq!(count_files(&out.join("images").join(split), "png"), expected, "{split}");
        assert_eq!(count_files(&out.join("labels").join(split), "txt"), expected, "{split}");
    }
    let image = image::open(out.join("images/val/000002.png")).expect("png decodes");
    assert_eq!((image.width(), image.height()), (96, 64));

    let yaml = std::fs::read_to_string(out.join("data.yaml")).expect("data.yaml");
    let canonical = std::fs::canonicalize(&out).expect("canonical");
    assert!(yaml.contains(&format!("path: {}", canonical.display())), "{yaml}");
    for line in ["train: images/train", "val: images/val", "names:\n- circle\n- square\n- triangle"] {
        assert!(yaml.contains(line), "`{line}` missing from\n{yaml}");
    }
    let manifest = std::fs::read_to_string(out.join("synth.json")).expect("synth.json");
    assert!(manifest.contains("\"preset\": \"field\"") && manifest.contains("\"seed\": 3"), "{manifest}");

    // Same settings: overwrites, same bytes. Other settings: refused with a clear error.
    let before = std::fs::read(out.join("images/train/000004.png")).expect("read");
    let again = headroom(&[&args[..], &["--size", "96x64", "--json"]].concat());
    assert!(again.status.success(), "stderr: {}", String::from_utf8_lossy(&again.stderr));
    let json: serde_json::Value = serde_json::from_slice(&again.stdout).expect("--json prints JSON");
    assert_eq!(json["images"], 9);
    assert_eq!(std::fs::read(out.join("images/train/000004.png")).expect("read"), before);
    let other = headroom(&["synth", "--out", out_text, "--seed", "4"]);
    assert_eq!(other.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(stderr.contains("made with other settings"), "{stderr}");
}

#[test]
fn refuses_a_folder_with_a_foreign_data_yaml() {
    let tmp = tempfile::tempdir().expect("tempdir");
    std::fs::write(tmp.path().join("data.yaml"), "path: .\nnames: [cat]\n").expect("write");
    let run =
        headroom(&["synth", "--out", tmp.path().to_str().expect("utf-8"), "--train", "1", "--val", "1"]);
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("data.yaml: was not written by headroom synth"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("data.yaml")).expect("read"),
        "path: .\nnames: [cat]\n"
    );
}

#[test]
fn a_bad_size_is_a_clear_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("never");
    for (size, says) in [("256by192", "is not WIDTHxHEIGHT"), ("8x8", "must be an integer in 32..=8192")] {
        let run = headroom(&["synth", "--out", out.to_str().expect("utf-8"), "--size", size]);
        assert_eq!(run.status.code(), Some(2), "{size}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains("--size") && stderr.contains(says), "{size}: {stderr}");
    }
    assert!(!out.exists());
}
