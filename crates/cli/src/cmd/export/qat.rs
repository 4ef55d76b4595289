//! `headroom export --int8 --qat DATA.yaml`: quantization-aware fine-tuning before the INT8 file.
//!
//! 1. The post-training INT8 file is made as usual (calibration on `--calib`), into
//!    `OUT/<stem>.qat/ptq/`: its Convs and activation scales are what the fine-tuning quantizes.
//! 2. `headroom-run` trains the model on DATA.yaml, every layer, with those Convs fake-quantized
//!    (`headroom_train::fake_quant`: straight-through gradients) and the FP32 model itself as the
//!    dense-distillation teacher, into `OUT/<stem>.qat/train/`.
//! 3. The export then goes on from the last epoch's FP32 weights (`OUT/<stem>.qat/<stem>.onnx`), its
//!    INT8 file written at the same activation scales: the file computes what the training saw.

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
use std::path::Path;

use headroom_export::{ExportJob, ExportRequest, QatSettings};

use super::Terminal;

/// The request of the export after fine-tuning (its model the fine-tuned FP32 file, its INT8 at
/// the scales trained with); `None` when a signal stopped it.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
pub(super) fn fine_tune(
    job: &ExportJob,
    qat: &QatSettings,
    request: &ExportRequest,
    terminal: &Terminal,
) -> anyhow::Result<Option<ExportRequest>> {
    use anyhow::Context as _;
    let data = qat.data.as_path();
    use headroom_export::{Calibration, Exported};
    use headroom_run::request::RunRequest;
    use headroom_run::run::{RunEnd, RunOptions};

    let model = std::path::absolute(&request.model)?;
    let data = std::path::absolute(data).with_context(|| format!("--qat {}", data.display()))?;
    anyhow::ensure!(data.is_file(), "--qat {}: no such file", data.display());
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let out = match &request.out {
        Some(dir) => dir.clone(),
        None => model.parent().map(Path::to_path_buf).unwrap_or_default(),
    };
    let work = std::path::absolute(out.join(format!("{stem}.qat")))?;
    // 1. The post-training file: its sites and scales.
    let ptq_dir = work.join("ptq");
    let ptq = ExportRequest {
        model: model.clone(),
        fp16: false,
        engine: None,
        data: None,
        out: Some(ptq_dir.clone()),
        force: true,
        ..request.clone()
    };
    tracing::info!("quantization-aware training, 1 of 3: calibrating the post-training INT8 file");
    let ptq_report = match headroom_export::export(&ptq, terminal)? {
        Exported::Stopped => return Ok(None),
        Exported::Published(report) => report,
    };
    // The method `auto` chose for the post-training file is the one the final file keeps (its
    // Convs' scales come from that file anyway): no second choice on the fine-tuned weights.
    let chosen = ptq_report.int8.as_ref().map(|s| s.method.clone()).unwrap_or_default();
    let ptq_file = ptq_dir.join(format!("{stem}.int8.onnx"));
    // 2. The fine-tuning: every layer, fake-quantized, distilled from the FP32 model.
    let train_dir = work.join("train");
    if train_dir.exists() {
        std::fs::remove_dir_all(&train_dir).with_context(|| format!("removing {}", train_dir.display()))?;
    }
    let run_request = RunRequest {
        model: Some(model.clone()),
        data: Some(data),
        part: Some(headroom_onnx::Trainable::Freeze(0)),
        device: Some(headroom_run::device::torch_text(job.device)),
        qat: Some(ptq_file.clone()),
        teacher: Some(model.clone()),
        epochs: Some(qat.epochs),
        optimizer: Some(Some(headroom_plan::Optimizer::AdamW)),
        lr0: Some(QAT_LR0),
        imgsz: request.imgsz.map(|n| Some(n as usize)),
        ..RunRequest::default()
    }
    .or(RunRequest::defaults());
    let spec = run_request.resolve(None, headroom_run::device::cuda_available())?;
    let options = RunOptions {
        threads: job.threads,
        stop: Some(terminal.interrupt.flag()),
        allocator: Default::default(),
        profile: None,
        prefetch: headroom_plan::Prefetch::Auto,
    };
    tracing::info!(
        "quantization-aware training, 2 of 3: {} epochs on {} with {} Convs fake-quantized, into {}",
        qat.epochs,
        spec.data.display(),
        headroom_run::qat::sites(&ptq_file, &headroom_onnx::Model::load(&model)?)?.len(),
        train_dir.display()
    );
    let mut observer = crate::cmd::train_progress::TerminalObserver::default();
    match headroom_run::run::start(&spec, &train_dir, &options, &mut observer)? {
        RunEnd::Finished(_) | RunEnd::AlreadyFinished(_) => {}
        RunEnd::Interrupted => return Ok(None),
    }
    // 3. The export of the fine-tuned weights, named as the model, at the trained scales.
    let tuned = work.join(format!("{stem}.onnx"));
    // The last epoch, not the best: the run picks `best` on the float model's val mAP, and its
    // epoch 0 (the model before any quantization-aware step) often wins that on a small val split.
    let last = train_dir.join("last.onnx");
    let bytes = std::fs::read(&last).with_context(|| format!("reading {}", last.display()))?;
    headroom_core::fsio::write_atomic(&tuned, &bytes)?;
    // Every export fine-tunes afresh: the run's checkpoints (the model, its average and the
    // optimiser's moments) are of no further use.
    let checkpoints = train_dir.join("ckpt");
    if let Err(e) = std::fs::remove_dir_all(&checkpoints) {
        tracing::warn!("removing {}: {e}", checkpoints.display());
    }
    tracing::info!("quantization-aware training, 3 of 3: exporting the fine-tuned {}", tuned.display());
    let mut request = request.clone();
    request.model = tuned;
    request.out = Some(out);
    if let Some(int8) = request.int8.as_mut() {
        int8.scales_from = Some(ptq_file);
        if let Calibration::Auto(candidates) = &int8.method
            && let Some(method) = candidates.iter().find(|m| m.name() == chosen)
        {
            int8.method = Calibration::Fixed(*method);
        }
    }
    Ok(Some(request))
}

/// Fine-tuning's learning rate: a twentieth of AdamW's usual start for a few classes, as
/// quantization-aware fine-tuning runs at a small fraction of the original rate.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
const QAT_LR0: f64 = 1e-4;

/// This build cannot train.
#[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
pub(super) fn fine_tune(
    _job: &ExportJob,
    _qat: &QatSettings,
    _request: &ExportRequest,
    _terminal: &Terminal,
) -> anyhow::Result<Option<ExportRequest>> {
    anyhow::bail!("--qat trains the model: this build has no libtorch (build with the `libtorch` feature)")
}
