//! Loading a split: every image checked, its labels read, every problem collected.
//!
//! Policy, after Ultralytics' `verify_image_label`: an image that [`crate::imageio::usable_image`]
//! refuses (the filter `label` and `export --calib` apply too), or whose label file has
//! a bad line, is skipped; a missing label file means an image without boxes; duplicate label rows are
//! removed. headroom collects every problem into a [`LoadReport`] and logs one warning listing them;
//! with [`LoadOptions::strict`] the first problem that would skip an image is returned as the error
//! instead. Label files in the split's labels/ folders that belong to no image are listed too.

use std::path::{Path, PathBuf};

use super::config::{DataConfig, Split};
use super::labels::{YoloLabel, parse_label_rows, remove_duplicate_rows};
use super::layout::{label_path_for, list_images, orphan_labels};
use crate::imageio::usable_image;
use crate::{Error, Result};

/// How [`load_split`] treats problems.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Fail on the first image that would be skipped, instead of skipping it.
    pub strict: bool,
}

/// One usable image of a split.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageRecord {
    /// The image file.
    pub image: PathBuf,
    /// Its label file ([`label_path_for`]); it may not exist (no boxes).
    pub label: PathBuf,
    /// Width in pixels, EXIF orientation applied.
    pub width: u32,
    /// Height in pixels, EXIF orientation applied.
    pub height: u32,
    /// The boxes, duplicates removed, in file order.
    pub labels: Vec<YoloLabel>,
}

/// Everything found while loading a split.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Images listed by the split.
    pub images_listed: usize,
    /// Images with a label file (possibly empty).
    pub labels_found: usize,
    /// Images without a label file (kept, no boxes).
    pub labels_missing: usize,
    /// Images with an empty label file (kept, no boxes).
    pub labels_empty: usize,
    /// Why each skipped image was skipped; each error names the file (and line for labels).
    pub skipped: Vec<Error>,
    /// Problems that did not skip the image: duplicate label rows removed (one per row, with its
    /// line), JPEGs without end marker.
    pub warnings: Vec<Error>,
    /// Label files in the split's labels/ folders without an image.
    pub orphan_labels: Vec<PathBuf>,
}

impl LoadReport {
    /// No image skipped, nothing to warn about, no orphan labels.
    pub fn is_clean(&self) -> bool {
        self.skipped.is_empty() && self.warnings.is_empty() && self.orphan_labels.is_empty()
    }

    /// One line of counts, as Ultralytics prints after scanning.
    pub fn summary(&self) -> String {
        format!(
            "{} images: {} labelled, {} without label file, {} empty, {} skipped, {} warnings, {} orphan labels",
            self.images_listed,
            self.labels_found,
            self.labels_missing,
            self.labels_empty,
            self.skipped.len(),
            self.warnings.len(),
            self.orphan_labels.len()
        )
    }

    /// Logs one warning with the counts and every problem, if there is any.
    fn log(&self, what: &str) {
        if self.is_clean() {
            return;
        }
        let mut text = format!("{what}: {}", self.summary());
        for e in &self.skipped {
            text.push_str(&format!("\n  skipped: {e}"));
        }
        for e in &self.warnings {
            text.push_str(&format!("\n  warning: {e}"));
        }
        for p in &self.orphan_labels {
            text.push_str(&format!("\n  label without image: {}", p.display()));
        }
        tracing::warn!("{text}");
    }
}

/// A loaded split.
#[derive(Debug)]
pub struct LoadedSplit {
    /// Which split.
    pub split: Split,
    /// The usable images, sorted by path.
    pub images: Vec<ImageRecord>,
    /// What was found on the way.
    pub report: LoadReport,
}

impl LoadedSplit {
    /// A split without label files gives meaningless numbers (every box a false positive): refused
    /// when no image has one, with a warning when some lack one (Ultralytics warns "no labels
    /// found"). `data`: the data.yaml, for the message.
    pub fn require_labels(&self, data: &std::path::Path) -> Result<()> {
        let where_ = self
            .images
            .first()
            .and_then(|r| r.label.parent())
            .map_or_else(String::new, |p| format!(" (looked for them in {})", p.display()));
        if self.report.labels_found == 0 {
            return Err(Error::Dataset {
                path: data.to_path_buf(),
                message: format!(
                    "no image of the {} split has a label file{where_}; without labels there is nothing to measure \
                     (a folder of unlabelled images is for `headroom label`)",
                    self.split
                ),
            });
        }
        if self.report.labels_missing > 0 {
            tracing::warn!(
                "{} of {} images of the {} split have no label file{where_}: they count as images without \
                 objects, and any box found on them as a false positive",
                self.report.labels_missing,
                self.images.len(),
                self.split
            );
        }
        Ok(())
    }
}

/// Lists, checks and reads a split of a dataset. Errors (a split absent from the data.yaml or
/// pointing nowhere, no images, or in strict mode the first bad image) name the file at fault.
pub fn load_split(config: &DataConfig, split: Split, options: LoadOptions) -> Result<LoadedSplit> {
    let sources = config.split_sources(split).ok_or_else(|| Error::Dataset {
        path: config.file.clone(),
        message: format!("key `{}:` is absent or empty", split.key()),
    })?;
    let images = list_images(&config.file, split.key(), sources)?;
    let (images, mut report) = load_images(&images, config.nc(), options)?;
    report.orphan_labels = orphan_labels(&images.iter().map(|r| r.image.clone()).collect::<Vec<_>>())?;
    report.log(&format!("{} `{split}`", config.file.display()));
    Ok(LoadedSplit { split, images, report })
}

/// What reading the largest frame of `config`'s `train` and `val` images holds
/// ([`crate::imageio::read_cost`]), for the memory planner; 0 when none can be listed or read
/// (loading the data says why). Reads the start of every file (no pixel is decoded).
pub fn largest_frame_cost(config: &DataConfig) -> u64 {
    [Split::Train, Split::Val]
        .into_iter()
        .filter_map(|split| {
            let sources = config.split_sources(split)?;
            list_images(&config.file, split.key(), sources).ok()
        })
        .map(|images| crate::imageio::largest_read_cost(images.iter().map(PathBuf::as_path)))
        .max()
        .unwrap_or(0)
}

/// Checks and reads the given images and their labels (`nc` classes), in parallel. The report has
/// no orphan labels (see [`super::layout::orphan_labels`]) and is not logged.
pub fn load_images(
    images: &[PathBuf],
    nc: usize,
    options: LoadOptions,
) -> Result<(Vec<ImageRecord>, LoadReport)> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(8);
    let chunk = images.len().div_ceil(threads).max(1);
    let outcomes: Vec<Outcome> = std::thread::scope(|scope| {
        let workers: Vec<_> = images
            .chunks(chunk)
            .map(|part| scope.spawn(move || part.iter().map(|image| load_one(image, nc)).collect::<Vec<_>>()))
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
            .collect()
    });
    let mut report = LoadReport { images_listed: images.len(), ..LoadReport::default() };
    let mut records = Vec::with_capacity(images.len());
    for outcome in outcomes {
        report.warnings.extend(outcome.warnings);
        match outcome.label_file {
            LabelFile::Missing => report.labels_missing += 1,
            LabelFile::Empty => {
                (report.labels_found, report.labels_empty) =
                    (report.labels_found + 1, report.labels_empty + 1)
            }
            LabelFile::Found => report.labels_found += 1,
            LabelFile::Unknown => {}
        }
        match outcome.record {
            Ok(record) => records.push(record),
            Err(error) if options.strict => return Err(error),
            Err(error) => report.skipped.push(error),
        }
    }
    Ok((records, report))
}

/// What became of the label file of one image.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LabelFile {
    Missing,
    Empty,
    Found,
    /// Not looked at (the image itself failed).
    Unknown,
}

/// The result of loading one image.
struct Outcome {
    record: Result<ImageRecord>,
    label_file: LabelFile,
    warnings: Vec<Error>,
}

fn load_one(image: &Path, nc: usize) -> Outcome {
    let mut warnings = Vec::new();
    // The filter every step shares, without a settle time: the images of a dataset were finished by
    // whatever wrote them (`label` links only images it read whole). Decoding them here costs one
    // decode per image per load; it keeps an image that would fail later out of the run.
    let usable = match usable_image(image, std::time::Duration::ZERO) {
        Ok(usable) => usable,
        Err(error) => return Outcome { record: Err(error), label_file: LabelFile::Unknown, warnings },
    };
    warnings.extend(usable.warning);
    let (width, height) = usable.image.dimensions();
    drop(usable.image);
    let label = label_path_for(image);
    let text = match std::fs::read_to_string(&label) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Outcome { record: Err(Error::io(&label, e)), label_file: LabelFile::Found, warnings };
        }
    };
    let (labels, label_file) = match text {
        None => (Vec::new(), LabelFile::Missing),
        Some(text) => match parse_label_rows(&label, &text, nc) {
            Ok(mut rows) => {
                warnings.extend(remove_duplicate_rows(&label, &mut rows));
                let kind = if rows.is_empty() { LabelFile::Empty } else { LabelFile::Found };
                (rows.into_iter().map(|r| r.label).collect(), kind)
            }
            Err(error) => return Outcome { record: Err(error), label_file: LabelFile::Found, warnings },
        },
    };
    let record = ImageRecord { image: image.to_path_buf(), label, width, height, labels };
    Outcome { record: Ok(record), label_file, warnings }
}

#[cfg(test)]
#[path = "load_tests.rs"]
mod tests;
