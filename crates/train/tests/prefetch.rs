//! Preparing batches on a second thread (`--prefetch`) — the next epoch's first batch included,
//! made while the epoch before it ends — trains exactly what one thread trains, on a real export.
#![cfg(feature = "libtorch")]

use std::path::{Path, PathBuf};

use headroom_core::dataset::{DataConfig, ImageRecord, LoadOptions, Split, load_split};
use headroom_core::synth::{Preset, SynthConfig, write_dataset};
use headroom_onnx::{Model, Trainable};
use headroom_train::Student;
use headroom_train::config::TrainConfig;
use headroom_train::loss::LossConfig;
use headroom_train::tch::Device;
use headroom_train::trainer::Trainer;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Two epochs of every layer on `records`; between them, with `next`, the second epoch's first
/// batch is prepared ahead on those images; with `timed`, batch 3 is timed first as `--plan auto`
/// times it. The epochs' losses and how many epochs used a batch prepared ahead.
fn two_epochs(
    records: &[ImageRecord],
    prefetch: bool,
    next: Option<&[ImageRecord]>,
    timed: bool,
) -> (Vec<[f64; 4]>, usize) {
    let model = Model::load(root().join("models/demo/yolov8n-shapes-160.onnx")).expect("demo");
    let student = Student::new(&model, Trainable::Freeze(0), Device::Cpu).expect("student");
    let inspection = student.inspection();
    let loss = LossConfig::one_to_many(inspection.classes as i64, 16, inspection.strides.clone());
    let config =
        TrainConfig { epochs: 2, batch: 2, nbs: 2, lr0: 1e-3, imgsz: [160, 160], ..TrainConfig::default() };
    let mut trainer = Trainer::new(&student, config, loss).expect("trainer");
    trainer.set_prefetch(prefetch);
    if timed {
        let seconds = trainer.time_passes(records, 3, 2).expect("timed");
        assert!(seconds.is_finite() && seconds > 0.0, "{seconds} s an image");
    }
    let mut losses = Vec::new();
    for epoch in 0..2 {
        let stats = trainer.train_epoch(records, &|_| {}).expect("epoch");
        losses.push([stats.loss[0], stats.loss[1], stats.loss[2], stats.kd]);
        if epoch == 0 {
            trainer.preparing_next_epoch(next, |t| assert_eq!(t.progress().epochs_done, 1));
        }
    }
    (losses, trainer.batches_prepared_ahead())
}

/// Six synthesised `field` images of `seed` (their folder lives as long as the first value).
fn six_images(seed: u64) -> (tempfile::TempDir, Vec<ImageRecord>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = SynthConfig { preset: Preset::Field, seed, train: 6, val: 1, ..SynthConfig::default() };
    write_dataset(&config, dir.path(), |_| {}).expect("synth");
    let data = DataConfig::load(&dir.path().join("data.yaml")).expect("data.yaml");
    let records = load_split(&data, Split::Train, LoadOptions::default()).expect("split").images;
    assert_eq!(records.len(), 6);
    (dir, records)
}

#[test]
fn a_batch_prepared_while_the_epoch_before_ends_is_the_batch_of_one_thread() {
    let (_dir, records) = six_images(5);

    let (one_thread, none) = two_epochs(&records, false, Some(&records), false);
    assert_eq!(none, 0, "nothing is prepared ahead without --prefetch");
    let (ahead, used) = two_epochs(&records, true, Some(&records), false);
    assert_eq!(used, 1, "the second epoch started on the batch prepared ahead");
    assert_eq!(ahead, one_thread, "the same batches, the same arithmetic");
    assert_ne!(ahead[0], ahead[1], "two epochs that differ");
    // Prepared on other images than the epoch gets (a careless caller): dropped, not trained on.
    let (other, used) = two_epochs(&records, true, Some(&records[1..]), false);
    assert_eq!(used, 0, "a batch of other images is not used");
    assert_eq!(other, one_thread);
}

#[test]
fn timing_batches_on_the_second_thread_leaves_the_run_as_it_was() {
    let (_dir, records) = six_images(6);

    let (untimed, _) = two_epochs(&records, false, None, false);
    // `--plan auto`'s timing, its batches made on the second thread: nothing of it is trained.
    let (timed, _) = two_epochs(&records, true, None, true);
    assert_eq!(timed, untimed, "the timing's passes left no gradient, step or draw behind");
}
