use super::*;

fn record(dir: &Path, name: &str, width: u32, height: u32, labels: Vec<YoloLabel>) -> ImageRecord {
    let image = dir.join("images").join(name);
    ImageRecord { label: label_path_for(&image), image, width, height, labels }
}

fn label(class: usize, cx: f32, cy: f32, w: f32, h: f32) -> YoloLabel {
    YoloLabel { class, cx, cy, w, h }
}

fn read_error(json: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("instances.json");
    std::fs::write(&path, json).expect("write");
    let err = read_coco(&path, dir.path()).expect_err("must fail").to_string();
    assert!(err.contains("instances.json"), "error does not name the file: {err}");
    err
}

/// Same class, coordinates within 1e-4.
fn assert_close(got: YoloLabel, want: YoloLabel) {
    let err = [got.cx - want.cx, got.cy - want.cy, got.w - want.w, got.h - want.h].map(f32::abs);
    assert!(got.class == want.class && err.iter().all(|e| *e < 1e-4), "{got:?} vs {want:?}");
}

#[test]
fn ground_truth_round_trip() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let images = vec![
        record(d, "a.jpg", 640, 480, vec![label(0, 0.5, 0.5, 0.2, 0.3), label(2, 0.123457, 0.9, 0.05, 0.1)]),
        record(d, "sub/b.png", 333, 517, vec![]),
        record(d, "c.png", 100, 100, vec![label(1, 0.25, 0.75, 0.5, 0.5)]),
    ];
    let names: Vec<String> = ["cat", "dog", "cow"].map(String::from).to_vec();
    let ids = CocoIds { image_ids: vec![7, 3, 11], category_ids: vec![1, 5, 9] };
    let json = d.join("gt.json");
    write_coco_ground_truth(&json, &images, &names, &ids, &d.join("images")).expect("written");
    let back = read_coco(&json, &d.join("images")).expect("read back");
    assert_eq!(back.names, names);
    assert_eq!(back.ids, ids);
    assert_eq!((back.crowd_skipped, back.empty_skipped, back.clipped), (0, 0, 0));
    assert_eq!(back.images.len(), images.len());
    for (got, want) in back.images.iter().zip(&images) {
        assert_eq!(
            (&got.image, &got.label, got.width, got.height),
            (&want.image, &want.label, want.width, want.height)
        );
        assert_eq!(got.labels.len(), want.labels.len());
        for (&g, &w) in got.labels.iter().zip(&want.labels) {
            assert_close(g, w);
        }
    }
}

#[test]
fn categories_map_to_classes_in_id_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("instances.json");
    let json = r#"{"info": {}, "images": [{"id": 4, "file_name": "x.jpg", "width": 200, "height": 100, "license": 1}],
        "annotations": [
            {"id": 1, "image_id": 4, "category_id": 90, "bbox": [10, 20, 40, 30], "segmentation": []},
            {"id": 2, "image_id": 4, "category_id": 3, "bbox": [0, 0, 50, 50], "iscrowd": 1},
            {"id": 3, "image_id": 4, "category_id": 3, "bbox": [0, 0, 0, 50]},
            {"id": 4, "image_id": 4, "category_id": 3, "bbox": [180, 90, 40, 20], "iscrowd": false}
        ],
        "categories": [{"id": 90, "name": "z"}, {"id": 3, "name": "a"}]}"#;
    std::fs::write(&path, json).expect("write");
    let coco = read_coco(&path, Path::new("imgs")).expect("valid");
    assert_eq!(coco.names, ["a", "z"]);
    assert_eq!(coco.ids.category_ids, [3, 90]);
    assert_eq!((coco.crowd_skipped, coco.empty_skipped, coco.clipped), (1, 1, 1));
    let labels = &coco.images[0].labels;
    assert_eq!(coco.images[0].image, Path::new("imgs/x.jpg"));
    assert_eq!(labels.len(), 2);
    assert_close(labels[0], label(1, 0.15, 0.35, 0.2, 0.3));
    assert_close(labels[1], label(0, 0.95, 0.95, 0.1, 0.1));
}

#[test]
fn bad_files_name_the_file_and_the_item() {
    let image = r#"{"id": 1, "file_name": "a.jpg", "width": 10, "height": 10}"#;
    let category = r#"{"id": 1, "name": "a"}"#;
    let cases = [
        ("{".to_string(), "invalid JSON"),
        (r#"{"images": [], "annotations": []}"#.to_string(), "missing field `categories`"),
        (format!(r#"{{"images": [{image}], "categories": []}}"#), "`categories` is empty"),
        (
            format!(r#"{{"images": [{{"id": 5}}], "categories": [{category}]}}"#),
            "`images[0]` (id 5): missing field",
        ),
        (
            format!(r#"{{"images": [{image}, {image}], "categories": [{category}]}}"#),
            "image id 1 appears twice",
        ),
        (
            format!(r#"{{"images": [{image}], "categories": [{category}, {category}]}}"#),
            "category id 1 appears twice",
        ),
        (
            format!(
                r#"{{"images": [{image}], "categories": [{category}],
                "annotations": [{{"id": 17, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3]}}]}}"#
            ),
            "`annotations[0]` (id 17)",
        ),
        (
            format!(
                r#"{{"images": [{image}], "categories": [{category}],
                "annotations": [{{"id": 18, "image_id": 2, "category_id": 1, "bbox": [1, 2, 3, 4]}}]}}"#
            ),
            "annotation id 18: image_id 2 is not in `images`",
        ),
        (
            format!(
                r#"{{"images": [{image}], "categories": [{category}],
                "annotations": [{{"id": 19, "image_id": 1, "category_id": 4, "bbox": [1, 2, 3, 4]}}]}}"#
            ),
            "annotation id 19: category_id 4 is not in `categories`",
        ),
        (
            format!(
                r#"{{"images": [{{"id": 3, "file_name": "z.jpg", "width": 0, "height": 4}}], "categories": [{category}]}}"#
            ),
            "image id 3 (`z.jpg`) has zero width or height",
        ),
    ];
    for (json, want) in cases {
        let got = read_error(&json);
        assert!(got.contains(want), "for {json}: `{got}` lacks `{want}`");
    }
}

#[test]
fn detections_as_coco_results() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("results.json");
    let dets = vec![
        vec![Detection { bbox: Xyxy::new(10.0, 20.0, 50.5, 80.25), score: 0.876_543_2, class: 1 }],
        vec![],
    ];
    let ids = CocoIds::sequential(2, 2);
    write_coco_detections(&path, &dets, &ids).expect("written");
    let written: Value = serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
    let want = serde_json::json!([{"image_id": 1, "category_id": 2, "bbox": [10.0, 20.0, 40.5, 60.25], "score": 0.87654}]);
    assert_eq!(written, want);
    let err = write_coco_detections(&path, &dets[..1], &ids).expect_err("id count");
    assert!(err.to_string().contains("2 image ids"), "{err}");
    let bad = vec![vec![Detection { bbox: Xyxy::default(), score: 0.5, class: 2 }], vec![]];
    let err = write_coco_detections(&path, &bad, &ids).expect_err("class");
    assert!(err.to_string().contains("class 2 has no category id"), "{err}");
}
