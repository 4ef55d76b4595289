//! `headroom step FILE` (hidden): the field loop's one entry into a child step. FILE holds a typed
//! request (`headroom_field::request`, versioned); it runs as the step's verb runs its own flags,
//! which become the same request first (`label`, `train`, `export`: each verb's `job`).

use std::path::PathBuf;

use super::Outcome;
use headroom_field::request::StepRequest;

/// Arguments of `headroom step`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The request file the field loop wrote.
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// Runs the request in `args.file`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    match headroom_field::request::read(&args.file)? {
        StepRequest::Label(job) => super::label::run_job(&job),
        StepRequest::Train(job) => super::train::run_job(&job),
        StepRequest::Export(job) => super::export::run_job(&job),
    }
}
