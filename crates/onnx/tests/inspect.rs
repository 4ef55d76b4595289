//! `inspect` on the committed fixtures: family, head found by shape, parameter counts, freeze points.

use std::path::{Path, PathBuf};

use headroom_onnx::inspect::{Inspection, inspect};
use headroom_onnx::{Error, Model};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn inspect_file(path: &Path) -> Inspection {
    let model = Model::load(path).unwrap_or_else(|e| panic!("{e}"));
    inspect(&model).unwrap_or_else(|e| panic!("{e}"))
}

/// (file, family, detect module, reg_max, end-to-end) and the reference parameter count of the fused
/// model Ultralytics reports (tests/fixtures/onnx/fixtures.json).
fn fixtures() -> Vec<(String, String, usize, bool, usize)> {
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/onnx/fixtures.json")).expect("fixtures.json");
    let records: Vec<serde_json::Value> = serde_json::from_str(&text).expect("json");
    records
        .iter()
        .map(|r| {
            let family = match r["family"].as_str().expect("family") {
                "yolov8n" => "v8",
                "yolov5nu" => "v5u",
                "yolo11n" => "11",
                "yolov10n" => "v10",
                "yolo26n" => "26",
                other => panic!("unknown family {other}"),
            };
            let e2e = r["export"]["nms"].as_bool() == Some(false);
            (
                r["file"].as_str().expect("file").to_string(),
                family.to_string(),
                r["detect_module"].as_u64().expect("module") as usize,
                e2e,
                r["fused_parameters"].as_u64().expect("params") as usize,
            )
        })
        .collect()
}

#[test]
fn every_fixture_has_its_family_head_and_parameter_count() {
    for (file, family, module, e2e, params) in fixtures() {
        let report = inspect_file(&root().join("tests/fixtures/onnx").join(&file));
        println!(
            "{file}: {} {} {:?} params {} vs {params}",
            report.family, report.family_evidence, report.head.module, report.parameters
        );
        assert_eq!(report.family, family, "{file}");
        assert_eq!(report.head.module, Some(module), "{file}");
        assert_eq!(report.end_to_end, e2e, "{file}");
        assert_eq!(report.strides, vec![8, 16, 32], "{file}");
        assert_eq!(report.classes, 3, "{file}");
        assert_eq!(report.head.reg_max, if family == "26" { 1 } else { 16 }, "{file}");
        assert_eq!(report.parameters, params, "{file}: parameter count vs Ultralytics (fused)");
        assert_eq!(report.dynamic, file.contains("dynamic"), "{file}");
        let last = report.freeze_points.last().expect("freeze points");
        assert_eq!((last.freeze, last.name.as_deref()), (module, Some("head")), "{file}");
    }
}

#[test]
fn yolov8n_head_is_found_by_shape_at_model_22() {
    let report = inspect_file(&root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160.onnx"));
    assert_eq!(report.head.box_channels, 64);
    assert_eq!(report.head.class_channels, 3);
    let grids: Vec<[i64; 2]> = report.head.levels.iter().map(|l| l.grid).collect();
    assert_eq!(grids, vec![[20, 20], [10, 10], [5, 5]]);
    for level in &report.head.levels {
        assert!(level.box_conv.starts_with("/model.22/cv2."), "{}", level.box_conv);
        assert!(level.class_conv.starts_with("/model.22/cv3."), "{}", level.class_conv);
    }
    assert_eq!(report.outputs[0].layout, "boxes+scores");
}

#[test]
fn demo_model_counts_match_ultralytics_freeze_10() {
    let report = inspect_file(&root().join("models/demo/yolov8n-shapes-160.onnx"));
    assert_eq!(report.family, "v8");
    assert_eq!(report.names.as_deref().map(<[String]>::len), Some(3));
    // Ultralytics (8.4.190): DetectionModel('yolov8n.yaml', nc=3).fuse() has 3,006,233 parameters,
    // 1,736,089 of them in model.10 and later (trainable with freeze=10).
    assert_eq!(report.parameters, 3_006_233);
    let ten = report.freeze_points.iter().find(|p| p.freeze == 10).expect("freeze 10");
    assert_eq!(ten.name.as_deref(), Some("neck+head"));
    assert_eq!((ten.frozen_parameters, ten.trainable_parameters), (1_270_144, 1_736_089));
}

#[test]
fn a_graph_that_is_not_a_detector_is_rejected() {
    let mut model =
        Model::load(root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160.onnx")).expect("loads");
    // Cut the graph after the stem: the only conv feeding the output is model.0's.
    let stem = model.graph.nodes.iter().find(|n| n.name.contains("model.1/")).expect("model.1");
    model.graph.outputs[0].name = stem.inputs[0].clone();
    let err = inspect(&model).expect_err("not a detector");
    assert!(matches!(err, Error::NotDetector { .. }), "{err}");
}

#[test]
fn a_checkpointed_backward_keeps_the_detect_head_when_more_than_the_head_trains() {
    use headroom_onnx::{Partition, Trainable};
    let model = Model::load(root().join("models/demo/yolov8n-shapes-160.onnx")).expect("demo");
    let inspection = inspect(&model).expect("inspect");
    let head = inspection.head.module;
    // Every layer: the detect head's branches (six, and its decoding) are the kept tail.
    let all = Partition::new(&model.graph, &inspection, Trainable::Freeze(0)).expect("all");
    let split = all.recomputed();
    assert!(split > 0 && split < all.segments.len(), "{split} of {}", all.segments.len());
    assert!(all.segments[split..].iter().all(|s| s.module == head), "the tail is the head");
    assert!(all.segments[split - 1].module != head, "and all of it");
    assert!(all.segments.len() - split >= 6, "{} head segments", all.segments.len() - split);
    // The head alone: its segments are the whole recomputation; only the last is kept.
    let only = Partition::new(&model.graph, &inspection, Trainable::Head).expect("head");
    assert_eq!(only.recomputed(), only.segments.len() - 1);
}
