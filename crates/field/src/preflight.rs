//! What a night's work needs, checked before labelling with the rules the steps themselves apply
//! (one function per rule, called here and by the step that applies it): a setting that would
//! fail mid-run fails at the start instead, with its cause, before any work is done. The preset
//! itself is checked as it loads ([`headroom_run::preset`], the rules of `train`'s flags).

use std::path::Path;

use crate::ask::FieldAsk;
use crate::{Error, Result};

impl FieldAsk {
    /// Checks the model the night trains (the deployed FP32 detector, or the FP32 source the state
    /// folder `work` keeps for a deployed FP16 or INT8 file), what trains, the memory budget on the
    /// board, and the teacher–student pairing the preset's distillation needs. `named`: the board
    /// and the devices file as given (`--board`, `--devices`), for the budget's warning when the
    /// board is not this machine.
    pub fn preflight(
        &self,
        work: Option<&Path>,
        named: (&headroom_plan::Board, Option<&Path>),
    ) -> Result<()> {
        let inputs = &self.inputs;
        let work = crate::inputs::work_path(work, &inputs.deployed)?;
        let trains = crate::served::trains_from(&inputs.deployed, &work)
            .map_err(|e| Error::refused(format!("--model: {}", e.chain())))?;
        let model =
            headroom_onnx::Model::load(&trains).map_err(|e| Error::refused(format!("--model: {e}")))?;
        headroom_run::model_checks::refuse_fp16(&trains, &model)
            .map_err(|e| Error::refused(format!("--model: {e:#}")))?;
        let student = headroom_onnx::inspect::inspect(&model).map_err(|e| {
            Error::refused(format!("--model {}: not a detector headroom can train: {e}", trains.display()))
        })?;
        // Training's budget: --reserve must leave something of the board's memory.
        let (board, devices) = named;
        let system = headroom_plan::System::host();
        headroom_plan::budget_on(
            (None, self.reserve),
            &self.board,
            self.device.planned_on(&self.board),
            (Some(board), devices, &system),
        )?;
        if self.preset.distill {
            // Training runs at the deployed model's input size (field run gives no --imgsz).
            let [h, w] = student.inspected_size;
            let imgsz = [u32::try_from(w).unwrap_or(0), u32::try_from(h).unwrap_or(0)];
            headroom_run::model_checks::check_pairing(&inputs.teacher, &student, imgsz).map_err(|e| {
                Error::refused(format!(
                    "--preset {} distils from the teacher on every batch (distill = true), and {e}; use a \
                     preset without distillation (--preset field-quick), or a teacher exported at the \
                     deployed model's size ({w}x{h}) or with dynamic axes",
                    self.preset_name
                ))
            })?;
        }
        Ok(())
    }
}
