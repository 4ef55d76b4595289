//! Peak memory and time of one training backward pass, plain or checkpointed, on a real detector.
//!
//! ```text
//! cargo run -p headroom-train --example checkpoint_memory -- MODEL.onnx [--imgsz 640] [--batch 2]
//!     [--train 10|head|neck+head|all] [--mode plain|checkpointed] [--threads 2]
//!     [--window backward|step|trunk] [--optimizer sgd|adamw] [--objects 8]
//! ```
//!
//! Prints one JSON line. Memory is the process's peak resident set (`VmHWM`), reset through
//! `/proc/self/clear_refs`, minus the resident set at that moment: what the pass itself needed (the
//! first pass: a later one would reuse memory the allocator kept).
//! - `--window backward` (default): from just before the backward of a square-mean surrogate loss
//!   on a cut computed beforehand (the checkpointing benchmark).
//! - `--window step`: from right after loading (the model and the student built) through one whole
//!   training step as `headroom train` runs it: the input batch, the trunk under no-grad, the
//!   trainable part with the detection loss on `--objects` synthetic boxes per image, backward,
//!   the optimiser's step and the two weight averages the trainer keeps (EMA, starting weights);
//!   then a second step (every later one repeats it): `measured_mb` is the peak over both, as a
//!   run's peak is (the first step leaves libtorch's caches and the state behind, `retained_mb`).
//!   The line then also holds the memory planner's estimate of the same configuration
//!   (`estimate_mb`, headroom-plan) and its components: docs/PLAN.md, scripts/bench/plan_memory.sh.
//! - `--window trunk`: the input batch and the frozen trunk under no-grad alone, beside the
//!   planner's trunk phase.
//!
//! Run each configuration in its own process, with `MALLOC_MMAP_THRESHOLD_=65536` so that freed
//! tensors leave the resident set (scripts/bench/checkpoint_memory.sh).

use std::time::Instant;

use headroom_onnx::{Model, Trainable};
use headroom_train::Student;
use headroom_train::tch::{self, Device, Kind, Tensor};

fn status_kb(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let model_path = args.next().ok_or("usage: checkpoint_memory MODEL.onnx [options]")?;
    let (mut imgsz, mut batch, mut train, mut mode, mut threads) =
        (640i64, 2i64, "10".to_string(), "checkpointed".to_string(), 2i32);
    let (mut window, mut optimizer, mut objects) = ("backward".to_string(), "sgd".to_string(), 8usize);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--imgsz" => imgsz = value.parse()?,
            "--batch" => batch = value.parse()?,
            "--train" => train = value,
            "--mode" => mode = value,
            "--threads" => threads = value.parse()?,
            "--window" => window = value,
            "--optimizer" => optimizer = value,
            "--objects" => objects = value.parse()?,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    tch::set_num_threads(threads);
    let model = Model::load(&model_path)?;
    let spec: Trainable = train.parse()?;
    let student = Student::new(&model, spec, Device::Cpu)?;
    let checkpointed = match mode.as_str() {
        "plain" => false,
        "checkpointed" => true,
        other => return Err(format!("--mode {other}: plain or checkpointed").into()),
    };
    if window == "trunk" {
        // The trunk phase alone: the input batch and the frozen trunk under no-grad.
        let inspection = student.inspection().clone();
        let setup = headroom_plan::Setup {
            trainable: spec,
            batch: batch as usize,
            imgsz: [imgsz as u32, imgsz as u32],
            trunk: headroom_plan::TrunkRuntime::Torch,
            ..headroom_plan::Setup::default()
        };
        let c = headroom_plan::Planner::new(&model, &inspection, 0).estimate(&setup)?.components;
        std::fs::write("/proc/self/clear_refs", "5")?;
        let baseline = status_kb("VmRSS:").ok_or("no VmRSS")?;
        let images = Tensor::rand([batch, 3, imgsz, imgsz], (Kind::Float, Device::Cpu));
        let cut = student.trunk(&images)?;
        let peak = status_kb("VmHWM:").ok_or("no VmHWM")?;
        drop((cut, images));
        let (measured, estimated) = ((peak - baseline) as f64 / 1024.0, c.trunk_phase() as f64 / 1048576.0);
        println!(
            "{{\"window\":\"trunk\",\"train\":\"{spec}\",\"imgsz\":{imgsz},\"batch\":{batch},\
             \"measured_mb\":{measured:.1},\"estimate_mb\":{estimated:.1},\"error_pct\":{:.1}}}",
            (estimated - measured) / measured * 100.0
        );
        return Ok(());
    }
    if window == "step" {
        let setup = headroom_plan::Setup {
            trainable: spec,
            batch: batch as usize,
            imgsz: [imgsz as u32, imgsz as u32],
            checkpoint: checkpointed,
            optimizer: match optimizer.as_str() {
                "adamw" => headroom_plan::Optimizer::AdamW,
                _ => headroom_plan::Optimizer::Sgd,
            },
            trunk: headroom_plan::TrunkRuntime::Torch,
            objects,
            ..headroom_plan::Setup::default()
        };
        return step_window(&model, &student, &setup, &optimizer, threads);
    }
    tch::manual_seed(0);
    let images = Tensor::rand([batch, 3, imgsz, imgsz], (Kind::Float, Device::Cpu));
    let cut = student.trunk(&images)?;
    let loss = |heads: &[Tensor]| -> headroom_train::Result<Tensor> {
        Ok(heads.iter().map(|h| h.square().mean(Kind::Float)).sum::<Tensor>())
    };
    let run = |checkpointed: bool| {
        student.zero_grad();
        if checkpointed { student.backward_checkpointed(&cut, loss) } else { student.backward(&cut, loss) }
    };
    std::fs::write("/proc/self/clear_refs", "5")?;
    let baseline = status_kb("VmRSS:").ok_or("no VmRSS")?;
    let start = Instant::now();
    let value = run(checkpointed)?;
    let seconds = start.elapsed().as_secs_f64();
    let peak = status_kb("VmHWM:").ok_or("no VmHWM")?;
    println!(
        "{{\"mode\":\"{mode}\",\"train\":\"{spec}\",\"imgsz\":{imgsz},\"batch\":{batch},\"threads\":{threads},\
         \"segments\":{},\"trainable_parameters\":{},\"baseline_mb\":{:.1},\"peak_mb\":{:.1},\"backward_mb\":{:.1},\
         \"seconds\":{seconds:.3},\"loss\":{value:.6}}}",
        student.partition().segments.len(),
        student.partition().parameter_count,
        baseline as f64 / 1024.0,
        peak as f64 / 1024.0,
        (peak.saturating_sub(baseline)) as f64 / 1024.0,
    );
    Ok(())
}

/// `--window step`: two whole training steps measured from right after loading
/// ([`headroom_train::probe`]), beside the planner's estimate of them.
fn step_window(
    model: &Model,
    student: &Student,
    setup: &headroom_plan::Setup,
    optimizer: &str,
    threads: i32,
) -> Result<(), Box<dyn std::error::Error>> {
    let inspection = student.inspection().clone();
    let estimate = {
        let mut planner = headroom_plan::Planner::new(model, &inspection, 0);
        planner.estimate(setup)?
    };
    let m = headroom_train::probe::measure_training_step(student, setup)?;
    let mb = |bytes: u64| bytes as f64 / (1u64 << 20) as f64;
    let c = &estimate.components;
    let (measured, estimated) = (mb(m.peak), mb(c.training_peak()));
    let components = [
        ("gradients", c.gradients),
        ("optimizer", c.optimizer),
        ("averages", c.averages),
        ("warmup", c.warmup),
        ("input", c.input),
        ("trunk", c.trunk),
        ("cut", c.cut),
        ("activations", c.activations),
        ("backward", c.backward),
        ("loss", c.loss),
        ("head_phase", c.head_phase()),
        ("trunk_phase", c.trunk_phase()),
    ];
    println!(
        "{{\"window\":\"step\",\"mode\":\"{}\",\"train\":\"{}\",\"imgsz\":{},\"batch\":{},\"threads\":{threads},\
         \"optimizer\":\"{optimizer}\",\"objects\":{},\"family\":\"{}\",\"baseline_mb\":{:.1},\
         \"measured_mb\":{measured:.1},\"first_step_mb\":{:.1},\"retained_mb\":{:.1},\"estimate_mb\":{estimated:.1},\
         \"error_pct\":{:.1},\"components_mb\":{{{}}},\"seconds\":{:.3},\"loss\":{:.6}}}",
        if setup.checkpoint { "checkpointed" } else { "plain" },
        setup.trainable,
        setup.imgsz[0],
        setup.batch,
        setup.objects,
        inspection.family,
        mb(m.baseline),
        mb(m.first_step),
        mb(m.retained),
        (estimated - measured) / measured * 100.0,
        components.iter().map(|(n, v)| format!("\"{n}\":{:.1}", mb(*v))).collect::<Vec<_>>().join(","),
        m.seconds,
        m.loss,
    );
    Ok(())
}
