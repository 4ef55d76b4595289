//! The float16 export on every fixture family and the demo model: the result loads, holds float16
//! weights, is consistently typed, and keeps exactly the decode float32. (Numbers against ONNX
//! Runtime: `scripts/fixtures/fp16_check.py`.)

use std::collections::HashSet;
use std::path::Path;

use headroom_onnx::fp16::{Fp16Options, KeptReason, to_fp16, type_errors};
use headroom_onnx::proto::{tensor_proto::DataType, type_proto};
use headroom_onnx::{Model, TensorData};

mod common;
use common::{all_models, root};

fn io_types(model: &Model) -> Vec<i32> {
    let graph = model.proto.graph.as_ref().expect("graph");
    graph
        .input
        .iter()
        .chain(&graph.output)
        .filter_map(|v| match v.r#type.as_ref()?.value.as_ref()? {
            type_proto::Value::TensorType(t) => t.elem_type,
            _ => None,
        })
        .collect()
}

fn file_size(path: &Path) -> usize {
    std::fs::metadata(path).expect("size").len() as usize
}

#[test]
fn every_family_converts_reloads_and_is_consistently_typed() {
    for path in all_models() {
        let name = path.file_name().expect("name").to_string_lossy().into_owned();
        let model = Model::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(type_errors(&model).expect("types"), Vec::<String>::new(), "{name}: source");
        let (bytes, report) =
            to_fp16(&model, &Fp16Options::default()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let half = Model::from_bytes(&bytes, &path).unwrap_or_else(|e| panic!("{name}: reload: {e}"));
        assert_eq!(type_errors(&half).expect("types"), Vec::<String>::new(), "{name}");
        let ratio = bytes.len() as f64 / file_size(&path) as f64;
        println!("{name}: {ratio:.3} of the size, {report:?}");
        assert!((0.45..0.75).contains(&ratio), "{name}: {ratio}");
        let f16 = half.graph.initializers.values().filter(|t| matches!(t.data, TensorData::F16(_))).count();
        assert_eq!(f16, report.initializers_converted, "{name}");
        let float32_conv_weights: Vec<&str> = half
            .graph
            .nodes
            .iter()
            .flat_map(|n| n.parameter_inputs())
            .filter(|w| half.graph.initializers.get(*w).is_some_and(|t| matches!(t.data, TensorData::F32(_))))
            .map(String::as_str)
            .collect();
        assert!(
            float32_conv_weights.iter().all(|w| w.contains("dfl")),
            "{name}: only DFL's fixed conv keeps float32 weights: {float32_conv_weights:?}"
        );
        assert_eq!(
            io_types(&half),
            vec![DataType::Float as i32; 2],
            "{name}: inputs and outputs stay float32"
        );
        // The input cast and one cast per raw head tensor (3 levels x box, class).
        assert_eq!(report.casts_inserted, 7, "{name}");
        assert!(report.kept_nodes.iter().any(|k| k.reason == KeptReason::Decode && k.op_type == "Concat"));
        // Trained weights: one of the demo model's 3 million is below float16's subnormals.
        assert!(report.clamped == 0 && report.underflowed <= 1, "{name}: {report:?}");
        let inspection = headroom_onnx::inspect::inspect(&half).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(inspection.head.levels.len(), 3, "{name}: the fp16 model still inspects");
    }
}

#[test]
fn the_decode_after_the_raw_head_stays_float32_and_the_head_convs_do_not() {
    let path = root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160.onnx");
    let model = Model::load(&path).expect("load");
    let (_, report) = to_fp16(&model, &Fp16Options::default()).expect("fp16");
    let kept: HashSet<&str> = report.kept_nodes.iter().map(|k| k.node.as_str()).collect();
    for node in
        ["/model.22/dfl/Softmax", "/model.22/dfl/conv/Conv", "/model.22/Sigmoid", "/model.22/Concat_3"]
    {
        assert!(kept.contains(node), "{node} should stay float32: {kept:?}");
    }
    assert!(!kept.contains("/model.22/cv2.0/cv2.0.2/Conv"), "the head convs compute in float16");
    assert!(report.initializers_kept.contains(&"model.22.dfl.conv.weight".to_string()));
    assert!(report.initializers_kept.contains(&"/model.10/Constant_output_0".to_string()), "Resize scales");
}

#[test]
fn options_change_the_boundary_and_the_kept_part() {
    let path = root().join("tests/fixtures/onnx/yolov10n-w00625-nc3-160-e2e.onnx");
    let model = Model::load(&path).expect("load");
    let options = Fp16Options {
        keep_io_types: false,
        keep_decode_fp32: false,
        op_block_list: vec![],
        node_block_list: vec!["/model.0/conv/Conv".into()],
    };
    let (bytes, report) = to_fp16(&model, &options).expect("fp16");
    let half = Model::from_bytes(&bytes, &path).expect("reload");
    assert_eq!(type_errors(&half).expect("types"), Vec::<String>::new());
    assert_eq!(io_types(&half), vec![DataType::Float16 as i32; 2]);
    let reasons: Vec<(&str, KeptReason)> =
        report.kept_nodes.iter().map(|k| (k.node.as_str(), k.reason)).collect();
    assert_eq!(reasons, vec![("/model.0/conv/Conv", KeptReason::NodeBlockList)]);
    // Around the blocked conv: its float16 input and weight cast up, its output cast down.
    assert_eq!(report.casts_inserted, 3, "{report:?}");
}

#[test]
fn a_float16_model_is_refused() {
    let path = root().join("tests/fixtures/onnx/yolo26n-w00625-nc3-160.onnx");
    let model = Model::load(&path).expect("load");
    let (bytes, _) = to_fp16(&model, &Fp16Options::default()).expect("fp16");
    let half = Model::from_bytes(&bytes, &path).expect("reload");
    let e = to_fp16(&half, &Fp16Options::default()).expect_err("twice").to_string();
    assert!(e.contains("already holds float16"), "{e}");
}

mod synthetic {
    use headroom_onnx::proto::{
        AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto,
        TypeProto, ValueInfoProto, attribute_proto::AttributeType, tensor_shape_proto, type_proto,
    };

    fn attribute(name: &str, kind: AttributeType) -> AttributeProto {
        AttributeProto { name: Some(name.into()), r#type: Some(kind as i32), ..Default::default() }
    }

    fn node(name: &str, op: &str, inputs: &[&str], output: &str, attrs: Vec<AttributeProto>) -> NodeProto {
        NodeProto {
            name: Some(name.into()),
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            attribute: attrs,
            ..Default::default()
        }
    }

    fn float_info(name: &str, dims: &[i64]) -> ValueInfoProto {
        let dim = dims
            .iter()
            .map(|d| tensor_shape_proto::Dimension {
                value: Some(tensor_shape_proto::dimension::Value::DimValue(*d)),
                ..Default::default()
            })
            .collect();
        let tensor = type_proto::Tensor { elem_type: Some(1), shape: Some(TensorShapeProto { dim }) };
        ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto { denotation: None, value: Some(type_proto::Value::TensorType(tensor)) }),
            ..Default::default()
        }
    }

    fn floats(name: &str, values: &[f32]) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            dims: vec![values.len() as i64],
            data_type: Some(1),
            float_data: values.to_vec(),
            ..Default::default()
        }
    }

    /// x + w, times a Constant, nearest 2x Resize, plus ConstantOfShape zeros, times w again in a
    /// node kept float32: `w` is read in float16 and in float32.
    pub fn model() -> ModelProto {
        let half = AttributeProto { f: Some(0.5), ..attribute("value_float", AttributeType::Float) };
        let nearest =
            AttributeProto { s: Some(b"nearest".to_vec()), ..attribute("mode", AttributeType::String) };
        let graph = GraphProto {
            node: vec![
                node("add", "Add", &["x", "w"], "a", vec![]),
                node("half", "Constant", &[], "c", vec![half]),
                node("scale", "Mul", &["a", "c"], "b", vec![]),
                node("up", "Resize", &["b", "", "scales"], "r", vec![nearest]),
                node("shape", "Shape", &["r"], "s", vec![]),
                node("zeros", "ConstantOfShape", &["s"], "z", vec![]),
                node("plus", "Add", &["r", "z"], "y1", vec![]),
                node("blocked", "Mul", &["y1", "w"], "out", vec![]),
            ],
            name: Some("synthetic".into()),
            initializer: vec![floats("w", &[2.0]), floats("scales", &[1.0, 1.0, 2.0, 2.0])],
            input: vec![float_info("x", &[1, 1, 4, 4])],
            output: vec![float_info("out", &[1, 1, 8, 8])],
            ..Default::default()
        };
        let opset = OperatorSetIdProto { domain: Some(String::new()), version: Some(18) };
        ModelProto {
            ir_version: Some(8),
            opset_import: vec![opset],
            graph: Some(graph),
            ..Default::default()
        }
    }
}

#[test]
fn a_weight_read_in_both_precisions_stays_float32_and_constants_follow_their_readers() {
    let path = Path::new("synthetic.onnx");
    let model = Model::from_proto(synthetic::model(), path).expect("loads");
    for keep_io_types in [true, false] {
        let options = Fp16Options {
            keep_io_types,
            keep_decode_fp32: false,
            op_block_list: vec![],
            node_block_list: vec!["blocked".into()],
        };
        let (bytes, report) = to_fp16(&model, &options).expect("fp16");
        let half = Model::from_bytes(&bytes, path).expect("reload");
        assert_eq!(type_errors(&half).expect("types"), Vec::<String>::new(), "{keep_io_types}");
        assert_eq!(report.initializers_kept, vec!["w".to_string(), "scales".to_string()]);
        assert_eq!(report.converted_nodes, 6, "{report:?}");
        // keep_io_types: x cast down, w cast down for `add`, y1 cast up for `blocked`; else w, y1
        // and the float32 output of `blocked` cast down to the float16 output.
        assert_eq!(report.casts_inserted, 3, "{report:?}");
        let constants: Vec<&TensorData> = half
            .graph
            .nodes
            .iter()
            .filter_map(|n| match &n.op {
                headroom_onnx::Op::Constant(c) => Some(&c.value.data),
                headroom_onnx::Op::ConstantOfShape(c) => Some(&c.value.data),
                _ => None,
            })
            .collect();
        assert_eq!(constants, vec![&TensorData::F16(vec![0x3800]), &TensorData::F16(vec![0])]);
        let expected_io = if keep_io_types { DataType::Float } else { DataType::Float16 };
        assert_eq!(io_types(&half), vec![expected_io as i32; 2]);
    }
}
