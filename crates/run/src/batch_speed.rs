//! `--plan auto`'s batch measurement: when larger batches than the planned one fit the budget,
//! each is timed for a few training passes before the first step, in two interleaved rounds (the
//! run's own data, augmentation, trunk and teacher, on its device), and the fastest per image
//! trains (docs/PLAN.md "A larger batch when it is faster"). Accumulation keeps the nominal batch,
//! so the run makes the same optimiser steps at any batch.

use headroom_core::dataset::ImageRecord;
use headroom_train::memory_guard::MemoryPool;
use headroom_train::trainer::Trainer;

use crate::Result;
use crate::folder::{PeakMemory, peak_memory};
use crate::spec::{RunSpec, fastest_batch};

/// Images timed per batch at least (after one untimed pass): 16, or 3 passes of a larger batch.
const TIMED_IMAGES: usize = 16;
const MIN_TIMED_PASSES: usize = 3;
/// Rounds over the batches, each batch's figure the fastest of its rounds: the rounds interleave
/// (2, 4, 8, 2, 4, 8), so a neighbour's burst of load that slows one round of one batch does not
/// decide the choice (load only ever slows a pass down).
const ROUNDS: usize = 2;

/// Times every batch `spec.plan` lists, records each figure in it and sets the fastest on the
/// spec and the trainer (nothing when no timing is pending). When a smaller batch than the
/// largest timed is chosen, the peaks start again after the timing, and the peaks of the set-up
/// before it are returned: `results.json` reports the larger of those and the training's, not the
/// timing's passes of a batch the run does not train with.
pub(crate) fn choose(
    trainer: &mut Trainer<'_>,
    spec: &mut RunSpec,
    records: &[ImageRecord],
    pool: MemoryPool,
) -> Result<Option<PeakMemory>> {
    let planned = spec.settings.batch;
    let Some(plan) = spec.plan.as_mut().filter(|p| p.timing_pending()) else { return Ok(None) };
    let setup = peak_memory(pool);
    for _ in 0..ROUNDS {
        for timing in plan.batches.iter_mut().filter(|t| t.skipped.is_none()) {
            if timing.batch > records.len() {
                timing.skipped = Some(format!("above the {} images of an epoch", records.len()));
                continue;
            }
            let passes = TIMED_IMAGES.div_ceil(timing.batch).max(MIN_TIMED_PASSES);
            match trainer.time_passes(records, timing.batch, passes) {
                Ok(seconds) => {
                    timing.seconds_per_image =
                        Some(timing.seconds_per_image.map_or(seconds, |before| before.min(seconds)));
                }
                Err(headroom_train::Error::OutOfMemory { reason }) => {
                    timing.seconds_per_image = None;
                    timing.skipped = Some(format!("out of memory: {reason}"));
                }
                Err(e) => return Err(e.into()),
            }
            // What the larger passes took goes back before the next (and before training).
            headroom_train::cpu_pool::reset();
        }
    }
    let chosen = fastest_batch(&plan.batches, planned);
    let line: Vec<String> = plan
        .batches
        .iter()
        .map(|b| match (b.seconds_per_image, &b.skipped) {
            (Some(s), _) => format!("batch {} {:.1} ms", b.batch, s * 1e3),
            (None, Some(why)) => format!("batch {} not timed ({why})", b.batch),
            (None, None) => format!("batch {} not timed", b.batch),
        })
        .collect();
    tracing::info!(
        "--plan auto: an image's training pass took {}: training with batch {chosen}{}",
        line.join(", "),
        if chosen == planned { " (no larger batch was faster by 5 % or more)" } else { "" }
    );
    let largest = plan.batches.iter().filter(|b| b.seconds_per_image.is_some()).map(|b| b.batch).max();
    let reset = largest.is_some_and(|b| b > chosen);
    if reset {
        headroom_train::memory_guard::reset_peaks(pool);
    }
    if chosen != planned {
        trainer.set_batch(chosen)?;
        spec.settings.batch = chosen;
        if let Some(e) = plan.batches.iter().find(|b| b.batch == chosen) {
            plan.estimate = e.estimate;
        }
    }
    Ok(reset.then_some(setup))
}
