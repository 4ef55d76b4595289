//! The run layer in process, on the shipped demo model and a small synthetic field split: a run
//! stopped on request mid-epoch resumes to the losses and metrics of the uninterrupted run, a
//! finished run says so, a run whose batches a second thread prepares (with a teacher) is the run
//! made in turn, and a saved spec with a bad value is refused before anything trains. (The
//! memory cap's step-down runs through the binary: crates/cli/tests/train_step_down.rs.)

#![cfg(all(feature = "libtorch", feature = "onnxruntime"))]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use headroom_core::synth::{Preset, SynthConfig, write_dataset};
use headroom_plan::Prefetch;
use headroom_run::observer::{Observer, Silent};
use headroom_run::run::{self, RunEnd, RunOptions};
use headroom_run::spec::RunSpec;
use headroom_train::config::TrainConfig;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data(dir: &Path) -> PathBuf {
    let config = SynthConfig { preset: Preset::Field, seed: 3, train: 12, val: 6, ..SynthConfig::default() };
    write_dataset(&config, &dir.join("data"), |_| {}).expect("synth");
    dir.join("data/data.yaml")
}

fn spec(data: &Path) -> RunSpec {
    let model = workspace().join("models/demo/yolov8n-shapes-160.onnx");
    RunSpec {
        settings: TrainConfig {
            epochs: 2,
            nbs: 2,
            save_period: 1,
            imgsz: [160, 160],
            ..TrainConfig::default().with_auto_optimizer(3)
        },
        ..RunSpec::new(model, data.to_path_buf())
    }
}

fn options(stop: Option<Arc<AtomicBool>>) -> RunOptions {
    RunOptions {
        threads: 1,
        stop,
        allocator: headroom_train::memory_guard::Allocator::Compact,
        profile: None,
        prefetch: headroom_plan::Prefetch::Off,
    }
}

fn metrics(dir: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("metrics.csv")).expect("metrics.csv");
    text.lines().skip(1).map(|l| l.split(',').map(str::to_string).collect()).collect()
}

/// Asks the run to stop after `after` passes.
struct StopAfter {
    flag: Arc<AtomicBool>,
    after: usize,
    seen: usize,
}

impl Observer for StopAfter {
    fn pass(&mut self, _report: &headroom_train::state::PassReport) {
        self.seen += 1;
        if self.seen == self.after {
            self.flag.store(true, Ordering::Relaxed);
        }
    }
}

#[test]
fn a_run_stopped_mid_epoch_resumes_to_the_uninterrupted_result_and_a_finished_run_says_so() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = data(tmp.path());
    let spec = spec(&data);
    let straight = tmp.path().join("straight");
    let end = run::start(&spec, &straight, &options(None), &mut Silent).expect("straight run");
    assert!(matches!(end, RunEnd::Finished(_)), "{end:?}");

    let stopped = tmp.path().join("stopped");
    let flag = Arc::new(AtomicBool::new(false));
    let mut observer = StopAfter { flag: Arc::clone(&flag), after: 3, seen: 0 };
    let end = run::start(&spec, &stopped, &options(Some(flag)), &mut observer).expect("stopped run");
    assert_eq!(end, RunEnd::Interrupted);
    assert!(stopped.join("ckpt/last.pt").exists() && !stopped.join("metrics.csv").exists());

    let end = run::resume(&stopped, None, &options(None), &mut Silent).expect("resumed run");
    assert!(matches!(end, RunEnd::Finished(_)), "{end:?}");
    let (a, b) = (metrics(&stopped), metrics(&straight));
    assert_eq!(a.len(), 2);
    for (x, y) in a.iter().zip(&b) {
        for column in [1, 2, 3, 11, 12] {
            let (x, y): (f64, f64) = (x[column].parse().expect("num"), y[column].parse().expect("num"));
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "column {column}: {x} vs {y}");
        }
    }
    let again = run::resume(&stopped, None, &options(None), &mut Silent).expect("finished run");
    assert!(matches!(again, RunEnd::AlreadyFinished(_)), "{again:?}");
    let shorter = run::resume(&stopped, Some(1), &options(None), &mut Silent).expect_err("shorter");
    assert!(shorter.to_string().contains("settings.epochs"), "{shorter}");
}

/// Records, after each pass of the first epoch, whether a mid-epoch checkpoint exists.
struct CheckpointSeen {
    path: PathBuf,
    passes: usize,
    seen: Vec<bool>,
}

impl Observer for CheckpointSeen {
    fn pass(&mut self, _report: &headroom_train::state::PassReport) {
        if self.seen.len() < self.passes {
            self.seen.push(self.path.exists());
        }
    }
}

/// Checkpoints within an epoch come by time when steps are not counted (`save_period = 0`): with
/// an interval of a microsecond after the first step, with an interval longer than the run never
/// before the epoch's end.
#[test]
fn checkpoints_within_an_epoch_come_by_time_as_well_as_by_steps() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = data(tmp.path());
    let passes = 5; // 12 images at batch 2: 6 passes, the last ends the epoch
    for (interval, expect) in [(1e-6, true), (1e6, false)] {
        let mut spec = spec(&data);
        spec.settings.epochs = 1;
        spec.settings.save_period = 0;
        spec.settings.save_interval = interval;
        let dir = tmp.path().join(format!("every-{interval}"));
        let mut observer = CheckpointSeen { path: dir.join("ckpt/last.pt"), passes, seen: Vec::new() };
        let end = run::start(&spec, &dir, &options(None), &mut observer).expect("run");
        assert!(matches!(end, RunEnd::Finished(_)), "{end:?}");
        assert_eq!(observer.seen, vec![expect; passes], "interval {interval} s");
    }
}

/// `--plan auto`'s batch timing in a run: every batch that fits is timed before the first step
/// (one above the epoch's images is skipped, saying so), the timing leaves the run as it was (a
/// run that keeps batch 2 trains to the losses of a run without it), the choice and its figures
/// are in config.toml, and a run stopped after it resumes with that batch without timing again.
#[test]
fn a_planned_run_times_its_batches_without_changing_the_run_and_keeps_the_choice() {
    use headroom_run::spec::{BatchTiming, PlanChoice, fastest_batch};
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = data(tmp.path());
    let untimed =
        |batch: usize| BatchTiming { batch, estimate: 300 << 20, seconds_per_image: None, skipped: None };
    let planned = |batches: Vec<BatchTiming>| PlanChoice {
        device: "x86-cpu".into(),
        budget: 8 << 30,
        rung: headroom_plan::Rung::Start,
        estimate: 300 << 20,
        batches,
    };
    let mut base = spec(&data);
    base.settings.epochs = 1;

    // Batch 16 is above the 12 images: only batch 2 is timed, and it trains.
    let only_two = RunSpec { plan: Some(planned(vec![untimed(2), untimed(16)])), ..base.clone() };
    let dir = tmp.path().join("two");
    run::start(&only_two, &dir, &options(None), &mut Silent).expect("run");
    let saved = RunSpec::load(&dir).expect("config.toml");
    let batches = saved.plan.expect("plan").batches;
    assert!(batches[0].seconds_per_image.is_some_and(|s| s > 0.0), "{batches:?}");
    assert!(batches[1].skipped.as_deref().is_some_and(|w| w.contains("12 images")), "{batches:?}");
    assert_eq!(saved.settings.batch, 2);
    let straight = tmp.path().join("straight");
    run::start(&base, &straight, &options(None), &mut Silent).expect("run");
    assert_eq!(metrics(&dir)[0][1..4], metrics(&straight)[0][1..4], "the timing changed the run");

    // Batches 2 and 4 within a nominal batch of 4: both timed, the faster (by 5 %) trains.
    let mut two_four = RunSpec { plan: Some(planned(vec![untimed(2), untimed(4)])), ..base.clone() };
    two_four.settings.nbs = 4;
    two_four.settings.epochs = 2;
    let dir = tmp.path().join("two-four");
    let flag = Arc::new(AtomicBool::new(false));
    let mut observer = StopAfter { flag: Arc::clone(&flag), after: 1, seen: 0 };
    let end = run::start(&two_four, &dir, &options(Some(flag)), &mut observer).expect("stopped run");
    assert_eq!(end, RunEnd::Interrupted);
    let saved = RunSpec::load(&dir).expect("config.toml");
    let plan = saved.plan.clone().expect("plan");
    assert!(plan.batches.iter().all(|b| b.seconds_per_image.is_some_and(|s| s > 0.0)), "{plan:?}");
    assert!(!plan.timing_pending());
    assert_eq!(saved.settings.batch, fastest_batch(&plan.batches, 2));
    let end = run::resume(&dir, None, &options(None), &mut Silent).expect("resumed run");
    assert!(matches!(end, RunEnd::Finished(_)), "{end:?}");
    let resumed = RunSpec::load(&dir).expect("config.toml");
    assert_eq!(resumed.plan, Some(plan), "a resumed run does not time again");
    assert_eq!(resumed.settings.batch, saved.settings.batch);
}

#[test]
fn a_prefetched_run_is_the_same_run_and_resumes_to_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = data(tmp.path());
    let mut spec = spec(&data);
    spec.teacher = Some(workspace().join("models/demo/teacher-shapes-160.onnx"));
    let with = |prefetch, stop| RunOptions { prefetch, ..options(stop) };
    let turns = tmp.path().join("turns");
    run::start(&spec, &turns, &with(Prefetch::Off, None), &mut Silent).expect("run in turn");
    let ahead = tmp.path().join("ahead");
    run::start(&spec, &ahead, &with(Prefetch::On, None), &mut Silent).expect("prefetched run");
    // Losses, kd and the metrics: the same batches and teacher outputs, the same arithmetic.
    assert_eq!(metrics(&ahead).len(), 2);
    for (x, y) in metrics(&ahead).iter().zip(&metrics(&turns)) {
        // Not the seconds and peaks (7, 8, 14).
        for column in [1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13] {
            assert_eq!(x[column], y[column], "column {column}: prefetching changed the run");
        }
    }
    // Stopped mid-epoch (the thread preparing the next batch is waiting), then resumed.
    let stopped = tmp.path().join("stopped");
    let flag = Arc::new(AtomicBool::new(false));
    let mut observer = StopAfter { flag: Arc::clone(&flag), after: 3, seen: 0 };
    let end = run::start(&spec, &stopped, &with(Prefetch::On, Some(flag)), &mut observer).expect("stopped");
    assert_eq!(end, RunEnd::Interrupted);
    let end = run::resume(&stopped, None, &with(Prefetch::On, None), &mut Silent).expect("resumed run");
    assert!(matches!(end, RunEnd::Finished(_)), "{end:?}");
    for (x, y) in metrics(&stopped).iter().zip(&metrics(&turns)) {
        for column in [1, 2, 3, 4, 11, 12] {
            let (x, y): (f64, f64) = (x[column].parse().expect("num"), y[column].parse().expect("num"));
            assert!((x - y).abs() <= 1e-5 * y.abs().max(1.0), "column {column}: {x} vs {y}");
        }
    }
    // `auto` needs a spare core and no profile; a feature cache leaves nothing to prepare.
    assert!(run::prefetch_on(Prefetch::Auto, true, false, false));
    assert!(!run::prefetch_on(Prefetch::Auto, false, false, false));
    assert!(
        !run::prefetch_on(Prefetch::Auto, true, false, true)
            && run::prefetch_on(Prefetch::On, true, false, true)
    );
    assert!(
        !run::prefetch_on(Prefetch::On, true, true, false)
            && !run::prefetch_on(Prefetch::Off, true, false, false)
    );
}

#[test]
fn a_bad_saved_value_is_refused_before_training() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = data(tmp.path());
    let mut spec = spec(&data);
    spec.settings.epochs = 1;
    let dir = tmp.path().join("run");
    run::start(&spec, &dir, &options(None), &mut Silent).expect("run");
    let path = dir.join("config.toml");
    let text = std::fs::read_to_string(&path).expect("config");
    std::fs::write(&path, text.replace("batch = 2", "batch = 100000")).expect("write");
    let err = run::resume(&dir, Some(2), &options(None), &mut Silent).expect_err("bad batch").to_string();
    assert!(err.contains("settings.batch") && err.contains("config.toml"), "{err}");
    let bad = RunSpec { memory_cap: Some(headroom_plan::Bytes(1024)), ..spec };
    let fresh = tmp.path().join("fresh");
    assert!(run::start(&bad, &fresh, &options(None), &mut Silent).is_err());
    assert!(!fresh.exists(), "nothing is created for a spec that does not validate");
}

/// Re-normalising the stem: on the new images, the stem Conv of `renorm.onnx` has the per-channel
/// statistics the original model's stem has on the old images (where the scale was not clamped),
/// and the run trains from that file.
#[test]
fn renormalisation_gives_the_stem_the_old_statistics_on_the_new_images() {
    use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
    use headroom_onnx::renorm::{SCALE_BOUNDS, stem_convs};
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = data(tmp.path());
    let old_dir = tmp.path().join("old");
    let config = SynthConfig { preset: Preset::Base, seed: 5, train: 12, val: 1, ..SynthConfig::default() };
    write_dataset(&config, &old_dir, |_| {}).expect("synth");
    let mut spec = spec(&data);
    spec.settings.epochs = 1;
    spec.renorm = 1;
    spec.replay = Some(old_dir.join("data.yaml"));
    let dir = tmp.path().join("run");
    assert!(matches!(run::start(&spec, &dir, &options(None), &mut Silent), Ok(RunEnd::Finished(_))));

    let images = |yaml: &Path| {
        let config = DataConfig::load(yaml).expect("data.yaml");
        load_split(&config, Split::Train, LoadOptions::default()).expect("split").images
    };
    let (new, old) = (images(&data), images(&old_dir.join("data.yaml")));
    let original = headroom_onnx::Model::load(&spec.model).expect("model");
    let renormed = headroom_onnx::Model::load(dir.join("renorm.onnx")).expect("renorm.onnx");
    let inspection = headroom_onnx::inspect::inspect(&original).expect("inspect");
    let sites = stem_convs(&original.graph, &inspection, 1).expect("stem");
    let options = headroom_infer::provider::SessionOptions { intra_threads: 1, ..Default::default() };
    let stats = |model, images| {
        headroom_run::renorm::conv_statistics(model, &sites, images, [160, 160], &options)
            .expect("stats")
            .remove(0)
    };
    let (target, before, after) = (stats(&original, &old), stats(&original, &new), stats(&renormed, &new));
    let mut checked = 0;
    for k in 0..target.mean.len() {
        let a = target.std[k] / before.std[k];
        if before.std[k] < 1e-3 || a <= SCALE_BOUNDS.0 || a >= SCALE_BOUNDS.1 {
            continue;
        }
        checked += 1;
        assert!((after.mean[k] - target.mean[k]).abs() < 1e-3 * target.std[k].max(1.0), "channel {k} mean");
        assert!((after.std[k] - target.std[k]).abs() < 1e-3 * target.std[k].max(1.0), "channel {k} std");
    }
    assert!(checked > 0, "no channel within the scale bounds");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("results.json")).expect("results")).expect("json");
    assert_eq!(results["renorm"][0]["node"], sites[0].node.as_str());
}
