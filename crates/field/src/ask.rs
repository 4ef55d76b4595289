//! What `headroom field run` asks, resolved: the flags given over the preset (over `headroom
//! train`'s defaults) into the run's settings, which `state.json` records, and the steps' settings.

use headroom_onnx::Trainable;
use headroom_plan::{DeviceChoice, DevicePreset};
use headroom_run::limits;
use headroom_run::request::RunRequest;

use crate::field_run::StepSettings;
use crate::inputs::Inputs;
use crate::state::RunSettings;
use crate::{Error, Result};
use headroom_run::preset::{self, RunPreset};

/// One field run as asked: the checked inputs, the preset, the board, and the flags given.
#[derive(Debug, Clone)]
pub struct FieldAsk {
    /// The checked inputs.
    pub inputs: Inputs,
    /// The preset's name (or file).
    pub preset_name: String,
    /// The preset.
    pub preset: RunPreset,
    /// The board planned for.
    pub board: DevicePreset,
    /// Where every step runs.
    pub device: DeviceChoice,
    /// Memory left to the running service (`--reserve`).
    pub reserve: headroom_plan::Bytes,
    /// Epochs, over the preset's.
    pub epochs: Option<usize>,
    /// What trains, over the preset's.
    pub part: Option<Trainable>,
    /// The training's time budget in hours, over the preset's.
    pub time_hours: Option<f64>,
    /// Execution providers of labelling and the gate, in order.
    pub providers: Option<Vec<headroom_infer::provider::ExecutionProvider>>,
    /// Threads of every step (0: the libraries' defaults).
    pub threads: usize,
    /// The labelled set's bound, over the preset's.
    pub max_images: Option<usize>,
    /// The pixel cap of labelling (`--max-pixels`); `None`: sized for the board
    /// ([`headroom_core::imageio::pixel_cap_for`]).
    pub max_pixels: Option<u64>,
    /// The precision deployed (`--deploy`).
    pub deploy: crate::served::Precision,
}

impl FieldAsk {
    /// The run's settings (what a rerun must agree with to continue) and the steps' settings.
    pub fn settings(&self) -> Result<(RunSettings, StepSettings)> {
        if let Some(hours) = self.time_hours.filter(|h| !limits::hours(*h)) {
            let max = limits::HOURS_MAX;
            return Err(Error::refused(format!("--time {hours}: hours, more than 0 and at most {max}")));
        }
        // The flags given over the preset: what the child `train` is asked for.
        let overrides = RunRequest {
            epochs: self.epochs,
            part: self.part,
            time_hours: self.time_hours,
            ..RunRequest::default()
        };
        let mut request = overrides.clone();
        self.preset.apply(&mut request, Some(&self.inputs.teacher));
        let inputs = &self.inputs;
        let run = RunSettings {
            images: inputs.images.clone(),
            teacher: inputs.teacher.clone(),
            holdout: inputs.holdout.clone(),
            old: inputs.old.clone(),
            preset: self.preset_name.clone(),
            preset_toml: toml::to_string(&self.preset)
                .map_err(|e| Error::refused(format!("writing the preset {}: {e}", self.preset_name)))?,
            board: self.board.name.clone(),
            runs_on: self.device.to_string(),
            reserve: self.reserve,
            overrides,
            model: inputs.deployed.clone(),
            deploy: Some(self.deploy),
        };
        let steps = StepSettings {
            preset_name: self.preset_name.clone(),
            gate: self.preset.gate.clone(),
            train: request,
            device: self.device,
            board: self.board.name.clone(),
            reserve: self.reserve,
            providers: self.providers.clone(),
            threads: self.threads,
            max_images: self.max_images.or(self.preset.max_images).unwrap_or(preset::DEFAULT_MAX_IMAGES),
            max_pixels: self.max_pixels.unwrap_or_else(|| {
                headroom_core::imageio::pixel_cap_for((self.board.memory_gib * f64::from(1u32 << 30)) as u64)
            }),
            inputs: inputs.clone(),
            deploy: self.deploy,
        };
        Ok((run, steps))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use headroom_plan::PlanMode;

    use super::*;

    fn ask(preset: &str) -> FieldAsk {
        let (preset_name, preset) = preset::load(preset).expect("a built-in preset");
        let at = |name: &str| PathBuf::from("/srv/field").join(name);
        FieldAsk {
            inputs: Inputs {
                images: at("images"),
                teacher: at("teacher.onnx"),
                deployed: at("model.onnx"),
                holdout: at("holdout/data.yaml"),
                old: None,
                names: vec!["a".into()],
            },
            preset_name,
            preset,
            board: headroom_plan::builtin_devices().expect("the built-in boards").remove(0),
            device: DeviceChoice::Cpu,
            reserve: headroom_plan::Bytes(600 << 20),
            epochs: None,
            part: None,
            time_hours: None,
            providers: None,
            threads: 1,
            max_images: None,
            max_pixels: None,
            deploy: crate::served::DEFAULT,
        }
    }

    #[test]
    fn labelling_is_capped_for_the_board_unless_told() {
        let nano =
            headroom_plan::builtin_devices().expect("boards").into_iter().find(|b| b.name == "orin-nano-4");
        let board = FieldAsk { board: nano.expect("the orin-nano-4 board"), ..ask("field-accurate") };
        let bytes = (board.board.memory_gib * f64::from(1u32 << 30)) as u64;
        let (_, steps) = board.settings().expect("settings");
        assert_eq!(steps.max_pixels, headroom_core::imageio::pixel_cap_for(bytes));
        assert!(steps.max_pixels < headroom_core::imageio::MAX_PIXELS, "{}: {bytes}", steps.max_pixels);
        let told = FieldAsk { max_pixels: Some(1000), ..ask("field-accurate") };
        assert_eq!(told.settings().expect("settings").1.max_pixels, 1000);
    }

    #[test]
    fn the_train_step_plans_as_the_preset_says_and_auto_when_it_is_silent() {
        let (_, accurate) = ask("field-accurate").settings().expect("settings");
        assert_eq!(accurate.plan(), PlanMode::Auto);
        let (_, quick) = ask("field-quick").settings().expect("settings");
        assert_eq!(quick.plan(), PlanMode::Auto, "field-quick sets no plan");
        let mut off = ask("field-accurate");
        off.preset.plan = Some(PlanMode::Off);
        let (run, steps) = off.settings().expect("settings");
        assert_eq!(steps.plan(), PlanMode::Off);
        assert!(run.preset_toml.contains("plan = \"off\""), "the state records it: {}", run.preset_toml);
    }
}
