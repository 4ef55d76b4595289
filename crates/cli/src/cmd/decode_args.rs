//! Detection thresholds (`--iou`, `--max-det`, `--agnostic-nms`), shared by the commands that
//! decode detections. `--conf` is each command's own, with its own default: `label` follows
//! Ultralytics' `predict` (0.25), `eval` follows `val` (0.001).

use headroom_core::boxes::NmsMode;
use headroom_infer::decode::DecodeOptions;

/// Detection thresholds.
#[derive(Debug, Clone, clap::Args)]
pub struct DecodeArgs {
    /// NMS IoU threshold.
    #[arg(long, default_value_t = 0.7)]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub iou: f32,
    /// Maximum boxes per image.
    #[arg(long, value_parser = super::provider_args::whole_arg::<usize>, default_value_t = 300)]
    pub max_det: usize,
    /// Class-agnostic NMS.
    #[arg(long)]
    pub agnostic_nms: bool,
}

impl DecodeArgs {
    /// `base` (the command's conventions) with `confidence` and these options applied, checked.
    pub fn apply(&self, confidence: f32, base: DecodeOptions) -> anyhow::Result<DecodeOptions> {
        anyhow::ensure!((0.0..=1.0).contains(&confidence), "--conf {confidence} is not in [0, 1]");
        anyhow::ensure!((0.0..=1.0).contains(&self.iou), "--iou {} is not in [0, 1]", self.iou);
        Ok(DecodeOptions {
            confidence,
            iou: self.iou,
            max_detections: self.max_det,
            nms: if self.agnostic_nms { NmsMode::ClassAgnostic } else { NmsMode::ClassAware },
            ..base
        })
    }
}
