//! What an export is asked to make: [`ExportRequest`], every setting of `headroom export` in its own
//! type, and the names of the files it writes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use headroom_infer::provider::SessionOptions;
use headroom_onnx::quant::Method;
use headroom_trt::TrtVersion;
use serde::{Deserialize, Serialize};

/// Calibration images above this count are refused (`--calib-images`).
pub const MAX_CALIB_IMAGES: usize = 100_000;

/// One export: which files, from which model, measured how. Serialized (the field loop's export
/// step, [`crate::job::ExportJob`]) without its sessions, which the process that exports resolves.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportRequest {
    /// The FP32 detector to export (an Ultralytics export, or a `headroom train` result).
    pub model: PathBuf,
    /// Write `<stem>.fp16.onnx`.
    pub fp16: bool,
    /// Write `<stem>.int8.onnx` (Q/DQ) and `<stem>.int8.calib` (TensorRT calibration cache).
    pub int8: Option<Int8Settings>,
    /// Input size of a model with a dynamic input (calibration; the `imgsz` metadata of the files).
    pub imgsz: Option<u32>,
    /// The TensorRT version the calibration cache and the engine names are for.
    pub trt_version: TrtVersion,
    /// Build TensorRT engines of the exported files.
    pub engine: Option<EngineSettings>,
    /// Where ONNX Runtime calibrates and measures (the CPU, or the CUDA provider on one GPU).
    #[serde(skip)]
    pub session: SessionOptions,
    /// Output folder [default: the model's folder].
    pub out: Option<PathBuf>,
    /// Score each file on this dataset's val split (mAP50-95).
    pub data: Option<PathBuf>,
    /// Replace existing outputs.
    pub force: bool,
}

/// How the INT8 file is calibrated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Int8Settings {
    /// A folder of images (searched recursively) or a data.yaml (its train split).
    pub calib: PathBuf,
    /// At most this many images, evenly spread over the sorted list.
    pub calib_images: usize,
    /// Images modified more recently than this are left (a camera may still write them).
    pub settle: Duration,
    /// How each tensor's range is chosen from its histogram.
    pub method: Calibration,
    /// Keep the Convs whose INT8 error is largest in float until the mAP50-95 drop on the request's
    /// `data` is at most this many points.
    pub sensitivity: Option<f64>,
    /// The activation scales of this Q/DQ file's Convs instead of the calibrated ones, its float
    /// Convs kept float: the INT8 file of a model trained quantization-aware at those scales
    /// (`headroom train --qat`) computes what the training saw.
    pub scales_from: Option<PathBuf>,
}

/// How the activation ranges are chosen from the calibration histograms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Calibration {
    /// This method for every tensor.
    Fixed(Method),
    /// Each method's INT8 file is run on calibration images, and the one whose outputs are closest
    /// to the FP32 model's is kept: chosen by measurement, on no label and no val image.
    Auto(Vec<Method>),
}

impl Calibration {
    /// `--method auto`'s candidates: minmax, this percentile, entropy.
    pub fn auto(percentile: f64) -> Calibration {
        Calibration::Auto(vec![Method::MinMax, Method::Percentile(percentile), Method::Entropy])
    }
}

/// Where and how engines are built.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineSettings {
    /// The board the engines are for (engine names, sidecars, the workspace bound).
    pub board: Board,
    /// More board presets (configs/devices.toml's form).
    pub devices: Option<PathBuf>,
    /// trtexec to use [default: `headroom_trt::find_trtexec`'s search].
    pub trtexec: Option<PathBuf>,
    /// trtexec's builder workspace in bytes [default: half the board preset's budget].
    pub workspace: Option<u64>,
}

pub use headroom_plan::Board;

impl EngineSettings {
    /// The board name of engine files and sidecars, and its preset when one of that name exists:
    /// a name as given; `auto` the preset this board matches, else `jetson`.
    pub fn board(&self) -> (String, Option<headroom_plan::DevicePreset>) {
        let system = headroom_plan::System::host();
        if let Board::Named(name) = &self.board {
            let devices = system.load_all(self.devices.as_deref()).unwrap_or_default();
            let preset = headroom_plan::find_device(&devices, name).ok().cloned();
            return (name.clone(), preset);
        }
        match system.detect(self.devices.as_deref()) {
            Ok(found) if found.known => (found.preset.name.clone(), Some(found.preset)),
            _ => ("jetson".into(), None),
        }
    }
}

/// The files an export writes.
#[derive(Debug, Clone)]
pub(crate) struct Outputs {
    pub(crate) dir: PathBuf,
    pub(crate) stem: String,
    pub(crate) fp16: PathBuf,
    pub(crate) int8: PathBuf,
    pub(crate) calib: PathBuf,
}

impl ExportRequest {
    /// The output folder and the files in it.
    pub(crate) fn outputs(&self) -> Outputs {
        let stem = self.model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let dir = match &self.out {
            Some(dir) => dir.clone(),
            None => self.model.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        Outputs {
            fp16: dir.join(format!("{stem}.fp16.onnx")),
            int8: dir.join(format!("{stem}.int8.onnx")),
            calib: dir.join(format!("{stem}.int8.calib")),
            dir,
            stem,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_names_round_trip() {
        for text in ["auto", "orin-nano-8gb", "my-board"] {
            let board: Board = text.parse().expect("a board");
            assert_eq!(board.to_string(), text);
        }
        assert_eq!("auto".parse::<Board>(), Ok(Board::Auto));
        assert!("".parse::<Board>().is_err());
    }

    #[test]
    fn outputs_sit_beside_the_model_unless_an_out_folder_is_given() {
        let mut request = ExportRequest {
            model: PathBuf::from("/m/best.onnx"),
            fp16: true,
            int8: None,
            imgsz: None,
            trt_version: "10.3.0".parse().expect("a version"),
            engine: None,
            session: SessionOptions::default(),
            out: None,
            data: None,
            force: false,
        };
        let outputs = request.outputs();
        assert_eq!(outputs.fp16, PathBuf::from("/m/best.fp16.onnx"));
        assert_eq!(outputs.calib, PathBuf::from("/m/best.int8.calib"));
        request.out = Some(PathBuf::from("/o"));
        assert_eq!(request.outputs().int8, PathBuf::from("/o/best.int8.onnx"));
        assert_eq!(request.outputs().stem, "best");
    }
}
