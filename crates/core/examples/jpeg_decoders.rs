//! Measures the JPEG decoders headroom could use against `cv2.imread`'s bytes (tests/fixtures/jpeg):
//! libjpeg-turbo's code through the `mozjpeg` crate (what `imageio` uses) and the `image` crate's
//! pure-Rust decoder (zune-jpeg). Prints, per fixture, the pixels that differ from OpenCV and the
//! largest difference, then the decode time of each on the photo fixtures.
//!
//! Run: cargo run --release -p headroom-core --example jpeg_decoders

use std::path::PathBuf;
use std::time::Instant;

use image::RgbImage;

fn main() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/jpeg");
    let cases: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).expect("cases.json"))
            .expect("json");
    let mut exact = [0usize; 2];
    let mut total = 0;
    println!("{:<24} {:>22} {:>22}", "case", "libjpeg-turbo (ours)", "image/zune-jpeg");
    for case in cases["cases"].as_array().expect("cases") {
        let name = case["name"].as_str().expect("name");
        let bytes = std::fs::read(dir.join(format!("{name}.jpg"))).expect("jpg");
        let golden = headroom_core::imageio::read_rgb(&dir.join(format!("{name}.cv2.png"))).expect("png");
        let ours = headroom_core::imageio::decode_rgb(&dir.join(name), &bytes).expect("ours");
        let zune = zune(&bytes);
        let mut cells = Vec::new();
        for (i, decoded) in [Some(ours), zune].into_iter().enumerate() {
            cells.push(match decoded {
                Some(d) if d.dimensions() == golden.dimensions() => {
                    let (differ, max) = differ(&d, &golden);
                    exact[i] += usize::from(differ == 0);
                    format!(
                        "{:.2}% differ, max {max}",
                        100.0 * differ as f64 / f64::from(d.width() * d.height())
                    )
                }
                Some(d) => format!("size {:?}", d.dimensions()),
                None => "does not decode".to_string(),
            });
        }
        total += 1;
        println!("{name:<24} {:>22} {:>22}", cells[0], cells[1]);
    }
    println!("bit-exact with cv2.imread: ours {}/{total}, zune-jpeg {}/{total}", exact[0], exact[1]);

    let photos: Vec<Vec<u8>> = ["photo_420", "photo_444", "photo_progressive_420"]
        .iter()
        .map(|n| std::fs::read(dir.join(format!("{n}.jpg"))).expect("jpg"))
        .collect();
    let rounds = 300;
    for (label, decode) in [
        (
            "libjpeg-turbo (ours)",
            &(|b: &[u8]| drop(headroom_core::imageio::decode_rgb(&dir, b))) as &dyn Fn(&[u8]),
        ),
        ("image/zune-jpeg", &|b: &[u8]| drop(zune(b))),
    ] {
        let started = Instant::now();
        for _ in 0..rounds {
            photos.iter().for_each(|p| decode(p));
        }
        let each = started.elapsed().as_secs_f64() / (rounds * photos.len()) as f64;
        println!(
            "{label}: {:.3} ms per 161x121 photo ({:.1} Mpixel/s)",
            each * 1e3,
            161.0 * 121.0 / each / 1e6
        );
    }
}

fn zune(bytes: &[u8]) -> Option<RgbImage> {
    image::load_from_memory_with_format(bytes, image::ImageFormat::Jpeg).ok().map(|i| i.into_rgb8())
}

fn differ(a: &RgbImage, b: &RgbImage) -> (usize, u8) {
    let mut n = 0;
    let mut max = 0;
    for (p, q) in a.pixels().zip(b.pixels()) {
        let d = (0..3).map(|c| p[c].abs_diff(q[c])).max().unwrap_or(0);
        n += usize::from(d > 0);
        max = max.max(d);
    }
    (n, max)
}
