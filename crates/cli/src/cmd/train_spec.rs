//! `headroom train`'s flags as a [`TrainJob`] around a [`RunRequest`] (`headroom_run::request`,
//! which resolves it into the run's spec): each flag is an `Option`, `None` when not given. A new
//! run takes the flags given over `--preset`'s settings over headroom train's defaults
//! ([`RunRequest::defaults`], which `--help` shows); a resumed run only the flags given, which it
//! checks against its saved settings.

use std::path::PathBuf;

use headroom_run::job::{TrainJob, TrainRun};
use headroom_run::planner::BudgetAsk;
use headroom_run::request::RunRequest;

use super::train_args::{Args, absolute};

/// The flags as a job: a resume (`--resume`) with the flags given, else a new run.
pub fn job_from_args(args: &Args) -> anyhow::Result<TrainJob> {
    let run = match resume_dir(args)? {
        Some(dir) => TrainRun::Resume { dir, request: request_from_args(args, true)? },
        None => TrainRun::New {
            request: new_run_request(args)?,
            project: args.project.clone(),
            name: args.name.clone(),
        },
    };
    Ok(TrainJob {
        run,
        budget: BudgetAsk {
            budget: args.budget.budget,
            reserve: args.budget.reserve,
            board: args.board.board.clone(),
            devices: args.board.devices.clone(),
        },
        threads: args.threads,
        allocator: args.allocator,
        prefetch: args.prefetch,
        profile: args.profile.clone().map(|path| (path, args.profile_passes as u64)),
        json: args.json,
    })
}

/// The run folder that `--resume` names: RUN_DIR, or PROJECT/NAME.
fn resume_dir(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    match &args.resume {
        None => Ok(None),
        Some(Some(dir)) => Ok(Some(dir.clone())),
        Some(None) => match &args.name {
            Some(name) => Ok(Some(args.project.join(name))),
            None => anyhow::bail!("--resume: name the run, --resume RUN_DIR (or --name NAME with --project)"),
        },
    }
}

/// The flags given, as a request (`resuming`: of a saved run, where `--devices` needs `--board`).
pub fn request_from_args(args: &Args, resuming: bool) -> anyhow::Result<RunRequest> {
    let board = match &args.board.board {
        Some(board) => {
            Some(headroom_plan::System::host().resolve_board(board, args.board.devices.as_deref())?)
        }
        None if resuming && args.board.devices.is_some() => {
            anyhow::bail!("--devices without --board: name the board the file adds")
        }
        None => None,
    };
    let given = |on: bool| on.then_some(true);
    Ok(RunRequest {
        model: args.model.as_deref().map(|m| absolute("--model", m)).transpose()?,
        data: args.data.as_deref().map(|d| absolute("--data", d)).transpose()?,
        part: args.freeze.map(headroom_onnx::Trainable::Freeze).or(args.train),
        device: args.device.map(headroom_run::device::torch_text),
        board,
        plan: args.plan,
        replay: args.replay.as_deref().map(|p| absolute("--replay", p)).transpose()?,
        replay_fraction: args.replay_fraction,
        remap: args.remap.clone(),
        trunk: args.trunk,
        cache_features: given(args.cache_features),
        memory_cap: args.memory_cap,
        memory_cap_after: args.memory_cap_after,
        renorm: args.renorm,
        qat: args.qat.as_deref().map(|p| absolute("--qat", p)).transpose()?,
        teacher: args.teacher.as_deref().map(|p| absolute("--teacher", p)).transpose()?,
        patience: args.patience,
        time_hours: args.time,
        epochs: args.epochs,
        batch: args.batch,
        nbs: args.nbs,
        optimizer: args.optimizer.map(|o| o.chosen()),
        lr0: args.lr0,
        cos_lr: given(args.cos_lr),
        max_grad_norm: args.max_grad_norm,
        flip: args.flip,
        kd: args.kd,
        dense_kd: args.dense_kd,
        ignore_band: args.ignore_band.map(Some),
        anchor: args.anchor,
        hsv: args.hsv,
        translate: args.translate,
        scale: args.scale,
        mosaic: args.mosaic,
        checkpoint: args.no_checkpoint.then_some(false),
        amp: given(args.amp),
        imgsz: args.imgsz.map(Some),
        save_period: args.save_period,
        save_interval: args.save_interval,
        seed: args.seed,
    })
}

/// A new run's request: the flags given, over `--preset`'s settings when one is named, over
/// headroom train's defaults.
pub fn new_run_request(args: &Args) -> anyhow::Result<RunRequest> {
    let mut request = request_from_args(args, false)?;
    if let Some(spec) = &args.preset {
        let (name, preset) = headroom_run::preset::load(spec)?;
        anyhow::ensure!(
            !preset.distill || args.teacher.is_some(),
            "--preset {name} distils from the labelling teacher (distill = true): give --teacher T.onnx"
        );
        preset.apply(&mut request, None);
        tracing::info!("preset {name}: {}", preset.description);
        if args.plan.is_none() && preset.plan == Some(headroom_plan::PlanMode::Auto) {
            tracing::info!(
                "preset {name} plans the run (plan = \"auto\"): the fastest configuration that fits this board; --plan off trains as given"
            );
        }
    }
    // A device not given stays unset: the job's `auto` (TrainJob::carry_out).
    Ok(request.or(RunRequest::defaults()))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        train: Args,
    }

    /// `--help` says each default in words ([default: ...]); the defaults a new run takes are the
    /// library's: the two agree, flag by flag.
    #[test]
    fn the_defaults_help_shows_are_the_librarys() {
        let d = RunRequest::defaults();
        let augment = headroom_train::augment::AugmentConfig::ultralytics();
        let num = |v: f64| format!("{v}");
        let expected: Vec<(&str, String)> = vec![
            ("train", "all".into()),
            ("epochs", d.epochs.expect("epochs").to_string()),
            ("patience", d.patience.expect("patience").to_string()),
            ("batch", headroom_train::config::TrainConfig::default().batch.to_string()),
            ("nbs", d.nbs.expect("nbs").to_string()),
            ("optimizer", "auto".into()),
            ("max-grad-norm", num(d.max_grad_norm.expect("clip"))),
            ("kd", num(d.kd.expect("kd"))),
            ("dense-kd", num(d.dense_kd.expect("dense kd"))),
            ("anchor", num(d.anchor.expect("anchor"))),
            ("flip", num(d.flip.expect("flip"))),
            ("hsv", format!("{},{},{}", augment.hsv_h, augment.hsv_s, augment.hsv_v)),
            ("translate", augment.translate.to_string()),
            ("scale", augment.scale.to_string()),
            ("mosaic", augment.mosaic.to_string()),
            ("device", "auto".into()),
            ("renorm", d.renorm.expect("renorm").to_string()),
            ("trunk", "ort".into()),
            ("save-period", d.save_period.expect("period").to_string()),
            ("save-interval", num(d.save_interval.expect("interval"))),
            ("replay-fraction", num(d.replay_fraction.expect("fraction"))),
            ("seed", d.seed.expect("seed").to_string()),
        ];
        assert_eq!(d.part, Some(headroom_run::request::DEFAULT_PART));
        assert_eq!(d.trunk, Some(headroom_plan::TrunkRuntime::Ort));
        assert_eq!(d.optimizer, Some(None), "auto");
        let command = Cli::command();
        for (flag, default) in expected {
            let arg = command.get_arguments().find(|a| a.get_long() == Some(flag)).expect(flag);
            let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
            let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
            // clap drops a one-paragraph help's final full stop.
            assert!(
                help.trim_end_matches('.').ends_with(&format!("[default: {default}]")),
                "--{flag}: `{help}`"
            );
        }
    }

    /// Nothing given: nothing asked (a resumed run keeps its own); a new run takes the defaults.
    #[test]
    fn only_the_flags_given_are_asked_for() {
        use clap::Parser as _;
        let args = Cli::parse_from(["headroom", "--model", "m.onnx", "--data", "d.yaml"]).train;
        let asked = request_from_args(&args, true).expect("a request");
        assert_eq!(
            asked,
            RunRequest { model: asked.model.clone(), data: asked.data.clone(), ..RunRequest::default() }
        );
        let new = new_run_request(&args).expect("a new run");
        assert_eq!((new.epochs, new.batch, new.hsv, new.mosaic), (Some(30), None, None, None));
        let given =
            Cli::parse_from(["headroom", "--model", "m", "--data", "d", "--epochs", "5", "--no-checkpoint"])
                .train;
        let asked = request_from_args(&given, true).expect("a request");
        assert_eq!((asked.epochs, asked.checkpoint, asked.seed), (Some(5), Some(false), None));
        assert_eq!(new.plan, Some(headroom_plan::PlanMode::Off), "a new run trains as given by default");
    }

    /// A preset's `plan` key plans a new run unless `--plan` says otherwise.
    #[test]
    fn the_preset_plans_unless_the_command_line_says() {
        use clap::Parser as _;
        use headroom_plan::PlanMode;
        let base = ["headroom", "--model", "m.onnx", "--data", "d.yaml", "--teacher", "t.onnx"];
        let plan_of = |extra: &[&str]| {
            let args = Cli::parse_from([&base[..], extra].concat()).train;
            new_run_request(&args).expect("a new run").plan
        };
        assert_eq!(plan_of(&["--preset", "field-accurate"]), Some(PlanMode::Auto));
        assert_eq!(plan_of(&["--preset", "field-accurate", "--plan", "off"]), Some(PlanMode::Off));
        assert_eq!(plan_of(&["--preset", "field-quick"]), Some(PlanMode::Off));
        assert_eq!(plan_of(&["--preset", "field-quick", "--plan", "auto"]), Some(PlanMode::Auto));
    }
}
