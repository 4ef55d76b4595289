//! The inputs of `headroom field`, checked before anything runs: the files exist, the teacher,
//! the deployed model and the gate's sets share their classes, and the state folder is not among
//! the images the run labels.

use std::path::{Path, PathBuf};

use crate::detector::class_names;
use crate::{Context as _, bail, ensure};

/// A file that must exist, made absolute (a symbolic link stays one: the deployed path is the
/// link the service reads).
pub fn absolute_file(flag: &str, path: &Path) -> crate::Result<PathBuf> {
    ensure!(!path.is_dir(), "{flag} {}: is a folder; give the file", path.display());
    ensure!(path.is_file(), "{flag} {}: no such file", path.display());
    std::path::absolute(path).with_context(|| format!("{flag} {}", path.display()))
}

/// Where the state folder is (`--work`, else beside the deployed file), neither created nor moved:
/// for the checks before any work.
pub fn work_path(work: Option<&Path>, deployed: &Path) -> crate::Result<PathBuf> {
    match work {
        Some(w) => Ok(std::path::absolute(w)?),
        None => {
            let name = deployed
                .file_name()
                .with_context(|| format!("--model {}: no file name", deployed.display()))?;
            Ok(deployed.parent().unwrap_or(Path::new(".")).join(".headroom-field").join(name))
        }
    }
}

/// The state folder (`--work`, else `.headroom-field` beside the deployed file), created. With
/// `images` (a run), one inside the folder of new images is refused before anything is written:
/// the run would label its own files (plots, previews, exported images) as new images.
pub fn work_dir(work: Option<&Path>, deployed: &Path, images: Option<&Path>) -> crate::Result<PathBuf> {
    let given = work.is_some();
    let work = match work {
        Some(w) => std::path::absolute(w)?,
        None => default_work(deployed)?,
    };
    if let Some(images) = images {
        let (real_work, real_images) = (resolved(&work), resolved(images));
        if real_work.starts_with(&real_images) {
            let which = if given {
                format!("--work {}", work.display())
            } else {
                format!("the state folder {} (the default, beside --model)", work.display())
            };
            bail!(
                "{which} is inside --images {}: the run would label its own files as new images; give \
                 --work a folder outside {}",
                images.display(),
                images.display()
            );
        }
    }
    ensure!(
        !work.exists() || work.is_dir(),
        "the state folder {} exists and is not a folder: give --work another path",
        work.display()
    );
    std::fs::create_dir_all(&work)
        .with_context(|| format!("creating the state folder {}", work.display()))?;
    Ok(work)
}

/// The default state folder of `deployed`: `.headroom-field/<file name>` beside it, one per
/// deployed model, so that two models in one folder never share a run. The layout of earlier
/// versions (one `.headroom-field` holding `run/`, `labelled/`, `history/` directly) is moved into
/// the folder of the first model run after the upgrade, unless its run records another model.
fn default_work(deployed: &Path) -> crate::Result<PathBuf> {
    let root = deployed.parent().unwrap_or(Path::new(".")).join(".headroom-field");
    let name =
        deployed.file_name().with_context(|| format!("--model {}: no file name", deployed.display()))?;
    let work = root.join(name);
    const LEGACY: [&str; 3] = ["run", "labelled", "history"];
    if work.exists() || !LEGACY.iter().any(|entry| root.join(entry).is_dir()) {
        return Ok(work);
    }
    let recorded = crate::state::RunState::load(&root.join("run")).ok().map(|s| s.settings.model);
    if recorded.is_some_and(|model| !model.as_os_str().is_empty() && model != deployed) {
        return Ok(work);
    }
    std::fs::create_dir_all(&work)
        .with_context(|| format!("creating the state folder {}", work.display()))?;
    for entry in LEGACY {
        let from = root.join(entry);
        if from.exists() {
            std::fs::rename(&from, work.join(entry))
                .with_context(|| format!("moving {} into {}", from.display(), work.display()))?;
        }
    }
    tracing::info!(
        "the state folder of {} is now {} (one per deployed model); the earlier run, labels and history moved there",
        deployed.display(),
        work.display()
    );
    Ok(work)
}

/// `path` with its symbolic links and `..` resolved as far as it exists (the rest appended as
/// given): where it is, for comparing folders that may not exist yet.
fn resolved(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = existing.canonicalize() {
            return missing.iter().rev().fold(real, |p, name| p.join(name));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The inputs, checked before anything runs.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// `--images`, absolute.
    pub images: PathBuf,
    /// `--teacher`, absolute.
    pub teacher: PathBuf,
    /// `--model`, absolute (a symbolic link stays one).
    pub deployed: PathBuf,
    /// `--holdout`, absolute.
    pub holdout: PathBuf,
    /// `--old`, absolute.
    pub old: Option<PathBuf>,
    /// The deployed model's class names.
    pub names: Vec<String>,
}

/// The inputs of a field run as given (`--images`, `--teacher`, `--model`, `--holdout`, `--old`).
#[derive(Debug, Clone, Copy)]
pub struct Given<'a> {
    /// The folder of new images.
    pub images: &'a Path,
    /// The labelling teacher.
    pub teacher: &'a Path,
    /// The deployed model.
    pub model: &'a Path,
    /// The gate's labelled new-scene data.
    pub holdout: &'a Path,
    /// The old-scene data.
    pub old: Option<&'a Path>,
}

/// Checks every input, and that teacher, deployed model, holdout and old scenes share their classes.
pub fn check_inputs(given: Given<'_>) -> crate::Result<Inputs> {
    ensure!(given.images.is_dir(), "--images {}: no such folder", given.images.display());
    let images = std::path::absolute(given.images)?;
    let teacher = absolute_file("--teacher", given.teacher)?;
    let deployed = absolute_file("--model", given.model)?;
    let holdout = absolute_file("--holdout", given.holdout)?;
    let old = given.old.map(|p| absolute_file("--old", p)).transpose()?;
    let names = class_names("--model", &deployed)?;
    let teacher_names = class_names("--teacher", &teacher)?;
    ensure!(
        teacher_names == names,
        "--teacher {} has classes {} but the deployed model has {}: the teacher's labels would train the \
         wrong classes",
        teacher.display(),
        teacher_names.join(", "),
        names.join(", ")
    );
    for (flag, data) in [("--holdout", Some(&holdout)), ("--old", old.as_ref())] {
        let Some(data) = data else { continue };
        let config = headroom_core::dataset::DataConfig::load(data)?;
        ensure!(
            config.names == names,
            "{flag} {}: classes {} differ from the deployed model's {}",
            data.display(),
            config.names.join(", "),
            names.join(", ")
        );
        // Its images may sit in the folder of new images: labelling leaves them out by content
        // (`headroom label --exclude-like`), so the gate never scores training images.
        crate::gate::check_labelled(&config, flag)?;
    }
    Ok(Inputs { images, teacher, deployed, holdout, old, names })
}
