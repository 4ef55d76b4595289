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

/// Where a run's tensors live, which decides what its memory figure is: the CPU's resident set;
/// on CUDA the caching allocator's reserved bytes, plus the resident set where CPU and GPU share
/// one pool (a Jetson: GPU allocations come from the same DRAM but are not in the process's
/// resident set).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryPool {
    /// Tensors in the process's memory.
    Cpu,
    /// Tensors on CUDA device `device`.
    Cuda {
        /// The device index.
        device: usize,
        /// Whether the device's memory is the system's (the board preset's `unified`).
        unified: bool,
    },
}

/// A reading of the process's memory: the resident set and, on CUDA, the caching allocator.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryReading {
    /// The resident set now (`VmRSS`), bytes.
    pub rss: u64,
    /// The peak resident set (`VmHWM`, since the last reset), bytes.
    pub rss_peak: u64,
    /// The CUDA caching allocator of the pool's device, when it has a reading.
    pub cuda: Option<crate::CudaMemory>,
}

impl MemoryReading {
    /// Reads `/proc/self/status` and, for a CUDA pool, the caching allocator.
    pub fn read(pool: MemoryPool) -> MemoryReading {
        let cuda = match pool {
            MemoryPool::Cpu => None,
            MemoryPool::Cuda { device, .. } => crate::cuda_memory(device).ok(),
        };
        MemoryReading {
            rss: status_bytes("VmRSS:").unwrap_or(0),
            rss_peak: status_bytes("VmHWM:").unwrap_or(0),
            cuda,
        }
    }

    /// The figure held against the budget and the planner now ([`MemoryReading::counted_peak`]'s
    /// rule on the current values).
    pub fn counted_now(&self, pool: MemoryPool) -> u64 {
        Self::count(pool, self.rss, self.cuda.map(|c| c.reserved))
    }

    /// The peak held against the budget and the planner: the resident set on the CPU (or where
    /// CUDA has no reading); on a discrete GPU the allocator's reserved peak; on a unified board
    /// both added (their peaks may not coincide: an upper bound, the safe side for a budget).
    pub fn counted_peak(&self, pool: MemoryPool) -> u64 {
        Self::count(pool, self.rss_peak, self.cuda.map(|c| c.reserved_peak))
    }

    fn count(pool: MemoryPool, rss: u64, reserved: Option<u64>) -> u64 {
        match (pool, reserved) {
            (MemoryPool::Cuda { unified: true, .. }, Some(reserved)) => rss + reserved,
            (MemoryPool::Cuda { unified: false, .. }, Some(reserved)) => reserved,
            _ => rss,
        }
    }
}

/// Memory as a Jetson counts it, sampled on a thread while a run trains on a unified board's GPU
/// ([`headroom_core::tegra_memory`]: nvmap's growth since `start`, or the fall of `MemAvailable`,
/// plus the anonymous resident set): the CUDA context, kernel images and library workspaces that
/// the caching allocator's reserved bytes miss. Stops when dropped.
pub struct TegraSampler {
    peak: std::sync::Arc<std::sync::Mutex<headroom_core::tegra_memory::TegraPeak>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TegraSampler {
    /// Samples every `every` from `start` (taken before the run touched CUDA).
    pub fn start(start: headroom_core::tegra_memory::Sample, every: std::time::Duration) -> TegraSampler {
        use std::sync::atomic::Ordering;
        let peak =
            std::sync::Arc::new(std::sync::Mutex::new(headroom_core::tegra_memory::TegraPeak::new(start)));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (shared, stopping) = (peak.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("tegra-memory".into())
            .spawn(move || {
                while !stopping.load(Ordering::Relaxed) {
                    if let (Some(now), Ok(mut peak)) =
                        (headroom_core::tegra_memory::Sample::read(), shared.lock())
                    {
                        peak.sample(&now);
                    }
                    std::thread::park_timeout(every);
                }
            })
            .ok();
        TegraSampler { peak, stop, thread }
    }

    /// The peak so far (a last sample taken now).
    pub fn peak(&self) -> headroom_core::tegra_memory::TegraPeak {
        let mut peak = match self.peak.lock() {
            Ok(p) => *p,
            Err(poisoned) => *poisoned.into_inner(),
        };
        if let Some(now) = headroom_core::tegra_memory::Sample::read() {
            peak.sample(&now);
        }
        peak
    }
}

impl Drop for TegraSampler {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// A cap on what one training pass may take above what the process held when the cap was set
/// (after loading: the planner's "training peak"), checked after every pass from the peak of the
/// pool's memory figure ([`MemoryReading::counted_peak`]: the resident set on the CPU, the CUDA
/// allocator's reserved bytes on a GPU, both on a unified board), its peaks reset before the pass.
/// Linux only.
///
/// A pass exceeds it when its peak is above the cap **and** the figure grew during the pass, as an
/// allocation would fail only when the process needs more from the system: memory the allocator
/// kept from an earlier, larger pass is reused, not counted again. (glibc keeps freed blocks
/// resident below its mmap threshold; [`Allocator::Compact`] makes the resident set follow what is
/// in use; the CUDA caching allocator keeps what it reserved.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryCap {
    /// Bytes a pass may take above `base`.
    pub bytes: u64,
    /// The pool's figure when the cap was set, bytes.
    pub base: u64,
    /// Passes of the run before the cap is checked (0: from the first).
    pub armed_after: u64,
    /// What is counted.
    pub pool: MemoryPool,
}

/// Starts `pool`'s peaks again from what is in use now: the resident set's (`VmHWM`, through
/// `/proc/self/clear_refs`; nothing where it cannot be written) and, on CUDA, the caching
/// allocator's.
pub fn reset_peaks(pool: MemoryPool) {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    if let MemoryPool::Cuda { device, .. } = pool {
        crate::reset_cuda_peak(device);
    }
}

/// Growth of the resident set during a pass below which the pass did not need more memory
/// (page-level noise of the allocator).
const GROWTH_NOISE: u64 = 2 << 20;

impl MemoryCap {
    /// A cap of `bytes` above what `pool` holds now; `None` where /proc cannot tell it.
    pub fn new(bytes: u64, armed_after: u64, pool: MemoryPool) -> Option<MemoryCap> {
        status_bytes("VmRSS:")?;
        Some(MemoryCap { bytes, base: MemoryReading::read(pool).counted_now(pool), armed_after, pool })
    }

    /// Resets the peaks before a pass; returns the pool's figure then.
    pub fn before_pass(&self) -> u64 {
        reset_peaks(self.pool);
        MemoryReading::read(self.pool).counted_now(self.pool)
    }

    /// The peak since [`MemoryCap::before_pass`] above the base, bytes.
    pub fn used(&self) -> u64 {
        MemoryReading::read(self.pool).counted_peak(self.pool).saturating_sub(self.base)
    }

    /// What the pass took above the base when it is over the cap and the figure grew during it
    /// (`before`: what [`MemoryCap::before_pass`] returned).
    pub fn exceeded(&self, before: u64) -> Option<u64> {
        self.exceeded_at(MemoryReading::read(self.pool).counted_peak(self.pool), before)
    }

    /// [`MemoryCap::exceeded`] for a given peak.
    pub fn exceeded_at(&self, peak: u64, before: u64) -> Option<u64> {
        let used = peak.saturating_sub(self.base);
        (used > self.bytes && peak > before + GROWTH_NOISE).then_some(used)
    }
}

/// How libtorch's CPU tensors get their memory and give it back: `--allocator` of `headroom train`
/// (docs/TRAIN.md "Memory: the allocator", docs/BENCHMARKS.md "The allocator").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Allocator {
    /// headroom's pool ([`crate::cpu_pool`]): a best-fit heap whose freed blocks serve the next
    /// tensors, its resident pages within 1 + [`crate::cpu_pool::DEFAULT_SLACK`] times the most
    /// ever in use: compact's memory without the page faults of fresh pages at every step.
    #[default]
    #[cfg_attr(
        feature = "clap",
        value(help = "Freed tensors' memory serves the next tensors (best fit in one heap), its resident \
                      pages kept within 1.25x the most ever in use: compact's memory at fast's speed")
    )]
    Pooled,
    /// A fixed mmap threshold of [`COMPACT_MMAP_THRESHOLD`]: every tensor above it is mapped on
    /// allocation and unmapped on free, so the resident set follows what is in use. Costs the
    /// page faults of fresh pages (a step at 640 on the CPU takes 2–3× as long).
    #[cfg_attr(
        feature = "clap",
        value(help = "Freed tensors go back to the system: the resident set follows what is in use; every \
                      step pays the page faults of fresh memory")
    )]
    Compact,
    /// glibc's defaults: blocks below the mmap threshold are kept for reuse, and the threshold
    /// rises to the largest block freed (up to 32 MiB on 64-bit), so after the first steps most
    /// tensors come from the heap, whose free gaps stay resident. The resident set grows above what
    /// is in use (measured: 600–670 MB for 400 MB in use, `--train all` at 640).
    #[cfg_attr(
        feature = "clap",
        value(
            help = "glibc's defaults: freed memory is kept for reuse; faster on the CPU, more resident memory"
        )
    )]
    Fast,
}

/// The fixed mmap threshold of [`Allocator::Compact`] (and of glibc's blocks under
/// [`Allocator::Pooled`]): glibc's own starting value, 128 KiB.
pub const COMPACT_MMAP_THRESHOLD: i32 = 128 * 1024;

/// Sets the process's allocator behaviour (glibc, with libtorch; elsewhere a no-op that returns
/// false for anything but [`Allocator::Fast`]). Call it before the run allocates its tensors:
/// blocks already allocated stay where they are. Returns whether the setting was taken.
pub fn set_allocator(allocator: Allocator) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu", feature = "libtorch"))]
    {
        // A threshold the user set for glibc (`MALLOC_MMAP_THRESHOLD_`, or `mmap_threshold` in
        // `GLIBC_TUNABLES`) is already fixed, and theirs to choose: left as it is.
        let user_set = std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_some()
            || std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("mmap_threshold"));
        let mut ok = true;
        if allocator != Allocator::Fast && !user_set {
            // mallopt only sets a tunable of the process's allocator; a fixed threshold also turns
            // off glibc's dynamic raising of it. Under the pool it keeps what libtorch does not
            // allocate through the pool (ONNX Runtime, images) compact too.
            #[allow(unsafe_code)]
            let set = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, COMPACT_MMAP_THRESHOLD) };
            ok = set == 1;
        }
        if allocator == Allocator::Pooled {
            // The slack is the planner's too (headroom_plan::memory::POOL_SLACK): not a knob.
            ok &= crate::cpu_pool::install(crate::cpu_pool::DEFAULT_SLACK);
        }
        ok
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
    fn on_cuda_the_allocator_is_counted_and_on_a_unified_board_the_resident_set_too() {
        let cuda = crate::CudaMemory { allocated: 10, allocated_peak: 20, reserved: 30, reserved_peak: 40 };
        let reading = MemoryReading { rss: 100, rss_peak: 200, cuda: Some(cuda) };
        let discrete = MemoryPool::Cuda { device: 0, unified: false };
        let unified = MemoryPool::Cuda { device: 0, unified: true };
        assert_eq!((reading.counted_now(MemoryPool::Cpu), reading.counted_peak(MemoryPool::Cpu)), (100, 200));
        assert_eq!((reading.counted_now(discrete), reading.counted_peak(discrete)), (30, 40));
        assert_eq!((reading.counted_now(unified), reading.counted_peak(unified)), (130, 240));
        // No allocator reading (no CUDA tensor yet): the resident set, whatever the pool.
        let cpu_only = MemoryReading { cuda: None, ..reading };
        assert_eq!(cpu_only.counted_peak(unified), 200);
    }

    #[test]
    fn the_cap_trips_only_above_its_bytes_when_the_pass_grew() {
        let cap = MemoryCap {
            bytes: 100 << 20,
            base: 50 << 20,
            armed_after: 0,
            pool: MemoryPool::Cuda { device: 0, unified: true },
        };
        // 160 MiB above a base of 50, grown from 60: over.
        assert_eq!(cap.exceeded_at(210 << 20, 60 << 20), Some(160 << 20));
        // Over the cap but nothing new reserved during the pass (the allocator's cache reused).
        assert_eq!(cap.exceeded_at(210 << 20, 209 << 20), None);
        // Grown, within the cap.
        assert_eq!(cap.exceeded_at(140 << 20, 60 << 20), None);
    }

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
