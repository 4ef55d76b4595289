//! What a night's work needs, checked before labelling with the rules the steps themselves apply
//! (one function per rule, called here and by the verb that applies it): a setting that would
//! fail mid-run fails at the start instead, with its cause, before any work is done. The preset
//! itself is checked as it loads (`headroom_field::preset`, the rules of `train`'s flags).

use anyhow::Context as _;

use super::RunArgs;
use crate::cmd::device_arg::BoardArgs;
use crate::cmd::plan::{PlanArgs, budget};
use headroom_field::inputs::Inputs;
use headroom_field::preset::RunPreset;

/// Checks the model the night trains (the deployed FP32 detector, or the FP32 source the state
/// folder keeps for a deployed FP16 or INT8 file), what trains, the memory budget on the board,
/// and the teacher–student pairing the preset's distillation needs.
pub fn check(
    args: &RunArgs,
    inputs: &Inputs,
    preset_name: &str,
    preset: &RunPreset,
    board: &headroom_plan::DevicePreset,
) -> anyhow::Result<()> {
    let work = headroom_field::inputs::work_path(args.work.as_deref(), &inputs.deployed)?;
    let trains = headroom_field::served::trains_from(&inputs.deployed, &work)
        .map_err(|e| anyhow::anyhow!("--model: {}", e.chain()))?;
    let model = headroom_onnx::Model::load(&trains).map_err(|e| anyhow::anyhow!("--model: {e}"))?;
    headroom_run::inputs::refuse_fp16(&trains, &model).map_err(|e| anyhow::anyhow!("--model: {e:#}"))?;
    let student = headroom_onnx::inspect::inspect(&model)
        .with_context(|| format!("--model {}: not a detector headroom can train", trains.display()))?;
    // The plan step's budget: --reserve must leave something of the board's memory.
    let board_args = BoardArgs { board: Some(args.board.clone()), devices: args.devices.clone() };
    let plan_args = PlanArgs { budget: None, reserve: args.reserve.clone() };
    budget(&plan_args, board, args.device.planned_on(board), &board_args)?;
    if preset.distill {
        // Training runs at the deployed model's input size (field run gives no --imgsz).
        let [h, w] = student.inspected_size;
        let imgsz = [u32::try_from(w).unwrap_or(0), u32::try_from(h).unwrap_or(0)];
        headroom_run::teacher::check_pairing(&inputs.teacher, &student, imgsz).map_err(|e| {
            anyhow::anyhow!(
                "--preset {preset_name} distils from the teacher on every batch (distill = true), and {e}; \
                 use a preset without distillation (--preset field-quick), or a teacher exported at the \
                 deployed model's size ({w}x{h}) or with dynamic axes"
            )
        })?;
    }
    Ok(())
}
