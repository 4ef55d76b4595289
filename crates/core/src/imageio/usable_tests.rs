use std::path::PathBuf;

use super::*;
use crate::dataset::verify::tests::write_image;

/// Sets the modification time of `path` to `age` ago (`age` negative: in the future).
pub(crate) fn set_age(path: &Path, age_secs: i64) {
    let now = SystemTime::now();
    let delta = Duration::from_secs(age_secs.unsigned_abs());
    let time = if age_secs >= 0 { now - delta } else { now + delta };
    let file = std::fs::File::options().write(true).open(path).expect("open for times");
    file.set_modified(time).expect("set mtime");
}

/// A folder holding one file of each kind the filter must refuse, all old enough to be settled.
fn bad_files(dir: &Path) -> Vec<(PathBuf, &'static str)> {
    let d = dir;
    std::fs::write(d.join("empty.jpg"), b"").expect("write");
    write_image(&d.join("whole.jpg"), 64, 48);
    let jpeg = std::fs::read(d.join("whole.jpg")).expect("read");
    std::fs::write(d.join("cut.jpg"), &jpeg[..jpeg.len() / 2]).expect("write");
    write_image(&d.join("dot.png"), 1, 1);
    // The header is whole (so the byte checks pass) but the pixel data stops half-way.
    write_image(&d.join("whole.bmp"), 40, 40);
    let bmp = std::fs::read(d.join("whole.bmp")).expect("read");
    std::fs::write(d.join("cut.bmp"), &bmp[..bmp.len() / 2]).expect("write");
    std::fs::write(
        d.join("bomb.png"),
        crate::imageio::tests::huge_header(image::ImageFormat::Png, 100_000, 100_000),
    )
    .expect("write");
    let cases = [
        ("empty.jpg", "empty file (0 bytes): a camera may still be writing it (left for a later run)"),
        ("cut.jpg", "corrupt image: JPEG ends before its end marker FF D9 (truncated)"),
        ("dot.png", "corrupt image: image size 1x1 is under 10 pixels on a side"),
        ("cut.bmp", "cannot decode image"),
        ("bomb.png", "more than 178956970 pixels (refused before decoding)"),
    ];
    cases
        .into_iter()
        .map(|(name, want)| {
            let path = d.join(name);
            set_age(&path, 60);
            (path, want)
        })
        .collect()
}

#[test]
fn every_bad_file_is_refused_with_its_name_and_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    for settle in [Duration::ZERO, SETTLE_TIME] {
        for (path, want) in bad_files(dir.path()) {
            let err = usable_image(&path, settle).expect_err(want).to_string();
            let name = path.display().to_string();
            assert!(err.starts_with(&format!("{name}: ")) && err.contains(want), "`{err}` lacks `{want}`");
        }
    }
}

#[test]
fn a_good_image_is_decoded_and_an_old_one_passes_the_settle_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["a.jpg", "a.png", "a.bmp"] {
        let path = dir.path().join(name);
        write_image(&path, 40, 24);
        set_age(&path, 60);
        let usable = usable_image(&path, SETTLE_TIME).expect(name);
        assert_eq!(usable.image.dimensions(), (40, 24), "{name}");
        assert!(usable.warning.is_none(), "{name}");
    }
}

#[test]
fn a_file_modified_now_is_left_for_later_only_with_a_settle_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fresh.jpg");
    write_image(&path, 40, 24);
    let err = usable_image(&path, SETTLE_TIME).expect_err("modified just now").to_string();
    assert!(err.starts_with(&format!("{}: modified ", path.display())), "{err}");
    assert!(
        err.contains("ms ago, within the 2000 ms settle time: a camera may still be writing it"),
        "{err}"
    );
    assert!(matches!(
        usable_image(&path, SETTLE_TIME),
        Err(Error::ImageNotSettled { state: WriteState::Recent { settle_ms: 2000, .. }, .. })
    ));
    // Without a settle time (a dataset a step just wrote) the same file is used.
    assert_eq!(usable_image(&path, Duration::ZERO).expect("no settle time").image.dimensions(), (40, 24));
    // A time in the future is a clock set back, not a write in progress.
    set_age(&path, -3600);
    assert!(usable_image(&path, SETTLE_TIME).is_ok());
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_unread() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("pipe.jpg");
    assert!(std::process::Command::new("mkfifo").arg(&path).status().expect("mkfifo").success());
    let err = usable_image(&path, SETTLE_TIME).expect_err("fifo").to_string();
    assert!(err.contains("not a regular file"), "{err}");
}

/// TIFF, which cameras write and Ultralytics lists, decodes (it was listed by its extension and then
/// refused as a format not supported).
#[test]
fn a_tiff_frame_is_usable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("frame.tiff");
    let mut pixels = image::RgbImage::new(32, 24);
    for (x, y, p) in pixels.enumerate_pixels_mut() {
        *p = image::Rgb([(x * 7) as u8, (y * 9) as u8, 200]);
    }
    pixels.save_with_format(&path, image::ImageFormat::Tiff).expect("write a TIFF");
    set_age(&path, 60);
    let usable = usable_image(&path, SETTLE_TIME).expect("a TIFF frame is usable");
    assert_eq!(usable.image, pixels);
}

/// A frame over the cap a step was given is refused before decoding, naming the cap and what
/// decoding it would hold; at the cap it is read.
#[test]
fn a_frame_over_the_pixel_cap_is_refused_naming_the_cap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("frame.png");
    image::RgbImage::new(40, 30).save(&path).expect("write a PNG");
    set_age(&path, 60);
    let err = super::usable_image_within(&path, SETTLE_TIME, 1199).expect_err("over the cap");
    assert!(matches!(err, Error::ImageOverCap { width: 40, height: 30, limit: 1199, .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("40x30 is more than the cap of 1199 pixels (--max-pixels"), "{text}");
    assert!(super::usable_image_within(&path, SETTLE_TIME, 1200).is_ok());
}

#[test]
fn the_cap_for_a_board_keeps_a_decoded_frame_within_a_32nd_of_its_memory() {
    let gib = |g: u64| g << 30;
    // 4 GB: an 8K frame passes, a 13000² one does not.
    let four = super::pixel_cap_for(gib(4));
    assert!(four > 7680 * 4320 && four < 13_000 * 13_000, "{four}");
    assert!(gib(4) / 32 - four * 3 < 3, "{four}");
    assert_eq!(super::pixel_cap_for(gib(64)), crate::imageio::MAX_PIXELS);
}
