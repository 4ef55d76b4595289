//! The memory planner's view of a run (`headroom-plan`): the [`Setup`] a spec trains with, and the
//! planner's estimate of it on a device preset, recorded in `results.json` beside the run's
//! measured peak.

use headroom_core::dataset::ImageRecord;
use headroom_onnx::inspect::Inspection;
use headroom_onnx::{Model, Trainable};
use headroom_plan::{DevicePreset, Optimizer, Planner, Setup, TrunkRuntime};
use headroom_train::config::{OptimizerKind, TrainConfig};

use crate::spec::TrunkKind;

/// The planner's view of a run's settings.
pub fn setup_of(
    settings: &TrainConfig,
    trainable: Trainable,
    trunk: TrunkKind,
    cache_features: bool,
    train: &[ImageRecord],
) -> Setup {
    Setup {
        trainable,
        batch: settings.batch,
        nbs: settings.nbs,
        imgsz: [settings.imgsz[1], settings.imgsz[0]],
        checkpoint: settings.checkpoint,
        amp: settings.amp,
        optimizer: match settings.optimizer {
            OptimizerKind::Sgd => Optimizer::Sgd,
            OptimizerKind::AdamW => Optimizer::AdamW,
        },
        trunk: match trunk {
            TrunkKind::Torch => TrunkRuntime::Torch,
            TrunkKind::Ort => TrunkRuntime::Ort,
        },
        cache_features,
        objects: train.iter().map(|r| r.labels.len()).max().unwrap_or(0),
        images: train.len(),
    }
}

/// The planner's estimate of a run's configuration on `preset`, as `results.json` records it.
pub fn estimate_json(
    model: &Model,
    inspection: &Inspection,
    preset: &DevicePreset,
    setup: &Setup,
) -> serde_json::Value {
    let mut planner = Planner::new(model, inspection, preset.runtime_bytes());
    if !preset.unified {
        planner = planner.discrete();
    }
    match planner.estimate(setup) {
        Ok(e) => {
            let mb = |b: u64| (b as f64 / f64::from(1u32 << 20) * 10.0).round() / 10.0;
            let components: serde_json::Map<String, serde_json::Value> =
                e.components.at_peak().iter().map(|(n, v)| (n.to_string(), mb(*v).into())).collect();
            serde_json::json!({
                "device": preset.name,
                "estimate_mb": mb(e.peak),
                "training_estimate_mb": mb(e.components.training_peak()),
                "components_mb": components,
            })
        }
        Err(e) => serde_json::json!({ "device": preset.name, "error": e.to_string() }),
    }
}
