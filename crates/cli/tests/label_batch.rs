//! `headroom label` with teachers whose batch is dynamic: batches above 1 really run (the manifest's
//! `batch`, and one `-v` log line per teacher call with its input shape) and write batch 1's labels
//! and soft scores.

#[allow(dead_code)]
mod common;

#[cfg(feature = "onnxruntime")]
mod with_onnxruntime {
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    use headroom_infer::soft_scores::{SoftRecord, read_soft_scores};
    use headroom_onnx::proto::tensor_shape_proto::dimension;
    use headroom_onnx::proto::{ModelProto, type_proto};
    use prost::Message;

    use crate::common::{demo_model, headroom, headroom_command, repo_root, s};

    /// The demo model with a dynamic batch, written to `dir`: the shape constants of its Reshape nodes
    /// start with batch 1, which becomes 0 ("copy the input's dimension"); input and output dimension
    /// 0 become `batch`; the batch-1 `value_info` goes. Nothing else changes, so every image's output
    /// is the static model's (checked below through the labels). Made here rather than committed:
    /// the file is 12 MB.
    fn batch_dynamic_demo(dir: &Path) -> PathBuf {
        let bytes = std::fs::read(demo_model()).expect("demo model");
        let mut model = ModelProto::decode(bytes.as_slice()).expect("ONNX protobuf");
        let graph = model.graph.as_mut().expect("a graph");
        let shapes: BTreeSet<String> = graph
            .node
            .iter()
            .filter(|n| n.op_type.as_deref() == Some("Reshape"))
            .map(|n| n.input[1].clone())
            .collect();
        let mut edited = 0;
        for tensor in &mut graph.initializer {
            if !shapes.contains(tensor.name.as_deref().unwrap_or_default()) {
                continue;
            }
            let raw = tensor.raw_data.as_mut().expect("int64 shape in raw_data");
            assert_eq!(raw[..8], 1i64.to_le_bytes(), "{:?} starts with batch 1", tensor.name);
            raw[..8].copy_from_slice(&0i64.to_le_bytes());
            edited += 1;
        }
        assert_eq!((edited, shapes.len()), (4, 4), "the demo model's Reshape shapes: {shapes:?}");
        for value in graph.input.iter_mut().chain(graph.output.iter_mut()) {
            let Some(type_proto::Value::TensorType(tensor)) =
                value.r#type.as_mut().and_then(|t| t.value.as_mut())
            else {
                panic!("{:?} is not a tensor", value.name)
            };
            tensor.shape.as_mut().expect("a shape").dim[0].value =
                Some(dimension::Value::DimParam("batch".into()));
        }
        graph.value_info.clear();
        let path = dir.join("demo-dynamic-batch.onnx");
        std::fs::write(&path, model.encode_to_vec()).expect("write the model");
        path
    }

    /// `headroom synth` val images; returns their folder.
    fn synth(dir: &Path, seed: &str, n: usize, size: &str) -> PathBuf {
        let out = dir.join(format!("synth-{seed}"));
        let n = n.to_string();
        let args =
            ["-q", "synth", "--seed", seed, "--train", "1", "--val", &n, "--size", size, "--out", s(&out)];
        let run = headroom(&args);
        assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
        out.join("images/val")
    }

    /// One teacher call from the `-v` log: images in the batch, and the input shape.
    type Call = (usize, Vec<usize>);

    /// `headroom -v label --json --topk 5`: the manifest, and the teacher calls it logged.
    fn label(teacher: &Path, images: &Path, out: &Path, extra: &[&str]) -> (serde_json::Value, Vec<Call>) {
        let mut args = vec!["-v", "label", "--teacher", s(teacher), "--images", s(images), "--out", s(out)];
        args.extend_from_slice(&["--json", "--topk", "5"]);
        args.extend_from_slice(extra);
        // `RUST_LOG` would override `-v`.
        let run = headroom_command().args(&args).env_remove("RUST_LOG").output().expect("headroom runs");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(run.status.success(), "{stderr}");
        let manifest = serde_json::from_slice(&run.stdout).expect("the manifest on stdout");
        let calls = stderr
            .lines()
            .filter_map(|line| line.split_once("teacher call: ").map(|(_, call)| call))
            .map(|call| {
                let (images, shape) = call.split_once(" images, input [").expect("call format");
                let shape = shape.split(']').next().unwrap_or_default();
                let shape = shape.split(", ").map(|d| d.parse().expect("dimension")).collect();
                (images.parse().expect("image count"), shape)
            })
            .collect();
        (manifest, calls)
    }

    fn calls(batches: &[usize], size: usize) -> Vec<Call> {
        batches.iter().map(|&n| (n, vec![n, 3, size, size])).collect()
    }

    /// The largest difference between two labelled datasets and where it is.
    #[derive(Debug, Default)]
    struct Difference {
        largest: f64,
        at: String,
        boxes: usize,
        records: usize,
    }

    impl Difference {
        /// Relative difference (floored at 1e-3, below which values are compared absolutely).
        fn relative(&mut self, a: f32, b: f32, at: impl Fn() -> String) {
            let error = f64::from((a - b).abs()) / f64::from(a.abs().max(b.abs()).max(1e-3));
            if error > self.largest {
                self.largest = error;
                self.at = at();
            }
        }

        fn records(&mut self, stem: &str, kind: &str, a: &[SoftRecord], b: &[SoftRecord]) {
            assert_eq!(a.len(), b.len(), "{stem}: {kind} records");
            for (i, (a, b)) in a.iter().zip(b).enumerate() {
                let at = |what: &str| format!("{stem} {kind}[{i}] {what}");
                assert_eq!((a.class, a.teacher_class), (b.class, b.teacher_class), "{}", at("class"));
                self.relative(a.score, b.score, || at("score"));
                for (k, (x, y)) in a.bbox.iter().zip(&b.bbox).enumerate() {
                    self.relative(*x, *y, || at(&format!("box[{k}]")));
                }
                assert_eq!(a.scores.len(), b.scores.len(), "{}", at("score vector"));
                for (k, (x, y)) in a.scores.iter().zip(&b.scores).enumerate() {
                    // Quantised to 1/65535: compared absolutely.
                    assert!((x - y).abs() <= 1e-4, "{}: {x} vs {y}", at(&format!("scores[{k}]")));
                }
                self.records += 1;
            }
        }
    }

    /// Compares the labels and soft scores of `a` and `b` for every image of `images`: same boxes,
    /// same classes, and the largest relative difference of any box coordinate or score.
    fn compare(images: &Path, a: &Path, b: &Path) -> Difference {
        let mut difference = Difference::default();
        let mut stems: Vec<String> = std::fs::read_dir(images)
            .expect("list")
            .map(|e| e.expect("entry").path().file_stem().and_then(|s| s.to_str()).expect("stem").to_string())
            .collect();
        stems.sort();
        for stem in &stems {
            let text = |root: &Path| {
                std::fs::read_to_string(root.join(format!("labels/{stem}.txt"))).expect("labels")
            };
            let (ta, tb) = (text(a), text(b));
            assert_eq!(ta.lines().count(), tb.lines().count(), "{stem}: boxes\n{ta}\nvs\n{tb}");
            for (i, (la, lb)) in ta.lines().zip(tb.lines()).enumerate() {
                let parse = |line: &str| -> Vec<f32> {
                    line.split_whitespace().map(|v| v.parse().expect("a number")).collect()
                };
                let (va, vb) = (parse(la), parse(lb));
                assert_eq!((va.len(), va[0]), (5, vb[0]), "{stem} line {i}: {la} vs {lb}");
                for (x, y) in va[1..].iter().zip(&vb[1..]) {
                    // Six decimals: one unit of the last digit on top of 1e-4 relative.
                    assert!(
                        (x - y).abs() <= 1e-4 * x.abs().max(y.abs()) + 1.5e-6,
                        "{stem} line {i}: {la} vs {lb}"
                    );
                }
                difference.boxes += 1;
            }
            let soft = |root: &Path| {
                read_soft_scores(&root.join(format!("labels/{stem}.scores.bin"))).expect("scores")
            };
            let (sa, sb) = (soft(a), soft(b));
            difference.records(stem, "kept", &sa.kept, &sb.kept);
            difference.records(stem, "top_k", &sa.top_k, &sb.top_k);
        }
        difference
    }

    #[test]
    fn a_dynamic_batch_teacher_runs_batches_of_eight_and_labels_as_batch_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), "7", 20, "256x192");
        let teacher = batch_dynamic_demo(dir.path());
        let (one, one_calls) = label(&teacher, &images, &dir.path().join("b1"), &["--batch", "1"]);
        let (eight, eight_calls) = label(&teacher, &images, &dir.path().join("b8"), &["--batch", "8"]);
        assert_eq!((one["batch"].as_u64(), eight["batch"].as_u64()), (Some(1), Some(8)));
        assert_eq!(one_calls, calls(&[1; 20], 160));
        // 20 images: two full batches and a partial one, not padded (in any order: two streams).
        let mut eight_calls = eight_calls;
        eight_calls.sort_by_key(|c| std::cmp::Reverse(c.0));
        assert_eq!(eight_calls, calls(&[8, 8, 4], 160));
        assert_eq!(eight["counts"]["labelled"].as_u64(), Some(20), "{eight}");
        // The shipped static model: its fixed batch of 1 wins over --batch 8.
        let (fixed, fixed_calls) =
            label(&demo_model(), &images, &dir.path().join("static"), &["--batch", "8"]);
        assert_eq!(fixed["batch"].as_u64(), Some(1));
        assert_eq!(fixed_calls, calls(&[1; 20], 160));

        let batched = compare(&images, &dir.path().join("b1"), &dir.path().join("b8"));
        eprintln!("batch 8 against batch 1: {batched:?}");
        assert!(batched.boxes > 20, "the demo model finds shapes: {batched:?}");
        assert!(batched.records >= batched.boxes + 5 * 20, "{batched:?}");
        assert!(batched.largest <= 1e-4, "{batched:?}");
        let edited = compare(&images, &dir.path().join("static"), &dir.path().join("b1"));
        eprintln!("dynamic-batch copy against the static model: {edited:?}");
        assert!(edited.largest <= 1e-4, "{edited:?}");
        assert_eq!(one["counts"]["boxes"], eight["counts"]["boxes"]);
    }

    /// Ultralytics' own `dynamic=True` export (batch, height and width free) runs at its `imgsz`
    /// metadata, also in batches. Its untrained weights give every image the same output, so this
    /// covers the symbolic shapes, not which output goes to which image (the test above does that).
    #[test]
    fn parallel_streams_label_every_image_once_and_as_one_stream() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), "9", 24, "256x192");
        let teacher = batch_dynamic_demo(dir.path());
        let (one, _) = label(&teacher, &images, &dir.path().join("s1"), &["--batch", "4", "--streams", "1"]);
        let (two, two_calls) = label(
            &teacher,
            &images,
            &dir.path().join("s2"),
            &["--batch", "4", "--streams", "2", "--threads", "2"],
        );
        assert_eq!((one["streams"].as_u64(), two["streams"].as_u64()), (Some(1), Some(2)));
        assert_eq!(two["counts"]["labelled"].as_u64(), Some(24), "{two}");
        let images_run: usize = two_calls.iter().map(|c| c.0).sum();
        assert_eq!(images_run, 24, "every image inferred exactly once: {two_calls:?}");
        let difference = compare(&images, &dir.path().join("s1"), &dir.path().join("s2"));
        eprintln!("2 streams against 1: {difference:?}");
        assert!(difference.boxes > 20 && difference.largest <= 1e-4, "{difference:?}");
        assert_eq!(one["counts"]["boxes"], two["counts"]["boxes"]);
    }

    #[test]
    fn an_ultralytics_dynamic_export_runs_at_its_imgsz_metadata_in_batches() {
        let dir = tempfile::tempdir().expect("tempdir");
        let images = synth(dir.path(), "8", 12, "200x300");
        let teacher = repo_root().join("tests/fixtures/onnx/yolov8n-w00625-nc3-160-dynamic.onnx");
        // Its class scores are near 0.004: a low threshold keeps boxes to compare.
        let low = ["--conf", "0.002"];
        let (one, one_calls) =
            label(&teacher, &images, &dir.path().join("b1"), &[&low[..], &["--batch", "1"]].concat());
        let (five, five_calls) =
            label(&teacher, &images, &dir.path().join("b5"), &[&low[..], &["--batch", "5"]].concat());
        assert_eq!(five["teacher"]["input_size"], serde_json::json!([160, 160]), "{five}");
        assert_eq!((one["batch"].as_u64(), five["batch"].as_u64()), (Some(1), Some(5)));
        assert_eq!(one_calls, calls(&[1; 12], 160));
        // Two inference streams on two cores: each collects a whole batch, but which one logs its
        // call first depends on the machine's load (seen: 5, 2, 5), so the batches are compared as
        // a set.
        let mut five_calls = five_calls;
        five_calls.sort_by_key(|c| std::cmp::Reverse(c.0));
        assert_eq!(five_calls, calls(&[5, 5, 2], 160));
        let difference = compare(&images, &dir.path().join("b1"), &dir.path().join("b5"));
        eprintln!("batch 5 against batch 1: {difference:?}");
        assert!(difference.boxes >= 12, "{difference:?}");
        assert!(difference.largest <= 1e-4, "{difference:?}");
    }
}
