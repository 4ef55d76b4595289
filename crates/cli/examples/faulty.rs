//! `headroom` with kill points, for the tests of the field loop's restart guarantees
//! (crates/cli/tests/field*.rs) and the soak benchmark (scripts/bench/field-soak.sh):
//! `HEADROOM_FIELD_KILL_AT=<point>` ends this process with SIGKILL at that point, as a power cut or
//! an OOM kill would. Points: a step as it starts (label plan train export eval deploy), a step's
//! child mid-work (`<step>:mid`: once the child wrote its first file), and the named moments of a
//! deploy and a rollback (deploy-swap deploy-engine rollback-swap).
//!
//! The product reads no such variable: this binary is the `headroom_cli` library with a step runner
//! (`headroom_field::runner::StepRunner`) wrapped around the real one. `cargo test` builds it
//! (target/<profile>/examples/faulty); `cargo build` does not.

use std::process::ExitCode;

use headroom_field::runner::{ChildCall, ChildRunner, Ended, StepRunner};

/// The variable naming the point to be killed at.
const KILL_AT: &str = "HEADROOM_FIELD_KILL_AT";

fn main() -> ExitCode {
    headroom_cli::main(headroom_cli::Hooks { runner: Some(killing), rollback_at: Some(kill_point) })
}

fn killing(inner: ChildRunner) -> Box<dyn StepRunner> {
    Box::new(Killing { inner })
}

/// The real children, and SIGKILL at the named point.
struct Killing {
    inner: ChildRunner,
}

impl StepRunner for Killing {
    fn run_child(&mut self, call: &ChildCall) -> headroom_field::Result<Ended> {
        let point = format!("{}:mid", call.step);
        if armed(&point) {
            // Once the child has written its first file, so that the kill lands inside the step
            // however fast it runs; the child dies with this process (PR_SET_PDEATHSIG).
            let evidence = call.evidence.clone();
            std::thread::spawn(move || {
                while !evidence.exists() {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                eprintln!("{KILL_AT}={point}: SIGKILL once {} exists", evidence.display());
                sigkill_self();
            });
        }
        self.inner.run_child(call)
    }

    fn last_error(&mut self) -> Option<String> {
        self.inner.last_error()
    }

    fn starting(&mut self, step: headroom_field::step::Step) {
        kill_point(step.name());
    }

    fn reached(&mut self, point: &str) {
        kill_point(point);
    }
}

/// Whether [`KILL_AT`] names `point`.
fn armed(point: &str) -> bool {
    std::env::var(KILL_AT).is_ok_and(|v| v == point)
}

/// SIGKILL this process when [`KILL_AT`] names `point`.
fn kill_point(point: &str) {
    if armed(point) {
        eprintln!("{KILL_AT}={point}: SIGKILL");
        sigkill_self();
    }
}

/// Ends this process with SIGKILL: no destructor, no handler, no flush runs.
#[allow(unsafe_code)]
fn sigkill_self() {
    // SAFETY: kill(2) on our own pid with a valid signal number.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}
