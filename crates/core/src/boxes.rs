//! Axis-aligned boxes, IoU and non-maximum suppression.
//!
//! Coordinates are `f32` pixels unless a function says otherwise. [`Xyxy`] is the working format;
//! the others convert through it.

use serde::{Deserialize, Serialize};

/// A box as corners: `(x1, y1)` top-left, `(x2, y2)` bottom-right.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Xyxy {
    /// Left edge.
    pub x1: f32,
    /// Top edge.
    pub y1: f32,
    /// Right edge.
    pub x2: f32,
    /// Bottom edge.
    pub y2: f32,
}

impl Xyxy {
    /// A box from its corners.
    pub const fn new(x1: f32, y1: f32, x2: f32, y2: f32) -> Self {
        Self { x1, y1, x2, y2 }
    }

    /// A box from centre, width and height (YOLO's `cx cy w h`).
    pub fn from_cxcywh(cx: f32, cy: f32, w: f32, h: f32) -> Self {
        Self::new(cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0)
    }

    /// A box from top-left corner, width and height (COCO's `x y w h`).
    pub fn from_xywh(x: f32, y: f32, w: f32, h: f32) -> Self {
        Self::new(x, y, x + w, y + h)
    }

    /// `[cx, cy, w, h]`.
    pub fn to_cxcywh(self) -> [f32; 4] {
        [(self.x1 + self.x2) / 2.0, (self.y1 + self.y2) / 2.0, self.width(), self.height()]
    }

    /// `[x, y, w, h]` with `(x, y)` the top-left corner.
    pub fn to_xywh(self) -> [f32; 4] {
        [self.x1, self.y1, self.width(), self.height()]
    }

    /// Width (negative if the corners are swapped).
    pub fn width(self) -> f32 {
        self.x2 - self.x1
    }

    /// Height (negative if the corners are swapped).
    pub fn height(self) -> f32 {
        self.y2 - self.y1
    }

    /// Area; zero for an empty or inverted box.
    pub fn area(self) -> f32 {
        self.width().max(0.0) * self.height().max(0.0)
    }

    /// The box scaled by `sx` horizontally and `sy` vertically (e.g. normalised ↔ pixels).
    pub fn scale(self, sx: f32, sy: f32) -> Self {
        Self::new(self.x1 * sx, self.y1 * sy, self.x2 * sx, self.y2 * sy)
    }

    /// The box clipped to `[0, width] × [0, height]`.
    pub fn clip(self, width: f32, height: f32) -> Self {
        Self::new(
            self.x1.clamp(0.0, width),
            self.y1.clamp(0.0, height),
            self.x2.clamp(0.0, width),
            self.y2.clamp(0.0, height),
        )
    }

    /// Area of the intersection with `other`.
    pub fn intersection(self, other: Self) -> f32 {
        let w = (self.x2.min(other.x2) - self.x1.max(other.x1)).max(0.0);
        let h = (self.y2.min(other.y2) - self.y1.max(other.y1)).max(0.0);
        w * h
    }

    /// Intersection over union, in `[0, 1]`; 0 when both boxes are empty.
    pub fn iou(self, other: Self) -> f32 {
        let inter = self.intersection(other);
        let union = self.area() + other.area() - inter;
        if union > 0.0 { inter / union } else { 0.0 }
    }
}

/// One detection: a box in pixels, a confidence and a class id.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    /// The box, in pixels of the image it refers to.
    pub bbox: Xyxy,
    /// Confidence in `[0, 1]`.
    pub score: f32,
    /// Class id.
    pub class: usize,
}

/// How [`nms`] treats classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum NmsMode {
    /// Boxes suppress only boxes of their own class (Ultralytics' default).
    #[default]
    ClassAware,
    /// Boxes suppress boxes of every class (`agnostic_nms=True`).
    ClassAgnostic,
}

/// Greedy non-maximum suppression, as torchvision's `nms` that Ultralytics calls: detections are
/// visited by decreasing score and a detection is dropped when its IoU with a kept one of the same
/// class (every class in [`NmsMode::ClassAgnostic`]) is **greater than** `iou_threshold`.
///
/// Returns at most `max_detections` detections, by decreasing score. Equal scores keep input order.
/// NaN scores sort last.
pub fn nms(
    mut detections: Vec<Detection>,
    iou_threshold: f32,
    mode: NmsMode,
    max_detections: usize,
) -> Vec<Detection> {
    detections.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Detection> = Vec::with_capacity(max_detections.min(detections.len()));
    for candidate in detections {
        if kept.len() >= max_detections {
            break;
        }
        let suppressed = kept.iter().any(|k| {
            (mode == NmsMode::ClassAgnostic || k.class == candidate.class)
                && k.bbox.iou(candidate.bbox) > iou_threshold
        });
        if !suppressed {
            kept.push(candidate);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn conversions_round_trip() {
        let b = Xyxy::new(10.0, 20.0, 50.0, 80.0);
        let [cx, cy, w, h] = b.to_cxcywh();
        assert_eq!([cx, cy, w, h], [30.0, 50.0, 40.0, 60.0]);
        assert_eq!(Xyxy::from_cxcywh(cx, cy, w, h), b);
        let [x, y, w, h] = b.to_xywh();
        assert_eq!(Xyxy::from_xywh(x, y, w, h), b);
    }

    #[test]
    fn iou_known_values() {
        let a = Xyxy::new(0.0, 0.0, 10.0, 10.0);
        assert_eq!(a.iou(a), 1.0);
        assert_eq!(a.iou(Xyxy::new(20.0, 20.0, 30.0, 30.0)), 0.0);
        // Half overlap: intersection 50, union 150.
        assert!((a.iou(Xyxy::new(5.0, 0.0, 15.0, 10.0)) - 1.0 / 3.0).abs() < 1e-6);
        assert_eq!(Xyxy::default().iou(Xyxy::default()), 0.0);
    }

    fn det(x: f32, score: f32, class: usize) -> Detection {
        Detection { bbox: Xyxy::new(x, 0.0, x + 10.0, 10.0), score, class }
    }

    #[test]
    fn nms_class_aware_keeps_other_classes() {
        let dets = vec![det(0.0, 0.9, 0), det(1.0, 0.8, 0), det(1.0, 0.7, 1), det(40.0, 0.6, 0)];
        let kept = nms(dets.clone(), 0.5, NmsMode::ClassAware, 300);
        assert_eq!(kept, vec![dets[0], dets[2], dets[3]]);
        let kept = nms(dets.clone(), 0.5, NmsMode::ClassAgnostic, 300);
        assert_eq!(kept, vec![dets[0], dets[3]]);
        let kept = nms(dets.clone(), 0.5, NmsMode::ClassAware, 2);
        assert_eq!(kept, vec![dets[0], dets[2]]);
    }

    #[test]
    fn nms_threshold_is_strict() {
        // IoU of these two is exactly 1/3: not suppressed at threshold 1/3.
        let a = Detection { bbox: Xyxy::new(0.0, 0.0, 10.0, 10.0), score: 0.9, class: 0 };
        let b = Detection { bbox: Xyxy::new(5.0, 0.0, 15.0, 10.0), score: 0.8, class: 0 };
        let iou = a.bbox.iou(b.bbox);
        assert_eq!(nms(vec![a, b], iou, NmsMode::ClassAware, 10).len(), 2);
        assert_eq!(nms(vec![a, b], iou - 1e-4, NmsMode::ClassAware, 10).len(), 1);
    }

    fn arb_detection() -> impl Strategy<Value = Detection> {
        (0f32..100.0, 0f32..100.0, 1f32..50.0, 1f32..50.0, 0f32..1.0, 0usize..3).prop_map(
            |(x, y, w, h, score, class)| Detection { bbox: Xyxy::from_xywh(x, y, w, h), score, class },
        )
    }

    proptest! {
        #[test]
        fn nms_output_is_subset_sorted_and_separated(
            dets in proptest::collection::vec(arb_detection(), 0..60),
            thr in 0.1f32..0.9,
            agnostic in any::<bool>(),
        ) {
            let mode = if agnostic { NmsMode::ClassAgnostic } else { NmsMode::ClassAware };
            let kept = nms(dets.clone(), thr, mode, 300);
            for k in &kept {
                prop_assert!(dets.contains(k));
            }
            for pair in kept.windows(2) {
                prop_assert!(pair[0].score >= pair[1].score);
            }
            for (i, a) in kept.iter().enumerate() {
                for b in &kept[i + 1..] {
                    if agnostic || a.class == b.class {
                        prop_assert!(a.bbox.iou(b.bbox) <= thr);
                    }
                }
            }
            // Every dropped detection overlaps a kept one by more than the threshold.
            for d in &dets {
                if !kept.contains(d) {
                    prop_assert!(kept.iter().any(|k| (agnostic || k.class == d.class)
                        && k.bbox.iou(d.bbox) > thr && k.score >= d.score));
                }
            }
        }

        #[test]
        fn iou_is_symmetric_and_bounded(a in arb_detection(), b in arb_detection()) {
            let (x, y) = (a.bbox.iou(b.bbox), b.bbox.iou(a.bbox));
            prop_assert!((x - y).abs() < 1e-6);
            prop_assert!((0.0..=1.0).contains(&x));
        }
    }
}
