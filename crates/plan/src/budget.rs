//! The memory a plan may use (`--budget`, `--reserve`): a board preset's, a size given, or what this
//! machine has free now (`auto`: `MemAvailable` for the CPU's memory, `nvidia-smi` for a discrete
//! GPU's), less what the running service keeps.

use crate::Error;
use crate::devices::DevicePreset;
use crate::size::{BudgetSize, Bytes, format_size};

/// The budget in bytes and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Budget {
    /// Bytes for training.
    pub bytes: u64,
    /// How it was found.
    pub source: String,
}

/// Which memory a run's tensors live in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// The CPU's: the board's one pool when it is unified, else the host's beside a GPU.
    Cpu,
    /// Discrete GPU `N`'s.
    Gpu(usize),
}

/// `--budget` (`None`: the board preset's; `auto`: this machine's free memory; a size) less
/// `--reserve`, for tensors in `pool` on `board`. Errors name the flag.
pub fn budget(
    budget: Option<BudgetSize>,
    reserve: Bytes,
    board: &DevicePreset,
    pool: Pool,
) -> Result<Budget, Error> {
    let refuse = |reason: String| Error::Setup { reason };
    let reserve = reserve.0;
    let ram = board.unified || pool == Pool::Cpu;
    let (total, source) = match budget {
        None if ram && !board.unified => {
            return Err(refuse(format!(
                "--device cpu on {} ({}): its preset gives the GPU's memory, not the CPU's; give --budget SIZE \
                 or --budget auto",
                board.name, board.description
            )));
        }
        None => (
            board.budget_bytes(),
            format!(
                "preset: {} GiB less its reserve of {} GiB",
                short_gib(board.memory_gib),
                short_gib(board.reserve_gib)
            ),
        ),
        Some(BudgetSize::Auto) => match pool {
            _ if ram => (mem_available()?, "MemAvailable (/proc/meminfo)".to_string()),
            Pool::Gpu(index) => (gpu_free(index)?, format!("the free memory of GPU {index} (nvidia-smi)")),
            Pool::Cpu => unreachable!("the CPU's memory is RAM"),
        },
        Some(BudgetSize::Size(bytes)) => (bytes.0, "--budget".to_string()),
    };
    if reserve >= total {
        return Err(refuse(format!(
            "--reserve {} leaves nothing of the budget ({}, {source}): give a smaller --reserve",
            format_size(reserve),
            format_size(total)
        )));
    }
    let source =
        if reserve > 0 { format!("{source}, less --reserve {}", format_size(reserve)) } else { source };
    Ok(Budget { bytes: total - reserve, source })
}

/// [`budget`] for training on `runs_on`; `--budget auto` with `--board` naming (`named`) a board
/// this machine (`system`) is not ([`crate::System::other_machine`], with the `--devices` file) warns that the plan is
/// for this machine.
pub fn budget_on(
    (asked, reserve): (Option<BudgetSize>, Bytes),
    board: &DevicePreset,
    runs_on: crate::RunsOn,
    (named, devices, system): (Option<&crate::Board>, Option<&std::path::Path>, &crate::System),
) -> Result<Budget, Error> {
    let found = budget(asked, reserve, board, runs_on.pool())?;
    if asked == Some(BudgetSize::Auto)
        && named.is_some_and(|b| *b != crate::Board::Auto)
        && let Some(this) = system.other_machine(board, devices)
    {
        let free = found.bytes + reserve.0;
        tracing::warn!(
            "--budget auto: reading this machine's free memory ({:.1} GiB), which is not a {} (--board {}; \
             this machine: {this}): the plan is for this machine; give --budget SIZE to plan for the board",
            free as f64 / f64::from(1u32 << 30),
            board.description,
            board.name
        );
    }
    Ok(found)
}

/// The system's `MemAvailable`, bytes.
fn mem_available() -> Result<u64, Error> {
    let text = std::fs::read_to_string("/proc/meminfo")
        .map_err(|source| Error::Io { path: "/proc/meminfo (--budget auto)".into(), source })?;
    let kb = text
        .lines()
        .find_map(|l| l.strip_prefix("MemAvailable:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
        .ok_or_else(|| Error::Setup {
            reason: "--budget auto: /proc/meminfo has no MemAvailable; give --budget SIZE".into(),
        })?;
    Ok(kb * 1024)
}

/// GPU `index`'s free memory as `nvidia-smi` reports it, bytes.
fn gpu_free(index: usize) -> Result<u64, Error> {
    let out = std::process::Command::new("nvidia-smi")
        .args(["--query-gpu=memory.free", "--format=csv,noheader,nounits", &format!("--id={index}")])
        .output()
        .map_err(|e| Error::Setup {
            reason: format!("--budget auto on a discrete GPU runs nvidia-smi: {e}; give --budget SIZE"),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mib: u64 = text.trim().parse().map_err(|_| Error::Setup {
        reason: format!("--budget auto: nvidia-smi said `{}`; give --budget SIZE", text.trim()),
    })?;
    Ok(mib << 20)
}

/// A preset's GiB as written (8, 7.4), or with two decimals when it was measured (23.54, not
/// 23.540164947509766).
pub fn short_gib(gib: f64) -> String {
    if (gib * 100.0).round() == gib * 100.0 { gib.to_string() } else { format!("{gib:.2}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn board(unified: bool) -> DevicePreset {
        let devices = crate::devices::builtin_devices().expect("built-in boards");
        let name = if unified { "orin-nano-8" } else { "x86-cpu" };
        crate::devices::find_device(&devices, name).expect("preset").clone()
    }

    #[test]
    fn a_preset_a_size_and_this_machine_less_the_reserve() {
        let nano = board(true);
        let size = |text: &str| text.parse::<Bytes>().expect("a size");
        let preset = budget(None, Bytes(0), &nano, Pool::Gpu(0)).expect("the preset's");
        assert_eq!(preset.bytes, nano.budget_bytes());
        assert!(preset.source.starts_with("preset: "), "{}", preset.source);
        let given =
            budget(Some(BudgetSize::Size(size("2GiB"))), size("512MiB"), &nano, Pool::Cpu).expect("a size");
        assert_eq!(given.bytes, (2u64 << 30) - (512 << 20));
        assert_eq!(given.source, "--budget, less --reserve 512.0 MiB");
        if std::path::Path::new("/proc/meminfo").exists() {
            let auto = budget(Some(BudgetSize::Auto), Bytes(0), &nano, Pool::Cpu).expect("this machine");
            assert!(auto.bytes > 0 && auto.source.contains("MemAvailable"), "{auto:?}");
        }
        let err = budget(Some(BudgetSize::Size(size("1GiB"))), size("1GiB"), &nano, Pool::Cpu)
            .expect_err("nothing left")
            .to_string();
        assert!(err.contains("--reserve 1.00 GiB leaves nothing"), "{err}");
        // Sizes are checked where they are read (the flags, a request file), once.
        assert!("lots".parse::<BudgetSize>().expect_err("not a size").contains("not a size"));
        assert!("0".parse::<BudgetSize>().expect_err("too small").contains("less than 1 MiB"));
        assert_eq!("auto".parse::<BudgetSize>(), Ok(BudgetSize::Auto));
        assert_eq!("3GiB".parse::<BudgetSize>().map(|b| b.to_string()), Ok("3GiB".to_string()));
    }
}
