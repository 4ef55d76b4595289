//! Re-normalisation of folded convolutions (AdaBN for BatchNorm-folded exports): an Ultralytics
//! export has each BatchNorm folded into the Conv before it, so nothing re-estimates normalisation
//! on a new domain. Given a Conv output's per-channel mean and standard deviation on new images
//! (μₙ, σₙ) and on old ones (μₒ, σₒ), [`fold`] rewrites its weight and bias so that on the new
//! images its output has the old statistics: `W' = a·W`, `b' = a·(b − μₙ) + μₒ`, `a = σₒ/σₙ`
//! clamped. Forward passes only; the graph keeps its shape. Which Convs: [`stem_convs`], the first
//! ones in graph order, where camera, light and colour shifts live (deeper layers carry content
//! statistics that should not be matched: docs/TRAIN.md).

use crate::graph::Graph;
use crate::inspect::Inspection;
use crate::ops::Op;
use crate::{Error, Result};

/// A Conv whose weight and bias are initializers: what [`fold`] rewrites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvSite {
    /// The node's name.
    pub node: String,
    /// Its weight initializer (`[out, in/group, kh, kw]`).
    pub weight: String,
    /// Its bias initializer (`[out]`: the folded BatchNorm's shift).
    pub bias: String,
    /// Its output tensor (where the statistics are measured).
    pub output: String,
    /// Output channels.
    pub channels: usize,
}

/// Per-channel statistics of a Conv output over every pixel of every image.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelStats {
    /// Mean per channel.
    pub mean: Vec<f64>,
    /// Standard deviation per channel (population).
    pub std: Vec<f64>,
}

/// Accumulates [`ChannelStats`] over `[N, C, H, W]` tensors.
#[derive(Debug, Clone)]
pub struct StatsAccumulator {
    sum: Vec<f64>,
    squares: Vec<f64>,
    count: u64,
}

impl StatsAccumulator {
    /// An empty accumulator for `channels` channels.
    pub fn new(channels: usize) -> StatsAccumulator {
        StatsAccumulator { sum: vec![0.0; channels], squares: vec![0.0; channels], count: 0 }
    }

    /// Adds a row-major `[N, C, H, W]` tensor of `shape`.
    pub fn add(&mut self, data: &[f32], shape: &[i64]) {
        let [n, c, h, w] = [shape[0], shape[1], shape[2], shape[3]].map(|d| d.max(0) as usize);
        let plane = h * w;
        for image in 0..n {
            for (channel, (sum, squares)) in self.sum.iter_mut().zip(&mut self.squares).enumerate().take(c) {
                let start = (image * c + channel) * plane;
                for &v in &data[start..start + plane] {
                    let v = f64::from(v);
                    *sum += v;
                    *squares += v * v;
                }
            }
        }
        self.count += (n * plane) as u64;
    }

    /// The statistics so far.
    pub fn stats(&self) -> ChannelStats {
        let n = self.count.max(1) as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let std = self.squares.iter().zip(&mean).map(|(q, m)| (q / n - m * m).max(0.0).sqrt()).collect();
        ChannelStats { mean, std }
    }
}

/// The bounds of the scale `a = σₒ/σₙ` ([`fold`]): a channel that is nearly dead on one domain
/// must not be blown up.
pub const SCALE_BOUNDS: (f64, f64) = (0.5, 2.0);

/// Below this, a standard deviation counts as zero (the channel keeps its scale).
const EPS: f64 = 1e-5;

/// The first `count` Convs of `graph` in graph order outside the Detect head whose weight and bias
/// are initializers. An error when the graph has none (nothing to re-normalise).
pub fn stem_convs(graph: &Graph, inspection: &Inspection, count: usize) -> Result<Vec<ConvSite>> {
    let head = inspection.head.module.map(|m| format!("/model.{m}/"));
    let sites: Vec<ConvSite> = graph
        .nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Conv(_)))
        .filter(|n| head.as_deref().is_none_or(|h| !n.name.starts_with(h)))
        .filter_map(|n| {
            let (weight, bias) = (n.inputs.get(1)?, n.inputs.get(2)?);
            let dims = graph.initializer_dims.get(weight)?;
            graph.initializer_dims.get(bias)?;
            Some(ConvSite {
                node: n.name.clone(),
                weight: weight.clone(),
                bias: bias.clone(),
                output: n.outputs.first()?.clone(),
                channels: *dims.first()?,
            })
        })
        .take(count)
        .collect();
    if sites.is_empty() && count > 0 {
        return Err(Error::Partition {
            path: graph.path.clone(),
            spec: "renorm".into(),
            reason:
                "no Conv with weight and bias initializers outside the Detect head: nothing to re-normalise \
                     (is this an Ultralytics export with BatchNorm folded?)"
                    .into(),
        });
    }
    Ok(sites)
}

/// The Conv's weight and bias corrected so that its output, with statistics `new` on the new
/// images, has the statistics `old`; the scales `a` used (after clamping to [`SCALE_BOUNDS`]).
/// `path`: the model file, for errors.
pub fn fold(
    path: &std::path::Path,
    site: &ConvSite,
    weight: &[f32],
    bias: &[f32],
    new: &ChannelStats,
    old: &ChannelStats,
) -> Result<(Vec<f32>, Vec<f32>, Vec<f64>)> {
    let c = site.channels;
    if bias.len() != c
        || new.mean.len() != c
        || old.mean.len() != c
        || c == 0
        || !weight.len().is_multiple_of(c)
    {
        return Err(Error::WriteBack {
            path: path.to_path_buf(),
            reason: format!(
                "re-normalising {}: {} bias values, {} and {} statistics for {c} channels",
                site.node,
                bias.len(),
                new.mean.len(),
                old.mean.len()
            ),
        });
    }
    let per_channel = weight.len() / c;
    let scales: Vec<f64> = (0..c)
        .map(|k| {
            if new.std[k] < EPS || old.std[k] < EPS {
                1.0
            } else {
                (old.std[k] / new.std[k]).clamp(SCALE_BOUNDS.0, SCALE_BOUNDS.1)
            }
        })
        .collect();
    let weight = weight
        .chunks(per_channel)
        .zip(&scales)
        .flat_map(|(row, &a)| row.iter().map(move |&w| (f64::from(w) * a) as f32))
        .collect();
    let bias =
        (0..c).map(|k| (scales[k] * (f64::from(bias[k]) - new.mean[k]) + old.mean[k]) as f32).collect();
    Ok((weight, bias, scales))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(channels: usize) -> ConvSite {
        ConvSite { node: "c".into(), weight: "w".into(), bias: "b".into(), output: "y".into(), channels }
    }

    #[test]
    fn statistics_are_per_channel_over_images_and_pixels() {
        let mut acc = StatsAccumulator::new(2);
        // Two images, two channels, 1x2 pixels: channel 0 holds 1,3 and 5,7; channel 1 holds 2,2,2,2.
        acc.add(&[1.0, 3.0, 2.0, 2.0, 5.0, 7.0, 2.0, 2.0], &[2, 2, 1, 2]);
        let s = acc.stats();
        assert_eq!(s.mean, vec![4.0, 2.0]);
        assert!((s.std[0] - 5f64.sqrt()).abs() < 1e-12 && s.std[1] == 0.0);
    }

    #[test]
    fn a_fold_gives_the_new_domain_the_old_statistics() {
        // y = w·x + b on one input channel; on new data x has mean 2, std 3.
        let (w, b) = ([0.5f32, -1.0], [0.1f32, 0.2]);
        let new = ChannelStats { mean: vec![0.5 * 2.0 + 0.1, -2.0 + 0.2], std: vec![1.5, 3.0] };
        let old = ChannelStats { mean: vec![0.0, 1.0], std: vec![1.0, 3.0] };
        let (w2, b2, a) = fold(std::path::Path::new("m.onnx"), &site(2), &w, &b, &new, &old).expect("fold");
        assert_eq!(a, vec![1.0 / 1.5, 1.0]);
        // The new domain's mean input 2 now maps to the old mean; one std to the old std.
        for k in 0..2 {
            let at = |x: f64| f64::from(w2[k]) * x + f64::from(b2[k]);
            assert!((at(2.0) - old.mean[k]).abs() < 1e-6, "channel {k}");
            assert!(((at(5.0) - at(2.0)).abs() - old.std[k]).abs() < 1e-6, "channel {k}");
        }
    }

    #[test]
    fn scales_are_clamped_and_dead_channels_kept() {
        let new = ChannelStats { mean: vec![0.0; 3], std: vec![0.01, 10.0, 0.0] };
        let old = ChannelStats { mean: vec![0.0; 3], std: vec![1.0, 1.0, 1.0] };
        let (_, _, a) =
            fold(std::path::Path::new("m.onnx"), &site(3), &[1.0; 3], &[0.0; 3], &new, &old).expect("fold");
        assert_eq!(a, vec![SCALE_BOUNDS.1, SCALE_BOUNDS.0, 1.0]);
        assert!(
            fold(std::path::Path::new("m.onnx"), &site(2), &[1.0; 3], &[0.0; 2], &new, &old).is_err(),
            "mismatched sizes are refused"
        );
    }
}
