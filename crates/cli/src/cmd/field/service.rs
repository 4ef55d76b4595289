//! `headroom field install-service`: a systemd service and timer that run `headroom field run`
//! nightly with this binary (an installed bundle's finds its libraries by RUNPATH: no environment
//! needed). The run's flags live in an environment file, so they can be edited without reinstalling.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

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
    anyhow::ensure!(
        !args.name.is_empty() && args.name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c)),
        "--name {}: a unit name of letters, digits and -_.@",
        args.name
    );
    headroom_field::calendar::check(&args.on_calendar)?;
    let exe = std::env::current_exe().context("finding this binary")?;
    let env_file = args.env_file.clone().unwrap_or_else(|| PathBuf::from("/etc/headroom/field.env"));
    let env_file = std::path::absolute(&env_file)?;
    if !args.run_flags.is_empty() {
        let run_flags = absolute_paths(&args.run_flags)?;
        check_run_flags(&run_flags)?;
        let line = run_flags.join(" ");
        let text = format!(
            "# Flags of `headroom field run` for {}.service (docs/FIELD.md).\nHEADROOM_FIELD_ARGS=\"{line}\"\n",
            args.name
        );
        headroom_core::fsio::write_atomic(&env_file, text.as_bytes())?;
        eprintln!("wrote {}", env_file.display());
    } else if !env_file.is_file() {
        anyhow::bail!(
            "{} does not exist: give the flags of `headroom field run` after `--` (they are written there)",
            env_file.display()
        );
    } else {
        eprintln!("kept {}", env_file.display());
    }
    let service = format!(
        "# Written by `headroom field install-service`.\n[Unit]\nDescription=headroom field retraining\n\
         After=local-fs.target\n\n[Service]\nType=oneshot\nEnvironmentFile={env}\n\
         ExecStart={exe} field run $HEADROOM_FIELD_ARGS\n# Retraining yields to the inference service.\n\
         Nice=10\nIOSchedulingClass=idle\n# Exit 3: another run holds the lock; not a failure.\n\
         SuccessExitStatus=3\n# A stop (SIGTERM) ends the run at its next checkpoint; the next start continues it.\n\
         TimeoutStopSec=120\n",
        env = env_file.display(),
        exe = exe.display(),
    );
    let timer = format!(
        "# Written by `headroom field install-service`.\n[Unit]\nDescription=headroom field retraining, nightly\n\n\
         [Timer]\nOnCalendar={}\nRandomizedDelaySec=15m\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n",
        args.on_calendar
    );
    let unit = |ext: &str| args.unit_dir.join(format!("{}.{ext}", args.name));
    for (path, text) in [(unit("service"), service), (unit("timer"), timer)] {
        headroom_core::fsio::write_atomic(&path, text.as_bytes())
            .with_context(|| format!("writing {} (run as root for /etc/systemd/system)", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    eprintln!("enable it: systemctl daemon-reload && systemctl enable --now {}.timer", args.name);
    Ok(Outcome::Success)
}

/// The flags of `headroom field run` whose value is a path.
const PATH_FLAGS: [&str; 7] =
    ["--images", "--teacher", "--model", "--holdout", "--old", "--work", "--devices"];

/// `flags` with every path made absolute against the current folder: the service runs in `/`,
/// where a relative path would name another file (or none). Made absolute rather than refused:
/// relative to the folder this command runs in is what they meant when typed. Symbolic links are
/// kept (the deployed path may be one). `--preset` is a path when it names a file (as `field run`
/// reads it), else a preset's name.
fn absolute_paths(flags: &[String]) -> anyhow::Result<Vec<String>> {
    let is_path_flag = |flag: &str, value: &str| {
        PATH_FLAGS.contains(&flag)
            || (flag == "--preset"
                && (Path::new(value).is_file() || value.ends_with(".toml") || value.contains('/')))
    };
    let absolute = |flag: &str, value: &str| -> anyhow::Result<String> {
        if !is_path_flag(flag, value) || value.is_empty() || Path::new(value).is_absolute() {
            return Ok(value.to_string());
        }
        let made =
            std::path::absolute(value).with_context(|| format!("{flag} {value}: making it absolute"))?;
        let made =
            made.to_str().with_context(|| format!("{flag} {}: not UTF-8", made.display()))?.to_string();
        eprintln!("{flag} {value}: written as {made} (the service runs in /)");
        Ok(made)
    };
    let mut out = Vec::with_capacity(flags.len());
    let mut pending: Option<&str> = None; // a flag whose value is the next word
    for word in flags {
        if let Some(flag) = pending.take() {
            out.push(absolute(flag, word)?);
        } else if let Some((flag, value)) = word.split_once('=').filter(|(f, _)| f.starts_with("--")) {
            out.push(format!("{flag}={}", absolute(flag, value)?));
        } else {
            if PATH_FLAGS.contains(&word.as_str()) || word == "--preset" {
                pending = Some(word);
            }
            out.push(word.clone());
        }
    }
    Ok(out)
}

/// The flags must be ones `headroom field run` takes (files are checked when it runs).
fn check_run_flags(flags: &[String]) -> anyhow::Result<()> {
    use clap::Parser as _;
    // systemd splits an unbraced $VAR at whitespace and takes its words as they are.
    if let Some(bad) =
        flags.iter().find(|f| f.is_empty() || f.chars().any(|c| c.is_whitespace() || "\"'\\$`".contains(c)))
    {
        anyhow::bail!(
            "`{bad}`: a flag or path with spaces, quotes, `$` or backslashes cannot pass through the \
             service's environment file; use a path without them (a symlink)"
        );
    }
    #[derive(Debug, clap::Parser)]
    #[command(name = "headroom field run")]
    struct Run {
        #[command(flatten)]
        args: super::RunArgs,
    }
    let argv = std::iter::once("headroom field run".to_string()).chain(flags.iter().cloned());
    Run::try_parse_from(argv)
        .map_err(|e| anyhow::anyhow!("the flags after `--`: {}", e.to_string().trim()))?;
    Ok(())
}
