//! `headroom export`: deployable variants of a detector. Today FP16 (weights and compute in float16,
//! inputs, outputs and the head's decode in float32; docs/ONNX.md), measured against the FP32 file:
//! size, ONNX Runtime CPU time per image, and mAP50-95 on a val split when given. INT8 and TensorRT
//! engines are next (issue "Export").

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Outcome;

/// Arguments of `headroom export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The detector to export (an Ultralytics export, or a `headroom train` result).
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// Write `<stem>.fp16.onnx`.
    #[arg(long)]
    pub fp16: bool,
    /// Output folder [default: the model's folder].
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Score each file on this dataset's val split (mAP50-95, Ultralytics `val`'s conventions).
    #[arg(long, value_name = "data.yaml")]
    pub data: Option<PathBuf>,
    /// Replace existing outputs.
    #[arg(long)]
    pub force: bool,
    /// ONNX Runtime threads (0: its default).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// One file of the report.
#[derive(Debug, serde::Serialize)]
struct Row {
    precision: &'static str,
    path: PathBuf,
    bytes: u64,
    ms_per_image: Option<f64>,
    map50_95: Option<f64>,
}

/// Runs `headroom export`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    anyhow::ensure!(args.fp16, "nothing to export: ask for --fp16 (INT8 and TensorRT engines come next)");
    let model = headroom_onnx::Model::load(&args.model)?;
    let stem = args.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => args.model.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let path = dir.join(format!("{stem}.fp16.onnx"));
    anyhow::ensure!(args.force || !path.exists(), "{} exists: add --force to replace it", path.display());
    let (bytes, report) = headroom_onnx::fp16::to_fp16(&model, &headroom_onnx::fp16::Fp16Options::default())?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    headroom_core::fsio::write_atomic(&path, &bytes)?;
    tracing::info!(
        "{}: {} nodes in fp16, {} kept fp32, {} casts, {} values clamped to the fp16 range",
        path.display(),
        report.converted_nodes,
        report.kept_nodes.len(),
        report.casts_inserted,
        report.clamped
    );
    let rows = vec![measure("fp32", &args.model, args)?, measure("fp16", &path, args)?];
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        println!("{:<6} {:>10} {:>14} {:>10}  file", "", "MB", "ms per image", "mAP50-95");
        for r in &rows {
            let ms = r.ms_per_image.map_or("-".into(), |v| format!("{v:.2}"));
            let map = r.map50_95.map_or("-".into(), |v| format!("{v:.4}"));
            println!(
                "{:<6} {:>10.2} {:>14} {:>10}  {}",
                r.precision,
                r.bytes as f64 / 1e6,
                ms,
                map,
                r.path.display()
            );
        }
    }
    Ok(Outcome::Success)
}

/// Size, ONNX Runtime CPU time per image (median of 20 runs on a grey image, preprocessing and
/// decoding included) and mAP50-95 on `--data`'s val split.
#[cfg(feature = "onnxruntime")]
fn measure(precision: &'static str, path: &Path, args: &Args) -> anyhow::Result<Row> {
    use headroom_infer::decode::DecodeOptions;
    let bytes = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?.len();
    let options =
        headroom_infer::provider::SessionOptions { intra_threads: args.threads, ..Default::default() };
    let mut detector = headroom_infer::detector::Detector::open(path, &options)?;
    let (w, h) = detector.input_size();
    let grey = image::RgbImage::from_pixel(w, h, image::Rgb([114, 114, 114]));
    let mut times = Vec::new();
    for _ in 0..21 {
        let started = std::time::Instant::now();
        detector.detect(&grey, &DecodeOptions::predict())?;
        times.push(started.elapsed().as_secs_f64() * 1e3);
    }
    times.remove(0); // the first run allocates
    times.sort_by(f64::total_cmp);
    let map50_95 = match &args.data {
        Some(data) => {
            let config = headroom_core::dataset::DataConfig::load(data)?;
            let split = headroom_core::dataset::Split::Val;
            let images = headroom_core::dataset::load_split(&config, split, Default::default())?.images;
            Some(super::eval::val_metrics(&mut detector, &images, &config.names)?.map50_95)
        }
        None => None,
    };
    Ok(Row {
        precision,
        path: path.to_path_buf(),
        bytes,
        ms_per_image: Some(times[times.len() / 2]),
        map50_95,
    })
}

#[cfg(not(feature = "onnxruntime"))]
fn measure(precision: &'static str, path: &Path, _args: &Args) -> anyhow::Result<Row> {
    let bytes = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?.len();
    Ok(Row { precision, path: path.to_path_buf(), bytes, ms_per_image: None, map50_95: None })
}
