//! Calibration for INT8 export: every tensor `headroom_onnx::quant::sites` lists, over calibration
//! images preprocessed exactly as [`Detector::detect`] preprocesses them (Ultralytics `predict`'s
//! letterbox), gathered into one [`Histogram`] per tensor. The nodes computing those tensors are
//! cut out of the model (`headroom_onnx::extract`) and run by ONNX Runtime with the tensors as
//! outputs, one image at a time. Images go through the filter every step shares
//! ([`headroom_core::imageio::usable_image`]): one that fails it is skipped with one warning.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::time::Duration;

use headroom_core::preprocess::Preprocess;
use headroom_onnx::quant::{Histogram, Sites};

use crate::detector::{Detector, to_nchw};
use crate::provider::SessionOptions;
use crate::trunk::OrtTrunk;
use crate::{Error, Result};

/// Histograms of every calibrated tensor.
#[derive(Debug, Default)]
pub struct Calibration {
    /// Tensor name → its histogram.
    pub histograms: HashMap<String, Histogram>,
    /// Images used.
    pub images: usize,
    /// The images used, in the order given.
    pub used: Vec<PathBuf>,
    /// Why each skipped image was skipped (each error names its file).
    pub skipped: Vec<headroom_core::Error>,
}

/// Runs `images` through the part of `model` that computes `sites.tensors`, preprocessed as
/// `detector` (the same model, at the input size calibration is for) preprocesses them.
/// `progress(done, total)` is called after each image; when it breaks, calibration stops there with
/// [`Error::Cancelled`]. An image the filter refuses (`settle`: its settle time) is skipped with a
/// warning naming it and the reason; [`Error::NoUsableImages`] when none is left.
pub fn calibrate(
    model: &headroom_onnx::Model,
    sites: &Sites,
    detector: &Detector,
    images: &[PathBuf],
    settle: Duration,
    options: &SessionOptions,
    mut progress: impl FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<Calibration> {
    let outputs: Vec<String> = sites.tensors.iter().filter(|t| **t != sites.input).cloned().collect();
    let mut part = OrtTrunk::open(model, &outputs, options)?;
    let mut calibration = Calibration::default();
    for (done, path) in images.iter().enumerate() {
        match headroom_core::imageio::usable_image(path, settle) {
            Ok(usable) => {
                if let Some(warning) = usable.warning {
                    tracing::warn!("{warning}");
                }
                let (shape, data) = detector_input(detector, &usable.image, &model.path)?;
                calibration.histograms.entry(sites.input.clone()).or_default().add(&data);
                for (name, (values, _)) in outputs.iter().zip(part.run(&data, shape)?) {
                    calibration.histograms.entry(name.clone()).or_default().add(&values);
                }
                calibration.images += 1;
                calibration.used.push(path.clone());
            }
            Err(e) => {
                tracing::warn!("skipping {e}");
                calibration.skipped.push(e);
            }
        }
        if progress(done + 1, images.len()).is_break() {
            return Err(Error::Cancelled { stage: "calibration", done: done + 1, total: images.len() });
        }
    }
    if calibration.images == 0
        && let Some(last) = calibration.skipped.pop()
    {
        return Err(Error::NoUsableImages { total: images.len(), last: Box::new(last) });
    }
    Ok(calibration)
}

/// `image` preprocessed as `detector` preprocesses it: the input's shape and values.
fn detector_input(
    detector: &Detector,
    image: &image::RgbImage,
    model: &std::path::Path,
) -> Result<([usize; 4], Vec<f32>)> {
    let geometry = detector.input_geometry(Preprocess::Predict, image.width(), image.height());
    let input = to_nchw(&geometry.apply(image));
    let shape = input.shape();
    let shape = [shape[0], shape[1], shape[2], shape[3]];
    let data = input.as_slice().ok_or_else(|| Error::Session {
        path: model.to_path_buf(),
        reason: "input tensor is not contiguous".into(),
    })?;
    Ok((shape, data.to_vec()))
}
