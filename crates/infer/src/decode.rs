//! Decoding raw detector outputs into boxes, then NMS — pure code, no ONNX Runtime.
//!
//! Layouts (DESIGN.md):
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

/// Decodes one image's output (`data` is that image's slice, `shape` the per-image `[d1, d2]`) into
/// detections in input (letterboxed) pixels, after NMS.
pub fn decode(
    layout: OutputLayout,
    data: &[f32],
    shape: [usize; 2],
    options: &DecodeOptions,
) -> Vec<Detection> {
    let [d1, d2] = shape;
    let mut candidates = Vec::new();
    match layout {
        OutputLayout::Anchors { nc } => {
            let at = |row: usize, col: usize| data[row * d2 + col];
            for a in 0..d2 {
                let bbox = || Xyxy::from_cxcywh(at(0, a), at(1, a), at(2, a), at(3, a));
                push_scores(&mut candidates, (0..nc).map(|c| at(4 + c, a)), bbox, options, 1.0);
            }
            let _ = d1;
        }
        OutputLayout::YoloV5 { nc } => {
            for row in data.chunks_exact(d2).take(d1) {
                let objectness = row[4];
                if objectness <= options.confidence {
                    continue;
                }
                let bbox = || Xyxy::from_cxcywh(row[0], row[1], row[2], row[3]);
                push_scores(&mut candidates, row[5..5 + nc].iter().copied(), bbox, options, objectness);
            }
        }
        OutputLayout::EndToEnd => {
            for row in data.chunks_exact(6).take(d1) {
                if row[4] > options.confidence && row[5] >= 0.0 {
                    let bbox = Xyxy::new(row[0], row[1], row[2], row[3]);
                    candidates.push(Detection { bbox, score: row[4], class: row[5] as usize });
                }
            }
            candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
            candidates.truncate(options.max_detections);
            return candidates;
        }
    }
    if candidates.len() > options.max_nms {
        candidates.sort_by(|a, b| b.score.total_cmp(&a.score));
        candidates.truncate(options.max_nms);
    }
    nms(candidates, options.iou, options.nms, options.max_detections)
}

fn push_scores(
    out: &mut Vec<Detection>,
    scores: impl Iterator<Item = f32>,
    bbox: impl Fn() -> Xyxy,
    options: &DecodeOptions,
    factor: f32,
) {
    if options.multi_label {
        for (class, s) in scores.enumerate() {
            let score = s * factor;
            if score > options.confidence {
                out.push(Detection { bbox: bbox(), score, class });
            }
        }
    } else {
        let best = scores.enumerate().max_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((class, s)) = best {
            let score = s * factor;
            if score > options.confidence {
                out.push(Detection { bbox: bbox(), score, class });
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

    #[test]
    fn decodes_anchor_layout_with_nms() {
        // 2 classes, 3 anchors: two overlapping class-0 boxes and one class-1 box.
        let (nc, n) = (2, 3);
        let cols = [
            [50.0, 50.0, 20.0, 20.0, 0.9, 0.1],
            [51.0, 50.0, 20.0, 20.0, 0.8, 0.1],
            [10.0, 10.0, 4.0, 4.0, 0.0, 0.6],
        ];
        let mut data = vec![0f32; (4 + nc) * n];
        for (a, col) in cols.iter().enumerate() {
            for (r, v) in col.iter().enumerate() {
                data[r * n + a] = *v;
            }
        }
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
