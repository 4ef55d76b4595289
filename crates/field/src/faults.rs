//! Testing hook of the loop's restart guarantees: `HEADROOM_FIELD_KILL_AT=<point>` ends this process
//! with SIGKILL at that point (steps: label plan train export eval deploy; inside them: deploy-swap
//! rollback-swap; `<step>:mid` while a step's child runs), as a power cut or an OOM kill would.
//! Unset (always, outside tests), it does nothing; a release build (the bundle, the demo, the
//! service) ignores it altogether: the hook exists only where `debug_assertions` is on, as in the
//! builds `cargo test` runs. The library's own tests need no hook: they give `FieldRun` a runner that
//! stops the loop anywhere (crates/cli/tests/field_library.rs).

/// The variable naming the point to be killed at.
pub const KILL_AT: &str = "HEADROOM_FIELD_KILL_AT";

/// SIGKILL this process when [`KILL_AT`] names `point`.
pub fn kill_point(point: &str) {
    if armed(point) {
        eprintln!("{KILL_AT}={point}: SIGKILL");
        sigkill_self();
    }
}

/// Whether [`KILL_AT`] names `point` (never in a release build).
pub fn armed(point: &str) -> bool {
    cfg!(debug_assertions) && std::env::var(KILL_AT).is_ok_and(|v| v == point)
}

/// Ends this process with SIGKILL: no destructor, no handler, no flush runs.
#[allow(unsafe_code)]
pub fn sigkill_self() {
    // SAFETY: kill(2) on our own pid with a valid signal number.
    unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    }
}
