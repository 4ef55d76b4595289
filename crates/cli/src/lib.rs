//! The `headroom` binary's verbs as a library: `main.rs` is [`main`] with no [`Hooks`]; a test
//! harness (crates/cli/examples/faulty.rs) runs the same verbs with a field loop that is killed at a
//! named point. Exit codes: 0 success, 1 a check failed, 2 an error, 3 another run holds the lock
//! (`field`), 128 + N stopped by signal N.

#[doc(hidden)]
pub mod cmd;

use headroom_field::runner::{ChildRunner, StepRunner};

/// What a test puts around the field loop; the binary passes [`Hooks::default`], which changes
/// nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hooks {
    /// Wraps the runner of `field run`'s steps (its calls at each step and named moment).
    pub runner: Option<fn(ChildRunner) -> Box<dyn StepRunner>>,
    /// Called at the named moments of `field rollback` (`rollback-swap`).
    pub rollback_at: Option<fn(&str)>,
}

use std::process::ExitCode;

/// Parses the command line and runs it, `hooks` around the field loop.
pub fn main(hooks: Hooks) -> ExitCode {
    disable_onnxruntime_telemetry();
    default_sigpipe();
    let cli = cmd::parse();
    init_logging(cli.verbose, cli.quiet);
    match cmd::run(cli.command, &hooks) {
        Ok(cmd::Outcome::Success) => ExitCode::SUCCESS,
        Ok(cmd::Outcome::CheckFailed) => ExitCode::from(1),
        Ok(cmd::Outcome::Busy) => ExitCode::from(3),
        Ok(cmd::Outcome::Interrupted(signal)) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(130)),
        Err(err) => {
            eprintln!("error: {err}");
            // A message that already quotes its cause (`{path}: {source}`) is not followed by it again.
            let mut said = err.to_string();
            for cause in err.chain().skip(1) {
                let cause = cause.to_string();
                if !said.contains(&cause) {
                    eprintln!("  caused by: {cause}");
                    said = cause;
                }
            }
            ExitCode::from(2)
        }
    }
}

/// A closed pipe ends headroom quietly, as it ends `cat` (`headroom label --json | head`): Rust
/// ignores SIGPIPE, which turns the write into an error that `println!` panics on.
#[allow(unsafe_code)]
fn default_sigpipe() {
    #[cfg(unix)]
    // SAFETY: the first calls of `main`, before any thread exists; SIG_DFL is a valid disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// ONNX Runtime 1.31 starts its telemetry when it loads and writes
/// `~/.cache/Microsoft/DeveloperTools/.onnxruntime/{deviceid,onnxruntime.db}` even with telemetry
/// events disabled through the API; only this variable stops it. Nothing phones home, and a device
/// writes only where the user said (docs/ARCHITECTURE.md, "Rules every change keeps").
#[allow(unsafe_code)]
fn disable_onnxruntime_telemetry() {
    // SAFETY: the first call of `main`, before any thread exists, so nothing reads the environment
    // while it changes.
    unsafe { std::env::set_var("ORT_DISABLE_TELEMETRY", "1") };
}

/// Logs go to stderr, timestamped with `-v`; `RUST_LOG` overrides the level chosen by `-v`/`-q`.
fn init_logging(verbose: u8, quiet: bool) {
    let level = match (quiet, verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(cmd::progress::LogWriter)
        .with_ansi(cmd::progress::colour_on_stderr())
        .with_target(false);
    // Timestamps only with -v: a terminal reads better without them, and run folders keep their
    // own logs (run.log, results.json) with times.
    if verbose == 0 {
        builder.without_time().init();
    } else {
        builder.init();
    }
}
