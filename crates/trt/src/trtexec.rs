//! `trtexec`: where it is, the command line for an engine, and running it.
//!
//! Flags are TensorRT 10's (`--workspace` became `--memPoolSize=workspace:<size>`; implicit batch,
//! Caffe and UFF are gone): `--onnx`, `--saveEngine`, `--fp16`, `--int8`, `--calib` (implicit INT8
//! from a calibration cache; TensorRT 11 removed it), `--memPoolSize=workspace:<N>M` (MiB),
//! `--timingCacheFile` (read and updated, so later builds reuse the timings),
//! `--minShapes/--optShapes/--maxShapes` (dynamic inputs), `--skipInference` (build only).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::engine::{Precision, TrtVersion};
use crate::{Error, Result};

/// Where JetPack installs `trtexec` (not on `PATH`).
pub const JETPACK_TRTEXEC: &str = "/usr/src/tensorrt/bin/trtexec";

/// The input shapes an engine is built for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Shapes {
    /// The model's own static shape.
    Static,
    /// A dynamic model: the range of shapes of one input, and the one to optimise for.
    Dynamic {
        /// The input's name (`images`).
        input: String,
        /// Smallest shape (`[1, 3, 320, 320]`).
        min: Vec<u64>,
        /// The shape kernels are tuned for.
        opt: Vec<u64>,
        /// Largest shape.
        max: Vec<u64>,
    },
}

/// An engine to build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineRequest {
    /// The ONNX model (float32, float16 or Q/DQ).
    pub onnx: PathBuf,
    /// The precision.
    pub precision: Precision,
    /// The builder's workspace limit (`None`: TensorRT's default, all device memory).
    pub workspace_bytes: Option<u64>,
    /// A timing cache, created if missing, reused and updated by each build.
    pub timing_cache: Option<PathBuf>,
    /// Static or dynamic shapes.
    pub shapes: Shapes,
    /// The engine file to write.
    pub out: PathBuf,
}

fn dims(shape: &[u64]) -> String {
    shape.iter().map(u64::to_string).collect::<Vec<_>>().join("x")
}

impl EngineRequest {
    /// Checks what trtexec would otherwise reject late: a dynamic range must have the same rank at
    /// min, opt and max, no zero dim, `min ≤ opt ≤ max` on every axis, and an input name without
    /// `:` or `,` (trtexec's separators).
    pub fn validate(&self) -> Result<()> {
        let Shapes::Dynamic { input, min, opt, max } = &self.shapes else { return Ok(()) };
        let bad = |reason: String| Err(Error::Request { reason });
        if input.is_empty() || input.contains([':', ',']) {
            return bad(format!(
                "input name `{input}` cannot be passed to trtexec (empty, or holds `:` or `,`)"
            ));
        }
        if min.len() != opt.len() || opt.len() != max.len() || min.is_empty() {
            return bad(format!("shapes of `{input}` differ in rank: min {min:?}, opt {opt:?}, max {max:?}"));
        }
        let ordered = min.iter().zip(opt).zip(max).all(|((a, b), c)| 0 < *a && a <= b && b <= c);
        if !ordered {
            return bad(format!("shapes of `{input}` need 0 < min ≤ opt ≤ max: {min:?}, {opt:?}, {max:?}"));
        }
        Ok(())
    }
}

/// The arguments (program name excluded) that build `request` with trtexec.
pub fn trtexec_args(request: &EngineRequest) -> Vec<String> {
    let mut args =
        vec![format!("--onnx={}", request.onnx.display()), format!("--saveEngine={}", request.out.display())];
    match &request.precision {
        Precision::Fp16 => args.push("--fp16".into()),
        Precision::Int8Qdq => args.extend(["--int8".into(), "--fp16".into()]),
        Precision::Int8Cache { cache } => {
            args.extend(["--int8".into(), "--fp16".into(), format!("--calib={}", cache.display())]);
        }
    }
    if let Some(bytes) = request.workspace_bytes {
        let mib = bytes.div_ceil(1 << 20).max(1);
        args.push(format!("--memPoolSize=workspace:{mib}M"));
    }
    if let Some(cache) = &request.timing_cache {
        args.push(format!("--timingCacheFile={}", cache.display()));
    }
    if let Shapes::Dynamic { input, min, opt, max } = &request.shapes {
        args.push(format!("--minShapes={input}:{}", dims(min)));
        args.push(format!("--optShapes={input}:{}", dims(opt)));
        args.push(format!("--maxShapes={input}:{}", dims(max)));
    }
    args.push("--skipInference".into());
    args
}

/// `program` and `args` as one line for a POSIX shell, quoting what needs it.
pub fn shell_command(program: &str, args: &[String]) -> String {
    let quote = |s: &str| {
        let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=,+@%".contains(c));
        if plain { s.to_string() } else { format!("'{}'", s.replace('\'', r"'\''")) }
    };
    std::iter::once(program).chain(args.iter().map(String::as_str)).map(quote).collect::<Vec<_>>().join(" ")
}

/// Finds `trtexec`: `explicit` (`--trtexec`; must exist), else `$TRTEXEC`, else JetPack's
/// location, else the first on `PATH`.
pub fn find_trtexec(explicit: Option<&Path>) -> Option<PathBuf> {
    let from_env = std::env::var_os("TRTEXEC").map(PathBuf::from);
    let path = std::env::var_os("PATH");
    find_trtexec_in(explicit.or(from_env.as_deref()), Path::new(JETPACK_TRTEXEC), path.as_deref())
}

/// [`find_trtexec`] with its inputs explicit: an explicit path (must exist), the JetPack location,
/// and a `PATH`-style list of folders.
pub fn find_trtexec_in(explicit: Option<&Path>, jetpack: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.to_path_buf());
    }
    if jetpack.is_file() {
        return Some(jetpack.to_path_buf());
    }
    path.into_iter().flat_map(std::env::split_paths).map(|dir| dir.join("trtexec")).find(|p| p.is_file())
}

/// What a build reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildOutput {
    /// The TensorRT version trtexec printed (`[TensorRT v100300]`).
    pub version: Option<TrtVersion>,
    /// The GPU it selected (`Selected Device: Orin`).
    pub gpu: Option<String>,
    /// Everything it printed.
    pub log: String,
}

/// The TensorRT version and GPU name in trtexec's log.
pub fn parse_log(log: &str) -> (Option<TrtVersion>, Option<String>) {
    let version = log.split("[TensorRT v").nth(1).and_then(|rest| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse().ok().map(TrtVersion::from_int)
    });
    let gpu = log
        .lines()
        .find_map(|l| l.split_once("Selected Device: ").map(|(_, name)| name.trim().to_string()))
        .filter(|name| !name.is_empty());
    (version, gpu)
}

fn tail(log: &str, lines: usize) -> String {
    let all: Vec<&str> = log.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Builds the engine `request` describes with trtexec (`explicit` as for [`find_trtexec`]).
/// trtexec writes beside `request.out` and the plan is renamed into place only when it succeeded,
/// so a failed build leaves no partial engine. Without trtexec: [`Error::TrtexecNotFound`] with
/// the command to run on the device.
pub fn build_engine(request: &EngineRequest, explicit: Option<&Path>) -> Result<BuildOutput> {
    build_engine_with(request, find_trtexec(explicit).as_deref())
}

/// [`build_engine`] with the trtexec to run given (`None`: none was found).
pub fn build_engine_with(request: &EngineRequest, trtexec: Option<&Path>) -> Result<BuildOutput> {
    let built = build_engine_unpublished(request, trtexec)?;
    let partial = headroom_core::fsio::temporary_path(&request.out);
    std::fs::rename(&partial, &request.out).map_err(|source| {
        let _ = std::fs::remove_file(&partial);
        Error::Io { path: request.out.clone(), source }
    })?;
    Ok(built)
}

/// [`build_engine_with`], leaving the plan at `headroom_core::fsio::temporary_path(&request.out)`
/// instead of renaming it into place (for a caller that publishes it with other files, e.g. through
/// a `headroom_core::fsio::FileSet`). A failed build leaves nothing there.
pub fn build_engine_unpublished(request: &EngineRequest, trtexec: Option<&Path>) -> Result<BuildOutput> {
    request.validate()?;
    let Some(trtexec) = trtexec else {
        let command = shell_command(JETPACK_TRTEXEC, &trtexec_args(request));
        return Err(Error::TrtexecNotFound { command });
    };
    let partial = headroom_core::fsio::temporary_path(&request.out);
    let args = trtexec_args(&EngineRequest { out: partial.clone(), ..request.clone() });
    let command = shell_command(&trtexec.to_string_lossy(), &args);
    let output = Command::new(trtexec)
        .args(&args)
        .output()
        .map_err(|source| Error::Io { path: trtexec.into(), source })?;
    let log =
        format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    let written = std::fs::metadata(&partial).is_ok_and(|m| m.len() > 0);
    if !output.status.success() || !written {
        let _ = std::fs::remove_file(&partial);
        let status = if output.status.success() {
            "exit 0 but no engine written".into()
        } else {
            output.status.to_string()
        };
        return Err(Error::BuildFailed { status, tail: tail(&log, 20), command });
    }
    let (version, gpu) = parse_log(&log);
    Ok(BuildOutput { version, gpu, log })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(precision: Precision, shapes: Shapes) -> EngineRequest {
        EngineRequest {
            onnx: "runs/x/best.fp16.onnx".into(),
            precision,
            workspace_bytes: None,
            timing_cache: None,
            shapes,
            out: "runs/x/best.fp16.orin-nano-8.trt10.3.engine".into(),
        }
    }

    #[test]
    fn fp16_static_is_the_short_command() {
        let args = trtexec_args(&request(Precision::Fp16, Shapes::Static));
        assert_eq!(
            args,
            [
                "--onnx=runs/x/best.fp16.onnx",
                "--saveEngine=runs/x/best.fp16.orin-nano-8.trt10.3.engine",
                "--fp16",
                "--skipInference"
            ]
        );
    }

    #[test]
    fn int8_cache_dynamic_with_workspace_and_timing_cache() {
        let mut r = request(
            Precision::Int8Cache { cache: "best.int8.calib".into() },
            Shapes::Dynamic {
                input: "images".into(),
                min: vec![1, 3, 320, 320],
                opt: vec![1, 3, 640, 640],
                max: vec![4, 3, 640, 640],
            },
        );
        r.workspace_bytes = Some((1 << 30) + 1);
        r.timing_cache = Some("/var/cache/headroom/orin.timing".into());
        let args = trtexec_args(&r);
        assert_eq!(
            args[2..],
            [
                "--int8",
                "--fp16",
                "--calib=best.int8.calib",
                "--memPoolSize=workspace:1025M",
                "--timingCacheFile=/var/cache/headroom/orin.timing",
                "--minShapes=images:1x3x320x320",
                "--optShapes=images:1x3x640x640",
                "--maxShapes=images:4x3x640x640",
                "--skipInference",
            ]
        );
        assert_eq!(trtexec_args(&request(Precision::Int8Qdq, Shapes::Static))[2..4], ["--int8", "--fp16"]);
    }

    #[test]
    fn bad_dynamic_ranges_are_refused() {
        let dynamic = |input: &str, min: Vec<u64>, max: Vec<u64>| {
            request(
                Precision::Fp16,
                Shapes::Dynamic { input: input.into(), min, opt: vec![1, 3, 640, 640], max },
            )
        };
        assert!(dynamic("images", vec![1, 3, 320, 320], vec![1, 3, 640, 640]).validate().is_ok());
        for (r, what) in [
            (dynamic("images", vec![1, 3, 800, 800], vec![1, 3, 640, 640]), "min ≤ opt ≤ max"),
            (dynamic("images", vec![1, 3, 320], vec![1, 3, 640, 640]), "rank"),
            (dynamic("a:b", vec![1, 3, 320, 320], vec![1, 3, 640, 640]), "`:`"),
        ] {
            let e = r.validate().expect_err(what).to_string();
            assert!(e.contains(what), "{e}");
        }
    }

    #[test]
    fn shell_quoting_keeps_plain_arguments_plain() {
        let args = vec!["--onnx=my model.onnx".to_string(), "--fp16".into(), "--calib=it's".into()];
        assert_eq!(
            shell_command("trtexec", &args),
            r"trtexec '--onnx=my model.onnx' --fp16 '--calib=it'\''s'"
        );
    }

    #[test]
    fn version_and_gpu_come_from_the_log() {
        let log = "&&&& RUNNING TensorRT.trtexec [TensorRT v100300] # trtexec --onnx=a.onnx\n\
                   [I] === Device Information ===\n[I] Selected Device: Orin\n";
        let (version, gpu) = parse_log(log);
        assert_eq!(version.map(|v| v.to_string()), Some("10.3.0".into()));
        assert_eq!(gpu.as_deref(), Some("Orin"));
        assert_eq!(parse_log("nothing"), (None, None));
    }

    #[test]
    fn search_order_is_explicit_then_jetpack_then_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let on_path = bin.join("trtexec");
        std::fs::write(&on_path, b"#!/bin/sh\n").expect("write");
        let jetpack = dir.path().join("jetpack-trtexec");
        let path_var = std::env::join_paths([dir.path().join("empty"), bin.clone()]).expect("join");

        assert_eq!(find_trtexec_in(None, &jetpack, Some(&path_var)), Some(on_path.clone()));
        std::fs::write(&jetpack, b"#!/bin/sh\n").expect("write");
        assert_eq!(find_trtexec_in(None, &jetpack, Some(&path_var)), Some(jetpack.clone()));
        assert_eq!(find_trtexec_in(Some(&on_path), &jetpack, None), Some(on_path.clone()));
        assert_eq!(find_trtexec_in(Some(&dir.path().join("missing")), &jetpack, None), None);
        assert_eq!(find_trtexec_in(None, &dir.path().join("no"), None), None);
    }
}
