//! Peak memory and time of one training backward pass, plain or checkpointed, on a real detector.
//!
//! ```text
//! cargo run -p headroom-train --example checkpoint_memory -- MODEL.onnx [--imgsz 640] [--batch 2]
//!     [--train 10|head|neck+head] [--mode plain|checkpointed] [--threads 2]
//! ```
//!
//! Prints one JSON line. Memory is the process's peak resident set (`VmHWM`) during the backward,
//! reset just before it through `/proc/self/clear_refs`, minus the resident set at that moment:
//! what the pass itself needed (the first pass: a later one would reuse memory the allocator kept).
//! Run each mode in its own process, with `MALLOC_MMAP_THRESHOLD_=65536` so that freed tensors leave
//! the resident set (scripts/bench/checkpoint_memory.sh).

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
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--imgsz" => imgsz = value.parse()?,
            "--batch" => batch = value.parse()?,
            "--train" => train = value,
            "--mode" => mode = value,
            "--threads" => threads = value.parse()?,
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    tch::set_num_threads(threads);
    let model = Model::load(&model_path)?;
    let spec: Trainable = train.parse()?;
    let student = Student::new(&model, spec, Device::Cpu)?;
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
    let checkpointed = match mode.as_str() {
        "plain" => false,
        "checkpointed" => true,
        other => return Err(format!("--mode {other}: plain or checkpointed").into()),
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
