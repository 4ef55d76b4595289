//! Measuring what a training step really takes, to check the memory planner against
//! (crates/train/examples/checkpoint_memory.rs `--window step`, the planner validation test).
//!
//! From right after loading (the model and the student built), two whole steps as `headroom train`
//! runs them: the input batch, the trunk under no-grad, the trainable part with the detection loss
//! on synthetic boxes, backward (plain or checkpointed), the optimiser's step, and the two weight
//! averages the trainer keeps (EMA and the starting weights). Memory is the process's peak resident
//! set (`VmHWM`, reset through `/proc/self/clear_refs` before the first step) less the resident set
//! then. The first step leaves libtorch's caches and the run's state behind; every later step
//! repeats the second, so the peak over both is the training peak. Run it in a fresh process with
//! `MALLOC_MMAP_THRESHOLD_=65536`, so that freed tensors leave the resident set. Linux only.

use tch::{Device, Kind, Tensor};

use crate::loss::{LossConfig, Target, detection_loss};
use crate::memory_guard::status_bytes;
use crate::optim::{AdamW, Sgd};
use crate::trainer::head_tensors;
use crate::{Error, Result, Student};

/// What [`measure_training_step`] found, bytes above the resident set after loading.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct StepMemory {
    /// The resident set after loading (subtracted from the others).
    pub baseline: u64,
    /// Peak of the first step.
    pub first_step: u64,
    /// Resident after the first step (the run's state and libtorch's caches).
    pub retained: u64,
    /// Peak over both steps: the training peak.
    pub peak: u64,
    /// Seconds of the first step.
    pub seconds: f64,
    /// The loss of the first step.
    pub loss: f64,
}

/// Runs two training steps of `student` as `setup` says (batch, input size, checkpointing,
/// optimiser, objects per image) on random images and measures them (see the module docs).
pub fn measure_training_step(student: &Student, setup: &headroom_plan::Setup) -> Result<StepMemory> {
    let proc_error =
        || Error::File { path: "/proc/self/status".into(), reason: "no VmRSS/VmHWM (Linux only)".into() };
    let inspection = student.inspection();
    let (b, [h, w]) = (setup.batch as i64, setup.imgsz.map(i64::from));
    let (nc, reg_max) = (inspection.classes as i64, inspection.head.reg_max as i64);
    let config = if inspection.end_to_end {
        LossConfig::one_to_one(nc, reg_max, inspection.strides.clone())
    } else {
        LossConfig::one_to_many(nc, reg_max, inspection.strides.clone())
    };
    let grids: Vec<(i64, i64)> = inspection.strides.iter().map(|s| (h / s, w / s)).collect();
    let objects = setup.objects;
    let targets: Vec<Target> = (0..setup.batch)
        .flat_map(|image| {
            (0..objects).map(move |k| {
                let f = k as f32 / objects.max(1) as f32;
                let class = k % nc.max(1) as usize;
                Target { image, class, cx: 0.1 + 0.8 * f, cy: 0.5 + 0.3 * (f - 0.5), w: 0.1, h: 0.15 }
            })
        })
        .collect();
    std::fs::write("/proc/self/clear_refs", "5")
        .map_err(|e| Error::File { path: "/proc/self/clear_refs".into(), reason: e.to_string() })?;
    let baseline = status_bytes("VmRSS:").ok_or_else(proc_error)?;
    let start = std::time::Instant::now();
    tch::manual_seed(0);
    let averages: Vec<Tensor> =
        student.parameters().iter().flat_map(|(_, p)| [p.detach().copy(), p.detach().copy()]).collect();
    let loss = |outputs: &[Tensor]| -> Result<Tensor> {
        let (boxes, scores) = head_tensors(outputs)?;
        Ok(detection_loss(&config, &boxes, &scores, &grids, &targets)?.total)
    };
    let mut sgd = Sgd::new(1e-4, 0.937, true, 5e-4);
    let mut adam = AdamW::new(0.9, 5e-4);
    let mut step = || -> Result<f64> {
        let images = Tensor::f_rand([b, 3, h, w], (Kind::Float, Device::Cpu))?;
        let cut = student.trunk(&images)?;
        drop(images);
        let value = if setup.checkpoint {
            student.backward_checkpointed(&cut, loss)?
        } else {
            student.backward(&cut, loss)?
        };
        drop(cut);
        let parameters = student.parameters();
        match setup.optimizer {
            headroom_plan::Optimizer::AdamW => adam.step_with(&parameters, 1e-4, 1e-4)?,
            headroom_plan::Optimizer::Sgd => sgd.step_with(&parameters, 1e-4, 1e-4)?,
        }
        student.zero_grad();
        Ok(value)
    };
    let loss_value = step()?;
    let seconds = start.elapsed().as_secs_f64();
    let first_peak = status_bytes("VmHWM:").ok_or_else(proc_error)?;
    let after_first = status_bytes("VmRSS:").ok_or_else(proc_error)?;
    step()?;
    let peak = status_bytes("VmHWM:").ok_or_else(proc_error)?;
    drop(averages);
    Ok(StepMemory {
        baseline,
        first_step: first_peak.saturating_sub(baseline),
        retained: after_first.saturating_sub(baseline),
        peak: peak.saturating_sub(baseline),
        seconds,
        loss: loss_value,
    })
}
