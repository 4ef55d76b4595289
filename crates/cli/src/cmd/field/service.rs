//! `headroom field install-service`: the flags of `headroom_field::service`, the run flags checked
//! against `headroom field run`'s own parser, and what was written.

use std::path::PathBuf;

use anyhow::Context as _;
use headroom_field::service::{self, EnvFile, Service};

use super::super::Outcome;

/// Arguments of `headroom field install-service`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where the units go.
    #[arg(long, default_value = "/etc/systemd/system", value_name = "DIR")]
    pub unit_dir: PathBuf,
    /// The environment file holding HEADROOM_FIELD_ARGS, the flags of `headroom field run`
    /// [default: /etc/headroom/field.env]. Kept when it exists and no flags are given.
    #[arg(long, value_name = "FILE")]
    pub env_file: Option<PathBuf>,
    /// When the timer fires (systemd.time OnCalendar: `daily`, `*-*-* 02:00:00`, `Mon..Fri 03:00`);
    /// checked with `systemd-analyze calendar` where it exists, else against the usual forms.
    #[arg(long, default_value = "*-*-* 02:00:00", value_name = "SPEC")]
    pub on_calendar: String,
    /// Unit name.
    #[arg(long, default_value = "headroom-field", value_name = "NAME")]
    pub name: String,
    /// The flags of `headroom field run` (after `--`), e.g. `-- --images /data/new --teacher
    /// /opt/models/teacher.onnx --model /opt/detector/model.onnx --holdout /data/holdout/data.yaml`.
    /// Relative paths are made absolute against the current folder (the service runs in `/`).
    #[arg(last = true, value_name = "RUN FLAGS")]
    pub run_flags: Vec<String>,
}

/// Writes the env file (when flags are given or it is missing), the service and the timer.
pub fn install(args: &Args) -> anyhow::Result<Outcome> {
    let mut said = |flag: &str, value: &str, made: &str| {
        eprintln!("{flag} {value}: written as {made} (the service runs in /)");
    };
    let run_flags = service::absolute_paths(&args.run_flags, &mut said)?;
    if !run_flags.is_empty() {
        check_run_flags(&run_flags)?;
    }
    let installed = service::install(&Service {
        unit_dir: args.unit_dir.clone(),
        env_file: args.env_file.clone().unwrap_or_else(|| PathBuf::from(service::DEFAULT_ENV_FILE)),
        on_calendar: args.on_calendar.clone(),
        name: args.name.clone(),
        exe: std::env::current_exe().context("finding this binary")?,
        run_flags,
    })?;
    let (env_file, how) = &installed.env_file;
    match how {
        EnvFile::Written => eprintln!("wrote {}", env_file.display()),
        EnvFile::Kept => eprintln!("kept {}", env_file.display()),
    }
    for path in [&installed.service, &installed.timer] {
        eprintln!("wrote {}", path.display());
    }
    eprintln!("enable it: systemctl daemon-reload && systemctl enable --now {}.timer", args.name);
    Ok(Outcome::Success)
}

/// The flags must be ones `headroom field run` takes, naming files and folders that exist (a typo
/// found tonight, not in a journal after the first night; what they hold is checked when it runs).
fn check_run_flags(flags: &[String]) -> anyhow::Result<()> {
    use clap::Parser as _;
    #[derive(Debug, clap::Parser)]
    #[command(name = "headroom field run")]
    struct Run {
        #[command(flatten)]
        args: super::RunArgs,
    }
    let argv = std::iter::once("headroom field run".to_string()).chain(flags.iter().cloned());
    let run = Run::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("the flags after `--`: {}", e.to_string().trim()))?;
    let args = &run.args;
    let files = [
        ("--teacher", Some(&args.teacher)),
        ("--model", Some(&args.model)),
        ("--holdout", Some(&args.holdout)),
    ];
    for (flag, path) in files.into_iter().chain([("--old", args.old.as_ref())]) {
        let Some(path) = path else { continue };
        anyhow::ensure!(
            path.is_file(),
            "the flags after `--`: {flag} {}: no such file; nothing was written",
            path.display()
        );
    }
    anyhow::ensure!(
        args.images.is_dir(),
        "the flags after `--`: --images {}: no such folder (a camera folder mounted later: create it first); nothing \
         was written",
        args.images.display()
    );
    Ok(())
}
