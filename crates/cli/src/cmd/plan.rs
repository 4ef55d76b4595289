//! `headroom plan`: will training fit? The memory of each configuration of the fit ladder,
//! estimated from the model's graph, against the device's budget (docs/PLAN.md). Exit 1 when
//! nothing fits, naming the least budget that would.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use headroom_onnx::Trainable;
use headroom_plan::{DevicePreset, Optimizer, Plan, Planner, Setup, TrunkRuntime, format_size, parse_size};

use super::Outcome;

/// Arguments of `headroom plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The student, an Ultralytics ONNX detector export.
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// The device preset (configs/devices.toml): orin-agx-64, orin-agx-32, orin-nx-16, orin-nx-8,
    /// orin-nano-8, orin-nano-4, x86-cpu, gpu-8, or one of --devices; `auto`: the preset of this
    /// board (its /proc/device-tree/model and memory), else one made from its measured memory.
    #[arg(long, value_name = "NAME|auto")]
    pub device: String,
    #[command(flatten)]
    pub plan: PlanArgs,
    /// What the ladder starts training: `all`, `neck+head`, `head` or N (modules 0..N frozen); it
    /// freezes more when memory asks for it.
    #[arg(long, default_value = "all", value_name = "PART")]
    pub train: String,
    /// Input size the ladder starts from [default: the export's]; it steps down by ~20 % in
    /// multiples of the largest stride.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(32..=8192))]
    pub imgsz: Option<u32>,
    /// Batch the ladder starts from (it halves the batch first; accumulation keeps the nominal 64).
    #[arg(long, default_value_t = 16, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub batch: usize,
    /// Optimiser (AdamW keeps two moments, SGD one).
    #[arg(long, default_value = "adamw", value_parser = ["sgd", "adamw"])]
    pub optimizer: String,
    /// What runs the frozen trunk (as `headroom train --trunk`).
    #[arg(long, default_value = "ort", value_parser = ["ort", "torch"])]
    pub trunk: String,
    /// Objects per image the loss' assigner is sized for.
    #[arg(long, default_value_t = 16, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub objects: usize,
    /// Training images (sizes the feature cache's file, reported beside the peak: its pages are
    /// page cache the kernel can drop).
    #[arg(long, default_value_t = 500, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub images: usize,
    /// Print the plan as JSON on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also draw the memory of each candidate by component as a PNG bar chart here.
    #[arg(long, value_name = "FILE.png")]
    pub chart: Option<PathBuf>,
}

/// What the ladder starts from and the budget (shared with `headroom train --plan auto`).
#[derive(Debug, Clone, clap::Args)]
pub struct PlanArgs {
    /// Memory for training: the preset's (memory less its reserve) by default; `auto` reads what
    /// is free now (MemAvailable on unified memory, the GPU's free memory on a discrete one); or a
    /// size such as 3GiB, 512MiB. (`headroom train`: with --plan auto.)
    #[arg(long, value_name = "auto|SIZE", value_parser = budget_arg)]
    pub budget: Option<String>,
    /// Memory to leave for what else runs (the production inference engine during a field
    /// retrain), taken off the budget: a size such as 600MiB.
    #[arg(long, value_name = "SIZE", default_value = "0")]
    pub reserve: String,
    /// More device presets (the form of configs/devices.toml), read after the built-ins and
    /// /etc/headroom/devices.toml: a preset of the same name replaces theirs, a new one adds a
    /// device for --device NAME and --device auto.
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
}

/// `--budget`: `auto`, or a size of at least 1 MiB.
fn budget_arg(text: &str) -> Result<String, String> {
    if text == "auto" { Ok(text.to_string()) } else { super::provider_args::memory_size_arg(text) }
}

/// The preset `--device NAME|auto` names, from the built-ins, /etc/headroom/devices.toml and
/// `devices_file` (`--devices`). `auto` detects the board (`headroom_plan::detect`), logging
/// why, with a warning when no preset knows it.
pub fn resolve_device(name: &str, devices_file: Option<&Path>) -> anyhow::Result<DevicePreset> {
    let devices = headroom_plan::load_all(devices_file)?;
    if name != "auto" {
        return Ok(headroom_plan::find_device(&devices, name)?.clone());
    }
    let (model, mem) = headroom_plan::read_board();
    let found = headroom_plan::detect(&devices, model.as_deref(), mem)?;
    if found.known {
        tracing::info!("--device auto: {}", found.reason);
    } else {
        tracing::warn!("--device auto: {}", found.reason);
    }
    Ok(found.preset)
}

/// Runs `headroom plan`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    let trainable: Trainable =
        args.train.parse().map_err(|e| anyhow::anyhow!("--train {}: {e}", args.train))?;
    let model = headroom_onnx::Model::load(&args.model)?;
    #[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
    super::train::refuse_fp16(&args.model, &model)?;
    let inspection = headroom_onnx::inspect::inspect(&model)?;
    let device = resolve_device(&args.device, args.plan.devices.as_deref())?;
    let budget = budget(&args.plan, &device)?;
    let mut start = start_setup(&inspection, trainable, args.imgsz, args.batch)?;
    start.optimizer = if args.optimizer == "sgd" { Optimizer::Sgd } else { Optimizer::AdamW };
    start.trunk = if args.trunk == "torch" { TrunkRuntime::Torch } else { TrunkRuntime::Ort };
    start.objects = args.objects;
    start.images = args.images;
    let mut planner = Planner::new(&model, &inspection, device.runtime_bytes());
    if !device.unified {
        planner = planner.discrete();
    }
    let plan = headroom_plan::plan(&mut planner, &start, budget.bytes, device.gpu)?;
    if let Some(path) = &args.chart {
        let title = format!("{} on {}", file_name(&args.model), device.name);
        headroom_train::plan_chart::write_chart(&plan, &title, path)
            .with_context(|| format!("drawing {}", path.display()))?;
    }
    if args.json {
        let json = serde_json::json!({
            "model": args.model,
            "device": device,
            "budget_source": budget.source,
            "plan": plan,
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", table(&args.model, &device, &budget, &plan));
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

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The budget in bytes and where it came from.
pub struct Budget {
    /// Bytes for training.
    pub bytes: u64,
    /// How it was found.
    pub source: String,
}

/// `--budget` and `--reserve` where no budget is computed (`train` without `--plan auto`): checked
/// all the same (a typo is an error, not silence), and a warning says they change nothing.
#[cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(dead_code))]
pub fn check_unused_sizes(args: &PlanArgs) -> anyhow::Result<()> {
    let reserve = parse_size(&args.reserve).map_err(|e| anyhow::anyhow!("--reserve {e}"))?;
    if let Some(text) = args.budget.as_deref().filter(|t| *t != "auto") {
        parse_size(text).map_err(|e| anyhow::anyhow!("--budget {e}"))?;
    }
    if args.budget.is_some() || reserve > 0 {
        tracing::warn!("--budget and --reserve apply with --plan auto only: this run trains as given");
    }
    Ok(())
}

/// `--budget` and `--reserve` on `device`.
pub fn budget(args: &PlanArgs, device: &DevicePreset) -> anyhow::Result<Budget> {
    let reserve = parse_size(&args.reserve).map_err(|e| anyhow::anyhow!("--reserve {e}"))?;
    let (total, source) = match args.budget.as_deref() {
        None => (
            device.budget_bytes(),
            format!("preset: {} GiB less its reserve of {} GiB", device.memory_gib, device.reserve_gib),
        ),
        Some("auto") if device.unified => (mem_available()?, "MemAvailable (/proc/meminfo)".to_string()),
        Some("auto") => (gpu_free()?, "the GPU's free memory (nvidia-smi)".to_string()),
        Some(text) => {
            (parse_size(text).map_err(|e| anyhow::anyhow!("--budget {e}"))?, "--budget".to_string())
        }
    };
    anyhow::ensure!(
        reserve < total,
        "--reserve {} leaves nothing of the budget ({}, {source}): give a smaller --reserve",
        format_size(reserve),
        format_size(total)
    );
    let bytes = total - reserve;
    let source =
        if reserve > 0 { format!("{source}, less --reserve {}", format_size(reserve)) } else { source };
    Ok(Budget { bytes, source })
}

fn mem_available() -> anyhow::Result<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").context("--budget auto: reading /proc/meminfo")?;
    let kb = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .ok_or_else(|| {
            anyhow::anyhow!("--budget auto: /proc/meminfo has no MemAvailable; give --budget SIZE")
        })?;
    Ok(kb * 1024)
}

fn gpu_free() -> anyhow::Result<u64> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=memory.free", "--format=csv,noheader,nounits", "--id=0"])
        .output()
        .map_err(|e| {
            anyhow::anyhow!("--budget auto on a discrete GPU runs nvidia-smi: {e}; give --budget SIZE")
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mib: u64 = text.trim().parse().map_err(|_| {
        anyhow::anyhow!("--budget auto: nvidia-smi said `{}`; give --budget SIZE", text.trim())
    })?;
    Ok(mib << 20)
}

/// The configuration the ladder starts from.
pub fn start_setup(
    inspection: &headroom_onnx::inspect::Inspection,
    trainable: Trainable,
    imgsz: Option<u32>,
    batch: usize,
) -> anyhow::Result<Setup> {
    anyhow::ensure!((1..=256).contains(&batch), "--batch {batch} is not in [1, 256]");
    let [h, w] = inspection.inspected_size;
    let imgsz = match imgsz {
        Some(n) => [n, n],
        None => [h as u32, w as u32],
    };
    Ok(Setup { trainable, batch, imgsz, checkpoint: false, ..Setup::default() })
}

/// The flags of `headroom train` that run a candidate.
pub fn train_flags(setup: &Setup) -> String {
    let mut flags = format!("--train {} --batch {} --imgsz {}", setup.trainable, setup.batch, setup.imgsz[0]);
    flags = flags.replace("--train freeze=0", "--train all");
    if !setup.checkpoint {
        flags.push_str(" --no-checkpoint");
    }
    if setup.amp {
        flags.push_str(" --amp");
    }
    if setup.cache_features {
        flags.push_str(" --cache-features");
    }
    flags
}

fn mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / f64::from(1u32 << 20))
}

fn table(model: &Path, device: &DevicePreset, budget: &Budget, plan: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} on {} ({}{}): budget {} ({})",
        file_name(model),
        device.name,
        device.description,
        if device.unified { ", unified memory" } else { "" },
        format_size(plan.budget),
        budget.source
    );
    let _ = writeln!(
        s,
        "{:<16} {:>5} {:<10} {:<5} {:<4} {:<5} {:>5} {:>10} {:<4} {:>5} {:<6}",
        "rung", "batch", "train", "ckpt", "amp", "cache", "imgsz", "peak", "fits", "time", "risk"
    );
    let yes = |b: bool| if b { "yes" } else { "no" };
    for (i, c) in plan.candidates.iter().enumerate() {
        let e = &c.estimate;
        let _ = writeln!(
            s,
            "{:<16} {:>5} {:<10} {:<5} {:<4} {:<5} {:>5} {:>10} {:<4} {:>5.2} {:<6}{}",
            c.rung,
            e.setup.batch,
            e.setup.trainable.to_string().replace("freeze=0", "all"),
            yes(e.setup.checkpoint),
            yes(e.setup.amp),
            yes(e.setup.cache_features),
            e.setup.imgsz[0],
            format_size(e.peak),
            yes(c.fits),
            c.time,
            c.risk,
            if plan.chosen == Some(i) { "  <- chosen" } else { "" }
        );
    }
    let shown = plan.chosen.unwrap_or(plan.candidates.len().saturating_sub(1));
    if let Some(c) = plan.candidates.get(shown) {
        let parts: Vec<String> = c
            .estimate
            .components
            .at_peak()
            .iter()
            .filter(|(_, v)| *v > 0)
            .map(|(n, v)| format!("{n} {}", mib(*v)))
            .collect();
        let _ = writeln!(
            s,
            "{} `{}`, peak by component (MiB): {}",
            if plan.chosen.is_some() { "chosen" } else { "smallest" },
            c.rung,
            parts.join(", ")
        );
        let by_op: Vec<String> =
            c.estimate.saved_by_op.iter().take(6).map(|(op, v)| format!("{op} {}", mib(*v))).collect();
        if !by_op.is_empty() {
            let _ = writeln!(s, "kept for backward by op (plain backward, MiB): {}", by_op.join(", "));
        }
        if plan.chosen.is_some() {
            let _ = writeln!(
                s,
                "train with: headroom train --model {} {}",
                model.display(),
                train_flags(&c.estimate.setup)
            );
        }
    }
    s
}
