//! The planner counts the data's largest frame: a run on small images and one 6000² camera frame
//! (108 MB decoded, more than the demo model's whole training pass) is estimated never more than
//! 10 % under its measured peak (and not far over). Its own test binary: the peak is the whole
//! process's, which tests running beside it in one process would move.

#![cfg(all(feature = "libtorch", feature = "onnxruntime"))]

use std::path::Path;

use headroom_core::synth::{Preset, SynthConfig, write_dataset};
use headroom_run::observer::Silent;
use headroom_run::run::{self, RunEnd, RunOptions};
use headroom_run::spec::RunSpec;
use headroom_train::config::TrainConfig;

#[test]
fn a_large_camera_frame_is_counted_and_the_estimate_stays_within_ten_percent_of_the_peak() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let small = SynthConfig { preset: Preset::Field, seed: 3, train: 8, val: 4, ..SynthConfig::default() };
    write_dataset(&small, &tmp.path().join("data"), |_| {}).expect("synth");
    let large = SynthConfig {
        preset: Preset::Field,
        seed: 4,
        train: 1,
        val: 1,
        width: 6000,
        height: 6000,
        jpeg_quality: Some(90),
    };
    write_dataset(&large, &tmp.path().join("large"), |_| {}).expect("synth 6000²");
    let (images, labels) = (tmp.path().join("large/images/train"), tmp.path().join("large/labels/train"));
    let frame = std::fs::read_dir(&images).expect("large frames").next().expect("one").expect("entry").path();
    let stem = frame.file_stem().expect("stem").to_string_lossy().to_string();
    let train = tmp.path().join("data");
    std::fs::copy(&frame, train.join("images/train/large.jpg")).expect("copy frame");
    std::fs::copy(labels.join(format!("{stem}.txt")), train.join("labels/train/large.txt"))
        .expect("copy labels");

    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo/yolov8n-shapes-160.onnx");
    let spec = RunSpec {
        settings: TrainConfig {
            epochs: 1,
            nbs: 2,
            imgsz: [160, 160],
            ..TrainConfig::default().with_auto_optimizer(1)
        },
        ..RunSpec::new(model, train.join("data.yaml"))
    };
    let options = RunOptions {
        threads: 1,
        stop: None,
        allocator: headroom_train::memory_guard::Allocator::Compact,
        profile: None,
        prefetch: headroom_plan::Prefetch::Off,
    };
    // The run's peak, not the synthesis': a `headroom train` process starts without it.
    headroom_train::memory_guard::reset_peaks(headroom_train::memory_guard::MemoryPool::Cpu);
    let end = run::start(&spec, &tmp.path().join("run"), &options, &mut Silent).expect("run");
    let RunEnd::Finished(results) = end else { panic!("{end:?}") };
    let planner = &results.planner;
    let error = planner.error_pct_vs_peak.expect("an estimate");
    let (estimate, peak) = (planner.estimate_mb.unwrap_or(0.0), results.peak_mb);
    eprintln!("estimate {estimate} MiB, peak {peak} MiB: {error} %; {:?}", planner.components_mb);
    // Never more than 10 % under (the side that ends in the OOM killer; -26.5 % without the frame).
    // Over: within 10 % with the pinned libraries (docs/BENCHMARKS.md); the runtime's fixed cost is
    // theirs, and the oldest supported ones (libtorch 2.5.1, ONNX Runtime 1.20.1) take about 20 MiB
    // less (+14.3 % here), so this bound is 20 %.
    assert!((-10.0..=20.0).contains(&error), "estimate {estimate} MiB, peak {peak} MiB: {error} %");
    // The frame is in the estimate: 6000² RGB alone is 103 MiB.
    let frame_mb =
        planner.components_mb.iter().filter(|(k, _)| *k == "eval" || *k == "decode").map(|(_, v)| v);
    assert!(frame_mb.fold(0.0, |a: f64, b| a.max(*b)) >= 103.0, "{:?}", planner.components_mb);
}
