//! Progress of `headroom train` on the terminal: the run layer's observer.

use headroom_train::memory_guard::MemoryPool;
use headroom_train::state::PassReport;

/// Progress of a run on the terminal in Ultralytics' shape: before each epoch a header, then the
/// epoch's row (peak memory, the loss terms' running means, the batch's objects, the input size)
/// with a bar and the whole run's time left on a terminal, then the val header and `all` row.
/// In a pipe the bar is hidden and the row is printed once, when the epoch's training ends.
#[derive(Default)]
pub struct TerminalObserver {
    bar: Option<indicatif::ProgressBar>,
    /// The last pass's report of the epoch in progress.
    last: Option<PassReport>,
    /// Whether the distillation term shows (it is exactly 0 when distillation is off).
    kd: bool,
    /// The epoch's header is still to be printed (with its first pass).
    header_due: bool,
    /// When the epoch in progress started in this process.
    epoch_start: Option<std::time::Instant>,
    epoch: usize,
    epochs: usize,
    /// When this session's first epoch started, and which epoch it was (for the whole-run ETA).
    started: Option<(std::time::Instant, usize)>,
    /// Where the run's tensors live (the memory column's figure); the CPU until the run says.
    pool: Option<MemoryPool>,
}

/// `1h02m`, `3m12s`, `45s`.
fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

impl TerminalObserver {
    /// The whole run's time left, from this session's pace so far (`None` until 2 % is done).
    fn run_eta(&self, done: usize, total: usize) -> Option<String> {
        let (at, first) = self.started?;
        let within = done as f64 / total.max(1) as f64;
        let progressed = (self.epoch - first) as f64 + within;
        let left = (self.epochs - self.epoch) as f64 - within;
        (progressed > 0.02).then(|| duration(at.elapsed().as_secs_f64() / progressed * left))
    }
}

impl headroom_run::observer::Observer for TerminalObserver {
    fn caching(&mut self, done: usize, total: usize) {
        let bar = self.bar.get_or_insert_with(|| super::progress::bar(0, "caching trunk features"));
        bar.set_length(total as u64);
        bar.set_position(done as u64);
    }

    fn cached(&mut self, ok: bool) {
        if let Some(bar) = self.bar.take() {
            super::progress::end(&bar, ok);
        }
    }

    fn memory_pool(&mut self, pool: MemoryPool) {
        self.pool = Some(pool);
    }

    fn epoch_started(&mut self, epoch: usize, epochs: usize) {
        (self.epoch, self.epochs) = (epoch, epochs);
        self.started.get_or_insert((std::time::Instant::now(), epoch));
        self.last = None;
        self.epoch_start = Some(std::time::Instant::now());
        // Ultralytics prints its header before every epoch's row; it is printed with the first
        // pass, which tells whether the distillation column shows.
        self.header_due = true;
        self.bar = Some(super::progress::row_bar());
    }

    fn pass(&mut self, report: &PassReport) {
        self.kd |= report.mean[3] != 0.0;
        self.last = Some(*report);
        if std::mem::take(&mut self.header_due) && tracing::enabled!(tracing::Level::INFO) {
            super::progress::println(&format!(
                "\n{}",
                headroom_run::observer::header(self.kd, self.pool.unwrap_or(MemoryPool::Cpu))
            ));
        }
        let Some(bar) = &self.bar else { return };
        bar.set_length(report.total as u64);
        bar.set_position(report.done as u64);
        bar.set_prefix(headroom_run::observer::row(
            self.epoch,
            self.epochs,
            report,
            self.kd,
            self.pool.unwrap_or(MemoryPool::Cpu),
        ));
        let eta = self.run_eta(report.done, report.total);
        bar.set_message(eta.map(|eta| format!("run eta {eta}")).unwrap_or_default());
    }

    fn epoch_trained(&mut self, ok: bool) {
        let Some(bar) = self.bar.take() else { return };
        if !ok {
            // Stopped (an error, a signal): the bar stays where it stopped.
            super::progress::end(&bar, false);
            return;
        }
        // The row is printed as a line, on a terminal and in a pipe alike (where the bar is
        // hidden): a finished bar is not left to the bar library to keep on screen.
        bar.finish_and_clear();
        if let Some(report) = &self.last
            && tracing::enabled!(tracing::Level::INFO)
        {
            let seconds = self.epoch_start.map_or(0.0, |t| t.elapsed().as_secs_f64());
            super::progress::println(&format!(
                "{}: 100% {}/{} passes in {}",
                headroom_run::observer::row(
                    self.epoch,
                    self.epochs,
                    report,
                    self.kd,
                    self.pool.unwrap_or(MemoryPool::Cpu)
                ),
                report.done,
                report.total,
                if seconds < 60.0 { format!("{seconds:.1}s") } else { duration(seconds) }
            ));
        }
    }

    fn epoch_ended(&mut self, r: &headroom_run::observer::EpochReport) {
        // `-q` leaves warnings and errors only.
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        // Ultralytics' val header and `all` row; `best` when last.onnx became best.onnx.
        let table = r.metrics.table(&[]);
        let mut lines = table.lines().take(2);
        let (head, all) = (lines.next().unwrap_or_default(), lines.next().unwrap_or_default());
        let best = if r.best { "  (best)" } else { "" };
        super::progress::println(&format!("{head}\n{all}{best}"));
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_as_a_clock() {
        assert_eq!(super::duration(45.2), "45s");
        assert_eq!(super::duration(192.0), "3m12s");
        assert_eq!(super::duration(3720.0), "1h02m");
    }
}
