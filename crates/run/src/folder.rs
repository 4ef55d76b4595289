//! The run folder `runs/train/<name>/`: its name, its lock, and the files a run keeps there besides
//! checkpoints: `metrics.csv` (one row per epoch; rows after the last checkpoint are redone on
//! resume), `run.log` (steps down), `results.json` and the pictures of the last validation
//! ([`VAL_PLOT_FILES`]). Every file is written atomically.

use std::path::{Path, PathBuf};

use headroom_core::metrics::Metrics;
use headroom_train::memory_guard::{MemoryPool, MemoryReading, StepDown};
use headroom_train::state::EpochStats;

use crate::spec::SPEC_FILE;
use crate::{Error, Result};

/// The file of a finished run's summary.
pub const RESULTS_FILE: &str = "results.json";
const METRICS_FILE: &str = "metrics.csv";
const METRICS_HEADER: &str = "epoch,box_loss,cls_loss,dfl_loss,kd_loss,lr,bad_steps,seconds,peak_rss_mb,precision,recall,map50,map50_95,fitness,peak_gpu_mb\n";
/// The column of `fitness` in `metrics.csv` (0-based; the last one before `peak_gpu_mb` was added).
const FITNESS_COLUMN: usize = 13;

/// Precision against recall per class at IoU 0.5 of `best.onnx` on the val split (Ultralytics 8.4's
/// name in a detection run).
pub const PR_CURVE_FILE: &str = "BoxPR_curve.png";
/// Predicted class against true class of `best.onnx` on the val split, counts.
pub const CONFUSION_FILE: &str = "confusion_matrix.png";
/// The same, each true class's column as shares.
pub const CONFUSION_NORMALIZED_FILE: &str = "confusion_matrix_normalized.png";
/// The first 16 val images with `best.onnx`'s predictions above 0.25.
pub const PREDICTIONS_MOSAIC_FILE: &str = "val_batch0_pred.jpg";
/// The same images with their labels.
pub const LABELS_MOSAIC_FILE: &str = "val_batch0_labels.jpg";
/// The pictures of a finished run's last validation.
pub const VAL_PLOT_FILES: [&str; 5] =
    [PR_CURVE_FILE, CONFUSION_FILE, CONFUSION_NORMALIZED_FILE, PREDICTIONS_MOSAIC_FILE, LABELS_MOSAIC_FILE];

/// The inputs a run started with (model, data, replay, teacher), written once: a resumed run whose
/// `config.toml` names others (a hand edit) is refused instead of mixing datasets.
pub const STARTED_WITH_FILE: &str = "ckpt/started-with.json";

/// The starting model's validation ("epoch 0"): `best.onnx` is the starting model until an epoch
/// beats its fitness, so a run never hands back a worse model than it was given.
pub const START_FILE: &str = "start.json";

/// The files of a run folder whose atomic-write temporaries a run sweeps on start.
pub const RUN_FILES: [&str; 17] = [
    START_FILE,
    "renorm.onnx",
    "config.toml",
    "metrics.csv",
    "results.json",
    "run.log",
    "last.onnx",
    "best.onnx",
    "loss.png",
    "map.png",
    "lr.png",
    "memory.png",
    PR_CURVE_FILE,
    CONFUSION_FILE,
    CONFUSION_NORMALIZED_FILE,
    PREDICTIONS_MOSAIC_FILE,
    LABELS_MOSAIC_FILE,
];

/// The files of the run's `ckpt/`.
pub const CHECKPOINT_FILES: [&str; 3] = ["last.pt", "start.pt", "started-with.json"];

/// The folder of a new run: `project/name`, refused when it exists; or the first free
/// `project/train`, `project/train2`, ...
pub fn new_run_dir(project: &Path, name: Option<&str>) -> Result<PathBuf> {
    if let Some(name) = name {
        let dir = project.join(name);
        if dir.exists() {
            return Err(Error::Folder {
                dir,
                reason: "exists: choose another --name, or add --resume to continue it".into(),
            });
        }
        return Ok(dir);
    }
    (1..10_000)
        .map(|i| project.join(if i == 1 { "train".to_string() } else { format!("train{i}") }))
        .find(|d| !d.exists())
        .ok_or_else(|| Error::Folder { dir: project.to_path_buf(), reason: "no free run name".into() })
}

/// The folder of a run to resume: it must hold a `config.toml`.
pub fn existing_run_dir(dir: &Path) -> Result<PathBuf> {
    if !dir.join(SPEC_FILE).exists() {
        return Err(Error::Folder {
            dir: dir.to_path_buf(),
            reason: format!("no run to resume (no {SPEC_FILE})"),
        });
    }
    Ok(dir.to_path_buf())
}

/// Creates the folder and its `ckpt/` and takes the run's lock (one process per run).
pub fn create_and_lock(dir: &Path) -> Result<headroom_core::fsio::OutputLock> {
    std::fs::create_dir_all(dir.join("ckpt")).map_err(|e| Error::Folder {
        dir: dir.to_path_buf(),
        reason: format!("creating the run folder: {e}"),
    })?;
    Ok(headroom_core::fsio::OutputLock::acquire(dir, "headroom train")?)
}

/// Keeps the header and the first `epochs` rows of `metrics.csv`.
pub fn truncate_metrics(dir: &Path, epochs: usize) -> Result<()> {
    let path = dir.join(METRICS_FILE);
    let Ok(text) = std::fs::read_to_string(&path) else { return Ok(()) };
    let kept: Vec<&str> = text.lines().take(epochs + 1).collect();
    let text = kept.join("\n") + "\n";
    headroom_core::fsio::write_atomic(&path, text.as_bytes())?;
    write_results_csv(dir, &text)
}

/// `results.csv` with Ultralytics' column names, made from `metrics.csv` (so the two always agree):
/// `time` is the training seconds so far; `val/*_loss` are empty (headroom validates in ONNX
/// Runtime, which computes no loss); `lr/pg0..2` all hold the learning rate of the weights.
pub const RESULTS_CSV_HEADER: &str = "epoch,time,train/box_loss,train/cls_loss,train/dfl_loss,metrics/precision(B),\
metrics/recall(B),metrics/mAP50(B),metrics/mAP50-95(B),val/box_loss,val/cls_loss,val/dfl_loss,lr/pg0,lr/pg1,lr/pg2\n";

fn write_results_csv(dir: &Path, metrics: &str) -> Result<()> {
    let mut out = RESULTS_CSV_HEADER.to_string();
    let mut time = 0.0;
    for line in metrics.lines().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        if c.len() < 14 {
            continue;
        }
        time += c[7].parse::<f64>().unwrap_or(0.0);
        out.push_str(&format!(
            "{},{time:.2},{},{},{},{},{},{},{},,,,{},{},{}\n",
            c[0], c[1], c[2], c[3], c[9], c[10], c[11], c[12], c[5], c[5], c[5]
        ));
    }
    headroom_core::fsio::write_atomic(&dir.join("results.csv"), out.as_bytes())?;
    Ok(())
}

/// The best fitness recorded in `metrics.csv` (for a resumed run).
pub fn read_best(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(METRICS_FILE)).unwrap_or_default();
    text.lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(FITNESS_COLUMN)?.parse::<f64>().ok())
        .chain(read_start_fitness(dir))
        .reduce(f64::max)
}

/// The starting model validated as epoch 0 ([`START_FILE`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StartRecord {
    /// Always 0.
    pub epoch: usize,
    /// Its fitness on the val split.
    pub fitness: f64,
    /// Its metrics on the val split.
    pub metrics: headroom_core::metrics::Metrics,
}

/// The starting model's fitness ([`START_FILE`]), when the run validated it.
pub fn read_start_fitness(dir: &Path) -> Option<f64> {
    let text = std::fs::read_to_string(dir.join(START_FILE)).ok()?;
    Some(serde_json::from_str::<StartRecord>(&text).ok()?.fitness)
}

/// What `metrics.csv` says of the epochs done: the best one (1-based, the first of equal
/// fitness, as `best.onnx` keeps it), the seconds trained in all and in the last epoch.
#[derive(Debug, Default)]
pub struct EpochHistory {
    /// The epoch of the best fitness.
    pub best_epoch: Option<usize>,
    /// Seconds of training, summed.
    pub seconds: f64,
    /// Seconds of the last epoch.
    pub last_seconds: f64,
}

/// Reads [`EpochHistory`] from `dir`'s `metrics.csv` (empty when there is none).
pub fn epoch_history(dir: &Path) -> EpochHistory {
    let mut history = EpochHistory::default();
    // The starting model is epoch 0: an epoch must beat it to become the best.
    let mut best: Option<f64> = read_start_fitness(dir);
    if best.is_some() {
        history.best_epoch = Some(0);
    }
    // No metrics.csv yet (before the first epoch): only the start.
    let text = std::fs::read_to_string(dir.join(METRICS_FILE)).unwrap_or_default();
    for line in text.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let (Some(epoch), Some(seconds), Some(fitness)) = (
            cells.first().and_then(|c| c.parse::<usize>().ok()),
            cells.get(7).and_then(|c| c.parse::<f64>().ok()),
            cells.get(FITNESS_COLUMN).and_then(|c| c.parse::<f64>().ok()),
        ) else {
            continue;
        };
        history.seconds += seconds;
        history.last_seconds = seconds;
        if best.is_none_or(|b| fitness > b) {
            best = Some(fitness);
            history.best_epoch = Some(epoch);
        }
    }
    history
}

/// `metrics.csv` of a run started before `peak_gpu_mb` was a column, with it (empty in old rows).
fn with_gpu_column(text: String) -> String {
    let header = text.lines().next().unwrap_or_default();
    if header.is_empty() || header.ends_with(",peak_gpu_mb") {
        return text;
    }
    let mut out = METRICS_HEADER.to_string();
    for line in text.lines().skip(1) {
        out.push_str(line);
        out.push_str(",\n");
    }
    out
}

/// Appends the epoch's row to `metrics.csv` (the peak resident set, and on CUDA the caching
/// allocator's reserved peak in `peak_gpu_mb`); returns the file's text.
pub fn append_metrics(dir: &Path, stats: &EpochStats, m: &Metrics, peak: &PeakMemory) -> Result<String> {
    let path = dir.join(METRICS_FILE);
    let mut text =
        with_gpu_column(std::fs::read_to_string(&path).unwrap_or_else(|_| METRICS_HEADER.to_string()));
    text.push_str(&format!(
        "{},{:.6},{:.6},{:.6},{:.6},{:.6e},{},{:.2},{:.1},{:.6},{:.6},{:.6},{:.6},{:.6},{}\n",
        stats.epoch + 1,
        stats.loss[0],
        stats.loss[1],
        stats.loss[2],
        stats.kd,
        stats.lr,
        stats.bad_steps,
        stats.seconds,
        peak.rss_mb,
        m.precision,
        m.recall,
        m.map50,
        m.map50_95,
        m.fitness,
        peak.cuda_reserved_mb.map(|mb| format!("{mb:.1}")).unwrap_or_default()
    ));
    headroom_core::fsio::write_atomic(&path, text.as_bytes())?;
    write_results_csv(dir, &text)?;
    Ok(text)
}

/// Appends the steps down to the run's `run.log` (created when there is one).
pub fn log_steps(dir: &Path, steps: &[StepDown]) -> Result<()> {
    if steps.is_empty() {
        return Ok(());
    }
    let path = dir.join("run.log");
    let mut text = std::fs::read_to_string(&path).unwrap_or_default();
    for s in steps {
        text.push_str(&format!(
            "out of memory at epoch {} pass {} ({}): stepped down to {} (batch {} -> {}, {} passes per step), \
             resumed from the last checkpoint at epoch {} pass {}\n",
            s.epoch + 1,
            s.pass,
            s.reason,
            s.rung,
            s.batch[0],
            s.batch[1],
            s.accumulate,
            s.resumed_at[0] + 1,
            s.resumed_at[1]
        ));
    }
    headroom_core::fsio::write_atomic(&path, text.as_bytes())?;
    Ok(())
}

/// The summary of a finished run, if it has one.
pub fn read_results(dir: &Path) -> Option<RunResults> {
    serde_json::from_slice(&std::fs::read(dir.join(RESULTS_FILE)).ok()?).ok()
}

/// `results.json`: how a finished run ended, the files it left and its memory (`headroom train
/// --json` prints it; the field loop's report reads it). Keys missing from an older file read as
/// their defaults.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct RunResults {
    /// The run folder.
    pub run: PathBuf,
    /// Epochs asked for.
    pub epochs: usize,
    /// Epochs trained (fewer when it stopped early).
    pub epochs_done: usize,
    /// Why it stopped before its last epoch (`--patience`, `--time`), if it did.
    pub stopped_early: Option<String>,
    /// The epoch (1-based; 0: the starting model) of `best.onnx`.
    pub best_epoch: Option<usize>,
    /// `best.onnx`'s val fitness.
    pub best_fitness: Option<f64>,
    /// The starting model's val fitness (epoch 0).
    pub start_fitness: Option<f64>,
    /// `best.onnx` validated once more at the end, as Ultralytics does (none with `--remap`).
    pub best_val: Option<headroom_core::metrics::Metrics>,
    /// `best.onnx`.
    pub best: PathBuf,
    /// `last.onnx`.
    pub last: PathBuf,
    /// The peak resident set, MiB.
    pub peak_rss_mb: f64,
    /// The CUDA caching allocator's reserved peak, MiB (on CUDA).
    pub peak_cuda_reserved_mb: Option<f64>,
    /// Its allocated peak, MiB (on CUDA).
    pub peak_cuda_allocated_mb: Option<f64>,
    /// The peak held against the budget and the planner, MiB.
    pub peak_mb: f64,
    /// On a unified board's GPU: the peak of nvmap's growth (or `MemAvailable`'s fall) plus the
    /// anonymous resident set, sampled every 0.2 s (`headroom_core::tegra_memory`); it is `peak_mb`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak_tegra_mb: Option<f64>,
    /// Which memory the peaks are of.
    pub memory_pool: String,
    /// The planner's estimate of this run and its error against the peaks.
    pub planner: crate::planner::PlannerCheck,
    /// Each step down the ladder memory forced.
    pub steps_down: Vec<headroom_train::memory_guard::StepDown>,
    /// The re-normalisation applied before training (`--renorm`).
    pub renorm: Vec<RenormStep>,
}

/// What re-normalisation did to one Conv.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RenormStep {
    /// The Conv node.
    pub node: String,
    /// Smallest and largest scale `a = σ_old/σ_new` applied (after clamping).
    pub scale: [f64; 2],
    /// Largest shift of a channel's mean that was corrected, in units of its old std.
    pub shift: f64,
}

/// The process's peak resident memory (`VmHWM`), MB, where /proc tells it.
pub fn peak_rss_mb() -> Option<f64> {
    headroom_train::memory_guard::status_bytes("VmHWM:").map(mib)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1u32 << 20)
}

/// A run's memory peaks, MB (MiB, as `peak_rss_mb` always was).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PeakMemory {
    /// The peak resident set (`VmHWM`).
    pub rss_mb: f64,
    /// The CUDA caching allocator's reserved peak, on CUDA.
    pub cuda_reserved_mb: Option<f64>,
    /// Its allocated (in tensors) peak, on CUDA.
    pub cuda_allocated_mb: Option<f64>,
    /// The figure held against the budget and the planner
    /// ([`headroom_train::memory_guard::MemoryReading::counted_peak`]; on a Tegra board's GPU the
    /// sampled figure).
    pub counted_mb: f64,
    /// Memory as Tegra counts it, sampled during the run (on a unified board's GPU).
    pub tegra_mb: Option<f64>,
}

impl PeakMemory {
    /// Each peak the larger of the two: a run's peaks read before they were started again (the
    /// set-up's, before `--plan auto` timed its batches) and after.
    #[must_use]
    pub fn max(self, other: PeakMemory) -> PeakMemory {
        let larger = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        PeakMemory {
            rss_mb: self.rss_mb.max(other.rss_mb),
            cuda_reserved_mb: larger(self.cuda_reserved_mb, other.cuda_reserved_mb),
            cuda_allocated_mb: larger(self.cuda_allocated_mb, other.cuda_allocated_mb),
            counted_mb: self.counted_mb.max(other.counted_mb),
            tegra_mb: larger(self.tegra_mb, other.tegra_mb),
        }
    }

    /// With the sampled Tegra figure, which then is the counted one: the caching allocator's
    /// reserved bytes miss the CUDA context and the libraries' workspaces, nvmap does not.
    #[must_use]
    pub fn with_tegra(self, tegra: &headroom_core::tegra_memory::TegraPeak) -> PeakMemory {
        let mb = mib(tegra.peak());
        PeakMemory { tegra_mb: Some(mb), counted_mb: mb, ..self }
    }
}

/// The peaks of a run whose tensors live in `pool`.
pub fn peak_memory(pool: MemoryPool) -> PeakMemory {
    let reading = MemoryReading::read(pool);
    PeakMemory {
        rss_mb: mib(reading.rss_peak),
        cuda_reserved_mb: reading.cuda.map(|c| mib(c.reserved_peak)),
        cuda_allocated_mb: reading.cuda.map(|c| mib(c.allocated_peak)),
        counted_mb: mib(reading.counted_peak(pool)),
        tegra_mb: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_larger_of_two_peaks_is_taken_each() {
        let setup = PeakMemory {
            rss_mb: 300.0,
            cuda_reserved_mb: None,
            cuda_allocated_mb: None,
            counted_mb: 300.0,
            tegra_mb: None,
        };
        let training = PeakMemory {
            rss_mb: 280.0,
            cuda_reserved_mb: Some(90.0),
            cuda_allocated_mb: None,
            counted_mb: 350.0,
            tegra_mb: Some(340.0),
        };
        let both = setup.max(training);
        assert_eq!((both.rss_mb, both.counted_mb, both.cuda_reserved_mb), (300.0, 350.0, Some(90.0)));
        assert_eq!(both, training.max(setup), "either order");
        assert_eq!(both.tegra_mb, Some(340.0));
    }

    /// One second of epoch `epoch` with losses 1, 2, 3.
    fn stats(epoch: usize) -> EpochStats {
        EpochStats {
            epoch,
            loss: [1.0, 2.0, 3.0],
            kd: 0.0,
            lr: 1e-3,
            bad_steps: 0,
            optimizer_steps: 1,
            seconds: 1.0,
            phases: [0.0; 5],
        }
    }

    /// P, R and mAP50 of 0.5, mAP50-95 and fitness of `fitness`.
    fn metrics(fitness: f64) -> Metrics {
        Metrics {
            images: 1,
            instances: 1,
            precision: 0.5,
            recall: 0.5,
            map50: 0.5,
            map50_95: fitness,
            fitness,
            per_class: Vec::new(),
        }
    }

    #[test]
    fn metrics_rows_after_a_checkpoint_are_dropped_and_the_best_read_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (epoch, fitness) in [(0, 0.5), (1, 0.7), (2, 0.6)] {
            let peak = PeakMemory {
                rss_mb: 100.0,
                cuda_reserved_mb: None,
                cuda_allocated_mb: None,
                counted_mb: 100.0,
                tegra_mb: None,
            };
            append_metrics(dir.path(), &stats(epoch), &metrics(fitness), &peak).expect("append");
        }
        assert_eq!(read_best(dir.path()), Some(0.7));
        let results = std::fs::read_to_string(dir.path().join("results.csv")).expect("results.csv");
        assert_eq!(results.lines().count(), 4, "{results}");
        // Ultralytics' names, the time summed, the val losses empty, one lr per parameter group.
        assert_eq!(
            results.lines().nth(3),
            Some(
                "3,3.00,1.000000,2.000000,3.000000,0.500000,0.500000,0.500000,0.600000,,,,1.000000e-3,1.000000e-3,1.000000e-3"
            )
        );
        assert!(results.starts_with("epoch,time,train/box_loss,") && results.contains("metrics/mAP50-95(B)"));
        truncate_metrics(dir.path(), 1).expect("truncate");
        assert_eq!(read_best(dir.path()), Some(0.5));
        let text = std::fs::read_to_string(dir.path().join(METRICS_FILE)).expect("read");
        assert_eq!(text.lines().count(), 2);
        let results = std::fs::read_to_string(dir.path().join("results.csv")).expect("results.csv");
        assert_eq!(results.lines().count(), 2, "results.csv follows metrics.csv: {results}");
    }

    #[test]
    fn a_metrics_file_of_an_older_run_gains_the_gpu_column_and_keeps_its_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = "epoch,box_loss,cls_loss,dfl_loss,kd_loss,lr,bad_steps,seconds,peak_rss_mb,precision,recall,map50,map50_95,fitness\n\
                   1,1.0,2.0,3.0,0.0,1e-3,0,1.00,100.0,0.5,0.5,0.5,0.5,0.5\n";
        std::fs::write(dir.path().join(METRICS_FILE), old).expect("write");
        let peak = PeakMemory {
            rss_mb: 120.0,
            cuda_reserved_mb: Some(512.0),
            cuda_allocated_mb: Some(300.0),
            counted_mb: 632.0,
            tegra_mb: None,
        };
        let text = append_metrics(dir.path(), &stats(1), &metrics(0.7), &peak).expect("append");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], METRICS_HEADER.trim_end());
        assert!(lines[1].ends_with(",0.5,"), "the old row gains an empty field: {}", lines[1]);
        assert!(lines[2].ends_with(",0.700000,512.0"), "{}", lines[2]);
        assert!(lines.iter().all(|l| l.split(',').count() == 15), "{text}");
        assert_eq!(read_best(dir.path()), Some(0.7));
        assert_eq!(epoch_history(dir.path()).best_epoch, Some(2));
    }

    #[test]
    fn a_named_run_that_exists_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("a")).expect("mkdir");
        let err = new_run_dir(dir.path(), Some("a")).expect_err("exists").to_string();
        assert!(err.contains("exists: choose another --name"), "{err}");
        assert_eq!(new_run_dir(dir.path(), None).expect("free"), dir.path().join("train"));
        assert!(
            existing_run_dir(&dir.path().join("a"))
                .expect_err("no config")
                .to_string()
                .contains("no run to resume")
        );
    }
}
