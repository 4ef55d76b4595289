//! Shape inference over the graph IR, static and symbolic: every tensor gets its dims where they
//! follow from the input dims, with dynamic dims kept as expressions (`height/8`). Small integer
//! tensors (the `Shape → Gather → Concat → Reshape` chains of dynamic exports) are evaluated along.

use std::collections::HashMap;

use crate::dim::{Dim, product};
use crate::error::{Error, Result};
use crate::graph::{Graph, Node};
use crate::ops::{Op, Padding, normalize_axis};
use crate::tensor::TensorData;

/// What inference knows about one tensor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Value {
    /// Its dims.
    pub shape: Option<Vec<Dim>>,
    /// Its contents when it is a small integer tensor (shape arithmetic), flattened.
    pub ints: Option<Vec<Dim>>,
    /// Its contents when it is a small float constant (Resize scales), flattened.
    pub floats: Option<Vec<f32>>,
}

const MAX_TRACKED: usize = 64;

fn constant_value(dims: &[usize], data: &TensorData) -> Value {
    let shape = Some(dims.iter().map(|d| Dim::Known(*d as i64)).collect());
    let small = data.len() <= MAX_TRACKED;
    let ints = data.as_i64().filter(|_| small).map(|v| v.into_iter().map(Dim::Known).collect());
    let floats = match data {
        TensorData::F32(v) if small => Some(v.clone()),
        _ => None,
    };
    Value { shape, ints, floats }
}

/// Infers the shape of every tensor. `overrides` replaces symbolic input dims by numbers
/// (e.g. `height` → 640) to get concrete shapes from a dynamic export.
pub fn infer_shapes(graph: &mut Graph, overrides: &HashMap<String, i64>) -> Result<()> {
    let mut values: HashMap<String, Value> = HashMap::new();
    for input in &graph.inputs {
        let shape = input.shape.as_ref().map(|dims| {
            dims.iter()
                .map(|d| match d {
                    Dim::Symbol(s) => overrides.get(s).map_or_else(|| d.clone(), |v| Dim::Known(*v)),
                    known => known.clone(),
                })
                .collect()
        });
        values.insert(input.name.clone(), Value { shape, ..Value::default() });
    }
    for (name, dims) in &graph.initializer_dims {
        let value = match graph.initializers.get(name) {
            Some(t) => constant_value(&t.dims, &t.data),
            None => constant_value(dims, &TensorData::F32(vec![])),
        };
        values.insert(name.clone(), Value { shape: value.shape, ..value });
    }
    for node in &mut graph.nodes {
        let inputs: Vec<Value> =
            node.inputs.iter().map(|i| values.get(i).cloned().unwrap_or_default()).collect();
        if let Some(rank) = inputs.first().and_then(|v| v.shape.as_ref()).map(Vec::len) {
            node.op.normalize_axes(rank).map_err(|reason| shape_error(node, reason))?;
        }
        let outputs = infer_node(node, &inputs).map_err(|reason| shape_error(node, reason))?;
        for (name, value) in node.outputs.iter().zip(outputs) {
            values.insert(name.clone(), value);
        }
    }
    graph.shapes = values.into_iter().filter_map(|(k, v)| v.shape.map(|s| (k, s))).collect();
    Ok(())
}

fn shape_error(node: &Node, reason: String) -> Error {
    Error::Shape { node: node.name.clone(), op_type: node.op.op_type().to_string(), reason }
}

fn shaped(shape: Vec<Dim>) -> Value {
    Value { shape: Some(shape), ..Value::default() }
}

fn same(input: &Value) -> Vec<Value> {
    vec![Value { floats: None, ..input.clone() }]
}

/// Infers one node's outputs from its inputs' values. Unknown stays unknown; contradictions are errors.
pub fn infer_node(node: &Node, inputs: &[Value]) -> Result<Vec<Value>, String> {
    let first = inputs.first().cloned().unwrap_or_default();
    let shape0 = first.shape.clone();
    let n_out = node.outputs.len();
    let unknown = || vec![Value::default(); n_out];
    Ok(match &node.op {
        Op::Add => binary(inputs, Dim::add)?,
        Op::Sub => binary(inputs, Dim::sub)?,
        Op::Mul => binary(inputs, Dim::mul)?,
        // Values here are the integers of shape computations: ONNX integer semantics, as executed.
        Op::Div => binary(inputs, Dim::onnx_div)?,
        Op::Mod(cfg) => binary(inputs, |a, b| a.onnx_mod(b, cfg.fmod))?,
        Op::Pow | Op::Equal | Op::Less | Op::Greater => binary(inputs, |_, _| Dim::Symbol("?".into()))?
            .into_iter()
            .map(|v| Value { ints: None, ..v })
            .collect(),
        Op::Where => vec![shaped(broadcast_all(inputs)?.unwrap_or_default())],
        Op::Sigmoid | Op::Sqrt | Op::Not | Op::Softmax(_) => {
            vec![Value { ints: None, ..same(&first)[0].clone() }]
        }
        Op::Neg => {
            vec![Value {
                ints: first.ints.map(|v| v.iter().map(|d| Dim::Known(0).sub(d)).collect()),
                ..first
            }]
        }
        Op::Identity | Op::Cast(_) => same(&first),
        Op::Constant(c) => vec![constant_value(&c.value.dims, &c.value.data)],
        Op::Conv(c) => vec![conv_like(
            &first,
            inputs.get(1),
            &c.kernel_shape,
            &c.strides,
            &c.dilations,
            &c.padding,
            false,
        )?],
        Op::MaxPool(c) => {
            let out =
                conv_like(&first, None, &c.kernel_shape, &c.strides, &c.dilations, &c.padding, c.ceil_mode)?;
            vec![out; n_out]
        }
        Op::MatMul => vec![matmul(inputs)?],
        Op::Concat(c) => vec![concat(inputs, c.axis)?],
        Op::Split(c) => split(&first, inputs.get(1).filter(|_| present(node, 1)), c)?,
        Op::Slice => vec![slice(inputs)?],
        Op::Reshape(c) => vec![reshape(&first, inputs.get(1), c.allowzero)?],
        Op::Transpose(c) => vec![transpose(&first, c.perm.as_deref())?],
        Op::Resize(_) => vec![resize(inputs)?],
        Op::Shape(c) => vec![shape_of(&first, c)],
        Op::Gather(c) => vec![gather(&first, inputs.get(1), c.axis)?],
        Op::GatherElements(_) => {
            vec![shaped(inputs.get(1).and_then(|v| v.shape.clone()).ok_or("unknown indices")?)]
        }
        Op::Unsqueeze(c) => match axes_of(node, &c.axes, inputs) {
            Axes::Given(axes) => vec![unsqueeze(&first, Some(axes))?],
            Axes::Unknown | Axes::Absent => unknown(),
        },
        Op::Squeeze(c) => match axes_of(node, &c.axes, inputs) {
            Axes::Given(axes) => vec![squeeze(&first, Some(axes))?],
            Axes::Absent => vec![squeeze(&first, None)?],
            Axes::Unknown => unknown(),
        },
        Op::Flatten(c) => vec![flatten(&first, c.axis)],
        Op::ConstantOfShape(_) => match first.ints {
            Some(dims) => vec![shaped(dims)],
            None => unknown(),
        },
        Op::Range => vec![range(inputs)],
        Op::Expand => match (shape0, inputs.get(1).and_then(|v| v.ints.clone())) {
            (Some(shape), Some(target)) => vec![shaped(broadcast(&shape, &target)?)],
            _ => unknown(),
        },
        Op::TopK(c) => top_k(&first, inputs.get(1), c.axis)?,
        Op::ReduceMax(c) => match axes_of(node, &c.axes, inputs) {
            Axes::Given(axes) => vec![reduce(&first, Some(axes), c.keepdims, c.noop_with_empty_axes)?],
            Axes::Absent => vec![reduce(&first, None, c.keepdims, c.noop_with_empty_axes)?],
            Axes::Unknown => unknown(),
        },
        Op::NonMaxSuppression(_) => vec![shaped(vec![Dim::Symbol("selected".into()), Dim::Known(3)])],
        Op::Unsupported { .. } => unknown(),
    })
}

fn transpose(x: &Value, perm: Option<&[i64]>) -> Result<Value, String> {
    let Some(s) = &x.shape else { return Ok(Value::default()) };
    let reversed: Vec<i64> = (0..s.len() as i64).rev().collect();
    let perm = perm.unwrap_or(&reversed);
    let dims =
        perm.iter().map(|p| s.get(*p as usize).cloned().ok_or("bad perm")).collect::<Result<_, _>>()?;
    Ok(shaped(dims))
}

fn shape_of(x: &Value, cfg: &crate::ops::ShapeConfig) -> Value {
    let Some(s) = &x.shape else { return Value::default() };
    let rank = s.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
    let (start, end) = (clamp(cfg.start), clamp(cfg.end.unwrap_or(rank)));
    let dims = s.get(start..end.max(start)).unwrap_or_default().to_vec();
    Value { shape: Some(vec![Dim::Known(dims.len() as i64)]), ints: Some(dims), floats: None }
}

fn flatten(x: &Value, axis: i64) -> Value {
    let Some(s) = &x.shape else { return Value::default() };
    let axis = (axis.max(0) as usize).min(s.len());
    shaped(vec![product(&s[..axis]), product(&s[axis..])])
}

fn top_k(x: &Value, k: Option<&Value>, axis: i64) -> Result<Vec<Value>, String> {
    let mut s = x.shape.clone().ok_or("unknown input")?;
    let k = k.and_then(|v| v.ints.as_ref()).and_then(|v| v.first().cloned());
    *s.get_mut(axis as usize).ok_or("axis out of range")? = k.unwrap_or_else(|| Dim::Symbol("k".into()));
    Ok(vec![shaped(s.clone()), shaped(s)])
}

fn broadcast_dim(a: &Dim, b: &Dim) -> Result<Dim, String> {
    Ok(match (a, b) {
        (Dim::Known(1), other) | (other, Dim::Known(1)) => other.clone(),
        (Dim::Known(x), Dim::Known(y)) if x != y => return Err(format!("cannot broadcast {x} with {y}")),
        (Dim::Known(_), _) => a.clone(),
        (_, Dim::Known(_)) => b.clone(),
        _ => a.clone(),
    })
}

/// Numpy-style broadcast of two shapes.
pub fn broadcast(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let rank = a.len().max(b.len());
    let pad = |s: &[Dim]| {
        std::iter::repeat_n(Dim::Known(1), rank - s.len()).chain(s.iter().cloned()).collect::<Vec<_>>()
    };
    pad(a).iter().zip(pad(b).iter()).map(|(x, y)| broadcast_dim(x, y)).collect()
}

fn broadcast_all(inputs: &[Value]) -> Result<Option<Vec<Dim>>, String> {
    let mut out: Option<Vec<Dim>> = None;
    for v in inputs {
        let Some(s) = &v.shape else { return Ok(None) };
        out = Some(match out {
            Some(o) => broadcast(&o, s)?,
            None => s.clone(),
        });
    }
    Ok(out)
}

fn binary(inputs: &[Value], f: impl Fn(&Dim, &Dim) -> Dim) -> Result<Vec<Value>, String> {
    let shape = broadcast_all(inputs)?;
    let ints =
        match (inputs.first().and_then(|v| v.ints.as_ref()), inputs.get(1).and_then(|v| v.ints.as_ref())) {
            (Some(a), Some(b)) if a.len() == b.len() => Some(a.iter().zip(b).map(|(x, y)| f(x, y)).collect()),
            (Some(a), Some(b)) if b.len() == 1 => Some(a.iter().map(|x| f(x, &b[0])).collect()),
            (Some(a), Some(b)) if a.len() == 1 => Some(b.iter().map(|y| f(&a[0], y)).collect()),
            _ => None,
        };
    Ok(vec![Value { shape, ints, floats: None }])
}

fn conv_like(
    x: &Value,
    weight: Option<&Value>,
    kernel: &[i64],
    strides: &[i64],
    dilations: &[i64],
    padding: &Padding,
    ceil_mode: bool,
) -> Result<Value, String> {
    let Some(s) = &x.shape else { return Ok(Value::default()) };
    let w = weight.and_then(|w| w.shape.clone());
    let kernel: Vec<Dim> = match (&w, kernel.is_empty()) {
        (Some(w), true) => w.get(2..).ok_or("weight rank < 3")?.to_vec(),
        _ => kernel.iter().map(|k| Dim::Known(*k)).collect(),
    };
    let spatial = kernel.len();
    if s.len() != spatial + 2 {
        return Err(format!("input rank {} with a {spatial}-D kernel", s.len()));
    }
    let channels = match &w {
        Some(w) => w.first().cloned().ok_or("empty weight shape")?,
        None => s[1].clone(),
    };
    let mut out = vec![s[0].clone(), channels];
    for i in 0..spatial {
        let stride = Dim::Known(*strides.get(i).unwrap_or(&1));
        let dilation = *dilations.get(i).unwrap_or(&1);
        let size = &s[i + 2];
        let dim = match padding {
            Padding::SameUpper | Padding::SameLower => size.add(&stride).sub(&Dim::Known(1)).div(&stride),
            Padding::Explicit(_) | Padding::Valid => {
                let pads = match padding {
                    Padding::Explicit(p) => Dim::Known(*p.get(i).unwrap_or(&0))
                        .add(&Dim::Known(*p.get(i + spatial).unwrap_or(&0))),
                    _ => Dim::Known(0),
                };
                let reach = Dim::Known(dilation).mul(&kernel[i].sub(&Dim::Known(1))).add(&Dim::Known(1));
                let span = size.add(&pads).sub(&reach);
                let span = if ceil_mode { span.add(&stride).sub(&Dim::Known(1)) } else { span };
                let out = span.div(&stride).add(&Dim::Known(1));
                let begin = match padding {
                    Padding::Explicit(p) => *p.get(i).unwrap_or(&0),
                    _ => 0,
                };
                match (ceil_mode, out.known(), size.known(), stride.known()) {
                    // Rounding up never adds a window that starts in the end padding (ONNX and
                    // PyTorch drop it).
                    (true, Some(n), Some(size), Some(stride))
                        if n > 1 && (n - 1).saturating_mul(stride) >= size.saturating_add(begin) =>
                    {
                        Dim::Known(n - 1)
                    }
                    _ => out,
                }
            }
        };
        out.push(dim);
    }
    Ok(shaped(out))
}

fn matmul(inputs: &[Value]) -> Result<Value, String> {
    let (Some(a), Some(b)) =
        (inputs.first().and_then(|v| v.shape.clone()), inputs.get(1).and_then(|v| v.shape.clone()))
    else {
        return Ok(Value::default());
    };
    if a.is_empty() || b.is_empty() {
        return Err("MatMul of a scalar".into());
    }
    // numpy.matmul: a vector operand is a matrix with a 1 prepended (a) or appended (b), which the
    // result drops again.
    let (a_vector, b_vector) = (a.len() == 1, b.len() == 1);
    let a = if a_vector { vec![Dim::Known(1), a[0].clone()] } else { a };
    let b = if b_vector { vec![b[0].clone(), Dim::Known(1)] } else { b };
    let mut out = broadcast(&a[..a.len() - 2], &b[..b.len() - 2])?;
    if !a_vector {
        out.push(a[a.len() - 2].clone());
    }
    if !b_vector {
        out.push(b[b.len() - 1].clone());
    }
    Ok(shaped(out))
}

fn concat(inputs: &[Value], axis: i64) -> Result<Value, String> {
    let axis = axis as usize;
    let mut shape: Option<Vec<Dim>> = None;
    for v in inputs {
        let Some(s) = &v.shape else { return Ok(Value::default()) };
        shape = Some(match shape {
            None => s.clone(),
            Some(mut acc) => {
                if acc.len() != s.len() || axis >= s.len() {
                    return Err(format!("ranks {} and {} along axis {axis}", acc.len(), s.len()));
                }
                acc[axis] = acc[axis].add(&s[axis]);
                acc
            }
        });
    }
    // Bounded: `Concat(x, x)` chains would double the tracked values at every node.
    let ints = inputs
        .iter()
        .map(|v| v.ints.clone())
        .collect::<Option<Vec<_>>>()
        .map(|v| v.concat())
        .filter(|v| v.len() <= MAX_TRACKED);
    Ok(Value { shape, ints, floats: None })
}

fn split(x: &Value, sizes: Option<&Value>, cfg: &crate::ops::SplitConfig) -> Result<Vec<Value>, String> {
    let Some(s) = &x.shape else { return Ok(vec![Value::default(); cfg.parts]) };
    let axis = cfg.axis as usize;
    let total = s.get(axis).ok_or("axis out of range")?;
    let parts = Dim::Known(cfg.parts as i64);
    let sizes: Vec<Dim> = match (sizes.map(|v| v.ints.clone()), &cfg.split) {
        (Some(Some(ints)), _) => ints,
        // The sizes are an input whose values are not known here.
        (Some(None), _) => return Ok(vec![Value::default(); cfg.parts]),
        (None, Some(attr)) => attr.iter().map(|v| Dim::Known(*v)).collect(),
        // Equal parts of ceil(total / parts), the last one smaller (opset 18 `num_outputs`).
        (None, None) => match total.known() {
            Some(n) => {
                let chunk = total.add(&parts).sub(&Dim::Known(1)).div(&parts);
                let chunk = chunk.known().unwrap_or(0);
                (0..cfg.parts as i64).map(|i| Dim::Known(chunk.min(n - i * chunk).max(0))).collect()
            }
            None => vec![total.div(&parts); cfg.parts],
        },
    };
    Ok(sizes
        .into_iter()
        .map(|size| {
            let mut out = s.clone();
            out[axis] = size;
            shaped(out)
        })
        .collect())
}

fn known_ints(v: Option<&Value>) -> Option<Vec<i64>> {
    v?.ints.as_ref()?.iter().map(Dim::known).collect()
}

fn slice(inputs: &[Value]) -> Result<Value, String> {
    let data = inputs.first().cloned().unwrap_or_default();
    let Some(s) = data.shape.clone() else { return Ok(Value::default()) };
    let (Some(starts), Some(ends)) = (known_ints(inputs.get(1)), known_ints(inputs.get(2))) else {
        return Ok(Value::default());
    };
    let axes = known_ints(inputs.get(3)).unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = known_ints(inputs.get(4)).unwrap_or_else(|| vec![1; starts.len()]);
    let mut out = s.clone();
    let mut ints = data.ints.clone();
    for (i, axis) in axes.iter().enumerate() {
        let axis = normalize_axis(*axis, s.len(), false)? as usize;
        let (start, end, step) = (
            *starts.get(i).ok_or("starts too short")?,
            *ends.get(i).ok_or("ends too short")?,
            *steps.get(i).unwrap_or(&1),
        );
        if step == 0 {
            return Err("slice step 0".into());
        }
        match &s[axis] {
            Dim::Known(n) if *n < 0 => return Err(format!("slice of a dim of size {n}")),
            Dim::Known(n) => {
                let clamp = |v: i64, lo: i64, hi: i64| (if v < 0 { v + n } else { v }).clamp(lo, hi);
                let (lo, hi) = if step > 0 { (0, *n) } else { (-1, n - 1) };
                let (b, e) = (clamp(start, lo, hi), clamp(end, lo, hi));
                // In i128: `step` may be anywhere in i64, the length is at most `n`.
                let (b128, e128, step128) = (i128::from(b), i128::from(e), i128::from(step));
                let len = if step > 0 {
                    (e128 - b128 + step128 - 1).div_euclid(step128)
                } else {
                    (b128 - e128 - step128 - 1).div_euclid(-step128)
                };
                out[axis] = Dim::Known(len.clamp(0, i128::from(*n)) as i64);
                if let Some(v) = ints.as_mut().filter(|_| s.len() == 1 && step == 1) {
                    *v = v.get(b as usize..e.max(b) as usize).unwrap_or_default().to_vec();
                } else {
                    ints = None;
                }
            }
            sym => {
                ints = None;
                out[axis] = if start >= 0 && (0..i64::MAX / 2).contains(&end) && step == 1 {
                    Dim::Known(end - start)
                } else if step == 1 && end >= i64::MAX / 2 {
                    sym.sub(&Dim::Known(start))
                } else {
                    Dim::Symbol(format!("slice({sym})"))
                };
            }
        }
    }
    Ok(Value { shape: Some(out), ints, floats: None })
}

fn reshape(x: &Value, target: Option<&Value>, allowzero: bool) -> Result<Value, String> {
    let Some(target) = target.and_then(|v| v.ints.clone()) else { return Ok(Value::default()) };
    let input = x.shape.clone();
    let mut out: Vec<Dim> = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, d) in target.iter().enumerate() {
        match d {
            Dim::Known(0) if !allowzero => {
                out.push(input.as_ref().and_then(|s| s.get(i).cloned()).ok_or("0 copies an unknown dim")?)
            }
            Dim::Known(-1) => {
                if infer_at.replace(i).is_some() {
                    return Err("two -1 in the target shape".into());
                }
                out.push(Dim::Known(-1));
            }
            other => out.push(other.clone()),
        }
    }
    if let Some(i) = infer_at {
        let Some(input) = input else { return Ok(Value::default()) };
        let rest: Vec<Dim> =
            out.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, d)| d.clone()).collect();
        out[i] = product(&input).div(&product(&rest));
    }
    Ok(Value { shape: Some(out), ints: x.ints.clone(), floats: None })
}

fn resize(inputs: &[Value]) -> Result<Value, String> {
    let Some(s) = inputs.first().and_then(|v| v.shape.clone()) else { return Ok(Value::default()) };
    if let Some(sizes) = inputs.get(3).and_then(|v| v.ints.clone()).filter(|v| !v.is_empty()) {
        return Ok(shaped(sizes));
    }
    let scales = inputs.get(2).and_then(|v| v.floats.clone()).filter(|v| v.len() == s.len());
    let Some(scales) = scales else { return Ok(Value::default()) };
    let out = s
        .iter()
        .zip(&scales)
        .map(|(d, f)| match d {
            Dim::Known(n) => Dim::Known((*n as f64 * f64::from(*f)).floor() as i64),
            sym if f.fract() == 0.0 => sym.mul(&Dim::Known(*f as i64)),
            sym => Dim::Symbol(format!("{sym}*{f}")),
        })
        .collect();
    Ok(shaped(out))
}

fn gather(data: &Value, indices: Option<&Value>, axis: i64) -> Result<Value, String> {
    let (Some(s), Some(idx)) = (data.shape.clone(), indices.and_then(|v| v.shape.clone())) else {
        return Ok(Value::default());
    };
    let axis = axis as usize;
    let mut out = s.get(..axis).ok_or("axis out of range")?.to_vec();
    out.extend(idx.iter().cloned());
    out.extend(s.get(axis + 1..).unwrap_or_default().iter().cloned());
    let ints = match (&data.ints, known_ints(indices)) {
        (Some(values), Some(picks)) if s.len() == 1 => picks
            .iter()
            .map(|p| values.get(normalize_axis(*p, values.len(), false).ok()? as usize).cloned())
            .collect(),
        _ => None,
    };
    Ok(Value { shape: Some(out), ints, floats: None })
}

/// Whether the node has input `i` (an omitted optional input is an empty name).
fn present(node: &Node, i: usize) -> bool {
    node.inputs.get(i).is_some_and(|name| !name.is_empty())
}

/// The axes of Squeeze, Unsqueeze, ReduceMax: from the attribute (old opsets) or input 1.
enum Axes {
    /// Known axes.
    Given(Vec<i64>),
    /// No attribute and no input: the op's default (all axes, or all size-1 axes).
    Absent,
    /// Input 1 is given but its values are not known here: the output shape is unknown.
    Unknown,
}

fn axes_of(node: &Node, attr: &Option<Vec<i64>>, inputs: &[Value]) -> Axes {
    match (attr, present(node, 1)) {
        (Some(axes), _) => Axes::Given(axes.clone()),
        (None, false) => Axes::Absent,
        (None, true) => known_ints(inputs.get(1)).map_or(Axes::Unknown, Axes::Given),
    }
}

fn unsqueeze(x: &Value, axes: Option<Vec<i64>>) -> Result<Value, String> {
    let (Some(s), Some(axes)) = (x.shape.clone(), axes) else { return Ok(Value::default()) };
    let rank = s.len() + axes.len();
    let mut axes = axes.iter().map(|a| normalize_axis(*a, rank, false)).collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    if axes.windows(2).any(|w| w[0] == w[1]) {
        return Err(format!("repeated axis in {axes:?}"));
    }
    let mut out = s;
    for a in axes {
        out.insert(a as usize, Dim::Known(1));
    }
    Ok(Value { shape: Some(out), ints: x.ints.clone(), floats: None })
}

fn squeeze(x: &Value, axes: Option<Vec<i64>>) -> Result<Value, String> {
    let Some(s) = x.shape.clone() else { return Ok(Value::default()) };
    let axes = match axes {
        Some(a) => a
            .iter()
            .map(|a| normalize_axis(*a, s.len(), false).map(|a| a as usize))
            .collect::<Result<Vec<_>, _>>()?,
        None => (0..s.len()).filter(|i| s[*i] == Dim::Known(1)).collect(),
    };
    let out = s.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone()).collect();
    Ok(Value { shape: Some(out), ints: x.ints.clone(), floats: None })
}

fn range(inputs: &[Value]) -> Value {
    let scalar = |i: usize| inputs.get(i).and_then(|v| v.ints.as_ref()).and_then(|v| v.first().cloned());
    let len = match (scalar(0), scalar(1), scalar(2)) {
        (Some(Dim::Known(start)), Some(Dim::Known(limit)), Some(Dim::Known(delta))) if delta != 0 => {
            Dim::Known(((limit as f64 - start as f64) / delta as f64).ceil().max(0.0) as i64)
        }
        (Some(start), Some(limit), Some(Dim::Known(1))) => limit.sub(&start),
        _ => Dim::Symbol("range".into()),
    };
    shaped(vec![len])
}

fn reduce(x: &Value, axes: Option<Vec<i64>>, keepdims: bool, noop: bool) -> Result<Value, String> {
    let Some(s) = x.shape.clone() else { return Ok(Value::default()) };
    let axes = match axes {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|a| normalize_axis(*a, s.len(), false).map(|a| a as usize))
            .collect::<Result<Vec<_>, _>>()?,
        _ if noop => return Ok(shaped(s)),
        _ => (0..s.len()).collect(),
    };
    let out = s
        .iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(Dim::Known(1)),
            (true, false) => None,
        })
        .collect();
    Ok(shaped(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ConvConfig;

    fn known(dims: &[i64]) -> Value {
        shaped(dims.iter().map(|d| Dim::Known(*d)).collect())
    }

    fn node(op: Op) -> Node {
        Node { name: "n".into(), op, inputs: vec![], outputs: vec!["y".into()] }
    }

    #[test]
    fn conv_output_static_and_symbolic() {
        let conv = node(Op::Conv(ConvConfig {
            kernel_shape: vec![3, 3],
            strides: vec![2, 2],
            dilations: vec![1, 1],
            padding: Padding::Explicit(vec![1, 1, 1, 1]),
            group: 1,
        }));
        let out = infer_node(&conv, &[known(&[1, 3, 160, 160]), known(&[16, 3, 3, 3])]).expect("infers");
        assert_eq!(out[0], known(&[1, 16, 80, 80]));
        let symbolic =
            shaped(vec![Dim::Symbol("b".into()), Dim::Known(3), Dim::Symbol("h".into()), Dim::Known(64)]);
        let out = infer_node(&conv, &[symbolic, known(&[16, 3, 3, 3])]).expect("infers");
        let dims = out[0].shape.clone().expect("shape");
        assert_eq!(dims[3], Dim::Known(32));
        assert!(dims[2].to_string().contains('h'), "{}", dims[2]);
    }

    #[test]
    fn max_pool_ceil_mode_drops_a_window_that_would_start_in_the_end_padding() {
        // onnx test_maxpool_2d_ceil_output_size_reduce_by_one: 2x2 input, kernel 1, stride 2, ceil.
        let pool = node(Op::MaxPool(crate::ops::MaxPoolConfig {
            kernel_shape: vec![1, 1],
            strides: vec![2, 2],
            dilations: vec![1, 1],
            padding: Padding::Explicit(vec![0; 4]),
            ceil_mode: true,
        }));
        assert_eq!(infer_node(&pool, &[known(&[1, 1, 2, 2])]).expect("infers")[0], known(&[1, 1, 1, 1]));
        assert_eq!(infer_node(&pool, &[known(&[1, 1, 3, 3])]).expect("infers")[0], known(&[1, 1, 2, 2]));
    }

    #[test]
    fn reduce_and_squeeze_with_axes_from_an_unknown_input_are_unknown_not_all_axes() {
        // onnx test_reduce_max_keepdims_*: the axes are a graph input, not a constant.
        let mut reduce = node(Op::ReduceMax(crate::ops::ReduceMaxConfig {
            axes: None,
            keepdims: true,
            noop_with_empty_axes: false,
        }));
        reduce.inputs = vec!["data".into(), "axes".into()];
        let out = infer_node(&reduce, &[known(&[3, 2, 2]), known(&[1])]).expect("infers");
        assert_eq!(out[0].shape, None);
        let out = infer_node(&reduce, &[known(&[3, 2, 2]), ints(&[1])]).expect("infers");
        assert_eq!(out[0], known(&[3, 1, 2]));
        reduce.inputs.pop();
        let out = infer_node(&reduce, &[known(&[3, 2, 2])]).expect("infers");
        assert_eq!(out[0], known(&[1, 1, 1]));
        let mut squeeze = node(Op::Squeeze(crate::ops::SqueezeConfig { axes: None }));
        squeeze.inputs = vec!["x".into(), "axes".into()];
        assert_eq!(infer_node(&squeeze, &[known(&[1, 3, 1]), known(&[1])]).expect("infers")[0].shape, None);
    }

    #[test]
    fn split_sizes_from_an_unknown_input_are_unknown_and_uneven_parts_round_up() {
        // onnx test_split_variable_parts_* and test_split_1d_uneven_split_opset18.
        let split = |parts| {
            let mut n = node(Op::Split(crate::ops::SplitConfig { axis: 0, split: None, parts }));
            n.inputs = vec!["x".into()];
            n.outputs = (0..parts).map(|i| format!("y{i}")).collect();
            n
        };
        let mut variable = split(2);
        variable.inputs.push("split".into());
        let out = infer_node(&variable, &[known(&[6]), known(&[2])]).expect("infers");
        assert_eq!(out, vec![Value::default(); 2]);
        let out = infer_node(&variable, &[known(&[6]), ints(&[2, 4])]).expect("infers");
        assert_eq!(out, vec![known(&[2]), known(&[4])]);
        let out = infer_node(&split(4), &[known(&[7])]).expect("infers");
        assert_eq!(out, vec![known(&[2]), known(&[2]), known(&[2]), known(&[1])]);
    }

    #[test]
    fn matmul_with_vector_operands_follows_numpy() {
        // onnx test_matmul_1d_1d, test_matmul_1d_3d, test_matmul_4d_1d.
        let matmul = node(Op::MatMul);
        assert_eq!(infer_node(&matmul, &[known(&[3]), known(&[3])]).expect("1d·1d")[0], known(&[]));
        assert_eq!(infer_node(&matmul, &[known(&[3]), known(&[2, 3, 4])]).expect("1d·3d")[0], known(&[2, 4]));
        assert_eq!(
            infer_node(&matmul, &[known(&[2, 1, 3, 4]), known(&[4])]).expect("4d·1d")[0],
            known(&[2, 1, 3])
        );
    }

    #[test]
    fn expand_and_constant_of_shape_to_an_unknown_shape_are_unknown_not_an_error() {
        // onnx test_expand_dim_changed: the target shape is a graph input.
        let out = infer_node(&node(Op::Expand), &[known(&[3, 1]), known(&[3])]).expect("infers");
        assert_eq!(out[0].shape, None);
        let fill = node(Op::ConstantOfShape(crate::ops::ConstantOfShapeConfig {
            value: crate::tensor::Tensor {
                name: String::new(),
                dims: vec![1],
                data: TensorData::F32(vec![0.0]),
            },
        }));
        assert_eq!(infer_node(&fill, &[known(&[3])]).expect("infers")[0].shape, None);
    }

    #[test]
    fn reshape_infers_minus_one_from_shape_values() {
        let reshape = node(Op::Reshape(crate::ops::ReshapeConfig { allowzero: false }));
        let target = Value { ints: Some(vec![Dim::Known(0), Dim::Known(4), Dim::Known(-1)]), ..known(&[3]) };
        let out = infer_node(&reshape, &[known(&[2, 64, 5, 5]), target]).expect("infers");
        assert_eq!(out[0].shape, known(&[2, 4, 400]).shape);
    }

    fn ints(values: &[i64]) -> Value {
        Value { ints: Some(values.iter().map(|v| Dim::Known(*v)).collect()), ..known(&[values.len() as i64]) }
    }

    #[test]
    fn unsqueeze_with_a_repeated_axis_is_an_error_not_a_panic() {
        let unsqueeze = node(Op::Unsqueeze(crate::ops::UnsqueezeConfig { axes: Some(vec![2, 2]) }));
        assert!(infer_node(&unsqueeze, &[known(&[5])]).is_err_and(|e| e.contains("repeated axis")));
    }

    #[test]
    fn slice_with_more_axes_than_starts_is_an_error_not_a_panic() {
        let inputs = [known(&[5, 5]), ints(&[0]), ints(&[1, 1]), ints(&[0, 1])];
        assert!(infer_node(&node(Op::Slice), &inputs).is_err_and(|e| e.contains("starts")));
    }

    #[test]
    fn slice_of_a_negative_dim_is_an_error_not_a_panic() {
        assert!(infer_node(&node(Op::Slice), &[known(&[-5]), ints(&[0]), ints(&[1])]).is_err());
    }

    #[test]
    fn slice_with_extreme_steps_does_not_overflow() {
        let forward = infer_node(
            &node(Op::Slice),
            &[known(&[5]), ints(&[0]), ints(&[5]), ints(&[0]), ints(&[i64::MAX])],
        );
        assert_eq!(forward.expect("infers")[0].shape, known(&[1]).shape);
        let backward = infer_node(
            &node(Op::Slice),
            &[known(&[5]), ints(&[4]), ints(&[0]), ints(&[0]), ints(&[i64::MIN])],
        );
        assert_eq!(backward.expect("infers")[0].shape, known(&[1]).shape);
    }

    #[test]
    fn conv_with_huge_pads_does_not_overflow() {
        let conv = node(Op::Conv(ConvConfig {
            kernel_shape: vec![1, 1],
            strides: vec![1, 1],
            dilations: vec![1, 1],
            padding: Padding::Explicit(vec![i64::MAX, 0, 1, 0]),
            group: 1,
        }));
        let out = infer_node(&conv, &[known(&[1, 3, 4, 4]), known(&[2, 3, 1, 1])]).expect("infers");
        assert_eq!(out[0].shape.as_ref().map(|s| s[3].clone()), Some(Dim::Known(4)));
    }

    #[test]
    fn concat_of_a_shape_with_itself_stops_tracking_values_past_max_tracked() {
        let concat = node(Op::Concat(crate::ops::ConcatConfig { axis: 0 }));
        let mut value = ints(&[1, 2, 3, 4]);
        for _ in 0..40 {
            value = infer_node(&concat, &[value.clone(), value]).expect("infers").remove(0);
        }
        assert_eq!(value.ints, None);
    }
}
