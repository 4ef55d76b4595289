//! The seed corpus of the loader fuzz target (`fuzz/seeds/load/`), built here from code so that each
//! seed is tiny (libFuzzer mutates small inputs fast; the real fixtures are megabytes) and says why it
//! exists. The test checks that every seed still does what it is for and that the committed files
//! are what this code writes; `HEADROOM_UPDATE_FUZZ_SEEDS=1 cargo test -p headroom-onnx --test
//! fuzz_seeds` rewrites them.

use std::path::{Path, PathBuf};

use headroom_onnx::proto::attribute_proto::AttributeType;
use headroom_onnx::proto::tensor_proto::{DataLocation, DataType};
use headroom_onnx::proto::tensor_shape_proto::{Dimension, dimension};
use headroom_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto, type_proto,
};
use headroom_onnx::{Error, Model, inspect};
use prost::Message;

fn seeds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/load")
}

fn node(
    op_type: &str,
    name: &str,
    inputs: &[&str],
    outputs: &[&str],
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        name: Some(name.into()),
        op_type: Some(op_type.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute,
        ..Default::default()
    }
}

fn attr(name: &str, kind: AttributeType) -> AttributeProto {
    AttributeProto { name: Some(name.into()), r#type: Some(kind as i32), ..Default::default() }
}

fn int(name: &str, value: i64) -> AttributeProto {
    AttributeProto { i: Some(value), ..attr(name, AttributeType::Int) }
}

fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto { ints: values.to_vec(), ..attr(name, AttributeType::Ints) }
}

fn string(name: &str, value: &str) -> AttributeProto {
    AttributeProto { s: Some(value.as_bytes().to_vec()), ..attr(name, AttributeType::String) }
}

fn tensor_attr(name: &str, value: TensorProto) -> AttributeProto {
    AttributeProto { t: Some(value), ..attr(name, AttributeType::Tensor) }
}

fn tensor(name: &str, dtype: DataType, dims: &[i64]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        data_type: Some(dtype as i32),
        dims: dims.to_vec(),
        ..Default::default()
    }
}

/// A float tensor stored as `raw_data` (what exporters write), values `0.01·i`.
fn raw_f32(name: &str, dims: &[i64]) -> TensorProto {
    let n: i64 = dims.iter().product();
    let raw = (0..n).flat_map(|i| (i as f32 * 0.01).to_le_bytes()).collect();
    TensorProto { raw_data: Some(raw), ..tensor(name, DataType::Float, dims) }
}

/// A float tensor stored in the typed `float_data` field.
fn typed_f32(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto { float_data: values.to_vec(), ..tensor(name, DataType::Float, dims) }
}

fn typed_i64(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto { int64_data: values.to_vec(), ..tensor(name, DataType::Int64, dims) }
}

enum D {
    N(i64),
    S(&'static str),
}

fn value(name: &str, dims: &[D]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                D::N(n) => dimension::Value::DimValue(*n),
                D::S(s) => dimension::Value::DimParam(s.to_string()),
            }),
            ..Default::default()
        })
        .collect();
    let tensor =
        type_proto::Tensor { elem_type: Some(DataType::Float as i32), shape: Some(TensorShapeProto { dim }) };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto { value: Some(type_proto::Value::TensorType(tensor)), ..Default::default() }),
        ..Default::default()
    }
}

fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto { name: Some(name.into()), ..Default::default() }
}

fn model(opset: i64, graph: GraphProto, metadata: &[(&str, &str)]) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(opset) }],
        producer_name: Some("headroom fuzz seeds".into()),
        graph: Some(graph),
        metadata_props: metadata
            .iter()
            .map(|(k, v)| StringStringEntryProto { key: Some(k.to_string()), value: Some(v.to_string()) })
            .collect(),
        ..Default::default()
    }
}

const DETECT_METADATA: &[(&str, &str)] = &[
    ("names", "{0: 'a', 1: \"b\"}"),
    ("imgsz", "[32, 32]"),
    ("stride", "4"),
    ("task", "detect"),
    ("version", "8.3.0"),
];

/// Stem conv (SiLU), a MaxPool, Resize + Concat (the neck), and a two-level Detect head in
/// `model.3` (a box and a class conv per level) whose outputs are concatenated into `[1, 4+2, N]`.
fn detect_nodes(stem_input: &str) -> (Vec<NodeProto>, Vec<TensorProto>) {
    let conv = |name: &str, inputs: &[&str], output: &str, k: i64, stride: i64, pad: i64| {
        let attrs = vec![
            ints("kernel_shape", &[k, k]),
            ints("strides", &[stride, stride]),
            ints("pads", &[pad; 4]),
            ints("dilations", &[1, 1]),
            int("group", 1),
        ];
        node("Conv", name, inputs, &[output], attrs)
    };
    let nodes = vec![
        conv("/model.0/conv/Conv", &[stem_input, "w0", "b0"], "c0", 3, 2, 1),
        node("Sigmoid", "/model.0/act/Sigmoid", &["c0"], &["s0"], vec![]),
        node("Mul", "/model.0/act/Mul", &["c0", "s0"], &["x0"], vec![]),
        node(
            "MaxPool",
            "/model.1/MaxPool",
            &["x0"],
            &["x1"],
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        ),
        node("Resize", "/model.2/Resize", &["x1", "", "scales"], &["x2"], vec![string("mode", "nearest")]),
        node("Concat", "/model.2/Concat", &["x2", "x0"], &["x3"], vec![int("axis", 1)]),
        conv("/model.3/cv2.0/Conv", &["x3", "wb0"], "box0", 1, 1, 0),
        conv("/model.3/cv3.0/Conv", &["x3", "wc0"], "cls0", 1, 1, 0),
        conv("/model.3/cv2.1/Conv", &["x1", "wb1"], "box1", 1, 1, 0),
        conv("/model.3/cv3.1/Conv", &["x1", "wc1"], "cls1", 1, 1, 0),
        node("Concat", "/model.3/Concat", &["box0", "cls0"], &["l0"], vec![int("axis", 1)]),
        node("Concat", "/model.3/Concat_1", &["box1", "cls1"], &["l1"], vec![int("axis", 1)]),
    ];
    let initializers = vec![
        raw_f32("w0", &[4, 3, 3, 3]),
        typed_f32("b0", &[4], &[0.0, 0.5, -0.5, 1.0]),
        typed_f32("scales", &[4], &[1.0, 1.0, 2.0, 2.0]),
        raw_f32("wb0", &[4, 8, 1, 1]),
        raw_f32("wc0", &[2, 8, 1, 1]),
        raw_f32("wb1", &[4, 4, 1, 1]),
        raw_f32("wc1", &[2, 4, 1, 1]),
    ];
    (nodes, initializers)
}

/// A static `[1, 3, 32, 32]` detector that loads and inspects (head, families, freeze points).
fn detect_static() -> ModelProto {
    let (mut nodes, mut initializers) = detect_nodes("images");
    nodes.extend([
        node("Reshape", "/model.3/Reshape", &["l0", "flat"], &["r0"], vec![]),
        node("Reshape", "/model.3/Reshape_1", &["l1", "flat"], &["r1"], vec![]),
        node("Concat", "/model.3/Concat_2", &["r0", "r1"], &["output0"], vec![int("axis", 2)]),
        node("Transpose", "/model.3/Transpose", &["output0"], &["output1"], vec![ints("perm", &[0, 2, 1])]),
    ]);
    initializers.push(typed_i64("flat", &[3], &[1, 6, -1]));
    let graph = GraphProto {
        name: Some("detect-static".into()),
        node: nodes,
        initializer: initializers,
        input: vec![value("images", &[D::N(1), D::N(3), D::N(32), D::N(32)])],
        output: vec![
            value("output0", &[D::N(1), D::N(6), D::N(320)]),
            value("output1", &[D::N(1), D::N(320), D::N(6)]),
        ],
        ..Default::default()
    };
    model(17, graph, DETECT_METADATA)
}

/// The same detector with `[batch, 3, height, width]` input: the `Shape → Gather → Unsqueeze →
/// Concat → Reshape` chains of dynamic exports, plus Slice, Range, ConstantOfShape, Expand, Cast.
fn detect_dynamic() -> ModelProto {
    let (mut nodes, mut initializers) = detect_nodes("images");
    nodes.extend([
        node("Shape", "/model.3/Shape", &["l0"], &["shape0"], vec![]),
        node("Gather", "/model.3/Gather", &["shape0", "zero"], &["batch"], vec![int("axis", 0)]),
        node("Unsqueeze", "/model.3/Unsqueeze", &["batch", "axes0"], &["batch1"], vec![]),
        node("Concat", "/model.3/Concat_2", &["batch1", "six", "minus1"], &["target"], vec![int("axis", 0)]),
        node("Reshape", "/model.3/Reshape", &["l0", "target"], &["r0"], vec![]),
        node("Reshape", "/model.3/Reshape_1", &["l1", "target"], &["r1"], vec![]),
        node("Concat", "/model.3/Concat_3", &["r0", "r1"], &["output0"], vec![int("axis", 2)]),
        node("Slice", "/model.3/Slice", &["shape0", "two", "four", "zero1"], &["hw"], vec![]),
        node("Cast", "/model.3/Cast", &["hw"], &["hw64"], vec![int("to", DataType::Int64 as i64)]),
        node(
            "ConstantOfShape",
            "/model.3/ConstantOfShape",
            &["hw64"],
            &["grid"],
            vec![tensor_attr("value", typed_f32("", &[1], &[1.0]))],
        ),
        node("Gather", "/model.3/Gather_1", &["shape0", "three"], &["width"], vec![int("axis", 0)]),
        node("Range", "/model.3/Range", &["zero", "width", "one"], &["xs"], vec![]),
        node("Expand", "/model.3/Expand", &["xs", "hw64"], &["xs2"], vec![]),
        node("Add", "/model.3/Add", &["grid", "xs2"], &["output1"], vec![]),
    ]);
    initializers.extend([
        typed_i64("zero", &[], &[0]),
        typed_i64("one", &[], &[1]),
        typed_i64("three", &[], &[3]),
        typed_i64("axes0", &[1], &[0]),
        typed_i64("six", &[1], &[6]),
        typed_i64("minus1", &[1], &[-1]),
        typed_i64("two", &[1], &[2]),
        typed_i64("four", &[1], &[4]),
        typed_i64("zero1", &[1], &[0]),
    ]);
    let graph = GraphProto {
        name: Some("detect-dynamic".into()),
        node: nodes,
        initializer: initializers,
        input: vec![value("images", &[D::S("batch"), D::N(3), D::S("height"), D::S("width")])],
        output: vec![value("output0", &[D::S("batch"), D::N(6), D::S("anchors")]), untyped("output1")],
        ..Default::default()
    };
    model(13, graph, DETECT_METADATA)
}

/// Every other supported op at opset 11, where Split, Unsqueeze, Squeeze and ReduceMax take their
/// axes as attributes and Softmax flattens from its axis. Not a detector.
fn ops_opset11() -> ModelProto {
    let n = |op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>| {
        node(op, &format!("/model.0/{op}_{}", outputs[0]), inputs, outputs, attrs)
    };
    let nodes = vec![
        n(
            "Conv",
            &["x", "wd"],
            &["dw"],
            vec![string("auto_pad", "SAME_UPPER"), int("group", 4), ints("dilations", &[2, 2])],
        ),
        n(
            "MaxPool",
            &["dw"],
            &["mp"],
            vec![ints("kernel_shape", &[3, 3]), ints("strides", &[2, 2]), int("ceil_mode", 1)],
        ),
        n("Resize", &["mp", "", "", "sizes"], &["rs"], vec![string("mode", "linear")]),
        n("Transpose", &["rs"], &["t"], vec![ints("perm", &[0, 2, 3, 1])]),
        n("Softmax", &["t"], &["s"], vec![int("axis", 3)]),
        n("Split", &["s"], &["s0", "s1"], vec![int("axis", 3), ints("split", &[2, 2])]),
        n("Sub", &["s0", "s1"], &["d"], vec![]),
        n("Add", &["d", "s1"], &["a"], vec![]),
        n("Div", &["a", "s1"], &["q"], vec![]),
        n("Pow", &["q", "two_f"], &["p"], vec![]),
        n("Sqrt", &["p"], &["r"], vec![]),
        n("Neg", &["r"], &["ng"], vec![]),
        n("Identity", &["ng"], &["id"], vec![]),
        n("Flatten", &["id"], &["f"], vec![int("axis", 2)]),
        n("MatMul", &["f", "wm"], &["m"], vec![]),
        n("ReduceMax", &["m"], &["rm"], vec![ints("axes", &[1]), int("keepdims", 0)]),
        n("TopK", &["rm", "k"], &["vals", "idx"], vec![int("axis", -1)]),
        n("Unsqueeze", &["vals"], &["u"], vec![ints("axes", &[0])]),
        n("Squeeze", &["u"], &["sq"], vec![ints("axes", &[0])]),
        n("Less", &["vals", "sq"], &["lt"], vec![]),
        n("Greater", &["vals", "sq"], &["gt"], vec![]),
        n("Equal", &["idx", "idx"], &["eq"], vec![]),
        n("Not", &["eq"], &["ne"], vec![]),
        n("Where", &["lt", "vals", "sq"], &["w"], vec![]),
        n("GatherElements", &["m", "ge_idx"], &["ge"], vec![int("axis", 1)]),
        n("Gather", &["m", "idx"], &["g"], vec![int("axis", 0)]),
        n("Constant", &[], &["cst"], vec![ints("value_ints", &[2, 3])]),
        n("Mod", &["cst", "k"], &["md"], vec![int("fmod", 0)]),
        n("ConstantOfShape", &["cst"], &["cos"], vec![]),
        n("Expand", &["w", "cst"], &["ex"], vec![]),
        n(
            "NonMaxSuppression",
            &["boxes", "scores", "max_out", "iou", "score_thr"],
            &["sel"],
            vec![int("center_point_box", 1)],
        ),
    ];
    let initializers = vec![
        raw_f32("wd", &[4, 1, 3, 3]),
        typed_i64("sizes", &[4], &[1, 4, 8, 8]),
        typed_f32("two_f", &[], &[2.0]),
        raw_f32("wm", &[16, 3]),
        typed_i64("k", &[1], &[3]),
        typed_i64("ge_idx", &[8, 3], &[0, 1, 2].repeat(8)),
        raw_f32("boxes", &[1, 5, 4]),
        raw_f32("scores", &[1, 1, 5]),
        typed_i64("max_out", &[1], &[3]),
        typed_f32("iou", &[1], &[0.5]),
        typed_f32("score_thr", &[1], &[0.1]),
    ];
    let outputs = ["ex", "ge", "g", "md", "cos", "gt", "ne", "sel"];
    let graph = GraphProto {
        name: Some("ops-opset11".into()),
        node: nodes,
        initializer: initializers,
        input: vec![value("x", &[D::N(1), D::N(4), D::N(8), D::N(8)])],
        output: outputs.iter().map(|o| untyped(o)).collect(),
        ..Default::default()
    };
    model(11, graph, &[])
}

/// An initializer in an external file (offset and length given): the loader resolves it next to the
/// model, which the fuzz target places in a folder that does not exist.
fn external_data() -> ModelProto {
    let kv = |k: &str, v: &str| StringStringEntryProto { key: Some(k.into()), value: Some(v.into()) };
    let mut w = tensor("w", DataType::Float, &[2]);
    w.data_location = Some(DataLocation::External as i32);
    w.external_data = vec![kv("location", "weights.bin"), kv("offset", "0"), kv("length", "8")];
    let graph = GraphProto {
        name: Some("external-data".into()),
        node: vec![node("Add", "add", &["x", "w"], &["y"], vec![])],
        initializer: vec![w],
        input: vec![value("x", &[D::N(1), D::N(2)])],
        output: vec![value("y", &[D::N(1), D::N(2)])],
        ..Default::default()
    };
    model(22, graph, &[])
}

fn seeds() -> Vec<(&'static str, ModelProto)> {
    vec![
        ("detect-static.onnx", detect_static()),
        ("detect-dynamic.onnx", detect_dynamic()),
        ("ops-opset11.onnx", ops_opset11()),
        ("external-data.onnx", external_data()),
    ]
}

#[test]
fn fuzz_seeds_load_as_intended_and_are_committed() {
    let dir = seeds_dir();
    let update = std::env::var_os("HEADROOM_UPDATE_FUZZ_SEEDS").is_some();
    for (name, proto) in seeds() {
        let bytes = proto.encode_to_vec();
        let path = dir.join(name);
        let result = Model::from_bytes(&bytes, &path);
        match name {
            "external-data.onnx" => {
                let err = result.expect_err("the external file is absent");
                assert!(
                    matches!(err, Error::Initializer { .. }) && err.to_string().contains("weights.bin"),
                    "{err}"
                );
            }
            "ops-opset11.onnx" => {
                let model = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(
                    model.graph.shape("ex").and_then(|s| s.first().cloned()?.known()),
                    Some(2),
                    "{name}"
                );
            }
            _ => {
                let model = result.unwrap_or_else(|e| panic!("{name}: {e}"));
                let inspection = inspect::inspect(&model).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!((inspection.classes, inspection.strides.clone()), (2, vec![2, 4]), "{name}");
                assert_eq!(inspection.freeze_points.len(), 4, "{name}");
            }
        }
        assert!(bytes.len() < 4096, "{name} has {} bytes: seeds must stay tiny", bytes.len());
        if update {
            std::fs::create_dir_all(&dir).expect("create the seeds folder");
            std::fs::write(&path, &bytes).expect("write a seed");
        }
        let committed = std::fs::read(&path).unwrap_or_default();
        assert!(
            committed == bytes,
            "{} is out of date: run HEADROOM_UPDATE_FUZZ_SEEDS=1 cargo test -p headroom-onnx --test fuzz_seeds",
            path.display()
        );
    }
}
