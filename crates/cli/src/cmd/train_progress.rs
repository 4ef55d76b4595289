//! Progress of `headroom train` on the terminal: the run layer's observer.

/// Progress of a run on the terminal: a bar per epoch (losses, speed, peak memory) and a line per
/// epoch's end.
#[derive(Default)]
pub struct TerminalObserver {
    bar: Option<indicatif::ProgressBar>,
    epoch: usize,
    epochs: usize,
    /// When this session's first epoch started, and which epoch it was (for the whole-run ETA).
    started: Option<(std::time::Instant, usize)>,
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

    fn epoch_started(&mut self, epoch: usize, epochs: usize) {
        (self.epoch, self.epochs) = (epoch, epochs);
        self.started.get_or_insert((std::time::Instant::now(), epoch));
        self.bar = Some(super::progress::bar(0, &format!("{}/{epochs}", epoch + 1)));
    }

    fn pass(&mut self, done: usize, total: usize, c: [f64; 4]) {
        let Some(bar) = &self.bar else { return };
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        // The whole run's time left, from this session's pace so far.
        let eta = self.started.and_then(|(at, first)| {
            let within = done as f64 / total.max(1) as f64;
            let progressed = (self.epoch - first) as f64 + within;
            let left = (self.epochs - self.epoch) as f64 - within;
            (progressed > 0.02)
                .then(|| format!(" run eta {}", duration(at.elapsed().as_secs_f64() / progressed * left)))
        });
        bar.set_message(format!(
            "{}/{} box {:.3} cls {:.3} dfl {:.3}{} peak {:.0} MB{}",
            self.epoch + 1,
            self.epochs,
            c[0],
            c[1],
            c[2],
            kd_part(c[3], 3),
            headroom_run::folder::peak_rss_mb().unwrap_or(0.0),
            eta.unwrap_or_default()
        ));
    }

    fn epoch_trained(&mut self, ok: bool) {
        if let Some(bar) = self.bar.take() {
            super::progress::end(&bar, ok);
        }
    }

    fn epoch_ended(&mut self, r: &headroom_run::observer::EpochReport) {
        // `-q` leaves warnings and errors only.
        if !tracing::enabled!(tracing::Level::INFO) {
            return;
        }
        let s = &r.stats;
        eprintln!(
            "epoch {}/{}: loss box {:.4} cls {:.4} dfl {:.4}{}, val mAP50 {:.4} mAP50-95 {:.4}{} ({:.1} s)",
            s.epoch + 1,
            r.epochs,
            s.loss[0],
            s.loss[1],
            s.loss[2],
            kd_part(s.kd, 4),
            r.metrics.map50,
            r.metrics.map50_95,
            if r.best { ", best" } else { "" },
            s.seconds
        );
    }
}

/// The distillation loss, shown only when distillation is on (it is exactly 0 when off).
fn kd_part(kd: f64, decimals: usize) -> String {
    if kd == 0.0 { String::new() } else { format!(" kd {kd:.decimals$}") }
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
