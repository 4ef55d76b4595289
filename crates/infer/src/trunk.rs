//! A model's frozen trunk on ONNX Runtime: the nodes that compute the tensors a trainable head
//! starts from, cut out of the same file (`headroom_onnx::extract`), run without autograd's
//! bookkeeping (`headroom train --trunk ort`).

use std::path::{Path, PathBuf};

use ndarray::ArrayView4;
use ort::session::Session;
use ort::value::TensorRef;

use crate::provider::SessionOptions;
use crate::runtime::open_session_from_memory;
use crate::{Error, Result};

/// The trunk session and the names of the tensors it hands over.
pub struct OrtTrunk {
    session: Session,
    path: PathBuf,
    input_name: String,
    outputs: Vec<String>,
}

impl std::fmt::Debug for OrtTrunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtTrunk")
            .field("path", &self.path)
            .field("outputs", &self.outputs)
            .finish_non_exhaustive()
    }
}

impl OrtTrunk {
    /// Cuts the nodes computing `outputs` out of `model` and opens them with `options`.
    pub fn open(
        model: &headroom_onnx::Model,
        outputs: &[String],
        options: &SessionOptions,
    ) -> Result<OrtTrunk> {
        let bytes = headroom_onnx::extract::extract(model, outputs)?;
        let (session, _) = open_session_from_memory(&bytes, &model.path, options)?;
        let input_name = session.inputs().first().map(|i| i.name().to_string()).unwrap_or_default();
        Ok(OrtTrunk { session, path: model.path.clone(), input_name, outputs: outputs.to_vec() })
    }

    /// Runs a `[B, 3, H, W]` input given flat in `data`; each output (in the order asked for) flat,
    /// with its shape.
    pub fn run(&mut self, data: &[f32], shape: [usize; 4]) -> Result<Vec<(Vec<f32>, Vec<i64>)>> {
        let path = self.path.clone();
        let input = ArrayView4::from_shape(shape, data).map_err(|e| Error::Session {
            path: path.clone(),
            reason: format!("input of {} values for shape {shape:?}: {e}", data.len()),
        })?;
        let err = |e: ort::Error| Error::Session { path: path.clone(), reason: e.to_string() };
        let tensor = TensorRef::from_array_view(input).map_err(err)?;
        let outputs = self.session.run(ort::inputs![self.input_name.as_str() => tensor]).map_err(err)?;
        self.outputs
            .iter()
            .map(|name| {
                let value = outputs
                    .get(format!("{name}{}", headroom_onnx::extract::FLOAT_OUTPUT_SUFFIX).as_str())
                    .ok_or_else(|| Error::Session {
                        path: path.clone(),
                        reason: format!("no output `{name}`"),
                    })?;
                let (shape, data) = value.try_extract_tensor::<f32>().map_err(err)?;
                Ok((data.to_vec(), shape.iter().copied().collect()))
            })
            .collect()
    }

    /// The model the trunk was cut from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
