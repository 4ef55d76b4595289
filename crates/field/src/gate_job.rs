//! `headroom field gate`: the deploy gate on two files, without a run ([`GateJob`]).

use std::path::PathBuf;

use crate::detector::class_names;
use crate::gate::{self, Compared, GateReport};
use crate::inputs::absolute_file;
use crate::served::Precision;
use crate::{Error, Result};

/// The gate asked on two files of one precision: would `candidate` replace `model`?
#[derive(Debug, Clone, PartialEq)]
pub struct GateJob {
    /// The file that would be deployed (`--candidate`).
    pub candidate: PathBuf,
    /// The model serving now (`--model`).
    pub model: PathBuf,
    /// The holdout's data.yaml (`--holdout`).
    pub holdout: PathBuf,
    /// The old scenes' data.yaml (`--old`).
    pub old: Option<PathBuf>,
    /// The preset whose gate settings decide (`--preset`, a name or a file).
    pub preset: String,
    /// The bootstrap's seed over the preset's (`--seed`).
    pub seed: Option<u64>,
    /// ONNX Runtime threads (0: its default).
    pub threads: usize,
}

impl GateJob {
    /// Checks the files (both detectors of the same classes and precision; the holdout and the old
    /// scenes labelled, images without a label file warned about) before any model runs, then
    /// evaluates both models on the CPU and decides.
    pub fn run(&self) -> Result<GateReport> {
        let candidate = absolute_file("--candidate", &self.candidate)?;
        let deployed = absolute_file("--model", &self.model)?;
        let holdout = absolute_file("--holdout", &self.holdout)?;
        let old = self.old.as_deref().map(|p| absolute_file("--old", p)).transpose()?;
        let names = class_names("--model", &deployed)?;
        let candidate_names = class_names("--candidate", &candidate)?;
        if candidate_names != names {
            return Err(Error::refused(format!(
                "--candidate has classes {}, the deployed model {}: compare models of the same classes",
                candidate_names.join(", "),
                names.join(", ")
            )));
        }
        for (flag, data) in [("--holdout", Some(&holdout)), ("--old", old.as_ref())] {
            if let Some(data) = data {
                gate::check_labelled(&headroom_core::dataset::DataConfig::load(data)?, flag)?;
            }
        }
        let (_, mut preset) =
            headroom_run::preset::load(&self.preset).map_err(|e| Error::refused(e.to_string()))?;
        if let Some(seed) = self.seed {
            preset.gate.seed = seed;
        }
        // Like with like: a quantized candidate against the FP32 model measures the quantization too.
        let precision = Precision::of_model(&candidate)?;
        let deployed_precision = Precision::of_model(&deployed)?;
        if precision != deployed_precision {
            return Err(Error::refused(format!(
                "--candidate is {precision}, --model {deployed_precision}: the gate compares files of one \
                 precision (export the one to match, `headroom export --{}`)",
                if precision == Precision::Fp32 { deployed_precision } else { precision }
            )));
        }
        let session = headroom_infer::provider::SessionRequest::cpu(self.threads).options()?;
        let mut report = gate::evaluate_gate(
            &candidate,
            &deployed,
            &holdout,
            old.as_deref(),
            &names,
            &preset.gate,
            &session,
        )?;
        report.compared = Some(Compared { precision, candidate, deployed, note: None });
        Ok(report)
    }
}
