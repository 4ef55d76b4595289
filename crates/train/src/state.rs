//! Where a run stands ([`Progress`], saved in every checkpoint) and what an epoch did
//! ([`EpochStats`]). Pure data.

use serde::{Deserialize, Serialize};

/// Where an epoch's training stands after a pass: what a progress display shows (Ultralytics'
/// training row).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassReport {
    /// Passes of the epoch finished.
    pub done: usize,
    /// Passes in the epoch.
    pub total: usize,
    /// Means of the box, cls, dfl and kd terms over the epoch's finite passes so far (resumed
    /// passes included): Ultralytics' running `tloss`.
    pub mean: [f64; 4],
    /// Objects in this pass's batch, after augmentation (Ultralytics' `Instances`).
    pub instances: usize,
    /// The input's longest side (Ultralytics' `Size`).
    pub imgsz: u32,
}

/// What one epoch did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochStats {
    /// 0-based epoch.
    pub epoch: usize,
    /// Mean box, cls and dfl (or L1) terms (with gains) over the epoch's passes.
    pub loss: [f64; 3],
    /// Mean distillation term (with its gain).
    pub kd: f64,
    /// Learning rate of the weights at the end of the epoch.
    pub lr: f64,
    /// Passes whose loss was not finite (skipped).
    pub bad_steps: usize,
    /// Optimiser steps taken.
    pub optimizer_steps: u64,
    /// Seconds (over every process that worked on the epoch).
    pub seconds: f64,
    /// Where the seconds of this process went: [`PHASES`].
    pub phases: [f64; 5],
}

/// The phases of a pass timed in [`EpochStats::phases`]: data (read and augment images, or read
/// cached features), trunk, head (the trainable part's forward and backward, recomputation
/// included), loss, optimizer (clipping, the step, the EMA).
pub const PHASES: [&str; 5] = ["data", "trunk", "head", "loss", "optimizer"];

/// The state a run resumes from.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Progress {
    /// Epochs finished.
    pub epochs_done: usize,
    /// Passes finished in the epoch in progress.
    pub pass: usize,
    /// Optimiser steps taken.
    pub optimizer_steps: u64,
    /// EMA updates.
    pub ema_updates: u64,
    /// Sums of the epoch in progress: box, cls, dfl, kd.
    pub sums: [f64; 4],
    /// Passes counted in `sums`.
    pub counted: usize,
    /// Skipped passes of the epoch in progress.
    pub bad: usize,
    /// Seconds spent on the epoch in progress.
    pub seconds: f64,
    /// The loss scale of mixed precision (0: not started).
    #[serde(default)]
    pub loss_scale: f64,
    /// Clean steps since the loss scale last changed.
    #[serde(default)]
    pub scale_steps: u64,
}

impl Progress {
    /// The progress at the start of the next epoch: the run's counters kept, the epoch's reset.
    pub fn next_epoch(&self) -> Progress {
        Progress {
            epochs_done: self.epochs_done + 1,
            optimizer_steps: self.optimizer_steps,
            ema_updates: self.ema_updates,
            loss_scale: self.loss_scale,
            scale_steps: self.scale_steps,
            ..Progress::default()
        }
    }
}
