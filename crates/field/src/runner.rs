//! How a child step runs: [`StepRunner`] is what the loop asks to run a step's request in a child;
//! [`ChildRunner`] runs it as a child process of the `headroom` binary (its memory is the system's
//! again when it ends, and it dies with the loop: `PR_SET_PDEATHSIG`; a signal the loop gets is
//! passed on to it). A test gives the loop
//! another runner: one that runs the real child and then stops the loop as a kill would, or one that
//! fails a step, without anything compiled into the binary for it (crates/cli/tests/field_library.rs
//! in the test's process; crates/cli/examples/faulty.rs, the binary with a runner that SIGKILLs
//! itself at a named point, for the tests that kill the real process).

use std::path::PathBuf;

use crate::step::Step;
use crate::{Context as _, bail};

/// One child step: `headroom step <request_file>` ([`crate::request::ENTRY`]) running `request`,
/// its stdout the step's JSON report.
#[derive(Debug, Clone)]
pub struct ChildCall {
    /// The step.
    pub step: Step,
    /// What the child is asked.
    pub request: crate::request::StepRequest,
    /// Where the request is written (in the run's folder: what each step was asked stays
    /// readable).
    pub request_file: PathBuf,
    /// Where the child's stdout goes, atomically, when it succeeds.
    pub stdout_to: PathBuf,
    /// A file the child writes early in its work (a test's "kill it mid-step" waits for it).
    pub evidence: PathBuf,
}

/// How a step ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It finished.
    Done,
    /// It was stopped by this signal (SIGINT, SIGTERM); a rerun continues it.
    Stopped(i32),
}

/// Runs the loop's child steps.
pub trait StepRunner {
    /// Runs `call` to its end; an error when it failed (its messages already passed on).
    fn run_child(&mut self, call: &ChildCall) -> crate::Result<Ended>;

    /// The last `error:` line the last child printed, when its messages were read (the failure kept
    /// in `state.json` in the child's own words).
    fn last_error(&mut self) -> Option<String> {
        None
    }

    /// Called as `step` starts (after its state says it is not done).
    fn starting(&mut self, _step: Step) {}

    /// Called at a named moment inside a step where a kill leaves the most to mend: `deploy-swap`
    /// (the candidate is in place, `.prev` not yet), `deploy-engine` (the model is deployed, its
    /// engine not yet).
    fn reached(&mut self, _point: &str) {}

    /// Called when `step`'s work is done, before its state says so (where a kill leaves the most
    /// for a rerun to sort out).
    fn finishing(&mut self, _step: Step) {}
}

/// Runs child steps as child processes of `exe` (the `headroom` binary).
pub struct ChildRunner {
    exe: PathBuf,
    quiet: bool,
    interrupted: Box<dyn Fn() -> Option<i32>>,
    last_error: Option<String>,
}

impl ChildRunner {
    /// Children of `exe`, with `-q` when `quiet`; `interrupted` says whether this process was asked
    /// to stop (by which signal) while a child ran.
    pub fn new(exe: PathBuf, quiet: bool, interrupted: Box<dyn Fn() -> Option<i32>>) -> ChildRunner {
        ChildRunner { exe, quiet, interrupted, last_error: None }
    }
}

impl StepRunner for ChildRunner {
    fn run_child(&mut self, call: &ChildCall) -> crate::Result<Ended> {
        let tmp = headroom_core::fsio::temporary_path(&call.stdout_to);
        let out = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut command = std::process::Command::new(&self.exe);
        if self.quiet {
            command.arg("-q");
        }
        crate::request::write(&call.request_file, &call.request)?;
        let args = [crate::request::ENTRY.to_string(), call.request_file.display().to_string()];
        command.args(&args).stdout(out);
        die_with_parent(&mut command);
        tracing::info!("{}: headroom {}", call.step, args.join(" "));
        // Unattended (no terminal: a service's journal, a log file), the child's messages pass
        // through this process so that a failure's own words are kept with the run's state.
        let read = !std::io::IsTerminal::is_terminal(&std::io::stderr());
        if read {
            command.stderr(std::process::Stdio::piped());
        }
        let oom_before = oom_kills();
        let mut child = command.spawn().with_context(|| format!("starting {}", self.exe.display()))?;
        let reader = child.stderr.take().map(|pipe| std::thread::spawn(move || pass_through(pipe)));
        // The child runs in its own process group: a signal meant for the loop (SIGTERM from systemd
        // to the main PID, Ctrl-C in a terminal) reaches it once, from here, and it stops cleanly
        // at its next safe point instead of running its step to the end.
        let mut forwarded = false;
        let status = loop {
            if let Some(status) =
                child.try_wait().with_context(|| format!("waiting for {}", self.exe.display()))?
            {
                break status;
            }
            if !forwarded && let Some(signal) = (self.interrupted)() {
                forward(child.id(), signal);
                forwarded = true;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        self.last_error = reader.and_then(|r| r.join().ok().flatten());
        if let Some(signal) = (self.interrupted)() {
            return Ok(Ended::Stopped(signal));
        }
        match status.code() {
            Some(0) => {
                std::fs::rename(&tmp, &call.stdout_to)
                    .with_context(|| format!("writing {}", call.stdout_to.display()))?;
                Ok(Ended::Done)
            }
            Some(code @ (129 | 130 | 143)) => Ok(Ended::Stopped(code - 128)),
            Some(_) => {
                bail!("`{} {}` failed ({status}; its messages are above)", self.exe.display(), args.join(" "))
            }
            None => {
                use std::os::unix::process::ExitStatusExt as _;
                let why = killed_by(status.signal().unwrap_or(0), oom_before, oom_kills());
                bail!("`{} {}` {why}", self.exe.display(), args.join(" "))
            }
        }
    }

    fn last_error(&mut self) -> Option<String> {
        self.last_error.take()
    }
}

/// The kernel's count of processes its out-of-memory killer ended (`oom_kill` in /proc/vmstat).
fn oom_kills() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/vmstat").ok()?;
    text.lines().find_map(|line| line.strip_prefix("oom_kill ")?.trim().parse().ok())
}

/// What ended a child that a signal killed, in words an operator can act on: a SIGKILL while the
/// kernel's out-of-memory killer struck is named as that.
fn killed_by(signal: i32, oom_before: Option<u64>, oom_after: Option<u64>) -> String {
    let oom = matches!((oom_before, oom_after), (Some(a), Some(b)) if b > a);
    match signal {
        9 if oom => {
            "was killed by the kernel's out-of-memory killer (SIGKILL; /proc/vmstat oom_kill went up \
             meanwhile): memory ran out on this device. Stop other services, or plan for less (a larger \
             --reserve, a smaller --board preset, --train head); `journalctl -k` names the process"
                .to_string()
        }
        9 => "was killed by SIGKILL (signal 9), not by the out-of-memory killer as far as /proc/vmstat \
              tells: something else ended it (a watchdog, a person, a service manager's timeout)"
            .to_string(),
        n => format!("was killed by signal {n}"),
    }
}

/// Copies a child's messages to our stderr, line by line; returns the last line that starts with
/// `error:` (without it).
fn pass_through(pipe: std::process::ChildStderr) -> Option<String> {
    use std::io::{BufRead as _, Write as _};
    let mut last = None;
    for line in std::io::BufReader::new(pipe).split(b'\n') {
        let Ok(line) = line else { break };
        let mut stderr = std::io::stderr().lock();
        // Our stderr gone (a closed pipe): keep reading so that the child never blocks.
        let _ = stderr.write_all(&line).and_then(|()| stderr.write_all(b"\n"));
        let text = String::from_utf8_lossy(&line);
        if let Some(rest) = text.strip_prefix("error: ") {
            last = Some(rest.trim().to_string());
        }
    }
    last
}

/// Sends `signal` to the child `pid`.
#[allow(unsafe_code)]
fn forward(pid: u32, signal: i32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return };
    // SAFETY: kill(2) on our own child, which has not been reaped (try_wait saw it running).
    if unsafe { libc::kill(pid, signal) } == 0 {
        tracing::info!("passed signal {signal} on to the running step (pid {pid})");
    }
}

/// How much more the kernel's out-of-memory killer prefers a step's child than what it would
/// otherwise (`/proc/<pid>/oom_score_adj`, -1000..=1000): when memory runs out, the step (which the
/// loop reports and a later night retries) goes before the loop that would report it and before the
/// board's inference service, which keeps its own score.
pub const CHILD_OOM_SCORE_ADJ: &std::ffi::CStr = c"1000";

/// The child dies with the loop (`PR_SET_PDEATHSIG`), runs in a process group of its own (signals
/// reach it through the loop, once: [`forward`]) and is the out-of-memory killer's first choice
/// ([`CHILD_OOM_SCORE_ADJ`]).
#[allow(unsafe_code)]
fn die_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    command.process_group(0);
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl, open, write and close are async-signal-safe, and nothing here allocates;
        // nothing else runs between fork and exec.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Raising one's own score needs no privilege; a failure leaves the score as it was.
                let fd = libc::open(c"/proc/self/oom_score_adj".as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    let text = CHILD_OOM_SCORE_ADJ.to_bytes();
                    libc::write(fd, text.as_ptr().cast(), text.len());
                    libc::close(fd);
                }
                Ok(())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{killed_by, oom_kills};

    #[test]
    fn a_child_the_oom_killer_ended_is_named_so() {
        assert!(killed_by(9, Some(3), Some(4)).contains("out-of-memory killer (SIGKILL"));
        let other = killed_by(9, Some(3), Some(3));
        assert!(other.contains("not by the out-of-memory killer"), "{other}");
        assert!(!killed_by(9, None, None).contains("killer (SIGKILL"));
        assert_eq!(killed_by(11, Some(1), Some(2)), "was killed by signal 11");
        assert!(oom_kills().is_some(), "Linux 4.13+ counts OOM kills in /proc/vmstat");
    }
}
