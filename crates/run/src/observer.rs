//! How a run reports progress: the caller implements [`Observer`] (the CLI draws progress bars and
//! prints a line per epoch); the library prints nothing.

use headroom_core::metrics::Metrics;
use headroom_train::state::{EpochStats, PassReport};

/// What an epoch ended with.
#[derive(Debug, Clone)]
pub struct EpochReport {
    /// The epoch's training statistics.
    pub stats: EpochStats,
    /// The run's epochs.
    pub epochs: usize,
    /// `last.onnx` on the val split.
    pub metrics: Metrics,
    /// Whether it became `best.onnx`.
    pub best: bool,
}

/// Receives a run's progress. Every method has an empty default.
pub trait Observer {
    /// The feature cache is being built: `done` of `total` images.
    fn caching(&mut self, _done: usize, _total: usize) {}
    /// The feature cache is ready (or failed).
    fn cached(&mut self, _ok: bool) {}
    /// Where the run's tensors live (before the first epoch): what its memory figure is
    /// ([`crate::folder::peak_memory`]).
    fn memory_pool(&mut self, _pool: headroom_train::memory_guard::MemoryPool) {}
    /// Epoch `epoch` (0-based) of `epochs` starts.
    fn epoch_started(&mut self, _epoch: usize, _epochs: usize) {}
    /// A pass of the epoch ended.
    fn pass(&mut self, _report: &PassReport) {}
    /// The epoch's training ended (`ok`: without an error), before validation.
    fn epoch_trained(&mut self, _ok: bool) {}
    /// The epoch ended: validated, files written.
    fn epoch_ended(&mut self, _report: &EpochReport) {}
}

/// An observer that ignores everything (tests, scripts).
pub struct Silent;

impl Observer for Silent {}
