//! Decoding raw detector outputs into boxes, then NMS — pure code, no ONNX Runtime.
//!
//! Layouts:
//! - [`OutputLayout::Anchors`]: `[B, 4+nc, N]`, rows cx, cy, w, h (input pixels) then sigmoid class
//!   scores, no objectness — v5u, v8, 11, and v10/26 by default.
//! - [`OutputLayout::EndToEnd`]: `[B, K, 6]` rows x1, y1, x2, y2, score, class — v10/26 with
//!   `nms=False`, or any export with embedded NMS.
//! - [`OutputLayout::YoloV5`]: classic YOLOv5 `[B, N, 5+nc]` rows cx, cy, w, h, objectness, class
//!   scores (confidence = objectness × class score).

use headroom_core::boxes::{Detection, NmsMode, Xyxy, nms};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// How to read a detector's output tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputLayout {
    /// `[B, 4+nc, N]`: box centre/size then class scores, one column per anchor.
    Anchors {
        /// Number of classes.
        nc: usize,
    },
    /// `[B, K, 6]`: corners, score, class, already suppressed.
    EndToEnd,
    /// `[B, N, 5+nc]`: box centre/size, objectness, class scores, one row per anchor.
    YoloV5 {
        /// Number of classes.
        nc: usize,
    },
}

impl OutputLayout {
    /// Recognises the layout from an output shape `[B, d1, d2]`. `nc`, when the model's metadata
    /// gives it, settles the ambiguous cases.
    pub fn detect(shape: &[i64], nc: Option<usize>) -> Result<Self> {
        let bad = |reason: &str| Error::NotADetector { shape: shape.to_vec(), reason: reason.to_string() };
        let [_, d1, d2] = shape else { return Err(bad("expected a 3-D output [batch, a, b]")) };
        let (d1, d2) = (usize::try_from(*d1).ok(), usize::try_from(*d2).ok());
        match (d1, d2, nc) {
            (Some(d1), _, Some(nc)) if d1 == 4 + nc => Ok(Self::Anchors { nc }),
            (_, Some(d2), Some(nc)) if d2 == 5 + nc => Ok(Self::YoloV5 { nc }),
            (_, Some(6), _) => Ok(Self::EndToEnd),
            (Some(d1), Some(d2), None) if d1 > 4 && d1 < d2 => Ok(Self::Anchors { nc: d1 - 4 }),
            (Some(d1), Some(d2), None) if d2 > 5 && d2 < d1 => Ok(Self::YoloV5 { nc: d2 - 5 }),
            _ => Err(bad("no known YOLO layout ([B,4+nc,N], [B,K,6] or [B,N,5+nc]) fits")),
        }
    }
}

/// Thresholds and limits of decoding, with Ultralytics' names and defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecodeOptions {
    /// Minimum confidence (`conf`): predict uses 0.25, val 0.001.
    pub confidence: f32,
    /// NMS IoU threshold (`iou`, 0.7).
    pub iou: f32,
    /// Maximum detections per image (`max_det`, 300).
    pub max_detections: usize,
    /// Class-aware or class-agnostic NMS.
    pub nms: NmsMode,
    /// One detection per (box, class) above the threshold instead of one per box (val does this).
    pub multi_label: bool,
    /// Boxes kept for NMS at most, by score (`max_nms`, 30000).
    pub max_nms: usize,
}

impl DecodeOptions {
    /// Ultralytics' `predict` defaults.
    pub fn predict() -> Self {
        Self {
            confidence: 0.25,
            iou: 0.7,
            max_detections: 300,
            nms: NmsMode::ClassAware,
            multi_label: false,
            max_nms: 30_000,
        }
    }

    /// Ultralytics' `val` defaults.
    pub fn val() -> Self {
        Self { confidence: 0.001, multi_label: true, ..Self::predict() }
    }
}

/// One kept detection with the full class-score vector of the anchor it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftDetection {
    /// The detection (box in input pixels until the caller unmaps it).
    pub detection: Detection,
    /// The anchor (column of `[4+nc, N]`, row of `[N, 5+nc]` or `[K, 6]`) it came from.
    pub anchor: usize,
    /// Per-class confidence of that anchor as the decoder scores it: the class scores for
    /// [`OutputLayout::Anchors`], objectness × class scores for [`OutputLayout::YoloV5`]; empty for
    /// [`OutputLayout::EndToEnd`], whose output carries only the winning score.
    pub scores: Vec<f32>,
}

/// The result of [`decode_soft`]: kept detections and, if asked, the best pre-NMS candidates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SoftDecoded {
    /// Detections after thresholding and NMS, by decreasing score (what [`decode`] returns).
    pub kept: Vec<SoftDetection>,
    /// The `top_k` anchors with the highest best-class score before any threshold or NMS, by
    /// decreasing score; each carries its best class as `detection.class`.
    pub top_k: Vec<SoftDetection>,
}

/// Decodes one image's output (`data` is that image's slice, `shape` the per-image `[d1, d2]`) into
/// detections in input (letterboxed) pixels, after NMS.
pub fn decode(
    layout: OutputLayout,
    data: &[f32],
    shape: [usize; 2],
    options: &DecodeOptions,
) -> Vec<Detection> {
    decode_candidates(layout, data, shape, options).into_iter().map(|(d, _)| d).collect()
}

/// As [`decode`], and each kept detection also carries its anchor's class-score vector; `top_k > 0`
/// also returns the `top_k` best anchors before thresholds and NMS (soft targets for distillation).
pub fn decode_soft(
    layout: OutputLayout,
    data: &[f32],
    shape: [usize; 2],
    options: &DecodeOptions,
    top_k: usize,
) -> SoftDecoded {
    let kept = decode_candidates(layout, data, shape, options)
        .into_iter()
        .map(|(detection, anchor)| SoftDetection {
            detection,
            anchor,
            scores: anchor_scores(layout, data, shape, anchor),
        })
        .collect();
    SoftDecoded { kept, top_k: top_anchors(layout, data, shape, top_k) }
}

/// The per-class confidences of one anchor (see [`SoftDetection::scores`]).
pub fn anchor_scores(layout: OutputLayout, data: &[f32], shape: [usize; 2], anchor: usize) -> Vec<f32> {
    let [_, d2] = shape;
    match layout {
        OutputLayout::Anchors { nc } => (0..nc).map(|c| data[(4 + c) * d2 + anchor]).collect(),
        OutputLayout::YoloV5 { nc } => {
            let row = &data[anchor * d2..(anchor + 1) * d2];
            row[5..5 + nc].iter().map(|s| s * row[4]).collect()
        }
        OutputLayout::EndToEnd => Vec::new(),
    }
}

/// The box and best class of one anchor, in input pixels.
fn anchor_detection(layout: OutputLayout, data: &[f32], shape: [usize; 2], anchor: usize) -> Detection {
    let [_, d2] = shape;
    match layout {
        OutputLayout::Anchors { .. } => {
            let at = |row: usize| data[row * d2 + anchor];
            let bbox = Xyxy::from_cxcywh(at(0), at(1), at(2), at(3));
            let (class, score) = best(&anchor_scores(layout, data, shape, anchor));
            Detection { bbox, score, class }
        }
        OutputLayout::YoloV5 { .. } => {
            let row = &data[anchor * d2..(anchor + 1) * d2];
            let bbox = Xyxy::from_cxcywh(row[0], row[1], row[2], row[3]);
            let (class, score) = best(&anchor_scores(layout, data, shape, anchor));
            Detection { bbox, score, class }
        }
        OutputLayout::EndToEnd => {
            let row = &data[anchor * 6..anchor * 6 + 6];
            let class = if row[5] >= 0.0 { row[5] as usize } else { 0 };
            Detection { bbox: Xyxy::new(row[0], row[1], row[2], row[3]), score: row[4], class }
        }
    }
}

/// The class with the highest score and that score (the last on ties, as the decoder picks it);
/// `(0, 0.0)` when there is no class.
fn best(scores: &[f32]) -> (usize, f32) {
    scores.iter().copied().enumerate().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap_or((0, 0.0))
}

/// The `k` anchors with the highest best-class score, by decreasing score (ties: lower anchor first).
fn top_anchors(layout: OutputLayout, data: &[f32], shape: [usize; 2], k: usize) -> Vec<SoftDetection> {
    if k == 0 {
        return Vec::new();
    }
    let anchors = match layout {
        OutputLayout::Anchors { .. } => shape[1],
        OutputLayout::YoloV5 { .. } | OutputLayout::EndToEnd => shape[0],
    };
    let mut ranked: Vec<(f32, usize)> =
        (0..anchors).map(|a| (anchor_detection(layout, data, shape, a).score, a)).collect();
    let order = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if ranked.len() > k {
        ranked.select_nth_unstable_by(k - 1, order);
        ranked.truncate(k);
    }
    ranked.sort_by(order);
    ranked
        .into_iter()
        .map(|(_, anchor)| SoftDetection {
            detection: anchor_detection(layout, data, shape, anchor),
            anchor,
            scores: anchor_scores(layout, data, shape, anchor),
        })
        .collect()
}

/// Thresholded, suppressed detections with the anchor each came from.
fn decode_candidates(
    layout: OutputLayout,
    data: &[f32],
    shape: [usize; 2],
    options: &DecodeOptions,
) -> Vec<(Detection, usize)> {
    let [d1, d2] = shape;
    let mut candidates: Vec<(Detection, usize)> = Vec::new();
    match layout {
        OutputLayout::Anchors { nc } => {
            let at = |row: usize, col: usize| data[row * d2 + col];
            for a in 0..d2 {
                let bbox = || Xyxy::from_cxcywh(at(0, a), at(1, a), at(2, a), at(3, a));
                push_scores(&mut candidates, a, (0..nc).map(|c| at(4 + c, a)), bbox, options, 1.0);
            }
        }
        OutputLayout::YoloV5 { nc } => {
            for (a, row) in data.chunks_exact(d2).take(d1).enumerate() {
                let objectness = row[4];
                if objectness <= options.confidence {
                    continue;
                }
                let bbox = || Xyxy::from_cxcywh(row[0], row[1], row[2], row[3]);
                push_scores(&mut candidates, a, row[5..5 + nc].iter().copied(), bbox, options, objectness);
            }
        }
        OutputLayout::EndToEnd => {
            for (a, row) in data.chunks_exact(6).take(d1).enumerate() {
                if row[4] > options.confidence && row[5] >= 0.0 {
                    let bbox = Xyxy::new(row[0], row[1], row[2], row[3]);
                    candidates.push((Detection { bbox, score: row[4], class: row[5] as usize }, a));
                }
            }
            candidates.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
            candidates.truncate(options.max_detections);
            return candidates;
        }
    }
    // Stable sort by score: `nms` sorts the same way and keeps a subsequence of this order, which is
    // how its survivors are matched back to their anchors below.
    candidates.sort_by(|a, b| b.0.score.total_cmp(&a.0.score));
    candidates.truncate(options.max_nms);
    let kept =
        nms(candidates.iter().map(|(d, _)| *d).collect(), options.iou, options.nms, options.max_detections);
    let mut remaining = candidates.into_iter();
    kept.into_iter()
        .filter_map(|k| remaining.by_ref().find(|(d, _)| *d == k).map(|(_, anchor)| (k, anchor)))
        .collect()
}

fn push_scores(
    out: &mut Vec<(Detection, usize)>,
    anchor: usize,
    scores: impl Iterator<Item = f32>,
    bbox: impl Fn() -> Xyxy,
    options: &DecodeOptions,
    factor: f32,
) {
    if options.multi_label {
        for (class, s) in scores.enumerate() {
            let score = s * factor;
            if score > options.confidence {
                out.push((Detection { bbox: bbox(), score, class }, anchor));
            }
        }
    } else {
        let best = scores.enumerate().max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((class, s)) = best {
            let score = s * factor;
            if score > options.confidence {
                out.push((Detection { bbox: bbox(), score, class }, anchor));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_layouts() {
        assert_eq!(OutputLayout::detect(&[1, 7, 525], Some(3)).ok(), Some(OutputLayout::Anchors { nc: 3 }));
        assert_eq!(OutputLayout::detect(&[1, 84, 8400], None).ok(), Some(OutputLayout::Anchors { nc: 80 }));
        assert_eq!(OutputLayout::detect(&[1, 300, 6], Some(80)).ok(), Some(OutputLayout::EndToEnd));
        assert_eq!(OutputLayout::detect(&[1, 25200, 85], None).ok(), Some(OutputLayout::YoloV5 { nc: 80 }));
        assert!(OutputLayout::detect(&[1, 1000], None).is_err());
        assert!(OutputLayout::detect(&[1, 3, 3], None).is_err());
    }

    /// One row per anchor (`cx cy w h scores…`) as the `[4+nc, N]` layout the models emit.
    fn anchor_major<const R: usize>(cols: &[[f32; R]]) -> Vec<f32> {
        let n = cols.len();
        let mut data = vec![0f32; R * n];
        for (a, col) in cols.iter().enumerate() {
            for (r, v) in col.iter().enumerate() {
                data[r * n + a] = *v;
            }
        }
        data
    }

    #[test]
    fn decodes_anchor_layout_with_nms() {
        // 2 classes, 3 anchors: two overlapping class-0 boxes and one class-1 box.
        let (nc, n) = (2, 3);
        let cols = [
            [50.0, 50.0, 20.0, 20.0, 0.9, 0.1],
            [51.0, 50.0, 20.0, 20.0, 0.8, 0.1],
            [10.0, 10.0, 4.0, 4.0, 0.0, 0.6],
        ];
        let data = anchor_major(&cols);
        let dets = decode(OutputLayout::Anchors { nc }, &data, [4 + nc, n], &DecodeOptions::predict());
        assert_eq!(dets.len(), 2);
        assert_eq!((dets[0].class, dets[0].score), (0, 0.9));
        assert_eq!(dets[0].bbox, Xyxy::new(40.0, 40.0, 60.0, 60.0));
        assert_eq!((dets[1].class, dets[1].score), (1, 0.6));
        // Multi-label at val thresholds keeps the weak class-1 score of the first box too.
        let dets = decode(OutputLayout::Anchors { nc }, &data, [4 + nc, n], &DecodeOptions::val());
        assert!(dets.iter().any(|d| d.class == 1 && (d.score - 0.1).abs() < 1e-6));
    }

    #[test]
    fn soft_decoding_keeps_what_decode_keeps_with_each_anchors_scores() {
        let (nc, n) = (2, 4);
        let cols = [
            [50.0, 50.0, 20.0, 20.0, 0.1, 0.8],
            [51.0, 50.0, 20.0, 20.0, 0.2, 0.9],
            [10.0, 10.0, 4.0, 4.0, 0.6, 0.3],
            [90.0, 90.0, 4.0, 4.0, 0.05, 0.1],
        ];
        let data = anchor_major(&cols);
        let layout = OutputLayout::Anchors { nc };
        let options = DecodeOptions::predict();
        let hard = decode(layout, &data, [4 + nc, n], &options);
        let soft = decode_soft(layout, &data, [4 + nc, n], &options, 3);
        assert_eq!(soft.kept.iter().map(|s| s.detection).collect::<Vec<_>>(), hard);
        assert_eq!(soft.kept.iter().map(|s| s.anchor).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(soft.kept[0].scores, vec![0.2, 0.9]);
        assert_eq!(soft.kept[1].scores, vec![0.6, 0.3]);
        // Top-k ignores thresholds and NMS: the suppressed anchor 0 is there, anchor 3 is not.
        assert_eq!(soft.top_k.iter().map(|s| s.anchor).collect::<Vec<_>>(), vec![1, 0, 2]);
        assert_eq!(soft.top_k[1].detection.class, 1);
        // YOLOv5: the vector is objectness × class scores.
        let v5 = [50.0, 50.0, 20.0, 20.0, 0.5, 0.2, 0.9];
        let soft = decode_soft(OutputLayout::YoloV5 { nc: 2 }, &v5, [1, 7], &options, 0);
        assert_eq!(soft.kept[0].scores, vec![0.1, 0.45]);
        assert!(soft.top_k.is_empty());
        let e2e = [1.0, 2.0, 3.0, 4.0, 0.8, 2.0];
        let soft = decode_soft(OutputLayout::EndToEnd, &e2e, [1, 6], &options, 1);
        assert!(soft.kept[0].scores.is_empty() && soft.top_k[0].detection.class == 2);
    }

    #[test]
    fn decodes_yolov5_and_end_to_end() {
        let v5 = [50.0, 50.0, 20.0, 20.0, 0.5, 0.2, 0.9];
        let dets = decode(OutputLayout::YoloV5 { nc: 2 }, &v5, [1, 7], &DecodeOptions::predict());
        assert_eq!(dets.len(), 1);
        assert_eq!(dets[0].class, 1);
        assert!((dets[0].score - 0.45).abs() < 1e-6);
        let e2e = [1.0, 2.0, 3.0, 4.0, 0.8, 2.0, 0.0, 0.0, 1.0, 1.0, 0.1, 0.0];
        let dets = decode(OutputLayout::EndToEnd, &e2e, [2, 6], &DecodeOptions::predict());
        assert_eq!(dets, vec![Detection { bbox: Xyxy::new(1.0, 2.0, 3.0, 4.0), score: 0.8, class: 2 }]);
    }
}
