//! What the loop hands a child step: one typed request ([`StepRequest`]), owned by the library
//! that carries it out, serialized into one file that the child reads through the binary's one
//! hidden entry point (`headroom step FILE`, [`ENTRY`]) and runs as the verb runs its own flags
//! (the flags become the same request first). The file is versioned ([`VERSION`]): one of another
//! version is refused, naming both.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Context as _, Error, Result};

/// The version of the request file this build writes and reads.
pub const VERSION: u32 = 1;

/// The binary's hidden verb that runs a request file.
pub const ENTRY: &str = "step";

/// One child step's request.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StepRequest {
    /// A labelling (`headroom label`).
    Label(Box<headroom_infer::label::job::LabelJob>),
    /// A training (`headroom train`).
    Train(Box<headroom_run::job::TrainJob>),
    /// An export (`headroom export`).
    Export(Box<headroom_export::ExportJob>),
}

/// The file: its version and the request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestFile {
    version: u32,
    step: StepRequest,
}

/// Writes `request` to `path` atomically.
pub fn write(path: &Path, request: &StepRequest) -> Result<()> {
    let file = RequestFile { version: VERSION, step: request.clone() };
    let text = serde_json::to_string_pretty(&file)? + "\n";
    headroom_core::fsio::write_atomic(path, text.as_bytes())?;
    Ok(())
}

/// The request in `path`; a file of another [`VERSION`], or one that does not hold a request of
/// this build's shape, is refused naming the file.
pub fn read(path: &Path) -> Result<StepRequest> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a step request (JSON)", path.display()))?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        Some(v) if v == u64::from(VERSION) => {}
        found => {
            let found = found.map_or_else(|| "none".to_string(), |v| v.to_string());
            return Err(Error::refused(format!(
                "{}: a step request of version {found}; this headroom reads version {VERSION} (written by \
                 another headroom: rerun the step from the command that wrote it)",
                path.display()
            )));
        }
    }
    let file: RequestFile = serde_json::from_value(value)
        .with_context(|| format!("{}: not a step request of this headroom", path.display()))?;
    Ok(file.step)
}

#[cfg(test)]
mod tests {
    use headroom_run::job::{TrainJob, TrainRun};
    use headroom_run::planner::BudgetAsk;
    use headroom_run::request::RunRequest;

    use super::*;

    fn train() -> StepRequest {
        StepRequest::Train(Box::new(TrainJob {
            run: TrainRun::Resume { dir: "/srv/run/train".into(), request: RunRequest::default() },
            budget: BudgetAsk::default(),
            threads: 1,
            allocator: Default::default(),
            prefetch: Default::default(),
            profile: None,
            json: true,
        }))
    }

    #[test]
    fn a_request_file_round_trips_and_another_version_or_shape_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("train.request.json");
        write(&file, &train()).expect("write");
        let json = |request: &StepRequest| serde_json::to_string(request).expect("json");
        assert_eq!(json(&read(&file).expect("read")), json(&train()));
        let text = std::fs::read_to_string(&file).expect("text");
        std::fs::write(&file, text.replace("\"version\": 1", "\"version\": 2")).expect("write");
        let err = read(&file).expect_err("version 2").chain();
        assert!(err.contains("version 2") && err.contains("reads version 1"), "{err}");
        std::fs::write(&file, text.replace("\"threads\"", "\"thread_count\"")).expect("write");
        let err = read(&file).expect_err("another shape").chain();
        assert!(err.contains("not a step request of this headroom") && err.contains("thread_count"), "{err}");
    }
}
