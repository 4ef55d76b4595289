//! Out-of-memory handling inside a run: the step-down hook that follows `headroom plan`'s in-run
//! rungs, and the memory cap (`--memory-cap`) the trainer checks after every pass, raising the same
//! [`crate::Error::OutOfMemory`] as an allocation failure.

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::config::TrainConfig;

/// What happens when libtorch runs out of memory: the planner steps down (smaller batch, more
/// checkpointing) and the run continues; without a planner the run stops with what to change.
pub trait OutOfMemory {
    /// A configuration that needs less memory than `config`, or `None` to stop.
    fn step_down(&mut self, config: &TrainConfig) -> Option<TrainConfig>;
}

/// The hook that stops ([`LadderStepDown`] steps down instead).
pub struct StopOnOutOfMemory;

impl OutOfMemory for StopOnOutOfMemory {
    fn step_down(&mut self, _config: &TrainConfig) -> Option<TrainConfig> {
        None
    }
}

/// Whether a libtorch error is an allocation failure.
pub fn is_out_of_memory(error: &Error) -> bool {
    let text = error.to_string();
    ["out of memory", "can't allocate memory", "CUBLAS_STATUS_ALLOC_FAILED", "std::bad_alloc"]
        .iter()
        .any(|needle| text.contains(needle))
}

/// One step down taken during a run (recorded in the run log and `results.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepDown {
    /// 0-based epoch in which memory ran out.
    pub epoch: usize,
    /// Pass of that epoch (in the batch of the time) that ran out.
    pub pass: usize,
    /// What ran out (libtorch's message or the cap's).
    pub reason: String,
    /// The rung taken: `batch 1`, `checkpoint`, `amp`.
    pub rung: String,
    /// Batch before and after.
    pub batch: [usize; 2],
    /// Passes per optimiser step after it (the nominal batch is kept).
    pub accumulate: usize,
    /// Where training resumed: epoch and pass (in the new batch) of the checkpoint reloaded.
    pub resumed_at: [usize; 2],
}

/// The rung `to` took from `from`, in words.
pub fn describe(from: &TrainConfig, to: &TrainConfig) -> String {
    let mut parts = Vec::new();
    if to.batch != from.batch {
        parts.push(format!("batch {}", to.batch));
    }
    if to.checkpoint && !from.checkpoint {
        parts.push("checkpoint".to_string());
    }
    if to.amp && !from.amp {
        parts.push("amp".to_string());
    }
    if parts.is_empty() { "same configuration".to_string() } else { parts.join(", ") }
}

/// Steps down the in-run rungs of the fit ladder ([`headroom_plan::step_down`]): halve the batch
/// (accumulation keeps the nominal batch), then checkpointing, then AMP on a GPU.
#[derive(Debug, Clone, Copy)]
pub struct LadderStepDown {
    /// Whether training runs on a GPU (AMP is a rung only there).
    pub gpu: bool,
}

impl OutOfMemory for LadderStepDown {
    fn step_down(&mut self, config: &TrainConfig) -> Option<TrainConfig> {
        let (_, batch, checkpoint, amp) =
            headroom_plan::step_down(config.batch, config.checkpoint, config.amp, self.gpu)?;
        Some(TrainConfig { batch, checkpoint, amp, ..config.clone() })
    }
}

/// A cap on what one training pass may take above the resident set the process held when the cap
/// was set (after loading: the planner's "training peak"), checked after every pass from the peak
/// resident set (`VmHWM`, reset before the pass). Linux only.
///
/// A pass exceeds it when its peak is above the cap **and** the process grew during the pass, as an
/// allocation would fail only when the process needs more from the system: memory the allocator
/// kept from an earlier, larger pass is reused, not counted again. (glibc keeps freed blocks
/// resident below its mmap threshold; [`Allocator::Compact`] makes the resident set follow what is
/// in use.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCap {
    /// Bytes a pass may take above `base`.
    pub bytes: u64,
    /// The resident set when the cap was set, bytes.
    pub base: u64,
    /// Passes of the run before the cap is checked (0: from the first).
    pub armed_after: u64,
}

/// Growth of the resident set during a pass below which the pass did not need more memory
/// (page-level noise of the allocator).
const GROWTH_NOISE: u64 = 2 << 20;

impl MemoryCap {
    /// A cap of `bytes` above the current resident set; `None` where /proc cannot tell it.
    pub fn new(bytes: u64, armed_after: u64) -> Option<MemoryCap> {
        Some(MemoryCap { bytes, base: status_bytes("VmRSS:")?, armed_after })
    }

    /// Resets the peak resident set before a pass; returns the resident set then.
    pub fn before_pass(&self) -> u64 {
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        status_bytes("VmRSS:").unwrap_or(0)
    }

    /// The peak resident set since [`MemoryCap::before_pass`] above the base, bytes.
    pub fn used(&self) -> u64 {
        status_bytes("VmHWM:").map_or(0, |peak| peak.saturating_sub(self.base))
    }

    /// What the pass took above the base when it is over the cap and the process grew during it
    /// (`before`: what [`MemoryCap::before_pass`] returned).
    pub fn exceeded(&self, before: u64) -> Option<u64> {
        let peak = status_bytes("VmHWM:")?;
        let used = peak.saturating_sub(self.base);
        (used > self.bytes && peak > before + GROWTH_NOISE).then_some(used)
    }
}

/// How the process's C allocator (glibc's malloc, which libtorch's CPU tensors come from) returns
/// freed memory: `--allocator` of `headroom train` (docs/TRAIN.md "Memory").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// glibc's defaults: blocks below the mmap threshold are kept for reuse, and the threshold
    /// rises to the largest block freed (up to 32 MiB on 64-bit), so after the first steps most
    /// tensors come from the heap, whose free gaps stay resident. Fastest; the resident set grows
    /// above what is in use (measured: 600–670 MB for 400 MB in use, `--train all` at 640).
    Fast,
    #[default]
    /// A fixed mmap threshold of [`COMPACT_MMAP_THRESHOLD`]: every tensor above it is mapped on
    /// allocation and unmapped on free, so the resident set follows what is in use. Costs the
    /// page faults of fresh pages (a step at 640 on the CPU takes ~2× as long).
    Compact,
}

/// The fixed mmap threshold of [`Allocator::Compact`]: glibc's own starting value, 128 KiB.
pub const COMPACT_MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets the process's allocator behaviour (glibc, with libtorch; elsewhere a no-op that returns
/// false for [`Allocator::Compact`]). Call it
/// before the run allocates its tensors: blocks already on the heap stay there. Returns whether
/// the allocator took the setting.
pub fn set_allocator(allocator: Allocator) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu", feature = "libtorch"))]
    {
        // A threshold the user set for glibc (`MALLOC_MMAP_THRESHOLD_`, or `mmap_threshold` in
        // `GLIBC_TUNABLES`) is already fixed, and theirs to choose: left as it is.
        let user_set = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold"));
        if allocator == Allocator::Compact && !user_set {
            // mallopt only sets a tunable of the process's allocator; a fixed threshold also turns
            // off glibc's dynamic raising of it.
            #[allow(unsafe_code)]
            let ok = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, COMPACT_MMAP_THRESHOLD) };
            return ok == 1;
        }
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", feature = "libtorch")))]
    {
        allocator == Allocator::Fast
    }
}

/// A `/proc/self/status` memory line in bytes.
pub fn status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_halves_the_batch_then_checkpoints_then_stops_on_a_cpu() {
        let mut hook = LadderStepDown { gpu: false };
        let start = TrainConfig { batch: 4, checkpoint: false, ..TrainConfig::default() };
        let a = hook.step_down(&start).expect("batch 2");
        assert_eq!((a.batch, a.checkpoint), (2, false));
        let b = hook.step_down(&a).expect("batch 1");
        let c = hook.step_down(&b).expect("checkpointing");
        assert_eq!((c.batch, c.checkpoint, c.amp), (1, true, false));
        assert!(hook.step_down(&c).is_none(), "no AMP rung without a GPU");
        assert_eq!(describe(&start, &a), "batch 2");
        assert_eq!(c.nbs, start.nbs, "the nominal batch is kept");
    }
}
