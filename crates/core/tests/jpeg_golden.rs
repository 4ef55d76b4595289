//! JPEG decoding against `cv2.imread` (tests/fixtures/jpeg, made by scripts/fixtures/jpeg_golden.py):
//! baseline and progressive, 4:2:0 / 4:2:2 / 4:4:4 / 4:4:0 / 4:1:1, greyscale, CMYK and YCCK,
//! restart markers, optimised tables, a tiny image, EXIF orientations 1–8, on a real photo crop and a
//! synthetic image. headroom must decode every one to the same RGB bytes, bit for bit.

mod common;
use std::path::PathBuf;

use common::compare;
use headroom_core::imageio::read_rgb;
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    size: [u32; 2],
}

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/jpeg")
}

#[test]
fn jpeg_decodes_to_the_bytes_opencv_decodes() {
    let dir = fixtures();
    let golden: Golden =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).expect("cases.json"))
            .expect("json");
    assert!(golden.cases.len() >= 28, "the fixture lost cases");
    let mut report = Vec::new();
    let mut failed = Vec::new();
    for case in &golden.cases {
        let ours = read_rgb(&dir.join(format!("{}.jpg", case.name))).expect(&case.name);
        // The golden is a PNG (lossless), decoded by the image crate.
        let theirs = read_rgb(&dir.join(format!("{}.cv2.png", case.name))).expect("golden png");
        assert_eq!(theirs.dimensions(), (case.size[0], case.size[1]), "{}: golden size", case.name);
        if ours.dimensions() != theirs.dimensions() {
            failed.push(format!(
                "{}: size {:?}, OpenCV {:?}",
                case.name,
                ours.dimensions(),
                theirs.dimensions()
            ));
            continue;
        }
        let (max, worst, share) = compare(&ours, &theirs);
        let line = format!("{}: max diff {max} at {worst:?}, {:.3}% pixels differ", case.name, 100.0 * share);
        if max > 0 {
            failed.push(line.clone());
        }
        report.push(line);
    }
    println!("{}", report.join("\n"));
    assert!(failed.is_empty(), "not bit-exact with cv2.imread:\n{}", failed.join("\n"));
}

/// The check above can fail: a decoder that rounds differently (the `image` crate's pure-Rust one)
/// does not pass it on the photo.
#[test]
fn another_decoder_fails_the_comparison() {
    let dir = fixtures();
    let bytes = std::fs::read(dir.join("photo_420.jpg")).expect("jpg");
    let other =
        image::load_from_memory_with_format(&bytes, image::ImageFormat::Jpeg).expect("decodes").into_rgb8();
    let theirs = read_rgb(&dir.join("photo_420.cv2.png")).expect("png");
    let (max, _, share) = compare(&other, &theirs);
    assert!(max > 0 && share > 0.0, "zune-jpeg happens to equal libjpeg-turbo here: pick another case");
}
