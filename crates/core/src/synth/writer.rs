//! Writing a generated dataset in the Ultralytics layout, in parallel and atomically.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use image::ImageEncoder;

use super::{CLASS_NAMES, Split, SynthConfig, generate_image};
use crate::dataset::labels::write_label_file;
use crate::fsio::write_atomic;
use crate::{Error, Result};

/// The manifest file written beside `data.yaml`; its presence marks a folder as synth's own.
pub const MANIFEST_FILE: &str = "synth.json";

/// The `generator` value of a manifest.
const GENERATOR: &str = "headroom synth";

/// The contents of `synth.json`: everything needed to regenerate the dataset bit for bit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynthManifest {
    /// Always `headroom synth`.
    pub generator: String,
    /// Version of the rendering; bumped whenever the same settings would give other pixels.
    pub format: u32,
    /// The settings (written flat: `preset`, `seed`, `train`, `val`, `width`, `height`).
    #[serde(flatten)]
    pub config: SynthConfig,
    /// The class names, in class-id order.
    pub names: Vec<String>,
}

impl SynthManifest {
    /// The manifest of a dataset generated with `config`.
    pub fn new(config: &SynthConfig) -> Self {
        Self {
            generator: GENERATOR.to_string(),
            format: 1,
            config: *config,
            names: CLASS_NAMES.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// The settings the dataset was generated with.
    pub fn config(&self) -> SynthConfig {
        self.config
    }
}

/// What [`write_dataset`] wrote.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SynthSummary {
    /// The output folder (absolute).
    pub out: PathBuf,
    /// The `data.yaml` to hand to a trainer.
    pub data_yaml: PathBuf,
    /// The settings used.
    pub config: SynthConfig,
    /// Number of images written (train + val).
    pub images: usize,
    /// Number of labelled boxes per class, in class-id order.
    pub boxes_per_class: Vec<usize>,
    /// Number of images without any labelled object.
    pub background_images: usize,
}

/// Per-worker counts.
#[derive(Default)]
struct Tally {
    boxes_per_class: [usize; CLASS_NAMES.len()],
    background_images: usize,
}

/// Writes the dataset of `config` under `out` with two worker threads; see
/// [`write_dataset_with_threads`].
pub fn write_dataset(
    config: &SynthConfig,
    out: &Path,
    progress: impl Fn(usize) + Sync,
) -> Result<SynthSummary> {
    write_dataset_with_threads(config, out, 2, progress)
}

/// Writes the dataset of `config` under `out`: `synth.json` first, then
/// `images/{train,val}/NNNNNN.png` with `labels/{train,val}/NNNNNN.txt`, and `data.yaml` last
/// (with the absolute path of `out`, because Ultralytics resolves a relative `path` against its
/// working directory). Every file is written atomically; the bytes do not depend on `threads`.
///
/// Rerunning with the same settings overwrites the generated files. Refuses (before writing
/// anything) a folder that holds a `data.yaml`, `images/` or `labels/` without a `synth.json`,
/// or a `synth.json` with other settings. `progress` is called after each image with the number
/// of images finished so far (in increasing order).
pub fn write_dataset_with_threads(
    config: &SynthConfig,
    out: &Path,
    threads: usize,
    progress: impl Fn(usize) + Sync,
) -> Result<SynthSummary> {
    config.validate()?;
    check_existing(out, config)?;
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let root = std::fs::canonicalize(out).map_err(|e| Error::io(out, e))?;
    let manifest = serde_json::to_string_pretty(&SynthManifest::new(config))
        .map_err(|source| Error::Json { path: root.join(MANIFEST_FILE), source })?;
    write_atomic(&root.join(MANIFEST_FILE), (manifest + "\n").as_bytes())?;

    let jobs: Vec<(Split, usize)> =
        Split::ALL.iter().flat_map(|&split| (0..config.count(split)).map(move |i| (split, i))).collect();
    let tally = run_workers(config, &root, &jobs, threads.max(1), &progress)?;

    let data_yaml = root.join("data.yaml");
    write_atomic(&data_yaml, data_yaml_text(config, &root)?.as_bytes())?;
    let summary = SynthSummary {
        out: root,
        data_yaml,
        config: *config,
        images: jobs.len(),
        boxes_per_class: tally.boxes_per_class.to_vec(),
        background_images: tally.background_images,
    };
    tracing::info!(
        out = %summary.out.display(),
        preset = %config.preset,
        seed = config.seed,
        train = config.train,
        val = config.val,
        boxes = summary.boxes_per_class.iter().sum::<usize>(),
        "synthetic dataset written"
    );
    Ok(summary)
}

/// Refuses to write into a folder that holds a dataset synth did not make with these settings.
fn check_existing(out: &Path, config: &SynthConfig) -> Result<()> {
    if !out.exists() {
        return Ok(());
    }
    if !out.is_dir() {
        return Err(Error::Dataset { path: out.to_path_buf(), message: "exists and is not a folder".into() });
    }
    let manifest_path = out.join(MANIFEST_FILE);
    match std::fs::read_to_string(&manifest_path) {
        Ok(text) => {
            let manifest: SynthManifest = serde_json::from_str(&text)
                .map_err(|source| Error::Json { path: manifest_path.clone(), source })?;
            let theirs = manifest.config();
            if manifest.generator != GENERATOR || theirs != *config {
                return Err(Error::Dataset {
                    path: manifest_path,
                    message: format!(
                        "this folder holds a synthetic dataset made with other settings (preset {}, seed {}, \
                         {} train + {} val, {}x{}); choose another output folder or delete this one",
                        theirs.preset, theirs.seed, theirs.train, theirs.val, theirs.width, theirs.height
                    ),
                });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            match ["data.yaml", "images", "labels"].iter().map(|n| out.join(n)).find(|p| p.exists()) {
                Some(path) => Err(Error::Dataset {
                    path,
                    message: format!(
                        "was not written by headroom synth (no {MANIFEST_FILE} beside it); refusing to \
                         overwrite it: choose another output folder"
                    ),
                }),
                None => Ok(()),
            }
        }
        Err(e) => Err(Error::io(manifest_path, e)),
    }
}

/// Generates and writes `jobs` on `threads` scoped threads (job `i` on thread `i % threads`);
/// stops at the first error.
fn run_workers(
    config: &SynthConfig,
    root: &Path,
    jobs: &[(Split, usize)],
    threads: usize,
    progress: &(impl Fn(usize) + Sync),
) -> Result<Tally> {
    let failed = AtomicBool::new(false);
    let finished = Mutex::new(0usize);
    let results: Vec<Result<Tally>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|worker| {
                let (failed, finished) = (&failed, &finished);
                scope.spawn(move || {
                    let mut tally = Tally::default();
                    for &(split, index) in jobs.iter().skip(worker).step_by(threads) {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        if let Err(e) = write_one(config, root, split, index, &mut tally) {
                            failed.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        // The lock orders the calls, so the counts reach `progress` increasing.
                        let mut done = finished.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        *done += 1;
                        progress(*done);
                    }
                    Ok(tally)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let mut total = Tally::default();
    for tally in results {
        let tally = tally?;
        for (sum, n) in total.boxes_per_class.iter_mut().zip(tally.boxes_per_class) {
            *sum += n;
        }
        total.background_images += tally.background_images;
    }
    Ok(total)
}

/// Generates one image and writes its image file (PNG, or JPEG with `jpeg_quality`) and label file.
fn write_one(config: &SynthConfig, root: &Path, split: Split, index: usize, tally: &mut Tally) -> Result<()> {
    let (image, labels) = generate_image(config, split, index);
    let extension = if config.jpeg_quality.is_some() { "jpg" } else { "png" };
    let image_path = root.join("images").join(split.name()).join(format!("{index:06}.{extension}"));
    let bytes = match config.jpeg_quality {
        Some(quality) => crate::imageio::jpeg::encode(&image, quality).map_err(|message| Error::Dataset {
            path: image_path.clone(),
            message: format!("cannot encode JPEG: {message}"),
        })?,
        None => {
            let mut png = Vec::with_capacity(image.as_raw().len() / 2);
            image::codecs::png::PngEncoder::new(&mut png)
                .write_image(image.as_raw(), image.width(), image.height(), image::ExtendedColorType::Rgb8)
                .map_err(|source| Error::ImageEncode { path: image_path.clone(), source })?;
            png
        }
    };
    write_atomic(&image_path, &bytes)?;
    let label_path = root.join("labels").join(split.name()).join(format!("{index:06}.txt"));
    write_label_file(&label_path, &labels)?;
    for label in &labels {
        if let Some(n) = tally.boxes_per_class.get_mut(label.class) {
            *n += 1;
        }
    }
    tally.background_images += usize::from(labels.is_empty());
    Ok(())
}

/// The `data.yaml` of the dataset under `root`.
fn data_yaml_text(config: &SynthConfig, root: &Path) -> Result<String> {
    #[derive(serde::Serialize)]
    struct DataYaml<'a> {
        path: &'a str,
        train: &'a str,
        val: &'a str,
        nc: usize,
        names: &'a [&'a str],
    }
    let path = root.join("data.yaml");
    let root_text = root.to_str().ok_or_else(|| Error::Dataset {
        path: root.to_path_buf(),
        message: "the output folder's path is not UTF-8, which data.yaml cannot hold; choose another".into(),
    })?;
    let body = serde_yaml_ng::to_string(&DataYaml {
        path: root_text,
        train: "images/train",
        val: "images/val",
        nc: CLASS_NAMES.len(),
        names: &CLASS_NAMES,
    })
    .map_err(|source| Error::Yaml { path, source })?;
    let SynthConfig { preset, seed, train, val, width, height, jpeg_quality } = *config;
    let jpeg = jpeg_quality.map(|q| format!(" --jpeg {q}")).unwrap_or_default();
    Ok(format!(
        "# Written by headroom synth; regenerate with:\n\
         # headroom synth --out <dir> --preset {preset} --seed {seed} --train {train} --val {val} --size {width}x{height}{jpeg}\n\
         {body}"
    ))
}
