//! Trunk re-normalisation before training (`renorm = N` in the spec): the first N folded Convs of
//! the student get, on the new images, the per-channel output statistics they had on the old ones
//! ([`headroom_onnx::renorm`]), one after another in graph order (each Conv's new-domain statistics
//! are measured with the ones before it already corrected; the old-domain statistics all come from
//! the untouched model). Forward passes in ONNX Runtime only; the result is the same graph with
//! other weights, from which the run trains and into which it writes back.

use std::collections::BTreeMap;
use std::path::Path;

use headroom_core::dataset::ImageRecord;
use headroom_infer::provider::SessionOptions;
use headroom_infer::trunk::OrtTrunk;
use headroom_onnx::Model;
use headroom_onnx::renorm::{ChannelStats, ConvSite, StatsAccumulator, fold, stem_convs};
use headroom_train::tch::Device;

use crate::{Error, Result};

pub use crate::folder::RenormStep;

/// The fewest new images whose statistics a run re-normalises on (checked by the run, which names
/// the dataset).
pub const MIN_NEW_IMAGES: usize = 8;

/// The model `bytes` (from `path`) with its first `count` Convs re-normalised from the `old`
/// images' statistics to the `new` ones', at input `imgsz` (width, height); what was done per Conv.
pub fn renormalise(
    path: &Path,
    bytes: &[u8],
    count: usize,
    new: &[ImageRecord],
    old: &[ImageRecord],
    imgsz: [u32; 2],
    threads: usize,
) -> Result<(Vec<u8>, Vec<RenormStep>)> {
    let spec = |reason: String| Error::Spec { key: "--renorm".into(), reason };
    if old.is_empty() {
        return Err(spec(
            "re-normalising needs old-domain images to take the statistics from: add --replay OLD.yaml"
                .into(),
        ));
    }
    let model = Model::from_bytes(bytes, path)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let sites = stem_convs(&model.graph, &inspection, count)?;
    let options = SessionOptions { intra_threads: threads, spinning: false, ..Default::default() };
    let old_stats = conv_statistics(&model, &sites, old, imgsz, &options)?;
    let weights = headroom_onnx::patch::read_weights(&model);
    let mut current = bytes.to_vec();
    let mut steps = Vec::new();
    for (k, site) in sites.iter().enumerate() {
        let model = Model::from_bytes(&current, path)?;
        let new_stats = conv_statistics(&model, &sites[k..=k], new, imgsz, &options)?.remove(0);
        let (Some(w), Some(b)) = (weights.get(&site.weight), weights.get(&site.bias)) else {
            return Err(spec(format!(
                "{}: weight or bias of `{}` not stored in the file",
                path.display(),
                site.node
            )));
        };
        let (w, b, scales) = fold(path, site, w, b, &new_stats, &old_stats[k])?;
        let shift = new_stats
            .mean
            .iter()
            .zip(&old_stats[k].mean)
            .zip(&old_stats[k].std)
            .map(|((n, o), s)| (n - o).abs() / s.max(1e-5))
            .fold(0.0, f64::max);
        let patch = BTreeMap::from([(site.weight.clone(), w), (site.bias.clone(), b)]);
        current = headroom_onnx::patch::write_weights(&current, path, &patch, &[])?;
        let min = scales.iter().copied().fold(f64::INFINITY, f64::min);
        let max = scales.iter().copied().fold(0.0, f64::max);
        tracing::info!(
            "re-normalised {}: scales {min:.3}..{max:.3}, largest mean shift {shift:.2} std",
            site.node
        );
        steps.push(RenormStep { node: site.node.clone(), scale: [min, max], shift });
    }
    Ok((current, steps))
}

/// The per-channel statistics of the outputs of `sites` over `images` (letterboxed to `imgsz`,
/// width and height, as training prepares them), run by ONNX Runtime on the part of `model` that
/// computes them.
pub fn conv_statistics(
    model: &Model,
    sites: &[ConvSite],
    images: &[ImageRecord],
    imgsz: [u32; 2],
    options: &SessionOptions,
) -> Result<Vec<ChannelStats>> {
    let outputs: Vec<String> = sites.iter().map(|s| s.output.clone()).collect();
    let mut ort = OrtTrunk::open(model, &outputs, options)?;
    let mut accumulators: Vec<StatsAccumulator> =
        sites.iter().map(|s| StatsAccumulator::new(s.channels)).collect();
    for record in images {
        let batch = headroom_train::data::make_batch(&[record], imgsz[0], imgsz[1], &[false], Device::Cpu)?;
        let flat = Vec::<f32>::try_from(&batch.images.f_reshape([-1]).map_err(headroom_train::Error::from)?)
            .map_err(headroom_train::Error::from)?;
        let shape = [1, 3, imgsz[1] as usize, imgsz[0] as usize];
        for (acc, (data, dims)) in accumulators.iter_mut().zip(ort.run(&flat, shape)?) {
            acc.add(&data, &dims);
        }
    }
    Ok(accumulators.iter().map(StatsAccumulator::stats).collect())
}
