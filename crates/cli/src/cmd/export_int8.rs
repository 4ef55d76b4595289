//! The ONNX Runtime half of `headroom export --int8`: calibration, the Q/DQ model, the TensorRT
//! calibration cache and the sensitivity search.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use headroom_infer::detector::{Detector, to_nchw};
use headroom_infer::provider::SessionOptions;
use headroom_onnx::quant::{self, Int8Options, Sites};

use super::{Args, Int8Summary, SensitivityStep};

/// Fewer calibration images than this get a warning.
const FEW_IMAGES: usize = 32;
/// Images the per-Conv error of the sensitivity search is measured on.
const SENSITIVITY_IMAGES: usize = 8;

/// What the INT8 export made.
pub(super) struct Int8Result {
    pub model: Vec<u8>,
    pub cache: String,
    pub summary: Int8Summary,
}

/// ONNX Runtime on `--device`: the CPU, or the CUDA provider on the GPU named (`auto`: the first,
/// when this build has the provider and one is visible).
fn session_options(args: &Args) -> SessionOptions {
    use super::super::device_arg::{DeviceArg, onnxruntime_gpu};
    let gpu = match args.device {
        DeviceArg::Cpu => None,
        DeviceArg::Cuda(n) => Some(n.unwrap_or(0)),
        DeviceArg::Auto => onnxruntime_gpu().0.then_some(0),
    };
    let cpu = SessionOptions { intra_threads: args.threads, ..Default::default() };
    match gpu {
        None => cpu,
        Some(index) => SessionOptions {
            providers: vec![headroom_infer::provider::ExecutionProvider::Cuda],
            device_id: i32::try_from(index).unwrap_or(0),
            ..cpu
        },
    }
}

/// Opens `path` at `--imgsz` when given.
pub(super) fn open_detector(path: &Path, args: &Args) -> anyhow::Result<Detector> {
    let mut detector = Detector::open(path, &session_options(args))?;
    if let Some(n) = args.imgsz {
        detector.set_input_size(n, n)?;
    }
    Ok(detector)
}

fn open_bytes(bytes: &[u8], name: &Path, args: &Args) -> anyhow::Result<Detector> {
    let mut detector = Detector::open_from_memory(bytes, name, &session_options(args))?;
    if let Some(n) = args.imgsz {
        detector.set_input_size(n, n)?;
    }
    Ok(detector)
}

/// A dataset's val split, read once and scored for every file.
pub(super) struct ValSplit {
    names: Vec<String>,
    images: Vec<headroom_core::dataset::ImageRecord>,
}

impl ValSplit {
    /// Reads `data`'s val split.
    pub(super) fn load(data: &Path) -> anyhow::Result<ValSplit> {
        let config = headroom_core::dataset::DataConfig::load(data)?;
        let split = headroom_core::dataset::Split::Val;
        let images = headroom_core::dataset::load_split(&config, split, Default::default())?.images;
        Ok(ValSplit { names: config.names, images })
    }

    /// mAP50-95 of `detector` on the split.
    pub(super) fn map(&self, detector: &mut Detector) -> anyhow::Result<f64> {
        Ok(super::super::eval::val_metrics(detector, &self.images, &self.names)?.map50_95)
    }
}

/// The calibration images `--calib` names (a folder's images, or a data.yaml's train split, its
/// labels not read), at most `--calib-images`, evenly spread. Nothing is decoded here: calibration
/// skips what the image filter refuses.
fn calibration_images(args: &Args) -> anyhow::Result<Vec<PathBuf>> {
    let source = args.calib.as_deref().context("--int8 needs --calib")?;
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
        anyhow::bail!("--calib {}: neither a folder of images nor a data.yaml", source.display());
    } else {
        anyhow::bail!("--calib {}: no such folder or file", source.display());
    };
    anyhow::ensure!(!all.is_empty(), "--calib {}: no images", source.display());
    let n = all.len().min(args.calib_images);
    Ok((0..n).map(|i| all[i * all.len() / n].clone()).collect())
}

/// Calibrates, quantizes, and (with `--sensitivity`) keeps Convs float until the drop is met.
/// Once `stop()`, ends with an error after the current image or step.
pub(super) fn export(
    model: &headroom_onnx::Model,
    args: &Args,
    val: Option<&ValSplit>,
    stop: &dyn Fn() -> bool,
) -> anyhow::Result<Int8Result> {
    let sites = quant::sites(model)?;
    let images = calibration_images(args)?;
    let detector = open_detector(&model.path, args)?;
    let bar = super::super::progress::bar(images.len() as u64, "calib");
    let calibration = headroom_infer::calibrate::calibrate(
        model,
        &sites,
        &detector,
        &images,
        args.settle.duration(),
        &session_options(args),
        |done, _| {
            bar.set_position(done as u64);
            if stop() { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
        },
    );
    super::super::progress::end(&bar, calibration.is_ok());
    let calibration = calibration?;
    if calibration.images < FEW_IMAGES {
        tracing::warn!(
            "only {} calibration images in {}: ranges from fewer than {FEW_IMAGES} images may not cover what the camera sees",
            calibration.images,
            args.calib.as_deref().unwrap_or(Path::new("--calib")).display()
        );
    }
    let method = args.method();
    // The image's range is known by construction (pixels / 255): clipping it, as a percentile or
    // the entropy search would (the brightest ~10 % of pixel values on the demo data), only loses.
    let amax: HashMap<String, f32> = calibration
        .histograms
        .iter()
        .map(|(name, h)| {
            let m = if *name == sites.input { quant::Method::MinMax } else { method };
            (name.clone(), h.amax(m))
        })
        .collect();
    if let Some((name, h)) = calibration.histograms.iter().find(|(_, h)| h.non_finite > 0) {
        tracing::warn!("`{name}` took {} NaN or infinite values during calibration", h.non_finite);
    }
    let mut keep = HashSet::new();
    let mut steps = Vec::new();
    if args.sensitivity {
        let val = val.context("--sensitivity needs --data")?;
        keep = sensitivity(model, &sites, &amax, &calibration.used, (args, val, stop), &mut steps)?;
    }
    let (bytes, report) = quant::to_int8(model, &sites, &amax, &Int8Options { keep_float: keep.clone() })?;
    let cache = cache_text(&sites, &amax, &keep, args);
    let summary = Int8Summary {
        method: method.name(),
        calibration_images: calibration.images,
        skipped_images: calibration.skipped.iter().map(ToString::to_string).collect(),
        quantized_convs: report.quantized,
        float_convs: report.kept_float,
        skipped_convs: report.skipped,
        cache_tensors: cache.lines().count().saturating_sub(1),
        trt_version: args.trt_version.to_string(),
        sensitivity: steps,
    };
    Ok(Int8Result { model: bytes, cache, summary })
}

/// The TensorRT calibration cache: every calibrated tensor but the inputs and outputs of Convs
/// kept float (TensorRT then runs those layers in float16/float32).
fn cache_text(sites: &Sites, amax: &HashMap<String, f32>, keep: &HashSet<String>, args: &Args) -> String {
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
    headroom_onnx::calib_cache::write_cache(args.trt_version.as_int(), &entries)
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

/// Ranks the Convs by the output error each causes when it alone is int8, then keeps the worst
/// 1, 2, 3, 4, 6, 9, 13, … float until the val mAP50-95 drop is at most `--max-drop`.
fn sensitivity(
    model: &headroom_onnx::Model,
    sites: &Sites,
    amax: &HashMap<String, f32>,
    images: &[PathBuf],
    (args, val, stop): (&Args, &ValSplit, &dyn Fn() -> bool),
    steps: &mut Vec<SensitivityStep>,
) -> anyhow::Result<HashSet<String>> {
    let mut fp32 = open_detector(&model.path, args)?;
    let baseline = val.map(&mut fp32)?;
    let evaluate = |keep: &HashSet<String>| -> anyhow::Result<f64> {
        anyhow::ensure!(!stop(), "the sensitivity search stopped on request");
        let options = Int8Options { keep_float: keep.clone() };
        let (bytes, _) = quant::to_int8(model, sites, amax, &options)?;
        val.map(&mut open_bytes(&bytes, &model.path, args)?)
    };
    let all = evaluate(&HashSet::new())?;
    steps.push(SensitivityStep { float_convs: 0, map50_95: all });
    let allowed = args.max_drop / 100.0;
    if baseline - all <= allowed {
        return Ok(HashSet::new());
    }
    // Inputs and fp32 outputs of a few calibration images.
    let mut inputs = Vec::new();
    // Images calibration used, through the same filter (one changed since is an error, not a skip).
    for path in images.iter().take(SENSITIVITY_IMAGES) {
        let image = headroom_core::imageio::usable_image(path, args.settle.duration())?.image;
        let geometry = fp32.input_geometry(
            headroom_core::preprocess::Preprocess::Predict,
            image.width(),
            image.height(),
        );
        let input = to_nchw(&geometry.apply(&image));
        let reference = fp32.raw_output(&input)?;
        inputs.push((input, reference));
    }
    let bar = super::super::progress::bar(sites.convs.len() as u64, "ranking");
    let mut errors = Vec::new();
    for (i, site) in sites.convs.iter().enumerate() {
        if stop() {
            super::super::progress::end(&bar, false);
            anyhow::bail!("the sensitivity search stopped on request");
        }
        let others: HashSet<String> =
            sites.convs.iter().filter(|c| c.node != site.node).map(|c| c.node.clone()).collect();
        let (bytes, _) = quant::to_int8(model, sites, amax, &Int8Options { keep_float: others })?;
        let mut one = open_bytes(&bytes, &model.path, args)?;
        let mut error = 0.0;
        for (input, (reference, shape)) in &inputs {
            let (output, _) = one.raw_output(input)?;
            error += output_error(reference, &output, shape[1]);
        }
        errors.push((error, site.node.clone()));
        bar.set_position(i as u64 + 1);
    }
    super::super::progress::end(&bar, true);
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
