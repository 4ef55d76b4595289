//! The executor against ONNX Runtime (`headroom inspect MODEL --check`): runs the model through
//! both on the same input and compares the graph outputs and the raw head tensors (what training
//! uses). The verdict tells a user whether headroom can train this model.

use std::path::PathBuf;
use std::time::Instant;

use headroom_core::letterbox::{LetterboxOptions, letterbox};
use headroom_core::synth::{self, SynthConfig};
use headroom_onnx::inspect::Inspection;
use headroom_onnx::{Model, Op};
use serde::Serialize;

use crate::{Error, Result};

/// Largest relative difference (to each tensor's largest magnitude) that passes.
pub const TOLERANCE: f64 = 1e-4;

/// The same for a model whose weights are float16 (headroom's FP16 export): float16 keeps about
/// three decimal digits, and two engines that round in another order differ by ~1e-3 (measured on
/// the demo model's FP16 export: 1.2e-3 at most).
pub const TOLERANCE_FP16: f64 = 1e-2;

/// The tolerance for `model`: [`TOLERANCE_FP16`] when it holds float16 weights.
fn tolerance_for(model: &Model) -> f64 {
    if model.has_float16_weights() { TOLERANCE_FP16 } else { TOLERANCE }
}

/// Options of the check.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// An image to feed (letterboxed); a deterministic synthetic scene when `None`.
    pub image: Option<PathBuf>,
    /// Square input size for dynamic models (default: the inspected size).
    pub imgsz: Option<u32>,
    /// Threads for both ONNX Runtime (intra-op) and libtorch; 0 leaves their defaults.
    pub threads: usize,
    /// Timed forward passes of each side after the compared one (0: no timing).
    pub repeat: usize,
}

/// One compared tensor.
#[derive(Debug, Clone, Serialize)]
pub struct TensorDiff {
    /// Tensor name.
    pub name: String,
    /// `output` or `head`.
    pub role: &'static str,
    /// Shape (ONNX Runtime's).
    pub shape: Vec<usize>,
    /// Largest absolute difference.
    pub max_abs: f64,
    /// Largest absolute difference over the tensor's largest magnitude.
    pub max_rel: f64,
}

/// The check's result.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// Input shape fed to both.
    pub input_shape: Vec<usize>,
    /// Every compared tensor.
    pub tensors: Vec<TensorDiff>,
    /// The largest relative difference over all of them.
    pub max_rel: f64,
    /// The tolerance.
    pub tolerance: f64,
    /// `max_rel <= tolerance`.
    pub passed: bool,
    /// Median forward time of ONNX Runtime, ms (with `--repeat`).
    pub onnxruntime_ms: Option<f64>,
    /// Median forward time of the executor, ms (with `--repeat`).
    pub executor_ms: Option<f64>,
    /// Threads used (0: library defaults).
    pub threads: usize,
}

impl CheckReport {
    /// The check as `headroom inspect --check` prints it; `export` says what kind of export a model that matches still
    /// is not trained as (an FP16 export).
    pub fn table(&self, export: Option<&str>) -> String {
        use std::fmt::Write as _;
        let r = self;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\ncheck       ONNX Runtime vs headroom executor (libtorch), input {:?}",
            r.input_shape
        );
        for t in &r.tensors {
            let _ = writeln!(
                s,
                "  {:<6} {:<40} {:<18} max abs {:.3e}  max rel {:.3e}",
                t.role,
                t.name,
                format!("{:?}", t.shape),
                t.max_abs,
                t.max_rel
            );
        }
        if let (Some(a), Some(b)) = (r.onnxruntime_ms, r.executor_ms) {
            let _ = writeln!(
                s,
                "  forward (median, {} threads): ONNX Runtime {a:.2} ms, executor {b:.2} ms, ratio {:.2}",
                r.threads,
                b / a
            );
        }
        let verdict = match (r.passed, export) {
            (true, None) => "PASS: headroom can train this model".to_string(),
            (true, Some(export)) => format!("PASS: the executor runs it as ONNX Runtime does; {export}"),
            (false, _) => "FAIL: the executor differs".to_string(),
        };
        let _ = writeln!(
            s,
            "result      {verdict} (largest relative difference {:.3e}, tolerance {:.0e})",
            r.max_rel, r.tolerance
        );
        s
    }
}

fn input_tensor(report: &Inspection, options: &CheckOptions) -> Result<(Vec<usize>, Vec<f32>)> {
    let [h, w] = match (report.dynamic, options.imgsz) {
        (true, Some(s)) => [i64::from(s), i64::from(s)],
        (false, Some(s)) if [i64::from(s), i64::from(s)] != report.inspected_size => {
            let [h, w] = report.inspected_size;
            return Err(Error::Request(format!(
                "the model's input is static ({w}x{h}); --imgsz {s} cannot change it: drop --imgsz"
            )));
        }
        _ => report.inspected_size,
    };
    let image = match &options.image {
        Some(path) => headroom_core::imageio::read_rgb(path)?,
        None => {
            let config = SynthConfig { width: w as u32, height: h as u32, ..SynthConfig::default() };
            synth::generate_image(&config, synth::Split::Val, 0).0
        }
    };
    let (boxed, _) = letterbox(
        &image,
        &LetterboxOptions { width: w as u32, height: h as u32, ..LetterboxOptions::square(w as u32) },
    );
    Ok((vec![1, 3, h as usize, w as usize], headroom_core::preprocess::to_chw(&boxed)))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// A libtorch error as the run's.
fn torch<T>(result: std::result::Result<T, headroom_train::tch::TchError>) -> Result<T> {
    result.map_err(|e| Error::Train(e.into()))
}

/// Runs the check.
pub fn check(model: &Model, report: &Inspection, options: &CheckOptions) -> Result<CheckReport> {
    use headroom_train::Executor;
    use headroom_train::tch::{Device, Kind, Tensor};

    let (shape, values) = input_tensor(report, options)?;
    let has_nms = model.graph.nodes.iter().any(|n| matches!(n.op, Op::NonMaxSuppression(_)));
    let mut compared: Vec<(String, &'static str)> = Vec::new();
    if !has_nms {
        compared.extend(model.graph.outputs.iter().map(|o| (o.name.clone(), "output")));
    }
    for level in &report.head.levels {
        compared.push((level.box_output.clone(), "head"));
        compared.push((level.class_output.clone(), "head"));
    }
    let names: Vec<String> = compared.iter().map(|(n, _)| n.clone()).collect();

    let session_options = headroom_infer::provider::SessionOptions {
        intra_threads: options.threads,
        ..headroom_infer::provider::SessionOptions::default()
    };
    let reference = headroom_infer::probe::run_tensors(model, &shape, &values, &names, &session_options)
        .map_err(|e| Error::Input {
            path: model.path.clone(),
            reason: format!("running the model in ONNX Runtime: {e}"),
        })?;

    if options.threads > 0 {
        headroom_train::tch::set_num_threads(options.threads as i32);
    }
    let executor = Executor::new(&model.graph, Device::Cpu)?;
    let input_name = executor
        .input_names()
        .first()
        .cloned()
        .ok_or_else(|| Error::Input { path: model.path.clone(), reason: "the model has no input".into() })?;
    let dims: Vec<i64> = shape.iter().map(|d| *d as i64).collect();
    let image = torch(Tensor::f_from_slice(&values).and_then(|t| t.f_reshape(dims.as_slice())))?;
    let targets: Vec<&str> = names.iter().map(String::as_str).collect();
    let forward = || -> Result<Vec<Tensor>> {
        let _guard = headroom_train::tch::no_grad_guard();
        Ok(executor.run(vec![(input_name.clone(), image.shallow_clone())], &targets)?)
    };
    let ours = forward()?;

    let mut tensors = Vec::new();
    for ((name, role), (expected, actual)) in compared.iter().zip(reference.iter().zip(&ours)) {
        let actual_shape: Vec<usize> = actual.size().iter().map(|d| *d as usize).collect();
        if actual_shape != expected.shape {
            return Err(Error::Input {
                path: model.path.clone(),
                reason: format!(
                    "tensor `{name}`: the executor made shape {actual_shape:?}, ONNX Runtime {:?}",
                    expected.shape
                ),
            });
        }
        let flat = torch(actual.f_reshape([-1]).and_then(|t| t.f_to_kind(Kind::Float)))?;
        let actual_values = torch(Vec::<f32>::try_from(&flat))?;
        let (max_abs, max_rel) = headroom_infer::probe::max_difference(&actual_values, &expected.values);
        tensors.push(TensorDiff {
            name: name.clone(),
            role,
            shape: expected.shape.clone(),
            max_abs,
            max_rel,
        });
    }
    let max_rel = tensors.iter().fold(0f64, |m, t| m.max(t.max_rel));

    let (mut onnxruntime_ms, mut executor_ms) = (None, None);
    if options.repeat > 0 {
        let outputs: Vec<String> = model.graph.outputs.iter().map(|o| o.name.clone()).collect();
        let timed_names = if has_nms { names.clone() } else { outputs };
        let mut ort_times = Vec::new();
        let mut ours_times = Vec::new();
        let targets: Vec<&str> = timed_names.iter().map(String::as_str).collect();
        let (mut session, _) = headroom_infer::runtime::open_session(&model.path, &session_options)?;
        for _ in 0..options.repeat {
            let start = Instant::now();
            headroom_infer::probe::run_session(&mut session, &model.graph.inputs[0].name, &shape, &values)?;
            ort_times.push(start.elapsed().as_secs_f64() * 1e3);
            let start = Instant::now();
            let _guard = headroom_train::tch::no_grad_guard();
            executor.run(vec![(input_name.clone(), image.shallow_clone())], &targets)?;
            ours_times.push(start.elapsed().as_secs_f64() * 1e3);
        }
        onnxruntime_ms = median(ort_times);
        executor_ms = median(ours_times);
    }
    Ok(CheckReport {
        input_shape: shape,
        tensors,
        max_rel,
        tolerance: tolerance_for(model),
        passed: max_rel <= tolerance_for(model),
        onnxruntime_ms,
        executor_ms,
        threads: options.threads,
    })
}
