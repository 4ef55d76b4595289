//! Initializers and constants: `TensorProto` decoded into typed values, inline or from external data.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use prost::Message;

use crate::proto::{TensorProto, tensor_proto::DataLocation, tensor_proto::DataType};

/// The element values of a decoded tensor, in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    /// `FLOAT`.
    F32(Vec<f32>),
    /// `DOUBLE`.
    F64(Vec<f64>),
    /// `FLOAT16`, as raw IEEE half bits.
    F16(Vec<u16>),
    /// `INT64`.
    I64(Vec<i64>),
    /// `INT32`.
    I32(Vec<i32>),
    /// `UINT8`.
    U8(Vec<u8>),
    /// `INT8`.
    I8(Vec<i8>),
    /// `BOOL`.
    Bool(Vec<bool>),
}

impl TensorData {
    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F64(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::I64(v) => v.len(),
            TensorData::I32(v) => v.len(),
            TensorData::U8(v) => v.len(),
            TensorData::I8(v) => v.len(),
            TensorData::Bool(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as integers, for shape-like tensors (int64/int32/bool/uint8/int8); `None` for floats.
    pub fn as_i64(&self) -> Option<Vec<i64>> {
        match self {
            TensorData::I64(v) => Some(v.clone()),
            TensorData::I32(v) => Some(v.iter().map(|x| i64::from(*x)).collect()),
            TensorData::U8(v) => Some(v.iter().map(|x| i64::from(*x)).collect()),
            TensorData::I8(v) => Some(v.iter().map(|x| i64::from(*x)).collect()),
            TensorData::Bool(v) => Some(v.iter().map(|x| i64::from(*x)).collect()),
            _ => None,
        }
    }
}

/// A decoded tensor: its name, dims and values.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    /// The tensor's name (initializer name, or empty for attribute tensors).
    pub name: String,
    /// Dimensions (empty for a scalar).
    pub dims: Vec<usize>,
    /// The values.
    pub data: TensorData,
}

impl Tensor {
    /// Number of elements the dims describe.
    pub fn numel(&self) -> usize {
        numel(&self.dims)
    }
}

/// Number of elements of `dims`, saturating: `[2^40, 2^40, 0]` is 0, not an overflow (a zero-sized
/// tensor may have huge other dims and still decode from no data).
pub fn numel(dims: &[usize]) -> usize {
    dims.iter().fold(1usize, |acc, d| acc.saturating_mul(*d))
}

/// Number of elements of a `TensorProto` from its dims, without decoding it; `None` on a negative dim.
pub fn proto_numel(proto: &TensorProto) -> Option<usize> {
    proto.dims.iter().try_fold(1usize, |acc, d| usize::try_from(*d).ok().map(|d| acc.saturating_mul(d)))
}

/// Decodes a tensor. `model_dir` resolves external data (`location` is relative to the model file).
/// Errors are plain reasons; the caller adds the file and tensor name.
pub fn decode(proto: &TensorProto, model_dir: Option<&Path>) -> Result<Tensor, String> {
    let numel = proto_numel(proto).ok_or_else(|| format!("negative dimension in {:?}", proto.dims))?;
    let dims = proto.dims.iter().map(|d| *d as usize).collect();
    let external;
    let raw: Option<&[u8]> = if proto.data_location == Some(DataLocation::External as i32) {
        external = read_external(proto, model_dir)?;
        Some(&external)
    } else {
        proto.raw_data.as_deref()
    };
    let dtype = DataType::try_from(proto.data_type())
        .map_err(|_| format!("unknown data type {}", proto.data_type()))?;
    let data = match raw {
        Some(bytes) => from_raw(dtype, bytes, numel)?,
        None => from_typed(proto, dtype)?,
    };
    if data.len() != numel {
        return Err(format!("{} values for dims {:?} ({numel} expected)", data.len(), proto.dims));
    }
    Ok(Tensor { name: proto.name().to_string(), dims, data })
}

/// Decodes a serialized `TensorProto` (the `input_0.pb` / `output_0.pb` files of ONNX's backend
/// tests). External data is not resolved. Errors are plain reasons.
pub fn from_bytes(bytes: &[u8]) -> Result<Tensor, String> {
    let proto = TensorProto::decode(bytes).map_err(|e| format!("not a TensorProto: {e}"))?;
    if proto.data_location == Some(DataLocation::External as i32) {
        return Err("external data is not supported in a standalone TensorProto".into());
    }
    decode(&proto, None)
}

fn read_external(proto: &TensorProto, model_dir: Option<&Path>) -> Result<Vec<u8>, String> {
    let entry =
        |key: &str| proto.external_data.iter().find(|e| e.key() == key).map(|e| e.value().to_string());
    let location = entry("location").ok_or("external data without a `location`")?;
    let parse = |key: &str| -> Result<Option<u64>, String> {
        entry(key)
            .map(|v| v.parse().map_err(|_| format!("external data `{key}` = `{v}` is not a number")))
            .transpose()
    };
    let (offset, length) = (parse("offset")?.unwrap_or(0), parse("length")?);
    let file = model_dir.map_or_else(|| Path::new(&location).to_path_buf(), |dir| dir.join(&location));
    let cannot_read =
        |e: std::io::Error| format!("external data file {} cannot be read: {e}", file.display());
    // Only regular files, and never past their size: `/dev/zero`, a FIFO or `/proc/self/pagemap`
    // (size 0, endless contents) read to the end would never finish or would fill memory.
    let size = std::fs::metadata(&file).map_err(cannot_read)?;
    if !size.is_file() {
        return Err(format!("external data {} is not a regular file", file.display()));
    }
    let size = size.len();
    let end = length.map_or(size, |len| offset.saturating_add(len));
    if offset > end || end > size {
        return Err(format!(
            "external data file {} has {size} bytes; {offset}..{end} requested",
            file.display()
        ));
    }
    let mut reader = std::fs::File::open(&file).map_err(cannot_read)?;
    reader.seek(SeekFrom::Start(offset)).map_err(cannot_read)?;
    let mut bytes = Vec::new();
    reader.take(end - offset).read_to_end(&mut bytes).map_err(cannot_read)?;
    if bytes.len() as u64 != end - offset {
        return Err(format!("external data file {} ended before byte {end}", file.display()));
    }
    Ok(bytes)
}

fn chunks<const N: usize, T>(bytes: &[u8], numel: usize, f: impl Fn([u8; N]) -> T) -> Result<Vec<T>, String> {
    if Some(bytes.len()) != numel.checked_mul(N) {
        return Err(format!("raw data has {} bytes; {numel} elements of {N} bytes expected", bytes.len()));
    }
    Ok(bytes.chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect())
}

fn from_raw(dtype: DataType, bytes: &[u8], numel: usize) -> Result<TensorData, String> {
    Ok(match dtype {
        DataType::Float => TensorData::F32(chunks(bytes, numel, f32::from_le_bytes)?),
        DataType::Double => TensorData::F64(chunks(bytes, numel, f64::from_le_bytes)?),
        DataType::Float16 => TensorData::F16(chunks(bytes, numel, u16::from_le_bytes)?),
        DataType::Int64 => TensorData::I64(chunks(bytes, numel, i64::from_le_bytes)?),
        DataType::Int32 => TensorData::I32(chunks(bytes, numel, i32::from_le_bytes)?),
        DataType::Uint8 => TensorData::U8(chunks(bytes, numel, |[b]: [u8; 1]| b)?),
        DataType::Int8 => TensorData::I8(chunks(bytes, numel, i8::from_le_bytes)?),
        DataType::Bool => TensorData::Bool(chunks(bytes, numel, |[b]: [u8; 1]| b != 0)?),
        other => return Err(format!("data type {} is not supported", other.as_str_name())),
    })
}

fn from_typed(proto: &TensorProto, dtype: DataType) -> Result<TensorData, String> {
    let narrow = |v: &[i32]| v.iter().map(|x| *x as u8).collect::<Vec<_>>();
    Ok(match dtype {
        DataType::Float => TensorData::F32(proto.float_data.clone()),
        DataType::Double => TensorData::F64(proto.double_data.clone()),
        DataType::Float16 => TensorData::F16(proto.int32_data.iter().map(|x| *x as u16).collect()),
        DataType::Int64 => TensorData::I64(proto.int64_data.clone()),
        DataType::Int32 => TensorData::I32(proto.int32_data.clone()),
        DataType::Uint8 => TensorData::U8(narrow(&proto.int32_data)),
        DataType::Int8 => TensorData::I8(proto.int32_data.iter().map(|x| *x as i8).collect()),
        DataType::Bool => TensorData::Bool(proto.int32_data.iter().map(|x| *x != 0).collect()),
        other => return Err(format!("data type {} is not supported", other.as_str_name())),
    })
}

/// A float32 initializer `name` of shape `dims` holding `values` (raw little-endian data).
pub fn float_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.to_string()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DataType, dims: Vec<i64>) -> TensorProto {
        TensorProto { dims, data_type: Some(dtype as i32), name: Some("t".into()), ..Default::default() }
    }

    #[test]
    fn decodes_raw_and_typed_data() {
        let mut p = proto(DataType::Float, vec![2]);
        p.raw_data = Some([1.5f32.to_le_bytes(), (-2.0f32).to_le_bytes()].concat());
        assert_eq!(decode(&p, None).map(|t| t.data), Ok(TensorData::F32(vec![1.5, -2.0])));
        let mut p = proto(DataType::Int64, vec![3]);
        p.int64_data = vec![1, -1, 7];
        assert_eq!(decode(&p, None).map(|t| t.data), Ok(TensorData::I64(vec![1, -1, 7])));
    }

    #[test]
    fn decodes_a_serialized_tensor_proto() {
        let mut p = proto(DataType::Int32, vec![2]);
        p.int32_data = vec![3, -4];
        let t = from_bytes(&p.encode_to_vec()).expect("decodes");
        assert_eq!((t.name.as_str(), t.dims.clone(), t.data), ("t", vec![2], TensorData::I32(vec![3, -4])));
        assert!(from_bytes(&[0xff, 0xff]).is_err());
        assert!(
            from_bytes(&proto(DataType::String, vec![1]).encode_to_vec())
                .is_err_and(|e| e.contains("STRING"))
        );
    }

    #[test]
    fn rejects_size_mismatch() {
        let mut p = proto(DataType::Float, vec![3]);
        p.raw_data = Some(vec![0; 8]);
        assert!(decode(&p, None).is_err_and(|e| e.contains("8 bytes")));
    }

    #[test]
    fn reads_external_data_relative_to_the_model() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("w.bin"), [0u8, 0, 0, 0, 0, 0, 128, 63]).expect("write");
        let mut p = proto(DataType::Float, vec![1]);
        p.data_location = Some(DataLocation::External as i32);
        let kv = |k: &str, v: &str| crate::proto::StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v.into()),
        };
        p.external_data = vec![kv("location", "w.bin"), kv("offset", "4"), kv("length", "4")];
        assert_eq!(decode(&p, Some(dir.path())).map(|t| t.data), Ok(TensorData::F32(vec![1.0])));
        std::fs::remove_file(dir.path().join("w.bin")).expect("rm");
        assert!(decode(&p, Some(dir.path())).is_err_and(|e| e.contains("w.bin")));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn external_data_in_a_device_or_proc_file_is_an_error_not_an_endless_read() {
        let external = |location: &str| {
            let mut p = proto(DataType::Float, vec![1]);
            p.data_location = Some(DataLocation::External as i32);
            p.external_data = vec![crate::proto::StringStringEntryProto {
                key: Some("location".into()),
                value: Some(location.into()),
            }];
            decode(&p, Some(Path::new("/tmp")))
        };
        assert!(external("/dev/zero").is_err_and(|e| e.contains("not a regular file")));
        // A regular file of size 0 whose contents never end (8 bytes per page of address space).
        assert!(external("/proc/self/pagemap").is_err_and(|e| e.contains("has 0 bytes")));
    }

    #[test]
    fn numel_of_a_zero_sized_tensor_with_huge_dims_is_zero_not_an_overflow() {
        assert_eq!(numel(&[1 << 40, 1 << 40, 0, 1]), 0);
        assert_eq!(numel(&[1 << 40, 1 << 40]), usize::MAX);
        assert_eq!(numel(&[]), 1);
    }
}
