//! `headroom export`: deployable variants of a detector, each measured against the FP32 file (size,
//! ONNX Runtime CPU time per image, mAP50-95 on a val split when given):
//!
//! - `--fp16`: weights and compute in float16, inputs, outputs and the head's decode in float32;
//! - `--int8`: Q/DQ ONNX (per-channel int8 weights, per-tensor int8 activations on every Conv
//!   outside the decode) calibrated on `--calib` images, plus the TensorRT calibration cache for
//!   implicit INT8 (`<stem>.int8.calib`); `--sensitivity` keeps the Convs whose quantization hurts
//!   most in float until the mAP drop is within `--max-drop`;
//! - `--engine`: TensorRT engines built with trtexec where it exists, else the command to run on
//!   the device.
//!
//! The files of one export appear together or not at all (`export_publish.rs`); Ctrl-C or SIGTERM
//! stops at the next stage, publishes nothing and exits 130 or 143.
//!
//! Details in docs/ONNX.md ("FP16 export", "INT8 export", "Writing the files").

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use headroom_core::fsio::FileSet;
use headroom_onnx::quant::Method;

use super::Outcome;
use super::device_arg::{DEVICE_VALUES, DeviceArg, device_arg};
use super::interrupt::Interrupt;

#[path = "export_engine.rs"]
mod engine;
#[cfg(feature = "onnxruntime")]
#[path = "export_int8.rs"]
mod int8;
#[path = "export_publish.rs"]
mod publish;

use engine::{EngineRow, build_engines, engine_jobs};

/// Calibration method names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodArg {
    /// The largest absolute value seen.
    Minmax,
    /// `--percentile` of the absolute values.
    Percentile,
    /// KL-divergence search, as TensorRT's EntropyCalibration2.
    Entropy,
}

/// Arguments of `headroom export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The detector to export (an Ultralytics export, or a `headroom train` result).
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// Write `<stem>.fp16.onnx`.
    #[arg(long)]
    pub fp16: bool,
    /// Write `<stem>.int8.onnx` (Q/DQ) and `<stem>.int8.calib` (TensorRT calibration cache); needs
    /// --calib.
    #[arg(long)]
    pub int8: bool,
    /// Calibration images: a folder (searched recursively) or a data.yaml (its train split).
    #[arg(long, value_name = "DIR|data.yaml")]
    pub calib: Option<PathBuf>,
    /// At most this many calibration images, evenly spread over the sorted list. An image that
    /// cannot be used (empty, truncated, under 10 pixels a side, not decodable) is skipped with a
    /// warning, as `headroom label` skips it; calibration fails only when none is left.
    #[arg(long, default_value_t = 500, value_parser = super::provider_args::count_arg::<1, 100000>)]
    pub calib_images: usize,
    /// Which calibration images are too new to read yet.
    #[command(flatten)]
    pub settle: super::settle_arg::SettleArgs,
    /// How each tensor's range is chosen from its calibration histogram (percentile by default:
    /// the most accurate on the benchmarks of docs/BENCHMARKS.md "Export").
    #[arg(long, value_enum, default_value_t = MethodArg::Percentile)]
    pub method: MethodArg,
    /// The percentile kept by `--method percentile`.
    #[arg(long, default_value_t = 99.99, value_parser = percentile_arg)]
    pub percentile: f64,
    /// Keep the Convs whose INT8 error is largest in float until the mAP50-95 drop on --data's val
    /// split is at most --max-drop (Convs ranked by the output error each causes alone).
    #[arg(long, requires = "data")]
    pub sensitivity: bool,
    /// The mAP50-95 drop (points) --sensitivity allows.
    #[arg(long, default_value_t = 1.0, value_parser = drop_arg)]
    pub max_drop: f64,
    /// Input size for calibrating a model with a dynamic input (written into the exported files'
    /// `imgsz` metadata).
    #[arg(long, value_parser = super::provider_args::whole_arg::<u32>, value_name = "N")]
    pub imgsz: Option<u32>,
    /// The TensorRT version the calibration cache and engine names are for (JetPack 6.1/6.2: 10.3.0).
    #[arg(long, default_value = "10.3.0", value_name = "X.Y.Z")]
    pub trt_version: headroom_trt::TrtVersion,
    /// Build TensorRT engines of the exported files (fp16 from the FP32 model, int8 from the Q/DQ
    /// model) with trtexec; without trtexec, print the command to run on the device and exit 1.
    #[arg(long)]
    pub engine: bool,
    /// trtexec to use [default: $TRTEXEC, JetPack's /usr/src/tensorrt/bin/trtexec, then PATH].
    #[arg(long, value_name = "PATH")]
    pub trtexec: Option<PathBuf>,
    /// trtexec's builder workspace (e.g. 1GiB) [default: half the training budget of the --board
    /// preset (memory less its reserve), TensorRT's own default for other names].
    #[arg(long, value_name = "SIZE", value_parser = headroom_plan::parse_size)]
    pub workspace: Option<u64>,
    /// The board the engines are for: its name goes into engine file names and sidecars (a preset
    /// of configs/devices.toml or --devices, whose budget bounds --workspace, or any name);
    /// `auto`: the preset of this board when one matches it, else `jetson`.
    #[arg(long, default_value = "auto", value_name = "NAME|auto")]
    pub board: String,
    /// More board presets (configs/devices.toml's form), for --board.
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
    /// Where ONNX Runtime runs the calibration and the measurements: cpu, cuda, cuda:N; auto:
    /// cuda:0 when this build has the CUDA provider and a GPU is visible. Default cpu, so that the
    /// times are comparable from board to board. (trtexec builds engines on its own default GPU.)
    #[arg(long, default_value = "cpu", value_name = DEVICE_VALUES, value_parser = device_arg)]
    pub device: DeviceArg,
    /// Output folder [default: the model's folder]. The files appear there together once all are
    /// written (Ctrl-C/SIGTERM before that: none, exit 130/143); one export per model at a time.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Score each file on this dataset's val split (mAP50-95, Ultralytics `val`'s conventions).
    #[arg(long, value_name = "data.yaml")]
    pub data: Option<PathBuf>,
    /// Replace existing outputs (all of them at once, when every one is written).
    #[arg(long)]
    pub force: bool,
    /// ONNX Runtime threads (0: its default).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn percentile_arg(text: &str) -> Result<f64, String> {
    let p: f64 = text.parse().map_err(|_| format!("`{text}` is not a number"))?;
    if p > 50.0 && p <= 100.0 { Ok(p) } else { Err(format!("{p} is not a percentile in (50, 100]")) }
}

fn drop_arg(text: &str) -> Result<f64, String> {
    let d: f64 = text.parse().map_err(|_| format!("`{text}` is not a number"))?;
    if (0.0..=100.0).contains(&d) { Ok(d) } else { Err(format!("{d} is not a drop in points (0 to 100)")) }
}

impl Args {
    /// The board name of engine files and sidecars, and its preset when one of that name exists:
    /// `--board NAME` as given; `auto` the preset this board matches, else `jetson`.
    pub fn board(&self) -> (String, Option<headroom_plan::DevicePreset>) {
        let devices = headroom_plan::load_all(self.devices.as_deref()).unwrap_or_default();
        if self.board != "auto" {
            let preset = headroom_plan::find_device(&devices, &self.board).ok().cloned();
            return (self.board.clone(), preset);
        }
        let (model, mem) = headroom_plan::read_board();
        match headroom_plan::detect(&devices, model.as_deref(), mem) {
            Ok(found) if found.known => (found.preset.name.clone(), Some(found.preset)),
            _ => ("jetson".into(), None),
        }
    }

    /// The calibration method asked for.
    #[cfg_attr(not(feature = "onnxruntime"), allow(dead_code))]
    pub fn method(&self) -> Method {
        match self.method {
            MethodArg::Minmax => Method::MinMax,
            MethodArg::Percentile => Method::Percentile(self.percentile),
            MethodArg::Entropy => Method::Entropy,
        }
    }
}

/// One file of the report.
#[derive(Debug, serde::Serialize)]
pub(super) struct Row {
    precision: &'static str,
    path: PathBuf,
    bytes: u64,
    ms_per_image: Option<f64>,
    map50_95: Option<f64>,
}

/// The files an export writes.
#[derive(Debug)]
struct Outputs {
    fp16: PathBuf,
    int8: PathBuf,
    calib: PathBuf,
}

/// Runs `headroom export`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    anyhow::ensure!(args.fp16 || args.int8, "nothing to export: ask for --fp16 and/or --int8");
    anyhow::ensure!(
        !args.int8 || args.calib.is_some(),
        "--int8 needs calibration images: --calib DIR|data.yaml"
    );
    let model = load_fp32(&args.model)?;
    check_input_size(args, &model)?;
    let stem = args.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = match &args.out {
        Some(dir) => dir.clone(),
        None => args.model.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let outputs = Outputs {
        fp16: dir.join(format!("{stem}.fp16.onnx")),
        int8: dir.join(format!("{stem}.int8.onnx")),
        calib: dir.join(format!("{stem}.int8.calib")),
    };
    if args.engine {
        tracing::info!("engines for the board `{}` (--board {})", args.board().0, args.board);
    }
    if let Some(load) = &args.devices {
        headroom_plan::load_all(Some(load))?;
    }
    let interrupt = Interrupt::install()?;
    anyhow::ensure!(!dir.exists() || dir.is_dir(), "--out {}: exists and is not a folder", dir.display());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = publish::lock(&dir, &stem)?;
    publish::clean_up(&dir, &stem, &output_names(args, &outputs))?;
    let mut planned = Vec::new();
    if args.fp16 {
        planned.push(&outputs.fp16);
    }
    if args.int8 {
        planned.extend([&outputs.int8, &outputs.calib]);
    }
    for path in &planned {
        anyhow::ensure!(args.force || !path.exists(), "{} exists: add --force to replace it", path.display());
    }
    let mut set = FileSet::new(publish::journal(&dir, &stem));
    let made = make_files(&model, args, &outputs, &mut set, &interrupt);
    if let Some(signal) = interrupt.signal() {
        drop(set);
        eprintln!(
            "stopped by {}: nothing published (an export's files appear together or not at all); rerun to export",
            super::interrupt::signal_name(signal)
        );
        return Ok(Outcome::Interrupted(signal));
    }
    let Made { rows, int8, engines } = made?;
    publish::publish(set)?;
    print_report(args, &rows, int8.as_ref(), engines.as_ref())?;
    match engines {
        Some(Err(message)) => {
            eprintln!("{message}");
            Ok(Outcome::CheckFailed)
        }
        _ => Ok(Outcome::Success),
    }
}

/// The model to export, refused when it is one of headroom's own FP16 or INT8 exports (naming the
/// FP32 file to export instead).
fn load_fp32(path: &Path) -> anyhow::Result<headroom_onnx::Model> {
    let model = match headroom_onnx::Model::load(path) {
        Err(headroom_onnx::Error::Quantized { path, nodes }) => anyhow::bail!(
            "{}: {nodes} QuantizeLinear/DequantizeLinear nodes: this is an INT8 export already; export {}",
            path.display(),
            headroom_onnx::fp32_source(&path)
        ),
        other => other?,
    };
    anyhow::ensure!(
        !model.has_float16_weights(),
        "{}: its weights are float16: this is an FP16 export already; export {}",
        path.display(),
        headroom_onnx::fp32_source(path)
    );
    Ok(model)
}

/// A dynamic input needs `--imgsz` for INT8; `--imgsz` must fit the model.
fn check_input_size(args: &Args, model: &headroom_onnx::Model) -> anyhow::Result<()> {
    use headroom_onnx::dim::format_shape;
    let inspection = headroom_onnx::inspect::inspect(model)?;
    if args.int8 && inspection.dynamic && args.imgsz.is_none() {
        let exported = match model.metadata.imgsz {
            Some([h, w]) => format!(" (it was exported at {w}x{h})"),
            None => String::new(),
        };
        anyhow::bail!(
            "{}: the input is dynamic {}: INT8 ranges hold for one size, give --imgsz{exported}",
            args.model.display(),
            format_shape(&inspection.input_shape),
        );
    }
    if let Some(size) = args.imgsz {
        anyhow::ensure!(
            size >= 32 && size.is_multiple_of(32) && size <= 4096,
            "--imgsz {size}: must be a multiple of 32 between 32 and 4096"
        );
        anyhow::ensure!(
            inspection.dynamic
                || inspection.input_shape.iter().skip(2).all(|d| d.known() == Some(i64::from(size))),
            "--imgsz {size}: {} has a static input {}: export it again at that size, or drop --imgsz",
            args.model.display(),
            format_shape(&inspection.input_shape)
        );
    }
    Ok(())
}

/// The file names an export with `args` may write (ONNX files, cache, engines and sidecars).
fn output_names(args: &Args, outputs: &Outputs) -> Vec<String> {
    let mut paths = vec![outputs.fp16.clone(), outputs.int8.clone(), outputs.calib.clone()];
    for job in engine_jobs(args, outputs) {
        paths.push(headroom_trt::EngineInfo::sidecar_path(&job.engine));
        paths.push(job.engine);
    }
    paths.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect()
}

/// What [`make_files`] made, for the report.
struct Made {
    rows: Vec<Row>,
    int8: Option<Int8Summary>,
    engines: Option<Result<Vec<EngineRow>, String>>,
}

/// Writes every output into `set` (unpublished) and measures it; stops with an error at the next
/// stage once `interrupt` has a signal.
fn make_files(
    model: &headroom_onnx::Model,
    args: &Args,
    outputs: &Outputs,
    set: &mut FileSet,
    interrupt: &Interrupt,
) -> anyhow::Result<Made> {
    let stop = || interrupt.signal().is_some();
    let stage = |name: &str| {
        if stop() { Err(anyhow::anyhow!("stopped on request before {name}")) } else { Ok(()) }
    };
    let mut fp16 = None;
    if args.fp16 {
        let (bytes, report) =
            headroom_onnx::fp16::to_fp16(model, &headroom_onnx::fp16::Fp16Options::default())?;
        let bytes = with_imgsz(model, bytes, args.imgsz)?;
        fp16 = Some(set.write(&outputs.fp16, &bytes)?);
        tracing::info!(
            "{}: {} nodes in fp16, {} kept fp32, {} casts, {} values clamped to the fp16 range",
            outputs.fp16.display(),
            report.converted_nodes,
            report.kept_nodes.len(),
            report.casts_inserted,
            report.clamped
        );
    }
    stage("reading the val split")?;
    // The val split is read once and scores every file (and every step of --sensitivity).
    #[cfg(feature = "onnxruntime")]
    let val = args.data.as_deref().map(int8::ValSplit::load).transpose()?;
    #[cfg(not(feature = "onnxruntime"))]
    let val: Option<()> = None;
    let val = val.as_ref();
    stage("calibration")?;
    let int8 = if args.int8 { Some(export_int8(model, args, outputs, val, set, &stop)?) } else { None };
    stage("measuring")?;
    let mut rows = vec![measure("fp32", &args.model, &args.model, args, val)?];
    if let Some(fp16) = &fp16 {
        rows.push(measure("fp16", fp16, &outputs.fp16, args, val)?);
    }
    if let Some((_, int8)) = &int8 {
        rows.push(measure("int8", int8, &outputs.int8, args, val)?);
    }
    stage("building engines")?;
    let int8_written = int8.as_ref().map(|(_, path)| path.as_path());
    let engines = if args.engine {
        Some(build_engines(model, args, outputs, (set, int8_written), &stop))
    } else {
        None
    };
    stage("publishing")?;
    Ok(Made { rows, int8: int8.map(|(summary, _)| summary), engines })
}

/// `bytes` with the `imgsz` metadata set to `[n, n]` when `imgsz` is given (a dynamic model
/// calibrated at that size).
fn with_imgsz(model: &headroom_onnx::Model, bytes: Vec<u8>, imgsz: Option<u32>) -> anyhow::Result<Vec<u8>> {
    let Some(n) = imgsz else { return Ok(bytes) };
    let meta = [("imgsz".to_string(), format!("[{n}, {n}]"))];
    Ok(headroom_onnx::patch::write_weights(&bytes, &model.path, &Default::default(), &meta)?)
}

/// What the INT8 export did, for the report.
#[derive(Debug, Default, serde::Serialize)]
pub(super) struct Int8Summary {
    method: String,
    calibration_images: usize,
    /// Calibration images skipped, each with its file and why.
    skipped_images: Vec<String>,
    quantized_convs: usize,
    float_convs: Vec<String>,
    skipped_convs: Vec<(String, String)>,
    cache_tensors: usize,
    trt_version: String,
    sensitivity: Vec<SensitivityStep>,
}

/// One step of the sensitivity search: Convs kept float and the mAP50-95 then.
#[derive(Debug, serde::Serialize)]
pub(super) struct SensitivityStep {
    float_convs: usize,
    map50_95: f64,
}

#[cfg(feature = "onnxruntime")]
fn export_int8(
    model: &headroom_onnx::Model,
    args: &Args,
    outputs: &Outputs,
    val: Option<&int8::ValSplit>,
    set: &mut FileSet,
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<(Int8Summary, PathBuf)> {
    let result = int8::export(model, args, val, stop)?;
    let bytes = with_imgsz(model, result.model, args.imgsz)?;
    let written = set.write(&outputs.int8, &bytes)?;
    set.write(&outputs.calib, result.cache.as_bytes())?;
    tracing::info!(
        "{}: {} Convs in int8, {} kept float; {}: {} tensors",
        outputs.int8.display(),
        result.summary.quantized_convs,
        result.summary.float_convs.len(),
        outputs.calib.display(),
        result.summary.cache_tensors
    );
    Ok((result.summary, written))
}

#[cfg(not(feature = "onnxruntime"))]
fn export_int8(
    _model: &headroom_onnx::Model,
    _args: &Args,
    _outputs: &Outputs,
    _val: Option<&()>,
    _set: &mut FileSet,
    _stop: &dyn Fn() -> bool,
) -> anyhow::Result<(Int8Summary, PathBuf)> {
    Err(headroom_infer::Error::FeatureDisabled { feature: "onnxruntime" }.into())
}

fn print_report(
    args: &Args,
    rows: &[Row],
    int8: Option<&Int8Summary>,
    engines: Option<&Result<Vec<EngineRow>, String>>,
) -> anyhow::Result<()> {
    if args.json {
        let engines = engines.and_then(|e| e.as_ref().ok());
        let report = serde_json::json!({ "files": rows, "int8": int8, "engines": engines });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(());
    }
    println!("{:<6} {:>10} {:>14} {:>10}  file", "", "MB", "ms per image", "mAP50-95");
    for r in rows {
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
    if let Some(s) = int8 {
        println!(
            "int8: {} calibration ({} images{}), {} Convs int8, {} kept float{}; cache: {} tensors for TensorRT {}",
            s.method,
            s.calibration_images,
            match s.skipped_images.len() {
                0 => String::new(),
                n => format!(", {n} skipped"),
            },
            s.quantized_convs,
            s.float_convs.len(),
            if s.float_convs.is_empty() { String::new() } else { format!(" ({})", s.float_convs.join(", ")) },
            s.cache_tensors,
            s.trt_version
        );
    }
    if let Some(Ok(engines)) = engines {
        for e in engines {
            println!("engine {}: {} (+ {})", e.precision, e.engine.display(), e.sidecar.display());
        }
    }
    Ok(())
}

/// Size, ONNX Runtime CPU time per image (median of 20 runs on a grey image, preprocessing and
/// decoding included) and mAP50-95 on `--data`'s val split, of the file at `path`, reported as
/// `shown` (where it is published).
#[cfg(feature = "onnxruntime")]
fn measure(
    precision: &'static str,
    path: &Path,
    shown: &Path,
    args: &Args,
    val: Option<&int8::ValSplit>,
) -> anyhow::Result<Row> {
    use headroom_infer::decode::DecodeOptions;
    let bytes = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?.len();
    let mut detector = int8::open_detector(path, args)?;
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
    let map50_95 = val.map(|v| v.map(&mut detector)).transpose()?;
    Ok(Row {
        precision,
        path: shown.to_path_buf(),
        bytes,
        ms_per_image: Some(times[times.len() / 2]),
        map50_95,
    })
}

#[cfg(not(feature = "onnxruntime"))]
fn measure(
    precision: &'static str,
    path: &Path,
    shown: &Path,
    _args: &Args,
    _val: Option<&()>,
) -> anyhow::Result<Row> {
    let bytes = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?.len();
    Ok(Row { precision, path: shown.to_path_buf(), bytes, ms_per_image: None, map50_95: None })
}
