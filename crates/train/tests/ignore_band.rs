//! The ignore band (`--ignore-band LOW,HIGH`): pseudo-labels split by the teacher's confidence, and
//! the class term skipping the background anchors that uncertain boxes (or, with a dense teacher,
//! uncertain teacher scores) cover — nothing else of the loss changes.
#![cfg(feature = "libtorch")]

use headroom_train::loss::{
    DenseTargets, Extras, Ignore, LossConfig, Target, detection_loss_extras, split_band,
};
use headroom_train::tch::{Device, Kind, Tensor};

fn object(cx: f32, cy: f32, class: usize) -> Target {
    Target { image: 0, class, cx, cy, w: 0.25, h: 0.25 }
}

#[test]
fn pseudo_labels_are_split_by_the_teachers_confidence() {
    let targets = vec![object(0.2, 0.2, 0), object(0.5, 0.5, 1), object(0.8, 0.8, 2), object(0.5, 0.2, 0)];
    let soft = vec![Some(vec![0.9, 0.1, 0.0]), Some(vec![0.1, 0.3, 0.2]), Some(vec![0.05, 0.0, 0.02]), None];
    let (kept, kept_soft, ignored) = split_band(targets.clone(), soft, (0.1, 0.5));
    // 0.9 stays, 0.3 is uncertain, 0.05 is dropped, a human label (no soft scores) always stays.
    assert_eq!(kept, vec![targets[0], targets[3]]);
    assert_eq!(kept_soft, vec![Some(vec![0.9, 0.1, 0.0]), None]);
    assert_eq!(ignored, vec![targets[1]]);
}

/// One level of stride 8 on a 64×64 input (8×8 anchors), 3 classes, every logit 0; one certain
/// object at the top left. Returns the loss components and the class logits' gradient `[1, 3, 64]`.
fn case(extras: impl Fn(&Tensor) -> Extras<'static>) -> ([f64; 3], Tensor) {
    let config = LossConfig::one_to_many(3, 16, vec![8]);
    let boxes = Tensor::zeros([1, 64, 64], (Kind::Float, Device::Cpu));
    let scores = Tensor::zeros([1, 3, 64], (Kind::Float, Device::Cpu)).set_requires_grad(true);
    let targets = [object(0.25, 0.25, 0)];
    let out =
        detection_loss_extras(&config, &boxes, &scores, &[(8, 8)], &targets, extras(&scores)).expect("loss");
    out.total.backward();
    (out.components, scores.grad())
}

/// Whether anchor `a` (row-major on the 8×8 grid) has a zero gradient for every class.
fn silent(grad: &Tensor, a: i64) -> bool {
    grad.select(2, a).abs().sum(Kind::Float).double_value(&[]) == 0.0
}

#[test]
fn uncertain_boxes_are_neither_objects_nor_background() {
    static UNCERTAIN: [Target; 1] = [Target { image: 0, class: 1, cx: 0.75, cy: 0.75, w: 0.25, h: 0.25 }]; // pixels 40..56
    let (plain, plain_grad) = case(|_| Extras::default());
    let (banded, grad) = case(|_| Extras {
        ignore: Some(Ignore { boxes: &UNCERTAIN, band: (0.1, 0.5) }),
        ..Extras::default()
    });
    // Anchor (row 6, col 6), centre (52, 52), lies inside the uncertain box: pushed down as
    // background without the band, left alone with it. Anchor (0, 7) is background either way.
    let (inside, outside) = (6 * 8 + 6, 7);
    assert!(!silent(&plain_grad, inside) && silent(&grad, inside));
    assert!(!silent(&grad, outside));
    assert_eq!(plain_grad.select(2, outside), grad.select(2, outside));
    // Fewer background terms: a smaller class term; box and DFL terms are the same.
    assert!(banded[1] < plain[1], "{banded:?} vs {plain:?}");
    assert_eq!([banded[0], banded[2]], [plain[0], plain[2]]);
}

#[test]
fn a_dense_teacher_marks_the_anchors_it_is_unsure_of() {
    // The teacher: certain background (logit −6, p 0.002) everywhere but anchor 63 (logit −0.5,
    // p 0.38, inside the band) — weight 0, so only the band uses it.
    let logits: Vec<f32> = (0..3 * 64).map(|i| if i % 64 == 63 { -0.5 } else { -6.0 }).collect();
    let teacher_scores: &'static Tensor = Box::leak(Box::new(Tensor::from_slice(&logits).view([1, 3, 64])));
    let teacher_boxes: &'static Tensor =
        Box::leak(Box::new(Tensor::zeros([1, 64, 64], (Kind::Float, Device::Cpu))));
    let dense = DenseTargets { weight: 0.0, boxes: teacher_boxes, scores: teacher_scores };
    let (_, grad) = case(|_| Extras {
        dense: Some(dense),
        ignore: Some(Ignore { boxes: &[], band: (0.1, 0.5) }),
        ..Extras::default()
    });
    assert!(silent(&grad, 63), "the teacher's uncertain anchor is skipped");
    assert!(!silent(&grad, 62), "a certain background anchor still counts");
}
