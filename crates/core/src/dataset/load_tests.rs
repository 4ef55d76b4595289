use super::*;
use crate::dataset::verify::tests::write_image;
use crate::{ImageProblem, LabelProblem};

/// A dataset with one image per kind of problem; returns the data.yaml path.
fn problem_dataset(d: &Path) -> PathBuf {
    let good = "0 0.5 0.5 0.2 0.2\n1 0.25 0.25 0.1 0.1\n";
    let cases: [(&str, Option<&str>); 9] = [
        ("good.png", Some(good)),
        ("no_label.png", None),
        ("empty_label.png", Some("\n")),
        ("fields.png", Some("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2\n")),
        ("not_number.png", Some("0 0.5 abc 0.2 0.2\n")),
        ("class.png", Some("0 0.5 0.5 0.2 0.2\n\n2 0.5 0.5 0.2 0.2\n")),
        ("outside.png", Some("1 1.5 0.5 0.2 0.2\n")),
        ("duplicate.png", Some("0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n")),
        ("jpeg_trailing.jpg", Some(good)),
    ];
    for (name, label) in cases {
        let image = d.join("images/train").join(name);
        write_image(&image, 32, 24);
        if let Some(text) = label {
            std::fs::create_dir_all(d.join("labels/train")).expect("mkdir");
            std::fs::write(label_path_for(&image), text).expect("write label");
        }
    }
    let jpeg = d.join("images/train/jpeg_trailing.jpg");
    let bytes = std::fs::read(&jpeg).expect("read");
    std::fs::write(&jpeg, [bytes.as_slice(), b"\x00trailing"].concat()).expect("append");
    std::fs::write(d.join("images/train/jpeg_cut.jpg"), &bytes[..bytes.len() - 40]).expect("truncate");
    let png = std::fs::read(d.join("images/train/good.png")).expect("read");
    std::fs::write(d.join("images/train/truncated.png"), &png[..png.len() - 30]).expect("truncate");
    std::fs::write(d.join("images/train/garbage.jpg"), b"\xFF\xD8\xFF garbage").expect("garble");
    std::fs::write(d.join("images/train/notes.md"), b"not an image").expect("write");
    std::fs::write(d.join("labels/train/orphan.txt"), good).expect("write");
    std::fs::write(d.join("labels/train/classes.txt"), "a\nb\n").expect("write");
    let yaml = d.join("data.yaml");
    std::fs::write(&yaml, "path: .\ntrain: images/train\nval: images/val\nnames: [a, b]\n").expect("write");
    yaml
}

#[test]
fn every_problem_is_reported_and_the_image_skipped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::path::absolute(dir.path()).expect("absolute");
    let config = DataConfig::load(&problem_dataset(&d)).expect("config");
    let split = load_split(&config, Split::Train, LoadOptions::default()).expect("loaded");
    let kept: Vec<String> =
        split.images.iter().map(|r| r.image.file_name().expect("name").to_string_lossy().into()).collect();
    assert_eq!(kept, ["duplicate.png", "empty_label.png", "good.png", "jpeg_trailing.jpg", "no_label.png"]);
    let good = &split.images[2];
    assert_eq!((good.width, good.height, good.labels.len()), (32, 24, 2));
    assert_eq!(good.label, d.join("labels/train/good.txt"));
    assert_eq!(split.images[0].labels.len(), 2, "duplicate removed");

    let report = &split.report;
    assert_eq!(report.images_listed, 12);
    assert_eq!((report.labels_found, report.labels_missing, report.labels_empty), (8, 1, 1));
    let label_file = |name: &str| d.join("labels/train").join(name);
    let image_file = |name: &str| d.join("images/train").join(name);
    let skipped: Vec<String> = report.skipped.iter().map(ToString::to_string).collect();
    let want = [
        format!(
            "{}:3: class 2 is out of range: data.yaml has 2 classes, ids 0 to 1",
            label_file("class.txt").display()
        ),
        format!("{}:2: expected 5 fields", label_file("fields.txt").display()),
        format!(
            "{}: corrupt image: JPEG does not decode: Unsupported marker",
            image_file("garbage.jpg").display()
        ),
        format!("{}: corrupt image: JPEG ends before its end marker", image_file("jpeg_cut.jpg").display()),
        format!("{}:1: field 3 `abc` is not a number", label_file("not_number.txt").display()),
        format!("{}:1: box cx=1.5 cy=0.5 w=0.2 h=0.2 is outside [0, 1]", label_file("outside.txt").display()),
        format!("{}: corrupt image: PNG chunk", image_file("truncated.png").display()),
    ];
    assert_eq!(skipped.len(), want.len(), "{skipped:#?}");
    for (got, want) in skipped.iter().zip(&want) {
        assert!(got.starts_with(want.as_str()), "`{got}` does not start with `{want}`");
    }
    assert!(matches!(
        &report.skipped[0],
        Error::Label { line: 3, problem: LabelProblem::ClassOutOfRange { nc: 2, .. }, .. }
    ));
    let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(warnings.len(), 2, "{warnings:#?}");
    assert_eq!(
        warnings[0],
        format!("{}:3: duplicate of line 1 (removed)", label_file("duplicate.txt").display())
    );
    assert!(matches!(
        &report.warnings[1],
        Error::CorruptImage { problem: ImageProblem::JpegTrailingData, path } if path == &image_file("jpeg_trailing.jpg")
    ));
    assert_eq!(report.orphan_labels, [label_file("orphan.txt")]);
    assert!(!report.is_clean());
    assert!(report.summary().starts_with("12 images: 8 labelled, 1 without label file, 1 empty, 7 skipped"));
}

#[test]
fn strict_mode_returns_the_first_problem() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::path::absolute(dir.path()).expect("absolute");
    let config = DataConfig::load(&problem_dataset(&d)).expect("config");
    let err = load_split(&config, Split::Train, LoadOptions { strict: true }).expect_err("strict");
    assert_eq!(
        err.to_string(),
        format!(
            "{}:3: class 2 is out of range: data.yaml has 2 classes, ids 0 to 1",
            d.join("labels/train/class.txt").display()
        )
    );
}

#[test]
fn a_split_pointing_nowhere_names_the_yaml_and_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::path::absolute(dir.path()).expect("absolute");
    let config = DataConfig::load(&problem_dataset(&d)).expect("config");
    let err = load_split(&config, Split::Val, LoadOptions::default()).expect_err("val missing").to_string();
    let want =
        format!("{}: key `val:` points to {}", d.join("data.yaml").display(), d.join("images/val").display());
    assert!(err.starts_with(&want), "`{err}` does not start with `{want}`");
    let err = load_split(&config, Split::Test, LoadOptions::default()).expect_err("no test").to_string();
    assert!(err.ends_with("data.yaml: key `test:` is absent or empty"), "{err}");
}

#[test]
fn image_lists_with_relative_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::path::absolute(dir.path()).expect("absolute");
    for name in ["a.png", "b.png", "c.png"] {
        write_image(&d.join("ds/images").join(name), 16, 16);
    }
    std::fs::create_dir_all(d.join("ds/labels")).expect("mkdir");
    std::fs::write(d.join("ds/labels/a.txt"), "0 0.5 0.5 0.5 0.5\n").expect("write");
    std::fs::write(d.join("ds/train.txt"), "./images/a.png\nimages/b.png\n").expect("write");
    std::fs::write(
        d.join("ds/val.txt"),
        format!("{}\n./images/missing.png\n", d.join("ds/images/c.png").display()),
    )
    .expect("write");
    std::fs::write(d.join("ds/data.yaml"), "train: train.txt\nval: [val.txt]\nnames: {0: thing}\n")
        .expect("write");
    let config = DataConfig::load(&d.join("ds/data.yaml")).expect("config");
    let train = load_split(&config, Split::Train, LoadOptions::default()).expect("train");
    let images: Vec<&Path> = train.images.iter().map(|r| r.image.as_path()).collect();
    assert_eq!(images, [d.join("ds/images/a.png"), d.join("ds/images/b.png")]);
    assert_eq!(train.images[0].labels, [YoloLabel { class: 0, cx: 0.5, cy: 0.5, w: 0.5, h: 0.5 }]);
    assert!(train.report.orphan_labels.is_empty(), "{:?}", train.report.orphan_labels);
    let val = load_split(&config, Split::Val, LoadOptions::default()).expect("val");
    assert_eq!(val.images.len(), 1);
    let skipped = val.report.skipped[0].to_string();
    assert!(skipped.starts_with(&d.join("ds/images/missing.png").display().to_string()), "{skipped}");
}

#[test]
fn regression_an_image_whose_pixels_do_not_decode_is_skipped_at_load_not_in_the_run() {
    // A BMP cut in half keeps a whole header, so the byte checks alone passed it; `train` and `eval`
    // then stopped on it when they read its pixels. `label` refused it: every step now does.
    let dir = tempfile::tempdir().expect("tempdir");
    let d = std::path::absolute(dir.path()).expect("absolute");
    write_image(&d.join("images/train/good.png"), 32, 24);
    write_image(&d.join("images/train/cut.bmp"), 40, 40);
    let bmp = std::fs::read(d.join("images/train/cut.bmp")).expect("read");
    std::fs::write(d.join("images/train/cut.bmp"), &bmp[..bmp.len() / 2]).expect("truncate");
    std::fs::write(d.join("images/train/empty.jpg"), b"").expect("write");
    let yaml = d.join("data.yaml");
    std::fs::write(&yaml, "path: .\ntrain: images/train\nval: images/train\nnames: [a]\n").expect("write");
    let config = DataConfig::load(&yaml).expect("config");
    let split = load_split(&config, Split::Train, LoadOptions::default()).expect("loaded");
    assert_eq!(split.images.len(), 1, "only good.png");
    let skipped: Vec<String> = split.report.skipped.iter().map(ToString::to_string).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped.iter().any(|e| e.contains("cut.bmp: cannot decode image")), "{skipped:?}");
    assert!(skipped.iter().any(|e| e.contains("empty.jpg: empty file (0 bytes)")), "{skipped:?}");
}
