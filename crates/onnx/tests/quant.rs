//! The INT8 Q/DQ rewrite on every fixture family and the demo model: every Conv outside the decode
//! reads its activation through one Q/DQ pair per tensor and its weight through a per-channel
//! DequantizeLinear of an int8 initializer; the decode (DFL's conv included) is untouched; the
//! graph stays in topological order; Convs kept float keep their inputs. (Numbers against ONNX
//! Runtime: crates/cli/tests/export.rs and scripts/bench/int8_peers.py.)

use std::collections::{HashMap, HashSet};

use headroom_onnx::Model;
use headroom_onnx::proto::ModelProto;
use headroom_onnx::quant::{Int8Options, sites, to_int8};
use prost::Message as _;

mod common;
use common::{all_models, root};

#[test]
fn every_conv_outside_the_decode_gets_qdq_and_the_decode_stays_float() {
    for path in all_models() {
        let model = Model::load(&path).expect("load");
        let found = sites(&model).expect("sites");
        let graph = model.proto.graph.as_ref().expect("graph");
        let convs = graph.node.iter().filter(|n| n.op_type() == "Conv").count();
        assert!(found.decode_nodes > 0, "{}", path.display());
        // Only the DFL conv (anchor-free heads; YOLOv10/26 have none without DFL) is in the decode.
        assert!(
            convs - found.convs.len() <= 2,
            "{}: {convs} convs, {} sites",
            path.display(),
            found.convs.len()
        );
        assert_eq!(found.tensors[0], found.input);
        assert!(found.skipped.is_empty(), "{:?}", found.skipped);

        let amax: HashMap<String, f32> = found.tensors.iter().map(|t| (t.clone(), 2.0)).collect();
        let (bytes, report) = to_int8(&model, &found, &amax, &Int8Options::default()).expect("int8");
        let out = ModelProto::decode(bytes.as_slice()).expect("decodes");
        let g = out.graph.as_ref().expect("graph");
        let count = |op: &str| g.node.iter().filter(|n| n.op_type() == op).count();
        assert_eq!(report.quantized, found.convs.len());
        assert_eq!(count("QuantizeLinear"), report.activations);
        assert_eq!(count("DequantizeLinear"), report.activations + report.weights);
        assert!(report.activations <= report.quantized, "activations shared by readers get one pair");

        let produced: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
        let mut available: HashSet<&str> = produced.clone();
        available.extend(g.input.iter().map(|i| i.name()));
        for node in &g.node {
            for input in node.input.iter().filter(|i| !i.is_empty()) {
                assert!(
                    available.contains(input.as_str()),
                    "{}: `{input}` of {} used before made",
                    path.display(),
                    node.name()
                );
            }
            available.extend(node.output.iter().map(String::as_str));
        }
        let quantized: HashSet<&str> = found.convs.iter().map(|c| c.node.as_str()).collect();
        let by_name: HashMap<&str, &headroom_onnx::proto::NodeProto> =
            g.node.iter().map(|n| (n.name(), n)).collect();
        for node in g.node.iter().filter(|n| n.op_type() == "Conv") {
            let q = quantized.contains(node.name());
            assert_eq!(node.input[0].ends_with("_dequantized"), q, "{}: {}", path.display(), node.name());
            assert_eq!(node.input[1].ends_with("_dequantized"), q, "{}: {}", path.display(), node.name());
        }
        for dq in g
            .node
            .iter()
            .filter(|n| n.op_type() == "DequantizeLinear" && n.attribute.iter().any(|a| a.name() == "axis"))
        {
            let weight =
                g.initializer.iter().find(|t| t.name() == dq.input[0]).expect("int8 weight initializer");
            assert_eq!(weight.data_type(), 3, "int8");
            let scale = g.initializer.iter().find(|t| t.name() == dq.input[1]).expect("scale");
            assert_eq!(scale.dims, vec![weight.dims[0]], "one scale per output channel");
        }
        // TensorRT's placement rules (its "Q/DQ layer-placement recommendations"), which let it
        // fuse each pair into the Conv after it with no reformat layer: symmetric int8 (a zero
        // point of 0, int8), each QuantizeLinear read only by its DequantizeLinear, and each
        // DequantizeLinear read only by Convs (a residual Add or a Concat reads the float tensor).
        let readers = |tensor: &str| -> Vec<&headroom_onnx::proto::NodeProto> {
            g.node.iter().filter(|n| n.input.iter().any(|i| i == tensor)).collect()
        };
        for node in
            g.node.iter().filter(|n| n.op_type() == "QuantizeLinear" || n.op_type() == "DequantizeLinear")
        {
            let zero = g.initializer.iter().find(|t| t.name() == node.input[2]).expect("zero point");
            assert_eq!(zero.data_type(), 3, "{}: {} zero point int8", path.display(), node.name());
            let zeros = zero.int32_data.iter().all(|&v| v == 0) && zero.raw_data().iter().all(|&b| b == 0);
            assert!(zeros, "{}: {} zero point 0 (symmetric)", path.display(), node.name());
            let next = readers(&node.output[0]);
            assert!(!next.is_empty(), "{}: {} is read by nothing", path.display(), node.name());
            let want = if node.op_type() == "QuantizeLinear" { "DequantizeLinear" } else { "Conv" };
            for reader in next {
                assert_eq!(
                    reader.op_type(),
                    want,
                    "{}: {} ({}) is read by {} ({}): TensorRT would insert a reformat",
                    path.display(),
                    node.name(),
                    node.op_type(),
                    reader.name(),
                    reader.op_type()
                );
            }
        }
        // The float weights of quantized convs left the file.
        for site in &found.convs {
            assert!(
                !produced.contains(site.weight.as_str()),
                "{}: `{}` still float",
                path.display(),
                site.weight
            );
        }

        // One Conv kept float keeps its float inputs.
        let kept = found.convs[found.convs.len() / 2].node.clone();
        let options = Int8Options { keep_float: [kept.clone()].into_iter().collect() };
        let (bytes, report) = to_int8(&model, &found, &amax, &options).expect("int8");
        assert_eq!(report.kept_float, vec![kept.clone()]);
        let out = ModelProto::decode(bytes.as_slice()).expect("decodes");
        let g = out.graph.as_ref().expect("graph");
        let node = g.node.iter().find(|n| n.name() == kept).expect("kept conv");
        let original = by_name.get(kept.as_str()).map(|n| n.input.clone());
        assert!(original.is_some());
        assert!(!node.input[1].ends_with("_dequantized"));
    }
}

#[test]
fn a_missing_range_is_an_error_naming_the_tensor() {
    let model = Model::load(root().join("models/demo/yolov8n-shapes-160.onnx")).expect("load");
    let found = sites(&model).expect("sites");
    let err = to_int8(&model, &found, &HashMap::new(), &Int8Options::default()).expect_err("no ranges");
    assert!(err.to_string().contains("no calibration range for `images`"), "{err}");
}

/// Issue 21 (messages): an INT8 export is refused for training in one line naming the FP32 file,
/// and `Model::load_dequantized` shows it as the float graph it came from (same modules and
/// parameter count, each weight within half a quantization step of the original).
#[test]
fn an_int8_export_is_named_in_a_line_and_inspects_as_its_float_graph() {
    let path = root().join("models/demo/yolov8n-shapes-160.onnx");
    let model = Model::load(&path).expect("load");
    let found = sites(&model).expect("sites");
    let amax: HashMap<String, f32> = found.tensors.iter().map(|t| (t.clone(), 2.0)).collect();
    let (bytes, _) = to_int8(&model, &found, &amax, &Int8Options::default()).expect("int8");
    let dir = tempfile::tempdir().expect("tempdir");
    let int8 = dir.path().join("yolov8n-shapes-160.int8.onnx");
    std::fs::write(&int8, &bytes).expect("write");
    let err = Model::load(&int8).expect_err("Q/DQ is not trained").to_string();
    assert!(
        err.ends_with(
            "QuantizeLinear/DequantizeLinear nodes: this is an INT8 export; train the FP32 file it came from \
             (yolov8n-shapes-160.onnx)"
        ),
        "{err}"
    );
    let (float, nodes) = Model::load_dequantized(&int8).expect("dequantized");
    assert!(nodes > 100, "{nodes}");
    let (a, b) = (
        headroom_onnx::inspect::inspect(&model).expect("a"),
        headroom_onnx::inspect::inspect(&float).expect("b"),
    );
    assert_eq!(a.parameters, b.parameters);
    assert_eq!(a.modules.len(), b.modules.len());
    let site = &found.convs[0];
    let original = &model.graph.initializers[&site.weight];
    let conv = float.graph.nodes.iter().find(|n| n.name == site.node).expect("the conv");
    let restored = &float.graph.initializers[&conv.inputs[1]];
    let (headroom_onnx::TensorData::F32(x), headroom_onnx::TensorData::F32(y)) =
        (&original.data, &restored.data)
    else {
        panic!("float weights");
    };
    let largest = x.iter().map(|v| v.abs()).fold(0f32, f32::max);
    let step = largest / 127.0;
    assert!(x.iter().zip(y).all(|(p, q)| (p - q).abs() <= step / 2.0 + 1e-6), "within half a step {step}");
}
