//! The pieces of a training step together on a real export: batches from a `headroom synth` split,
//! the frozen trunk, the checkpointed head, Ultralytics' loss and SGD. A few steps on the same two
//! images lower the loss, move only the head's weights, and the flipped batch mirrors its labels.
#![cfg(feature = "libtorch")]

use std::path::{Path, PathBuf};

use headroom_core::dataset::{DataConfig, LoadOptions, Split, load_split};
use headroom_core::synth::{Preset, SynthConfig, write_dataset};
use headroom_onnx::{Model, Trainable};
use headroom_train::Student;
use headroom_train::data::make_batch;
use headroom_train::loss::{LossConfig, detection_loss};
use headroom_train::optim::Sgd;
use headroom_train::tch::{Device, Kind, Tensor};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn sgd_steps_on_the_real_loss_lower_it_and_move_only_the_head() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = SynthConfig { preset: Preset::Field, seed: 21, train: 4, val: 2, ..SynthConfig::default() };
    write_dataset(&config, dir.path(), |_| {}).expect("synth");
    let data = DataConfig::load(&dir.path().join("data.yaml")).expect("data.yaml");
    let split = load_split(&data, Split::Train, LoadOptions::default()).expect("split");
    let records: Vec<_> = split.images.iter().filter(|r| !r.labels.is_empty()).take(2).collect();
    assert_eq!(records.len(), 2, "two labelled images");

    let model = Model::load(root().join("models/demo/yolov8n-shapes-160.onnx")).expect("demo");
    let student = Student::new(&model, Trainable::Head, Device::Cpu).expect("student");
    let inspection = student.inspection();
    let grids: Vec<(i64, i64)> = inspection.head.levels.iter().map(|l| (l.grid[0], l.grid[1])).collect();
    let loss_config = LossConfig::one_to_many(inspection.classes as i64, 16, inspection.strides.clone());
    let batch = make_batch(&records, 160, 160, &[false, true], Device::Cpu).expect("batch");
    assert_eq!(batch.images.size(), [2, 3, 160, 160]);
    let plain = make_batch(&records, 160, 160, &[false, false], Device::Cpu).expect("batch");
    // The unflipped image is the pixels `val` and the deployed model see, bit for bit.
    let image = headroom_core::imageio::read_rgb(&records[0].image).expect("image");
    let target = headroom_core::letterbox::LetterboxOptions::square(160);
    let geometry = headroom_core::preprocess::InputGeometry::new(
        headroom_core::preprocess::Preprocess::Val,
        image.width(),
        image.height(),
        &target,
    );
    let val =
        Tensor::from_slice(&headroom_core::preprocess::to_chw(&geometry.apply(&image))).view([3, 160, 160]);
    assert!(batch.images.get(0).allclose(&val, 0.0, 0.0, false), "image 0 as val prepares it");
    let mirrored = batch.images.get(1).flip([2]);
    assert!(mirrored.allclose(&plain.images.get(1), 0.0, 0.0, false), "image 1 mirrored");
    for (a, b) in batch.targets.iter().zip(&plain.targets) {
        let want = if a.image == 1 { 1.0 - b.cx } else { b.cx };
        assert!((a.cx - want).abs() < 1e-6 && a.cy == b.cy && a.w == b.w, "{a:?} vs {b:?}");
    }

    let before: Vec<(String, Tensor)> =
        student.parameters().into_iter().map(|(n, p)| (n.to_string(), p.detach().copy())).collect();
    let frozen_name = model
        .graph
        .initializers
        .keys()
        .find(|n| n.contains("model.0/") || n.starts_with("model.0."))
        .cloned()
        .expect("a trunk weight");
    let frozen_before = student.executor().weight(&frozen_name).expect("trunk weight").copy();

    // Fused BatchNorm weights take a smaller step than Ultralytics' lr0 0.01 (docs/TRAIN.md).
    let mut sgd = Sgd::new(0.001, 0.937, true, 5e-4);
    let mut losses = Vec::new();
    for _ in 0..8 {
        student.zero_grad();
        let cut = student.trunk(&batch.images).expect("trunk");
        let loss = student
            .backward_checkpointed(&cut, |outputs| {
                let (boxes, scores): (Vec<Tensor>, Vec<Tensor>) =
                    outputs.chunks(2).map(|pair| (pair[0].flatten(2, 3), pair[1].flatten(2, 3))).unzip();
                let out = detection_loss(
                    &loss_config,
                    &Tensor::cat(&boxes, 2),
                    &Tensor::cat(&scores, 2),
                    &grids,
                    &batch.targets,
                )?;
                Ok(out.total)
            })
            .expect("step");
        losses.push(loss);
        sgd.step(&student.parameters()).expect("sgd");
    }
    println!("losses: {losses:?}");
    assert!(losses.iter().all(|l| l.is_finite()));
    assert!(losses[7] < losses[0] * 0.9, "8 SGD steps on the same batch lower the loss: {losses:?}");
    // Every head tensor moves, except biases of the box branch of levels where no anchor was assigned
    // (the box loss only reaches assigned anchors; weights there still move by weight decay).
    let still: Vec<&str> = student
        .parameters()
        .into_iter()
        .zip(&before)
        .filter(|((_, p), (_, b))| p.allclose(b, 0.0, 0.0, false))
        .map(|((n, p), _)| {
            assert_eq!(p.dim(), 1, "{n}: only biases may stay");
            n
        })
        .collect();
    assert!(still.len() < before.len() / 4, "most head parameters move; still: {still:?}");
    println!("unchanged: {still:?}");
    let frozen_after = student.executor().weight(&frozen_name).expect("trunk weight");
    assert!(frozen_after.allclose(&frozen_before, 0.0, 0.0, false), "{frozen_name} is frozen");
    assert_eq!(frozen_after.kind(), Kind::Float);
}
