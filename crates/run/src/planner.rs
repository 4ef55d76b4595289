//! The memory planner's view of a run (`headroom-plan`): the [`Setup`] a spec trains with, and the
//! planner's estimate of it on a device preset, recorded in `results.json` beside the run's
//! measured peak and drawn on `memory.png` with the budget ([`memory_lines`]).

use headroom_core::dataset::ImageRecord;
use headroom_onnx::inspect::Inspection;
use headroom_onnx::{Model, Trainable};
use headroom_plan::{DevicePreset, Planner, Setup, TeacherCost, TrunkRuntime};
use headroom_train::config::TrainConfig;

use crate::spec::RunSpec;

/// The planner's view of a run's settings, with its dense-distillation teacher's cost if it has one.
pub fn setup_of(
    settings: &TrainConfig,
    trainable: Trainable,
    trunk: TrunkRuntime,
    cache_features: bool,
    train: &[ImageRecord],
    teacher: Option<TeacherCost>,
) -> Setup {
    Setup {
        trainable,
        batch: settings.batch,
        nbs: settings.nbs,
        imgsz: [settings.imgsz[1], settings.imgsz[0]],
        checkpoint: settings.checkpoint,
        amp: settings.amp,
        optimizer: settings.optimizer,
        trunk,
        cache_features,
        objects: train.iter().map(|r| r.labels.len()).max().unwrap_or(0),
        images: train.len(),
        augment: settings.augment.changes_pixels(),
        teacher,
    }
}

/// The planner's estimate of a run's configuration on `preset`, as `results.json` records it.
pub fn estimate_json(
    model: &Model,
    inspection: &Inspection,
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

/// What `memory.png` shows beside the measured peak, in MiB like `peak_rss_mb`: the budget the run
/// was planned for (`--plan auto`), else that of the device preset it names (none for `cpu`,
/// `cuda`: no budget was given), and the planner's estimate for this run when it has one.
pub fn memory_lines(spec: &RunSpec, estimate: &serde_json::Value) -> headroom_plot::MemoryLines {
    let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
    let budget = match (&spec.plan, &spec.device_preset) {
        (Some(plan), _) => Some(plan.budget),
        (None, Some(preset)) => Some(preset.budget_bytes()),
        (None, None) => None,
    };
    headroom_plot::MemoryLines { budget_mb: budget.map(mib), estimate_mb: estimate["estimate_mb"].as_f64() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_lines_take_the_planned_budget_then_the_preset_and_none_for_cpu() {
        let devices = headroom_plan::builtin_devices().expect("builtins");
        let nano = headroom_plan::find_device(&devices, "orin-nano-8").expect("preset").clone();
        let estimate = serde_json::json!({ "device": "orin-nano-8", "estimate_mb": 812.5 });
        let base = RunSpec::new("m.onnx".into(), "d/data.yaml".into());

        let cpu = memory_lines(&base, &estimate);
        assert_eq!(cpu, headroom_plot::MemoryLines { budget_mb: None, estimate_mb: Some(812.5) });

        let preset = RunSpec { device_preset: Some(nano.clone()), ..base.clone() };
        let expected = nano.budget_bytes() as f64 / 1048576.0;
        assert_eq!(memory_lines(&preset, &estimate).budget_mb, Some(expected));

        let choice = crate::spec::PlanChoice {
            device: nano.name.clone(),
            budget: 3 << 30,
            rung: "start".into(),
            estimate: 900 << 20,
        };
        let planned = RunSpec { plan: Some(choice), ..preset };
        assert_eq!(memory_lines(&planned, &estimate).budget_mb, Some(3072.0), "--plan auto's budget wins");

        let failed = serde_json::json!({ "device": "cpu", "error": "no estimate" });
        assert_eq!(memory_lines(&base, &failed), headroom_plot::MemoryLines::default());
    }
}

/// The budget `--plan auto` fits: `--budget` (None: the board preset's; `auto`; a size) less
/// `--reserve`; the board named on the command line (None or `auto`: detected) and the `--devices`
/// file, for the warning of a budget read on another machine.
#[derive(Debug, Clone, Default)]
pub struct BudgetAsk {
    /// `--budget`.
    pub budget: Option<String>,
    /// `--reserve`.
    pub reserve: String,
    /// `--board` as given.
    pub board: Option<String>,
    /// `--devices`.
    pub devices: Option<std::path::PathBuf>,
}

/// `headroom train --plan auto` (and the field loop's plan step, which runs `headroom plan` with
/// the same start): runs the fit ladder from the spec's configuration (its batch, 2 by default:
/// the batch the adaptation figures were measured at, and on the demo's 64 field images batch 16
/// recovered 15 % of the gap where batch 2 recovered 23 % — docs/BENCHMARKS.md "The deploy
/// gate") on the spec's board (else this board, detected) and sets batch, checkpointing, AMP, the
/// feature cache, the input size and the part to the first candidate that fits, recording the
/// choice in the spec.
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub fn plan_auto(spec: &mut RunSpec, ask: &BudgetAsk) -> crate::Result<()> {
    use headroom_plan::{DeviceChoice, format_size};

    use crate::spec::PlanChoice;

    if spec.device_preset.is_none() {
        spec.device_preset = Some(headroom_plan::resolve_board("auto", ask.devices.as_deref())?);
    }
    let cuda = crate::device::cuda_available();
    let (torch, preset) =
        crate::device::resolve_saved(&spec.device, spec.device_preset.as_ref(), cuda, false)?;
    let runs_on = torch.parse::<DeviceChoice>().map_err(crate::Error::Request)?.planned_on(&preset);
    let gpu = runs_on.is_gpu();
    let model = Model::load(&spec.model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let imgsz = spec.settings.imgsz[0];
    let mut start = Setup::start(&inspection, spec.part, Some(imgsz), spec.settings.batch)?;
    start.optimizer = spec.settings.optimizer;
    start.trunk = spec.trunk;
    start.amp = false;
    start.augment = spec.settings.augment.changes_pixels();
    if let Some(teacher) = &spec.teacher {
        start.teacher = Some(TeacherCost::of_file(teacher, start.imgsz)?);
    }
    let budget = headroom_plan::budget_on(
        (ask.budget.as_deref(), &ask.reserve),
        &preset,
        runs_on,
        (ask.board.as_deref(), ask.devices.as_deref()),
    )?;
    let mut planner = Planner::new(&model, &inspection, preset.runtime_bytes());
    if !preset.unified && gpu {
        planner = planner.discrete();
    }
    let found = headroom_plan::plan(&mut planner, &start, budget.bytes, gpu)?;
    let Some(chosen) = found.chosen.and_then(|i| found.candidates.get(i)) else {
        return Err(crate::Error::Request(format!(
            "--plan auto: nothing fits {} on {} ({}): {}",
            format_size(found.budget),
            preset.name,
            budget.source,
            found.advice.unwrap_or_default()
        )));
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
