//! `headroom plan`: will training fit? The memory of each configuration of the fit ladder,
//! estimated from the model's graph, against the device's budget (docs/PLAN.md). Exit 1 when
//! nothing fits, naming the least budget that would.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use headroom_onnx::Trainable;
use headroom_plan::{Budget, DevicePreset, Plan, Planner, Setup, format_size};

use super::Outcome;
use super::device_arg::{BoardArgs, DEVICE_VALUES, device_arg};
use super::train_shared::{DEFAULT_BATCH, DEFAULT_PART, OptimizerArg, part_arg};
use headroom_plan::TrunkRuntime;
use headroom_plan::{DeviceChoice, RunsOn};

/// Arguments of `headroom plan`. The ladder starts from what `headroom train` does by default
/// (the same constants), so its first rung is the run a user gets.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The student, an Ultralytics ONNX detector export.
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// Where training will run, which decides the memory counted: cuda or cuda:N (the GPU's
    /// memory on a discrete GPU; the one pool on unified memory; AMP is a rung), cpu (the CPU's
    /// memory; no AMP rung); auto: the board's GPU when it has one, else cpu.
    #[arg(long, default_value = "auto", value_name = DEVICE_VALUES, value_parser = device_arg)]
    pub device: DeviceChoice,
    /// The board (`--board`, default auto) and more presets (`--devices`).
    #[command(flatten)]
    pub board: BoardArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// What the ladder starts training (as `headroom train --train`): `all`, `neck+head`, `head`
    /// or N (modules 0..N frozen); it freezes more when memory asks for it.
    #[arg(long, default_value = DEFAULT_PART, value_name = "PART", value_parser = part_arg)]
    pub train: Trainable,
    /// Input size the ladder starts from [default: the export's]; it steps down by ~20 % in
    /// multiples of the largest stride.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(32..=8192))]
    pub imgsz: Option<u32>,
    /// Batch the ladder starts from (as `headroom train --batch`; it halves the batch first;
    /// accumulation keeps the nominal batch).
    #[arg(long, default_value_t = DEFAULT_BATCH, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub batch: usize,
    /// Start with every activation kept for backward (as `headroom train --no-checkpoint`);
    /// the ladder turns checkpointing on when memory asks for it.
    #[arg(long)]
    pub no_checkpoint: bool,
    /// Optimiser, as `headroom train --optimizer` (auto is AdamW: two moments; SGD keeps one).
    #[arg(long, value_enum, default_value_t = OptimizerArg::Auto)]
    pub optimizer: OptimizerArg,
    /// What runs the frozen trunk (as `headroom train --trunk`).
    #[arg(long, value_enum, default_value_t = TrunkRuntime::Ort)]
    pub trunk: TrunkRuntime,
    /// Objects per image the loss' assigner is sized for.
    #[arg(long, default_value_t = 16, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub objects: usize,
    /// Training images (sizes the feature cache's file, reported beside the peak: its pages are
    /// page cache the kernel can drop).
    #[arg(long, default_value_t = 500, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub images: usize,
    /// The data the run trains on (its data.yaml, as `headroom train --data`): reading its largest
    /// frame counts (every image's header is read); without it no frame counts.
    #[arg(long, value_name = "DATA.yaml")]
    pub data: Option<PathBuf>,
    /// A dense-distillation teacher (as `headroom train --teacher`): its weights, its forward on
    /// each batch and its outputs count; no rung caches features (the teacher needs the images).
    #[arg(long, value_name = "T.onnx")]
    pub teacher: Option<PathBuf>,
    /// Plan a run without augmentation (`headroom train` augments by default: mosaic, scale,
    /// translate, HSV); only then is the feature cache a rung.
    #[arg(long)]
    pub no_augment: bool,
    /// Print the plan as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the memory of each candidate by component as a PNG bar chart here.
    #[arg(long, value_name = "FILE.png")]
    pub chart: Option<PathBuf>,
}

/// The budget (shared with `headroom train --plan auto`).
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Memory for training: the board preset's (memory less its reserve) by default; `auto` reads
    /// what is free now on this machine (MemAvailable on unified memory or with --device cpu, the
    /// GPU's free memory on a discrete one; a warning says so when this machine is not --board);
    /// or a size such as 3GiB, 512MiB. (`headroom train`: with --plan auto.)
    #[arg(long, value_name = "auto|SIZE")]
    pub budget: Option<headroom_plan::BudgetSize>,
    /// Memory to leave for what else runs (the production inference engine during a field
    /// retrain), taken off the budget: a size such as 600MiB.
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub reserve: headroom_plan::Bytes,
}

/// Runs `headroom plan`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let model = headroom_onnx::Model::load(&args.model)?;
    headroom_run::model_checks::refuse_fp16(&args.model, &model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let device = headroom_plan::System::host().resolve_board(
        args.board.board.as_ref().unwrap_or(&headroom_plan::Board::Auto),
        args.board.devices.as_deref(),
    )?;
    let runs_on = args.device.planned_on(&device);
    let budget = budget(&args.plan, &device, runs_on, &args.board)?;
    if let Some(data) = &args.data {
        // Its faults (a missing file, a bad key) are named here; loading it to train names the rest.
        headroom_core::dataset::DataConfig::load(data)?;
    }
    let mut start = headroom_run::planner::LadderStart {
        part: args.train,
        imgsz: args.imgsz,
        batch: args.batch,
        checkpoint: !args.no_checkpoint,
        optimizer: args.optimizer.planned(),
        trunk: args.trunk,
        augment: !args.no_augment,
        data: args.data.iter().map(PathBuf::as_path).collect(),
        teacher: args.teacher.as_deref(),
    }
    .setup(&inspection)?;
    start.objects = args.objects;
    start.images = args.images;
    let mut planner = Planner::on(&model, &inspection, &device, runs_on);
    let plan = headroom_plan::plan(&mut planner, &start, budget.bytes, runs_on.is_gpu())?;
    if let Some(path) = &args.chart {
        let title = format!("{} on {}", file_name(&args.model), device.name);
        headroom_plot::write_plan_chart(path, &plan_chart(&plan, title))
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    if args.json {
        let json = serde_json::json!({
            "model": args.model,
            "board": device,
            "device": runs_on.to_string(),
            "budget_source": budget.source,
            "plan": plan,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", headroom_plan::ladder::table(&args.model, (&device, runs_on), &budget, &plan));
        if let Some(chosen) = plan.chosen.and_then(|i| plan.candidates.get(i)) {
            println!(
                "train with: headroom train --model {} {}",
                args.model.display(),
                train_flags(&chosen.estimate.setup)
            );
        }
    }
    match plan.chosen {
        Some(_) => Ok(Outcome::Success),
        None => {
            eprintln!("error: {}", plan.advice.clone().unwrap_or_default());
            eprintln!(
                "  the least budget that fits a rung: {} (this one: {})",
                format_size(plan.minimum),
                format_size(plan.budget)
            );
            Ok(Outcome::CheckFailed)
        }
    }
}

/// The flags of `headroom train` that run `setup`.
fn train_flags(setup: &Setup) -> String {
    let part = match setup.trainable {
        Trainable::Freeze(0) => "all".to_string(),
        other => other.to_string(),
    };
    let mut flags = format!("--train {part} --batch {} --imgsz {}", setup.batch, setup.imgsz[0]);
    if !setup.checkpoint {
        flags.push_str(" --no-checkpoint");
    }
    if setup.amp {
        flags.push_str(" --amp");
    }
    if setup.cache_features {
        // It turns train's default augmentation off itself.
        flags.push_str(" --cache-features");
    } else if !setup.augment {
        flags.push_str(" --mosaic 0 --scale 0 --translate 0 --hsv 0,0,0");
    }
    flags
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// `--budget` and `--reserve` on `board`, for training on `device` ([`headroom_plan::budget_on`]:
/// `--budget auto` reads this machine, with a warning when `--board` named another one).
pub fn budget(
    args: &PlanArgs,
    board: &DevicePreset,
    device: RunsOn,
    given: &BoardArgs,
) -> anyhow::Result<Budget> {
    let named = (given.board.as_ref(), given.devices.as_deref(), &headroom_plan::System::host());
    Ok(headroom_plan::budget_on((args.budget, args.reserve), board, device, named)?)
}

/// `plan` as [`headroom_plot::write_plan_chart`] draws it: every size in MiB.
fn plan_chart(plan: &Plan, title: String) -> headroom_plot::PlanChart {
    let mib = |bytes: u64| bytes as f64 / f64::from(1u32 << 20);
    let rungs = plan
        .candidates
        .iter()
        .map(|c| headroom_plot::PlanRung {
            label: c.rung.to_string(),
            components: c
                .estimate
                .components
                .at_peak()
                .into_iter()
                .map(|(name, bytes)| (name.to_string(), mib(bytes)))
                .collect(),
        })
        .collect();
    headroom_plot::PlanChart { title, budget_mib: mib(plan.budget), rungs, chosen: plan.chosen }
}
