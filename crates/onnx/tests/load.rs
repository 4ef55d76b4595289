//! Loading every committed fixture, and every kind of bad input the loader must reject cleanly.

use std::path::{Path, PathBuf};

use headroom_onnx::proto::{ModelProto, StringStringEntryProto, tensor_proto::DataLocation};
use headroom_onnx::{Error, Model};
use prost::Message;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures/onnx").join(name)
}

const FIXTURES: &[&str] = &[
    "yolov8n-w00625-nc3-160.onnx",
    "yolov8n-w00625-nc3-160-dynamic.onnx",
    "yolo11n-w00625-nc3-160.onnx",
    "yolov10n-w00625-nc3-160-e2e.onnx",
    "yolo26n-w00625-nc3-160.onnx",
    "yolo26n-w00625-nc3-160-dynamic.onnx",
    "yolov5nu-w00625-nc3-160.onnx",
    "yolov8n-w00625-nc3-160-unsimplified.onnx",
    "yolov8n-w00625-nc3-640.onnx",
    "yolov8n-w00625-nc3-160-u8.2.onnx",
    "yolov8n-w00625-nc3-160-dynamic-u8.2.onnx",
];

fn all_models() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = FIXTURES.iter().map(|f| fixture(f)).collect();
    paths.push(root().join("models/demo/yolov8n-shapes-160.onnx"));
    paths
}

fn decode(path: &Path) -> ModelProto {
    ModelProto::decode(std::fs::read(path).expect("fixture").as_slice()).expect("decodes")
}

fn write(dir: &Path, name: &str, proto: &ModelProto) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, proto.encode_to_vec()).expect("write");
    path
}

#[test]
fn loads_every_fixture_and_infers_every_shape() {
    for path in all_models() {
        let model = Model::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!model.graph.initializers.is_empty(), "{}", path.display());
        for node in &model.graph.nodes {
            for output in &node.outputs {
                assert!(
                    model.graph.shape(output).is_some(),
                    "{}: no shape for {output} ({})",
                    path.display(),
                    node.name
                );
            }
        }
        for output in &model.graph.outputs {
            let inferred = model.graph.shape(&output.name).expect("output shape");
            if let Some(declared) = &output.shape {
                let static_decl = declared.iter().all(|d| d.known().is_some());
                if static_decl {
                    assert_eq!(&inferred, declared, "{}: output {}", path.display(), output.name);
                }
            }
        }
    }
}

#[test]
fn dynamic_dims_stay_symbolic() {
    let model = Model::load(fixture("yolov8n-w00625-nc3-160-dynamic.onnx")).expect("loads");
    let shape = model.graph.shape("output0").expect("shape");
    assert_eq!(shape[1].known(), Some(7));
    assert!(shape[0].known().is_none() && shape[2].known().is_none(), "{shape:?}");
}

#[test]
fn not_onnx_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in [("text.onnx", b"hello, this is not a model\n".to_vec()), ("empty.onnx", vec![])] {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).expect("write");
        let err = Model::load(&path).expect_err("not onnx");
        assert!(matches!(err, Error::NotOnnx { .. }), "{err}");
        assert!(err.to_string().contains(name), "{err}");
    }
    let err = Model::load(dir.path().join("absent.onnx")).expect_err("missing file");
    assert!(matches!(err, Error::Io { .. }) && err.to_string().contains("absent.onnx"), "{err}");
}

#[test]
fn truncated_file_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bytes = std::fs::read(fixture("yolov8n-w00625-nc3-160.onnx")).expect("fixture");
    for cut in [10, bytes.len() / 3, bytes.len() / 2, bytes.len() - 7] {
        let path = dir.path().join("cut.onnx");
        std::fs::write(&path, &bytes[..cut]).expect("write");
        let err = Model::load(&path).expect_err("truncated");
        assert!(err.to_string().contains("cut.onnx"), "cut at {cut}: {err}");
    }
}

#[test]
fn unsupported_ops_are_all_listed_in_one_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut proto = decode(&fixture("yolov8n-w00625-nc3-160.onnx"));
    let graph = proto.graph.as_mut().expect("graph");
    graph.node[1].op_type = Some("HardSwish".into());
    graph.node[5].op_type = Some("FancyConcat".into());
    graph.node[7].domain = Some("com.example".into());
    // A dangling input too: unsupported ops are reported first, before anything else is looked at.
    graph.initializer.remove(0);
    let path = write(dir.path(), "unsupported.onnx", &proto);
    let err = Model::load(&path).expect_err("unsupported");
    let Error::Unsupported { ops, .. } = &err else { panic!("wrong error: {err}") };
    assert_eq!(ops.len(), 3, "{err}");
    let text = err.to_string();
    assert!(
        text.contains("HardSwish") && text.contains("FancyConcat") && text.contains("com.example::"),
        "{text}"
    );
    assert!(text.contains("unsupported.onnx"), "{text}");
}

/// Regression: a classifier (here: the fixture with its Detect outputs cut to a rank-2 output and a
/// Relu) was refused as "unsupported operator(s): Relu"; it is "not a YOLO detector". Another
/// Ultralytics task is named as such. A folder given as a model says so.
#[test]
fn a_graph_that_is_no_detector_is_called_so_not_unsupported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut proto = decode(&fixture("yolov8n-w00625-nc3-160.onnx"));
    let graph = proto.graph.as_mut().expect("graph");
    graph.node[1].op_type = Some("Relu".into());
    let output = graph.output[0].r#type.as_mut().and_then(|t| t.value.as_mut());
    if let Some(headroom_onnx::proto::type_proto::Value::TensorType(t)) = output {
        t.shape.as_mut().expect("shape").dim.truncate(2);
    }
    let task = proto.metadata_props.iter().position(|p| p.key() == "task").expect("task key");
    let mut task = proto.metadata_props.remove(task);
    let path = write(dir.path(), "classifier.onnx", &proto);
    let err = Model::load(&path).expect_err("not a detector").to_string();
    assert!(err.contains("classifier.onnx: not a YOLO detector: no output has a detector's shape"), "{err}");
    assert!(err.contains("operators headroom does not run: Relu"), "{err}");
    task.value = Some("segment".into());
    proto.metadata_props.push(task);
    let path = write(dir.path(), "seg.onnx", &proto);
    let err = Model::load(&path).expect_err("segment").to_string();
    assert!(err.contains("an Ultralytics `segment` model"), "{err}");
    let err = Model::load(dir.path()).expect_err("a folder").to_string();
    assert!(err.contains("is a folder, not an ONNX model file"), "{err}");
}

#[test]
fn opset_out_of_range_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    for version in [9, 23] {
        let mut proto = decode(&fixture("yolov8n-w00625-nc3-160.onnx"));
        proto.opset_import.iter_mut().for_each(|o| o.version = Some(version));
        let path = write(dir.path(), "opset.onnx", &proto);
        let err = Model::load(&path).expect_err("opset");
        assert!(matches!(err, Error::Opset { found, .. } if found == version), "{err}");
        assert!(err.to_string().contains(&format!("opset {version}")), "{err}");
    }
}

#[test]
fn missing_initializer_names_node_and_tensor() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut proto = decode(&fixture("yolov8n-w00625-nc3-160.onnx"));
    let graph = proto.graph.as_mut().expect("graph");
    let removed = graph.initializer.remove(3).name.unwrap_or_default();
    let path = write(dir.path(), "missing.onnx", &proto);
    let err = Model::load(&path).expect_err("missing");
    assert!(matches!(&err, Error::MissingInput { input, .. } if *input == removed), "{err}");
    assert!(err.to_string().contains("missing.onnx"), "{err}");
}

#[test]
fn external_data_is_read_next_to_the_model_and_missing_data_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reference = Model::load(fixture("yolov8n-w00625-nc3-160.onnx")).expect("loads");
    let mut proto = reference.proto.clone();
    let graph = proto.graph.as_mut().expect("graph");
    let mut blob = Vec::new();
    let mut moved = Vec::new();
    for t in graph.initializer.iter_mut().filter(|t| t.raw_data.as_ref().is_some_and(|r| r.len() > 1024)) {
        let raw = t.raw_data.take().unwrap_or_default();
        let kv = |k: &str, v: String| StringStringEntryProto { key: Some(k.into()), value: Some(v) };
        t.external_data = vec![
            kv("location", "weights.bin".into()),
            kv("offset", blob.len().to_string()),
            kv("length", raw.len().to_string()),
        ];
        t.data_location = Some(DataLocation::External as i32);
        blob.extend_from_slice(&raw);
        moved.push(t.name().to_string());
    }
    assert!(moved.len() > 10);
    std::fs::write(dir.path().join("weights.bin"), &blob).expect("write");
    let path = write(dir.path(), "external.onnx", &proto);
    let model = Model::load(&path).expect("loads with external data");
    for name in &moved {
        assert_eq!(model.graph.initializers.get(name), reference.graph.initializers.get(name), "{name}");
    }
    std::fs::remove_file(dir.path().join("weights.bin")).expect("rm");
    let err = Model::load(&path).expect_err("missing external data");
    assert!(matches!(err, Error::Initializer { .. }) && err.to_string().contains("weights.bin"), "{err}");
}

/// Corrupted bytes give an error or a model, never a panic (a cheap stand-in until the fuzz target).
#[test]
fn corrupted_files_never_panic() {
    let bytes = std::fs::read(fixture("yolo26n-w00625-nc3-160.onnx")).expect("fixture");
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    for _ in 0..60 {
        let mut corrupted = bytes.clone();
        // Node and metadata bytes sit after the initializers in Ultralytics exports; hit both halves.
        for _ in 0..4 {
            let at = next() % corrupted.len();
            corrupted[at] = (next() & 0xff) as u8;
        }
        let result = std::panic::catch_unwind(|| {
            Model::from_bytes(&corrupted, Path::new("corrupt.onnx"))
                .map(|m| headroom_onnx::inspect::inspect(&m).is_ok())
        });
        assert!(result.is_ok(), "panicked on a corrupted file");
    }
}
