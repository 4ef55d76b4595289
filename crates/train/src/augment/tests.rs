//! Tests of the augmentations. The parity checksums (scripts/fixtures/augment_golden.py) were made with opencv-python 5.0.0 and
//! Ultralytics 8.4.190 (`source .deps/ultralytics.env`) by running, on the same inputs:
//! `cv2.cvtColor(cube, COLOR_RGB2HSV)` / `COLOR_HSV2RGB` on the 4096² image of all 2²⁴ byte
//! triples (`[i >> 16, (i >> 8) & 255, i & 255]`, `i` row-major; also 16777 rows of 1000 for
//! `HSV2RGB`, whose row ends take OpenCV's scalar path); `RandomHSV.apply_image`'s body
//! with the gains `r` fixed; and `cv2.warpAffine(img, M[:2], dsize, borderValue=114)` with `M`
//! from `RandomPerspective._compute_affine_matrix`'s product for the `s, tx, ty` given. The
//! checksum is `Σ byteᵢ · ((i · 0x9E3779B97F4A7C15) | 1)` over the RGB bytes, wrapping in `u64`.

use super::color::{RgbToHsvTables, apply_gains, hsv_to_rgb};
use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn checksum(bytes: &[u8]) -> u64 {
    bytes.iter().enumerate().fold(0u64, |acc, (i, &b)| {
        acc.wrapping_add(u64::from(b).wrapping_mul((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1))
    })
}

/// `tests/fixtures/jpeg/photo_420.cv2.png`: a 161×121 crop of a real photo (Ultralytics' bus).
fn photo() -> RgbImage {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/jpeg/photo_420.cv2.png");
    image::open(path).expect("fixture photo").to_rgb8()
}

/// A high-frequency 300×200 pattern, sensitive to every rounding of an interpolation.
fn pattern() -> RgbImage {
    RgbImage::from_fn(300, 200, |x, y| {
        Rgb(std::array::from_fn(|c| ((x * 7 + y * 13 + c as u32 * 50 + (x * y) % 31) % 256) as u8))
    })
}

/// The first `width · height` of all 2²⁴ byte triples, row-major.
fn cube(width: u32, height: u32) -> RgbImage {
    RgbImage::from_fn(width, height, |x, y| {
        let i = y * width + x;
        Rgb([(i >> 16) as u8, (i >> 8) as u8, i as u8])
    })
}

fn object(class: usize, x1: f32, y1: f32, x2: f32, y2: f32) -> ObjectBox {
    ObjectBox { class, bbox: Xyxy::new(x1, y1, x2, y2) }
}

fn photo_sample() -> Sample {
    Sample {
        image: photo(),
        boxes: vec![object(0, 10.0, 20.0, 60.0, 110.0), object(3, 90.0, 5.0, 150.0, 50.0)],
    }
}

fn assert_boxes_inside(sample: &Sample) {
    let (w, h) = (sample.image.width() as f32, sample.image.height() as f32);
    for b in &sample.boxes {
        let Xyxy { x1, y1, x2, y2 } = b.bbox;
        assert!(0.0 <= x1 && x1 < x2 && x2 <= w && 0.0 <= y1 && y1 < y2 && y2 <= h, "{b:?} outside {w}×{h}");
    }
}

#[test]
fn rgb_to_hsv_equals_opencv_on_every_colour() {
    let tables = RgbToHsvTables::new();
    let mut image = cube(4096, 4096);
    image.pixels_mut().for_each(|p| p.0 = tables.convert(p.0));
    assert_eq!(checksum(&image), 0xf1fa_bff3_6e67_2669);
}

#[test]
fn hsv_to_rgb_equals_opencv_on_every_colour() {
    // Rows of 1000: OpenCV's vector loop converts the first 992 pixels, its scalar loop the rest.
    let mut image = cube(1000, 16777);
    image.enumerate_pixels_mut().for_each(|(x, _, p)| p.0 = hsv_to_rgb(p.0, x < 992));
    assert_eq!(checksum(&image), 0xab99_daf8_16ff_a0fd);
    let mut image = cube(4096, 4096);
    image.pixels_mut().for_each(|p| p.0 = hsv_to_rgb(p.0, true));
    assert_eq!(checksum(&image), 0x8467_0080_f844_c5e8);
}

#[test]
fn hsv_with_fixed_gains_equals_ultralytics_on_a_photo() {
    let original = photo();
    assert_eq!(checksum(&original), 0x787f_071d_10d3_ecc6, "fixture changed");
    for (r, expected) in
        [([0.3, -0.4, 0.25], 0x680d_cf5f_2685_7ce9), ([-0.0123, 0.61, -0.37], 0x296b_a660_d932_d447)]
    {
        let mut image = original.clone();
        apply_gains(&mut image, r);
        assert_eq!(checksum(&image), expected, "gains {r:?}");
    }
}

#[test]
fn hsv_with_zero_gains_leaves_the_image_and_the_generator_alone() {
    let mut image = photo();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    hsv(&mut image, 0.0, 0.0, 0.0, &mut rng);
    assert_eq!(image, photo());
    assert_eq!(rng.random::<u64>(), ChaCha8Rng::seed_from_u64(1).random::<u64>());
}

#[test]
fn hsv_changes_colours_and_keeps_grey_grey() {
    let mut image = photo();
    image.put_pixel(0, 0, Rgb([128, 128, 128]));
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    hsv(&mut image, 0.5, 0.7, 0.4, &mut rng);
    assert_ne!(image, photo());
    let [r, g, b] = image.get_pixel(0, 0).0;
    assert!(r == g && g == b, "grey became {r} {g} {b}");
}

#[test]
fn warp_equals_opencv() {
    let cases = [
        (photo(), (200, 150), 1.3791, 103.37, 71.21, 0xbab9_c1d7_1e31_2c59),
        (photo(), (333, 251), 0.6173, 170.5, 118.9, 0xf766_c41b_d812_01de),
        (pattern(), (333, 251), 1.4413, 151.7, 140.3, 0xfe7c_a240_f353_d1c0),
        (pattern(), (256, 256), 0.5217, 122.33, 131.9, 0x3586_8736_564c_f53a),
        (pattern(), (300, 200), 1.0, 150.0, 100.0, 0x42cd_69cb_05d1_0f4b),
    ];
    for (image, (w, h), s, tx, ty, expected) in cases {
        let sample = Sample { image, boxes: vec![] };
        let out = scale_translate(&sample, w, h, s, tx, ty);
        assert_eq!(checksum(&out.image), expected, "s={s} into {w}×{h}");
    }
}

#[test]
fn affine_with_zero_strength_is_the_identity() {
    let sample = photo_sample();
    let (w, h) = sample.image.dimensions();
    let out = affine(&sample, w, h, 0.0, 0.0, &mut ChaCha8Rng::seed_from_u64(3));
    assert_eq!(out.image, sample.image);
    assert_eq!(out.boxes.len(), sample.boxes.len());
    for (a, b) in out.boxes.iter().zip(&sample.boxes) {
        assert_eq!(a.class, b.class);
        let d = [a.bbox.x1 - b.bbox.x1, a.bbox.y1 - b.bbox.y1, a.bbox.x2 - b.bbox.x2, a.bbox.y2 - b.bbox.y2];
        assert!(d.iter().all(|d| d.abs() <= 1.0), "{a:?} vs {b:?}");
    }
}

#[test]
fn a_box_moved_out_of_the_image_is_dropped() {
    let sample = photo_sample();
    // Centre to x = -20: the left box (x 10..60 of 161) lands at -90.5..-40.5, the right one
    // at -10.5..49.5, clipped to 0..49.5 (83 % of it left).
    let out = scale_translate(&sample, 161, 121, 1.0, -20.0, 60.5);
    assert_eq!(out.boxes.len(), 1);
    assert_eq!(out.boxes[0].class, 3);
    assert_eq!(out.boxes[0].bbox, Xyxy::new(0.0, 5.0, 49.5, 50.0));
    // Centre to x = -66: the right box at -56.5..3.5 keeps 6 % of its area, under the 10 % needed.
    let out = scale_translate(&sample, 161, 121, 1.0, -66.0, 60.5);
    assert!(out.boxes.is_empty(), "{:?}", out.boxes);
}

#[test]
fn scale_changes_box_sizes_by_the_factor() {
    // A box well inside the image, so no scale here clips it.
    let inner = Sample { image: photo(), boxes: vec![object(1, 70.0, 50.0, 90.0, 70.0)] };
    for s in [0.5f32, 1.5] {
        let after = scale_translate(&inner, 161, 121, s, 80.5, 60.5).boxes[0].bbox;
        let expected = Xyxy::new(80.5 - 10.5 * s, 60.5 - 10.5 * s, 80.5 + 9.5 * s, 60.5 + 9.5 * s);
        for (a, e) in after.to_xywh().iter().zip(expected.to_xywh()) {
            assert!((a - e).abs() < 1e-3, "{s}: {after:?}");
        }
    }
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..50 {
        let out = affine(&inner, 161, 121, 0.0, 0.5, &mut rng);
        let ratio = out.boxes[0].bbox.width() / 20.0;
        assert!((0.5..=1.5).contains(&ratio), "{ratio}");
    }
}

#[test]
fn box_candidates_drop_thin_small_and_elongated_boxes() {
    let before = Xyxy::new(0.0, 0.0, 100.0, 100.0);
    assert!(box_candidates(before, Xyxy::new(0.0, 0.0, 50.0, 50.0)));
    assert!(!box_candidates(before, Xyxy::new(0.0, 0.0, 2.0, 50.0)), "2 px wide");
    assert!(!box_candidates(before, Xyxy::new(0.0, 0.0, 30.0, 30.0)), "9 % of the area");
    let long = Xyxy::new(0.0, 0.0, 1000.0, 3.0);
    assert!(!box_candidates(long, Xyxy::new(0.0, 0.0, 400.0, 3.9)), "aspect ratio over 100");
}

#[test]
fn mosaic_canvas_places_four_tiles_around_the_centre() {
    let tile = |v: u8| Sample {
        image: RgbImage::from_pixel(64, 48, Rgb([v; 3])),
        boxes: vec![object(v as usize, 0.0, 0.0, 64.0, 48.0)],
    };
    let (a, b, c, d) = (tile(10), tile(20), tile(30), tile(40));
    let canvas = mosaic_canvas([&a, &b, &c, &d], 64, &mut ChaCha8Rng::seed_from_u64(5));
    assert_eq!(canvas.image.dimensions(), (128, 128));
    // Each tile's box marks where it went; its pixels are there and the centre is shared.
    assert_eq!(canvas.boxes.len(), 4);
    let (xc, yc) = (canvas.boxes[0].bbox.x2, canvas.boxes[0].bbox.y2);
    assert!((32.0..96.0).contains(&xc) && (32.0..96.0).contains(&yc), "centre {xc} {yc}");
    for (k, b) in canvas.boxes.iter().enumerate() {
        assert_eq!(b.class, 10 * (k + 1));
        let inside = canvas.image.get_pixel(b.bbox.x1 as u32, b.bbox.y1 as u32);
        assert_eq!(inside.0, [b.class as u8; 3], "tile {k}");
    }
    assert_eq!(canvas.boxes[3].bbox.x1, xc);
    assert_eq!(canvas.boxes[3].bbox.y1, yc);
    assert_eq!(canvas.image.get_pixel(0, 127).0, [FILL; 3].map(|f| if yc + 48.0 >= 128.0 { 30 } else { f }));
}

#[test]
fn mosaic_is_size_square_with_boxes_inside_and_no_new_boxes() {
    let first = photo_sample();
    let mut second = photo_sample();
    flip_left_right(&mut second);
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for _ in 0..20 {
        let out = mosaic([&first, &second, &first, &second], 160, 0.1, 0.5, &mut rng);
        assert_eq!(out.image.dimensions(), (160, 160));
        assert!(out.boxes.len() <= 8);
        assert_boxes_inside(&out);
    }
}

#[test]
fn the_same_seed_gives_the_same_sample() {
    let config = AugmentConfig::ultralytics();
    let first = photo_sample();
    let run = |seed: u64| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        augment(&config, &first, 160, &mut rng, |_| {
            Ok::<_, ()>([first.clone(), first.clone(), first.clone()])
        })
        .expect("no error")
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42).image, run(43).image);
}

#[test]
fn a_real_photo_goes_through_every_step() {
    let sample = photo_sample();
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let mut coloured = sample.clone();
    hsv(&mut coloured.image, 0.015, 0.7, 0.4, &mut rng);
    assert_ne!(coloured.image, sample.image);
    let moved = affine(&coloured, 160, 160, 0.1, 0.5, &mut rng);
    assert_eq!(moved.image.dimensions(), (160, 160));
    assert_boxes_inside(&moved);
    let config = AugmentConfig { mosaic: 0.5, ..AugmentConfig::ultralytics() };
    for _ in 0..6 {
        let out = augment(&config, &sample, 160, &mut rng, |_| {
            Ok::<_, ()>([sample.clone(), moved.clone(), coloured.clone()])
        })
        .expect("no error");
        assert_eq!(out.image.dimensions(), (160, 160));
        assert!(out.boxes.len() <= 8);
        assert_boxes_inside(&out);
    }
    let failed = augment(&AugmentConfig::ultralytics(), &sample, 160, &mut rng, |_| Err("unreadable"));
    assert_eq!(failed, Err("unreadable"));
}

#[test]
fn flipping_twice_is_the_identity() {
    let mut sample = photo_sample();
    flip_left_right(&mut sample);
    assert_eq!(sample.boxes[0].bbox, Xyxy::new(101.0, 20.0, 151.0, 110.0));
    flip_left_right(&mut sample);
    assert_eq!(sample, photo_sample());
}

#[test]
fn labels_become_pixel_boxes() {
    let label = YoloLabel { class: 2, cx: 0.5, cy: 0.25, w: 0.5, h: 0.5 };
    let sample = Sample::from_labels(RgbImage::new(200, 100), &[label]);
    assert_eq!(sample.boxes, vec![object(2, 50.0, 0.0, 150.0, 50.0)]);
}

#[test]
fn config_defaults_off_ultralytics_on_and_strict_fields() {
    assert!(!AugmentConfig::default().changes_pixels());
    let ultralytics = AugmentConfig::ultralytics();
    assert!(ultralytics.changes_pixels());
    assert_eq!(ultralytics.validate(), Ok(()));
    let json = serde_json::to_string(&ultralytics).expect("serialises");
    assert_eq!(serde_json::from_str::<AugmentConfig>(&json).expect("parses"), ultralytics);
    let partial: AugmentConfig = serde_json::from_str(r#"{"scale": 0.25}"#).expect("parses");
    assert_eq!(partial, AugmentConfig { scale: 0.25, ..AugmentConfig::default() });
    assert!(serde_json::from_str::<AugmentConfig>(r#"{"degrees": 10}"#).is_err());
    let bad = AugmentConfig { translate: 0.7, ..ultralytics };
    assert_eq!(bad.validate().map_err(|e| e.field), Err("translate"));
    assert!(AugmentConfig { mosaic: f32::NAN, ..ultralytics }.validate().is_err());
}

#[test]
fn mosaic_probability_is_respected() {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    let half = AugmentConfig { mosaic: 0.5, ..AugmentConfig::default() };
    let hits = (0..1000).filter(|_| half.draw_mosaic(&mut rng)).count();
    assert!((400..600).contains(&hits), "{hits}");
    assert!(!AugmentConfig::default().draw_mosaic(&mut rng));
    assert!(AugmentConfig::ultralytics().draw_mosaic(&mut rng));
}
