//! Where a run trains: `cpu`, `cuda` or `cuda:N` (`headroom train --device`), with the board preset
//! of `--board` (whose budget `--plan auto` fits) saved beside it. Runs saved before the two were
//! separate name a preset as their device (`orin-nano-4`, `auto`): they still resume, on CUDA when
//! the preset has a GPU and libtorch sees one.

use headroom_plan::DevicePreset;
use headroom_train::tch::{Cuda, Device};

use crate::spec::TorchDevice;
use crate::{Error, Result};

/// Whether this libtorch sees a CUDA device.
pub fn cuda_available() -> bool {
    headroom_train::cuda_available()
}

/// `--device` for libtorch, as the spec keeps it: `cpu`, `cuda` or `cuda:N` as given, `auto`
/// decided by whether this libtorch sees a CUDA device (logged).
pub fn torch_text(choice: headroom_plan::DeviceChoice) -> TorchDevice {
    use headroom_plan::DeviceChoice;
    let choice = match choice {
        DeviceChoice::Auto => {
            let cuda = cuda_available();
            let why =
                if cuda { "this libtorch sees a CUDA device" } else { "this libtorch sees no CUDA device" };
            match choice.resolve(cuda, why) {
                headroom_plan::RunsOn::Cpu => DeviceChoice::Cpu,
                headroom_plan::RunsOn::Cuda(_) => DeviceChoice::Cuda(None),
            }
        }
        other => other,
    };
    match choice {
        DeviceChoice::Cuda(n) => TorchDevice::Cuda(n),
        DeviceChoice::Auto | DeviceChoice::Cpu => TorchDevice::Cpu,
    }
}

/// libtorch's device text (`cpu`, `cuda`, `cuda:N`) and the preset whose budget and runtime apply.
/// `warn`: say so when a GPU preset trains on the CPU.
pub fn resolve(
    device: &TorchDevice,
    cuda_available: bool,
    warn: bool,
) -> Result<(TorchDevice, DevicePreset)> {
    resolve_saved(device, None, cuda_available, warn)
}

/// [`resolve`] with the preset the run saved (`RunSpec::device_preset`, from `--board`): the preset
/// of a `cpu`/`cuda` run (x86-cpu or gpu-8 without one), and for an old run's preset name used
/// instead of looking `text` up in the built-ins (`auto`, or a name of a device file).
pub fn resolve_saved(
    device: &TorchDevice,
    saved: Option<&DevicePreset>,
    cuda_available: bool,
    warn: bool,
) -> Result<(TorchDevice, DevicePreset)> {
    let text = match device {
        TorchDevice::Board(name) => name.as_str(),
        libtorch => {
            if let Some(board) = saved {
                return Ok((libtorch.clone(), board.clone()));
            }
            let devices = headroom_plan::builtin_devices()?;
            let name = if *libtorch == TorchDevice::Cpu { "x86-cpu" } else { "gpu-8" };
            return Ok((libtorch.clone(), headroom_plan::find_device(&devices, name)?.clone()));
        }
    };
    let preset = match saved {
        Some(preset) => preset.clone(),
        None if text == "auto" => {
            let system = headroom_plan::System::host();
            let (model, mem) = system.read_board();
            let found = headroom_plan::detect(&headroom_plan::builtin_devices()?, model.as_deref(), mem)?;
            tracing::info!("--device auto: {}", found.reason);
            found.preset
        }
        None => headroom_plan::find_device(&headroom_plan::builtin_devices()?, text)
            .map_err(|e| Error::Spec {
                key: "--device".into(),
                reason: format!("{text}: not cpu, cuda or cuda:N, and {e}"),
            })?
            .clone(),
    };
    let torch = if preset.gpu && cuda_available {
        TorchDevice::Cuda(None)
    } else {
        if preset.gpu && warn {
            tracing::warn!("--device {text}: this libtorch sees no CUDA device; training on the CPU");
        }
        TorchDevice::Cpu
    };
    Ok((torch, preset))
}

/// libtorch's device.
pub fn torch_device(device: &TorchDevice) -> Result<Device> {
    let spec = |reason: String| Error::Spec { key: "--device".into(), reason };
    let (text, index) = match device {
        TorchDevice::Cpu => return Ok(Device::Cpu),
        TorchDevice::Cuda(n) => (device.to_string(), n.unwrap_or(0)),
        TorchDevice::Board(other) => return Err(spec(format!("{other}: expected cpu, cuda or cuda:N"))),
    };
    if !cuda_available() {
        return Err(spec(format!(
            "{text}: this libtorch sees no CUDA device (scripts/setup.sh installs the CPU build; docs/GPU.md \
             says how to build against a CUDA one)"
        )));
    }
    if index as i64 >= Cuda::device_count() {
        return Err(spec(format!("{text}: only {} CUDA device(s)", Cuda::device_count())));
    }
    Ok(Device::Cuda(index))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board_named(name: &str) -> TorchDevice {
        TorchDevice::Board(name.into())
    }

    #[test]
    fn a_saved_preset_is_used_without_the_device_files() {
        let devices = headroom_plan::builtin_devices().expect("builtins");
        let mut board = headroom_plan::find_device(&devices, "orin-nano-8").expect("preset").clone();
        board.name = "myboard".into();
        let (torch, preset) =
            resolve_saved(&board_named("myboard"), Some(&board), true, false).expect("saved");
        assert_eq!((torch, preset), (TorchDevice::Cuda(None), board.clone()));
        let (torch, _) = resolve_saved(&board_named("myboard"), Some(&board), false, false).expect("saved");
        assert_eq!(torch, TorchDevice::Cpu);
        assert!(resolve_saved(&board_named("myboard"), None, false, false).is_err());
        let (torch, preset) = resolve_saved(&TorchDevice::Cpu, None, false, false).expect("cpu");
        assert_eq!((torch.to_string().as_str(), preset.name.as_str()), ("cpu", "x86-cpu"));
        // `--device cuda:1 --board myboard`: the device as given, the board's budget.
        let (torch, preset) =
            resolve_saved(&TorchDevice::Cuda(Some(1)), Some(&board), false, false).expect("board");
        assert_eq!((torch.to_string().as_str(), preset.name.as_str()), ("cuda:1", "myboard"));
    }
}
