//! The nightly timer (`headroom field install-service`): a systemd service and timer that run
//! `headroom field run` with a given binary (an installed bundle's finds its libraries by RUNPATH:
//! no environment needed). The run's flags live in an environment file, so they can be edited
//! without reinstalling.

use std::path::{Path, PathBuf};

use crate::{Context as _, Result, bail, ensure};

/// The flags of `headroom field run` whose value is a path.
pub const PATH_FLAGS: [&str; 7] =
    ["--images", "--teacher", "--model", "--holdout", "--old", "--work", "--devices"];

/// The environment file's default place.
pub const DEFAULT_ENV_FILE: &str = "/etc/headroom/field.env";

/// What to install.
#[derive(Debug, Clone)]
pub struct Service {
    /// Where the units go.
    pub unit_dir: PathBuf,
    /// The environment file holding `HEADROOM_FIELD_ARGS`.
    pub env_file: PathBuf,
    /// When the timer fires (systemd.time `OnCalendar`).
    pub on_calendar: String,
    /// The unit name.
    pub name: String,
    /// The binary the service runs.
    pub exe: PathBuf,
    /// The flags of `headroom field run`, paths already absolute ([`absolute_paths`]) and checked
    /// by the caller; empty: keep the environment file as it is.
    pub run_flags: Vec<String>,
}

/// What [`install`] did to the environment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EnvFile {
    /// Written with the run flags.
    Written,
    /// Kept as it was (no flags given).
    Kept,
}

/// The files written by [`install`].
#[derive(Debug, Clone)]
pub struct Installed {
    /// The environment file, and whether it was written.
    pub env_file: (PathBuf, EnvFile),
    /// The service unit.
    pub service: PathBuf,
    /// The timer unit.
    pub timer: PathBuf,
}

/// Writes the environment file (when flags are given; it must exist otherwise), the service and
/// the timer, each atomically. Refuses a unit name systemd would not take, a calendar expression it
/// would not parse, and flags that cannot pass through an environment file.
pub fn install(service: &Service) -> Result<Installed> {
    let name = &service.name;
    ensure!(
        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.@".contains(c)),
        "--name {name}: a unit name of letters, digits and -_.@"
    );
    crate::calendar::check(&service.on_calendar)?;
    let env_file = std::path::absolute(&service.env_file)
        .with_context(|| format!("{}: making it absolute", service.env_file.display()))?;
    let written = if !service.run_flags.is_empty() {
        check_environment_words(&service.run_flags)?;
        let line = service.run_flags.join(" ");
        let text = format!(
            "# Flags of `headroom field run` for {name}.service (docs/FIELD.md).\nHEADROOM_FIELD_ARGS=\"{line}\"\n"
        );
        headroom_core::fsio::write_atomic(&env_file, text.as_bytes())?;
        EnvFile::Written
    } else if !env_file.is_file() {
        bail!(
            "{} does not exist: give the flags of `headroom field run` after `--` (they are written there)",
            env_file.display()
        );
    } else {
        EnvFile::Kept
    };
    let unit = |ext: &str| service.unit_dir.join(format!("{name}.{ext}"));
    let (service_path, timer_path) = (unit("service"), unit("timer"));
    for (path, text) in [
        (&service_path, service_text(&env_file, &service.exe)),
        (&timer_path, timer_text(&service.on_calendar)),
    ] {
        headroom_core::fsio::write_atomic(path, text.as_bytes())
            .with_context(|| format!("writing {} (run as root for /etc/systemd/system)", path.display()))?;
    }
    Ok(Installed { env_file: (env_file, written), service: service_path, timer: timer_path })
}

/// The service unit: one run, niced, a stop ending it at its next checkpoint.
fn service_text(env_file: &Path, exe: &Path) -> String {
    format!(
        "# Written by `headroom field install-service`.\n[Unit]\nDescription=headroom field retraining\n\
         After=local-fs.target\n\n[Service]\nType=oneshot\nEnvironmentFile={env}\n\
         ExecStart={exe} field run $HEADROOM_FIELD_ARGS\n# Retraining yields to the inference service.\n\
         Nice=10\nIOSchedulingClass=idle\n# Exit 3: another run holds the lock; not a failure.\n\
         SuccessExitStatus=3\n# A stop (SIGTERM) ends the run at its next checkpoint; the next start continues it.\n\
         TimeoutStopSec=120\n",
        env = env_file.display(),
        exe = exe.display(),
    )
}

/// The timer unit.
fn timer_text(on_calendar: &str) -> String {
    format!(
        "# Written by `headroom field install-service`.\n[Unit]\nDescription=headroom field retraining, nightly\n\n\
         [Timer]\nOnCalendar={on_calendar}\nRandomizedDelaySec=15m\nPersistent=true\n\n[Install]\nWantedBy=timers.target\n"
    )
}

/// systemd splits an unbraced `$VAR` at whitespace and takes its words as they are: a word with
/// spaces, quotes, `$` or backslashes cannot pass.
fn check_environment_words(flags: &[String]) -> Result<()> {
    if let Some(bad) =
        flags.iter().find(|f| f.is_empty() || f.chars().any(|c| c.is_whitespace() || "\"'\\$`".contains(c)))
    {
        bail!(
            "`{bad}`: a flag or path with spaces, quotes, `$` or backslashes cannot pass through the \
             service's environment file; use a path without them (a symlink)"
        );
    }
    Ok(())
}

/// `flags` with every path made absolute against the current folder (`made` hears each one
/// changed): the service runs in `/`, where a relative path would name another file (or none).
/// Made absolute rather than refused: relative to the folder this command runs in is what they
/// meant when typed. Symbolic links are kept (the deployed path may be one). `--preset` is a path
/// when it names a file (as `field run` reads it), else a preset's name.
pub fn absolute_paths(flags: &[String], made: &mut dyn FnMut(&str, &str, &str)) -> Result<Vec<String>> {
    let is_path_flag = |flag: &str, value: &str| {
        PATH_FLAGS.contains(&flag)
            || (flag == "--preset"
                && (Path::new(value).is_file() || value.ends_with(".toml") || value.contains('/')))
    };
    let mut absolute = |flag: &str, value: &str| -> Result<String> {
        if !is_path_flag(flag, value) || value.is_empty() || Path::new(value).is_absolute() {
            return Ok(value.to_string());
        }
        let path =
            std::path::absolute(value).with_context(|| format!("{flag} {value}: making it absolute"))?;
        let text =
            path.to_str().with_context(|| format!("{flag} {}: not UTF-8", path.display()))?.to_string();
        made(flag, value, &text);
        Ok(text)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_become_absolute_and_names_stay() {
        let flags: Vec<String> =
            ["--images", "new", "--preset", "field-quick", "--model=/opt/m.onnx", "--old", "old/data.yaml"]
                .map(String::from)
                .to_vec();
        let mut changed = Vec::new();
        let out = absolute_paths(&flags, &mut |flag, _, _| changed.push(flag.to_string())).expect("paths");
        assert!(Path::new(&out[1]).is_absolute() && out[1].ends_with("/new"), "{out:?}");
        assert_eq!(out[3], "field-quick", "a preset's name is not a path");
        assert_eq!(out[4], "--model=/opt/m.onnx");
        assert!(Path::new(&out[6]).is_absolute(), "{out:?}");
        assert_eq!(changed, ["--images", "--old"]);
    }

    #[test]
    fn units_are_written_and_bad_names_or_words_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let service = Service {
            unit_dir: dir.path().to_path_buf(),
            env_file: dir.path().join("field.env"),
            on_calendar: "*-*-* 02:00:00".into(),
            name: "headroom-field".into(),
            exe: PathBuf::from("/opt/headroom/bin/headroom"),
            run_flags: ["--images", "/data/new"].map(String::from).to_vec(),
        };
        let installed = install(&service).expect("installed");
        assert_eq!(installed.env_file.1, EnvFile::Written);
        let text = std::fs::read_to_string(&installed.service).expect("service");
        assert!(
            text.contains("ExecStart=/opt/headroom/bin/headroom field run $HEADROOM_FIELD_ARGS"),
            "{text}"
        );
        let env = std::fs::read_to_string(dir.path().join("field.env")).expect("env");
        assert!(env.contains("HEADROOM_FIELD_ARGS=\"--images /data/new\""), "{env}");
        let kept = install(&Service { run_flags: Vec::new(), ..service.clone() }).expect("kept");
        assert_eq!(kept.env_file.1, EnvFile::Kept);
        let err = install(&Service { name: "bad name".into(), ..service.clone() }).expect_err("refused");
        assert!(err.to_string().contains("--name bad name"), "{err}");
        let spaced = Service { run_flags: vec!["--images".into(), "/my data".into()], ..service };
        let err = install(&spaced).expect_err("refused").to_string();
        assert!(err.contains("/my data") && err.contains("environment file"), "{err}");
    }
}
