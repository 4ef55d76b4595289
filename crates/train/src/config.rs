//! The settings that shape a training run ([`TrainConfig`]), their defaults and the one place they
//! are checked ([`TrainConfig::validate`]): the same checks for a new run's command line and for a
//! `config.toml` read back on resume. Pure: no libtorch.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The optimiser (one enum for the planner, the trainer and the run: `headroom_plan::Optimizer`).
pub use headroom_plan::Optimizer;

/// Everything that shapes a run (saved with it; see docs/TRAIN.md for the defaults' reasons).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Epochs.
    pub epochs: usize,
    /// Images per forward pass (1–2 is the point on a small device).
    pub batch: usize,
    /// Nominal batch: gradients are accumulated over `round(nbs / batch)` passes per step
    /// (Ultralytics' `nbs`, 64).
    pub nbs: usize,
    /// The optimiser.
    pub optimizer: Optimizer,
    /// Initial learning rate.
    pub lr0: f64,
    /// Final learning rate as a fraction of `lr0`.
    pub lrf: f64,
    /// Cosine decay from `lr0` to `lr0 · lrf` instead of linear (Ultralytics' `cos_lr`).
    pub cos_lr: bool,
    /// SGD momentum (Nesterov), or AdamW's beta1.
    pub momentum: f64,
    /// Weight decay at the nominal batch (scaled by `batch · accumulate / nbs`), weights only.
    pub weight_decay: f64,
    /// Warmup length in epochs (at least 100 iterations, as Ultralytics).
    pub warmup_epochs: f64,
    /// Momentum at the start of warmup.
    pub warmup_momentum: f64,
    /// Largest L2 norm of the gradients at a step (Ultralytics: 10); 0 turns clipping off.
    pub max_grad_norm: f64,
    /// Probability of a left-right flip per image.
    pub flip: f64,
    /// Colour, scale, translate and mosaic augmentation (all off by default).
    #[serde(default)]
    pub augment: crate::augment::AugmentConfig,
    /// Gain of the distillation term on the teacher's soft scores (0: off).
    pub kd: f64,
    /// Gain of the dense distillation term on a teacher run on each batch
    /// ([`crate::loss::DenseTargets`]; used when the run has a teacher).
    #[serde(default = "default_dense_kd")]
    pub dense_kd: f64,
    /// The ignore band `[low, high]` ([`crate::loss::Ignore`]): pseudo-labels whose teacher
    /// confidence lies in `[low, high)` (and, with a dense teacher, anchors it scores so) count
    /// neither as objects nor as background; below `low` they are dropped. `None`: off.
    #[serde(default)]
    pub ignore_band: Option<[f64; 2]>,
    /// Strength of a pull toward the starting weights (L2-SP: `anchor/2 · Σ (w − w₀)²` added to
    /// the loss of each step, on weights and biases), against forgetting; 0: off.
    #[serde(default)]
    pub anchor: f64,
    /// Recompute the head's segments in backward instead of keeping their activations.
    pub checkpoint: bool,
    /// Mixed precision on CUDA: autocast (fp16 where libtorch deems it safe) with a dynamic loss
    /// scale (×2 every 2000 clean steps, ×0.5 and the step skipped on inf/NaN gradients).
    /// Ignored on the CPU (the CLI says so and records false).
    #[serde(default)]
    pub amp: bool,
    /// Optimiser steps between checkpoints within an epoch (0: not by steps).
    pub save_period: u64,
    /// Seconds of training between checkpoints within an epoch (0: not by time). A checkpoint is
    /// written after the optimiser step at which either this or `save_period` is due; epoch ends
    /// always write one.
    #[serde(default = "default_save_interval")]
    pub save_interval: f64,
    /// Seed of the data order and the augmentation.
    pub seed: u64,
    /// Model input width and height.
    pub imgsz: [u32; 2],
    /// Non-finite losses in a row that stop the run.
    pub max_bad_steps: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 10,
            batch: 2,
            nbs: 64,
            optimizer: Optimizer::Sgd,
            lr0: 1e-4,
            lrf: 0.01,
            cos_lr: false,
            momentum: 0.937,
            weight_decay: 5e-4,
            warmup_epochs: 3.0,
            warmup_momentum: 0.8,
            max_grad_norm: 10.0,
            flip: 0.5,
            augment: crate::augment::AugmentConfig::default(),
            kd: 0.0,
            dense_kd: default_dense_kd(),
            ignore_band: None,
            anchor: 0.0,
            checkpoint: true,
            amp: false,
            save_period: 0,
            save_interval: default_save_interval(),
            seed: 0,
            imgsz: [640, 640],
            max_bad_steps: 10,
        }
    }
}

fn default_dense_kd() -> f64 {
    1.0
}

/// Seconds between checkpoints within an epoch: a step every pass at 160 px is ~0.1 s, and a
/// checkpoint every 10 steps cost ~10 % of such a run (docs/BENCHMARKS.md "Cheap steps").
fn default_save_interval() -> f64 {
    60.0
}

/// The learning rate of `--optimizer auto` for `nc` classes: Ultralytics' `0.002 · 5 / (4 + nc)`,
/// rounded to 6 decimals (0.001429 for 3 classes; never above 0.002).
pub fn auto_lr0(nc: usize) -> f64 {
    (0.002 * 5.0 / (4.0 + nc as f64) * 1e6).round() / 1e6
}

/// The bounds of a run's settings, one set for the flags' parsers (`headroom train`, `field run`),
/// the presets (`configs/runs.toml`) and [`TrainConfig::validate`] (inclusive unless said).
pub mod limits {
    /// Fewest epochs.
    pub const EPOCHS_MIN: usize = 1;
    /// Most epochs.
    pub const EPOCHS_MAX: usize = 10_000;
    /// Smallest batch.
    pub const BATCH_MIN: usize = 1;
    /// Largest batch.
    pub const BATCH_MAX: usize = 256;
    /// Smallest nominal batch.
    pub const NBS_MIN: usize = 1;
    /// Largest nominal batch.
    pub const NBS_MAX: usize = 4096;
    /// Most hours of a time budget (`--time`, `time_hours`); more than 0.
    pub const HOURS_MAX: f64 = 10_000.0;

    /// Whether `lr0` is an initial learning rate: in (0, 1).
    pub fn lr0(lr0: f64) -> bool {
        lr0 > 0.0 && lr0 < 1.0
    }

    /// Whether `hours` is a time budget: in (0, [`HOURS_MAX`]].
    pub fn hours(hours: f64) -> bool {
        hours.is_finite() && hours > 0.0 && hours <= HOURS_MAX
    }
}

const EPOCHS: (usize, usize) = (limits::EPOCHS_MIN, limits::EPOCHS_MAX);
const BATCH: (usize, usize) = (limits::BATCH_MIN, limits::BATCH_MAX);
const NBS: (usize, usize) = (limits::NBS_MIN, limits::NBS_MAX);

impl TrainConfig {
    /// headroom's `optimizer=auto` rule: AdamW at `0.002 · 5 / (4 + nc)` (Ultralytics' formula for
    /// short runs) with momentum 0.9, however long the run. Ultralytics switches to SGD at 0.01
    /// above 10,000 iterations; headroom fine-tunes converged models, and SGD at 1e-3 already
    /// wrecked the demo model (docs/DECISIONS.md), so that branch is gone: the run's length no longer
    /// changes the choice.
    pub fn with_auto_optimizer(mut self, nc: usize) -> TrainConfig {
        self.optimizer = Optimizer::AdamW;
        self.lr0 = auto_lr0(nc);
        self.momentum = 0.9;
        self
    }

    /// Checks every setting against its bounds; the error names the first key that is out of them
    /// (as `config.toml` spells it) and the range it must be in. Called for a new run before
    /// anything is written, and for a saved run's settings on resume.
    pub fn validate(&self) -> Result<()> {
        let bad = |key: &str, value: String, range: &str| {
            Err(Error::Config { key: key.to_string(), reason: format!("{value} is not in {range}") })
        };
        let count = |key: &str, v: usize, (lo, hi): (usize, usize)| {
            if (lo..=hi).contains(&v) { Ok(()) } else { bad(key, v.to_string(), &format!("{lo}..={hi}")) }
        };
        count("epochs", self.epochs, EPOCHS)?;
        count("batch", self.batch, BATCH)?;
        count("nbs", self.nbs, NBS)?;
        count("max_bad_steps", self.max_bad_steps, (1, 1_000_000))?;
        let real = |key: &str, v: f64, ok: bool, range: &str| {
            if v.is_finite() && ok { Ok(()) } else { bad(key, v.to_string(), range) }
        };
        real("lr0", self.lr0, limits::lr0(self.lr0), "(0, 1)")?;
        real("lrf", self.lrf, self.lrf > 0.0 && self.lrf <= 1.0, "(0, 1]")?;
        real("momentum", self.momentum, (0.0..1.0).contains(&self.momentum), "[0, 1)")?;
        real("weight_decay", self.weight_decay, (0.0..=0.1).contains(&self.weight_decay), "[0, 0.1]")?;
        real("warmup_epochs", self.warmup_epochs, (0.0..=1000.0).contains(&self.warmup_epochs), "[0, 1000]")?;
        real("warmup_momentum", self.warmup_momentum, (0.0..1.0).contains(&self.warmup_momentum), "[0, 1)")?;
        real("max_grad_norm", self.max_grad_norm, self.max_grad_norm >= 0.0, "[0, inf)")?;
        real("flip", self.flip, (0.0..=1.0).contains(&self.flip), "[0, 1]")?;
        real("kd", self.kd, (0.0..=100.0).contains(&self.kd), "[0, 100]")?;
        real("dense_kd", self.dense_kd, (0.0..=100.0).contains(&self.dense_kd), "[0, 100]")?;
        if let Some(band) = self.ignore_band
            && !valid_ignore_band(band)
        {
            let [low, high] = band;
            return bad("ignore_band", format!("{low},{high}"), "0 <= low < high <= 1");
        }
        real("anchor", self.anchor, (0.0..=1e6).contains(&self.anchor), "[0, 1e6]")?;
        real("save_interval", self.save_interval, self.save_interval >= 0.0, "[0, inf)")?;
        let a = &self.augment;
        for (key, v) in [("augment.hsv_h", a.hsv_h), ("augment.hsv_s", a.hsv_s), ("augment.hsv_v", a.hsv_v)] {
            real(key, f64::from(v), (0.0..=1.0).contains(&v), "[0, 1]")?;
        }
        real("augment.translate", f64::from(a.translate), (0.0..0.5).contains(&a.translate), "[0, 0.5)")?;
        real("augment.scale", f64::from(a.scale), (0.0..1.0).contains(&a.scale), "[0, 1)")?;
        real("augment.mosaic", f64::from(a.mosaic), (0.0..=1.0).contains(&a.mosaic), "[0, 1]")?;
        if a.mosaic > 0.0 && self.imgsz[0] != self.imgsz[1] {
            return Err(Error::Config {
                key: "augment.mosaic".into(),
                reason: format!("needs a square input; this one is {}x{}", self.imgsz[1], self.imgsz[0]),
            });
        }
        if self.imgsz.iter().any(|&s| !(32..=8192).contains(&s)) {
            return bad("imgsz", format!("{}x{}", self.imgsz[0], self.imgsz[1]), "32..=8192 each");
        }
        Ok(())
    }
}

/// Whether `[low, high]` is an ignore band: `0 <= low < high <= 1` (`--ignore-band`).
pub fn valid_ignore_band([low, high]: [f64; 2]) -> bool {
    low.is_finite() && high.is_finite() && 0.0 <= low && low < high && high <= 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate() {
        TrainConfig::default().validate().expect("the defaults are valid");
    }

    #[test]
    fn out_of_bounds_values_name_their_key() {
        type Change = fn(&mut TrainConfig);
        let cases: [(&str, Change); 6] = [
            ("lr0", |c| c.lr0 = -1.0),
            ("batch", |c| c.batch = 100_000),
            ("epochs", |c| c.epochs = 0),
            ("flip", |c| c.flip = f64::NAN),
            ("augment.mosaic", |c| c.augment.mosaic = 2.0),
            ("nbs", |c| c.nbs = 0),
        ];
        for (key, change) in cases {
            let mut config = TrainConfig::default();
            change(&mut config);
            match config.validate() {
                Err(Error::Config { key: found, .. }) => assert_eq!(found, key),
                other => panic!("{key}: expected a config error, got {other:?}"),
            }
        }
    }

    #[test]
    fn auto_optimizer_is_adamw_for_short_runs() {
        let c = TrainConfig::default().with_auto_optimizer(3);
        assert_eq!(c.optimizer, Optimizer::AdamW);
        assert!((c.lr0 - 0.001429).abs() < 1e-9, "{}", c.lr0);
    }

    #[test]
    fn auto_optimizer_stays_adamw_at_a_small_rate_on_long_runs() {
        // 1,000,000 images x 100 epochs at nbs 64: ~1.6 million iterations, where Ultralytics'
        // rule would jump to SGD at 0.01 and wreck a converged model.
        let long = TrainConfig { epochs: 100, ..TrainConfig::default() };
        let iterations = 1_000_000usize.div_ceil(long.nbs) * long.epochs;
        assert!(iterations > 10_000);
        let c = long.with_auto_optimizer(3);
        assert_eq!(c.optimizer, Optimizer::AdamW);
        assert!((c.lr0 - 0.001429).abs() < 1e-9 && c.momentum == 0.9, "{} {}", c.lr0, c.momentum);
        for nc in [1, 80, 1000] {
            let c = TrainConfig::default().with_auto_optimizer(nc);
            assert!(c.lr0 <= 0.002 && c.lr0 > 0.0, "nc {nc}: lr0 {}", c.lr0);
        }
    }
}
