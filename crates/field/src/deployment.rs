//! What is deployed, beyond one file: the precision the service runs (`field run --deploy`), the
//! FP32 model each served file was exported from, and the TensorRT engine deployed beside it.
//!
//! - The deployed file is the ONNX of the precision asked for (`fp32`: the trained model; `fp16`,
//!   `int8`: its export). The gate measures exactly that file against exactly the one serving.
//! - A served FP16 or INT8 file cannot be trained. The FP32 model it came from is kept in the
//!   state folder under the served file's sha256 (`<work>/deployed/<sha256>.fp32.onnx`), with a
//!   record of the engine built with it (`<sha256>.json`): content is the identity, so a rollback,
//!   a moved folder or another updater's `mv` never pairs a file with the wrong source.
//! - An engine, when the export built one, is deployed beside the file (`model.onnx` →
//!   `model.engine`, its previous one `model.engine.prev`). The ONNX file's rename is the deploy's
//!   commit; the engine follows. [`reconcile_engine`] makes the engine beside the file the one
//!   recorded for it (from `.prev` when a kill fell between the two, or after a rollback): every
//!   field command runs it first, so a pair is never left mixed.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::Context as _;
use crate::served::{Precision, fp32_source_path, store};
use headroom_core::hash::sha256_file;

/// The engine deployed beside `deployed` (`model.onnx` → `model.engine`).
pub fn engine_path(deployed: &Path) -> PathBuf {
    deployed.with_extension("engine")
}

/// What the state folder knows of a served file: its precision, the FP32 model it came from, the
/// engine deployed with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The served file's precision.
    pub precision: Precision,
    /// The sha256 of the engine deployed with it; `None`: it was deployed without one.
    pub engine_sha256: Option<String>,
}

/// The record of the served file with this sha256.
pub fn record(work: &Path, served_sha256: &str) -> Option<Record> {
    let file = store(work).join(format!("{served_sha256}.json"));
    let text = std::fs::read_to_string(&file).ok()?;
    match serde_json::from_str(&text) {
        Ok(record) => Some(record),
        Err(e) => {
            tracing::warn!("{}: not a deployment record ({e}); ignored", file.display());
            None
        }
    }
}

/// Keeps what is about to be deployed at FP16 or INT8: the FP32 source of the served file and the
/// record of its engine (nothing for FP32: the file is its own source). Written before the deploy's rename, atomically; a deploy
/// that does not happen leaves a record [`prune`] removes.
pub fn remember(
    work: &Path,
    served: &Path,
    precision: Precision,
    fp32: &Path,
    engine: Option<&Path>,
) -> crate::Result<String> {
    let sha = sha256_file(served)?;
    if precision == Precision::Fp32 {
        // Its own source, and no engine of the loop's beside it: nothing to keep.
        return Ok(sha);
    }
    let dir = store(work);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let to = fp32_source_path(work, &sha);
    if !to.is_file() {
        let bytes = std::fs::read(fp32).with_context(|| format!("reading {}", fp32.display()))?;
        headroom_core::fsio::write_atomic(&to, &bytes)?;
    }
    let record = Record { precision, engine_sha256: engine.map(sha256_file).transpose()? };
    let text = serde_json::to_string_pretty(&record)? + "\n";
    headroom_core::fsio::write_atomic(&dir.join(format!("{sha}.json")), text.as_bytes())?;
    Ok(sha)
}

/// Removes the records of files that are neither deployed nor `.prev` (the store holds two models
/// at most, plus a candidate while it deploys).
pub fn prune(work: &Path, deployed: &Path) -> crate::Result<()> {
    let dir = store(work);
    if !dir.is_dir() {
        return Ok(());
    }
    let keep: Vec<String> = [deployed.to_path_buf(), crate::deploy::previous_path(deployed)]
        .iter()
        .filter(|p| p.is_file())
        .map(|p| sha256_file(p))
        .collect::<Result<_, _>>()?;
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry.with_context(|| format!("reading {}", dir.display()))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let sha = name.split('.').next().unwrap_or_default();
        if sha.len() == 64 && !keep.iter().any(|k| k == sha) {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    Ok(())
}

/// Deploys `engine` beside `deployed` once `deployed` is the model it was built with: the engine
/// there now becomes `.prev` (it belongs to the model that is `.prev` now); with no engine (no
/// trtexec tonight), an engine left there goes to `.prev` too, so no engine stays beside a model
/// it was not built from. Rerun after a kill at any point, it ends in the same state.
pub fn deploy_engine(deployed: &Path, engine: Option<&Path>) -> crate::Result<()> {
    let beside = engine_path(deployed);
    let previous = crate::deploy::previous_path(&beside);
    let incoming = engine.map(sha256_file).transpose()?;
    let current = beside.is_file().then(|| sha256_file(&beside)).transpose()?;
    if current.is_some() && current == incoming {
        return Ok(());
    }
    if current.is_some() {
        rename(&beside, &previous)?;
        if engine.is_none() {
            tracing::warn!(
                "no engine was built tonight (no trtexec): the engine beside the model was built from the \
                 previous one and is kept as {}",
                previous.display()
            );
        }
    }
    if let Some(engine) = engine {
        crate::deploy::copy_atomic(engine, &beside).context("deploying the engine")?;
    }
    Ok(())
}

/// Makes the engine beside `deployed` the one recorded for it: swaps in `.prev` when that is the
/// one (a rollback, or a kill between a deploy's two renames), moves away one that was deployed
/// with another model. For a deployed file the state folder has no record of (an FP32 model,
/// another updater's), only an engine recorded for the `.prev` model is moved (to `.prev`, with
/// its model); anything else is left as it is.
pub fn reconcile_engine(deployed: &Path, work: &Path) -> crate::Result<()> {
    if !deployed.is_file() {
        return Ok(());
    }
    let beside = engine_path(deployed);
    let previous = crate::deploy::previous_path(&beside);
    let swap = swap_path(&beside);
    let sha = |p: &Path| p.is_file().then(|| sha256_file(p)).transpose();
    let Some(record) = record(work, &sha256_file(deployed)?) else {
        let prev_model = crate::deploy::previous_path(deployed);
        let prev_engine = match sha(&prev_model)? {
            Some(prev_sha) => record(work, &prev_sha).and_then(|r| r.engine_sha256),
            None => None,
        };
        if prev_engine.is_some() && sha(&beside)? == prev_engine {
            rename(&beside, &previous)?;
            tracing::info!(
                "{}: the engine of {} goes with it to {}",
                beside.display(),
                prev_model.display(),
                previous.display()
            );
        }
        return Ok(());
    };
    // A swap a kill cut short: the engine went to the side, `.prev` may have come in.
    if swap.is_file() {
        if !beside.is_file() {
            rename(&previous, &beside)?;
        }
        rename(&swap, &previous)?;
    }
    let current = sha(&beside)?;
    if current == record.engine_sha256 {
        return Ok(());
    }
    match &record.engine_sha256 {
        Some(want) if sha(&previous)?.as_ref() == Some(want) => {
            if current.is_some() {
                rename(&beside, &swap)?;
                rename(&previous, &beside)?;
                rename(&swap, &previous)?;
            } else {
                rename(&previous, &beside)?;
            }
            tracing::info!(
                "{}: the engine built with the deployed model is back beside it",
                beside.display()
            );
        }
        Some(want) => tracing::warn!(
            "{}: the engine deployed with {} (sha256 {want}) is neither there nor in {}: a deploy that was \
             cut short puts it there as its run continues; otherwise the service must build the engine of \
             the deployed model",
            beside.display(),
            deployed.display(),
            previous.display()
        ),
        None => {
            // Deployed without an engine: one beside it belongs to another model.
            rename(&beside, &previous)?;
            tracing::warn!(
                "{}: the deployed model was deployed without an engine; the engine there is moved to {}",
                deployed.display(),
                previous.display()
            );
        }
    }
    Ok(())
}

/// The name an engine has while two engines swap places (`.model.engine.swap`).
fn swap_path(engine: &Path) -> PathBuf {
    let name = engine.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    engine.with_file_name(format!(".{name}.swap"))
}

fn rename(from: &Path, to: &Path) -> crate::Result<()> {
    std::fs::rename(from, to).with_context(|| format!("renaming {} to {}", from.display(), to.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::served::{fp32_source, source_of};

    fn write(path: &Path, bytes: &[u8]) {
        std::fs::write(path, bytes).expect("write");
    }

    fn read(path: &Path) -> Vec<u8> {
        std::fs::read(path).expect("read")
    }

    #[test]
    fn precisions_parse_and_name_their_files() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
        }
        assert!("int4".parse::<Precision>().is_err());
        let best = Path::new("/r/train/best.onnx");
        assert_eq!(
            Precision::Int8.export_of(best, Path::new("/r/export")),
            Path::new("/r/export/best.int8.onnx")
        );
        assert_eq!(Precision::Fp32.export_of(best, Path::new("/r/export")), best);
        assert!(Precision::Int8.runs_engine("int8-qdq") && !Precision::Fp16.runs_engine("int8-qdq"));
        assert_eq!(engine_path(Path::new("/srv/model.onnx")), Path::new("/srv/model.engine"));
    }

    /// The deploy's pair: the engine follows the model; a kill between the model's rename and the
    /// engine's leaves a mixed pair that the next command mends; a rollback of the model takes the
    /// engine with it.
    #[test]
    fn the_engine_follows_the_model_it_was_built_with() {
        let dir = tempfile::tempdir().expect("tempdir");
        let work = dir.path().join("work");
        let deployed = dir.path().join("model.onnx");
        let (old_engine, new_engine) = (dir.path().join("old.engine"), dir.path().join("new.engine"));
        let candidate = dir.path().join("best.fp16.onnx");
        let fp32 = dir.path().join("best.onnx");
        // Two detectors of the same classes and input (a rollback checks them).
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/demo");
        std::fs::copy(demo.join("yolov8n-shapes-160.onnx"), &deployed).expect("the student");
        std::fs::copy(demo.join("teacher-shapes-160.onnx"), &candidate).expect("the teacher");
        let old_model = read(&deployed);
        write(&old_engine, b"old engine");
        write(&new_engine, b"new engine");
        write(&fp32, b"new fp32");
        let beside = engine_path(&deployed);
        // Last night's deployment, with its engine.
        remember(&work, &deployed, Precision::Fp16, &fp32, Some(&old_engine)).expect("remember");
        deploy_engine(&deployed, Some(&old_engine)).expect("engine");
        assert_eq!(read(&beside), b"old engine");

        // Tonight: the model's rename lands, a kill falls before the engine's.
        let sha = remember(&work, &candidate, Precision::Fp16, &fp32, Some(&new_engine)).expect("remember");
        assert_eq!(read(&fp32_source(&work, &sha).expect("kept")), b"new fp32");
        let started = sha256_file(&deployed).expect("sha");
        crate::deploy::swap_in(&deployed, &candidate, &started, &mut || {}).expect("swap");
        // The next command mends nothing it cannot: the new engine is not beside it yet, `.prev`
        // is not it either.
        reconcile_engine(&deployed, &work).expect("reconcile");
        assert_eq!(read(&beside), b"old engine");
        // The rerun of the deploy step finishes the pair.
        deploy_engine(&deployed, Some(&new_engine)).expect("engine");
        assert_eq!(
            (read(&beside), read(&crate::deploy::previous_path(&beside))),
            (b"new engine".to_vec(), b"old engine".to_vec())
        );
        deploy_engine(&deployed, Some(&new_engine)).expect("again: nothing changes");
        assert_eq!(read(&crate::deploy::previous_path(&beside)), b"old engine");

        // A rollback of the model: the engine comes back with it.
        crate::deploy::rollback(&deployed, &work, &mut |_| {}).expect("rollback");
        assert_eq!(read(&deployed), old_model);
        reconcile_engine(&deployed, &work).expect("reconcile");
        assert_eq!(
            (read(&beside), read(&crate::deploy::previous_path(&beside))),
            (b"old engine".to_vec(), b"new engine".to_vec())
        );
        // A kill in the middle of the engines' swap: the next command finishes it.
        crate::deploy::rollback(&deployed, &work, &mut |_| {}).expect("rollback the rollback");
        std::fs::rename(&beside, swap_path(&beside)).expect("the swap's first rename");
        reconcile_engine(&deployed, &work).expect("reconcile");
        assert_eq!(
            (read(&beside), read(&crate::deploy::previous_path(&beside))),
            (b"new engine".to_vec(), b"old engine".to_vec())
        );
        assert!(!swap_path(&beside).exists());

        // Records of models neither deployed nor `.prev` go.
        write(&deployed, b"an updater's model");
        prune(&work, &deployed).expect("prune");
        assert!(fp32_source(&work, &sha).is_none(), "the candidate's source is no longer deployed");
        assert!(
            record(&work, &sha256_file(&crate::deploy::previous_path(&deployed)).expect("sha")).is_some()
        );
    }

    #[test]
    fn a_quantized_file_this_loop_did_not_deploy_names_where_its_source_goes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let served = dir.path().join("model.onnx");
        let err = source_of(&served, Precision::Int8, "ab12", dir.path()).expect_err("no source");
        let text = err.chain();
        assert!(text.contains("INT8 export") && text.contains("deployed/ab12.fp32.onnx"), "{text}");
        assert_eq!(source_of(&served, Precision::Fp32, "ab12", dir.path()).expect("itself"), served);
    }
}
