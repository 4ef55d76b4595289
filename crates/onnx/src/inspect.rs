//! What a detector export is: family, input, classes, strides, outputs, the Detect head (found by
//! shape and role, never by node name), modules `model.N` with parameter counts, freeze points.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::Serialize;

use crate::dim::Dim;
use crate::error::{Error, Result};
use crate::graph::{Graph, Node};
use crate::model::Model;
use crate::ops::Op;

/// One level of the Detect head: the two final convolutions at one stride.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadLevel {
    /// Downsampling factor of this level (8, 16, 32).
    pub stride: i64,
    /// Grid `[h, w]` at the inspected input size.
    pub grid: [i64; 2],
    /// The box-distribution conv (`4·reg_max` output channels).
    pub box_conv: String,
    /// Its output tensor (the raw box distribution).
    pub box_output: String,
    /// The class conv (`nc` output channels).
    pub class_conv: String,
    /// Its output tensor (raw class logits).
    pub class_output: String,
}

/// The Detect head.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Head {
    /// The module index `N` of `model.N` holding the head, when node names carry it.
    pub module: Option<usize>,
    /// DFL bins per box side (16; 1 for yolo26, which has no DFL).
    pub reg_max: usize,
    /// Box conv output channels (`4·reg_max`).
    pub box_channels: usize,
    /// Class conv output channels (`nc`).
    pub class_channels: usize,
    /// Levels by increasing stride.
    pub levels: Vec<HeadLevel>,
}

/// A module `model.N` and its parameters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Module {
    /// `N`.
    pub index: usize,
    /// Number of nodes.
    pub nodes: usize,
    /// Parameters: elements of the Conv/MatMul weights and biases of its nodes ([`parameter_uses`]).
    pub parameters: usize,
}

/// Where training may split the graph: `--freeze N` freezes modules `0..N`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FreezePoint {
    /// `N` (Ultralytics' `freeze=N`).
    pub freeze: usize,
    /// `head` or `neck+head` when this point has that name.
    pub name: Option<String>,
    /// Parameters in modules `0..N`.
    pub frozen_parameters: usize,
    /// Parameters in modules `N..`.
    pub trainable_parameters: usize,
    /// Tensors the frozen part hands to the trainable part.
    pub cut_tensors: Vec<String>,
}

/// A graph output and how to read it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputInfo {
    /// Tensor name.
    pub name: String,
    /// Declared shape.
    pub shape: Vec<Dim>,
    /// `boxes+scores` (`[b, 4+nc, N]`, cx cy w h then class scores), `end-to-end`
    /// (`[b, k, 6]`: x1 y1 x2 y2 score class) or `unknown`.
    pub layout: String,
}

/// Everything `headroom inspect` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inspection {
    /// The file.
    pub file: String,
    /// Default-domain opset.
    pub opset: i64,
    /// The Ultralytics version that exported it (metadata), if recorded.
    pub exporter: Option<String>,
    /// `v5u`, `v8`, `11`, `v10` or `26`.
    pub family: String,
    /// Why that family.
    pub family_evidence: String,
    /// Whether the export ends in its own top-k (no NMS needed).
    pub end_to_end: bool,
    /// Input name.
    pub input: String,
    /// Input shape as declared (symbolic dims for dynamic exports).
    pub input_shape: Vec<Dim>,
    /// Whether any input dim is symbolic.
    pub dynamic: bool,
    /// The `[h, w]` used to infer the head (the static size, else the metadata `imgsz`, else 640).
    pub inspected_size: [i64; 2],
    /// Number of classes.
    pub classes: usize,
    /// Class names from the metadata (`None` when absent).
    pub names: Option<Vec<String>>,
    /// Strides of the head levels.
    pub strides: Vec<i64>,
    /// Graph outputs.
    pub outputs: Vec<OutputInfo>,
    /// The Detect head.
    pub head: Head,
    /// Modules `model.N` in index order.
    pub modules: Vec<Module>,
    /// All parameters.
    pub parameters: usize,
    /// Valid `--freeze N` points (every module boundary the graph can be cut at), `0..=head`.
    pub freeze_points: Vec<FreezePoint>,
}

fn not_detector(model: &Model, reason: impl Into<String>) -> Error {
    Error::NotDetector { path: model.path.clone(), reason: reason.into() }
}

/// Inspects a loaded model. Errors with [`Error::NotDetector`] when no Detect head is found.
pub fn inspect(model: &Model) -> Result<Inspection> {
    let input = model.graph.inputs.first().ok_or_else(|| not_detector(model, "the graph has no input"))?;
    let input_shape = input.shape.clone().unwrap_or_default();
    if input_shape.len() != 4 {
        return Err(not_detector(model, format!("input `{}` is not [batch, 3, h, w]", input.name)));
    }
    let dynamic = input_shape.iter().any(|d| d.known().is_none());
    let size = inspected_size(model, &input_shape);
    let mut dims = HashMap::new();
    for (d, value) in input_shape.iter().zip([1, 3, size[0], size[1]]) {
        if let Dim::Symbol(s) = d {
            dims.insert(s.clone(), value);
        }
    }
    let graph = if dynamic { model.graph_with_dims(&dims)? } else { model.graph.clone() };
    let head = find_head(model, &graph, size)?;
    let classes = head.class_channels;
    if let Some(names) = &model.metadata.names
        && names.len() != classes
    {
        return Err(not_detector(
            model,
            format!("{} names in the metadata but {classes} class channels", names.len()),
        ));
    }
    let (family, family_evidence) = family(model, &graph, &head);
    let outputs: Vec<OutputInfo> = model.graph.outputs.iter().map(|o| output_info(o, classes)).collect();
    let end_to_end =
        model.metadata.end2end.unwrap_or(false) || outputs.iter().any(|o| o.layout == "end-to-end");
    let modules = modules(&graph);
    let freeze_points = freeze_points(&graph, &modules, &head);
    Ok(Inspection {
        file: model.path.display().to_string(),
        opset: model.opset,
        exporter: model.metadata.version.clone(),
        family,
        family_evidence,
        end_to_end,
        input: input.name.clone(),
        input_shape,
        dynamic,
        inspected_size: size,
        classes,
        names: model.metadata.names.clone(),
        strides: head.levels.iter().map(|l| l.stride).collect(),
        outputs,
        parameters: parameter_uses(&graph).iter().map(|(_, _, n)| n).sum(),
        head,
        modules,
        freeze_points,
    })
}

fn inspected_size(model: &Model, shape: &[Dim]) -> [i64; 2] {
    let meta = model.metadata.imgsz.map(|[h, w]| [i64::from(h), i64::from(w)]);
    let fallback = meta.unwrap_or([640, 640]);
    [shape[2].known().unwrap_or(fallback[0]), shape[3].known().unwrap_or(fallback[1])]
}

/// Conv nodes reached walking back from the graph outputs without crossing another Conv: the
/// head's final convolutions (DFL's fixed 1-channel conv is walked through).
fn final_convs(graph: &Graph) -> Vec<&Node> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut stack: Vec<&str> = graph.outputs.iter().map(|o| o.name.as_str()).collect();
    let mut convs: Vec<&Node> = Vec::new();
    while let Some(tensor) = stack.pop() {
        if !seen.insert(tensor) {
            continue;
        }
        let Some(node) = graph.producer(tensor) else { continue };
        if matches!(node.op, Op::Shape(_)) {
            continue; // reads only its input's dims (anchors of dynamic exports), not its values
        }
        let dfl = node
            .inputs
            .get(1)
            .and_then(|w| graph.initializer_dims.get(w))
            .is_some_and(|d| d.first() == Some(&1));
        if matches!(node.op, Op::Conv(_)) && !dfl {
            if !convs.iter().any(|c| std::ptr::eq(*c, node)) {
                convs.push(node);
            }
            continue;
        }
        stack.extend(node.inputs.iter().filter(|i| !i.is_empty()).map(String::as_str));
    }
    convs.sort_by_key(|c| graph.nodes.iter().position(|n| std::ptr::eq(n, *c)));
    convs
}

fn conv_out(graph: &Graph, node: &Node) -> Option<(i64, i64, i64)> {
    let shape = graph.shape(node.outputs.first()?)?;
    match shape.as_slice() {
        [_, c, h, w] => Some((c.known()?, h.known()?, w.known()?)),
        _ => None,
    }
}

fn find_head(model: &Model, graph: &Graph, size: [i64; 2]) -> Result<Head> {
    let convs = final_convs(graph);
    if convs.is_empty() {
        return Err(not_detector(model, "no convolution feeds the outputs"));
    }
    let mut by_grid: BTreeMap<(i64, i64), Vec<(&Node, i64)>> = BTreeMap::new();
    for conv in &convs {
        let (c, h, w) = conv_out(graph, conv)
            .ok_or_else(|| not_detector(model, format!("no static shape for `{}`", conv.name)))?;
        by_grid.entry((h, w)).or_default().push((conv, c));
    }
    let nc = model.metadata.names.as_ref().map(Vec::len);
    let mut levels = Vec::new();
    let (mut box_channels, mut class_channels) = (None, None);
    for ((h, w), group) in by_grid.iter().rev() {
        let [(first, c1), (second, c2)] = group.as_slice() else {
            return Err(not_detector(
                model,
                format!(
                    "{} final convolutions at grid {h}x{w}; a Detect level has a box and a class conv",
                    group.len()
                ),
            ));
        };
        let ((bx, bc), (cx, cc)) = match nc {
            Some(nc) if *c1 == nc as i64 && *c2 != nc as i64 => ((second, c2), (first, c1)),
            _ => ((first, c1), (second, c2)),
        };
        if *box_channels.get_or_insert(*bc) != *bc || *class_channels.get_or_insert(*cc) != *cc || bc % 4 != 0
        {
            return Err(not_detector(
                model,
                format!("head convs at grid {h}x{w} have {bc} and {cc} channels"),
            ));
        }
        if *h <= 0 || *w <= 0 || size[0] % h != 0 || size[0] / h != size[1] / w {
            return Err(not_detector(
                model,
                format!("grid {h}x{w} is not a whole stride of {}x{}", size[0], size[1]),
            ));
        }
        levels.push(HeadLevel {
            stride: size[0] / h,
            grid: [*h, *w],
            box_conv: bx.name.clone(),
            box_output: bx.outputs.first().cloned().unwrap_or_default(),
            class_conv: cx.name.clone(),
            class_output: cx.outputs.first().cloned().unwrap_or_default(),
        });
    }
    let (box_channels, class_channels) =
        (box_channels.unwrap_or(0) as usize, class_channels.unwrap_or(0) as usize);
    let modules: HashSet<Option<usize>> = convs.iter().map(|c| c.module()).collect();
    let module = if modules.len() == 1 { modules.into_iter().next().flatten() } else { None };
    Ok(Head { module, reg_max: box_channels / 4, box_channels, class_channels, levels })
}

fn family(model: &Model, graph: &Graph, head: &Head) -> (String, String) {
    let first_kernel = graph.nodes.iter().find_map(|n| match &n.op {
        Op::Conv(_) => {
            n.inputs.get(1).and_then(|w| graph.initializer_dims.get(w)).and_then(|d| d.get(2).copied())
        }
        _ => None,
    });
    let head_convs: HashSet<&str> =
        head.levels.iter().flat_map(|l| [l.box_conv.as_str(), l.class_conv.as_str()]).collect();
    let strided_depthwise = graph.nodes.iter().any(|n| match &n.op {
        Op::Conv(c) => {
            c.group > 1 && c.strides.iter().any(|s| *s > 1) && !head_convs.contains(n.name.as_str())
        }
        _ => false,
    });
    let attention = graph.nodes.iter().any(|n| matches!(n.op, Op::MatMul));
    let v10_meta = model.metadata_props.iter().any(|(k, v)| k == "head" && v == "v10Detect");
    let (family, evidence) = if head.reg_max == 1 {
        ("26", "box convs with 4 channels (reg_max 1, no DFL)".to_string())
    } else if first_kernel == Some(6) {
        ("v5u", "6x6 stem convolution".to_string())
    } else if strided_depthwise || v10_meta {
        ("v10", "stride-2 depthwise downsampling (SCDown)".to_string())
    } else if attention {
        ("11", "attention (MatMul) in the backbone, reg_max 16".to_string())
    } else {
        ("v8", "no attention, plain stride-2 convs, reg_max 16".to_string())
    };
    (family.to_string(), evidence)
}

fn output_info(output: &crate::graph::ValueInfo, classes: usize) -> OutputInfo {
    let shape = output.shape.clone().unwrap_or_default();
    let layout = match shape.as_slice() {
        [_, c, _] if c.known() == Some(4 + classes as i64) => "boxes+scores",
        [_, _, c] if c.known() == Some(6) => "end-to-end",
        _ => "unknown",
    };
    OutputInfo { name: output.name.clone(), shape, layout: layout.to_string() }
}

/// Parameters as Ultralytics counts them: for every Conv (and MatMul with a constant operand), the
/// elements of its weight and bias initializers, with the module `N` of the node (`None` outside
/// `model.N`). An initializer shared by several nodes (exporters deduplicate equal tensors, e.g. the
/// zero biases of an untrained model) is counted once per node, as each PyTorch module owns a copy.
pub fn parameter_uses(graph: &Graph) -> Vec<(Option<usize>, &str, usize)> {
    let mut out = Vec::new();
    for node in &graph.nodes {
        for name in node.parameter_inputs() {
            if let Some(dims) = graph.initializer_dims.get(name) {
                out.push((node.module(), name.as_str(), crate::tensor::numel(dims)));
            }
        }
    }
    out
}

fn modules(graph: &Graph) -> Vec<Module> {
    let mut modules: BTreeMap<usize, Module> = BTreeMap::new();
    for node in &graph.nodes {
        if let Some(index) = node.module() {
            modules.entry(index).or_insert(Module { index, nodes: 0, parameters: 0 }).nodes += 1;
        }
    }
    for (module, _, count) in parameter_uses(graph) {
        if let Some(m) = module.and_then(|i| modules.get_mut(&i)) {
            m.parameters += count;
        }
    }
    modules.into_values().collect()
}

fn freeze_points(graph: &Graph, modules: &[Module], head: &Head) -> Vec<FreezePoint> {
    let Some(head_module) = head.module else { return Vec::new() };
    // `model.N` indices are contiguous from 0, so N never exceeds the node count; a larger one (a
    // name such as `/model.99999999999/`) is not an Ultralytics module and would loop for ages.
    if head_module > graph.nodes.len() {
        return Vec::new();
    }
    let neck = graph.nodes.iter().find(|n| matches!(n.op, Op::Resize(_))).and_then(Node::module);
    // Nodes computing only from initializers and constants (`Constant` split sizes of un-simplified
    // exports, often without a `model.N` name) are constants: they belong to no side of a cut.
    let mut constant: HashSet<&str> = graph.initializer_dims.keys().map(String::as_str).collect();
    for n in &graph.nodes {
        if n.inputs.iter().all(|i| i.is_empty() || constant.contains(i.as_str())) {
            constant.extend(n.outputs.iter().map(String::as_str));
        }
    }
    let producer: HashMap<&str, Option<usize>> = graph
        .nodes
        .iter()
        .filter(|n| !n.outputs.iter().all(|o| constant.contains(o.as_str())))
        .flat_map(|n| n.outputs.iter().map(move |o| (o.as_str(), n.module())))
        .collect();
    let total: usize = modules.iter().map(|m| m.parameters).sum();
    let mut points = Vec::new();
    for freeze in 0..=head_module {
        // Valid when no frozen node reads a tensor made by a trainable (or unnamed) node.
        let backwards = graph.nodes.iter().filter(|n| n.module().is_some_and(|m| m < freeze)).any(|n| {
            n.inputs.iter().any(|i| producer.get(i.as_str()).is_some_and(|p| p.is_none_or(|p| p >= freeze)))
        });
        if backwards {
            continue;
        }
        let mut cut: Vec<String> = graph
            .nodes
            .iter()
            .filter(|n| n.module().is_none_or(|m| m >= freeze))
            .flat_map(|n| n.inputs.iter())
            .filter(|i| match producer.get(i.as_str()) {
                Some(p) => p.is_some_and(|p| p < freeze),
                None => graph.inputs.iter().any(|g| &g.name == *i),
            })
            .cloned()
            .collect();
        cut.sort();
        cut.dedup();
        let frozen: usize = modules.iter().filter(|m| m.index < freeze).map(|m| m.parameters).sum();
        let name = match (freeze == head_module, Some(freeze) == neck) {
            (true, _) => Some("head".to_string()),
            (_, true) => Some("neck+head".to_string()),
            _ => None,
        };
        points.push(FreezePoint {
            freeze,
            name,
            frozen_parameters: frozen,
            trainable_parameters: total - frozen,
            cut_tensors: cut,
        });
    }
    points
}

/// `n` with thousands separators (`3,157,200`).
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The report as `headroom inspect` prints it.
pub fn table(r: &Inspection) -> String {
    use std::fmt::Write as _;

    use crate::dim::format_shape;
    let mut s = String::new();
    let family = format!("{}{}", r.family, if r.end_to_end { " (end-to-end)" } else { "" });
    let names = r.names.as_ref().map_or_else(|| "(not in metadata)".to_string(), |n| n.join(", "));
    let exporter = r.exporter.as_deref().unwrap_or("unknown");
    let strides: Vec<String> = r.strides.iter().map(ToString::to_string).collect();
    let _ = writeln!(s, "model       {}", r.file);
    let _ = writeln!(s, "family      {family} — {}", r.family_evidence);
    let _ = writeln!(s, "exporter    Ultralytics {exporter}, opset {}", r.opset);
    let kind = if r.dynamic { "dynamic" } else { "static" };
    let _ = writeln!(s, "input       {} {} ({kind})", r.input, format_shape(&r.input_shape));
    let _ = writeln!(s, "classes     {}: {names}", r.classes);
    let _ = writeln!(s, "strides     {}", strides.join(", "));
    for o in &r.outputs {
        let _ = writeln!(s, "output      {} {} {}", o.name, format_shape(&o.shape), o.layout);
    }
    let module = r.head.module.map_or_else(|| "?".to_string(), |m| format!("model.{m}"));
    let _ = writeln!(
        s,
        "head        {module}: reg_max {}, box convs {} ch, class convs {} ch (at {}x{})",
        r.head.reg_max, r.head.box_channels, r.head.class_channels, r.inspected_size[0], r.inspected_size[1]
    );
    for l in &r.head.levels {
        let _ = writeln!(
            s,
            "  stride {:>2}  {}x{}  box {} -> {}  class {} -> {}",
            l.stride, l.grid[0], l.grid[1], l.box_conv, l.box_output, l.class_conv, l.class_output
        );
    }
    let _ = writeln!(s, "parameters  {}", thousands(r.parameters));
    let _ = writeln!(
        s,
        "\n{:>8} {:>6} {:>11}   {:>6} {:>11} {:>11}  name",
        "module", "nodes", "parameters", "freeze", "frozen", "trainable"
    );
    for m in &r.modules {
        let point = r.freeze_points.iter().find(|p| p.freeze == m.index);
        let (freeze, frozen, trainable, name) = match point {
            Some(p) => (
                p.freeze.to_string(),
                thousands(p.frozen_parameters),
                thousands(p.trainable_parameters),
                p.name.clone().unwrap_or_default(),
            ),
            None => ("-".into(), String::new(), String::new(), String::new()),
        };
        let _ = writeln!(
            s,
            "{:>8} {:>6} {:>11}   {freeze:>6} {frozen:>11} {trainable:>11}  {name}",
            format!("model.{}", m.index),
            m.nodes,
            thousands(m.parameters)
        );
    }
    let _ = writeln!(s, "\n`--freeze N` freezes model.0..N-1 (Ultralytics' meaning); `head` = {module}.");
    s
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use prost::Message;

    use super::*;
    use crate::proto::ModelProto;

    const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/seeds/load/detect-static.onnx");

    #[test]
    fn a_huge_head_module_index_gives_no_freeze_points_instead_of_looping() {
        let bytes = std::fs::read(SEED).expect("fuzz seed");
        let mut proto = ModelProto::decode(bytes.as_slice()).expect("decodes");
        for node in &mut proto.graph.as_mut().expect("graph").node {
            node.name = node.name.as_ref().map(|n| n.replace("/model.3/", "/model.99999999999/"));
        }
        let model = Model::from_proto(proto, Path::new(SEED)).expect("loads");
        let inspection = inspect(&model).expect("inspects");
        assert_eq!(inspection.head.module, Some(99_999_999_999));
        assert!(inspection.freeze_points.is_empty());
    }

    #[test]
    fn parameters_of_a_zero_sized_weight_with_huge_dims_do_not_overflow() {
        let bytes = std::fs::read(SEED).expect("fuzz seed");
        let mut model = Model::from_bytes(&bytes, Path::new(SEED)).expect("loads");
        let weight = model.graph.nodes[0].inputs[1].clone();
        model.graph.initializer_dims.insert(weight.clone(), vec![1 << 40, 1 << 40, 0, 1]);
        let uses = parameter_uses(&model.graph);
        assert!(uses.iter().any(|(_, name, n)| *name == weight && *n == 0));
    }
}
