//! The feature cache (`headroom train --cache-features`): the frozen trunk's outputs for every
//! training image (and its mirror image when flips are on), computed once, stored as fp16 in one
//! file, and read back per batch with positioned reads, so an epoch runs only the trainable part.
//!
//! Reads use `pread` rather than a memory map: mapped pages count in the process's resident memory
//! (what a Jetson's shared memory budget is about) while the kernel's page cache does not.
//! The file is written to a temporary and renamed; its index (`index.json`) names the model, input
//! size, split and every image with its size and modification time: a cache that does not match
//! is rebuilt, never misused.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use headroom_core::dataset::ImageRecord;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::data::make_batch;
use crate::student::Cut;
use crate::{Error, Result};

/// What a cache was built for; a different key rebuilds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheKey {
    /// SHA-256 of the student file.
    pub model_sha256: String,
    /// The trained part (the cut depends on it).
    pub part: String,
    /// Input width and height.
    pub imgsz: [u32; 2],
    /// Mirror images cached too.
    pub flips: bool,
    /// Each image: path, size in bytes, modification time (seconds).
    pub images: Vec<(PathBuf, u64, u64)>,
}

impl CacheKey {
    /// The key of `records` for the rest of the fields.
    pub fn new(
        model_sha256: String,
        part: String,
        imgsz: [u32; 2],
        flips: bool,
        records: &[ImageRecord],
    ) -> CacheKey {
        let images = records
            .iter()
            .map(|r| {
                let meta = std::fs::metadata(&r.image).ok();
                let size = meta.as_ref().map_or(0, std::fs::Metadata::len);
                let mtime = meta
                    .and_then(|m| m.modified().ok())
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_secs());
                (r.image.clone(), size, mtime)
            })
            .collect();
        CacheKey { model_sha256, part, imgsz, flips, images }
    }
}

#[derive(Serialize, Deserialize)]
struct Index {
    key: CacheKey,
    /// Cut tensors in order, with their per-image shapes (`[1, C, H, W]`).
    cut: Vec<(String, Vec<i64>)>,
}

/// An open cache.
pub struct FeatureCache {
    file: File,
    path: PathBuf,
    cut: Vec<(String, Vec<i64>)>,
    /// Byte offset of each (image, mirrored) entry.
    offsets: HashMap<(PathBuf, bool), u64>,
}

/// The trunk as the cache sees it: `[1, 3, H, W]` images in, the cut tensors out (in `cut` order).
pub type TrunkFn<'a> = dyn FnMut(&Tensor) -> Result<Vec<Tensor>> + 'a;

impl FeatureCache {
    /// Opens the cache in `dir` when it was built for `key`, else builds it with `trunk` for the cut
    /// tensors `cut`; `progress(done, total)` while building.
    pub fn open_or_build(
        dir: &Path,
        key: &CacheKey,
        records: &[ImageRecord],
        cut: &[String],
        trunk: &mut TrunkFn<'_>,
        progress: &dyn Fn(usize, usize),
    ) -> Result<FeatureCache> {
        let (data, index_path) = (dir.join("features.f16"), dir.join("index.json"));
        let existing = std::fs::read(&index_path).ok().and_then(|b| serde_json::from_slice::<Index>(&b).ok());
        let index = match existing {
            Some(index) if index.key == *key && data.exists() => index,
            _ => {
                let _ = std::fs::remove_file(&index_path);
                build(dir, &data, key, records, cut, trunk, progress)?
            }
        };
        let file = File::open(&data).map_err(|e| io(&data, &e))?;
        let entry_len: u64 = index.cut.iter().map(|(_, s)| s.iter().product::<i64>() as u64 * 2).sum();
        let orientations: &[bool] = if key.flips { &[false, true] } else { &[false] };
        let mut offsets = HashMap::new();
        for (i, (image, _, _)) in key.images.iter().enumerate() {
            for (j, &mirrored) in orientations.iter().enumerate() {
                offsets.insert((image.clone(), mirrored), (i * orientations.len() + j) as u64 * entry_len);
            }
        }
        let expected = offsets.len() as u64 * entry_len;
        let found = file.metadata().map_err(|e| io(&data, &e))?.len();
        if found != expected {
            return Err(Error::File {
                reason: format!("{found} bytes, {expected} expected: delete the folder to rebuild it"),
                path: data,
            });
        }
        Ok(FeatureCache { file, path: data, cut: index.cut, offsets })
    }

    /// The cut of a batch: each image's entry (mirrored where `flips` says), concatenated, as f32 on
    /// `device`.
    pub fn cut(&self, records: &[&ImageRecord], flips: &[bool], device: Device) -> Result<Cut> {
        let mut parts: Vec<Vec<Tensor>> = (0..self.cut.len()).map(|_| Vec::new()).collect();
        for (record, &mirrored) in records.iter().zip(flips) {
            let mut offset =
                *self.offsets.get(&(record.image.clone(), mirrored)).ok_or_else(|| Error::File {
                    path: self.path.clone(),
                    reason: format!(
                        "{} is not in the feature cache: delete the folder to rebuild it",
                        record.image.display()
                    ),
                })?;
            for (k, (_, shape)) in self.cut.iter().enumerate() {
                let count = shape.iter().product::<i64>() as usize;
                let mut bytes = vec![0u8; count * 2];
                self.file.read_exact_at(&mut bytes, offset).map_err(|e| io(&self.path, &e))?;
                offset += bytes.len() as u64;
                let halves: Vec<half::f16> =
                    bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes([b[0], b[1]])).collect();
                parts[k].push(Tensor::from_slice(&halves).view(shape.as_slice()));
            }
        }
        let tensors = self
            .cut
            .iter()
            .zip(parts)
            .map(|((name, _), p)| {
                Ok((name.clone(), Tensor::f_cat(&p, 0)?.f_to_kind(Kind::Float)?.f_to_device(device)?))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Cut::from_named(tensors))
    }

    /// Entries held (images × orientations).
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether the cache holds nothing.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// Computes every entry into a temporary, renames it, then writes the index.
fn build(
    dir: &Path,
    data: &Path,
    key: &CacheKey,
    records: &[ImageRecord],
    cut: &[String],
    trunk: &mut TrunkFn<'_>,
    progress: &dyn Fn(usize, usize),
) -> Result<Index> {
    std::fs::create_dir_all(dir).map_err(|e| io(dir, &e))?;
    let tmp = headroom_core::fsio::temporary_path(data);
    let result = write_entries(&tmp, key, records, cut, trunk, progress);
    let shapes = match result {
        Ok(shapes) => shapes,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, data).map_err(|e| io(data, &e))?;
    let index = Index { key: key.clone(), cut: cut.iter().cloned().zip(shapes).collect() };
    let path = dir.join("index.json");
    let json =
        serde_json::to_vec(&index).map_err(|e| Error::File { path: path.clone(), reason: e.to_string() })?;
    headroom_core::fsio::write_atomic(&path, &json)?;
    Ok(index)
}

fn write_entries(
    tmp: &Path,
    key: &CacheKey,
    records: &[ImageRecord],
    cut: &[String],
    trunk: &mut TrunkFn<'_>,
    progress: &dyn Fn(usize, usize),
) -> Result<Vec<Vec<i64>>> {
    let file = File::create(tmp).map_err(|e| io(tmp, &e))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let orientations: &[bool] = if key.flips { &[false, true] } else { &[false] };
    let by_path: HashMap<&PathBuf, &ImageRecord> = records.iter().map(|r| (&r.image, r)).collect();
    let mut shapes: Vec<Vec<i64>> = Vec::new();
    let total = key.images.len() * orientations.len();
    for (i, (path, _, _)) in key.images.iter().enumerate() {
        let record = by_path.get(path).ok_or_else(|| Error::File {
            path: path.clone(),
            reason: "not among the training images".into(),
        })?;
        for (j, &mirrored) in orientations.iter().enumerate() {
            let batch = make_batch(&[record], key.imgsz[0], key.imgsz[1], &[mirrored], Device::Cpu)?;
            let tensors = trunk(&batch.images)?;
            if tensors.len() != cut.len() {
                return Err(Error::Runtime {
                    reason: format!("the trunk gave {} tensors for {} cut names", tensors.len(), cut.len()),
                });
            }
            if shapes.is_empty() {
                shapes = tensors.iter().map(Tensor::size).collect();
            }
            for (t, shape) in tensors.iter().zip(&shapes) {
                if &t.size() != shape {
                    return Err(Error::File {
                        path: path.clone(),
                        reason: format!("the trunk's output has shape {:?}, {shape:?} before", t.size()),
                    });
                }
                let halves = Vec::<half::f16>::try_from(
                    &t.f_to_kind(Kind::Half)?.f_to_device(Device::Cpu)?.f_reshape([-1])?,
                )?;
                let bytes: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
                out.write_all(&bytes).map_err(|e| disk(tmp, &e))?;
            }
            progress(i * orientations.len() + j + 1, total);
        }
    }
    let file = out.into_inner().map_err(|e| disk(tmp, e.error()))?;
    file.sync_all().map_err(|e| disk(tmp, &e))?;
    Ok(shapes)
}

fn io(path: &Path, e: &std::io::Error) -> Error {
    Error::File { path: path.to_path_buf(), reason: e.to_string() }
}

fn disk(path: &Path, e: &std::io::Error) -> Error {
    let hint = if e.raw_os_error() == Some(28) {
        ": the disk is full — free space, or train without --cache-features (nothing was kept)"
    } else {
        ""
    };
    Error::File { path: path.to_path_buf(), reason: format!("writing the feature cache: {e}{hint}") }
}
