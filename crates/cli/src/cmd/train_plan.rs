//! `headroom train --plan auto`: the spec of a new run set to the first configuration of
//! `headroom plan`'s fit ladder that fits the device's budget (docs/PLAN.md), and the choice
//! recorded in the spec.

use anyhow::Context as _;
use headroom_plan::{Optimizer, Planner, TrunkRuntime, format_size};
use headroom_run::spec::{PlanChoice, RunSpec, TrunkKind};
use headroom_train::config::OptimizerKind;

use super::plan::{PlanArgs, budget, train_flags};

/// A new run's `--device NAME|auto` resolved through the device files (`--devices`, as
/// `headroom plan` does) into `spec.device_preset`, which `config.toml` keeps: the run, and any resume
/// of it, then needs no device file. Nothing for `cpu`, `cuda`, `cuda:N`, or when already set.
pub fn resolve_device_preset(spec: &mut RunSpec, plan: &PlanArgs) -> anyhow::Result<()> {
    if spec.device_preset.is_some() || headroom_run::device::is_libtorch(&spec.device) {
        return Ok(());
    }
    let preset = super::plan::resolve_device(&spec.device, plan.devices.as_deref());
    let preset = if spec.device == "auto" {
        preset?
    } else {
        preset.with_context(|| format!("--device {}: not cpu, cuda or cuda:N", spec.device))?
    };
    spec.device_preset = Some(preset);
    Ok(())
}

/// Runs the fit ladder from the spec's configuration (its `--batch`, 2 by default: the batch the
/// adaptation figures were measured at, and on the demo's 64 field images batch 16 recovered 15 % of
/// the gap where batch 2 recovered 23 % — docs/BENCHMARKS.md "The deploy gate") on the spec's device and
/// sets batch, checkpointing, AMP, the feature cache, the input size and the part to the first
/// candidate that fits.
pub fn plan_auto(spec: &mut RunSpec, plan: &PlanArgs) -> anyhow::Result<()> {
    resolve_device_preset(spec, plan)?;
    let cuda = headroom_run::device::cuda_available();
    let (torch, preset) =
        headroom_run::device::resolve_saved(&spec.device, spec.device_preset.as_ref(), cuda, false)?;
    let gpu = torch != "cpu";
    let model = headroom_onnx::Model::load(&spec.model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let imgsz = spec.settings.imgsz[0];
    let mut start =
        super::plan::start_setup(&inspection, spec.trainable()?, Some(imgsz), spec.settings.batch)?;
    start.optimizer =
        if spec.settings.optimizer == OptimizerKind::Sgd { Optimizer::Sgd } else { Optimizer::AdamW };
    start.trunk = if spec.trunk == TrunkKind::Torch { TrunkRuntime::Torch } else { TrunkRuntime::Ort };
    start.amp = false;
    let budget = budget(plan, &preset)?;
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
    anyhow::ensure!(
        !(setup.cache_features && spec.settings.augment.changes_pixels()),
        "--plan auto chose --cache-features to fit, which cannot run with --mosaic, --scale, --translate or \
         --hsv: turn them off, or give a larger --budget"
    );
    let s = &mut spec.settings;
    s.batch = setup.batch;
    s.checkpoint = setup.checkpoint;
    s.amp = setup.amp;
    s.imgsz = [setup.imgsz[1], setup.imgsz[0]];
    spec.cache_features = setup.cache_features;
    spec.part = setup.trainable.to_string();
    spec.plan = Some(PlanChoice {
        device: preset.name.clone(),
        budget: found.budget,
        rung: chosen.rung.to_string(),
        estimate: chosen.estimate.peak,
    });
    Ok(())
}
