//! The schedule of a run as pure functions of its settings and a position in it: the data order
//! of an epoch, warm-up (learning rate, momentum and accumulation ramped over the first
//! iterations, as Ultralytics does), the passes accumulated per optimiser step, and the linear or
//! cosine learning-rate decay. No libtorch: unit-tested on its own.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::config::TrainConfig;

/// What one pass of a run does: the learning rate and momentum it steps with, and the passes
/// accumulated per optimiser step at that point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPlan {
    /// Learning rate.
    pub lr: f64,
    /// SGD momentum (AdamW's beta1).
    pub momentum: f64,
    /// Passes whose gradients make one optimiser step.
    pub accumulate: usize,
}

/// The learning-rate factor at the start of `epoch` (linear or cosine from 1 to `lrf`).
pub fn lr_factor(config: &TrainConfig, epoch: usize) -> f64 {
    let x = epoch as f64 / config.epochs as f64;
    if config.cos_lr {
        (1.0 - (x * std::f64::consts::PI).cos()) / 2.0 * (config.lrf - 1.0) + 1.0
    } else {
        (1.0 - x) * (1.0 - config.lrf) + config.lrf
    }
}

/// Passes between optimiser steps after warm-up: `round(nbs / batch)`, at least 1.
pub fn accumulate(config: &TrainConfig) -> usize {
    ((config.nbs as f64 / config.batch as f64).round() as usize).max(1)
}

/// Optimiser steps a run should make at least: what `--nbs auto` sizes accumulation for. 1,000 by
/// measurement (docs/history/BENCHMARKS-rounds.md "Adaptation, fourth round"): on the demo's field retrain (100
/// images a pass, 30 epochs) 1,500 steps recovered 40 % of the gap where 375 recovered 21 %.
pub const TARGET_STEPS: usize = 1000;

/// Largest nominal batch `--nbs auto` chooses (Ultralytics' `nbs`, right for large datasets).
pub const MAX_NOMINAL_BATCH: usize = 64;

/// The nominal batch `--nbs auto` gives a run of `epochs` epochs over `images` images per epoch
/// (new and replayed) at `batch`: the largest power of two, at most [`MAX_NOMINAL_BATCH`] and at
/// least `batch`, with which the run still makes about [`TARGET_STEPS`] optimiser steps. A field
/// retrain on 100 images for 30 epochs gets 2 instead of 64 (a step every pass at batch 2); 1,000
/// images 16; a large dataset keeps Ultralytics' 64.
pub fn nominal_batch_for(images: usize, epochs: usize, batch: usize) -> usize {
    let per_step = (images * epochs / TARGET_STEPS).max(1);
    let power = 1usize << (usize::BITS - 1 - per_step.leading_zeros());
    power.clamp(batch.max(1), MAX_NOMINAL_BATCH.max(batch))
}

/// Warm-up iterations of a run with `passes` passes per epoch: `warmup_epochs` epochs, at least
/// 100 iterations (0 when warm-up is off).
pub fn warmup_iterations(config: &TrainConfig, passes: usize) -> u64 {
    if config.warmup_epochs > 0.0 {
        ((config.warmup_epochs * passes as f64).round() as u64).max(100)
    } else {
        0
    }
}

/// The plan of pass `pass` of `epoch` in a run of `passes` passes per epoch.
pub fn at(config: &TrainConfig, epoch: usize, pass: usize, passes: usize) -> StepPlan {
    let warmup = warmup_iterations(config, passes);
    let ni = (pass + passes * epoch) as u64;
    let lr = config.lr0 * lr_factor(config, epoch);
    if warmup > 0 && ni <= warmup {
        let t = ni as f64 / warmup as f64;
        StepPlan {
            lr: t * lr,
            momentum: config.warmup_momentum + t * (config.momentum - config.warmup_momentum),
            accumulate: ((1.0 + t * (config.nbs as f64 / config.batch as f64 - 1.0)).round() as usize).max(1),
        }
    } else {
        StepPlan { lr, momentum: config.momentum, accumulate: accumulate(config) }
    }
}

/// A permutation of `0..n` for `epoch`, the same for the same seed (Fisher–Yates).
pub fn shuffled(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = ((u128::from(rng.random::<u64>()) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainConfig {
        TrainConfig { epochs: 10, batch: 2, nbs: 64, lr0: 1e-3, lrf: 0.01, ..TrainConfig::default() }
    }

    #[test]
    fn warmup_ramps_rate_momentum_and_accumulation() {
        let c = config();
        // 50 passes per epoch: 3 warm-up epochs are 150 iterations.
        assert_eq!(warmup_iterations(&c, 50), 150);
        let first = at(&c, 0, 0, 50);
        assert_eq!(first.lr, 0.0);
        assert_eq!(first.accumulate, 1);
        assert!((first.momentum - c.warmup_momentum).abs() < 1e-12);
        let half = at(&c, 1, 25, 50);
        assert!((half.lr - 0.5 * 1e-3 * lr_factor(&c, 1)).abs() < 1e-12);
        assert_eq!(half.accumulate, 17); // round(1 + 0.5 · 31)
        let after = at(&c, 3, 1, 50);
        assert_eq!(after.accumulate, 32);
        assert!((after.momentum - c.momentum).abs() < 1e-12);
    }

    #[test]
    fn short_runs_warm_up_for_at_least_100_iterations() {
        assert_eq!(warmup_iterations(&config(), 5), 100);
        let off = TrainConfig { warmup_epochs: 0.0, ..config() };
        assert_eq!(warmup_iterations(&off, 5), 0);
        assert_eq!(at(&off, 0, 0, 5).lr, 1e-3);
    }

    #[test]
    fn decay_is_linear_or_cosine_to_lrf() {
        let c = config();
        assert!((lr_factor(&c, 0) - 1.0).abs() < 1e-12);
        assert!((lr_factor(&c, 5) - 0.505).abs() < 1e-12);
        let cos = TrainConfig { cos_lr: true, ..config() };
        assert!((lr_factor(&cos, 5) - 0.505).abs() < 1e-12);
        assert!(lr_factor(&cos, 2) > lr_factor(&c, 2));
    }

    #[test]
    fn accumulation_keeps_the_nominal_batch() {
        assert_eq!(accumulate(&config()), 32);
        assert_eq!(accumulate(&TrainConfig { batch: 1, ..config() }), 64);
        assert_eq!(accumulate(&TrainConfig { nbs: 1, ..config() }), 1);
    }

    #[test]
    fn auto_nominal_batch_gives_small_runs_enough_steps() {
        // The demo: 50 new + 50 replayed images, 30 epochs, batch 2 → nbs 2, 1,500 steps.
        assert_eq!(nominal_batch_for(100, 30, 2), 2);
        assert_eq!(nominal_batch_for(1000, 30, 2), 16);
        assert_eq!(nominal_batch_for(10_000, 100, 2), 64);
        assert_eq!(nominal_batch_for(12, 2, 2), 2, "never below the batch");
        assert_eq!(nominal_batch_for(12, 2, 16), 16);
        for (images, epochs) in [(64, 10), (128, 10), (500, 30), (3000, 10)] {
            let nbs = nominal_batch_for(images, epochs, 2);
            let steps = images.div_ceil(nbs) * epochs;
            assert!(steps >= TARGET_STEPS || nbs == 2, "{images} images: nbs {nbs}, {steps} steps");
        }
    }

    #[test]
    fn shuffles_are_seeded_permutations() {
        let a = shuffled(100, 7, 3);
        assert_eq!(a, shuffled(100, 7, 3));
        assert_ne!(a, shuffled(100, 7, 4));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    }
}
