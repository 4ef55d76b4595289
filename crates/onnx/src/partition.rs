//! Splitting a detector into a frozen trunk and a trainable part, and the trainable part into
//! segments (one per module `model.N`) for checkpointing.
//!
//! `--freeze N` has Ultralytics' meaning: modules `model.0` .. `model.N-1` are frozen. `head` trains
//! the Detect module only, `neck+head` everything from the first upsample on. Only the nodes that
//! lead to the raw head tensors (box distribution and class logits per level) are kept: the decode
//! after them (DFL, anchors, concat, NMS or top-k tails) is not part of training.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::graph::Graph;
use crate::inspect::Inspection;

/// Which part of the model trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Trainable {
    /// Modules `0..N` frozen (`--freeze N`).
    Freeze(usize),
    /// The Detect module only.
    Head,
    /// From the neck's first upsample on.
    NeckHead,
    /// The Detect module, and a per-channel scale and shift on every Conv before it (trained end
    /// to end through the whole graph, folded into each Conv's weight and bias when written back).
    /// The partition is that of `Freeze(0)` with the head's initializers as its parameters; the
    /// executor of the `train` crate adds the scales and shifts.
    Affine,
}

impl fmt::Display for Trainable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Trainable::Freeze(n) => write!(f, "freeze={n}"),
            Trainable::Head => f.write_str("head"),
            Trainable::NeckHead => f.write_str("neck+head"),
            Trainable::Affine => f.write_str("affine"),
        }
    }
}

impl FromStr for Trainable {
    type Err = String;

    /// `head`, `neck+head`, `all`, `affine`, or a number `N` (freeze modules `0..N`); also
    /// `freeze=N`, as [`Display`](fmt::Display) writes it (the two round-trip).
    fn from_str(s: &str) -> Result<Trainable, String> {
        match s
            .strip_prefix("freeze=")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .unwrap_or(s)
        {
            "head" => Ok(Trainable::Head),
            "neck+head" => Ok(Trainable::NeckHead),
            "affine" => Ok(Trainable::Affine),
            "all" => Ok(Trainable::Freeze(0)),
            n => n.parse().map(Trainable::Freeze).map_err(|_| {
                format!("`{s}` is not `head`, `neck+head`, `all`, `affine` or a module count N")
            }),
        }
    }
}

/// The trainable nodes of one module (of one branch, for the Detect module).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Segment {
    /// The module `N` (`None` for nodes without a `model.N` name).
    pub module: Option<usize>,
    /// Node indices into [`Graph::nodes`], graph order.
    pub nodes: Vec<usize>,
    /// Activations it reads from the trunk or earlier segments (initializers excluded).
    pub inputs: Vec<String>,
    /// Activations it makes that later segments or the head outputs read.
    pub outputs: Vec<String>,
}

/// A detector split for training.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Partition {
    /// The split asked for.
    pub spec: Trainable,
    /// Modules `0..freeze` are frozen.
    pub freeze: usize,
    /// Frozen nodes needed to compute [`Partition::cut`], graph order (run without gradients).
    pub trunk: Vec<usize>,
    /// Tensors the trunk hands to the trainable part.
    pub cut: Vec<String>,
    /// The trainable nodes, by module.
    pub segments: Vec<Segment>,
    /// The raw head tensors, per level by increasing stride: box distribution, then class logits.
    pub head_outputs: Vec<String>,
    /// Trainable initializers (Conv weights and biases, MatMul weights), each once.
    pub parameters: Vec<String>,
    /// Trainable parameter count as Ultralytics counts it (a tensor shared by two layers counts twice).
    pub parameter_count: usize,
}

impl Partition {
    /// How many segments, from the first, a checkpointed backward recomputes; the rest, the kept
    /// tail, run once with autograd and the loss's backward goes through them at once (PyTorch's
    /// `checkpoint_sequential` keeps its last segment the same way).
    ///
    /// The tail is the detect head's segments (its branches, each a segment) when modules before
    /// the head train too: their recomputation is a third of a YOLO model's arithmetic, while the
    /// peak of a checkpointed step is reached recomputing the neck and trunk at stride 8, so keeping
    /// them costs little (measured at 640, batch 2, every layer: −11 % of a pass for +4 MB of peak
    /// with the defaults, +21 MB with a teacher's dense loss; docs/BENCHMARKS.md). When only the head trains, its segments are the whole recomputation and
    /// only the last one is kept (docs/DECISIONS.md "A checkpointed backward keeps the detect head").
    pub fn recomputed(&self) -> usize {
        let n = self.segments.len();
        let head = self.segments.last().and_then(|s| s.module);
        let first_head = self.segments.iter().position(|s| head.is_some() && s.module == head).unwrap_or(n);
        if first_head > 0 && first_head < n { first_head } else { n.saturating_sub(1) }
    }
}

impl Partition {
    /// Splits `graph` (described by `inspection`) as `spec` says.
    pub fn new(graph: &Graph, inspection: &Inspection, spec: Trainable) -> Result<Partition> {
        let err =
            |reason: String| Error::Partition { path: graph.path.clone(), spec: spec.to_string(), reason };
        let valid = freeze_points_text(&inspection.freeze_points);
        let point = inspection
            .freeze_points
            .iter()
            .find(|p| match spec {
                Trainable::Freeze(n) => p.freeze == n,
                Trainable::Affine => p.freeze == 0,
                Trainable::Head => p.name.as_deref() == Some("head"),
                Trainable::NeckHead => p.name.as_deref() == Some("neck+head"),
            })
            .ok_or_else(|| err(format!("valid freeze points are {valid}")))?;
        let freeze = point.freeze;
        let head_outputs: Vec<String> = inspection
            .head
            .levels
            .iter()
            .flat_map(|l| [l.box_output.clone(), l.class_output.clone()])
            .collect();

        let producer = crate::graph::producers(&graph.nodes);
        let mut needed = HashSet::new();
        let mut stack: Vec<&str> = head_outputs.iter().map(String::as_str).collect();
        while let Some(t) = stack.pop() {
            if let Some(&i) = producer.get(t)
                && needed.insert(i)
            {
                stack.extend(graph.nodes[i].inputs.iter().map(String::as_str));
            }
        }
        let mut needed: Vec<usize> = needed.into_iter().collect();
        needed.sort_unstable();

        let mut trainable_nodes: HashSet<usize> = HashSet::new();
        for &i in &needed {
            let node = &graph.nodes[i];
            let reads_trainable = node
                .inputs
                .iter()
                .any(|input| producer.get(input.as_str()).is_some_and(|p| trainable_nodes.contains(p)));
            if node.module().map_or(reads_trainable, |m| m >= freeze) {
                trainable_nodes.insert(i);
            }
        }
        if trainable_nodes.is_empty() {
            return Err(err("nothing would train".into()));
        }
        let trunk: Vec<usize> = needed.iter().copied().filter(|i| !trainable_nodes.contains(i)).collect();
        let is_activation = |t: &str| !t.is_empty() && !graph.initializer_dims.contains_key(t);

        // One segment per module, in module order (exports may interleave modules' nodes, e.g. the
        // Detect branch of the first level right after model.15); a node without a module name joins
        // the module of the node before it. Ultralytics modules read only lower-numbered ones, so
        // every segment's inputs are ready when it runs.
        // The Detect module is split further by branch (`cv2.0`, `cv3.0`, ...: one per level and
        // role, independent of each other), since at 640 its first level holds the largest activations.
        let head_module = inspection.head.module;
        let branch = |i: usize| -> String {
            let node = &graph.nodes[i];
            if node.module().is_none() || node.module() != head_module {
                return String::new();
            }
            let mut parts = node.name.split('/').skip_while(|p| !p.starts_with("model."));
            parts.next();
            parts.next().filter(|p| p.contains('.')).unwrap_or_default().to_string()
        };
        let mut order: Vec<(Option<usize>, String)> = Vec::new();
        let mut by_key: HashMap<(Option<usize>, String), Vec<usize>> = HashMap::new();
        let mut current = None;
        for &i in &needed {
            if !trainable_nodes.contains(&i) {
                continue;
            }
            current = graph.nodes[i].module().or(current);
            let key = (current, branch(i));
            if !by_key.contains_key(&key) {
                order.push(key.clone());
            }
            by_key.entry(key).or_default().push(i);
        }
        order.sort_by_key(|(module, _)| *module); // stable: branches keep their first-seen order
        let mut segments: Vec<Segment> = order
            .into_iter()
            .map(|key| Segment {
                module: key.0,
                nodes: by_key.remove(&key).unwrap_or_default(),
                inputs: vec![],
                outputs: vec![],
            })
            .collect();
        let segment_of: HashMap<usize, usize> =
            segments.iter().enumerate().flat_map(|(s, seg)| seg.nodes.iter().map(move |n| (*n, s))).collect();
        let mut cut: Vec<String> = Vec::new();
        for (s, segment) in segments.iter_mut().enumerate() {
            let mut inputs: Vec<String> = Vec::new();
            for &i in &segment.nodes {
                for input in graph.nodes[i].inputs.iter().filter(|t| is_activation(t)) {
                    let inside = producer.get(input.as_str()).is_some_and(|p| segment_of.get(p) == Some(&s));
                    if !inside && !inputs.contains(input) {
                        inputs.push(input.clone());
                    }
                    let from_trunk =
                        producer.get(input.as_str()).is_none_or(|p| !trainable_nodes.contains(p));
                    if from_trunk && !cut.contains(input) {
                        cut.push(input.clone());
                    }
                }
            }
            if let Some(late) = inputs.iter().find(|t| {
                producer.get(t.as_str()).and_then(|p| segment_of.get(p)).is_some_and(|&from| from > s)
            }) {
                let module =
                    segment.module.map_or("(outside any module)".to_string(), |m| format!("model.{m}"));
                return Err(err(format!(
                    "{module} reads `{late}`, which a later module computes; this graph cannot be cut in segments by module"
                )));
            }
            segment.inputs = inputs;
        }
        let read_later: Vec<HashSet<String>> = (0..segments.len())
            .map(|s| segments[s + 1..].iter().flat_map(|later| later.inputs.iter().cloned()).collect())
            .collect();
        for (s, segment) in segments.iter_mut().enumerate() {
            segment.outputs = segment
                .nodes
                .iter()
                .flat_map(|&i| graph.nodes[i].outputs.iter())
                .filter(|o| read_later[s].contains(*o) || head_outputs.contains(o))
                .cloned()
                .collect();
        }

        let mut parameters: Vec<String> = Vec::new();
        let mut parameter_count = 0;
        let in_head = |i: usize| head_module.is_some() && graph.nodes[i].module() >= head_module;
        for &i in trainable_nodes.iter().collect::<std::collections::BTreeSet<_>>() {
            if spec == Trainable::Affine && !in_head(i) {
                continue;
            }
            for name in graph.nodes[i].parameter_inputs() {
                if let Some(dims) = graph.initializer_dims.get(name) {
                    parameter_count += crate::tensor::numel(dims);
                    if !parameters.contains(name) {
                        parameters.push(name.clone());
                    }
                }
            }
        }
        Ok(Partition { spec, freeze, trunk, cut, segments, head_outputs, parameters, parameter_count })
    }
}

/// The freeze points in a few words: runs of consecutive points as `0 to 22`, then the named ones
/// (`0 to 22 (10 is neck+head, 22 is head)`).
fn freeze_points_text(points: &[crate::inspect::FreezePoint]) -> String {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for p in points {
        match runs.last_mut() {
            Some((_, end)) if *end + 1 == p.freeze => *end = p.freeze,
            _ => runs.push((p.freeze, p.freeze)),
        }
    }
    let runs: Vec<String> =
        runs.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a} to {b}") }).collect();
    let named: Vec<String> =
        points.iter().filter_map(|p| p.name.as_ref().map(|n| format!("{} is {n}", p.freeze))).collect();
    if named.is_empty() { runs.join(", ") } else { format!("{} ({})", runs.join(", "), named.join(", ")) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn trainable_text_round_trips() {
        for t in [
            Trainable::Head,
            Trainable::NeckHead,
            Trainable::Affine,
            Trainable::Freeze(0),
            Trainable::Freeze(10),
        ] {
            assert_eq!(t.to_string().parse::<Trainable>(), Ok(t), "{t}");
        }
        assert_eq!("all".parse::<Trainable>(), Ok(Trainable::Freeze(0)));
        assert_eq!("10".parse::<Trainable>(), Ok(Trainable::Freeze(10)));
        for bad in ["freeze=", "freeze=x", "freeze=-1", "heads", ""] {
            assert!(bad.parse::<Trainable>().is_err(), "{bad}");
        }
    }

    use super::*;

    #[test]
    fn parses_the_three_forms() {
        assert_eq!("head".parse(), Ok(Trainable::Head));
        assert_eq!("neck+head".parse(), Ok(Trainable::NeckHead));
        assert_eq!("10".parse(), Ok(Trainable::Freeze(10)));
        assert!("backbone".parse::<Trainable>().is_err_and(|e| e.contains("neck+head")));
    }
}
