//! Subcommands, one file each.

mod decode_args;
mod device_arg;
mod doctor;
mod eval;
mod export;
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod field;
mod inspect;
mod interrupt;
mod label;
mod plan;
pub mod progress;
mod provider_args;
mod settle_arg;
mod step;
mod synth;
mod train;
mod train_args;
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod train_progress;
mod train_shared;
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
mod train_spec;
mod version;

use clap::{Parser, Subcommand};

/// Retrain YOLO detectors on the edge device itself, and ship them as quantized ONNX and TensorRT.
#[derive(Debug, Parser)]
#[command(name = "headroom", version, propagate_version = true)]
pub struct Cli {
    /// More log output (-v debug, -vv trace). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true, help_heading = "Logging")]
    pub verbose: u8,
    /// Only warnings and errors on stderr.
    #[arg(short, long, global = true, help_heading = "Logging")]
    pub quiet: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands. A negative number is taken as a value (`--conf -1` is refused as out of range,
/// not as an unknown flag `-1`).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Make a synthetic shapes dataset in the Ultralytics layout: the `base` scenes unless
    /// `--preset` says otherwise, deterministic by seed (docs/SYNTH.md).
    #[command(allow_negative_numbers = true)]
    Synth(synth::Args),
    /// Pseudo-label a folder of images with a teacher detector: YOLO labels, soft class scores, a
    /// manifest and a seeded held-out val split; resumable (docs/LABEL.md).
    #[command(allow_negative_numbers = true)]
    Label(label::Args),
    /// Fine-tune an ONNX detector on a dataset — every layer by default, with Ultralytics' loss and
    /// augmentation — and write the same ONNX back (best.onnx, last.onnx) (docs/TRAIN.md).
    #[command(allow_negative_numbers = true)]
    Train(Box<train::Args>),
    /// Will training fit? Each configuration's memory, estimated from the graph, against a board's
    /// budget; the one `train --plan auto` would run; exit 1 when nothing fits (docs/PLAN.md).
    #[command(allow_negative_numbers = true)]
    Plan(plan::Args),
    /// Evaluate an ONNX detector on a labelled dataset in ONNX Runtime: precision, recall, mAP50 and
    /// mAP50-95 per class, as Ultralytics' `val` computes them.
    #[command(allow_negative_numbers = true)]
    Eval(eval::Args),
    /// Export a detector for deployment: FP16 and INT8 ONNX (Q/DQ + TensorRT calibration cache),
    /// each checked against the FP32 file; TensorRT engines with `--engine` (docs/ONNX.md).
    #[command(allow_negative_numbers = true)]
    Export(export::Args),
    /// Describe an ONNX detector (family, input, classes, Detect head, modules, freeze points);
    /// `--check`: does headroom's training engine run it as ONNX Runtime does? (docs/ONNX.md)
    Inspect(inspect::Args),
    /// Check that ONNX Runtime and libtorch load and compute, which GPU code libtorch carries, and
    /// run real work on a visible GPU (docs/GPU.md).
    Doctor(doctor::Args),
    /// The nightly field loop: label new images, train (planned for the board), export, and deploy
    /// only a gain that a gate on a holdout and the old scenes accepts; rollback; a systemd timer
    /// (docs/FIELD.md).
    #[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
    Field(field::Args),
    /// The field loop's entry into a child step: runs the typed request in FILE
    /// (`headroom_field::request`) as the step's verb runs its own flags. Not for people.
    #[command(hide = true)]
    Step(step::Args),
}

/// How a command ended when it did not fail with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done, and every check passed.
    Success,
    /// Done, but a check the user asked for failed (exit code 1).
    CheckFailed,
    /// Stopped cleanly by this signal (exit code 128 + signal).
    Interrupted(i32),
    /// Another run holds the lock (exit code 3).
    #[cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(dead_code))]
    Busy,
}

/// Parses the command line.
pub fn parse() -> Cli {
    use clap::{CommandFactory, FromArgMatches};
    let mut command = Cli::command();
    // The long version loads the native libraries to report them: only when it is asked for.
    if std::env::args_os().skip(1).any(|a| a == "--version") {
        command = command.long_version(&*Box::leak(version::long().into_boxed_str()));
    }
    Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

/// Runs one subcommand, `hooks` around the field loop.
pub fn run(command: Command, hooks: &crate::Hooks) -> anyhow::Result<Outcome> {
    #[cfg(not(all(feature = "onnxruntime", feature = "libtorch")))]
    let _ = hooks;
    // Verbs that train on libtorch refuse a libtorch of another minor version than the one headroom
    // was compiled against (its C++ ABI differs); doctor reports the same as a failed check.
    let on_libtorch = match &command {
        Command::Train(_) | Command::Step(_) => true,
        #[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
        Command::Field(_) => true,
        _ => false,
    };
    if on_libtorch
        && let Some(why) = headroom_train::libtorch_loaded_version()
            .as_deref()
            .and_then(headroom_train::libtorch_version_mismatch)
    {
        anyhow::bail!("{why}");
    }
    match command {
        Command::Synth(args) => synth::run(&args),
        Command::Label(args) => label::run(&args),
        Command::Train(args) => train::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Eval(args) => eval::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        #[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
        Command::Field(args) => field::run(&args, hooks),
        Command::Step(args) => step::run(&args),
    }
}
