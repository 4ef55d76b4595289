//! The two words every verb shares: `--device` says where the work runs (`cpu`, `cuda`, `cuda:N`,
//! `auto`: `headroom_plan::DeviceChoice`), `--board` names the memory preset of the board the work
//! is for (configs/devices.toml, plus `--devices FILE`: `headroom_plan::System::resolve_board`). A board
//! name given to `--device` (the old vocabulary) is refused in one line naming `--board`.

use std::path::PathBuf;

use headroom_plan::DeviceChoice;

/// Help text of `--device`, shared by the verbs.
pub const DEVICE_VALUES: &str = "cpu|cuda|cuda:N|auto";

/// Parses `--device` (clap's value parser).
pub fn device_arg(text: &str) -> Result<DeviceChoice, String> {
    text.parse()
}

/// `--board` and `--devices`, shared by `plan`, `train`, `export` and `field`.
#[derive(Debug, Clone, clap::Args)]
pub struct BoardArgs {
    /// The board the memory plan is for, a preset of configs/devices.toml (orin-agx-64,
    /// orin-agx-32, orin-nx-16, orin-nx-8, orin-nano-8, orin-nano-4, x86-cpu, gpu-8) or of
    /// --devices; `auto`: the preset of this board (its /proc/device-tree/model and memory), else
    /// one made from its measured memory.
    #[arg(long, value_name = "NAME|auto")]
    pub board: Option<headroom_plan::Board>,
    /// More board presets (the form of configs/devices.toml), read after the built-ins and
    /// /etc/headroom/devices.toml: a preset of the same name replaces theirs, a new one adds a
    /// board for --board NAME and --board auto.
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
}
