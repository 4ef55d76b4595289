//! `headroom label --runtime torch`: the teacher run by headroom's libtorch executor
//! ([`headroom_train::inference::InferenceModel`]) behind the labelling pipeline's
//! [`TeacherModel`], so that a board whose ONNX Runtime has no GPU provider labels on its GPU all
//! the same. The input size, batch and output layout are read from the ONNX file as ONNX Runtime's
//! session reads them, so both runtimes letterbox and decode alike.

use std::path::{Path, PathBuf};

use headroom_infer::decode::OutputLayout;
use headroom_infer::label::{LabelRuntime, TeacherModel};
use headroom_infer::provider::ExecutionProvider;
use headroom_onnx::{Dim, Model, ModelMetadata};
use headroom_train::inference::InferenceModel;
use headroom_train::tch::Device;
use ndarray::ArrayView4;

use crate::{Error, Result};

/// A teacher on libtorch for labelling.
#[derive(Debug)]
pub struct TorchTeacher {
    model: InferenceModel,
    path: PathBuf,
    metadata: ModelMetadata,
    input_size: (u32, u32),
    static_batch: Option<usize>,
    output_shape: Vec<i64>,
}

impl TorchTeacher {
    /// Opens the teacher at `path` on `device`, in half precision (fp16 autocast) on CUDA, in float
    /// on the CPU.
    pub fn open(path: &Path, device: Device) -> Result<TorchTeacher> {
        // The model's errors name the file: say only which flag gave it.
        let model =
            Model::load(path).map_err(|e| Error::Spec { key: "--teacher".into(), reason: e.to_string() })?;
        let fail = |reason: String| Error::Input { path: path.to_path_buf(), reason };
        let dims = |shape: Option<&Vec<Dim>>| -> Vec<i64> {
            shape.map_or_else(Vec::new, |s| {
                s.iter()
                    .map(|d| match d {
                        Dim::Known(n) => *n,
                        _ => -1,
                    })
                    .collect()
            })
        };
        let input = dims(model.graph.inputs.first().and_then(|i| i.shape.as_ref()));
        let output_shape = dims(model.graph.outputs.first().and_then(|o| o.shape.as_ref()));
        // As ONNX Runtime's detector: the static input size, else the metadata's, else 640.
        let input_size =
            headroom_infer::label::teacher::input_size_of(&input, &model.metadata).ok_or_else(|| {
                fail(format!("expected an image input [batch, 3, height, width], not {input:?}"))
            })?;
        let static_batch = input.first().and_then(|b| usize::try_from(*b).ok()).filter(|b| *b > 1);
        let inference = InferenceModel::new(&model, device, device != Device::Cpu)?;
        Ok(TorchTeacher {
            model: inference,
            path: path.to_path_buf(),
            metadata: model.metadata.clone(),
            input_size,
            static_batch,
            output_shape,
        })
    }
}

impl TeacherModel for TorchTeacher {
    fn path(&self) -> &Path {
        &self.path
    }

    fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    fn input_size(&self) -> (u32, u32) {
        self.input_size
    }

    /// A batch of one is run image by image inside ([`InferenceModel::run`]), so the pipeline may
    /// send larger batches; only a fixed batch above one must be filled.
    fn static_batch(&self) -> Option<usize> {
        self.static_batch
    }

    fn declared_layout(&self) -> Option<OutputLayout> {
        headroom_infer::label::teacher::declared_layout_of(&self.output_shape, &self.metadata)
    }

    fn run_batch(&mut self, input: ArrayView4<'_, f32>) -> headroom_infer::Result<(Vec<f32>, Vec<usize>)> {
        let shape = [input.shape()[0], input.shape()[1], input.shape()[2], input.shape()[3]];
        let session = |reason: String| headroom_infer::Error::Session { path: self.path.clone(), reason };
        let data = input.as_slice().ok_or_else(|| session("the batch is not contiguous".into()))?;
        let (output, shape) = self.model.run(data, shape).map_err(|e| session(e.to_string()))?;
        if shape.len() != 3 {
            let shape = shape.iter().map(|d| *d as i64).collect();
            return Err(headroom_infer::Error::NotADetector {
                shape,
                reason: "expected a 3-D output".into(),
            });
        }
        Ok((output, shape))
    }

    fn runs_on(&self) -> (LabelRuntime, ExecutionProvider, bool) {
        let provider =
            if self.model.device() == Device::Cpu { ExecutionProvider::Cpu } else { ExecutionProvider::Cuda };
        (LabelRuntime::Torch, provider, self.model.half())
    }
}

/// The libtorch device the teacher of `job` runs on, when its runtime (or `auto`'s rule,
/// [`torch_in_auto`]) picks torch; `None`: ONNX Runtime labels.
pub fn teacher_device(job: &headroom_infer::label::job::LabelJob) -> Result<Option<Device>> {
    use headroom_plan::DeviceChoice;
    let device = job.session.device;
    use headroom_infer::label::job::TeacherRuntime;
    let torch = |choice: DeviceChoice| crate::device::torch_device(&crate::device::torch_text(choice));
    match job.runtime {
        TeacherRuntime::Onnxruntime => Ok(None),
        TeacherRuntime::Torch => {
            if job.streams.is_some_and(|n| n != 1) {
                return Err(Error::Request("--streams: the torch runtime runs one stream".into()));
            }
            if job.session.providers.is_some() {
                return Err(Error::Request(
                    "--ep names ONNX Runtime's providers: not with --runtime torch".into(),
                ));
            }
            Ok(Some(torch(device)?))
        }
        TeacherRuntime::Auto => {
            let asked_providers = job.session.providers.is_some();
            if asked_providers || device == DeviceChoice::Cpu || !headroom_train::cuda_available() {
                return Ok(None);
            }
            let (built, _) = headroom_infer::provider::gpu_available();
            let loaded = headroom_infer::runtime::environment().is_ok();
            let providers = if loaded { headroom_infer::runtime::available_providers() } else { Vec::new() };
            if !torch_in_auto(device, asked_providers, true, built, &providers) {
                return Ok(None);
            }
            let device = torch(match device {
                DeviceChoice::Auto => DeviceChoice::Cuda(None),
                other => other,
            })?;
            tracing::info!(
                "--runtime auto: this ONNX Runtime has no GPU provider here (providers: {}); the teacher runs in \
                 libtorch on {} in fp16",
                if providers.is_empty() { "none loaded".to_string() } else { providers.join(", ") },
                match device {
                    Device::Cuda(n) => format!("cuda:{n}"),
                    other => format!("{other:?}"),
                }
            );
            Ok(Some(device))
        }
    }
}

/// `--runtime auto`'s rule: torch when the device may be a GPU (`cuda`, `cuda:N` or `auto`), no
/// `--ep` named ONNX Runtime's providers, libtorch sees a GPU, and ONNX Runtime cannot reach it
/// (this build has no GPU provider compiled in, or the loaded library lists neither CUDA nor
/// TensorRT: a Jetson bundle's CPU-only ONNX Runtime).
pub fn torch_in_auto(
    device: headroom_plan::DeviceChoice,
    asked_providers: bool,
    libtorch_gpu: bool,
    ort_gpu_built: bool,
    ort_providers: &[String],
) -> bool {
    let ort_gpu =
        ort_gpu_built && ort_providers.iter().any(|p| p.starts_with("CUDA") || p.starts_with("Tensorrt"));
    device != headroom_plan::DeviceChoice::Cpu && !asked_providers && libtorch_gpu && !ort_gpu
}

#[cfg(test)]
mod teacher_device_tests {
    use super::torch_in_auto;
    use headroom_plan::DeviceChoice;

    #[test]
    fn auto_runs_torch_only_for_a_gpu_that_onnx_runtime_cannot_reach() {
        let cpu_only = ["AzureExecutionProvider".to_string(), "CPUExecutionProvider".to_string()];
        let gpu = ["TensorrtExecutionProvider".to_string(), "CUDAExecutionProvider".to_string()];
        // A Jetson bundle: libtorch sees the GPU, ONNX Runtime is PyPI's CPU build.
        assert!(torch_in_auto(DeviceChoice::Auto, false, true, false, &cpu_only));
        assert!(torch_in_auto(DeviceChoice::Cuda(Some(0)), false, true, true, &cpu_only));
        // onnxruntime-gpu with its providers (JetPack 6's): ONNX Runtime, as before.
        assert!(!torch_in_auto(DeviceChoice::Auto, false, true, true, &gpu));
        // A build without the CUDA feature cannot use the providers the library has.
        assert!(torch_in_auto(DeviceChoice::Auto, false, true, false, &gpu));
        // The CPU, --ep given, or no GPU for libtorch: ONNX Runtime.
        assert!(!torch_in_auto(DeviceChoice::Cpu, false, true, false, &cpu_only));
        assert!(!torch_in_auto(DeviceChoice::Auto, true, true, false, &cpu_only));
        assert!(!torch_in_auto(DeviceChoice::Auto, false, false, false, &cpu_only));
    }
}
