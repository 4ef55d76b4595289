//! `headroom train` and the memory planner (docs/PLAN.md): `--device` as a device preset,
//! `--plan auto` (train with the first configuration of the fit ladder that fits), the planner's
//! estimate of the run beside its measured peak in `results.json`, and the run log of steps down.

use std::path::Path;

use headroom_onnx::Trainable;
use headroom_plan::{DevicePreset, Optimizer, Planner, Setup, TrunkRuntime, format_size};

use super::plan::{PlanArgs, budget, train_flags};
use super::train::Args;

/// libtorch's device text (`cpu`, `cuda`, `cuda:N`) and the preset whose budget and runtime apply:
/// `--device` names either (a preset trains on CUDA when the preset has a GPU and libtorch sees one).
pub fn resolve_device(
    text: &str,
    cuda_available: bool,
    warn: bool,
) -> anyhow::Result<(String, DevicePreset)> {
    let devices = headroom_plan::builtin_devices()?;
    let libtorch = text == "cpu" || text == "cuda" || text.starts_with("cuda:");
    if libtorch {
        let name = if text == "cpu" { "x86-cpu" } else { "gpu-8" };
        return Ok((text.to_string(), headroom_plan::find_device(&devices, name)?.clone()));
    }
    let preset = headroom_plan::find_device(&devices, text)
        .map_err(|e| anyhow::anyhow!("--device {text}: not cpu, cuda or cuda:N, and {e}"))?
        .clone();
    let torch = if preset.gpu && cuda_available {
        "cuda"
    } else {
        if preset.gpu && warn {
            tracing::warn!("--device {text}: this libtorch sees no CUDA device; training on the CPU");
        }
        "cpu"
    };
    Ok((torch.to_string(), preset))
}

/// `--plan auto`: runs the fit ladder from the asked configuration (batch 16 at most) and returns
/// the arguments and split of the first candidate that fits. `gpu`: libtorch trains on CUDA (AMP
/// is a rung only then).
pub fn plan_auto(
    args: &Args,
    trainable: Trainable,
    preset: &DevicePreset,
    plan: &PlanArgs,
    gpu: bool,
) -> anyhow::Result<(Args, Trainable)> {
    let model = headroom_onnx::Model::load(&args.model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let mut start = super::plan::start_setup(&inspection, trainable, args.imgsz.map(|n| n as u32), 16)?;
    start.optimizer = if args.optimizer == "sgd" { Optimizer::Sgd } else { Optimizer::AdamW };
    start.trunk = if args.trunk == "torch" { TrunkRuntime::Torch } else { TrunkRuntime::Ort };
    start.amp = false;
    let budget = budget(plan, preset)?;
    let mut planner = Planner::new(&model, &inspection, preset.runtime_bytes());
    if !preset.unified {
        planner = planner.discrete();
    }
    let found = headroom_plan::plan(&mut planner, &start, budget.bytes, gpu)?;
    let Some(chosen) = found.chosen.and_then(|i| found.candidates.get(i)) else {
        anyhow::bail!(
            "--plan auto: nothing fits {} on {} ({}): {}",
            format_size(found.budget),
            preset.name,
            budget.source,
            found.advice.unwrap_or_default()
        );
    };
    let setup = &chosen.estimate.setup;
    tracing::info!(
        "--plan auto on {} (budget {}): rung `{}`, estimated peak {}: {}",
        preset.name,
        format_size(found.budget),
        chosen.rung,
        format_size(chosen.estimate.peak),
        train_flags(setup)
    );
    let pixels_change = args.mosaic > 0.0
        || args.scale > 0.0
        || args.translate > 0.0
        || super::train::hsv_gains(&args.hsv)?.iter().any(|&g| g > 0.0);
    anyhow::ensure!(
        !(setup.cache_features && pixels_change),
        "--plan auto chose --cache-features to fit, which cannot run with --mosaic, --scale, --translate or \
         --hsv: turn them off, or give a larger --budget"
    );
    let mut planned = args.clone();
    planned.batch = setup.batch;
    planned.no_checkpoint = !setup.checkpoint;
    planned.amp = setup.amp;
    planned.cache_features = setup.cache_features;
    planned.imgsz = Some(setup.imgsz[0] as usize);
    planned.freeze = None;
    planned.train = setup.trainable.to_string().replace("freeze=", "");
    Ok((planned, setup.trainable))
}

/// The planner's estimate of a run's configuration on `preset`, as `results.json` records it.
pub fn estimate_json(
    model: &headroom_onnx::Model,
    inspection: &headroom_onnx::inspect::Inspection,
    preset: &DevicePreset,
    setup: &Setup,
) -> serde_json::Value {
    let mut planner = Planner::new(model, inspection, preset.runtime_bytes());
    if !preset.unified {
        planner = planner.discrete();
    }
    match planner.estimate(setup) {
        Ok(e) => {
            let mb = |b: u64| (b as f64 / f64::from(1u32 << 20) * 10.0).round() / 10.0;
            let components: serde_json::Map<String, serde_json::Value> =
                e.components.at_peak().iter().map(|(n, v)| (n.to_string(), mb(*v).into())).collect();
            serde_json::json!({
                "device": preset.name,
                "estimate_mb": mb(e.peak),
                "training_estimate_mb": mb(e.components.training_peak()),
                "components_mb": components,
            })
        }
        Err(e) => serde_json::json!({ "device": preset.name, "error": e.to_string() }),
    }
}

/// The planner's view of a run's settings.
pub fn setup_of(
    settings: &headroom_train::fit::TrainConfig,
    trainable: Trainable,
    trunk: &str,
    cache_features: bool,
    train: &[headroom_core::dataset::ImageRecord],
) -> Setup {
    Setup {
        trainable,
        batch: settings.batch,
        nbs: settings.nbs,
        imgsz: [settings.imgsz[1], settings.imgsz[0]],
        checkpoint: settings.checkpoint,
        amp: settings.amp,
        optimizer: match settings.optimizer {
            headroom_train::fit::OptimizerKind::Sgd => Optimizer::Sgd,
            headroom_train::fit::OptimizerKind::AdamW => Optimizer::AdamW,
        },
        trunk: if trunk == "torch" { TrunkRuntime::Torch } else { TrunkRuntime::Ort },
        cache_features,
        objects: train.iter().map(|r| r.labels.len()).max().unwrap_or(0),
        images: train.len(),
    }
}

/// Appends the steps down from `from` on to the run log (`run.log` in the run folder).
pub fn log_steps(dir: &Path, steps: &[headroom_train::memory_guard::StepDown]) -> anyhow::Result<()> {
    use std::io::Write as _;
    if steps.is_empty() {
        return Ok(());
    }
    let path = dir.join("run.log");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    for s in steps {
        writeln!(
            file,
            "out of memory at epoch {} pass {} ({}): stepped down to {} (batch {} -> {}, {} passes per step), \
             resumed from the last checkpoint at epoch {} pass {}",
            s.epoch + 1,
            s.pass,
            s.reason,
            s.rung,
            s.batch[0],
            s.batch[1],
            s.accumulate,
            s.resumed_at[0] + 1,
            s.resumed_at[1]
        )
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    Ok(())
}
