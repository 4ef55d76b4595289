//! Re-normalisation against a PyTorch reference (tests/fixtures/renorm/golden.json, written by
//! scripts/fixtures/renorm_golden.py): on the demo student and 160x160 synth images, the first three
//! trunk Convs' statistics on the old images, then, Conv after Conv with the ones before it
//! corrected, their statistics on the new images, the clamped scales and the corrected biases — the
//! same statistics in the same order, within 1e-4.

#![cfg(all(feature = "libtorch", feature = "onnxruntime"))]

use std::path::{Path, PathBuf};

use headroom_core::dataset::{DataConfig, ImageRecord, LoadOptions, Split, load_split};
use headroom_core::synth::{Preset, SynthConfig, write_dataset};
use headroom_infer::provider::SessionOptions;
use headroom_onnx::Model;
use headroom_onnx::renorm::stem_convs;
use sha2::{Digest, Sha256};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The golden's image set `name`, made again by the generator and checked byte for byte.
fn images(golden: &serde_json::Value, name: &str, dir: &Path) -> Vec<ImageRecord> {
    let set = &golden["images"][name];
    let preset = if set["preset"] == "base" { Preset::Base } else { Preset::Field };
    let seed = set["seed"].as_u64().expect("seed");
    let config =
        SynthConfig { preset, seed, train: 8, val: 1, width: 160, height: 160, ..SynthConfig::default() };
    let out = dir.join(name);
    write_dataset(&config, &out, |_| {}).expect("synth");
    let data = DataConfig::load(&out.join("data.yaml")).expect("data.yaml");
    let records = load_split(&data, Split::Train, LoadOptions::default()).expect("split").images;
    let mut paths: Vec<&Path> = records.iter().map(|r| r.image.as_path()).collect();
    paths.sort();
    let shas: Vec<String> = paths
        .iter()
        .map(|p| {
            Sha256::digest(std::fs::read(p).expect("image")).iter().map(|b| format!("{b:02x}")).collect()
        })
        .collect();
    let expected: Vec<String> = set["sha256"]
        .as_array()
        .expect("sha256")
        .iter()
        .map(|v| v.as_str().expect("hex").to_string())
        .collect();
    assert_eq!(
        shas, expected,
        "the {name} images differ from the golden's: synth changed; rerun scripts/fixtures/renorm_golden.py"
    );
    records
}

fn numbers(value: &serde_json::Value) -> Vec<f64> {
    value.as_array().expect("array").iter().map(|v| v.as_f64().expect("number")).collect()
}

/// The largest difference between `ours` and `reference`, relative to max(1, |reference|), with
/// where it is.
fn assert_close(what: &str, ours: &[f64], reference: &[f64]) {
    assert_eq!(ours.len(), reference.len(), "{what}: lengths");
    let (worst, at) = ours
        .iter()
        .zip(reference)
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .enumerate()
        .fold((0.0, 0), |(w, at), (i, e)| if e > w { (e, i) } else { (w, at) });
    assert!(
        worst <= 1e-4,
        "{what}: largest error {worst:.2e} at channel {at} ({} vs {})",
        ours[at],
        reference[at]
    );
}

#[test]
fn renormalisation_matches_the_pytorch_reference() {
    let golden: serde_json::Value = serde_json::from_slice(
        &std::fs::read(workspace().join("tests/fixtures/renorm/golden.json")).expect("golden.json"),
    )
    .expect("json");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (old, new) = (images(&golden, "old", tmp.path()), images(&golden, "new", tmp.path()));
    let path = workspace().join(golden["model"].as_str().expect("model"));
    let bytes = std::fs::read(&path).expect("model");
    let count = golden["count"].as_u64().expect("count") as usize;
    let convs = golden["convs"].as_array().expect("convs");

    let model = Model::from_bytes(&bytes, &path).expect("model");
    let inspection = headroom_onnx::inspect::inspect(&model).expect("inspect");
    let sites = stem_convs(&model.graph, &inspection, count).expect("convs");
    let names: Vec<&str> = sites.iter().map(|s| s.node.as_str()).collect();
    let expected: Vec<&str> = convs.iter().map(|c| c["node"].as_str().expect("node")).collect();
    assert_eq!(names, expected, "the same Convs in the same order");

    // The old images' statistics, with the original weights.
    let options = SessionOptions { intra_threads: 1, ..Default::default() };
    let old_stats =
        headroom_run::renorm::conv_statistics(&model, &sites, &old, [160, 160], &options).expect("old");
    for (k, (stats, reference)) in old_stats.iter().zip(convs).enumerate() {
        assert_close(&format!("conv {k} old mean"), &stats.mean, &numbers(&reference["old_mean"]));
        assert_close(&format!("conv {k} old std"), &stats.std, &numbers(&reference["old_std"]));
    }

    // The whole re-normalisation; then, Conv by Conv, the new images' statistics with the earlier
    // Convs corrected (on the result with the later Convs still original) and the folded weights.
    let (renormed, _) = headroom_run::renorm::renormalise(&path, &bytes, count, &new, &old, [160, 160], 1)
        .expect("renormalise");
    let original = headroom_onnx::patch::read_weights(&model);
    let result = headroom_onnx::patch::read_weights(&Model::from_bytes(&renormed, &path).expect("result"));
    for (k, (site, reference)) in sites.iter().zip(convs).enumerate() {
        let (w0, w1) = (&original[&site.weight], &result[&site.weight]);
        let per_channel = w0.len() / site.channels;
        let scales: Vec<f64> = (0..site.channels)
            .map(|c| {
                let i = (c * per_channel..(c + 1) * per_channel)
                    .max_by(|&a, &b| w0[a].abs().total_cmp(&w0[b].abs()))
                    .expect("weights");
                f64::from(w1[i]) / f64::from(w0[i])
            })
            .collect();
        assert_close(&format!("conv {k} scale"), &scales, &numbers(&reference["scale"]));
        let bias: Vec<f64> = result[&site.bias].iter().map(|&b| f64::from(b)).collect();
        assert_close(&format!("conv {k} bias"), &bias, &numbers(&reference["bias"]));
        // Statistics on the new images with Convs 0..k-1 corrected: those of the input of Conv k's
        // correction, measured here on a model holding only the first k corrections.
        let mut partial = bytes.clone();
        for earlier in &sites[..k] {
            let patch = [earlier.weight.clone(), earlier.bias.clone()]
                .into_iter()
                .map(|n| (n.clone(), result[&n].clone()))
                .collect();
            partial = headroom_onnx::patch::write_weights(&partial, &path, &patch, &[]).expect("patch");
        }
        let partial = Model::from_bytes(&partial, &path).expect("partial");
        let stats =
            headroom_run::renorm::conv_statistics(&partial, &sites[k..=k], &new, [160, 160], &options)
                .expect("new")
                .remove(0);
        assert_close(&format!("conv {k} new mean"), &stats.mean, &numbers(&reference["new_mean"]));
        assert_close(&format!("conv {k} new std"), &stats.std, &numbers(&reference["new_std"]));
    }
}
