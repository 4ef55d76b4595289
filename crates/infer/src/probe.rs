//! Running a model in ONNX Runtime and reading any of its tensors, not only the graph outputs: the
//! reference side of `headroom inspect --check` (the executor is compared on the raw head tensors as
//! well as on the outputs).

use headroom_onnx::Model;
use headroom_onnx::proto::{TypeProto, ValueInfoProto, tensor_proto::DataType, type_proto};
use ort::value::TensorRef;
use prost::Message;

use crate::provider::SessionOptions;
use crate::runtime::open_session_from_memory;
use crate::{Error, Result};

/// A float tensor read back from ONNX Runtime.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    /// The tensor's name.
    pub name: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its values, row-major.
    pub values: Vec<f32>,
}

/// Runs `model` on one float input (`shape`, `values`) and returns `tensors` (graph outputs or any
/// intermediate tensor of a float type, which is cast to float32 and added to the graph's outputs
/// for this run: an FP16 export's intermediate tensors are float16).
pub fn run_tensors(
    model: &Model,
    shape: &[usize],
    values: &[f32],
    tensors: &[String],
    options: &SessionOptions,
) -> Result<Vec<Probed>> {
    let mut proto = model.proto.clone();
    let graph = proto.graph.as_mut().ok_or_else(|| Error::Session {
        path: model.path.clone(),
        reason: "the model has no graph".into(),
    })?;
    let mut read_as = Vec::with_capacity(tensors.len());
    for name in tensors {
        if graph.output.iter().any(|o| o.name() == name) {
            read_as.push(name.clone());
        } else {
            // A Cast to float32 (a no-op on a float32 tensor) makes the probe independent of the
            // tensor's own float type.
            let probe = format!("{name}__headroom_probe_f32");
            graph.node.push(headroom_onnx::extract::cast_node(name, &probe));
            read_as.push(probe.clone());
            graph.output.push(ValueInfoProto {
                name: Some(probe),
                r#type: Some(TypeProto {
                    value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                        elem_type: Some(DataType::Float as i32),
                        shape: None,
                    })),
                    ..Default::default()
                }),
                ..Default::default()
            });
        }
    }
    let bytes = proto.encode_to_vec();
    let (mut session, _) = open_session_from_memory(&bytes, &model.path, options)?;
    let err = |e: ort::Error| Error::Session { path: model.path.clone(), reason: e.to_string() };
    let input_name = model.graph.inputs.first().map(|i| i.name.clone()).unwrap_or_default();
    let input = TensorRef::from_array_view((shape.to_vec(), values)).map_err(err)?;
    let outputs = session.run(ort::inputs![input_name.as_str() => input]).map_err(err)?;
    tensors
        .iter()
        .zip(&read_as)
        .map(|(name, read)| {
            let value = outputs.get(read.as_str()).ok_or_else(|| Error::Session {
                path: model.path.clone(),
                reason: format!("ONNX Runtime returned no tensor `{name}`"),
            })?;
            let (shape, data) = value.try_extract_tensor::<f32>().map_err(err)?;
            Ok(Probed {
                name: name.clone(),
                shape: shape.iter().map(|d| (*d).max(0) as usize).collect(),
                values: data.to_vec(),
            })
        })
        .collect()
}

/// Largest difference between `actual` and `expected`: absolute, and relative to the largest
/// magnitude of `expected` (a per-tensor scale, so values near zero do not blow the ratio up).
pub fn max_difference(actual: &[f32], expected: &[f32]) -> (f64, f64) {
    let scale = expected.iter().fold(0f64, |m, v| m.max(f64::from(v.abs())));
    let abs =
        actual.iter().zip(expected).fold(0f64, |m, (a, b)| m.max((f64::from(*a) - f64::from(*b)).abs()));
    (abs, if scale > 0.0 { abs / scale } else { abs })
}

/// Runs an open session once on a float input (for timing); the outputs are dropped.
pub fn run_session(
    session: &mut ort::session::Session,
    input: &str,
    shape: &[usize],
    values: &[f32],
) -> Result<()> {
    let err = |e: ort::Error| Error::Session { path: std::path::PathBuf::from(input), reason: e.to_string() };
    let tensor = TensorRef::from_array_view((shape.to_vec(), values)).map_err(err)?;
    let outputs = session.run(ort::inputs![input => tensor]).map_err(err)?;
    drop(outputs);
    Ok(())
}
