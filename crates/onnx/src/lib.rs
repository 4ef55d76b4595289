//! headroom-onnx: reading and writing Ultralytics ONNX exports without any native library.
//!
//! Today: [`metadata`], the parser of the `metadata_props` Ultralytics writes (`names` is a Python
//! dict literal, not JSON). The protobuf types, graph IR, shape inference, weight write-back and
//! quantization rewrites build on this crate.

pub mod metadata;

pub use metadata::{MetadataError, ModelMetadata};
