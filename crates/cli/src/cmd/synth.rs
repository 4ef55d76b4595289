//! `headroom synth`: generate the deterministic synthetic shapes dataset (Ultralytics layout).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use headroom_core::synth::{self, CLASS_NAMES, Preset, SynthConfig};

use super::Outcome;

/// Arguments of `headroom synth`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Output folder (created if missing; rerunning with the same settings overwrites it).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Image distribution: `base` (clean) or `field` (darker, noisier, smaller objects, more clutter).
    #[arg(long, value_enum, default_value_t = Preset::Base)]
    pub preset: Preset,
    /// Seed: the same seed gives the same bytes.
    #[arg(long, value_parser = super::provider_args::whole_arg::<u64>, default_value_t = 0)]
    pub seed: u64,
    /// Number of training images.
    #[arg(long, default_value_t = 64, value_parser = super::provider_args::count_arg::<1, 999_999>)]
    pub train: usize,
    /// Number of validation images (Ultralytics needs both splits).
    #[arg(long, default_value_t = 32, value_parser = super::provider_args::count_arg::<1, 999_999>)]
    pub val: usize,
    /// Image size, WIDTHxHEIGHT.
    #[arg(long, value_name = "WxH", default_value = "256x192", value_parser = parse_size)]
    pub size: (u32, u32),
    /// Write JPEG images of this quality instead of PNG, as cameras write them (libjpeg-turbo's
    /// defaults: baseline, 4:2:0 chroma).
    #[arg(long, value_name = "QUALITY", value_parser = clap::value_parser!(u8).range(1..=100))]
    pub jpeg: Option<u8>,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// `WxH` in pixels; clap names the flag and the value, so only the reason is kept.
fn parse_size(text: &str) -> Result<(u32, u32), String> {
    synth::parse_size(text).map_err(|e| match e {
        headroom_core::Error::InvalidArgument { message, .. } => message,
        other => other.to_string(),
    })
}

/// Runs `headroom synth`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let config = SynthConfig {
        preset: args.preset,
        seed: args.seed,
        train: args.train,
        val: args.val,
        width: args.size.0,
        height: args.size.1,
        jpeg_quality: args.jpeg,
    };
    let total = config.train + config.val;
    let bar = super::progress::bar(total as u64, "synth");
    let started = Instant::now();
    let result = synth::write_dataset(&config, &args.out, |done| bar.set_position(done as u64));
    super::progress::end(&bar, result.is_ok());
    let summary =
        result.with_context(|| format!("cannot write the synthetic dataset to {}", args.out.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        let per_class: Vec<String> =
            CLASS_NAMES.iter().zip(&summary.boxes_per_class).map(|(name, n)| format!("{n} {name}")).collect();
        println!(
            "wrote {} train + {} val images ({}x{}, preset {}, seed {}) in {seconds:.2} s ({:.0} images/s)",
            config.train,
            config.val,
            config.width,
            config.height,
            config.preset,
            config.seed,
            total as f64 / seconds.max(1e-9),
        );
        println!("boxes: {} ({} background images)", per_class.join(", "), summary.background_images);
        println!("dataset: {}", summary.data_yaml.display());
    }
    Ok(Outcome::Success)
}
