//! `headroom train`'s flags as a [`RunRequest`] (`headroom_run::request`, which resolves it into
//! the run's spec): for a new run every flag, with clap's defaults, except `--batch` and the
//! augmentation flags, which count only when given (their defaults are derived: the batch the
//! export allows, augmentation off with `--cache-features`); on resume only the flags given.

use headroom_onnx::Trainable;
use headroom_run::request::RunRequest;

use super::train_args::{Args, absolute, hsv_gains};

/// The request the command line makes (`resuming`: of a saved run, only the flags given).
pub fn request_from_args(args: &Args, resuming: bool) -> anyhow::Result<RunRequest> {
    flags_request(args, resuming, resuming)
}

/// A new run's request: the flags given, over `--preset`'s settings when one is named, over the
/// flags' defaults.
pub fn new_run_request(args: &Args) -> anyhow::Result<RunRequest> {
    let all = flags_request(args, false, false)?;
    let Some(spec) = &args.preset else { return Ok(all) };
    let (name, preset) = headroom_field::preset::load(spec)?;
    anyhow::ensure!(
        !preset.distill || args.teacher.is_some(),
        "--preset {name} distils from the labelling teacher (distill = true): give --teacher T.onnx"
    );
    let mut request = flags_request(args, true, false)?;
    preset.apply(&mut request, None);
    tracing::info!("preset {name}: {}", preset.description);
    Ok(request.or(all))
}

/// The flags as a request: every flag (with clap's defaults) or, `only_given`, the flags given.
fn flags_request(args: &Args, only_given: bool, resuming: bool) -> anyhow::Result<RunRequest> {
    let explicit = |id: &str| args.given.iter().any(|g| g == id);
    let given = |id: &str| !only_given || explicit(id);
    let mut r = RunRequest {
        model: args.model.as_deref().map(|m| absolute("--model", m)).transpose()?,
        data: args.data.as_deref().map(|d| absolute("--data", d)).transpose()?,
        ..RunRequest::default()
    };
    if given("train") || given("freeze") {
        r.part = Some(match args.freeze {
            Some(n) => Trainable::Freeze(n),
            None => args.train,
        });
    }
    if given("device") {
        r.device = Some(headroom_run::device::torch_text(args.device));
    }
    if given("board") || given("devices") {
        r.board = match args.board.board.as_deref() {
            Some(name) => Some(headroom_plan::resolve_board(name, args.board.devices.as_deref())?),
            None if !resuming => None,
            None => anyhow::bail!("--devices without --board: name the board the file adds"),
        };
    }
    if given("replay") {
        r.replay = args.replay.as_deref().map(|p| absolute("--replay", p)).transpose()?;
    }
    if given("teacher") {
        r.teacher = args.teacher.as_deref().map(|p| absolute("--teacher", p)).transpose()?;
    }
    r.replay_fraction = given("replay_fraction").then_some(args.replay_fraction);
    r.remap = if given("remap") { args.remap.clone() } else { None };
    r.trunk = given("trunk").then_some(args.trunk.into());
    r.cache_features = given("cache_features").then_some(args.cache_features);
    r.memory_cap = if given("memory_cap") { args.memory_cap.clone() } else { None };
    r.memory_cap_after = given("memory_cap_after").then_some(args.memory_cap_after);
    r.renorm = given("renorm").then_some(args.renorm);
    r.patience = given("patience").then_some(args.patience);
    r.time_hours = given("time").then_some(args.time.unwrap_or(0.0));
    r.epochs = given("epochs").then_some(args.epochs);
    r.batch = explicit("batch").then_some(args.batch);
    r.nbs = given("nbs").then_some(args.nbs);
    r.optimizer = given("optimizer").then_some(args.optimizer.chosen());
    r.lr0 = if given("lr0") { args.lr0 } else { None };
    r.cos_lr = given("cos_lr").then_some(args.cos_lr);
    r.max_grad_norm = given("max_grad_norm").then_some(args.max_grad_norm);
    r.flip = given("flip").then_some(args.flip);
    r.kd = given("kd").then_some(args.kd);
    r.dense_kd = given("dense_kd").then_some(args.dense_kd);
    r.ignore_band = given("ignore_band").then_some(args.ignore_band);
    r.anchor = given("anchor").then_some(args.anchor);
    r.hsv = if explicit("hsv") { Some(hsv_gains(&args.hsv)?) } else { None };
    r.translate = explicit("translate").then_some(args.translate);
    r.scale = explicit("scale").then_some(args.scale);
    r.mosaic = explicit("mosaic").then_some(args.mosaic);
    r.checkpoint = given("no_checkpoint").then_some(!args.no_checkpoint);
    r.amp = given("amp").then_some(args.amp);
    r.imgsz = given("imgsz").then_some(args.imgsz);
    r.save_period = given("save_period").then_some(args.save_period);
    r.save_interval = given("save_interval").then_some(args.save_interval);
    r.seed = given("seed").then_some(args.seed);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        train: Args,
    }

    /// clap's defaults of the flags that count only when given are the ones the request derives
    /// from: Ultralytics' augmentation and batch 2.
    #[test]
    fn the_flags_counted_only_when_given_default_to_what_the_request_derives() {
        let args = Cli::parse_from(["headroom", "--model", "m.onnx", "--data", "d.yaml"]).train;
        let defaults = headroom_train::augment::AugmentConfig::ultralytics();
        assert_eq!(hsv_gains(&args.hsv).expect("hsv"), [defaults.hsv_h, defaults.hsv_s, defaults.hsv_v]);
        assert_eq!(
            (args.translate, args.scale, args.mosaic),
            (defaults.translate, defaults.scale, defaults.mosaic)
        );
        assert_eq!(args.batch, headroom_train::config::TrainConfig::default().batch);
        let request = request_from_args(&args, false).expect("a request");
        assert_eq!((request.batch, request.hsv, request.mosaic), (None, None, None));
        assert_eq!(request.epochs, Some(args.epochs), "the other flags count with their defaults");
        assert_eq!(args.train, headroom_run::request::DEFAULT_PART, "--train's default is the library's");
    }
}
