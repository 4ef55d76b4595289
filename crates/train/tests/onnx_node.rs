//! ONNX's own backend node tests (tests/fixtures/onnx_node/, written by
//! scripts/fixtures/onnx_node_tests.py from the onnx wheel) through the importer, shape inference and
//! the executor. Every case must match its expected outputs within the case's tolerance or be refused
//! with an error; a wrong value, dtype or shape (executed or inferred) or a panic fails the test.
//! Prints the per-operator table quoted in docs/ONNX.md:
//!
//!     cargo test -p headroom-train --test onnx_node -- --nocapture
#![cfg(feature = "libtorch")]

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use headroom_onnx::tensor::{self, TensorData};
use headroom_onnx::{Dim, Model};
use headroom_train::Executor;
use headroom_train::tch::{Device, Kind, Tensor};

/// One line of `cases.tsv`.
struct Case {
    name: String,
    op: String,
    rtol: f64,
    atol: f64,
}

enum Outcome {
    Pass,
    Refused(String),
    Wrong(String),
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/onnx_node")
}

fn cases() -> Vec<Case> {
    let index = std::fs::read_to_string(fixtures().join("cases.tsv")).expect("cases.tsv");
    index
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 5, "cases.tsv line `{l}`");
            Case {
                name: f[0].into(),
                op: f[1].into(),
                rtol: f[3].parse().expect("rtol"),
                atol: f[4].parse().expect("atol"),
            }
        })
        .collect()
}

/// The `prefix_<i>.pb` tensors of a case's data set, in order.
fn tensors(dir: &Path, prefix: &str) -> Result<Vec<headroom_onnx::Tensor>, String> {
    let mut out = Vec::new();
    loop {
        let path = dir.join(format!("{prefix}_{}.pb", out.len()));
        let Ok(bytes) = std::fs::read(&path) else { return Ok(out) };
        out.push(tensor::from_bytes(&bytes).map_err(|e| format!("{}: {e}", path.display()))?);
    }
}

fn kind_of(data: &TensorData) -> Kind {
    match data {
        TensorData::F32(_) => Kind::Float,
        TensorData::F64(_) => Kind::Double,
        TensorData::F16(_) => Kind::Half,
        TensorData::I64(_) => Kind::Int64,
        TensorData::I32(_) => Kind::Int,
        TensorData::U8(_) => Kind::Uint8,
        TensorData::I8(_) => Kind::Int8,
        TensorData::Bool(_) => Kind::Bool,
    }
}

fn as_f64(data: &TensorData) -> Vec<f64> {
    match data {
        TensorData::F32(v) => v.iter().map(|x| f64::from(*x)).collect(),
        TensorData::F64(v) => v.clone(),
        TensorData::F16(v) => v.iter().map(|b| f64::from(half_to_f32(*b))).collect(),
        other => other.as_i64().unwrap_or_default().into_iter().map(|x| x as f64).collect(),
    }
}

fn half_to_f32(bits: u16) -> f32 {
    let t = Tensor::from_slice(&[bits as i16]).view_dtype(Kind::Half).to_kind(Kind::Float);
    f32::try_from(&t.reshape([])).unwrap_or(f32::NAN)
}

/// `None` when `actual` equals `expected` (dtype, shape, values within tolerance), else what differs.
fn compare(actual: &Tensor, expected: &headroom_onnx::Tensor, case: &Case) -> Option<String> {
    let kind = kind_of(&expected.data);
    if actual.kind() != kind {
        return Some(format!("dtype {:?}, expected {kind:?}", actual.kind()));
    }
    let dims: Vec<i64> = expected.dims.iter().map(|d| *d as i64).collect();
    if actual.size() != dims {
        return Some(format!("shape {:?}, expected {dims:?}", actual.size()));
    }
    let flat = actual.reshape([-1]).to_device(Device::Cpu);
    if let Some(ints) = expected.data.as_i64() {
        let got = Vec::<i64>::try_from(&flat.to_kind(Kind::Int64)).unwrap_or_default();
        let bad = got.iter().zip(&ints).position(|(a, b)| a != b);
        return bad.map(|i| format!("element {i}: {} != expected {}", got[i], ints[i]));
    }
    let want = as_f64(&expected.data);
    let got = Vec::<f64>::try_from(&flat.to_kind(Kind::Double)).unwrap_or_default();
    let within = |a: f64, b: f64| {
        a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= case.atol + case.rtol * b.abs()
    };
    // The largest error among the elements out of tolerance (a NaN on one side only counts as
    // infinite).
    let error = |a: f64, b: f64| if (a - b).is_nan() { f64::INFINITY } else { (a - b).abs() };
    let at = (0..got.len().min(want.len()))
        .filter(|i| !within(got[*i], want[*i]))
        .max_by(|i, j| error(got[*i], want[*i]).total_cmp(&error(got[*j], want[*j])));
    at.map(|i| {
        format!(
            "largest error at element {i}: {} vs expected {} (rtol {}, atol {})",
            got[i], want[i], case.rtol, case.atol
        )
    })
}

fn run_case(case: &Case) -> Outcome {
    let dir = fixtures().join(&case.name);
    let model = match Model::load(dir.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let data = dir.join("test_data_set_0");
    let (inputs, expected) = match (tensors(&data, "input"), tensors(&data, "output")) {
        (Ok(i), Ok(o)) => (i, o),
        (Err(e), _) | (_, Err(e)) => return Outcome::Refused(e),
    };
    let inferred = check_inferred_shapes(&model, &expected);
    match (execute(&model, &inputs, &expected, case), inferred) {
        (Outcome::Wrong(e), Some(s)) => Outcome::Wrong(format!("{e}; {s}")),
        (_, Some(s)) => Outcome::Wrong(s),
        (executed, None) => executed,
    }
}

/// Every output whose inferred dims are all known must have the expected dims.
fn check_inferred_shapes(model: &Model, expected: &[headroom_onnx::Tensor]) -> Option<String> {
    for (output, want) in model.graph.outputs.iter().zip(expected) {
        let Some(dims) = model.graph.shapes.get(&output.name) else { continue };
        let known: Option<Vec<i64>> = dims.iter().map(Dim::known).collect();
        let want: Vec<i64> = want.dims.iter().map(|d| *d as i64).collect();
        if known.as_ref().is_some_and(|k| *k != want) {
            return Some(format!("shape inference: `{}` is {dims:?}, expected {want:?}", output.name));
        }
    }
    None
}

fn execute(
    model: &Model,
    inputs: &[headroom_onnx::Tensor],
    expected: &[headroom_onnx::Tensor],
    case: &Case,
) -> Outcome {
    let executor = match Executor::new(&model.graph, Device::Cpu) {
        Ok(e) => e,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    let mut named = Vec::new();
    for (info, t) in model.graph.inputs.iter().zip(inputs) {
        match headroom_train::executor::to_torch(t, Device::Cpu) {
            Ok(v) => named.push((info.name.clone(), v)),
            Err(e) => return Outcome::Refused(e.to_string()),
        }
    }
    let outputs = match executor.run(named, &[]) {
        Ok(o) => o,
        Err(e) => return Outcome::Refused(e.to_string()),
    };
    for ((actual, want), info) in outputs.iter().zip(expected).zip(&model.graph.outputs) {
        if let Some(diff) = compare(actual, want, case) {
            return Outcome::Wrong(format!("`{}`: {diff}", info.name));
        }
    }
    Outcome::Pass
}

#[derive(Default)]
struct Row {
    cases: usize,
    pass: usize,
    refused: Vec<(String, String)>,
    wrong: Vec<(String, String)>,
}

#[test]
fn onnx_backend_node_tests_pass_or_are_refused_never_wrong() {
    let cases = cases();
    assert!(cases.len() >= 600, "only {} cases in cases.tsv", cases.len());
    let mut table: BTreeMap<String, Row> = BTreeMap::new();
    for case in &cases {
        let outcome = catch_unwind(AssertUnwindSafe(|| run_case(case)))
            .unwrap_or_else(|_| Outcome::Wrong("panicked".into()));
        let row = table.entry(case.op.clone()).or_default();
        row.cases += 1;
        match outcome {
            Outcome::Pass => row.pass += 1,
            Outcome::Refused(why) => row.refused.push((case.name.clone(), why)),
            Outcome::Wrong(why) => row.wrong.push((case.name.clone(), why)),
        }
    }
    println!("| op | cases | pass | refused | wrong |\n|---|---:|---:|---:|---:|");
    let (mut pass, mut refused, mut wrong) = (0, 0, 0);
    for (op, row) in &table {
        println!("| {op} | {} | {} | {} | {} |", row.cases, row.pass, row.refused.len(), row.wrong.len());
        (pass, refused, wrong) = (pass + row.pass, refused + row.refused.len(), wrong + row.wrong.len());
    }
    println!("| all | {} | {pass} | {refused} | {wrong} |\n", cases.len());
    for (op, row) in &table {
        for (name, why) in &row.refused {
            println!("refused {op} {name}: {}", why.lines().next().unwrap_or_default());
        }
    }
    for (op, row) in &table {
        for (name, why) in &row.wrong {
            println!("WRONG {op} {name}: {why}");
        }
    }
    assert!(pass >= 250, "only {pass} cases passed");
    assert_eq!(wrong, 0, "{wrong} cases gave a wrong answer or panicked (WRONG lines above)");
}
