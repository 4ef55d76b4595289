//! The steps of a field run, in the order they run, each named in `state.json` as it always was.
//! (A `plan` step ran between label and train until training's own plan took its place: state
//! files that name it still load, [`crate::state::RunState::load`].)

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// One step of a field run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Step {
    /// The teacher labels the new images (`headroom label`, a child process).
    Label,
    /// Training, resumable, planned for the board (`headroom train`, a child process).
    Train,
    /// FP16, INT8 and, with trtexec, the engine (`headroom export`, a child process).
    Export,
    /// The gate's evaluation of the candidate and the deployed model (in the loop's process).
    Eval,
    /// Deploying the candidate when the gate passed (in the loop's process).
    Deploy,
}

impl Step {
    /// Every step, in the order a run takes them.
    pub const ALL: [Step; 5] = [Step::Label, Step::Train, Step::Export, Step::Eval, Step::Deploy];

    /// Its name in `state.json`, the kill points and messages.
    pub fn name(self) -> &'static str {
        match self {
            Step::Label => "label",
            Step::Train => "train",
            Step::Export => "export",
            Step::Eval => "eval",
            Step::Deploy => "deploy",
        }
    }

    /// Whether it runs as a `headroom` verb in a child process.
    pub fn is_child(self) -> bool {
        matches!(self, Step::Label | Step::Train | Step::Export)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Step {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Step::ALL.into_iter().find(|step| step.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Step::ALL.iter().map(|s| s.name()).collect();
            format!("{s:?} is not a step of a field run ({})", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_text_and_json() {
        for step in Step::ALL {
            assert_eq!(step.name().parse::<Step>(), Ok(step));
            let json = serde_json::to_string(&step).expect("json");
            assert_eq!(json, format!("\"{}\"", step.name()));
            assert_eq!(serde_json::from_str::<Step>(&json).expect("back"), step);
        }
        let err = "trian".parse::<Step>().expect_err("a typo");
        assert!(err.contains("label, train, export, eval, deploy"), "{err}");
        assert!(serde_json::from_str::<Step>("\"trian\"").is_err());
    }
}
