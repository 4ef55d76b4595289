//! The ONNX Runtime half of the INT8 export: calibration, the Q/DQ model, the TensorRT
//! calibration cache and the sensitivity search.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use headroom_infer::detector::{Detector, to_nchw};
use headroom_onnx::quant::{self, Int8Options, Sites};

use crate::observer::{Observer, Stage};
use crate::report::{Int8Summary, SensitivityStep};
use crate::request::{Calibration, ExportRequest, Int8Settings};
use crate::{Context as _, bail, ensure};

/// Fewer calibration images than this get a warning.
const FEW_IMAGES: usize = 32;
/// Images the per-Conv error of the sensitivity search is measured on.
const SENSITIVITY_IMAGES: usize = 8;
/// Calibration images `--method auto` compares the candidates' outputs on.
const CHOICE_IMAGES: usize = 32;

/// What the INT8 export made.
pub(crate) struct Int8Result {
    pub model: Vec<u8>,
    pub cache: String,
    pub summary: Int8Summary,
}

/// Opens `path` at `--imgsz` when given.
pub(crate) fn open_detector(path: &Path, request: &ExportRequest) -> crate::Result<Detector> {
    let mut detector = Detector::open(path, &request.session)?;
    if let Some(n) = request.imgsz {
        detector.set_input_size(n, n)?;
    }
    Ok(detector)
}

fn open_bytes(bytes: &[u8], name: &Path, request: &ExportRequest) -> crate::Result<Detector> {
    let mut detector = Detector::open_from_memory(bytes, name, &request.session)?;
    if let Some(n) = request.imgsz {
        detector.set_input_size(n, n)?;
    }
    Ok(detector)
}

/// A dataset's val split, read once and scored for every file.
pub(crate) struct ValSplit {
    names: Vec<String>,
    images: Vec<headroom_core::dataset::ImageRecord>,
}

impl ValSplit {
    /// Reads `data`'s val split.
    pub(crate) fn load(data: &Path) -> crate::Result<ValSplit> {
        let config = headroom_core::dataset::DataConfig::load(data)?;
        let split = headroom_core::dataset::Split::Val;
        let images = headroom_core::dataset::load_split(&config, split, Default::default())?.images;
        Ok(ValSplit { names: config.names, images })
    }

    /// mAP50-95 of `detector` on the split, as Ultralytics `val` computes it (its decoding and
    /// preprocessing).
    pub(crate) fn map(&self, detector: &mut Detector) -> crate::Result<f64> {
        use headroom_core::preprocess::Preprocess;
        use headroom_infer::decode::DecodeOptions;
        let decode = DecodeOptions::val();
        let report = headroom_infer::eval::evaluate(
            detector,
            &self.images,
            &self.names,
            &decode,
            Preprocess::Val,
            |_| {},
        )?;
        Ok(report.metrics.map50_95)
    }
}

/// The calibration images `--calib` names (a folder's images, or a data.yaml's train split, its
/// labels not read), at most `--calib-images`, evenly spread. Nothing is decoded here: calibration
/// skips what the image filter refuses.
fn calibration_images(settings: &Int8Settings) -> crate::Result<Vec<PathBuf>> {
    let source = settings.calib.as_path();
    let is_yaml = source.extension().is_some_and(|e| e == "yaml" || e == "yml");
    let all = if source.is_file() && is_yaml {
        let config = headroom_core::dataset::DataConfig::load(source)?;
        let split = headroom_core::dataset::Split::Train;
        let sources = config.split_sources(split).with_context(|| {
            format!("--calib {}: key `{}:` is absent or empty", source.display(), split.key())
        })?;
        headroom_core::dataset::layout::list_images(&config.file, split.key(), sources)?
    } else if source.is_dir() {
        headroom_core::dataset::layout::list_images(source, "--calib", &[source.to_path_buf()])?
    } else if source.exists() {
        bail!("--calib {}: neither a folder of images nor a data.yaml", source.display());
    } else {
        bail!("--calib {}: no such folder or file", source.display());
    };
    ensure!(!all.is_empty(), "--calib {}: no images", source.display());
    let n = all.len().min(settings.calib_images);
    Ok((0..n).map(|i| all[i * all.len() / n].clone()).collect())
}

/// Calibrates, quantizes, and (with `--sensitivity`) keeps Convs float until the drop is met.
/// Once the observer asks to stop, ends with an error after the current image or step.
pub(crate) fn export(
    model: &headroom_onnx::Model,
    (request, settings): (&ExportRequest, &Int8Settings),
    val: Option<&ValSplit>,
    observer: &dyn Observer,
) -> crate::Result<Int8Result> {
    let sites = quant::sites(model)?;
    let images = calibration_images(settings)?;
    let detector = open_detector(&model.path, request)?;
    observer.started(Stage::Calibration, images.len() as u64);
    let calibration = headroom_infer::calibrate::calibrate(
        model,
        &sites,
        &detector,
        &images,
        settings.settle,
        &request.session,
        |done, _| {
            observer.advanced(done as u64);
            if observer.stop_requested() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        },
    );
    observer.ended(calibration.is_ok());
    let calibration = calibration?;
    if calibration.images < FEW_IMAGES {
        tracing::warn!(
            "only {} calibration images in {}: ranges from fewer than {FEW_IMAGES} images may not cover what the camera sees",
            calibration.images,
            settings.calib.display()
        );
    }
    let (method, method_errors) = match &settings.method {
        Calibration::Fixed(method) => (*method, Vec::new()),
        Calibration::Auto(candidates) => choose_method(
            model,
            &sites,
            &calibration.histograms,
            &calibration.used,
            candidates,
            request,
            settings.settle,
        )?,
    };
    let amax = ranges(&sites, &calibration.histograms, method);
    if let Some((name, h)) = calibration.histograms.iter().find(|(_, h)| h.non_finite > 0) {
        tracing::warn!("`{name}` took {} NaN or infinite values during calibration", h.non_finite);
    }
    let mut keep = HashSet::new();
    let mut amax = amax;
    if let Some(file) = &settings.scales_from {
        let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
        let proto = headroom_onnx::model::decode(&bytes, file)?;
        let scales = quant::dequantize::activation_scales(&proto, file)?;
        ensure!(
            !scales.is_empty(),
            "{}: no Conv reads a quantized activation: not an INT8 export",
            file.display()
        );
        for site in &sites.convs {
            match scales.get(&site.node) {
                Some(scale) => {
                    amax.insert(site.activation.clone(), scale * 127.0);
                }
                None => {
                    keep.insert(site.node.clone());
                }
            }
        }
    }
    let mut steps = Vec::new();
    if let Some(max_drop) = settings.sensitivity {
        let val = val.context("--sensitivity needs --data")?;
        let search = Search { request, settle: settings.settle, max_drop, val, observer };
        keep = sensitivity(model, &sites, &amax, &calibration.used, &search, &mut steps)?;
    }
    let (bytes, report) = quant::to_int8(model, &sites, &amax, &Int8Options { keep_float: keep.clone() })?;
    let cache = cache_text(&sites, &amax, &keep, &request.trt_version);
    let summary = Int8Summary {
        method: method.name(),
        method_errors: method_errors.iter().map(|(m, e)| (m.name(), *e)).collect(),
        calibration_images: calibration.images,
        skipped_images: calibration.skipped.iter().map(ToString::to_string).collect(),
        quantized_convs: report.quantized,
        float_convs: report.kept_float,
        skipped_convs: report.skipped,
        cache_tensors: cache.lines().count().saturating_sub(1),
        trt_version: request.trt_version.to_string(),
        sensitivity: steps,
    };
    Ok(Int8Result { model: bytes, cache, summary })
}

/// The TensorRT calibration cache: every calibrated tensor but the inputs and outputs of Convs
/// kept float (TensorRT then runs those layers in float16/float32).
fn cache_text(
    sites: &Sites,
    amax: &HashMap<String, f32>,
    keep: &HashSet<String>,
    trt: &headroom_trt::TrtVersion,
) -> String {
    let float: HashSet<&str> = sites
        .convs
        .iter()
        .filter(|c| keep.contains(&c.node))
        .flat_map(|c| [c.activation.as_str(), c.output.as_str()])
        .collect();
    let entries: Vec<(String, f32)> = sites
        .tensors
        .iter()
        .filter(|t| !float.contains(t.as_str()))
        .filter_map(|t| amax.get(t).map(|a| (t.clone(), *a)))
        .collect();
    headroom_onnx::calib_cache::write_cache(trt.as_int(), &entries)
}

/// Relative error of `test` against `reference`, summed over the rows of the output's second axis
/// (box coordinates and each class's scores count alike, whatever their scale).
fn output_error(reference: &[f32], test: &[f32], rows: usize) -> f64 {
    let per = reference.len() / rows.max(1);
    (0..rows)
        .map(|r| {
            let (a, b) = (&reference[r * per..(r + 1) * per], &test[r * per..(r + 1) * per]);
            let diff: f64 = a.iter().zip(b).map(|(x, y)| f64::from(x - y).powi(2)).sum();
            let norm: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum();
            (diff / norm.max(1e-12)).sqrt()
        })
        .sum()
}

/// Each tensor's range by `method` (the image's own by minmax: see [`export`]).
fn ranges(
    sites: &Sites,
    histograms: &HashMap<String, quant::Histogram>,
    method: quant::Method,
) -> HashMap<String, f32> {
    // The image's range is known by construction (pixels / 255): clipping it, as a percentile or
    // the entropy search would (the brightest ~10 % of pixel values on the demo data), only loses.
    histograms
        .iter()
        .map(|(name, h)| {
            let m = if *name == sites.input { quant::Method::MinMax } else { method };
            (name.clone(), h.amax(m))
        })
        .collect()
}

/// An image's input tensor and the FP32 model's raw output on it.
type Reference = (ndarray::Array4<f32>, (Vec<f32>, Vec<usize>));

/// The inputs and FP32 outputs of `images` (images calibration used, through the same filter: one
/// changed since is an error, not a skip).
fn references(
    fp32: &mut Detector,
    images: &[PathBuf],
    settle: std::time::Duration,
) -> crate::Result<Vec<Reference>> {
    let mut inputs = Vec::new();
    for path in images {
        let image = headroom_core::imageio::usable_image(path, settle)?.image;
        let geometry = fp32.input_geometry(
            headroom_core::preprocess::Preprocess::Predict,
            image.width(),
            image.height(),
        );
        let input = to_nchw(&geometry.apply(&image));
        let reference = fp32.raw_output(&input)?;
        inputs.push((input, reference));
    }
    Ok(inputs)
}

/// `--method auto`: the candidate whose INT8 file (every Conv int8) gives outputs closest to the
/// FP32 model's on up to [`CHOICE_IMAGES`] calibration images, with each candidate's error.
fn choose_method(
    model: &headroom_onnx::Model,
    sites: &Sites,
    histograms: &HashMap<String, quant::Histogram>,
    used: &[PathBuf],
    candidates: &[quant::Method],
    request: &ExportRequest,
    settle: std::time::Duration,
) -> crate::Result<(quant::Method, Vec<(quant::Method, f64)>)> {
    let mut fp32 = open_detector(&model.path, request)?;
    let step = used.len().div_ceil(CHOICE_IMAGES).max(1);
    let images: Vec<PathBuf> = used.iter().step_by(step).cloned().collect();
    let inputs = references(&mut fp32, &images, settle)?;
    let mut errors = Vec::new();
    for &method in candidates {
        let amax = ranges(sites, histograms, method);
        let (bytes, _) = quant::to_int8(model, sites, &amax, &Int8Options::default())?;
        let mut int8 = open_bytes(&bytes, &model.path, request)?;
        let mut error = 0.0;
        for (input, (reference, shape)) in &inputs {
            let (output, _) = int8.raw_output(input)?;
            error += output_error(reference, &output, shape[1]);
        }
        errors.push((method, error / inputs.len().max(1) as f64));
    }
    let best = errors
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|e| e.0)
        .context("--method auto: no candidate")?;
    let listed: Vec<String> = errors.iter().map(|(m, e)| format!("{} {e:.3}", m.name())).collect();
    tracing::info!(
        "--method auto: {} (output error against FP32 on {} calibration images: {})",
        best.name(),
        inputs.len(),
        listed.join(", ")
    );
    Ok((best, errors))
}

/// What the sensitivity search runs with.
#[derive(Clone, Copy)]
struct Search<'a> {
    request: &'a ExportRequest,
    settle: std::time::Duration,
    /// The drop allowed, in points.
    max_drop: f64,
    val: &'a ValSplit,
    observer: &'a dyn Observer,
}

/// Ranks the Convs by the output error each causes when it alone is int8, then keeps the worst
/// 1, 2, 3, 4, 6, 9, 13, … float until the val mAP50-95 drop is at most `--max-drop`.
fn sensitivity(
    model: &headroom_onnx::Model,
    sites: &Sites,
    amax: &HashMap<String, f32>,
    images: &[PathBuf],
    search: &Search<'_>,
    steps: &mut Vec<SensitivityStep>,
) -> crate::Result<HashSet<String>> {
    let Search { request, settle, max_drop, val, observer } = *search;
    let mut fp32 = open_detector(&model.path, request)?;
    let baseline = val.map(&mut fp32)?;
    let evaluate = |keep: &HashSet<String>| -> crate::Result<f64> {
        ensure!(!observer.stop_requested(), "the sensitivity search stopped on request");
        let options = Int8Options { keep_float: keep.clone() };
        let (bytes, _) = quant::to_int8(model, sites, amax, &options)?;
        val.map(&mut open_bytes(&bytes, &model.path, request)?)
    };
    let all = evaluate(&HashSet::new())?;
    steps.push(SensitivityStep { float_convs: 0, map50_95: all });
    let allowed = max_drop / 100.0;
    if baseline - all <= allowed {
        return Ok(HashSet::new());
    }
    let inputs = references(&mut fp32, &images[..images.len().min(SENSITIVITY_IMAGES)], settle)?;
    observer.started(Stage::Ranking, sites.convs.len() as u64);
    let mut errors = Vec::new();
    for (i, site) in sites.convs.iter().enumerate() {
        if observer.stop_requested() {
            observer.ended(false);
            bail!("the sensitivity search stopped on request");
        }
        let others: HashSet<String> =
            sites.convs.iter().filter(|c| c.node != site.node).map(|c| c.node.clone()).collect();
        let (bytes, _) = quant::to_int8(model, sites, amax, &Int8Options { keep_float: others })?;
        let mut one = open_bytes(&bytes, &model.path, request)?;
        let mut error = 0.0;
        for (input, (reference, shape)) in &inputs {
            let (output, _) = one.raw_output(input)?;
            error += output_error(reference, &output, shape[1]);
        }
        errors.push((error, site.node.clone()));
        observer.advanced(i as u64 + 1);
    }
    observer.ended(true);
    errors.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut count = 1;
    loop {
        let count_now = count.min(errors.len());
        let keep: HashSet<String> = errors[..count_now].iter().map(|(_, n)| n.clone()).collect();
        let map = evaluate(&keep)?;
        steps.push(SensitivityStep { float_convs: count_now, map50_95: map });
        tracing::info!(
            "sensitivity: {count_now} Convs float → mAP50-95 {map:.4} (FP32 {baseline:.4}, drop {:.2} points)",
            (baseline - map) * 100.0
        );
        if baseline - map <= allowed || count_now == errors.len() {
            if baseline - map > allowed {
                tracing::warn!(
                    "every Conv float and the drop is still above --max-drop: the loss is elsewhere"
                );
            }
            return Ok(keep);
        }
        count = if count < 4 { count + 1 } else { count + count / 2 };
    }
}
