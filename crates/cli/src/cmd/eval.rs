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
    #[arg(long, value_enum, default_value_t = SplitArg::Val)]
    pub split: SplitArg,
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
    #[arg(long, value_enum, default_value_t = PreprocessArg::Val)]
    pub preprocess: PreprocessArg,
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

/// Dataset splits, as command-line values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitArg {
    /// `train`.
    Train,
    /// `val`.
    Val,
    /// `test`.
    Test,
}

/// Image preparation conventions, as command-line values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PreprocessArg {
    /// Ultralytics `val` (fixed-shape model).
    Val,
    /// Ultralytics `predict`.
    Predict,
}

impl From<PreprocessArg> for Preprocess {
    fn from(preprocess: PreprocessArg) -> Self {
        match preprocess {
            PreprocessArg::Val => Preprocess::Val,
            PreprocessArg::Predict => Preprocess::Predict,
        }
    }
}

impl From<SplitArg> for Split {
    fn from(split: SplitArg) -> Self {
        match split {
            SplitArg::Train => Split::Train,
            SplitArg::Val => Split::Val,
            SplitArg::Test => Split::Test,
        }
    }
}

/// Runs `headroom eval`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let config = DataConfig::load(&args.data)?;
    let split = load_split(&config, args.split.into(), LoadOptions { strict: args.strict })?;
    anyhow::ensure!(
        !split.images.is_empty(),
        "{}: the {} split has no usable image",
        args.data.display(),
        split.split
    );
    check_labels_found(args, &split)?;
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

/// A split without label files gives meaningless numbers (every box a false positive): refuse it
/// when no image has one, warn when some lack one (Ultralytics warns "no labels found").
fn check_labels_found(args: &Args, split: &headroom_core::dataset::LoadedSplit) -> anyhow::Result<()> {
    let report = &split.report;
    let where_ = split
        .images
        .first()
        .and_then(|r| r.label.parent())
        .map_or_else(String::new, |p| format!(" (looked for them in {})", p.display()));
    anyhow::ensure!(
        report.labels_found > 0,
        "{}: no image of the {} split has a label file{where_}; without labels there is nothing to \
         measure (a folder of unlabelled images is for `headroom label`)",
        args.data.display(),
        split.split
    );
    if report.labels_missing > 0 {
        tracing::warn!(
            "{} of {} images of the {} split have no label file{where_}: they count as images without \
             objects, and any box found on them as a false positive",
            report.labels_missing,
            split.images.len(),
            split.split
        );
    }
    Ok(())
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
    let preprocess = args.preprocess.into();
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
    print!("{}", table(&report.metrics, &report.names));
}

/// The table Ultralytics prints after `val`: all classes, then one row per class with ground truth.
pub(super) fn table(m: &headroom_core::metrics::Metrics, names: &[String]) -> String {
    use std::fmt::Write as _;
    let mut out = format!(
        "{:>22}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n",
        "Class", "Images", "Instances", "P", "R", "mAP50", "mAP50-95"
    );
    let mut row = |name: &str, images: usize, instances: usize, p: f64, r: f64, a50: f64, a: f64| {
        let _ = writeln!(out, "{name:>22}{images:>11}{instances:>11}{p:>11.3}{r:>11.3}{a50:>11.3}{a:>11.3}");
    };
    row("all", m.images, m.instances, m.precision, m.recall, m.map50, m.map50_95);
    for c in &m.per_class {
        let name = names.get(c.class).map(String::as_str).unwrap_or("?");
        row(name, c.images, c.instances, c.precision, c.recall, c.ap50, c.ap50_95);
    }
    out
}
