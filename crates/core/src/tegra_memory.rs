//! Memory as a Jetson counts it. CPU and GPU share one DRAM; GPU allocations (the CUDA context,
//! kernel images, cuDNN/cuBLAS workspaces, the caching allocator's blocks) are nvmap memory, which
//! is not in a process's resident set, and the CUDA allocator's reserved bytes miss all but the
//! last (NVIDIA "CUDA for Tegra" app note, §3.3). So a training run's figure on a Tegra board is
//! the growth of nvmap since the run started (`NvMapMemUsed` in `/proc/meminfo`, where the kernel
//! exports it) plus the process's anonymous resident memory; where `NvMapMemUsed` is absent, the
//! fall of `MemAvailable` less the growth of the process's own anonymous memory stands for the
//! device's share (it also counts other processes' growth: the safe side for a budget).
//! [`TegraPeak`] keeps the largest such figure over samples taken during the run.

/// The lines of `/proc/meminfo` that count here, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meminfo {
    /// `MemAvailable`.
    pub available: u64,
    /// `NvMapMemUsed` (Tegra kernels), when present.
    pub nvmap_used: Option<u64>,
}

impl Meminfo {
    /// Parses `/proc/meminfo`'s text (`Key:   123 kB` lines); `None` without `MemAvailable`.
    pub fn parse(text: &str) -> Option<Meminfo> {
        let field = |key: &str| {
            text.lines().find_map(|line| {
                let rest = line.strip_prefix(key)?.strip_prefix(':')?;
                let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
                Some(kib * 1024)
            })
        };
        Some(Meminfo { available: field("MemAvailable")?, nvmap_used: field("NvMapMemUsed") })
    }

    /// This machine's, where `/proc/meminfo` can be read.
    pub fn read() -> Option<Meminfo> {
        Meminfo::parse(&std::fs::read_to_string("/proc/meminfo").ok()?)
    }
}

/// The process's anonymous resident memory (`RssAnon` of `/proc/self/status`), bytes.
pub fn rss_anon() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let kib = text.lines().find_map(|l| l.strip_prefix("RssAnon:"))?.trim().trim_end_matches("kB").trim();
    kib.parse::<u64>().ok().map(|k| k * 1024)
}

/// One sample: the system's memory and the process's anonymous resident set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// `/proc/meminfo`.
    pub meminfo: Meminfo,
    /// `RssAnon`, bytes.
    pub rss_anon: u64,
}

impl Sample {
    /// Now, on this machine.
    pub fn read() -> Option<Sample> {
        Some(Sample { meminfo: Meminfo::read()?, rss_anon: rss_anon()? })
    }
}

/// Which reading the figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TegraSource {
    /// nvmap's growth (`NvMapMemUsed`).
    Nvmap,
    /// The fall of `MemAvailable`.
    MemAvailable,
}

/// The largest figure a run reached, from a sample at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TegraPeak {
    start: Sample,
    peak: u64,
    device_peak: u64,
}

impl TegraPeak {
    /// Starts from `start` (taken before the run allocates).
    pub fn new(start: Sample) -> TegraPeak {
        TegraPeak { start, peak: 0, device_peak: 0 }
    }

    /// Where the device's share is read from.
    pub fn source(&self) -> TegraSource {
        if self.start.meminfo.nvmap_used.is_some() { TegraSource::Nvmap } else { TegraSource::MemAvailable }
    }

    /// The device's share at `now`: nvmap's growth, else the fall of `MemAvailable` less the
    /// process's own anonymous growth (never below zero).
    pub fn device(&self, now: &Sample) -> u64 {
        match (self.start.meminfo.nvmap_used, now.meminfo.nvmap_used) {
            (Some(before), Some(after)) => after.saturating_sub(before),
            _ => {
                let fall = self.start.meminfo.available.saturating_sub(now.meminfo.available);
                fall.saturating_sub(now.rss_anon.saturating_sub(self.start.rss_anon))
            }
        }
    }

    /// Adds a sample; returns its figure (device share + anonymous resident memory).
    pub fn sample(&mut self, now: &Sample) -> u64 {
        let device = self.device(now);
        let counted = device + now.rss_anon;
        self.peak = self.peak.max(counted);
        self.device_peak = self.device_peak.max(device);
        counted
    }

    /// The largest figure so far, bytes.
    pub fn peak(&self) -> u64 {
        self.peak
    }

    /// The largest device share so far, bytes.
    pub fn device_peak(&self) -> u64 {
        self.device_peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// A recorded `/proc/meminfo` of an Orin (the lines that matter; kB).
    fn meminfo(available_mib: u64, nvmap_mib: Option<u64>) -> String {
        let mut text = format!(
            "MemTotal:        7802664 kB\nMemFree:         1032304 kB\nMemAvailable:    {} kB\nBuffers:           \
             38088 kB\n",
            available_mib * 1024
        );
        if let Some(n) = nvmap_mib {
            text.push_str(&format!("NvMapMemFree:      53248 kB\nNvMapMemUsed:    {} kB\n", n * 1024));
        }
        text.push_str("CmaTotal:         524288 kB\n");
        text
    }

    fn sample(available_mib: u64, nvmap_mib: Option<u64>, anon_mib: u64) -> Sample {
        Sample {
            meminfo: Meminfo::parse(&meminfo(available_mib, nvmap_mib)).expect("parse"),
            rss_anon: anon_mib * MIB,
        }
    }

    #[test]
    fn meminfo_lines_parse_in_bytes() {
        let m = Meminfo::parse(&meminfo(5000, Some(300))).expect("parse");
        assert_eq!((m.available, m.nvmap_used), (5000 * MIB, Some(300 * MIB)));
        assert_eq!(Meminfo::parse(&meminfo(5000, None)).and_then(|m| m.nvmap_used), None);
        assert_eq!(Meminfo::parse("MemTotal: 1 kB\n"), None, "no MemAvailable");
        // A key that only starts the same does not count.
        let m = Meminfo::parse("MemAvailableX: 9 kB\nMemAvailable: 2 kB\n").expect("parse");
        assert_eq!(m.available, 2048);
    }

    #[test]
    fn nvmap_growth_plus_anonymous_memory_peaks_where_the_gpu_held_most() {
        // The CUDA context and cuDNN come up (nvmap +600), training allocates (+900), the cache is
        // emptied at the end (+200); the process's own memory 150 → 400 → 380 MiB.
        let mut peak = TegraPeak::new(sample(6000, Some(200), 150));
        assert_eq!(peak.source(), TegraSource::Nvmap);
        let run = [sample(5200, Some(800), 300), sample(4000, Some(1700), 400), sample(5500, Some(400), 380)];
        let figures: Vec<u64> = run.iter().map(|s| peak.sample(s) / MIB).collect();
        assert_eq!(figures, vec![600 + 300, 1500 + 400, 200 + 380]);
        assert_eq!((peak.peak() / MIB, peak.device_peak() / MIB), (1900, 1500));
    }

    #[test]
    fn without_nvmap_the_fall_of_mem_available_less_the_process_growth_stands_for_the_gpu() {
        let mut peak = TegraPeak::new(sample(6000, None, 150));
        assert_eq!(peak.source(), TegraSource::MemAvailable);
        // MemAvailable falls 1500 MiB, 250 of which is the process's own anonymous growth.
        assert_eq!(peak.sample(&sample(4500, None, 400)) / MIB, 1250 + 400);
        // Memory freed below the start counts as nothing, never as a negative share.
        assert_eq!(peak.sample(&sample(6500, None, 100)) / MIB, 100);
        assert_eq!(peak.peak() / MIB, 1650);
    }

    #[test]
    fn this_machine_reads_where_proc_exists() {
        if std::path::Path::new("/proc/meminfo").exists() {
            let s = Sample::read().expect("a sample");
            assert!(s.meminfo.available > 0 && s.rss_anon > 0, "{s:?}");
        }
    }
}
