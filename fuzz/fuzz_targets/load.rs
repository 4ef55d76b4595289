//! Fuzz target for the ONNX loader: arbitrary bytes through `Model::from_bytes`, then, for what
//! loads, `inspect` and an identity weight write-back. Errors are fine; a panic, an abort, a hang
//! or running out of memory is a finding.

#![no_main]

use std::collections::BTreeMap;
use std::path::Path;

use headroom_onnx::{Model, inspect, patch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    // A directory that does not exist: relative external-data locations resolve to nothing.
    let path = Path::new("/nonexistent/headroom-fuzz/model.onnx");
    let Ok(model) = Model::from_bytes(bytes, path) else { return };
    let _ = inspect::inspect(&model);
    let unchanged = patch::write_weights(bytes, path, &BTreeMap::new(), &[]);
    if let Ok(out) = unchanged {
        assert!(out == bytes, "write_weights with no weights and no metadata changed the model");
    }
});
