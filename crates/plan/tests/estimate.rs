//! The memory estimate on committed exports: what must hold whatever the calibration.

use headroom_onnx::inspect::inspect;
use headroom_onnx::{Model, Trainable};
use headroom_plan::{Error, Planner, Setup, TrunkRuntime};

fn fixture(name: &str) -> Model {
    let path = format!("{}/../../{name}", env!("CARGO_MANIFEST_DIR"));
    Model::load(&path).expect("committed model")
}

fn setup(trainable: Trainable, batch: usize, checkpoint: bool, imgsz: u32) -> Setup {
    Setup {
        trainable,
        batch,
        checkpoint,
        imgsz: [imgsz, imgsz],
        trunk: TrunkRuntime::Torch,
        ..Setup::default()
    }
}

#[test]
fn more_training_more_batch_and_no_checkpointing_cost_more() {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 0);
    let peak = |p: &mut Planner<'_>, s: Setup| p.estimate(&s).expect("estimate").components.training_peak();
    let head = peak(&mut planner, setup(Trainable::Head, 2, false, 160));
    let neck = peak(&mut planner, setup(Trainable::NeckHead, 2, false, 160));
    let all = peak(&mut planner, setup(Trainable::Freeze(0), 2, false, 160));
    assert!(head < neck && neck < all, "{head} {neck} {all}");
    let all_ckpt = peak(&mut planner, setup(Trainable::Freeze(0), 2, true, 160));
    assert!(all_ckpt < all, "checkpointing saves: {all_ckpt} vs {all}");
    let all_b1 = peak(&mut planner, setup(Trainable::Freeze(0), 1, false, 160));
    assert!(all_b1 < all);
}

#[test]
fn the_estimate_never_undercounts_what_must_be_alive_together() {
    // At the end of a plain forward, autograd holds at least every Conv input of the trainable
    // part that requires grad... and the whole head phase holds at least the largest activation.
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 0);
    for batch in [1, 2, 3] {
        let e = planner.estimate(&setup(Trainable::Freeze(0), batch, false, 160)).expect("estimate");
        let largest = model
            .graph
            .shapes
            .values()
            .filter_map(|d| d.iter().try_fold(1u64, |a, x| x.known().map(|v| a * v as u64)))
            .max()
            .unwrap_or(0)
            * 4
            * batch as u64;
        assert!(e.components.head_phase() >= largest, "batch {batch}: {:?}", e.components);
        let saved: u64 = e.saved_by_op.iter().map(|(_, v)| v).sum();
        assert!(e.components.activations + e.components.cut >= saved, "{:?}", e);
        assert!(
            e.saved_by_op.iter().any(|(op, _)| op == "Conv")
                && e.saved_by_op.iter().any(|(op, _)| op == "Mul")
        );
    }
}

#[test]
fn impossible_input_sizes_are_refused_with_the_reason() {
    let fixed = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&fixed).expect("inspect");
    let mut planner = Planner::new(&fixed, &inspection, 0);
    let err = planner.estimate(&setup(Trainable::Head, 1, true, 320)).expect_err("static 160");
    assert!(matches!(err, Error::ImageSize { .. }) && err.to_string().contains("fixed at 160x160"), "{err}");
    let dynamic = fixture("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx");
    let inspection = inspect(&dynamic).expect("inspect");
    let mut planner = Planner::new(&dynamic, &inspection, 0);
    let err = planner.estimate(&setup(Trainable::Head, 1, true, 300)).expect_err("not a multiple");
    assert!(err.to_string().contains("multiple of the largest stride 32"), "{err}");
    let small = planner.estimate(&setup(Trainable::Head, 1, true, 160)).expect("160");
    let large = planner.estimate(&setup(Trainable::Head, 1, true, 320)).expect("320");
    assert!(large.peak > small.peak);
}

#[test]
fn the_ladder_chooses_the_first_fit_and_names_the_least_budget_otherwise() {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 200 << 20);
    let start = Setup {
        trainable: Trainable::Freeze(0),
        batch: 16,
        checkpoint: false,
        imgsz: [160, 160],
        ..Setup::default()
    };
    let roomy = headroom_plan::plan(&mut planner, &start, 64 << 30, false).expect("plan");
    assert_eq!(roomy.chosen, Some(0));
    let first = &roomy.candidates[0].estimate;
    let tight_budget = roomy.candidates[3].estimate.peak;
    let tight = headroom_plan::plan(&mut planner, &start, tight_budget, false).expect("plan");
    let chosen = tight.chosen.expect("a rung fits");
    assert!(chosen >= 1 && tight.candidates[chosen].estimate.peak <= tight_budget);
    assert!(tight.candidates[..chosen].iter().all(|c| !c.fits));
    assert!(first.peak > tight_budget);
    let none = headroom_plan::plan(&mut planner, &start, 64 << 20, false).expect("plan");
    assert_eq!(none.chosen, None);
    assert!(none.minimum > 64 << 20 && none.advice.expect("advice").contains("alone need"));
}

/// `--plan auto`'s larger batches: doubled from the start while within the nominal batch, the
/// measured maximum and the budget; none beyond the export's own limit.
#[test]
fn larger_batches_stay_within_the_nominal_batch_the_images_and_the_budget() {
    use headroom_plan::{MAX_MEASURED_BATCH, larger_batches};
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 200 << 20);
    let start = setup(Trainable::Freeze(0), 2, false, 160);
    let batches = |p: &mut Planner<'_>, nbs: usize, budget: u64| -> Vec<usize> {
        larger_batches(p, &start, nbs, budget).expect("batches").iter().map(|e| e.setup.batch).collect()
    };
    assert_eq!(batches(&mut planner, 8, 64 << 30), [4, 8], "up to the nominal batch");
    assert_eq!(batches(&mut planner, 64, 64 << 30), [4, 8, MAX_MEASURED_BATCH]);
    assert!(batches(&mut planner, 2, 64 << 30).is_empty(), "a step every pass already");
    let four = planner.estimate(&Setup { batch: 4, ..start.clone() }).expect("batch 4").peak;
    let eight = planner.estimate(&Setup { batch: 8, ..start.clone() }).expect("batch 8").peak;
    assert!(four < eight);
    assert_eq!(batches(&mut planner, 64, four), [4], "the budget bounds it");
    assert!(batches(&mut planner, 64, four - 1).is_empty());
    let found = larger_batches(&mut planner, &start, 8, 64 << 30).expect("batches");
    assert_eq!(found[0].peak, four, "each with its own estimate");

    let attention = fixture("tests/fixtures/onnx/yolo11n-w00625-nc3-160.onnx");
    let inspection = inspect(&attention).expect("inspect");
    let mut planner = Planner::new(&attention, &inspection, 0);
    let one = setup(Trainable::Freeze(0), 1, false, 160);
    assert!(larger_batches(&mut planner, &one, 64, 64 << 30).expect("batches").is_empty(), "fixed at 1");
}

#[test]
fn a_static_batch_one_export_with_attention_plans_batch_one_only() {
    let model = fixture("tests/fixtures/onnx/yolo11n-w00625-nc3-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 0);
    assert_eq!(planner.batch_limit(Trainable::Freeze(0), [160, 160]).expect("limit"), 1);
    assert_eq!(planner.batch_limit(Trainable::Head, [160, 160]).expect("limit"), usize::MAX);
    let start = Setup { trainable: Trainable::Freeze(0), batch: 16, imgsz: [160, 160], ..Setup::default() };
    let plan = headroom_plan::plan(&mut planner, &start, 64 << 30, false).expect("plan");
    assert!(plan.candidates.iter().all(|c| c.estimate.setup.batch == 1), "{:?}", plan.candidates[0].rung);
}

#[test]
fn a_discrete_gpu_counts_only_what_lives_on_it() {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let s = setup(Trainable::Head, 2, true, 160);
    let unified = Planner::new(&model, &inspection, 0).estimate(&s).expect("unified");
    let discrete = Planner::new(&model, &inspection, 0).discrete().estimate(&s).expect("discrete");
    // Unified: libtorch's copy and the file's bytes for write-back (the trunk on libtorch: no
    // ONNX Runtime session).
    assert_eq!(discrete.components.weights * 2, unified.components.weights);
    assert_eq!(discrete.components.eval, 0);
    // The CPU pool's margin counts where the host's memory does.
    assert_eq!(discrete.components.allocator, 0);
    assert!(unified.components.allocator > 0);
    assert!(discrete.peak < unified.peak);
    assert_eq!(discrete.components.training_peak(), unified.components.training_peak());

    // The one set-up every caller uses: discrete only when training on the discrete board's GPU,
    // the runtime's cost of the side that trains.
    let devices = headroom_plan::builtin_devices().expect("builtins");
    let gpu8 = headroom_plan::find_device(&devices, "gpu-8").expect("gpu-8");
    let on = |runs_on| Planner::on(&model, &inspection, gpu8, runs_on).estimate(&s).expect("estimate");
    let on_gpu = on(headroom_plan::RunsOn::Cuda(0));
    let on_cpu = on(headroom_plan::RunsOn::Cpu);
    assert_eq!(on_gpu.components.weights, discrete.components.weights);
    assert_eq!(on_gpu.components.runtime, gpu8.runtime_bytes_on(true));
    assert_eq!(on_cpu.components.weights, unified.components.weights);
    assert_eq!(on_cpu.components.runtime, gpu8.runtime_bytes_on(false));
}

#[test]
fn a_setup_reads_in_words_not_flags() {
    let mut s = setup(Trainable::NeckHead, 2, true, 160);
    assert_eq!(s.to_string(), "neck+head, batch 2, 160x160, checkpointed, no augmentation");
    s.trainable = Trainable::Freeze(0);
    (s.checkpoint, s.amp, s.cache_features) = (false, true, true);
    assert_eq!(s.to_string(), "all, batch 2, 160x160, not checkpointed, AMP, features cached");
    assert!(!s.to_string().contains("--"), "{s}");
}

#[test]
fn freezing_more_never_trains_more() {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let neck =
        inspection.freeze_points.iter().find(|p| p.name.as_deref() == Some("neck+head")).expect("neck");
    let mut planner = Planner::new(&model, &inspection, 0);
    // Frozen past the neck's first upsample: the only coarser part is the head.
    let start = Setup {
        trainable: Trainable::Freeze(neck.freeze + 1),
        batch: 1,
        imgsz: [160, 160],
        ..Setup::default()
    };
    let plan = headroom_plan::plan(&mut planner, &start, 1, false).expect("plan");
    let rungs: Vec<String> = plan.candidates.iter().map(|c| c.rung.to_string()).collect();
    let rungs: Vec<&str> = rungs.iter().map(String::as_str).collect();
    assert!(rungs.contains(&"train head") && !rungs.contains(&"train neck+head"), "{rungs:?}");
}

/// The demo student, its inspection, and what the demo teacher costs at 160.
fn student_and_teacher() -> (Model, headroom_onnx::inspect::Inspection, headroom_plan::TeacherCost) {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let teacher_model = fixture("models/demo/teacher-shapes-160.onnx");
    let teacher_inspection = inspect(&teacher_model).expect("inspect");
    let cost = Planner::new(&teacher_model, &teacher_inspection, 0).teacher_cost([160, 160]).expect("cost");
    (model, inspection, cost)
}

#[test]
fn a_teacher_adds_its_weights_its_outputs_and_its_own_pass() {
    let (model, inspection, cost) = student_and_teacher();
    // YOLOv8n nc=3: 3.0 M parameters; head outputs (64 box bins + 3 classes) x 525 anchors.
    assert!((11 << 20..13 << 20).contains(&cost.weights), "{}", cost.weights);
    assert_eq!(cost.outputs, (64 + 3) * 525 * 4);
    assert!(cost.forward > cost.outputs, "{cost:?}");

    let mut planner = Planner::new(&model, &inspection, 0);
    for (trainable, trunk) in [
        (Trainable::Freeze(0), TrunkRuntime::Ort),
        (Trainable::Head, TrunkRuntime::Torch),
        (Trainable::Head, TrunkRuntime::Ort),
    ] {
        let plain = Setup { trainable, trunk, ..setup(trainable, 2, true, 160) };
        let taught = Setup { teacher: Some(cost), ..plain.clone() };
        let (a, b) = (planner.estimate(&plain).expect("plain"), planner.estimate(&taught).expect("taught"));
        assert_eq!(b.components.teacher, cost.weights, "{trainable} {trunk:?}");
        assert_eq!(b.components.teacher_outputs, cost.outputs * 2);
        assert_eq!(b.components.teacher_pass, cost.forward * 2);
        assert_eq!(b.components.head_phase(), a.components.head_phase() + cost.outputs * 2);
        // The evaluation phase (no teacher outputs) may set the peak.
        assert!(b.peak >= a.peak + cost.weights, "{trainable}");
    }
}

#[test]
fn a_prefetched_batch_adds_the_teachers_pass_beside_the_students() {
    let (model, inspection, cost) = student_and_teacher();
    let mut planner = Planner::new(&model, &inspection, 0);
    for batch in [2, 8] {
        let taught = Setup { teacher: Some(cost), ..setup(Trainable::Freeze(0), batch, false, 160) };
        let ahead = Setup { prefetch: true, ..taught.clone() };
        let (a, b) = (planner.estimate(&taught).expect("taught"), planner.estimate(&ahead).expect("ahead"));
        let c = b.components;
        assert_eq!(a.components.prefetch, 0);
        assert_eq!(c.prefetch, c.teacher_pass.max(c.input + c.teacher_outputs), "batch {batch}");
        assert!(c.prefetch >= cost.forward * batch as u64);
        // The teacher's pass no longer takes turns with the student's: it runs beside the larger phase.
        let phase = c.trunk_phase().max(c.head_phase());
        assert_eq!(c.training_peak(), c.state() - c.runtime - c.weights - c.allocator + phase + c.prefetch);
        let turns = a.components.trunk_phase().max(a.components.head_phase()).max(a.components.teacher_pass);
        assert!(phase + c.prefetch > turns, "batch {batch}");
        // The evaluation at the end of an epoch may still set the peak.
        assert!(b.peak >= a.peak, "batch {batch}");
        assert!(b.components.at_peak().contains(&("prefetch", c.prefetch)) || c.eval > phase + c.prefetch);
        // Without a teacher the prefetched batch is its input.
        let plain = Setup { teacher: None, ..ahead.clone() };
        let p = planner.estimate(&plain).expect("plain").components;
        assert_eq!(p.prefetch, p.input);
        // A feature cache makes no batch to prefetch.
        let cached = Setup { cache_features: true, augment: false, ..plain };
        assert_eq!(planner.estimate(&cached).expect("cached").components.prefetch, 0);
    }
}

#[test]
fn the_largest_frame_counts_between_passes_beside_a_prefetched_pass_and_at_evaluation() {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 0);
    let plain = setup(Trainable::Freeze(0), 2, false, 160);
    let small = planner.estimate(&plain).expect("no frame");
    // A 13000² JPEG of 60 MB: its file and its RGB pixels.
    let frame = 60_000_000 + 13_000 * 13_000 * 3;
    let large = planner.estimate(&Setup { frame, ..plain.clone() }).expect("frame");
    let c = large.components;
    assert_eq!(c.decode, frame);
    // More than the pass: the data phase or evaluation (beside the written-back model) sets the peak.
    assert!(large.peak >= c.state() + frame, "{} < {}", large.peak, c.state() + frame);
    assert!(["data", "eval"].contains(&c.peak_phase()), "{}", c.peak_phase());
    // A frame smaller than the pass changes nothing but evaluation's share.
    let tiny = planner.estimate(&Setup { frame: 1 << 10, ..plain.clone() }).expect("tiny");
    assert_eq!(tiny.peak, small.peak);
    // Read on the prefetch thread, beside the pass.
    let ahead = planner.estimate(&Setup { frame, prefetch: true, ..plain.clone() }).expect("ahead");
    let a = ahead.components;
    assert_eq!(a.prefetch, frame.max(a.input));
    assert!(ahead.peak >= a.state() + a.trunk_phase().max(a.head_phase()) + frame);
    // Host memory: a discrete GPU's budget does not hold it.
    let mut gpu = Planner::new(&model, &inspection, 0).discrete();
    let (g0, g1) = (
        gpu.estimate(&plain).expect("gpu"),
        gpu.estimate(&Setup { frame, ..plain.clone() }).expect("gpu frame"),
    );
    assert_eq!((g1.peak, g1.components.decode), (g0.peak, 0));
}

#[test]
fn the_ladder_caches_features_only_without_augmentation_or_a_teacher() {
    let model = fixture("models/demo/yolov8n-shapes-160.onnx");
    let inspection = inspect(&model).expect("inspect");
    let mut planner = Planner::new(&model, &inspection, 0);
    let start = Setup { trainable: Trainable::Head, batch: 2, imgsz: [160, 160], ..Setup::default() };
    let teacher = headroom_plan::TeacherCost { weights: 1 << 20, forward: 1 << 20, outputs: 1 << 10 };
    for (augment, teacher, cached) in [
        (false, None, true),
        (true, None, false),
        (false, Some(teacher), false),
        (true, Some(teacher), false),
    ] {
        let start = Setup { augment, teacher, ..start.clone() };
        // A budget nothing fits: every rung is listed.
        let plan = headroom_plan::plan(&mut planner, &start, 1, false).expect("plan");
        let rungs: Vec<String> = plan.candidates.iter().map(|c| c.rung.to_string()).collect();
        let rungs: Vec<&str> = rungs.iter().map(String::as_str).collect();
        assert_eq!(
            rungs.contains(&"cache"),
            cached,
            "augment {augment}, teacher {}: {rungs:?}",
            teacher.is_some()
        );
    }
}
