//! Device presets (`configs/devices.toml`, embedded in the binary).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The presets shipped in `configs/devices.toml`.
pub const BUILTIN_DEVICES: &str = include_str!("../../../configs/devices.toml");

/// A device whose memory budget training must fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicePreset {
    /// Short name used on the command line (`orin-nano-8`).
    pub name: String,
    /// Human description.
    pub description: String,
    /// Total memory shared by CPU and GPU, GiB.
    pub memory_gib: f64,
    /// Memory kept back for the OS, camera pipeline and CUDA context, GiB.
    pub reserve_gib: f64,
    /// Whether CPU and GPU share the memory (Jetson); `--budget auto` then reads `MemAvailable`,
    /// else the GPU's free memory.
    #[serde(default = "yes")]
    pub unified: bool,
    /// Whether training runs on a GPU (AMP is a rung only there).
    #[serde(default = "yes")]
    pub gpu: bool,
    /// Resident memory of the runtime before any model (libtorch and ONNX Runtime libraries and
    /// their allocators), MiB: measured on the x86 CPU preset, assumed elsewhere (devices.toml says which).
    pub runtime_mib: f64,
    /// What training on the GPU of a unified board adds outside the resident set and the CUDA
    /// allocator, MiB: the CUDA context, kernel images, cuBLAS/cuDNN workspaces (nvmap on a Jetson;
    /// a public figure until measured, devices.toml says which). 0 where not given.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cuda_runtime_mib: f64,
    /// Substrings (case-insensitive) of the board's `/proc/device-tree/model` that identify this
    /// board family (`Orin Nano`), for `--board auto` ([`detect`]); the memory tells the
    /// variants of a family apart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

fn yes() -> bool {
    true
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

impl DevicePreset {
    /// Memory available to training, in bytes.
    pub fn budget_bytes(&self) -> u64 {
        ((self.memory_gib - self.reserve_gib).max(0.0) * (1u64 << 30) as f64) as u64
    }

    /// The runtime overhead in bytes, training on the CPU.
    pub fn runtime_bytes(&self) -> u64 {
        (self.runtime_mib.max(0.0) * (1u64 << 20) as f64) as u64
    }

    /// The runtime overhead in bytes of training on the GPU (`gpu`) or the CPU: on a unified
    /// board's GPU the CUDA context and libraries' workspaces ([`DevicePreset::cuda_runtime_mib`])
    /// are counted too.
    pub fn runtime_bytes_on(&self, gpu: bool) -> u64 {
        let cuda = if gpu && self.unified { self.cuda_runtime_mib.max(0.0) } else { 0.0 };
        self.runtime_bytes() + (cuda * (1u64 << 20) as f64) as u64
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviceFile {
    #[serde(default)]
    device: Vec<DevicePreset>,
}

/// Parses a device file's text; `path` names it in errors.
pub fn parse_devices(path: &Path, text: &str) -> Result<Vec<DevicePreset>, Error> {
    let invalid = |message: String| Error::Invalid { path: path.to_path_buf(), message };
    let file: DeviceFile = toml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    for d in &file.device {
        let reserved = d.name == "auto" || d.name == "cpu" || d.name.starts_with("cuda");
        if d.name.trim().is_empty() || reserved {
            return Err(invalid(format!(
                "device `{}`: a name is needed, and not `auto`, `cpu` or `cuda...` (`--board auto` detects the board; cpu and cuda are --device values)",
                d.name
            )));
        }
        if d.models.iter().any(|m| m.trim().is_empty()) {
            return Err(invalid(format!(
                "device `{}`: an empty string in `models` matches every board",
                d.name
            )));
        }
        // Finite and at most 16 TiB: `inf` or `1e300` would plan every configuration as fitting.
        if !(d.memory_gib > 0.0
            && d.memory_gib <= 16_384.0
            && d.reserve_gib >= 0.0
            && d.reserve_gib < d.memory_gib
            && d.runtime_mib >= 0.0
            && d.runtime_mib < d.memory_gib * 1024.0)
        {
            return Err(invalid(format!(
                "device `{}`: need 0 < memory_gib <= 16384, 0 <= reserve_gib < memory_gib and 0 <= runtime_mib < memory",
                d.name
            )));
        }
    }
    Ok(file.device)
}

/// Reads a device file.
pub fn load_devices(path: &Path) -> Result<Vec<DevicePreset>, Error> {
    let text =
        std::fs::read_to_string(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    parse_devices(path, &text)
}

/// The built-in presets.
pub fn builtin_devices() -> Result<Vec<DevicePreset>, Error> {
    parse_devices(Path::new("<builtin configs/devices.toml>"), BUILTIN_DEVICES)
}

/// Finds a preset by name.
pub fn find_device<'a>(devices: &'a [DevicePreset], name: &str) -> Result<&'a DevicePreset, Error> {
    devices.iter().find(|d| d.name == name).ok_or_else(|| Error::UnknownDevice {
        name: name.to_string(),
        known: devices.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", "),
    })
}

/// The system-wide device file, read after the built-ins when it exists.
pub const SYSTEM_DEVICES: &str = "/etc/headroom/devices.toml";

/// Where this machine's facts are read: the board model (`/proc/device-tree/model`), MemTotal
/// (`/proc/meminfo`) and the system-wide device file ([`SYSTEM_DEVICES`]). [`System::host`] is
/// this machine; a test gives files of its own (another board, no system file) instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct System {
    /// The board model's file (a Jetson's device tree).
    pub model: std::path::PathBuf,
    /// The kernel's memory figures (`MemTotal:` in kB).
    pub meminfo: std::path::PathBuf,
    /// The system-wide device file, read after the built-ins when it exists.
    pub devices: std::path::PathBuf,
}

impl System {
    /// This machine.
    pub fn host() -> System {
        System {
            model: "/proc/device-tree/model".into(),
            meminfo: "/proc/meminfo".into(),
            devices: SYSTEM_DEVICES.into(),
        }
    }

    /// The presets to choose from: the built-ins, then the system device file when it exists, then
    /// `user_file` (`--devices FILE`, which must exist). A later preset with the same name replaces
    /// the earlier one in place; new names are added.
    pub fn load_all(&self, user_file: Option<&Path>) -> Result<Vec<DevicePreset>, Error> {
        load_from(&self.devices, user_file)
    }

    /// The board model (NULs and blanks trimmed) and MemTotal in bytes, each `None` when
    /// unreadable.
    pub fn read_board(&self) -> (Option<String>, Option<u64>) {
        let model = std::fs::read(&self.model).ok().and_then(|bytes| {
            let text = String::from_utf8_lossy(&bytes);
            let t = text.trim_matches(|c: char| c == '\0' || c.is_whitespace());
            (!t.is_empty()).then(|| t.to_string())
        });
        let mem = std::fs::read_to_string(&self.meminfo).ok().and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
                .map(|kb| kb * 1024)
        });
        (model, mem)
    }

    /// [`detect`] on this system's presets and board facts.
    pub fn detect(&self, user_file: Option<&Path>) -> Result<Detected, Error> {
        let devices = self.load_all(user_file)?;
        let (model, mem) = self.read_board();
        detect(&devices, model.as_deref(), mem)
    }

    /// The preset `--board NAME|auto` names, from the built-ins, the system device file and
    /// `devices_file` (`--devices`). `auto` detects the board ([`detect`]), logging why, with a
    /// warning when no preset knows it.
    pub fn resolve_board(&self, board: &Board, devices_file: Option<&Path>) -> Result<DevicePreset, Error> {
        if let Board::Named(name) = board {
            let devices = self.load_all(devices_file)?;
            return find_device(&devices, name)
                .cloned()
                .map_err(|e| Error::Setup { reason: format!("--board {name}: {e}") });
        }
        let found = self.detect(devices_file)?;
        if found.known {
            tracing::info!("--board auto: {}", found.reason);
        } else {
            tracing::warn!("--board auto: {}", found.reason);
        }
        Ok(found.preset)
    }

    /// Whether this machine is the board `preset` (detected as `--board auto` would), and what it
    /// is otherwise, for the warning of `--budget auto`: `None` when it is, or when neither can be
    /// told (a preset without board `models`, such as x86-cpu, on a machine no preset knows).
    pub fn other_machine(&self, preset: &DevicePreset, devices_file: Option<&Path>) -> Option<String> {
        let devices = self.load_all(devices_file).ok()?;
        let (model, mem) = self.read_board();
        let found = detect(&devices, model.as_deref(), mem).ok();
        match found {
            Some(found) if found.known && found.preset.name == preset.name => None,
            Some(found) if found.known => {
                Some(format!("{} ({})", found.preset.description, found.preset.name))
            }
            _ if preset.models.is_empty() => None,
            _ => Some(match model {
                Some(model) => format!("board `{model}`"),
                None => "a machine without a board model".to_string(),
            }),
        }
    }
}

/// The built-ins, then `system` when it exists, then `user_file`.
fn load_from(system: &Path, user_file: Option<&Path>) -> Result<Vec<DevicePreset>, Error> {
    let mut devices = builtin_devices()?;
    if system.exists() {
        merge(&mut devices, load_devices(system)?);
    }
    if let Some(path) = user_file {
        merge(&mut devices, load_devices(path)?);
    }
    Ok(devices)
}

fn merge(devices: &mut Vec<DevicePreset>, later: Vec<DevicePreset>) {
    for d in later {
        match devices.iter_mut().find(|e| e.name == d.name) {
            Some(earlier) => *earlier = d,
            None => devices.push(d),
        }
    }
}

/// What `--board auto` found: the preset, whether a preset's `models` matched the board, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Detected {
    /// The preset chosen, or one made from the measured memory (`known` false, name `measured`).
    pub preset: DevicePreset,
    /// Whether a preset of the device files matched the board.
    pub known: bool,
    /// How it was chosen, for the log.
    pub reason: String,
}

const GIB: f64 = (1u64 << 30) as f64;

/// Chooses the preset of this board: among the presets whose `models` match `board_model`
/// (`/proc/device-tree/model`, case-insensitive substrings), the one whose memory is nearest to
/// `mem_total_bytes` (MemTotal, a little less than the board's memory); the last one wins a tie,
/// so a user file's entry beats a built-in. No match: a preset named `measured` made from the
/// measured memory (`known` false). Neither readable: an error.
pub fn detect(
    devices: &[DevicePreset],
    board_model: Option<&str>,
    mem_total_bytes: Option<u64>,
) -> Result<Detected, Error> {
    let model = board_model
        .map(|m| m.trim_matches(|c: char| c == '\0' || c.is_whitespace()))
        .filter(|m| !m.is_empty());
    let mem_gib = mem_total_bytes.filter(|&b| b > 0).map(|b| b as f64 / GIB);
    if let Some(model) = model {
        let lower = model.to_lowercase();
        let matching: Vec<&DevicePreset> = devices
            .iter()
            .filter(|d| d.models.iter().any(|m| lower.contains(&m.trim().to_lowercase())))
            .collect();
        let mut best: Option<&DevicePreset> = None;
        for &d in &matching {
            let better = match (best, mem_gib) {
                (None, _) => true,
                (Some(b), Some(mem)) => (d.memory_gib - mem).abs() <= (b.memory_gib - mem).abs(),
                // Memory unknown: the smallest of the family, the safe guess.
                (Some(b), None) => d.memory_gib <= b.memory_gib,
            };
            if better {
                best = Some(d);
            }
        }
        if let Some(preset) = best {
            let reason = match mem_gib {
                Some(mem) => format!("board `{model}` with {mem:.1} GiB: {}", preset.name),
                None => format!(
                    "board `{model}`, memory unreadable: {}, the smallest of {}",
                    preset.name,
                    matching.iter().map(|d| d.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            };
            return Ok(Detected { preset: preset.clone(), known: true, reason });
        }
    }
    let Some(mem) = mem_gib else {
        let what = match model {
            Some(model) => {
                format!("board `{model}` matches no device preset and MemTotal (/proc/meminfo) is unreadable")
            }
            None => {
                "neither the board model (/proc/device-tree/model) nor MemTotal (/proc/meminfo) is readable"
                    .into()
            }
        };
        return Err(Error::Detect { reason: what });
    };
    let runtime_mib = devices.iter().find(|d| d.name == "x86-cpu").map_or(145.0, |d| d.runtime_mib);
    // A Jetson's GPU adds what the Orin presets count for it.
    let cuda_runtime_mib =
        devices.iter().find(|d| d.name.starts_with("orin-")).map_or(0.0, |d| d.cuda_runtime_mib);
    let reserve = (0.125 * mem).max(1.0);
    let gpu = model.is_some_and(|m| m.to_lowercase().contains("jetson"));
    let board = match model {
        Some(model) => format!("board `{model}` matches no device preset"),
        None => "no board model (/proc/device-tree/model unreadable: not a Jetson)".to_string(),
    };
    let preset = DevicePreset {
        name: "measured".into(),
        description: format!(
            "{}, {mem:.1} GiB measured (MemTotal)",
            model.map_or_else(|| "unknown board".to_string(), |m| format!("unknown board `{m}`"))
        ),
        memory_gib: mem,
        reserve_gib: reserve,
        unified: true,
        gpu,
        runtime_mib,
        cuda_runtime_mib: if gpu { cuda_runtime_mib } else { 0.0 },
        models: Vec::new(),
    };
    let reason = format!(
        "{board}: the budget comes from the measured memory, {mem:.1} GiB less a reserve of {reserve:.1} GiB{}; \
         add the board to a device file (`[[device]]` with its `models`, given with --devices FILE or in \
         {SYSTEM_DEVICES}) or give --board NAME",
        if gpu { "" } else { ", no GPU" }
    );
    Ok(Detected { preset, known: false, reason })
}

/// A board as asked (`--board`): `auto` (this board, detected: [`System::resolve_board`]), or a
/// preset's name. Read and written as its text, as requests and state files keep it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Board {
    /// This board, detected.
    Auto,
    /// This name (a preset's, or any).
    Named(String),
}

impl std::str::FromStr for Board {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "" => Err("a board name, or auto".into()),
            "auto" => Ok(Board::Auto),
            name => Ok(Board::Named(name.to_string())),
        }
    }
}

impl From<Board> for String {
    fn from(board: Board) -> String {
        board.to_string()
    }
}

impl TryFrom<String> for Board {
    type Error = String;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse()
    }
}

impl std::fmt::Display for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Board::Auto => f.write_str("auto"),
            Board::Named(name) => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Board {
        Board::Named(name.into())
    }

    #[test]
    fn a_jetsons_gpu_counts_its_cuda_context_and_its_cpu_does_not() {
        let devices = builtin_devices().expect("builtins");
        let nano = find_device(&devices, "orin-nano-4").expect("preset");
        assert_eq!(nano.cuda_runtime_mib, 512.0);
        assert_eq!(nano.runtime_bytes_on(false), nano.runtime_bytes());
        assert_eq!(nano.runtime_bytes_on(true), nano.runtime_bytes() + (512 << 20));
        let discrete = find_device(&devices, "gpu-8").expect("preset");
        assert_eq!(
            discrete.runtime_bytes_on(true),
            discrete.runtime_bytes(),
            "its runtime_mib holds the context"
        );
    }

    #[test]
    fn builtin_presets_parse_and_have_budgets() {
        let devices = builtin_devices().expect("builtin presets are valid");
        let nano = find_device(&devices, "orin-nano-4").expect("present");
        assert_eq!(nano.budget_bytes(), (2.25 * (1u64 << 30) as f64) as u64);
        let err = find_device(&devices, "nope").expect_err("unknown");
        assert!(err.to_string().contains("orin-agx-64"), "{err}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_rejected() {
        let p = Path::new("d.toml");
        let extra = "[[device]]\nname='a'\ndescription='b'\nmemory_gib=4.0\nreserve_gib=1.0\nruntime_mib=100.0\ncolour='red'\n";
        let err = parse_devices(p, extra).expect_err("unknown key");
        assert!(err.to_string().starts_with("d.toml:") && err.to_string().contains("colour"), "{err}");
        let bad =
            "[[device]]\nname='a'\ndescription='b'\nmemory_gib=4.0\nreserve_gib=5.0\nruntime_mib=100.0\n";
        assert!(parse_devices(p, bad).expect_err("reserve too big").to_string().contains("device `a`"));
        let auto =
            "[[device]]\nname='auto'\ndescription='b'\nmemory_gib=4.0\nreserve_gib=1.0\nruntime_mib=100.0\n";
        assert!(parse_devices(p, auto).expect_err("reserved name").to_string().contains("`auto`"));
        for memory in ["inf", "nan", "1e300"] {
            let text = format!(
                "[[device]]\nname='a'\ndescription='b'\nmemory_gib={memory}\nreserve_gib=1.0\nruntime_mib=100.0\n"
            );
            let err = parse_devices(p, &text).expect_err(memory).to_string();
            assert!(err.contains("memory_gib <= 16384"), "{memory}: {err}");
        }
    }

    fn gib(g: f64) -> Option<u64> {
        Some((g * GIB) as u64)
    }

    fn detected(model: Option<&str>, mem: Option<u64>) -> Detected {
        let devices = builtin_devices().expect("builtin presets are valid");
        detect(&devices, model, mem).expect("detected")
    }

    #[test]
    fn detect_picks_the_family_by_model_and_the_variant_by_memory() {
        let cases = [
            ("NVIDIA Jetson Orin Nano Developer Kit", 3.6, "orin-nano-4"),
            ("NVIDIA Jetson Orin Nano Developer Kit", 7.4, "orin-nano-8"),
            ("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super", 7.4, "orin-nano-8"),
            ("NVIDIA Jetson AGX Orin Developer Kit", 61.0, "orin-agx-64"),
            ("NVIDIA Jetson AGX Orin Developer Kit", 30.0, "orin-agx-32"),
            ("NVIDIA Jetson Orin NX Engineering Reference Developer Kit", 15.3, "orin-nx-16"),
            ("NVIDIA Jetson Orin NX Engineering Reference Developer Kit", 7.3, "orin-nx-8"),
        ];
        for (model, mem, want) in cases {
            let d = detected(Some(model), gib(mem));
            assert!(d.known, "{model}");
            assert_eq!(d.preset.name, want, "{model} {mem}");
        }
        // The file ends with a NUL byte; case does not matter.
        let d = detected(Some("nvidia jetson orin nano developer kit\0"), gib(7.4));
        assert_eq!(d.preset.name, "orin-nano-8");
        assert_eq!(d.reason, "board `nvidia jetson orin nano developer kit` with 7.4 GiB: orin-nano-8");
        // Memory unreadable: the smallest of the family.
        let d = detected(Some("NVIDIA Jetson Orin Nano Developer Kit"), None);
        assert!(d.known && d.preset.name == "orin-nano-4", "{}", d.reason);
    }

    #[test]
    fn detect_makes_a_preset_from_memory_for_an_unknown_board() {
        let d = detected(Some("Raspberry Pi 5 Model B Rev 1.0"), gib(7.9));
        assert!(!d.known);
        assert_eq!(d.preset.name, "measured");
        assert!((d.preset.memory_gib - 7.9).abs() < 1e-6 && (d.preset.reserve_gib - 1.0).abs() < 1e-6);
        assert!(!d.preset.gpu && d.preset.unified && d.preset.runtime_mib == 145.0);
        assert!(d.reason.contains("Raspberry Pi 5") && d.reason.contains("--devices FILE"), "{}", d.reason);
        let d = detected(None, gib(31.0));
        assert!(!d.known && !d.preset.gpu && d.preset.name == "measured");
        assert!((d.preset.reserve_gib - 31.0 * 0.125).abs() < 1e-6);
        assert!(d.reason.contains("measured memory"), "{}", d.reason);
        // A Jetson no preset knows still trains on its GPU.
        assert!(detected(Some("NVIDIA Jetson Thor Developer Kit"), gib(120.0)).preset.gpu);
        let devices = builtin_devices().expect("builtin presets are valid");
        let err = detect(&devices, None, None).expect_err("nothing readable");
        assert!(err.to_string().contains("--board NAME"), "{err}");
        assert!(detect(&devices, Some("Raspberry Pi"), None).is_err());
    }

    fn temp_file(name: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("headroom-plan-{}-{name}", std::process::id()));
        std::fs::write(&path, text).expect("write a temporary device file");
        path
    }

    /// A machine of files: this board model (`None`: no device tree), this MemTotal in bytes
    /// (`None`: no meminfo) and this system device file (`None`: none).
    fn machine(tag: &str, model: Option<&str>, mem: Option<u64>, devices: Option<&str>) -> System {
        let file = |name: &str, text: Option<String>| match text {
            Some(text) => temp_file(&format!("{tag}-{name}"), &text),
            None => std::env::temp_dir().join(format!("headroom-plan-{tag}-no-{name}")),
        };
        System {
            model: file("model", model.map(|m| format!("{m}\0"))),
            meminfo: file(
                "meminfo",
                mem.map(|b| format!("MemTotal:       {} kB\nMemFree: 1 kB\n", b / 1024)),
            ),
            devices: file("devices.toml", devices.map(String::from)),
        }
    }

    const ACME: &str = "[[device]]\nname='myboard'\ndescription='Acme Vision carrier, 6 GB'\nmemory_gib=6.0\n\
        reserve_gib=1.5\nruntime_mib=145.0\nmodels=['Acme Vision']\n";

    #[test]
    fn a_system_of_files_is_the_board_auto_resolves() {
        let nano = machine("nano", Some("NVIDIA Jetson Orin Nano Developer Kit"), gib(7.4), None);
        assert_eq!(
            nano.read_board(),
            (Some("NVIDIA Jetson Orin Nano Developer Kit".into()), gib(7.4).map(|b| b / 1024 * 1024))
        );
        assert_eq!(nano.resolve_board(&Board::Auto, None).expect("detected").name, "orin-nano-8");
        assert_eq!(nano.resolve_board(&named("orin-nano-4"), None).expect("named").name, "orin-nano-4");
        // A board of the system device file, found by its model string; a user file does the same.
        let acme =
            machine("acme", Some("Acme Vision 2 (Jetson Orin Nano module)"), Some(6_000_000_000), Some(ACME));
        assert_eq!(acme.resolve_board(&Board::Auto, None).expect("detected").name, "myboard");
        assert_eq!(acme.resolve_board(&named("myboard"), None).expect("named").name, "myboard");
        let bare =
            machine("bare", Some("Acme Vision 2 (Jetson Orin Nano module)"), Some(6_000_000_000), None);
        let err = bare.resolve_board(&named("myboard"), None).expect_err("not in the built-ins").to_string();
        assert!(err.contains("--board myboard") && err.contains("orin-agx-64"), "{err}");
        let user = temp_file("acme-user.toml", ACME);
        assert_eq!(bare.resolve_board(&Board::Auto, Some(&user)).expect("detected").name, "myboard");
        // No device tree (x86): a preset from the measured memory, no GPU; nothing: an error.
        let x86 = machine("x86", None, Some(8 << 30), None);
        let measured = x86.resolve_board(&Board::Auto, None).expect("measured");
        assert_eq!((measured.name.as_str(), measured.gpu), ("measured", false));
        assert_eq!(measured.budget_bytes(), 7 << 30);
        let nothing = machine("nothing", None, None, None);
        let err = nothing.resolve_board(&Board::Auto, None).expect_err("nothing readable").to_string();
        assert!(err.contains("give --board NAME"), "{err}");
    }

    #[test]
    fn other_machine_names_the_machine_a_named_board_is_not() {
        let devices = builtin_devices().expect("builtin presets are valid");
        let nano4 = find_device(&devices, "orin-nano-4").expect("preset").clone();
        let on_board = machine("on", Some("NVIDIA Jetson Orin Nano Developer Kit"), gib(3.6), None);
        assert_eq!(on_board.other_machine(&nano4, None), None);
        let bigger = machine("big", Some("NVIDIA Jetson Orin Nano Developer Kit"), gib(7.4), None);
        let other = bigger.other_machine(&nano4, None).expect("another board");
        assert!(other.contains("orin-nano-8"), "{other}");
        let x86 = machine("x86b", None, Some(8 << 30), None);
        assert_eq!(x86.other_machine(&nano4, None).as_deref(), Some("a machine without a board model"));
        let cpu = find_device(&devices, "x86-cpu").expect("preset").clone();
        assert_eq!(x86.other_machine(&cpu, None), None, "x86-cpu names no board model");
    }

    #[test]
    fn later_device_files_replace_presets_by_name_and_add_boards() {
        let system = temp_file(
            "system.toml",
            "[[device]]\nname='orin-nano-8'\ndescription='tuned'\nmemory_gib=8.0\nreserve_gib=3.5\nruntime_mib=200.0\nmodels=['Orin Nano']\n",
        );
        let user = temp_file(
            "user.toml",
            "[[device]]\nname='acme'\ndescription='Acme board'\nmemory_gib=8.0\nreserve_gib=2.0\nruntime_mib=145.0\nmodels=['Acme Vision']\n",
        );
        let builtins = builtin_devices().expect("builtin presets are valid");
        let devices = load_from(&system, Some(&user)).expect("load");
        assert_eq!(devices.len(), builtins.len() + 1);
        let nano = find_device(&devices, "orin-nano-8").expect("still there");
        assert_eq!((nano.description.as_str(), nano.reserve_gib), ("tuned", 3.5));
        assert_eq!(
            devices.iter().position(|d| d.name == "orin-nano-8"),
            builtins.iter().position(|d| d.name == "orin-nano-8")
        );
        let d = detect(&devices, Some("Acme Vision 2 (Orin)"), gib(7.4)).expect("detected");
        assert!(d.known && d.preset.name == "acme", "{}", d.reason);
        // No system file: the built-ins and the user file.
        let missing = std::env::temp_dir().join("headroom-plan-no-such-file.toml");
        assert_eq!(load_from(&missing, None).expect("builtins").len(), builtins.len());
        let bad = temp_file("bad.toml", "[[device]]\nname='x'\nmemory='lots'\n");
        let err = load_from(&missing, Some(&bad)).expect_err("bad file").to_string();
        assert!(err.starts_with(&bad.display().to_string()), "{err}");
        let err = load_from(&missing, Some(&missing)).expect_err("missing file").to_string();
        assert!(err.contains("headroom-plan-no-such-file.toml"), "{err}");
        for p in [system, user, bad] {
            let _ = std::fs::remove_file(p);
        }
    }
}
