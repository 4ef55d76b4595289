//! Quantization-aware training computes what the INT8 file will: the demo student run on libtorch
//! with fake quantization at a Q/DQ file's sites and scales (`headroom_run::qat::sites`) gives ONNX
//! Runtime's output of that Q/DQ file, where the float model does not.
#![cfg(all(feature = "libtorch", feature = "onnxruntime"))]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use headroom_onnx::Model;
use headroom_train::Executor;
use headroom_train::tch::{Device, Kind, Tensor};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn values(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(&t.detach().to_kind(Kind::Float).flatten(0, -1)).expect("values")
}

/// Mean absolute difference over the mean magnitude of `reference`.
fn relative(a: &[f32], reference: &[f32]) -> f64 {
    let diff: f64 = a.iter().zip(reference).map(|(x, y)| f64::from((x - y).abs())).sum();
    let norm: f64 = reference.iter().map(|y| f64::from(y.abs())).sum();
    diff / norm.max(1e-12)
}

/// Each quantized Conv alone (the others float): libtorch's fake-quantized pass gives ONNX
/// Runtime's output of the Q/DQ file within a tenth of the error the quantization causes (the
/// rest: a value within float rounding of a tie rounds the other way). All 63 at once: the flips
/// cascade through the layers, and the fake-quantized pass is still nearer the file than the float
/// pass is.
#[test]
fn fake_quantized_training_computes_what_the_int8_file_computes() {
    let path = root().join("models/demo/yolov8n-shapes-160.onnx");
    let model = Model::load(&path).expect("the demo student");
    headroom_train::tch::manual_seed(7);
    let input = Tensor::rand([1, 3, 160, 160], (Kind::Float, Device::Cpu));
    let array = ndarray::Array4::from_shape_vec((1, 3, 160, 160), values(&input)).expect("array");
    let mut executor = Executor::new(&model.graph, Device::Cpu).expect("executor");
    let image = executor.input_names()[0].clone();
    // Ranges from this input (any ranges do: the file and the training share them).
    let sites = headroom_onnx::quant::sites(&model).expect("sites");
    let names: Vec<&str> = sites.convs.iter().map(|c| c.activation.as_str()).collect();
    let activations =
        executor.run(vec![(image.clone(), input.shallow_clone())], &names).expect("activations");
    let amax: HashMap<String, f32> = names
        .iter()
        .zip(&activations)
        .map(|(n, t)| (n.to_string(), f32::try_from(t.abs().max()).expect("max")))
        .collect();
    let float = values(&executor.run(vec![(image.clone(), input.shallow_clone())], &[]).expect("float")[0]);
    let session = headroom_infer::provider::SessionOptions { intra_threads: 1, ..Default::default() };
    let dir = tempfile::tempdir().expect("tempdir");
    let errors = |executor: &mut Executor, keep_float: HashSet<String>| -> (f64, f64, usize) {
        let options = headroom_onnx::quant::Int8Options { keep_float };
        let (bytes, report) = headroom_onnx::quant::to_int8(&model, &sites, &amax, &options).expect("Q/DQ");
        let int8 = dir.path().join("yolov8n-shapes-160.int8.onnx");
        std::fs::write(&int8, &bytes).expect("write");
        let mut detector = headroom_infer::detector::Detector::open(&int8, &session).expect("ONNX Runtime");
        let (ort, _) = detector.raw_output(&array).expect("run");
        let scales = headroom_run::qat::sites(&int8, &model).expect("the file's sites");
        assert_eq!(scales.len(), report.quantized, "every quantized Conv is fake-quantized");
        executor.set_fake_quant(scales).expect("fake quantization");
        let fake = values(&executor.run(vec![(image.clone(), input.shallow_clone())], &[]).expect("fake")[0]);
        (relative(&fake, &ort), relative(&float, &ort), report.quantized)
    };
    for site in &sites.convs {
        let others = sites.convs.iter().filter(|c| c.node != site.node).map(|c| c.node.clone()).collect();
        let (fake, float, quantized) = errors(&mut executor, others);
        assert_eq!(quantized, 1);
        assert!(
            fake < 1e-6 || fake < 0.1 * float,
            "{} alone: fake-quantized vs the file {fake:.2e}, float vs the file {float:.2e}",
            site.node
        );
    }
    let (fake, float, quantized) = errors(&mut executor, HashSet::new());
    assert_eq!(quantized, 63, "every YOLOv8n Conv but DFL's");
    assert!(fake < 0.7 * float, "all: fake-quantized vs the file {fake:.2e}, float vs the file {float:.2e}");
}

#[test]
fn a_file_of_another_model_is_refused() {
    let student = Model::load(root().join("models/demo/yolov8n-shapes-160.onnx")).expect("student");
    let fp32 = root().join("models/demo/teacher-shapes-160.onnx");
    let err = headroom_run::qat::sites(&fp32, &student).expect_err("an FP32 file").to_string();
    assert!(err.contains("no Conv reads a quantized activation"), "{err}");
}
