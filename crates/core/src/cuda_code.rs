//! Which GPUs a CUDA library carries code for, read from the file alone: the fat binaries in its
//! ELF section `.nv_fatbin` list each kernel image's kind (SASS for one architecture, or PTX that
//! the driver compiles for newer ones) and architecture. No GPU, no CUDA library and no loading is
//! needed, so this answers even where the library cannot be loaded (its CUDA libraries absent, or
//! another machine's file), and before the first kernel launch says "no kernel image is available".
//!
//! The layout is NVIDIA's fat binary container as `cuobjdump` reads it (undocumented; the same
//! fields as ZLUDA's and other readers'): containers one after another (8-byte aligned), each a
//! 16-byte header (magic `0xBA55ED50`, version, header size, size of its entries) followed by
//! entries, each a header (kind 1 PTX, 2 ELF/SASS, 4 the old cubin format, 8 NVVM/LTO IR; header
//! size at byte 4; padded payload size at 8; architecture, as a decimal number, at 28; flags at
//! 40) and its payload. Only headers are read: a payload is
//! skipped with a seek, compressed or not.
//!
//! [`verdict`] applies CUDA's compatibility rules to what was read: SASS of `sm_XY` runs on
//! devices of compute capability X.Z with Z ≥ Y on desktop GPUs only (NVIDIA's programming guide:
//! "binary compatibility … is not supported for Tegra"), PTX of `compute_XY` is compiled by the
//! driver for any capability ≥ X.Y.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The magic number opening each fat binary container.
pub const FATBIN_MAGIC: u32 = 0xBA55_ED50;
/// Bytes of a container header.
const CONTAINER_HEADER: u64 = 16;
/// The least bytes of an entry header that hold the fields read here.
const ENTRY_HEADER_MIN: u32 = 48;
/// Flag bits of an entry whose payload is compressed (0x2000 LZ4, 0x8000 ZSTD, 0x1000 an older
/// scheme).
const COMPRESSED_FLAGS: u64 = 0x1000 | 0x2000 | 0x8000;

/// Why a library's kernels could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum CudaCodeError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// Not an ELF file the reader understands.
    #[error("{path}: not an ELF shared library ({reason})")]
    NotElf {
        /// The file.
        path: PathBuf,
        /// What the ELF reader said.
        reason: String,
    },
    /// The `.nv_fatbin` section does not hold fat binaries as laid out above.
    #[error("{path}: .nv_fatbin at byte {offset}: {reason}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// Byte offset in the file.
        offset: u64,
        /// What was wrong.
        reason: String,
    },
}

/// The kind of one kernel image in a fat binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeKind {
    /// PTX (virtual architecture `compute_XY`): compiled by the driver for the device at load time.
    Ptx,
    /// SASS in an ELF cubin (real architecture `sm_XY`): runs as it is.
    Sass,
    /// Anything else (LTO intermediate code …): not run by the driver as it is.
    Other,
}

/// What a CUDA library carries: the architectures of its SASS and PTX (as numbers, `87` for
/// `sm_87`), and how much was read.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CarriedCode {
    /// Architectures with SASS.
    pub sass: BTreeSet<u32>,
    /// Architectures with PTX.
    pub ptx: BTreeSet<u32>,
    /// Architectures of other entries (neither SASS nor PTX).
    pub other: BTreeSet<u32>,
    /// Fat binary containers read.
    pub containers: usize,
    /// Kernel images (entries) read.
    pub entries: usize,
    /// Entries whose payload is compressed.
    pub compressed: usize,
}

impl CarriedCode {
    /// Whether the library has any GPU code at all.
    pub fn is_empty(&self) -> bool {
        self.sass.is_empty() && self.ptx.is_empty() && self.other.is_empty()
    }

    /// `SASS sm_80, sm_90; PTX compute_120` (or `no GPU code`).
    pub fn summary(&self) -> String {
        let list = |prefix: &str, set: &BTreeSet<u32>| {
            set.iter().map(|a| format!("{prefix}_{a}")).collect::<Vec<_>>().join(", ")
        };
        let mut parts = Vec::new();
        if !self.sass.is_empty() {
            parts.push(format!("SASS {}", list("sm", &self.sass)));
        }
        parts.push(if self.ptx.is_empty() {
            "no PTX".into()
        } else {
            format!("PTX {}", list("compute", &self.ptx))
        });
        if self.sass.is_empty() && self.ptx.is_empty() {
            return "no GPU code".into();
        }
        parts.join("; ")
    }
}

/// A GPU's compute capability, `8.7` for Orin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct ComputeCapability {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl ComputeCapability {
    /// Jetson Orin (AGX, NX, Nano): 8.7.
    pub const ORIN: ComputeCapability = ComputeCapability { major: 8, minor: 7 };

    /// The architecture number (`87`).
    pub fn arch(self) -> u32 {
        self.major * 10 + self.minor
    }

    /// From an architecture number (`87` → 8.7, `120` → 12.0).
    pub fn from_arch(arch: u32) -> ComputeCapability {
        ComputeCapability { major: arch / 10, minor: arch % 10 }
    }

    /// Parses `8.7` (nvidia-smi's `compute_cap`) or `sm_87`/`87`.
    pub fn parse(text: &str) -> Option<ComputeCapability> {
        let text = text.trim();
        if let Some((major, minor)) = text.split_once('.') {
            return Some(ComputeCapability { major: major.parse().ok()?, minor: minor.parse().ok()? });
        }
        let digits = text.strip_prefix("sm_").unwrap_or(text);
        digits.parse().ok().filter(|a| *a >= 10).map(ComputeCapability::from_arch)
    }
}

impl std::fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// Whether a library's code runs on a device, by CUDA's rules ([`verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "code", content = "arch", rename_all = "snake_case")]
pub enum Verdict {
    /// SASS for exactly this architecture: runs as it is.
    Native(u32),
    /// SASS of an earlier minor version of the same major (`sm_86` on 8.9): runs on a desktop GPU.
    Compatible(u32),
    /// PTX of this or an earlier architecture: the driver compiles it at the first launch (slow
    /// once, cached after).
    Ptx(u32),
    /// Only SASS of an earlier minor version of the same major, on a Tegra device (Orin): NVIDIA
    /// documents no binary compatibility across minor versions there. Expect "no kernel image is
    /// available" until a device shows otherwise.
    DesktopOnly(u32),
    /// No code that can run: "no kernel image is available for execution on the device".
    None,
}

impl Verdict {
    /// Whether kernels can be expected to launch.
    pub fn runs(self) -> bool {
        matches!(self, Verdict::Native(_) | Verdict::Compatible(_) | Verdict::Ptx(_))
    }

    /// In words, for `device` (`Orin (sm_87)`).
    pub fn describe(self, device: &str) -> String {
        match self {
            Verdict::Native(a) => format!("{device}: native code (SASS sm_{a})"),
            Verdict::Compatible(a) => {
                format!("{device}: runs SASS sm_{a} (same major version, a desktop GPU)")
            }
            Verdict::Ptx(a) => format!(
                "{device}: no SASS of its own; PTX compute_{a} is compiled by the driver at the first launch \
                 (minutes once, cached in ~/.nv/ComputeCache)"
            ),
            Verdict::DesktopOnly(a) => format!(
                "{device}: NO native code — only SASS sm_{a}, desktop code that NVIDIA does not support on \
                 Tegra (expect \"no kernel image is available\"), and no PTX it could compile"
            ),
            Verdict::None => format!(
                "{device}: NO code — neither its SASS, nor PTX it could compile (\"no kernel image is \
                 available for execution on the device\")"
            ),
        }
    }
}

/// Whether `code` runs on a device of `capability`; `tegra` for an integrated Jetson GPU, where
/// SASS of another minor version does not count. Native SASS first, then compatible SASS, then PTX.
pub fn verdict(code: &CarriedCode, capability: ComputeCapability, tegra: bool) -> Verdict {
    let arch = capability.arch();
    if code.sass.contains(&arch) {
        return Verdict::Native(arch);
    }
    let same_major = code.sass.iter().copied().filter(|a| a / 10 == capability.major && *a <= arch).max();
    if let (Some(a), false) = (same_major, tegra) {
        return Verdict::Compatible(a);
    }
    if let Some(a) = code.ptx.iter().copied().filter(|a| *a <= arch).max() {
        return Verdict::Ptx(a);
    }
    same_major.map_or(Verdict::None, Verdict::DesktopOnly)
}

/// Whether this machine is a Jetson (an integrated Tegra GPU), and which: the first line of
/// `ROOT/etc/nv_tegra_release` (`# R36 (release), REVISION: 4.3, ...`), else the device tree's
/// model when it names a Jetson (`NVIDIA Jetson AGX Orin Developer Kit`). `root` is `/` but for
/// tests.
pub fn tegra_board(root: &Path) -> Option<String> {
    if let Ok(text) = std::fs::read_to_string(root.join("etc/nv_tegra_release")) {
        let line = text.lines().next().unwrap_or("").trim().trim_start_matches('#').trim();
        return Some(if line.is_empty() { "L4T (nv_tegra_release)".into() } else { format!("L4T {line}") });
    }
    let model = std::fs::read(root.join("proc/device-tree/model")).ok()?;
    let model = String::from_utf8_lossy(&model).trim_end_matches('\0').trim().to_string();
    let lower = model.to_lowercase();
    ["jetson", "orin", "tegra", "xavier", "thor"].iter().any(|k| lower.contains(k)).then_some(model)
}

/// Reads the kernel images of the CUDA library at `path` (its `.nv_fatbin` section; a library
/// without one carries no GPU code and reads as empty).
pub fn read_cuda_code(path: &Path) -> Result<CarriedCode, CudaCodeError> {
    let io = |source| CudaCodeError::Io { path: path.to_path_buf(), source };
    let file = File::open(path).map_err(io)?;
    let Some((start, size)) = fatbin_section(path, &file)? else {
        return Ok(CarriedCode::default());
    };
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    read_containers(&mut reader, start, size).map_err(|e| match e {
        Fault::Io(source) => io(source),
        Fault::Layout { offset, reason } => {
            CudaCodeError::Malformed { path: path.to_path_buf(), offset, reason }
        }
    })
}

/// The file range of `.nv_fatbin`, through the `object` crate's ELF reader (section headers only).
fn fatbin_section(path: &Path, file: &File) -> Result<Option<(u64, u64)>, CudaCodeError> {
    use object::{Object, ObjectSection};
    let cache = object::ReadCache::new(file);
    let elf = object::File::parse(&cache)
        .map_err(|e| CudaCodeError::NotElf { path: path.to_path_buf(), reason: e.to_string() })?;
    Ok(elf.section_by_name(".nv_fatbin").and_then(|s| s.file_range()))
}

/// What went wrong inside the section.
enum Fault {
    Io(std::io::Error),
    Layout { offset: u64, reason: String },
}

impl From<std::io::Error> for Fault {
    fn from(e: std::io::Error) -> Fault {
        Fault::Io(e)
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or_default())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// Reads the containers of the section at `[start, start + size)` of `reader`.
fn read_containers<R: Read + Seek>(reader: &mut R, start: u64, size: u64) -> Result<CarriedCode, Fault> {
    let end = start + size;
    let mut code = CarriedCode::default();
    let mut at = start;
    while at + CONTAINER_HEADER <= end {
        reader.seek(SeekFrom::Start(at))?;
        let mut header = [0u8; CONTAINER_HEADER as usize];
        reader.read_exact(&mut header)?;
        let magic = u32_at(&header, 0);
        if magic == 0 {
            // Padding between containers (they are 8-byte aligned).
            at += 8;
            continue;
        }
        if magic != FATBIN_MAGIC {
            let reason =
                format!("0x{magic:08x} where a fat binary (magic 0x{FATBIN_MAGIC:08x}) should start");
            return Err(Fault::Layout { offset: at, reason });
        }
        let header_size = u64::from(u16_at(&header, 6));
        let entries_size = u64_at(&header, 8);
        let entries_start = at + header_size;
        let entries_end = entries_start + entries_size;
        if header_size < CONTAINER_HEADER || entries_end > end {
            let reason = format!(
                "a container of {entries_size} bytes (header {header_size}) runs past the section's end"
            );
            return Err(Fault::Layout { offset: at, reason });
        }
        read_entries(reader, entries_start, entries_end, &mut code)?;
        code.containers += 1;
        at = entries_end.next_multiple_of(8);
    }
    Ok(code)
}

/// Reads the entries of one container, `[at, end)`.
fn read_entries<R: Read + Seek>(
    reader: &mut R,
    mut at: u64,
    end: u64,
    code: &mut CarriedCode,
) -> Result<(), Fault> {
    while at < end {
        reader.seek(SeekFrom::Start(at))?;
        let mut header = [0u8; ENTRY_HEADER_MIN as usize];
        reader.read_exact(&mut header)?;
        let kind = u16_at(&header, 0);
        let header_size = u32_at(&header, 4);
        let payload = u64_at(&header, 8);
        let arch = u32_at(&header, 28);
        let flags = u64_at(&header, 40);
        let next = at + u64::from(header_size) + payload;
        if header_size < ENTRY_HEADER_MIN || next > end {
            let reason = format!(
                "an entry (kind {kind}, header {header_size} bytes, payload {payload}) runs past its container"
            );
            return Err(Fault::Layout { offset: at, reason });
        }
        match kind {
            1 => code.ptx.insert(arch),
            2 | 4 => code.sass.insert(arch),
            _ => code.other.insert(arch),
        };
        code.entries += 1;
        code.compressed += usize::from(flags & COMPRESSED_FLAGS != 0);
        at = next;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry as the CUDA tools lay it out: a 64-byte header and `payload` bytes.
    fn entry(kind: u16, arch: u32, payload: usize, flags: u64) -> Vec<u8> {
        let mut e = vec![0u8; 64];
        e[0..2].copy_from_slice(&kind.to_le_bytes());
        e[2..4].copy_from_slice(&0x0101u16.to_le_bytes());
        e[4..8].copy_from_slice(&64u32.to_le_bytes());
        e[8..16].copy_from_slice(&(payload as u64).to_le_bytes());
        e[28..32].copy_from_slice(&arch.to_le_bytes());
        e[32..36].copy_from_slice(&64u32.to_le_bytes());
        e[40..48].copy_from_slice(&flags.to_le_bytes());
        e.extend(std::iter::repeat_n(0xAB, payload));
        e
    }

    fn container(entries: &[Vec<u8>]) -> Vec<u8> {
        let body: Vec<u8> = entries.concat();
        let mut c = Vec::new();
        c.extend(FATBIN_MAGIC.to_le_bytes());
        c.extend(1u16.to_le_bytes());
        c.extend(16u16.to_le_bytes());
        c.extend((body.len() as u64).to_le_bytes());
        c.extend(body);
        c
    }

    fn read(section: &[u8]) -> Result<CarriedCode, Fault> {
        read_containers(&mut std::io::Cursor::new(section), 0, section.len() as u64)
    }

    #[test]
    fn containers_with_padding_list_their_architectures() {
        let mut section = container(&[entry(2, 80, 24, 0), entry(2, 90, 8, 0x2000), entry(1, 120, 12, 0)]);
        section.resize(section.len().next_multiple_of(8) + 8, 0);
        section.extend(container(&[entry(2, 80, 16, 0), entry(2, 120, 5, 0), entry(16, 100, 3, 0)]));
        let code = read(&section).unwrap_or_else(|_| panic!("read"));
        assert_eq!(code.sass, BTreeSet::from([80, 90, 120]));
        assert_eq!(code.ptx, BTreeSet::from([120]));
        assert_eq!(code.other, BTreeSet::from([100]));
        assert_eq!((code.containers, code.entries, code.compressed), (2, 6, 1));
        assert_eq!(code.summary(), "SASS sm_80, sm_90, sm_120; PTX compute_120");
    }

    #[test]
    fn a_damaged_section_names_the_byte() {
        let mut section = container(&[entry(2, 80, 24, 0)]);
        section.extend([0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        match read(&section) {
            Err(Fault::Layout { offset, reason }) => {
                assert_eq!(offset, 104);
                assert!(reason.contains("0x44332211"), "{reason}");
            }
            _ => panic!("a stray word is an error"),
        }
        let mut truncated = container(&[entry(2, 80, 24, 0)]);
        truncated.truncate(90);
        assert!(matches!(read(&truncated), Err(Fault::Layout { offset: 0, .. })));
    }

    fn carried(sass: &[u32], ptx: &[u32]) -> CarriedCode {
        CarriedCode {
            sass: sass.iter().copied().collect(),
            ptx: ptx.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn orin_needs_its_own_sass_or_ptx_it_can_compile() {
        let orin = ComputeCapability::ORIN;
        // PyTorch's CUDA 13 aarch64 wheels: no sm_87, no PTX below 12.0.
        let wheel = carried(&[80, 90, 100, 110, 120], &[]);
        assert_eq!(verdict(&wheel, orin, true), Verdict::DesktopOnly(80));
        assert!(!verdict(&wheel, orin, true).runs());
        // The same file on a desktop 8.7 would run the sm_80 code.
        assert_eq!(verdict(&wheel, orin, false), Verdict::Compatible(80));
        assert_eq!(verdict(&carried(&[80, 87], &[]), orin, true), Verdict::Native(87));
        assert_eq!(verdict(&carried(&[90], &[80]), orin, true), Verdict::Ptx(80));
        assert_eq!(verdict(&carried(&[90, 120], &[120]), orin, true), Verdict::None);
        let h100 = ComputeCapability { major: 9, minor: 0 };
        assert_eq!(verdict(&wheel, h100, false), Verdict::Native(90));
        let ada = ComputeCapability { major: 8, minor: 9 };
        assert_eq!(verdict(&carried(&[75, 80, 86, 90], &[90]), ada, false), Verdict::Compatible(86));
    }

    #[test]
    fn a_jetson_is_known_by_its_release_file_or_device_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(tegra_board(dir.path()), None);
        std::fs::create_dir_all(dir.path().join("proc/device-tree")).expect("mkdir");
        std::fs::write(dir.path().join("proc/device-tree/model"), "QEMU Virtual Machine\0").expect("write");
        assert_eq!(tegra_board(dir.path()), None);
        std::fs::write(dir.path().join("proc/device-tree/model"), "NVIDIA Jetson Orin Nano Developer Kit\0")
            .expect("write");
        assert_eq!(tegra_board(dir.path()).as_deref(), Some("NVIDIA Jetson Orin Nano Developer Kit"));
        std::fs::create_dir_all(dir.path().join("etc")).expect("mkdir");
        std::fs::write(
            dir.path().join("etc/nv_tegra_release"),
            "# R39 (release), REVISION: 2.0, GCID: 1, BOARD: generic, EABI: aarch64\n# KERNEL_VARIANT: oot\n",
        )
        .expect("write");
        let board = tegra_board(dir.path()).expect("tegra");
        assert!(board.starts_with("L4T R39 (release), REVISION: 2.0"), "{board}");
    }

    #[test]
    fn capabilities_parse_as_tools_print_them() {
        assert_eq!(ComputeCapability::parse("8.7"), Some(ComputeCapability::ORIN));
        assert_eq!(ComputeCapability::parse(" sm_120 "), Some(ComputeCapability { major: 12, minor: 0 }));
        assert_eq!(ComputeCapability::parse("[N/A]"), None);
        assert_eq!(ComputeCapability::ORIN.to_string(), "8.7");
    }

    #[test]
    fn a_file_without_gpu_code_reads_as_empty_and_a_non_elf_is_refused() {
        let exe = std::env::current_exe().expect("exe");
        let code = read_cuda_code(&exe).expect("an ELF without .nv_fatbin");
        assert!(code.is_empty() && code.summary() == "no GPU code", "{code:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let text = dir.path().join("libtorch_cuda.so");
        std::fs::write(&text, "not a library").expect("write");
        let err = read_cuda_code(&text).expect_err("not ELF");
        assert!(err.to_string().contains("libtorch_cuda.so: not an ELF"), "{err}");
    }
}
