//! Tests of the generator as a whole: determinism, labels, presets, and the written layout.

use super::*;
use crate::dataset::labels::{format_labels, parse_labels};
use std::path::Path;
use std::sync::Mutex;

fn config(preset: Preset, seed: u64) -> SynthConfig {
    SynthConfig { preset, seed, train: 8, val: 4, width: 128, height: 96, jpeg_quality: None }
}

/// FNV-1a over the pixels and label text: a fingerprint for comparisons and goldens.
fn fingerprint(image: &RgbImage, labels: &[YoloLabel]) -> u64 {
    let text = format_labels(labels);
    image
        .as_raw()
        .iter()
        .chain(text.as_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

#[test]
fn same_seed_same_image_other_seed_or_split_other_image() {
    for preset in Preset::ALL {
        let a = generate_image(&config(preset, 7), Split::Train, 3);
        let b = generate_image(&config(preset, 7), Split::Train, 3);
        assert_eq!(a, b, "{preset}");
        assert_ne!(a.0, generate_image(&config(preset, 8), Split::Train, 3).0, "{preset}");
        assert_ne!(a.0, generate_image(&config(preset, 7), Split::Val, 3).0, "{preset}");
        assert_ne!(a.0, generate_image(&config(preset, 7), Split::Train, 4).0, "{preset}");
    }
}

#[test]
fn images_do_not_depend_on_the_counts() {
    let small = config(Preset::Base, 1);
    let large = SynthConfig { train: 500, val: 200, ..small };
    assert_eq!(generate_image(&small, Split::Val, 2), generate_image(&large, Split::Val, 2));
}

/// Locks the rendering: if this changes, bump `SynthManifest::format` and update the values.
#[test]
fn golden_fingerprints() {
    let cfg = SynthConfig::default();
    let (image, labels) = generate_image(&cfg, Split::Train, 0);
    let field = SynthConfig { preset: Preset::Field, ..cfg };
    let (field_image, field_labels) = generate_image(&field, Split::Val, 5);
    assert_eq!(
        [fingerprint(&image, &labels), fingerprint(&field_image, &field_labels)],
        [9_906_548_293_040_344_784, 14_203_570_415_388_946_857],
        "rendering changed"
    );
}

#[test]
fn labels_are_normalised_and_parse_back() {
    for preset in Preset::ALL {
        for index in 0..24 {
            let (_, labels) = generate_image(&config(preset, 3), Split::Train, index);
            for l in &labels {
                let corners = [l.cx - l.w / 2.0, l.cy - l.h / 2.0, l.cx + l.w / 2.0, l.cy + l.h / 2.0];
                assert!(corners.iter().all(|v| (-1e-6..=1.0 + 1e-6).contains(v)), "{preset} {index}: {l:?}");
                assert!(l.w > 0.0 && l.h > 0.0 && l.class < CLASS_NAMES.len(), "{l:?}");
            }
            let text = format_labels(&labels);
            let parsed = parse_labels(Path::new("x.txt"), &text, CLASS_NAMES.len()).expect("parses");
            assert_eq!(parsed.len(), labels.len());
            for (p, l) in parsed.iter().zip(&labels) {
                assert!(p.class == l.class && (p.cx - l.cx).abs() < 1e-5 && (p.w - l.w).abs() < 1e-5);
            }
        }
    }
}

#[test]
fn every_class_appears_in_a_modest_dataset() {
    for preset in Preset::ALL {
        let mut seen = [0usize; CLASS_NAMES.len()];
        for index in 0..30 {
            for label in generate_image(&config(preset, 0), Split::Train, index).1 {
                seen[label.class] += 1;
            }
        }
        assert!(seen.iter().all(|&n| n >= 5), "{preset}: boxes per class {seen:?}");
    }
}

/// Statistics of one preset over a few images.
#[derive(Debug)]
struct Stats {
    brightness: f32,
    /// Mean absolute difference between horizontal neighbours (noise and texture).
    roughness: f32,
    /// Mean label area as a fraction of the image.
    box_area: f32,
}

fn stats(preset: Preset) -> Stats {
    let (mut brightness, mut roughness, mut area, mut boxes, n) = (0.0, 0.0, 0.0, 0usize, 24);
    for index in 0..n {
        let (image, labels) = generate_image(&config(preset, 11), Split::Train, index);
        let values: Vec<f32> = image.pixels().map(|p| math::luma(p.0.map(f32::from))).collect();
        brightness += values.iter().sum::<f32>() / values.len() as f32;
        roughness += values.windows(2).map(|w| (w[1] - w[0]).abs()).sum::<f32>() / values.len() as f32;
        area += labels.iter().map(|l| l.w * l.h).sum::<f32>();
        boxes += labels.len();
    }
    Stats {
        brightness: brightness / n as f32,
        roughness: roughness / n as f32,
        box_area: area / boxes as f32,
    }
}

#[test]
fn field_is_darker_rougher_with_smaller_objects_than_base() {
    let (base, field) = (stats(Preset::Base), stats(Preset::Field));
    assert!(field.brightness < base.brightness * 0.8, "{base:?} {field:?}");
    assert!(field.roughness > base.roughness * 2.0, "{base:?} {field:?}");
    assert!(field.box_area < base.box_area * 0.5, "{base:?} {field:?}");
}

#[test]
fn tiny_images_do_not_panic() {
    for (width, height) in [(0, 0), (1, 1), (5, 3), (31, 200)] {
        for preset in Preset::ALL {
            let cfg = SynthConfig { width, height, ..config(preset, 2) };
            let (image, labels) = generate_image(&cfg, Split::Train, 0);
            assert_eq!(image.dimensions(), (width, height));
            let text = format_labels(&labels);
            parse_labels(Path::new("x.txt"), &text, 3).expect("valid labels");
        }
    }
}

#[test]
fn sizes_parse_or_say_what_is_wrong() {
    assert_eq!(parse_size("256x192").expect("valid"), (256, 192));
    assert_eq!(parse_size("64X32").expect("valid"), (64, 32));
    for bad in ["256", "0x10", "256x", "ax3", "16x16", "99999x64", "-5x64"] {
        let err = parse_size(bad).expect_err(bad).to_string();
        assert!(err.contains("size") && err.contains(bad), "{bad}: {err}");
    }
}

#[test]
fn validate_rejects_empty_splits_and_odd_sizes() {
    assert!(SynthConfig::default().validate().is_ok());
    let err = SynthConfig { val: 0, ..SynthConfig::default() }.validate().expect_err("no val");
    assert!(err.to_string().contains("`val`"), "{err}");
    let err = SynthConfig { width: 8, ..SynthConfig::default() }.validate().expect_err("narrow");
    assert!(err.to_string().contains("`width`"), "{err}");
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for sub in ["images/train", "images/val", "labels/train", "labels/val"] {
        let mut names: Vec<_> = std::fs::read_dir(dir.join(sub))
            .expect("folder exists")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        for name in names {
            let bytes = std::fs::read(dir.join(sub).join(&name)).expect("read");
            out.push((format!("{sub}/{name}"), bytes));
        }
    }
    out
}

#[test]
fn writes_the_ultralytics_layout_identically_on_any_thread_count() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = config(Preset::Field, 5);
    let calls = Mutex::new(Vec::new());
    let one = tmp.path().join("one");
    let summary =
        write_dataset_with_threads(&cfg, &one, 1, |n| calls.lock().expect("lock").push(n)).expect("writes");
    assert_eq!(calls.into_inner().expect("lock"), (1..=12).collect::<Vec<_>>());
    assert_eq!(summary.images, 12);
    let written = files(&one);
    assert_eq!(written.len(), 24);
    assert_eq!(written[0].0, "images/train/000000.png");
    assert_eq!(written[23].0, "labels/val/000003.txt");
    let boxes: usize = written
        .iter()
        .filter(|(name, _)| name.starts_with("labels"))
        .map(|(_, text)| String::from_utf8_lossy(text).lines().count())
        .sum();
    assert_eq!(boxes, summary.boxes_per_class.iter().sum::<usize>());

    let (image, _) = generate_image(&cfg, Split::Val, 3);
    let decoded = image::load_from_memory(&written[11].1).expect("png decodes").to_rgb8();
    assert_eq!(decoded, image, "images/val/000003.png holds the generated pixels");

    let yaml = std::fs::read_to_string(one.join("data.yaml")).expect("data.yaml");
    let canonical = std::fs::canonicalize(&one).expect("canonical");
    assert!(yaml.contains(&format!("path: {}", canonical.display())), "{yaml}");
    for line in ["train: images/train", "val: images/val", "nc: 3", "- circle", "- square", "- triangle"] {
        assert!(yaml.contains(line), "{line} missing from\n{yaml}");
    }
    let manifest: SynthManifest =
        serde_json::from_slice(&std::fs::read(one.join(MANIFEST_FILE)).expect("manifest")).expect("json");
    assert_eq!(manifest.config(), cfg);

    let three = tmp.path().join("three");
    write_dataset_with_threads(&cfg, &three, 3, |_| {}).expect("writes");
    assert!(written == files(&three), "thread count changed the output");
}

#[test]
fn reruns_overwrite_but_foreign_or_different_datasets_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cfg = config(Preset::Base, 0);
    let out = tmp.path().join("synth");
    write_dataset(&cfg, &out, |_| {}).expect("first run");
    write_dataset(&cfg, &out, |_| {}).expect("same settings overwrite");

    let err = write_dataset(&SynthConfig { seed: 1, ..cfg }, &out, |_| {}).expect_err("other seed");
    assert!(err.to_string().contains("other settings (preset base, seed 0"), "{err}");

    let foreign = tmp.path().join("foreign");
    std::fs::create_dir_all(&foreign).expect("mkdir");
    std::fs::write(foreign.join("data.yaml"), "names: [a]\n").expect("write");
    let err = write_dataset(&cfg, &foreign, |_| {}).expect_err("foreign data.yaml");
    assert!(err.to_string().contains("data.yaml: was not written by headroom synth"), "{err}");
    assert!(!foreign.join("images").exists() && !foreign.join(MANIFEST_FILE).exists());

    let file = tmp.path().join("file");
    std::fs::write(&file, "x").expect("write");
    assert!(write_dataset(&cfg, &file, |_| {}).is_err());
}

#[test]
fn jpeg_output_is_deterministic_and_labelled_like_png() {
    let dir = tempfile::tempdir().expect("tempdir");
    let png = config(Preset::Field, 4);
    let jpeg = SynthConfig { jpeg_quality: Some(90), ..png };
    write_dataset(&jpeg, &dir.path().join("a"), |_| {}).expect("writes");
    write_dataset(&jpeg, &dir.path().join("b"), |_| {}).expect("writes");
    write_dataset(&png, &dir.path().join("p"), |_| {}).expect("writes");
    let first = std::fs::read(dir.path().join("a/images/val/000000.jpg")).expect("jpg");
    assert_eq!(first, std::fs::read(dir.path().join("b/images/val/000000.jpg")).expect("jpg"));
    assert!(crate::imageio::jpeg::is_jpeg(&first));
    assert_eq!(
        std::fs::read(dir.path().join("a/labels/val/000003.txt")).expect("label"),
        std::fs::read(dir.path().join("p/labels/val/000003.txt")).expect("label"),
        "the format changes the pixels only"
    );
    let yaml = std::fs::read_to_string(dir.path().join("a/data.yaml")).expect("yaml");
    assert!(yaml.contains("--jpeg 90"), "{yaml}");
    let err = SynthConfig { jpeg_quality: Some(0), ..png }.validate().expect_err("quality 0");
    assert!(err.to_string().contains("jpeg_quality"), "{err}");
}
