//! `headroom inspect MODEL.onnx`: what a detector export is and where it can be split for training.

use std::path::PathBuf;

use anyhow::Context;
use headroom_onnx::Model;
use headroom_onnx::inspect::{Inspection, inspect};

use super::Outcome;

/// Arguments of `headroom inspect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The detector, an Ultralytics ONNX export (or `--model MODEL.onnx`, as the other verbs take it).
    #[arg(value_name = "MODEL.onnx", required_unless_present = "model_flag")]
    pub model: Option<PathBuf>,
    /// The detector, as the other verbs name it.
    #[arg(long = "model", id = "model_flag", value_name = "MODEL.onnx", conflicts_with = "model")]
    pub model_flag: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also run the model through ONNX Runtime and through headroom's libtorch executor on the same
    /// input and compare the outputs and the raw head tensors (largest relative difference must be
    /// at most 1e-4; 1e-2 for an FP16 export): tells whether headroom can train this model. Exit code 1
    /// when it fails.
    #[arg(long)]
    pub check: bool,
    /// Image for `--check` (letterboxed to the input size); default: a synthetic scene.
    #[arg(long, value_name = "IMG", requires = "check")]
    pub image: Option<PathBuf>,
    /// Square input size for `--check` on a dynamic model (default: its metadata `imgsz`).
    #[arg(long, value_parser = super::provider_args::whole_arg::<u32>, value_name = "N", requires = "check")]
    pub imgsz: Option<u32>,
    /// Threads for ONNX Runtime and libtorch in `--check` (0: their defaults; at most 256).
    #[arg(long, default_value_t = 0, requires = "check", value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
    /// After the check, time N forward passes of each and print the medians.
    #[arg(long, default_value_t = 0, value_name = "N", requires = "check")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub repeat: usize,
}

/// Loads, inspects and prints.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let path = args
        .model
        .as_ref()
        .or(args.model_flag.as_ref())
        .context("give the model: headroom inspect MODEL.onnx (or --model MODEL.onnx)")?;
    let (model, qdq_nodes) = Model::load_dequantized(path)?;
    let report = inspect(&model)?;
    let export = export_note(&model, qdq_nodes);
    if qdq_nodes > 0 && args.check {
        // ONNX Runtime would run the Q/DQ graph, the executor the float one: nothing to compare.
        let result = format!("result      FAIL: {}\n", export.as_deref().unwrap_or_default());
        if args.json {
            let both = serde_json::json!({ "inspection": report, "qdq_nodes": qdq_nodes, "check": null });
            println!("{}", serde_json::to_string_pretty(&both).context("serialising the report")?);
        } else {
            print!("{}{result}", headroom_onnx::inspect::table(&report));
        }
        return Ok(Outcome::CheckFailed);
    }
    if !args.check {
        if args.json {
            let mut json = serde_json::to_value(&report).context("serialising the report")?;
            if qdq_nodes > 0 {
                json["qdq_nodes"] = qdq_nodes.into();
            }
            println!("{}", serde_json::to_string_pretty(&json).context("serialising the report")?);
        } else {
            print!("{}", headroom_onnx::inspect::table(&report));
            if let Some(note) = &export {
                println!("\nexport      {note}");
            }
        }
        return Ok(Outcome::Success);
    }
    check(args, &model, &report)
}

/// What kind of export `model` is, when it is one headroom cannot train (INT8 with `qdq_nodes`
/// Q/DQ nodes, shown as the float graph it was made from; FP16), and which file to train.
fn export_note(model: &Model, qdq_nodes: usize) -> Option<String> {
    let train = headroom_onnx::fp32_source(&model.path);
    if qdq_nodes > 0 {
        Some(format!(
            "INT8 ({qdq_nodes} QuantizeLinear/DequantizeLinear nodes; shown as the float graph): \
             `headroom eval` runs it, train {train}"
        ))
    } else if model.has_float16_weights() {
        Some(format!("FP16 (float16 weights): `headroom eval` runs it, train {train}"))
    } else {
        None
    }
}

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
fn check(args: &Args, model: &Model, report: &Inspection) -> anyhow::Result<Outcome> {
    use headroom_run::parity::{CheckOptions, check};
    let options = CheckOptions {
        image: args.image.clone(),
        imgsz: args.imgsz,
        threads: args.threads,
        repeat: args.repeat,
    };
    let result = check(model, report, &options)?;
    if args.json {
        let both = serde_json::json!({ "inspection": report, "check": result });
        println!("{}", serde_json::to_string_pretty(&both).context("serialising the report")?);
    } else {
        let export = export_note(model, 0);
        print!("{}{}", headroom_onnx::inspect::table(report), result.table(export.as_deref()));
    }
    Ok(if result.passed { Outcome::Success } else { Outcome::CheckFailed })
}

#[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
fn check(_args: &Args, _model: &Model, _report: &Inspection) -> anyhow::Result<Outcome> {
    anyhow::bail!(
        "`inspect --check` needs ONNX Runtime and libtorch: rebuild with `--features onnxruntime,libtorch` \
         (scripts/setup.sh installs both)"
    )
}
