//! Calibration for INT8 export: every tensor `headroom_onnx::quant::sites` lists, over calibration
//! images preprocessed exactly as [`Detector::detect`] preprocesses them (Ultralytics `predict`'s
//! letterbox), gathered into one [`Histogram`] per tensor. The nodes computing those tensors are
//! cut out of the model (`headroom_onnx::extract`) and run by ONNX Runtime with the tensors as
//! outputs, one image at a time.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;

use headroom_core::preprocess::Preprocess;
use headroom_onnx::quant::{Histogram, Sites};

use crate::detector::{Detector, to_nchw};
use crate::provider::SessionOptions;
use crate::trunk::OrtTrunk;
use crate::{Error, Result};

/// Histograms of every calibrated tensor.
#[derive(Debug, Clone, Default)]
pub struct Calibration {
    /// Tensor name → its histogram.
    pub histograms: HashMap<String, Histogram>,
    /// Images used.
    pub images: usize,
}

/// Runs `images` through the part of `model` that computes `sites.tensors`, preprocessed as
/// `detector` (the same model, at the input size calibration is for) preprocesses them.
/// `progress(done, total)` is called after each image; when it breaks, calibration stops there with
/// [`Error::Cancelled`]. An image that cannot be read is an error naming it.
pub fn calibrate(
    model: &headroom_onnx::Model,
    sites: &Sites,
    detector: &Detector,
    images: &[PathBuf],
    options: &SessionOptions,
    mut progress: impl FnMut(usize, usize) -> ControlFlow<()>,
) -> Result<Calibration> {
    let outputs: Vec<String> = sites.tensors.iter().filter(|t| **t != sites.input).cloned().collect();
    let mut part = OrtTrunk::open(model, &outputs, options)?;
    let mut calibration = Calibration::default();
    for (done, path) in images.iter().enumerate() {
        let image = headroom_core::imageio::read_rgb(path)?;
        let geometry = detector.input_geometry(Preprocess::Predict, image.width(), image.height());
        let input = to_nchw(&geometry.apply(&image));
        let shape = input.shape();
        let shape = [shape[0], shape[1], shape[2], shape[3]];
        let data = input.as_slice().ok_or_else(|| Error::Session {
            path: model.path.clone(),
            reason: "input tensor is not contiguous".into(),
        })?;
        calibration.histograms.entry(sites.input.clone()).or_default().add(data);
        for (name, (values, _)) in outputs.iter().zip(part.run(data, shape)?) {
            calibration.histograms.entry(name.clone()).or_default().add(&values);
        }
        calibration.images += 1;
        if progress(done + 1, images.len()).is_break() {
            return Err(Error::Cancelled { stage: "calibration", done: done + 1, total: images.len() });
        }
    }
    Ok(calibration)
}
