//! The frozen trunk of a run as the trainer's [`Trunk`]: the feature cache (built with ONNX Runtime
//! or libtorch), ONNX Runtime on the trunk cut out of the model, or libtorch's executor.

use std::cell::RefCell;
use std::path::Path;

use headroom_core::dataset::ImageRecord;
use headroom_infer::provider::SessionOptions;
use headroom_infer::trunk::OrtTrunk;
use headroom_train::cache::{CacheKey, FeatureCache};
use headroom_train::tch::{Device, Kind, Tensor};
use headroom_train::trainer::Trunk;
use headroom_train::{Cut, Student};

use crate::Result;
use crate::observer::Observer;
use crate::spec::{RunSpec, TrunkRuntime};

/// What the trainer runs the trunk with for `spec`: the cache over `records` (in `dir/cache`,
/// rebuilt when stale), ONNX Runtime, or libtorch.
#[allow(clippy::too_many_arguments)]
pub fn trunk_for<'a>(
    spec: &RunSpec,
    model: &headroom_onnx::Model,
    student: &'a Student,
    records: &[ImageRecord],
    dir: &Path,
    base_sha: &str,
    threads: usize,
    observer: &mut dyn Observer,
) -> Result<Trunk<'a>> {
    // Nothing frozen (`all`, `affine`): no trunk to run, and no ONNX Runtime session held for it.
    let mut ort = match spec.trunk {
        TrunkRuntime::Ort if !student.partition().trunk.is_empty() => {
            let options = SessionOptions { intra_threads: threads, spinning: false, ..Default::default() };
            Some(OrtTrunk::open(model, &student.partition().cut, &options)?)
        }
        TrunkRuntime::Ort | TrunkRuntime::Torch => None,
    };
    if spec.cache_features {
        let key = CacheKey::new(
            base_sha.to_string(),
            if spec.renorm > 0 {
                format!("{}+renorm{}", spec.part, spec.renorm)
            } else {
                spec.part.to_string()
            },
            spec.settings.imgsz,
            spec.settings.flip > 0.0,
            records,
        );
        return Ok(Trunk::Cache(build_cache(dir, &key, records, student, ort.as_mut(), observer)?));
    }
    Ok(match ort {
        Some(mut ort) => {
            let names = student.partition().cut.clone();
            let device = student.executor().device();
            Trunk::External(RefCell::new(Box::new(move |images| ort_cut(&mut ort, &names, images, device))))
        }
        None => Trunk::Torch,
    })
}

/// Opens the run's feature cache, building it when it is missing or stale.
fn build_cache(
    dir: &Path,
    key: &CacheKey,
    records: &[ImageRecord],
    student: &Student,
    mut ort: Option<&mut OrtTrunk>,
    observer: &mut dyn Observer,
) -> Result<FeatureCache> {
    let names = student.partition().cut.clone();
    let mut trunk = |images: &Tensor| -> headroom_train::Result<Vec<Tensor>> {
        let cut = match ort.as_deref_mut() {
            Some(ort) => ort_cut(ort, &names, images, Device::Cpu)?,
            None => student.trunk(images)?,
        };
        names
            .iter()
            .map(|n| {
                cut.get(n)
                    .map(|t| t.shallow_clone())
                    .ok_or_else(|| headroom_train::Error::UnknownTensor { name: n.clone() })
            })
            .collect()
    };
    let observer = RefCell::new(observer);
    let cache =
        FeatureCache::open_or_build(&dir.join("cache"), key, records, &names, &mut trunk, &|done, total| {
            observer.borrow_mut().caching(done, total)
        });
    observer.borrow_mut().cached(cache.is_ok());
    let cache = cache?;
    tracing::info!("feature cache: {} entries in {}", cache.len(), dir.join("cache").display());
    Ok(cache)
}

/// The trunk on ONNX Runtime: libtorch images in, the cut as libtorch tensors on `device` out.
fn ort_cut(
    ort: &mut OrtTrunk,
    names: &[String],
    images: &Tensor,
    device: Device,
) -> headroom_train::Result<Cut> {
    let tensors = ort_outputs(ort, images, device)?;
    Ok(Cut::from_named(names.iter().cloned().zip(tensors)))
}

/// Runs `ort` on libtorch `images` `[B, 3, H, W]`; its outputs, in the order it was opened with, as
/// libtorch tensors on `device`.
pub(crate) fn ort_outputs(
    ort: &mut OrtTrunk,
    images: &Tensor,
    device: Device,
) -> headroom_train::Result<Vec<Tensor>> {
    // Image by image: static exports take a batch of 1 only (the batch is 1 or 2 anyway).
    let mut parts: Vec<Vec<Tensor>> = Vec::new();
    for i in 0..images.size()[0] {
        let image =
            images.f_narrow(0, i, 1)?.f_to_device(Device::Cpu)?.f_to_kind(Kind::Float)?.f_contiguous()?;
        let size = image.size();
        let shape = [1, size[1] as usize, size[2] as usize, size[3] as usize];
        let flat = Vec::<f32>::try_from(&image.f_reshape([-1])?)?;
        let outputs =
            ort.run(&flat, shape).map_err(|e| headroom_train::Error::Runtime { reason: e.to_string() })?;
        parts.resize_with(outputs.len(), Vec::new);
        for (k, (data, shape)) in outputs.into_iter().enumerate() {
            parts[k].push(Tensor::from_slice(&data).f_view(shape.as_slice())?);
        }
    }
    parts.into_iter().map(|p| Ok(Tensor::f_cat(&p, 0)?.f_to_device(device)?)).collect()
}
