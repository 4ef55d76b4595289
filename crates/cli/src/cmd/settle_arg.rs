//! `--settle SECONDS`: the settle time of the image filter (`headroom_core::imageio::usable_image`)
//! for the steps that read a folder a camera may still be writing to (`label`, `export --calib`).

use std::time::Duration;

/// How long an image must go unmodified before it is read.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct SettleArgs {
    /// Leave images modified less than SECONDS ago for a later run: a camera may still be writing
    /// them (`field run` passes 2). Empty (0-byte) images are always left.
    #[arg(long, default_value_t = 0, value_name = "SECONDS")]
    #[arg(value_parser = super::provider_args::whole_arg::<u64>)]
    pub settle: u64,
}

impl SettleArgs {
    /// The settle time.
    #[cfg_attr(not(feature = "onnxruntime"), allow(dead_code))]
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.settle)
    }
}
