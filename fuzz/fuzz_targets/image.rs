//! Fuzz target for image headers and decoding (PNG, JPEG through libjpeg-turbo, BMP, WebP): the
//! header reader and the dataset checks on any bytes, and a full decode of what declares at most
//! 4 megapixels (larger images are refused by size before decoding; decoding them here would only
//! slow the fuzzer). Errors are fine; a panic, an abort, a hang or running out of memory is a finding.

#![no_main]

use std::path::Path;

use headroom_core::dataset::verify::verify_bytes;
use headroom_core::imageio::{decode_rgb, read_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let path = Path::new("/nonexistent/images/a.jpg");
    let Ok(header) = read_header(path, bytes) else { return };
    if u64::from(header.width) * u64::from(header.height) > 4_000_000 {
        return;
    }
    let _ = verify_bytes(path, bytes);
    if let Ok(image) = decode_rgb(path, bytes) {
        let (w, h) = header.displayed_size();
        assert_eq!(image.dimensions(), (w, h), "decoded size differs from the header's");
    }
});
