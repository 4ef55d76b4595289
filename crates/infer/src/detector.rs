//! A YOLO detector on ONNX Runtime: letterbox → run → decode → NMS → boxes in image pixels.

use std::path::{Path, PathBuf};

use headroom_core::boxes::Detection;
use headroom_core::letterbox::{Letterbox, LetterboxOptions};
use headroom_core::preprocess::{InputGeometry, Preprocess};
use headroom_onnx::ModelMetadata;
use image::RgbImage;
use ndarray::{Array4, ArrayView4};
use ort::session::Session;
use ort::value::TensorRef;

use crate::decode::{DecodeOptions, OutputLayout, decode};
use crate::provider::{ExecutionProvider, SessionOptions};
use crate::runtime::{open_session, open_session_from_memory};
use crate::{Error, Result};

/// An ONNX detector ready to run.
pub struct Detector {
    session: Session,
    path: PathBuf,
    input_name: String,
    input_size: (u32, u32),
    input_batch: i64,
    output_shape: Vec<i64>,
    metadata: ModelMetadata,
    provider: ExecutionProvider,
}

impl std::fmt::Debug for Detector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Detector")
            .field("path", &self.path)
            .field("input_size", &self.input_size)
            .field("output_shape", &self.output_shape)
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl Detector {
    /// Opens `path`. The input size comes from the model's static input shape, else its `imgsz`
    /// metadata, else 640.
    pub fn open(path: &Path, options: &SessionOptions) -> Result<Self> {
        let (session, provider) = open_session(path, options)?;
        Self::from_session(session, provider, path)
    }

    /// Opens a model held in memory (`bytes`; `name` labels errors and reports), as [`Self::open`].
    pub fn open_from_memory(bytes: &[u8], name: &Path, options: &SessionOptions) -> Result<Self> {
        let (session, provider) = open_session_from_memory(bytes, name, options)?;
        Self::from_session(session, provider, name)
    }

    fn from_session(session: Session, provider: ExecutionProvider, path: &Path) -> Result<Self> {
        let meta_err = |reason: String| Error::Session { path: path.to_path_buf(), reason };
        let props: Vec<(String, String)> = {
            let meta = session.metadata().map_err(|e| meta_err(e.to_string()))?;
            let keys = meta.custom_keys().map_err(|e| meta_err(e.to_string()))?;
            keys.into_iter().filter_map(|k| meta.custom(&k).map(|v| (k, v))).collect()
        };
        let metadata = ModelMetadata::from_props(props.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .map_err(|source| Error::Metadata { path: path.to_path_buf(), source })?;
        let input = session.inputs().first().ok_or_else(|| meta_err("the model has no input".into()))?;
        let input_name = input.name().to_string();
        let input_shape: Vec<i64> = input.dtype().tensor_shape().map(|s| s.to_vec()).unwrap_or_default();
        let output = session.outputs().first().ok_or_else(|| meta_err("the model has no output".into()))?;
        let output_shape: Vec<i64> = output.dtype().tensor_shape().map(|s| s.to_vec()).unwrap_or_default();
        let input_batch = input_shape.first().copied().unwrap_or(1);
        let Some(input_size) = crate::label::teacher::input_size_of(&input_shape, &metadata) else {
            return Err(Error::NotADetector {
                shape: input_shape,
                reason: "expected an image input [batch, 3, height, width]".into(),
            });
        };
        // Check the layout now when the output shape is static.
        if output_shape.iter().skip(1).all(|d| *d > 0) {
            OutputLayout::detect(&output_shape, metadata.names.as_ref().map(Vec::len))?;
        }
        // Readiness is routine: at debug, so that a run's terminal shows its events, not every session.
        tracing::debug!(
            model = %path.display(), ?provider, input = ?input_size, output = ?output_shape, "detector ready"
        );
        Ok(Self {
            session,
            path: path.to_path_buf(),
            input_name,
            input_size,
            input_batch,
            output_shape,
            metadata,
            provider,
        })
    }

    /// The model's metadata (class names, stride, ...).
    pub fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    /// The model file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs a model with a dynamic input at `width` × `height` (multiples of 32) instead of the
    /// size its metadata gives; a static input must already have that size.
    pub fn set_input_size(&mut self, width: u32, height: u32) -> Result<()> {
        let dims = self.session.inputs().first().and_then(|i| i.dtype().tensor_shape().map(|s| s.to_vec()));
        let is_static = matches!(dims.as_deref(), Some([_, 3, h, w]) if *h > 0 && *w > 0);
        let fits = width > 0 && height > 0 && width.is_multiple_of(32) && height.is_multiple_of(32);
        if !fits || (is_static && (width, height) != self.input_size) {
            let input = if is_static {
                format!("static {}x{}", self.input_size.0, self.input_size.1)
            } else {
                "dynamic".into()
            };
            return Err(Error::Session {
                path: self.path.clone(),
                reason: format!(
                    "cannot run at {width}x{height}: the input is {input} (sizes are multiples of 32)"
                ),
            });
        }
        self.input_size = (width, height);
        Ok(())
    }

    /// Input width and height.
    pub fn input_size(&self) -> (u32, u32) {
        self.input_size
    }

    /// The execution provider that runs the model.
    pub fn provider(&self) -> ExecutionProvider {
        self.provider
    }

    /// The batch dimension of the input: `Some(n)` when fixed, `None` when dynamic.
    pub fn static_batch(&self) -> Option<usize> {
        usize::try_from(self.input_batch).ok().filter(|n| *n > 0)
    }

    /// The output shape the model declares (-1 for dynamic dimensions).
    pub fn output_shape(&self) -> &[i64] {
        &self.output_shape
    }

    /// The output layout, from the declared output shape when it is static.
    pub fn declared_layout(&self) -> Option<OutputLayout> {
        crate::label::teacher::declared_layout_of(&self.output_shape, &self.metadata)
    }

    /// The output layout of an output of `shape` `[batch, d1, d2]`.
    pub fn layout_of(&self, shape: &[usize]) -> Result<OutputLayout> {
        let shape_i64: Vec<i64> = shape.iter().map(|d| *d as i64).collect();
        OutputLayout::detect(&shape_i64, self.metadata.names.as_ref().map(Vec::len))
    }

    /// How this detector letterboxes (Ultralytics `predict` on a fixed-shape model).
    pub fn letterbox_options(&self) -> LetterboxOptions {
        LetterboxOptions {
            width: self.input_size.0,
            height: self.input_size.1,
            ..LetterboxOptions::square(self.input_size.0)
        }
    }

    /// The letterbox geometry this detector uses for an image `width` × `height`.
    pub fn letterbox_for(&self, width: u32, height: u32) -> Letterbox {
        Letterbox::new(width, height, &self.letterbox_options())
    }

    /// How `preprocess` brings an image `width` × `height` to this detector's input.
    pub fn input_geometry(&self, preprocess: Preprocess, width: u32, height: u32) -> InputGeometry {
        InputGeometry::new(preprocess, width, height, &self.letterbox_options())
    }

    /// Detects objects in `image`, prepared as Ultralytics' `predict` does; boxes are in `image`'s
    /// pixels, clipped to it.
    pub fn detect(&mut self, image: &RgbImage, options: &DecodeOptions) -> Result<Vec<Detection>> {
        let geometry = self.input_geometry(Preprocess::Predict, image.width(), image.height());
        let mut detections = self.detect_in_input(image, &geometry, options)?;
        for d in &mut detections {
            d.bbox = geometry.unmap(d.bbox);
        }
        Ok(detections)
    }

    /// Detects objects in `image` prepared with `geometry` (from [`Self::input_geometry`] for this
    /// image's size); boxes stay in the model input's pixels, unclipped, as Ultralytics' `val`
    /// matches them.
    pub fn detect_in_input(
        &mut self,
        image: &RgbImage,
        geometry: &InputGeometry,
        options: &DecodeOptions,
    ) -> Result<Vec<Detection>> {
        let input = to_nchw(&geometry.apply(image));
        self.run(&input, options)
    }

    /// Runs one preprocessed `[1, 3, H, W]` input; boxes in input pixels.
    fn run(&mut self, input: &Array4<f32>, options: &DecodeOptions) -> Result<Vec<Detection>> {
        let (data, shape) = self.raw_output(input)?;
        let layout = self.layout_of(&shape)?;
        let dims = [shape[1], shape[2]];
        Ok(decode(layout, &data[..dims[0] * dims[1]], dims, options))
    }

    /// Runs one preprocessed `[1, 3, H, W]` input and returns the first output, flat, with its shape.
    pub fn raw_output(&mut self, input: &Array4<f32>) -> Result<(Vec<f32>, Vec<usize>)> {
        self.run_batch(input.view())
    }

    /// Runs a preprocessed `[B, 3, H, W]` batch and returns the first output, flat, with its shape
    /// (a 3-D `[B, d1, d2]`, else [`Error::NotADetector`]).
    pub fn run_batch(&mut self, input: ArrayView4<'_, f32>) -> Result<(Vec<f32>, Vec<usize>)> {
        let path = self.path.clone();
        let err = |e: ort::Error| Error::Session { path: path.clone(), reason: e.to_string() };
        let tensor = TensorRef::from_array_view(input).map_err(err)?;
        let outputs = self.session.run(ort::inputs![self.input_name.as_str() => tensor]).map_err(err)?;
        let (shape, data) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
        let shape: Vec<usize> = shape.iter().map(|d| (*d).max(0) as usize).collect();
        if shape.len() != 3 {
            return Err(Error::NotADetector {
                shape: shape.iter().map(|d| *d as i64).collect(),
                reason: "expected a 3-D output".into(),
            });
        }
        Ok((data.to_vec(), shape))
    }
}

/// The labelling pipeline runs ONNX Runtime's detector as it runs libtorch's.
impl crate::label::TeacherModel for Detector {
    fn path(&self) -> &Path {
        Detector::path(self)
    }
    fn metadata(&self) -> &ModelMetadata {
        Detector::metadata(self)
    }
    fn input_size(&self) -> (u32, u32) {
        Detector::input_size(self)
    }
    fn static_batch(&self) -> Option<usize> {
        Detector::static_batch(self)
    }
    fn declared_layout(&self) -> Option<OutputLayout> {
        Detector::declared_layout(self)
    }
    fn run_batch(&mut self, input: ArrayView4<'_, f32>) -> Result<(Vec<f32>, Vec<usize>)> {
        Detector::run_batch(self, input)
    }
    fn runs_on(&self) -> (crate::label::LabelRuntime, ExecutionProvider, bool) {
        (crate::label::LabelRuntime::Onnxruntime, self.provider(), false)
    }
}

/// An RGB image as a `[1, 3, H, W]` tensor scaled to [0, 1], as Ultralytics feeds its models.
pub fn to_nchw(image: &RgbImage) -> Array4<f32> {
    let (w, h) = (image.width() as usize, image.height() as usize);
    Array4::from_shape_vec((1, 3, h, w), to_chw(image)).unwrap_or_else(|_| Array4::zeros((1, 3, h, w)))
}

/// Re-exported: the model input layout lives in `headroom_core::preprocess`.
pub use headroom_core::preprocess::to_chw;
