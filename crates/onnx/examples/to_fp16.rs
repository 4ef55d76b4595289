//! Converts a model to float16 and prints the report as JSON.
//!
//!     cargo run -p headroom-onnx --example to_fp16 -- in.onnx out.onnx [--fp16-io] [--fp16-decode]
//!         [--block NODE]...
//!
//! `--fp16-io`: inputs and outputs float16 too (`keep_io_types: false`); `--fp16-decode`: the decode
//! in float16 too (`keep_decode_fp32: false`); `--block NODE`: keep that node float32.
//!
//! Until `headroom export` exists, this makes the files `scripts/fixtures/fp16_check.py` compares.

use std::path::PathBuf;

use headroom_onnx::Model;
use headroom_onnx::fp16::{Fp16Options, to_fp16};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut options = Fp16Options::default();
    let mut paths = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--fp16-io" => options.keep_io_types = false,
            "--fp16-decode" => options.keep_decode_fp32 = false,
            "--block" => options.node_block_list.extend(args.next()),
            _ => paths.push(PathBuf::from(arg)),
        }
    }
    let [input, output] = paths.as_slice() else {
        return Err("usage: to_fp16 IN.onnx OUT.onnx [--fp16-io] [--fp16-decode] [--block NODE]...".into());
    };
    let model = Model::load(input)?;
    let (bytes, report) = to_fp16(&model, &options)?;
    std::fs::write(output, &bytes)?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
