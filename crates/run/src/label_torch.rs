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
