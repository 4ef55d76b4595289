//! `Preprocess::Val` against Ultralytics' own val dataset on a real image
//! (tests/fixtures/letterbox/val_*, made by scripts/fixtures/val_preprocess_golden.py): the model
//! input it builds and the label boxes its validator matches against.

mod common;
use common::{compare, fixtures};
use headroom_core::dataset::YoloLabel;
use headroom_core::imageio::read_rgb;
use headroom_core::letterbox::LetterboxOptions;
use headroom_core::preprocess::{InputGeometry, Preprocess};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    source_size: [u32; 2],
    input_size: [u32; 2],
    loaded: [u32; 2],
    output_size: [u32; 2],
    labels: Vec<(usize, f32, f32, f32, f32)>,
    classes: Vec<usize>,
    boxes: Vec<[f32; 4]>,
}

#[test]
fn val_preprocessing_matches_ultralytics_val_dataset() {
    let dir = fixtures();
    let golden: Golden =
        serde_json::from_str(&std::fs::read_to_string(dir.join("val_cases.json")).expect("val_cases.json"))
            .expect("json");
    let source = read_rgb(&dir.join("source.png")).expect("source.png");
    assert!(golden.cases.len() >= 6);
    let mut report = Vec::new();
    for case in &golden.cases {
        let [w, h] = case.source_size;
        let input = image::imageops::crop_imm(&source, 0, 0, w, h).to_image();
        let target = LetterboxOptions {
            width: case.input_size[0],
            height: case.input_size[1],
            ..LetterboxOptions::square(case.input_size[0])
        };
        let geometry = InputGeometry::new(Preprocess::Val, w, h, &target);
        assert_eq!(geometry.loaded, (case.loaded[0], case.loaded[1]), "{}: load_image size", case.name);
        assert_eq!(geometry.output_size(), (case.output_size[0], case.output_size[1]), "{}", case.name);

        let ours = geometry.apply(&input);
        let theirs = read_rgb(&dir.join(format!("{}.png", case.name))).expect("golden png");
        assert_eq!(ours.dimensions(), theirs.dimensions(), "{}", case.name);
        let (max, worst, share) = compare(&ours, &theirs);

        assert_eq!(case.classes.len(), case.labels.len(), "{}", case.name);
        let mut box_error = 0f32;
        for ((class, cx, cy, bw, bh), (expected_class, expected)) in
            case.labels.iter().zip(case.classes.iter().zip(&case.boxes))
        {
            assert_eq!(class, expected_class, "{}", case.name);
            let mapped = geometry.map_label(YoloLabel { class: *class, cx: *cx, cy: *cy, w: *bw, h: *bh });
            for (a, b) in [mapped.x1, mapped.y1, mapped.x2, mapped.y2].iter().zip(expected) {
                box_error = box_error.max((a - b).abs());
            }
        }
        report.push(format!(
            "{}: pixels max diff {max} at {worst:?}, {:.3}% differ; label boxes max error {box_error:e} px",
            case.name,
            100.0 * share
        ));
        // Bit-exact pixels, whether `load_image` shrinks or enlarges.
        assert!(max == 0, "{}", report.join("\n"));
        // The label mapping repeats Ultralytics' f32 operations: the same bits.
        assert!(box_error == 0.0, "{}", report.join("\n"));
    }
    println!("{}", report.join("\n"));
}
