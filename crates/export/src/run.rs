//! One export, start to end: the checks before any work, the files written unpublished and
//! measured, then published together ([`export`]).

use std::path::{Path, PathBuf};

use headroom_core::fsio::FileSet;

use crate::engine::{build_engines, engine_jobs};
use crate::observer::Observer;
use crate::report::{ExportReport, FileRow, Int8Summary};
use crate::request::{ExportRequest, Int8Settings, Outputs};
use crate::{Context as _, Error, bail, ensure, publish};

/// How an export ended when it did not fail.
#[derive(Debug)]
pub enum Exported {
    /// Every file was written and published (engines may be missing: see
    /// [`ExportReport::engines_not_built`]).
    Published(Box<ExportReport>),
    /// The observer asked to stop: nothing was published.
    Stopped,
}

/// Exports `request.model` as the request asks: the checks first (a file to replace needs
/// `force`, an FP16 or INT8 file is refused as the source), then every file written into a
/// temporary, measured, and published at once under a lock on the model's stem in the output
/// folder. Once `observer` asks to stop, ends at the next stage with [`Exported::Stopped`], nothing
/// published.
pub fn export(request: &ExportRequest, observer: &dyn Observer) -> crate::Result<Exported> {
    ensure!(request.fp16 || request.int8.is_some(), "nothing to export: ask for --fp16 and/or --int8");
    let model = load_fp32(&request.model)?;
    check_input_size(request, &model)?;
    let outputs = request.outputs();
    if let Some(engine) = &request.engine {
        tracing::info!("engines for the board `{}` (--board {})", engine.board().0, engine.board);
        if let Some(load) = &engine.devices {
            headroom_plan::System::host().load_all(Some(load))?;
        }
    }
    let dir = &outputs.dir;
    ensure!(!dir.exists() || dir.is_dir(), "--out {}: exists and is not a folder", dir.display());
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = publish::lock(dir, &outputs.stem)?;
    publish::clean_up(dir, &outputs.stem, &output_names(request, &outputs))?;
    let mut planned = Vec::new();
    if request.fp16 {
        planned.push(&outputs.fp16);
    }
    if request.int8.is_some() {
        planned.extend([&outputs.int8, &outputs.calib]);
    }
    for path in &planned {
        ensure!(request.force || !path.exists(), "{} exists: add --force to replace it", path.display());
    }
    let mut set = FileSet::new(publish::journal(dir, &outputs.stem));
    let made = make_files(&model, request, &outputs, &mut set, observer);
    if observer.stop_requested() {
        drop(set);
        return Ok(Exported::Stopped);
    }
    let report = made?;
    publish::publish(set, observer)?;
    Ok(Exported::Published(Box::new(report)))
}

/// The model to export, refused when it is one of headroom's own FP16 or INT8 exports (naming the
/// FP32 file to export instead).
fn load_fp32(path: &Path) -> crate::Result<headroom_onnx::Model> {
    let model = match headroom_onnx::Model::load(path) {
        Err(headroom_onnx::Error::Quantized { path, nodes }) => bail!(
            "{}: {nodes} QuantizeLinear/DequantizeLinear nodes: this is an INT8 export already; export {}",
            path.display(),
            headroom_onnx::fp32_source(&path)
        ),
        other => other?,
    };
    ensure!(
        !model.has_float16_weights(),
        "{}: its weights are float16: this is an FP16 export already; export {}",
        path.display(),
        headroom_onnx::fp32_source(path)
    );
    Ok(model)
}

/// A dynamic input needs `imgsz` for INT8; `imgsz` must fit the model.
fn check_input_size(request: &ExportRequest, model: &headroom_onnx::Model) -> crate::Result<()> {
    use headroom_onnx::dim::format_shape;
    let inspection = headroom_onnx::inspect::inspect(model)?;
    if request.int8.is_some() && inspection.dynamic && request.imgsz.is_none() {
        let exported = match model.metadata.imgsz {
            Some([h, w]) => format!(" (it was exported at {w}x{h})"),
            None => String::new(),
        };
        bail!(
            "{}: the input is dynamic {}: INT8 ranges hold for one size, give --imgsz{exported}",
            request.model.display(),
            format_shape(&inspection.input_shape),
        );
    }
    if let Some(size) = request.imgsz {
        ensure!(
            size >= 32 && size.is_multiple_of(32) && size <= 4096,
            "--imgsz {size}: must be a multiple of 32 between 32 and 4096"
        );
        ensure!(
            inspection.dynamic
                || inspection.input_shape.iter().skip(2).all(|d| d.known() == Some(i64::from(size))),
            "--imgsz {size}: {} has a static input {}: export it again at that size, or drop --imgsz",
            request.model.display(),
            format_shape(&inspection.input_shape)
        );
    }
    Ok(())
}

/// The file names an export of `request` may write (ONNX files, cache, engines and sidecars).
fn output_names(request: &ExportRequest, outputs: &Outputs) -> Vec<String> {
    let mut paths = vec![outputs.fp16.clone(), outputs.int8.clone(), outputs.calib.clone()];
    for job in engine_jobs(request, outputs) {
        paths.push(headroom_trt::EngineInfo::sidecar_path(&job.engine));
        paths.push(job.engine);
    }
    paths.iter().filter_map(|p| p.file_name()).map(|n| n.to_string_lossy().into_owned()).collect()
}

/// Writes every output into `set` (unpublished) and measures it; stops with an error at the next
/// stage once `observer` asks to.
fn make_files(
    model: &headroom_onnx::Model,
    request: &ExportRequest,
    outputs: &Outputs,
    set: &mut FileSet,
    observer: &dyn Observer,
) -> crate::Result<ExportReport> {
    let stage = |name: &str| {
        if observer.stop_requested() {
            Err(Error::refused(format!("stopped on request before {name}")))
        } else {
            Ok(())
        }
    };
    let mut fp16 = None;
    if request.fp16 {
        let (bytes, report) =
            headroom_onnx::fp16::to_fp16(model, &headroom_onnx::fp16::Fp16Options::default())?;
        let bytes = with_imgsz(model, bytes, request.imgsz)?;
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
    // The val split is read once and scores every file (and every step of the sensitivity search).
    #[cfg(feature = "onnxruntime")]
    let val = request.data.as_deref().map(crate::int8::ValSplit::load).transpose()?;
    #[cfg(not(feature = "onnxruntime"))]
    let val: Option<()> = None;
    let val = val.as_ref();
    stage("calibration")?;
    let int8 = match &request.int8 {
        Some(settings) => Some(export_int8(model, (request, settings), outputs, (val, set), observer)?),
        None => None,
    };
    stage("measuring")?;
    let mut files = vec![measure("fp32", &request.model, &request.model, request, val)?];
    if let Some(fp16) = &fp16 {
        files.push(measure("fp16", fp16, &outputs.fp16, request, val)?);
    }
    if let Some((_, int8)) = &int8 {
        files.push(measure("int8", int8, &outputs.int8, request, val)?);
    }
    stage("building engines")?;
    let int8_written = int8.as_ref().map(|(_, path)| path.as_path());
    let engines = request.engine.as_ref().map(|settings| {
        build_engines(model, (request, settings), outputs, (set, int8_written), &|| observer.stop_requested())
    });
    stage("publishing")?;
    let (engines, engines_not_built) = match engines {
        None => (None, None),
        Some(Ok(rows)) => (Some(rows), None),
        Some(Err(message)) => (None, Some(message)),
    };
    Ok(ExportReport { files, int8: int8.map(|(summary, _)| summary), engines, engines_not_built })
}

/// `bytes` with the `imgsz` metadata set to `[n, n]` when `imgsz` is given (a dynamic model
/// calibrated at that size).
fn with_imgsz(model: &headroom_onnx::Model, bytes: Vec<u8>, imgsz: Option<u32>) -> crate::Result<Vec<u8>> {
    let Some(n) = imgsz else { return Ok(bytes) };
    let meta = [("imgsz".to_string(), format!("[{n}, {n}]"))];
    Ok(headroom_onnx::patch::write_weights(&bytes, &model.path, &Default::default(), &meta)?)
}

#[cfg(feature = "onnxruntime")]
fn export_int8(
    model: &headroom_onnx::Model,
    (request, settings): (&ExportRequest, &Int8Settings),
    outputs: &Outputs,
    (val, set): (Option<&crate::int8::ValSplit>, &mut FileSet),
    observer: &dyn Observer,
) -> crate::Result<(Int8Summary, PathBuf)> {
    let result = crate::int8::export(model, (request, settings), val, observer)?;
    let bytes = with_imgsz(model, result.model, request.imgsz)?;
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
    _settings: (&ExportRequest, &Int8Settings),
    _outputs: &Outputs,
    _val: (Option<&()>, &mut FileSet),
    _observer: &dyn Observer,
) -> crate::Result<(Int8Summary, PathBuf)> {
    Err(headroom_infer::Error::FeatureDisabled { feature: "onnxruntime" }.into())
}

/// Size, ONNX Runtime time per image (median of 20 runs on a grey image, preprocessing and
/// decoding included) and mAP50-95 on the request's val split, of the file at `path`, reported as
/// `shown` (where it is published).
#[cfg(feature = "onnxruntime")]
fn measure(
    precision: &str,
    path: &Path,
    shown: &Path,
    request: &ExportRequest,
    val: Option<&crate::int8::ValSplit>,
) -> crate::Result<FileRow> {
    use headroom_infer::decode::DecodeOptions;
    let bytes = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?.len();
    let mut detector = crate::int8::open_detector(path, request)?;
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
    Ok(FileRow {
        precision: precision.into(),
        path: shown.to_path_buf(),
        bytes,
        ms_per_image: Some(times[times.len() / 2]),
        map50_95,
    })
}

#[cfg(not(feature = "onnxruntime"))]
fn measure(
    precision: &str,
    path: &Path,
    shown: &Path,
    _request: &ExportRequest,
    _val: Option<&()>,
) -> crate::Result<FileRow> {
    let bytes = std::fs::metadata(path).with_context(|| format!("{}", path.display()))?.len();
    Ok(FileRow {
        precision: precision.into(),
        path: shown.to_path_buf(),
        bytes,
        ms_per_image: None,
        map50_95: None,
    })
}
