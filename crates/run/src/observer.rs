//! How a run reports progress: the caller implements [`Observer`] (the CLI draws progress bars and
//! prints a line per epoch); the library prints nothing, and gives the text of a training row in
//! Ultralytics' shape ([`header`], [`row`]) to any observer that prints one.

use headroom_core::metrics::Metrics;
use headroom_train::memory_guard::MemoryPool;
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

/// Ultralytics' training header: `Epoch`, memory, the loss terms, `Instances`, `Size` (11 wide).
/// The memory is the run's peak as its budget counts it ([`crate::folder::peak_memory`]):
/// the process' resident set on the CPU (`RAM`), the CUDA caching allocator's reserved bytes on a
/// discrete GPU (`GPU_mem`, as Ultralytics shows it), both on a board whose CPU and GPU share one
/// pool (`RAM+GPU`: a Jetson's GPU allocations are not in the resident set).
pub fn header(kd: bool, pool: MemoryPool) -> String {
    let memory = match pool {
        MemoryPool::Cpu => "RAM",
        MemoryPool::Cuda { unified: false, .. } => "GPU_mem",
        MemoryPool::Cuda { unified: true, .. } => "RAM+GPU",
    };
    let mut columns = vec!["Epoch", memory, "box_loss", "cls_loss", "dfl_loss"];
    if kd {
        columns.push("kd_loss");
    }
    columns.extend(["Instances", "Size"]);
    columns.iter().map(|c| format!("{c:>11}")).collect()
}

/// One training row, aligned under [`header`]: the running means of the loss terms.
pub fn row(epoch: usize, epochs: usize, r: &PassReport, kd: bool, pool: MemoryPool) -> String {
    let memory = crate::folder::peak_memory(pool).counted_mb / 1000.0;
    let mut out = format!("{:>11}{:>11}", format!("{}/{epochs}", epoch + 1), format!("{}G", g(memory, 3)));
    let terms = if kd { &r.mean[..] } else { &r.mean[..3] };
    for value in terms {
        out.push_str(&format!("{:>11}", g(*value, 4)));
    }
    out.push_str(&format!("{:>11}{:>11}", r.instances, r.imgsz));
    out
}

/// `value` with `digits` significant digits, as C's `%g`: trailing zeros dropped, an exponent
/// below 1e-4 or from 10^digits on.
pub fn g(value: f64, digits: usize) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    if value == 0.0 {
        return "0".into();
    }
    let exponent = value.abs().log10().floor() as i32;
    let trim = |s: String| {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_string() } else { s }
    };
    if exponent < -4 || exponent >= digits as i32 {
        let text = format!("{value:.prec$e}", prec = digits - 1);
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        format!("{}e{}{:02}", trim(mantissa.to_string()), if exp < 0 { '-' } else { '+' }, exp.abs())
    } else {
        let decimals = (digits as i32 - 1 - exponent).max(0) as usize;
        trim(format!("{value:.decimals$}"))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbers_print_as_c_percent_g() {
        use super::g;
        assert_eq!(g(0.84012, 4), "0.8401");
        assert_eq!(g(1.0985, 4), "1.099");
        assert_eq!(g(16.0, 4), "16");
        assert_eq!(g(12.5, 4), "12.5");
        assert_eq!(g(0.262, 3), "0.262");
        assert_eq!(g(0.00001234, 4), "1.234e-05");
        assert_eq!(g(123456.0, 4), "1.235e+05");
        assert_eq!(g(0.0, 4), "0");
    }

    #[test]
    fn a_row_sits_under_its_header() {
        let report =
            super::PassReport { done: 3, total: 8, mean: [0.84, 1.1, 0.99, 0.0], instances: 16, imgsz: 160 };
        let cpu = super::MemoryPool::Cpu;
        let (header, row) = (super::header(false, cpu), super::row(0, 3, &report, false, cpu));
        assert_eq!(header.len(), row.len(), "{header}\n{row}");
        assert!(row.trim_start().starts_with("1/3") && row.ends_with("160"), "{row}");
        assert!(!header.contains("kd_loss") && header.contains("RAM"));
        assert!(super::header(true, cpu).contains("kd_loss"));
        let jetson = super::MemoryPool::Cuda { device: 0, unified: true };
        assert!(super::header(false, jetson).contains("RAM+GPU"));
        assert!(
            super::header(false, super::MemoryPool::Cuda { device: 0, unified: false }).contains("GPU_mem")
        );
    }
}
