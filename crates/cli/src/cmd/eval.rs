//! `headroom eval`: precision, recall, mAP50 and mAP50-95 of an ONNX detector on a labelled split.

use std::path::PathBuf;

use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
use headroom_core::preprocess::Preprocess;
use headroom_infer::decode::DecodeOptions;
use headroom_infer::eval::EvalReport;
use headroom_infer::provider::SessionOptions;

use super::Outcome;
use super::decode_args::DecodeArgs;

/// Arguments of `headroom eval`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The detector, an Ultralytics ONNX export (or a headroom export of one).
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// The dataset description (Ultralytics `data.yaml`).
    #[arg(long, value_name = "data.yaml")]
    pub data: PathBuf,
    /// Which split to evaluate.
    #[arg(long, value_enum, default_value_t = Split::Val)]
    pub split: Split,
    /// Minimum confidence of a kept box (Ultralytics `val`'s default: mAP needs the low-confidence
    /// boxes too).
    #[arg(long, default_value_t = 0.001)]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub conf: f32,
    /// Detection thresholds.
    #[command(flatten)]
    pub thresholds: DecodeArgs,
    /// How to prepare images and where to match boxes: `val` reproduces Ultralytics' `val`
    /// (resize the long side first, letterbox without enlarging, match in model-input pixels);
    /// `predict` prepares images as `headroom label` and Ultralytics' `predict` do and matches in
    /// image pixels.
    #[arg(long, value_enum, default_value_t = Preprocess::Val)]
    pub preprocess: Preprocess,
    /// Execution providers.
    #[command(flatten)]
    pub provider: super::provider_args::ProviderArgs,
    /// Fail on the first bad image or label file instead of skipping it with a warning.
    #[arg(long)]
    pub strict: bool,
    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file (atomically).
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<PathBuf>,
}

/// Runs `headroom eval`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let config = DataConfig::load(&args.data)?;
    let split = load_split(&config, args.split, LoadOptions { strict: args.strict })?;
    anyhow::ensure!(
        !split.images.is_empty(),
        "{}: the {} split has no usable image",
        args.data.display(),
        split.split
    );
    split.require_labels(&args.data)?;
    let decode = args.thresholds.apply(args.conf, DecodeOptions::val())?;
    let session = args.provider.session_options()?;
    let report = evaluate(args, &config, &split.images, &decode, &session)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    if let Some(path) = &args.json_out {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        headroom_core::fsio::write_atomic(path, text.as_bytes())?;
    }
    Ok(Outcome::Success)
}

#[cfg(feature = "onnxruntime")]
fn evaluate(
    args: &Args,
    config: &DataConfig,
    images: &[headroom_core::dataset::ImageRecord],
    decode: &DecodeOptions,
    session: &SessionOptions,
) -> anyhow::Result<EvalReport> {
    use anyhow::Context as _;
    let mut detector = headroom_infer::detector::Detector::open(&args.model, session)?;
    let bar = super::progress::bar(images.len() as u64, "eval");
    let preprocess = args.preprocess;
    let report =
        headroom_infer::eval::evaluate(&mut detector, images, &config.names, decode, preprocess, |n| {
            bar.set_position(n as u64)
        });
    super::progress::end(&bar, report.is_ok());
    let report =
        report.with_context(|| format!("evaluating {} on {}", args.model.display(), args.data.display()))?;
    tracing::info!(
        "{} images in {:.1} s ({:.1} images/s)",
        images.len(),
        report.seconds,
        images.len() as f64 / report.seconds.max(1e-9)
    );
    Ok(report)
}

#[cfg(not(feature = "onnxruntime"))]
fn evaluate(
    _args: &Args,
    _config: &DataConfig,
    _images: &[headroom_core::dataset::ImageRecord],
    _decode: &DecodeOptions,
    _session: &SessionOptions,
) -> anyhow::Result<EvalReport> {
    Err(headroom_infer::Error::FeatureDisabled { feature: "onnxruntime" }.into())
}

/// Prints the table Ultralytics prints after `val`.
fn print_table(report: &EvalReport) {
    print!("{}", report.metrics.table(&report.names));
}
