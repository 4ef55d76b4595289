//! The memory planner's view of a run (`headroom-plan`): the [`Setup`] a spec trains with, and the
//! planner's estimate of it on a device preset, recorded in `results.json` beside the run's
//! measured peak and drawn on `memory.png` with the budget ([`memory_lines`]).

use std::collections::BTreeMap;

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
    frame: u64,
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
        prefetch: false,
        frame,
    }
}

/// Where a fit ladder starts, as asked: `headroom plan`'s flags, or a run's spec (`--plan auto`).
/// Both build their first [`Setup`] here ([`LadderStart::setup`]) and their planner with
/// [`Planner::on`].
#[derive(Debug, Clone)]
pub struct LadderStart<'a> {
    /// What trains.
    pub part: Trainable,
    /// The input size (`None`: the export's).
    pub imgsz: Option<u32>,
    /// Images per pass.
    pub batch: usize,
    /// Checkpointed from the start (`headroom plan`, as train's default) or left to the ladder
    /// (`--plan auto` starts without: docs/PLAN.md).
    pub checkpoint: bool,
    /// The optimiser.
    pub optimizer: headroom_plan::Optimizer,
    /// What runs the frozen trunk.
    pub trunk: TrunkRuntime,
    /// Augmentation that changes the trunk's input pixels.
    pub augment: bool,
    /// The run's data.yaml files (their largest frame counts: [`frame_of_data`]).
    pub data: Vec<&'a std::path::Path>,
    /// A dense-distillation teacher, whose weights, forward and outputs count.
    pub teacher: Option<&'a std::path::Path>,
}

impl LadderStart<'_> {
    /// The ladder's first configuration for a model inspected as `inspection`.
    pub fn setup(&self, inspection: &Inspection) -> crate::Result<Setup> {
        let mut start = Setup::start(inspection, self.part, self.imgsz, self.batch)?;
        start.checkpoint = self.checkpoint;
        start.optimizer = self.optimizer;
        start.trunk = self.trunk;
        start.augment = self.augment;
        start.frame = frame_of_data(self.data.iter().copied());
        if let Some(teacher) = self.teacher {
            start.teacher = Some(TeacherCost::of_file(teacher, start.imgsz)?);
        }
        Ok(start)
    }
}

/// [`Setup::frame`] of data.yaml files (train and val), before they are loaded: every file's
/// header is read. A data.yaml that cannot be read counts nothing (loading it names the fault).
pub fn frame_of_data<P: AsRef<std::path::Path>>(data: impl IntoIterator<Item = P>) -> u64 {
    data.into_iter()
        .filter_map(|path| headroom_core::dataset::DataConfig::load(path.as_ref()).ok())
        .map(|config| headroom_core::dataset::largest_frame_cost(&config))
        .max()
        .unwrap_or(0)
}

/// [`Setup::frame`] of loaded splits: the read cost of their largest frames (every record of the
/// largest pixel count, whose headers are read again: the format and orientation set the cost).
pub fn frame_of<'a>(splits: impl IntoIterator<Item = &'a [ImageRecord]>) -> u64 {
    let records: Vec<&ImageRecord> = splits.into_iter().flatten().collect();
    let pixels = |r: &ImageRecord| u64::from(r.width) * u64::from(r.height);
    let Some(most) = records.iter().map(|r| pixels(r)).max() else { return 0 };
    headroom_core::imageio::largest_read_cost(
        records.iter().filter(|r| pixels(r) == most).map(|r| r.image.as_path()),
    )
}

/// The planner's estimate of a run, as `results.json` records it (`planner`), and its error against
/// the run's measured peaks once the run ends.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlannerCheck {
    /// The device preset estimated for.
    pub device: String,
    /// The estimated peak, MiB (none when the planner could not estimate: `error` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate_mb: Option<f64>,
    /// Its training part (without the runtime's fixed cost), MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training_estimate_mb: Option<f64>,
    /// The components at the estimated peak, MiB.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub components_mb: BTreeMap<String, f64>,
    /// Why there is no estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The estimate's error against the peak resident set, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_pct_vs_peak_rss: Option<f64>,
    /// Its error against the peak counted against the budget (`peak_mb`), percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_pct_vs_peak: Option<f64>,
}

impl PlannerCheck {
    /// The planner's estimate of a run's configuration on `preset`, training on its GPU (`gpu`)
    /// or its CPU.
    pub fn estimate(
        model: &Model,
        inspection: &Inspection,
        preset: &DevicePreset,
        setup: &Setup,
        gpu: bool,
    ) -> PlannerCheck {
        let runs_on = if gpu { headroom_plan::RunsOn::Cuda(0) } else { headroom_plan::RunsOn::Cpu };
        let mut planner = Planner::on(model, inspection, preset, runs_on);
        let device = preset.name.clone();
        match planner.estimate(setup) {
            Ok(e) => PlannerCheck {
                device,
                estimate_mb: Some(mb(e.peak)),
                training_estimate_mb: Some(mb(e.components.training_peak())),
                components_mb: e.components.at_peak().iter().map(|(n, v)| (n.to_string(), mb(*v))).collect(),
                ..PlannerCheck::default()
            },
            Err(e) => PlannerCheck { device, error: Some(e.to_string()), ..PlannerCheck::default() },
        }
    }

    /// The estimate's error against the measured peaks (MiB), rounded to 0.1 %.
    pub fn check_against(&mut self, peak_rss_mb: f64, peak_mb: f64) {
        if let Some(estimate) = self.estimate_mb {
            let error = |peak: f64| ((estimate - peak) / peak * 1000.0).round() / 10.0;
            self.error_pct_vs_peak_rss = Some(error(peak_rss_mb));
            self.error_pct_vs_peak = Some(error(peak_mb));
        }
    }
}

/// Bytes as MiB, rounded to 0.1.
fn mb(bytes: u64) -> f64 {
    (bytes as f64 / f64::from(1u32 << 20) * 10.0).round() / 10.0
}

/// What `memory.png` shows beside the measured peak, in MiB like `peak_rss_mb`: the budget the run
/// was planned for (`--plan auto`), else that of the device preset it names (none for `cpu`,
/// `cuda`: no budget was given), and the planner's estimate for this run when it has one.
pub fn memory_lines(spec: &RunSpec, estimate: &PlannerCheck) -> headroom_plot::MemoryLines {
    let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
    let budget = match (&spec.plan, &spec.device_preset) {
        (Some(plan), _) => Some(plan.budget),
        (None, Some(preset)) => Some(preset.budget_bytes()),
        (None, None) => None,
    };
    headroom_plot::MemoryLines { budget_mb: budget.map(mib), estimate_mb: estimate.estimate_mb }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_lines_take_the_planned_budget_then_the_preset_and_none_for_cpu() {
        let devices = headroom_plan::builtin_devices().expect("builtins");
        let nano = headroom_plan::find_device(&devices, "orin-nano-8").expect("preset").clone();
        let estimate = PlannerCheck {
            device: "orin-nano-8".into(),
            estimate_mb: Some(812.5),
            ..PlannerCheck::default()
        };
        let base = RunSpec::new("m.onnx".into(), "d/data.yaml".into());

        let cpu = memory_lines(&base, &estimate);
        assert_eq!(cpu, headroom_plot::MemoryLines { budget_mb: None, estimate_mb: Some(812.5) });

        let preset = RunSpec { device_preset: Some(nano.clone()), ..base.clone() };
        let expected = nano.budget_bytes() as f64 / 1048576.0;
        assert_eq!(memory_lines(&preset, &estimate).budget_mb, Some(expected));

        let choice = crate::spec::PlanChoice {
            device: nano.name.clone(),
            budget: 3 << 30,
            rung: headroom_plan::Rung::Start,
            estimate: 900 << 20,
            batches: Vec::new(),
        };
        let planned = RunSpec { plan: Some(choice), ..preset };
        assert_eq!(memory_lines(&planned, &estimate).budget_mb, Some(3072.0), "--plan auto's budget wins");

        let failed = PlannerCheck {
            device: "cpu".into(),
            error: Some("no estimate".into()),
            ..PlannerCheck::default()
        };
        assert_eq!(memory_lines(&base, &failed), headroom_plot::MemoryLines::default());
    }

    /// The check writes the keys results.json always had, and an estimate's error against the peaks.
    #[test]
    fn a_planner_check_keeps_results_json_keys_and_rounds_its_error() {
        let mut check = PlannerCheck {
            device: "x86-cpu".into(),
            estimate_mb: Some(354.0),
            training_estimate_mb: Some(300.0),
            components_mb: [("weights".to_string(), 12.5)].into(),
            ..PlannerCheck::default()
        };
        check.check_against(416.0, 400.0);
        assert_eq!((check.error_pct_vs_peak_rss, check.error_pct_vs_peak), (Some(-14.9), Some(-11.5)));
        let json = serde_json::to_value(&check).expect("json");
        assert_eq!(json["estimate_mb"], 354.0);
        assert_eq!(json["components_mb"]["weights"], 12.5);
        assert!(json.get("error").is_none(), "{json}");
        let back: PlannerCheck = serde_json::from_value(json).expect("read back");
        assert_eq!(back, check);

        let mut failed =
            PlannerCheck { device: "cpu".into(), error: Some("no".into()), ..PlannerCheck::default() };
        failed.check_against(416.0, 400.0);
        assert_eq!(failed.error_pct_vs_peak, None, "no estimate, no error figure");
        assert_eq!(
            serde_json::to_value(&failed).expect("json"),
            serde_json::json!({"device": "cpu", "error": "no"})
        );
    }
}

/// The budget `--plan auto` fits: `--budget` (None: the board preset's; `auto`; a size) less
/// `--reserve`; the board named on the command line (None or `auto`: detected) and the `--devices`
/// file, for the warning of a budget read on another machine.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetAsk {
    /// `--budget`.
    pub budget: Option<headroom_plan::BudgetSize>,
    /// `--reserve`.
    pub reserve: headroom_plan::Bytes,
    /// `--board` as given.
    pub board: Option<headroom_plan::Board>,
    /// `--devices`.
    pub devices: Option<std::path::PathBuf>,
}

/// `headroom train --plan auto` (and the field loop's plan step, which runs `headroom plan` with
/// the same start): runs the fit ladder from the spec's configuration (its batch, 2 by default:
/// the batch the adaptation figures were measured at) on the spec's board (else this board,
/// detected) and sets batch, checkpointing, AMP, the feature cache, the input size and the part to
/// the first candidate that fits, recording the choice in the spec. When that is the configuration
/// asked for, the larger batches within the nominal batch that fit too are listed in the choice
/// (`batches`): the run times each before its first step and trains with the fastest per image
/// (accumulation keeps the nominal batch, so the optimiser steps stay the same; docs/PLAN.md "A
/// larger batch when it is faster").
#[cfg(all(feature = "libtorch", feature = "onnxruntime"))]
pub fn plan_auto(spec: &mut RunSpec, ask: &BudgetAsk) -> crate::Result<()> {
    use headroom_plan::format_size;

    use crate::spec::{BatchTiming, PlanChoice};

    if spec.device_preset.is_none() {
        spec.device_preset = Some(
            headroom_plan::System::host()
                .resolve_board(&headroom_plan::Board::Auto, ask.devices.as_deref())?,
        );
    }
    let cuda = crate::device::cuda_available();
    let (torch, preset) =
        crate::device::resolve_saved(&spec.device, spec.device_preset.as_ref(), cuda, false)?;
    let runs_on = torch.choice().planned_on(&preset);
    let gpu = runs_on.is_gpu();
    let model = Model::load(&spec.model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let start = LadderStart {
        part: spec.part,
        imgsz: Some(spec.settings.imgsz[0]),
        batch: spec.settings.batch,
        checkpoint: false,
        optimizer: spec.settings.optimizer,
        trunk: spec.trunk,
        augment: spec.settings.augment.changes_pixels(),
        data: std::iter::once(&spec.data).chain(&spec.replay).map(|p| p.as_path()).collect(),
        teacher: spec.teacher.as_deref(),
    }
    .setup(&inspection)?;
    let budget = headroom_plan::budget_on(
        (ask.budget, ask.reserve),
        &preset,
        runs_on,
        (ask.board.as_ref(), ask.devices.as_deref(), &headroom_plan::System::host()),
    )?;
    let mut planner = Planner::on(&model, &inspection, &preset, runs_on);
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
    // Room to spare (the configuration asked for fits as it is): larger batches that fit too are
    // measured at the start of the run, and the fastest per image trains.
    let larger = if chosen.rung == headroom_plan::Rung::Start {
        headroom_plan::larger_batches(&mut planner, setup, spec.settings.nbs, found.budget)?
    } else {
        Vec::new()
    };
    let batches: Vec<BatchTiming> = if larger.is_empty() {
        Vec::new()
    } else {
        std::iter::once(&chosen.estimate)
            .chain(&larger)
            .map(|e| BatchTiming {
                batch: e.setup.batch,
                estimate: e.peak,
                seconds_per_image: None,
                skipped: None,
            })
            .collect()
    };
    tracing::info!(
        "--plan auto on {} (budget {}): rung `{}`, estimated peak {}: {}",
        preset.name,
        format_size(found.budget),
        chosen.rung,
        format_size(chosen.estimate.peak),
        setup
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
        rung: chosen.rung,
        estimate: chosen.estimate.peak,
        batches,
    });
    if let Some(plan) = spec.plan.as_ref().filter(|p| p.timing_pending()) {
        let list: Vec<String> = plan
            .batches
            .iter()
            .skip(1)
            .map(|b| format!("{} ({})", b.batch, format_size(b.estimate)))
            .collect();
        tracing::info!(
            "--plan auto: larger batches that fit too: {}; the run times each against batch {} and trains with the fastest per image",
            list.join(", "),
            setup.batch
        );
    }
    Ok(())
}
