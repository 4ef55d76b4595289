//! One `headroom export` as a value, [`ExportJob`]: what the command line's flags ask, or what the
//! field loop asks of its export step (serialized: `headroom_field::request`). Its sessions are
//! resolved where it runs ([`ExportJob::request`]), as `--device` is on the command line.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::request::ExportRequest;

/// Calibration images at most, when not asked (`--calib-images`).
pub const DEFAULT_CALIB_IMAGES: usize = 500;

/// The percentile of `--method percentile` and of `auto`'s percentile candidate, when not asked.
pub const DEFAULT_PERCENTILE: f64 = 99.99;

/// Epochs of the quantization-aware fine-tuning, when not asked (`--qat-epochs`).
pub const DEFAULT_QAT_EPOCHS: usize = 3;

/// The TensorRT version of calibration caches and engine names, when not asked (JetPack 6.1/6.2).
pub const DEFAULT_TRT_VERSION: headroom_trt::TrtVersion =
    headroom_trt::TrtVersion { major: 10, minor: 3, patch: 0 };

/// One export and how it runs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportJob {
    /// The files asked for (its sessions resolved by [`ExportJob::request`]).
    pub export: ExportRequest,
    /// Where ONNX Runtime calibrates and measures: cpu, cuda, cuda:N, auto.
    pub device: headroom_plan::DeviceChoice,
    /// ONNX Runtime threads (0: its default); the fine-tuning's too.
    pub threads: usize,
    /// Quantization-aware fine-tuning before the INT8 file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qat: Option<QatSettings>,
    /// Print the report as JSON on stdout.
    #[serde(default)]
    pub json: bool,
}

/// Quantization-aware fine-tuning (`--qat DATA.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QatSettings {
    /// The dataset it trains on.
    pub data: PathBuf,
    /// Epochs.
    pub epochs: usize,
}

impl ExportJob {
    /// The export request with its sessions: ONNX Runtime on `device` (the CPU, or the CUDA
    /// provider on the GPU named; `auto`: the first, when this build has the provider and one is
    /// visible).
    pub fn request(&self) -> crate::Result<ExportRequest> {
        crate::ensure!(
            self.export.fp16 || self.export.int8.is_some(),
            "nothing to export: ask for --fp16 and/or --int8"
        );
        crate::ensure!(
            self.qat.is_none() || self.export.int8.is_some(),
            "--qat fine-tunes for the INT8 file: ask for --int8"
        );
        let session = headroom_infer::provider::SessionRequest {
            device: self.device,
            providers: None,
            fallback: false,
            ..headroom_infer::provider::SessionRequest::cpu(self.threads)
        };
        Ok(ExportRequest { session: session.options()?, ..self.export.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::{Board, Calibration, EngineSettings, Int8Settings};

    #[test]
    fn a_job_round_trips_through_json_and_resolves_its_sessions_where_it_runs() {
        let job = ExportJob {
            export: ExportRequest {
                model: "/srv/run/train/best.onnx".into(),
                fp16: true,
                int8: Some(Int8Settings {
                    calib: "/data/camera".into(),
                    calib_images: DEFAULT_CALIB_IMAGES,
                    settle: std::time::Duration::from_secs(2),
                    method: Calibration::auto(DEFAULT_PERCENTILE),
                    sensitivity: None,
                    scales_from: None,
                }),
                imgsz: None,
                trt_version: DEFAULT_TRT_VERSION,
                engine: Some(EngineSettings {
                    board: Board::Named("orin-nano-4".into()),
                    devices: Some("/srv/run/device.toml".into()),
                    trtexec: Some("/usr/src/tensorrt/bin/trtexec".into()),
                    workspace: None,
                }),
                session: Default::default(),
                out: Some("/srv/run/export".into()),
                data: None,
                force: true,
            },
            device: headroom_plan::DeviceChoice::Cpu,
            threads: 2,
            qat: Some(QatSettings { data: "/srv/labelled/data.yaml".into(), epochs: DEFAULT_QAT_EPOCHS }),
            json: true,
        };
        let json = serde_json::to_string(&job).expect("json");
        let back: ExportJob = serde_json::from_str(&json).expect("back");
        assert_eq!(serde_json::to_string(&back).expect("json"), json);
        assert_eq!((&back.export.int8, &back.export.engine), (&job.export.int8, &job.export.engine));
        let request = back.request().expect("sessions on the CPU");
        assert_eq!(request.session.intra_threads, 2);
        let nothing = ExportJob {
            export: ExportRequest { fp16: false, int8: None, ..job.export.clone() },
            ..job.clone()
        };
        assert!(nothing.request().expect_err("nothing asked").to_string().contains("--fp16 and/or --int8"));
    }
}
