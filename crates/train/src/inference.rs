//! A whole ONNX detector run for inference in the executor: the teacher of `headroom label
//! --runtime torch` where ONNX Runtime has no GPU provider (PyPI has no aarch64 onnxruntime-gpu; a
//! Jetson bundle's is CPU-only) but libtorch has CUDA. No gradients; on CUDA under fp16 autocast
//! (convolutions and matrix products in half precision, the decode's additions and products back
//! in float, as torch.autocast runs them), on the CPU in float, where its outputs match ONNX
//! Runtime's within 1e-4 (tested: crates/cli/tests/label_torch.rs).

use headroom_onnx::{Dim, Model};
use tch::{Device, Kind, Tensor};

use crate::executor::Executor;
use crate::{Error, Result};

/// A detector on libtorch for inference.
#[derive(Debug)]
pub struct InferenceModel {
    executor: Executor,
    input: String,
    output: String,
    /// The export takes a fixed batch of one: a batch runs image by image.
    one_by_one: bool,
    half: bool,
}

impl InferenceModel {
    /// Imports `model` onto `device`; `half`: compute under fp16 autocast (CUDA only, refused on
    /// the CPU).
    pub fn new(model: &Model, device: Device, half: bool) -> Result<InferenceModel> {
        if half && device == Device::Cpu {
            return Err(Error::Config {
                key: "half".into(),
                reason: "half precision needs a CUDA device".into(),
            });
        }
        let executor = Executor::new(&model.graph, device)?;
        let input = model.graph.inputs.first().map(|i| i.name.clone());
        let output = model.graph.outputs.first().map(|o| o.name.clone());
        let (Some(input), Some(output)) = (input, output) else {
            return Err(Error::UnknownTensor {
                name: format!("{}: an input and an output", model.path.display()),
            });
        };
        let batch = model.graph.inputs[0].shape.as_ref().and_then(|s| s.first().cloned());
        Ok(InferenceModel { executor, input, output, one_by_one: batch == Some(Dim::Known(1)), half })
    }

    /// The device it runs on.
    pub fn device(&self) -> Device {
        self.executor.device()
    }

    /// Whether it computes in half precision.
    pub fn half(&self) -> bool {
        self.half
    }

    /// Runs `data`, a `[rows, 3, height, width]` batch scaled to [0, 1]; returns the first output
    /// in float, flat, with its shape.
    pub fn run(&self, data: &[f32], shape: [usize; 4]) -> Result<(Vec<f32>, Vec<usize>)> {
        let _no_grad = tch::no_grad_guard();
        let dims: Vec<i64> = shape.iter().map(|d| *d as i64).collect();
        let images = Tensor::f_from_slice(data)?.f_view(dims.as_slice())?.f_to(self.device())?;
        let output = if self.one_by_one && shape[0] > 1 {
            let mut parts = Vec::with_capacity(shape[0]);
            for i in 0..dims[0] {
                parts.push(self.forward(images.f_narrow(0, i, 1)?)?);
            }
            Tensor::f_cat(&parts, 0)?
        } else {
            self.forward(images)?
        };
        let output = output.f_to_kind(Kind::Float)?.f_to(Device::Cpu)?.f_contiguous()?;
        let size: Vec<usize> = output.size().iter().map(|d| (*d).max(0) as usize).collect();
        let flat = Vec::<f32>::try_from(output.f_flatten(0, -1)?)?;
        Ok((flat, size))
    }

    fn forward(&self, images: Tensor) -> Result<Tensor> {
        let targets = [self.output.as_str()];
        let run = || self.executor.run(vec![(self.input.clone(), images.shallow_clone())], &targets);
        let mut outputs = if self.half { tch::autocast(true, run)? } else { run()? };
        outputs.pop().ok_or_else(|| Error::UnknownTensor { name: self.output.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demo_teacher() -> Model {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/demo/teacher-shapes-160.onnx");
        Model::load(path).expect("the demo teacher")
    }

    #[test]
    fn a_batch_gives_each_image_its_own_output() {
        let model = InferenceModel::new(&demo_teacher(), Device::Cpu, false).expect("model");
        let pixels = 3 * 160 * 160;
        let data: Vec<f32> = (0..2 * pixels).map(|i| ((i * 7919) % 255) as f32 / 255.0).collect();
        let (both, shape) = model.run(&data, [2, 3, 160, 160]).expect("batch");
        assert_eq!(shape[0], 2);
        let (second, one) = model.run(&data[pixels..], [1, 3, 160, 160]).expect("one");
        assert_eq!(one[1..], shape[1..]);
        let per = one[1] * one[2];
        let largest = both[per..].iter().zip(&second).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(largest < 1e-4, "the second image alone and in a batch differ by {largest}");
        assert!(
            InferenceModel::new(&demo_teacher(), Device::Cpu, true).is_err(),
            "fp16 on the CPU is refused"
        );
    }
}
