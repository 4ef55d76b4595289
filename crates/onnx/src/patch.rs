//! Weight write-back: new values for float initializers and extra `metadata_props`, written into the
//! model's own bytes.
//!
//! The file is edited at the protobuf wire level instead of being decoded and re-encoded: each
//! initializer's `raw_data` (or packed `float_data`) is overwritten in place — same element count, same
//! byte length — and nothing else moves. With no new values and no metadata the output is the input,
//! byte for byte; graph, node names, field order and any field this crate does not know survive.
//! Metadata entries are appended at the end of the `ModelProto` (protobuf merges repeated fields
//! wherever they appear); an existing entry with the same key is dropped so keys stay unique.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::Path;

use prost::Message;

use crate::error::{Error, Result};
use crate::proto::StringStringEntryProto;

/// Metadata key: sha256 of the model the fine-tune started from.
pub const KEY_BASE_SHA256: &str = "headroom_base_sha256";
/// Metadata key: the headroom version that wrote the weights.
pub const KEY_VERSION: &str = "headroom_version";
/// Metadata key: when the weights were written (RFC 3339, UTC).
pub const KEY_FINETUNED: &str = "headroom_finetuned";

const MODEL_GRAPH: u64 = 7;
const MODEL_METADATA: u64 = 14;
const GRAPH_INITIALIZER: u64 = 5;
const TENSOR_DATA_TYPE: u64 = 2;
const TENSOR_FLOAT_DATA: u64 = 4;
const TENSOR_NAME: u64 = 8;
const TENSOR_RAW_DATA: u64 = 9;
const TENSOR_DATA_LOCATION: u64 = 14;
const FLOAT: u64 = 1;

/// One wire field: number, wire type, the whole field's bytes, and its payload (for length-delimited).
#[derive(Debug, Clone)]
struct Field {
    number: u64,
    wire: u64,
    whole: Range<usize>,
    payload: Range<usize>,
    value: u64,
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at).ok_or("truncated varint")?;
        *at += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// The fields of the message in `bytes[range]`, with absolute offsets.
fn fields(bytes: &[u8], range: Range<usize>) -> Result<Vec<Field>, String> {
    let mut out = Vec::new();
    let mut at = range.start;
    while at < range.end {
        let start = at;
        let key = varint(bytes, &mut at)?;
        let (number, wire) = (key >> 3, key & 7);
        let (payload, value) = match wire {
            0 => {
                let v = varint(bytes, &mut at)?;
                (at..at, v)
            }
            1 => {
                at += 8;
                (at - 8..at, 0)
            }
            2 => {
                let len = usize::try_from(varint(bytes, &mut at)?).map_err(|_| "length too large")?;
                let end = at.checked_add(len).ok_or("length overflows")?;
                let p = at..end;
                at = end;
                (p, 0)
            }
            5 => {
                at += 4;
                (at - 4..at, 0)
            }
            other => return Err(format!("wire type {other} at byte {start}")),
        };
        if at > range.end {
            return Err(format!("field {number} at byte {start} runs past its message"));
        }
        out.push(Field { number, wire, whole: start..at, payload, value });
    }
    Ok(out)
}

/// Writes `weights` (initializer name → f32 values in row-major order) and `metadata` into the model
/// `bytes` (read from `path`, named in errors). Every name must be a float initializer with exactly
/// that many elements, stored inline (`raw_data` or `float_data`).
pub fn write_weights(
    bytes: &[u8],
    path: &Path,
    weights: &BTreeMap<String, Vec<f32>>,
    metadata: &[(String, String)],
) -> Result<Vec<u8>> {
    let err = |reason: String| Error::WriteBack { path: path.to_path_buf(), reason };
    let mut out = bytes.to_vec();
    let top = fields(bytes, 0..bytes.len()).map_err(&err)?;
    let mut written: HashSet<&str> = HashSet::new();
    for graph in top.iter().filter(|f| f.number == MODEL_GRAPH && f.wire == 2) {
        let graph_fields = fields(bytes, graph.payload.clone()).map_err(&err)?;
        for init in graph_fields.iter().filter(|f| f.number == GRAPH_INITIALIZER && f.wire == 2) {
            let tensor = fields(bytes, init.payload.clone()).map_err(&err)?;
            let name = tensor
                .iter()
                .find(|f| f.number == TENSOR_NAME && f.wire == 2)
                .map(|f| String::from_utf8_lossy(&bytes[f.payload.clone()]).into_owned())
                .unwrap_or_default();
            let Some((key, values)) = weights.get_key_value(&name) else { continue };
            let data_type = tensor.iter().find(|f| f.number == TENSOR_DATA_TYPE).map_or(0, |f| f.value);
            if data_type != FLOAT {
                return Err(err(format!("initializer `{name}` has data type {data_type}, not FLOAT")));
            }
            if tensor.iter().any(|f| f.number == TENSOR_DATA_LOCATION && f.value == 1) {
                return Err(err(format!(
                    "initializer `{name}` is stored as external data, which write-back does not support yet"
                )));
            }
            let data = tensor
                .iter()
                .find(|f| (f.number == TENSOR_RAW_DATA || f.number == TENSOR_FLOAT_DATA) && f.wire == 2)
                .ok_or_else(|| err(format!("initializer `{name}` has no inline float data")))?;
            if data.payload.len() != values.len() * 4 {
                return Err(err(format!(
                    "initializer `{name}` holds {} values, {} given",
                    data.payload.len() / 4,
                    values.len()
                )));
            }
            for (chunk, v) in out[data.payload.clone()].chunks_exact_mut(4).zip(values) {
                chunk.copy_from_slice(&v.to_le_bytes());
            }
            written.insert(key.as_str());
        }
    }
    let missing: Vec<&str> = weights.keys().map(String::as_str).filter(|k| !written.contains(k)).collect();
    if !missing.is_empty() {
        return Err(err(format!("no inline initializer named {}", missing.join(", "))));
    }
    if metadata.is_empty() {
        return Ok(out);
    }
    let replaced: HashSet<&str> = metadata.iter().map(|(k, _)| k.as_str()).collect();
    let mut rebuilt = Vec::with_capacity(out.len() + 256);
    for field in &top {
        if field.number == MODEL_METADATA && field.wire == 2 {
            let entry = StringStringEntryProto::decode(&bytes[field.payload.clone()])
                .map_err(|e| err(format!("metadata entry at byte {}: {e}", field.whole.start)))?;
            if replaced.contains(entry.key()) {
                continue;
            }
        }
        rebuilt.extend_from_slice(&out[field.whole.clone()]);
    }
    for (key, value) in metadata {
        let entry = StringStringEntryProto { key: Some(key.clone()), value: Some(value.clone()) };
        rebuilt.push(((MODEL_METADATA << 3) | 2) as u8); // field 14, length-delimited: one byte
        rebuilt.extend_from_slice(&entry.encode_length_delimited_to_vec());
    }
    Ok(rebuilt)
}

/// The float initializers of a model, as written: name → values (for tests and round trips).
pub fn read_weights(model: &crate::Model) -> BTreeMap<String, Vec<f32>> {
    model
        .graph
        .initializers
        .iter()
        .filter_map(|(name, t)| match &t.data {
            crate::TensorData::F32(v) => Some((name.clone(), v.clone())),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../models/demo/yolov8n-shapes-160.onnx");

    #[test]
    fn unchanged_weights_and_no_metadata_give_the_same_bytes() {
        let bytes = std::fs::read(DEMO).expect("demo model");
        let model = crate::Model::from_bytes(&bytes, Path::new(DEMO)).expect("load");
        let all = read_weights(&model);
        assert!(all.len() > 50);
        let out = write_weights(&bytes, Path::new(DEMO), &all, &[]).expect("write");
        assert!(out == bytes, "a round trip with the same values must be byte-identical");
    }

    #[test]
    fn new_values_and_metadata_land_and_nothing_else_changes() {
        let bytes = std::fs::read(DEMO).expect("demo model");
        let model = crate::Model::from_bytes(&bytes, Path::new(DEMO)).expect("load");
        let all = read_weights(&model);
        let (name, values) = all.iter().next().expect("one weight");
        let changed: Vec<f32> = values.iter().map(|v| v * 2.0 + 1.0).collect();
        let update = BTreeMap::from([(name.clone(), changed.clone())]);
        let meta = vec![
            (KEY_VERSION.to_string(), "test".to_string()),
            ("imgsz".to_string(), "[160, 160]".to_string()),
        ];
        let out = write_weights(&bytes, Path::new(DEMO), &update, &meta).expect("write");
        let again = crate::Model::from_bytes(&out, Path::new(DEMO)).expect("reload");
        assert_eq!(read_weights(&again).get(name), Some(&changed));
        let others_equal =
            read_weights(&again).iter().filter(|(n, _)| *n != name).all(|(n, v)| all.get(n) == Some(v));
        assert!(others_equal);
        assert_eq!(again.graph.nodes, model.graph.nodes);
        let keys: Vec<&str> = again.metadata_props.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys.iter().filter(|k| **k == "imgsz").count(), 1, "{keys:?}");
        assert!(again.metadata_props.contains(&(KEY_VERSION.to_string(), "test".to_string())));
        assert_eq!(again.metadata.names, model.metadata.names);
    }

    #[test]
    fn wrong_sizes_and_unknown_names_are_errors_naming_them() {
        let bytes = std::fs::read(DEMO).expect("demo model");
        let model = crate::Model::from_bytes(&bytes, Path::new(DEMO)).expect("load");
        let name = read_weights(&model).into_keys().next().expect("one weight");
        let short = BTreeMap::from([(name.clone(), vec![0.0f32; 3])]);
        let e = write_weights(&bytes, Path::new(DEMO), &short, &[]).expect_err("size").to_string();
        assert!(e.contains(&name) && e.contains("3 given"), "{e}");
        let unknown = BTreeMap::from([("nope".to_string(), vec![0.0f32])]);
        let e = write_weights(&bytes, Path::new(DEMO), &unknown, &[]).expect_err("name").to_string();
        assert!(e.contains("nope"), "{e}");
        let e = write_weights(&bytes[..1000], Path::new(DEMO), &unknown, &[]).expect_err("truncated");
        assert!(e.to_string().contains("writing weights"), "{e}");
    }
}
