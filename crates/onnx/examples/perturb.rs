//! Writes a copy of a model whose float weights carry seeded multiplicative noise: a candidate that
//! is no better than the original, for measuring how often a deploy gate is fooled
//! (scripts/bench/gate.sh).
//!
//!     cargo run -p headroom-onnx --example perturb -- IN.onnx OUT.onnx --sigma 0.01 --seed 3
//!
//! Each trained weight and bias w becomes w·(1 + sigma·u), u uniform with unit variance (splitmix64,
//! seeded); the decode's constants stay.

use std::path::PathBuf;

use headroom_onnx::Model;
use headroom_onnx::patch::{read_weights, write_weights};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (mut sigma, mut seed, mut paths) = (0.01f32, 0u64, Vec::new());
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--sigma" => sigma = args.next().ok_or("--sigma VALUE")?.parse()?,
            "--seed" => seed = args.next().ok_or("--seed N")?.parse()?,
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    let [input, output] = paths.as_slice() else {
        return Err("usage: perturb IN.onnx OUT.onnx [--sigma S] [--seed N]".into());
    };
    let bytes = std::fs::read(input)?;
    let model = Model::from_bytes(&bytes, input)?;
    let mut state = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut uniform = move || {
        // splitmix64 → [0, 1)
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f32 / (1u64 << 53) as f32
    };
    let mut weights = read_weights(&model);
    // Trained parameters only: not the decode's constants (anchors, strides, the DFL's fixed 0..15).
    weights.retain(|name, _| (name.ends_with(".weight") || name.ends_with(".bias")) && !name.contains("dfl"));
    for values in weights.values_mut() {
        for v in values.iter_mut() {
            let u = (uniform() * 2.0 - 1.0) * 3f32.sqrt();
            *v *= 1.0 + sigma * u;
        }
    }
    std::fs::write(output, write_weights(&bytes, input, &weights, &[])?)?;
    Ok(())
}
