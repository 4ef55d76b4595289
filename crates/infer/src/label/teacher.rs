//! What labelling needs of a teacher, whichever runtime runs it: ONNX Runtime
//! (`detector::Detector`) or headroom's libtorch executor (`headroom label --runtime
//! torch`, `headroom_run::label_torch`). The pipeline sends letterboxed batches and reads the
//! first output; decoding, NMS and writing are the same for both.

#[cfg(feature = "onnxruntime")]
use std::path::Path;

#[cfg(feature = "onnxruntime")]
use headroom_core::letterbox::LetterboxOptions;
use headroom_onnx::ModelMetadata;
#[cfg(feature = "onnxruntime")]
use ndarray::ArrayView4;

#[cfg(feature = "onnxruntime")]
use crate::Result;
use crate::decode::OutputLayout;

/// Which runtime ran the teacher (`manifest.json`'s `runtime`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LabelRuntime {
    /// ONNX Runtime, on the execution provider the manifest names.
    #[default]
    Onnxruntime,
    /// headroom's libtorch executor (inference only; fp16 autocast on CUDA).
    Torch,
}

impl std::fmt::Display for LabelRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LabelRuntime::Onnxruntime => "onnxruntime",
            LabelRuntime::Torch => "torch",
        })
    }
}

/// A detector's input width and height from its declared input shape (`[batch, 3, H, W]`, -1 for
/// a dynamic dimension), as both runtimes read it: the static size, else the metadata's `imgsz`,
/// else 640. `None` when the input is no image.
pub fn input_size_of(input_shape: &[i64], metadata: &ModelMetadata) -> Option<(u32, u32)> {
    match *input_shape {
        [_, 3, h, w] if h > 0 && w > 0 => Some((w as u32, h as u32)),
        [_, 3, _, _] => Some(metadata.imgsz.map(|[h, w]| (w, h)).unwrap_or((640, 640))),
        _ => None,
    }
}

/// The output layout a declared output shape (`[batch, d1, d2]`, -1 for dynamic) tells, when its
/// last two dimensions are static.
pub fn declared_layout_of(output_shape: &[i64], metadata: &ModelMetadata) -> Option<OutputLayout> {
    if output_shape.len() != 3 || output_shape.iter().skip(1).any(|d| *d <= 0) {
        return None;
    }
    OutputLayout::detect(output_shape, metadata.names.as_ref().map(Vec::len)).ok()
}

/// A teacher model the labelling pipeline runs (feature `onnxruntime`, which the pipeline needs) on batches of letterboxed images.
#[cfg(feature = "onnxruntime")]
pub trait TeacherModel: Send {
    /// The model file.
    fn path(&self) -> &Path;
    /// Its Ultralytics metadata (class names, stride, image size).
    fn metadata(&self) -> &ModelMetadata;
    /// Input width and height.
    fn input_size(&self) -> (u32, u32);
    /// The batch the model must be given, when fixed (a smaller batch is padded).
    fn static_batch(&self) -> Option<usize>;
    /// The output layout, from the declared output shape when it is static.
    fn declared_layout(&self) -> Option<OutputLayout>;
    /// Runs a `[B, 3, H, W]` batch scaled to [0, 1]; the first output, flat, with its `[B, d1, d2]`
    /// shape.
    fn run_batch(&mut self, input: ArrayView4<'_, f32>) -> Result<(Vec<f32>, Vec<usize>)>;
    /// Which runtime runs it and where: the runtime, the device's provider, and whether it computes
    /// in half precision.
    fn runs_on(&self) -> (LabelRuntime, crate::provider::ExecutionProvider, bool);

    /// The output layout of an output of `shape` `[batch, d1, d2]`.
    fn layout_of(&self, shape: &[usize]) -> Result<OutputLayout> {
        let shape: Vec<i64> = shape.iter().map(|d| *d as i64).collect();
        OutputLayout::detect(&shape, self.metadata().names.as_ref().map(Vec::len))
    }

    /// How the teacher letterboxes (Ultralytics `predict` on a fixed-shape model).
    fn letterbox_options(&self) -> LetterboxOptions {
        let (width, height) = self.input_size();
        LetterboxOptions { width, height, ..LetterboxOptions::square(width) }
    }

    /// Runs one batch of `rows` blank images and drops the result: ONNX Runtime allocates its
    /// buffers (and the TensorRT provider builds its engine, libtorch its CUDA context) on the
    /// first call, which should not count as labelling time.
    fn warm_up(&mut self, rows: usize) -> Result<()> {
        let rows = self.static_batch().unwrap_or(rows.max(1));
        let (w, h) = self.input_size();
        let input = ndarray::Array4::<f32>::zeros((rows, 3, h as usize, w as usize));
        self.run_batch(input.view()).map(|_| ())
    }
}
