//! How an export reports progress and hears a stop request: the caller implements [`Observer`] (the
//! CLI draws progress bars and polls its signal flag); the library prints nothing but log lines.

/// A counted stage of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Calibration images run through the model.
    Calibration,
    /// Convs ranked by the error each causes alone (the sensitivity search).
    Ranking,
}

impl Stage {
    /// A short label (`calib`, `ranking`).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Calibration => "calib",
            Stage::Ranking => "ranking",
        }
    }
}

/// Receives an export's progress. Every method has a default: nothing shown, never stopped.
pub trait Observer {
    /// A stage of `total` items starts.
    fn started(&self, _stage: Stage, _total: u64) {}
    /// `done` items of the stage are finished.
    fn advanced(&self, _done: u64) {}
    /// The stage ended: `finished` when all of it was done, not when it stopped early.
    fn ended(&self, _finished: bool) {}
    /// `renamed` files of the publication are in place (1, 2, … up to all of them): a kill between
    /// two is completed by the next export of that stem to that folder.
    fn published(&self, _renamed: usize) {}
    /// Whether the export should stop at the next stage or item (nothing is then published).
    fn stop_requested(&self) -> bool {
        false
    }
}

/// An observer that shows nothing and never stops (tests, scripts).
pub struct Silent;

impl Observer for Silent {}
