//! `headroom train --plan auto`: the spec of a new run set to the first configuration of
//! `headroom plan`'s fit ladder that fits the device's budget (docs/PLAN.md), and the choice
//! recorded in the spec.

use headroom_plan::{Planner, format_size};
use headroom_run::spec::{PlanChoice, RunSpec};

use super::device_arg::{BoardArgs, device_arg, resolve_board};
use super::plan::{PlanArgs, budget, planned_device};

/// Runs the fit ladder from the spec's configuration (its `--batch`, 2 by default: the batch the
/// adaptation figures were measured at, and on the demo's 64 field images batch 16 recovered 15 % of
/// the gap where batch 2 recovered 23 % — docs/BENCHMARKS.md "The deploy gate") on the spec's board
/// (`--board`, else this board: `auto`) and sets batch, checkpointing, AMP, the feature cache, the
/// input size and the part to the first candidate that fits.
pub fn plan_auto(spec: &mut RunSpec, plan: &PlanArgs, board: &BoardArgs) -> anyhow::Result<()> {
    if spec.device_preset.is_none() {
        spec.device_preset = Some(resolve_board("auto", board.devices.as_deref())?);
    }
    let cuda = headroom_run::device::cuda_available();
    let (torch, preset) =
        headroom_run::device::resolve_saved(&spec.device, spec.device_preset.as_ref(), cuda, false)?;
    let runs_on = planned_device(device_arg(&torch).map_err(anyhow::Error::msg)?, &preset);
    let gpu = runs_on.is_gpu();
    let model = headroom_onnx::Model::load(&spec.model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let imgsz = spec.settings.imgsz[0];
    let mut start = super::plan::start_setup(&inspection, spec.part, Some(imgsz), spec.settings.batch)?;
    start.optimizer = spec.settings.optimizer;
    start.trunk = spec.trunk;
    start.amp = false;
    start.augment = spec.settings.augment.changes_pixels();
    if let Some(teacher) = &spec.teacher {
        start.teacher = Some(super::plan::teacher_cost(teacher, start.imgsz)?);
    }
    let budget = budget(plan, &preset, runs_on, board)?;
    let mut planner = Planner::new(&model, &inspection, preset.runtime_bytes());
    if !preset.unified && gpu {
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
        setup.train_flags()
    );
    let s = &mut spec.settings;
    s.batch = setup.batch;
    s.checkpoint = setup.checkpoint;
    s.amp = setup.amp;
    s.imgsz = [setup.imgsz[1], setup.imgsz[0]];
    spec.cache_features = setup.cache_features;
    spec.part = setup.trainable;
    spec.plan = Some(PlanChoice {
        device: preset.name.clone(),
        budget: found.budget,
        rung: chosen.rung.to_string(),
        estimate: chosen.estimate.peak,
    });
    Ok(())
}
