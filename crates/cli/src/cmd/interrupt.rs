//! Ctrl-C, SIGTERM and SIGHUP for long runs: the first one asks the run to stop cleanly (finish the images
//! in flight, commit what is durable, mark the manifest interrupted); a second one ends the process
//! at once. The exit status is the shell's convention, 128 + the signal number (130, 143).
//!
//! Installed only by the commands that check the flag (`label`, `export`); the others keep the
//! default (immediate exit), which loses nothing since they write their outputs atomically.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// The stop request of a run.
#[derive(Debug, Clone)]
pub struct Interrupt {
    requested: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

impl Interrupt {
    /// Installs the handlers for SIGINT, SIGTERM and SIGHUP (a closed terminal, or a service
    /// manager's reload).
    pub fn install() -> anyhow::Result<Interrupt> {
        let interrupt =
            Interrupt { requested: Arc::new(AtomicBool::new(false)), signal: Arc::new(AtomicUsize::new(0)) };
        for signal in [SIGINT, SIGTERM, SIGHUP] {
            // Does nothing the first time; once `requested` is set, the next signal exits.
            signal_hook::flag::register_conditional_shutdown(
                signal,
                128 + signal,
                Arc::clone(&interrupt.requested),
            )?;
            signal_hook::flag::register_usize(signal, Arc::clone(&interrupt.signal), signal as usize)?;
            signal_hook::flag::register(signal, Arc::clone(&interrupt.requested))?;
        }
        Ok(interrupt)
    }

    /// The flag a library run polls.
    #[cfg_attr(not(feature = "onnxruntime"), allow(dead_code))]
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.requested)
    }

    /// The signal received, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::Relaxed) {
            0 => None,
            n => i32::try_from(n).ok(),
        }
    }
}

/// The name of a signal, for messages.
pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        SIGINT => "SIGINT (Ctrl-C)",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}
