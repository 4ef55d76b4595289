//! Our letterbox against Ultralytics' own `LetterBox` on a real image
//! (tests/fixtures/letterbox, made by scripts/fixtures/letterbox_golden.py).

mod common;
use common::{compare, fixtures};
use headroom_core::imageio::read_rgb;
use headroom_core::letterbox::{Letterbox, LetterboxOptions};
use image::RgbImage;
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    source_size: [u32; 2],
    options: LetterboxOptions,
    resized: [u32; 2],
    pad_left_top_right_bottom: [u32; 4],
    output_size: [u32; 2],
}

#[test]
fn letterbox_matches_ultralytics_geometry_and_pixels() {
    let dir = fixtures();
    let golden: Golden =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).expect("cases.json"))
            .expect("json");
    let source = read_rgb(&dir.join("source.png")).expect("source.png");
    assert!(golden.cases.len() >= 8);
    let mut report = Vec::new();
    for case in &golden.cases {
        let [w, h] = case.source_size;
        let input: RgbImage = image::imageops::crop_imm(&source, 0, 0, w, h).to_image();
        let geometry = Letterbox::new(w, h, &case.options);
        assert_eq!(geometry.resized, (case.resized[0], case.resized[1]), "{}: resized size", case.name);
        let [l, t, r, b] = case.pad_left_top_right_bottom;
        assert_eq!(geometry.pad, (l, t, r, b), "{}: padding", case.name);
        assert_eq!(geometry.output_size(), (case.output_size[0], case.output_size[1]), "{}", case.name);

        let ours = geometry.apply(&input);
        let theirs = read_rgb(&dir.join(format!("{}.png", case.name))).expect("golden png");
        assert_eq!(ours.dimensions(), theirs.dimensions(), "{}", case.name);
        let (max, worst, share) = compare(&ours, &theirs);
        report.push(format!(
            "{}: max diff {max} at {worst:?}, {:.3}% pixels differ",
            case.name,
            100.0 * share
        ));
        // Bit-exact, shrinking and enlarging: anything else is a real difference in geometry,
        // weights or rounding.
        assert!(max == 0, "{}", report.join("\n"));
    }
    println!("{}", report.join("\n"));
}
