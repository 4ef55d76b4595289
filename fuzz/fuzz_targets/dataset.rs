//! Fuzz target for the dataset text parsers: a label file (`class cx cy w h` rows, polygons, any
//! bytes) and a data.yaml. The first byte picks the parser and the class count; errors are fine,
//! a panic, an abort, a hang or running out of memory is a finding.

#![no_main]

use std::path::Path;

use headroom_core::dataset::DataConfig;
use headroom_core::dataset::labels::parse_label_rows;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let Some((&selector, rest)) = bytes.split_first() else { return };
    let Ok(text) = std::str::from_utf8(rest) else { return };
    if selector & 1 == 0 {
        let nc = usize::from(selector >> 1);
        if let Ok(rows) = parse_label_rows(Path::new("/nonexistent/labels/a.txt"), text, nc) {
            assert!(rows.iter().all(|r| r.label.class < nc), "a class outside 0..nc was accepted");
        }
    } else {
        // A folder that does not exist: relative split paths resolve to nothing on disk.
        let _ = DataConfig::from_yaml_str(Path::new("/nonexistent/headroom-fuzz/data.yaml"), text);
    }
});
