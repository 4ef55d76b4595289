//! A paired bootstrap over images of the mAP50-95 difference between two models evaluated on the
//! same images: is a candidate's gain over a baseline above the noise of the holdout?
//!
//! Each resample draws as many images as there are, with replacement, and evaluates both models on
//! the same draw. A resample's mAP50-95 is exactly what [`DetectionStats::finish`] gives for
//! [`DetectionStats::subset`] of the draw (classes without ground truth in the draw leave the
//! mean, a draw without any ground truth scores 0), computed without re-sorting the predictions.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::ap::{ApWork, class_ap, mean_or_zero};
use super::{DetectionStats, N_IOU, score_descending};
use crate::{Error, Result};

/// How [`paired_map_difference`] resamples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapOptions {
    /// Resamples drawn (default 1000).
    pub resamples: usize,
    /// Coverage of the two-sided percentile interval, in (0, 1) (default 0.95).
    pub confidence: f64,
    /// Seed of the draws (ChaCha8, one stream per resample); the same seed gives the same
    /// interval.
    pub seed: u64,
}

impl Default for BootstrapOptions {
    fn default() -> Self {
        Self { resamples: 1000, confidence: 0.95, seed: 0 }
    }
}

/// The mAP50-95 difference `candidate − baseline` and its bootstrap interval.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct PairedDifference {
    /// Candidate mAP50-95 minus baseline mAP50-95 on all images.
    pub difference: f64,
    /// Lower end of the percentile interval of the resampled differences.
    pub low: f64,
    /// Upper end of the percentile interval of the resampled differences.
    pub high: f64,
    /// Resamples drawn.
    pub resamples: usize,
    /// Coverage of the interval.
    pub confidence: f64,
    /// Seed of the draws.
    pub seed: u64,
    /// Images of each model's evaluation (each resample draws this many).
    pub images: usize,
}

/// Bootstraps `candidate − baseline` mAP50-95 over images: both stats must come from the same
/// images, added in the same order; every resample applies the same image draw to both (paired).
/// `nc` is the number of classes, as for [`DetectionStats::finish`].
///
/// The interval is the `(1 − confidence) / 2` and `(1 + confidence) / 2` percentiles of the
/// resampled differences (numpy's default linear interpolation).
///
/// Errors when the two have different image counts, when there are no images, when `resamples`
/// is 0, when `confidence` is not in (0, 1), and where [`DetectionStats::finish`] errors.
pub fn paired_map_difference(
    candidate: &DetectionStats,
    baseline: &DetectionStats,
    nc: usize,
    options: &BootstrapOptions,
) -> Result<PairedDifference> {
    let images = candidate.images();
    if images != baseline.images() {
        return Err(Error::InvalidArgument {
            name: "baseline",
            message: format!(
                "the candidate was evaluated on {images} images but the baseline on {}; a paired \
                 bootstrap needs the same images",
                baseline.images()
            ),
        });
    }
    if images == 0 {
        return Err(Error::InvalidArgument {
            name: "candidate",
            message: "no images to bootstrap over".to_string(),
        });
    }
    if options.resamples < 1 {
        return Err(Error::InvalidArgument {
            name: "resamples",
            message: "at least 1 resample is needed".to_string(),
        });
    }
    if !(options.confidence > 0.0 && options.confidence < 1.0) {
        return Err(Error::InvalidArgument {
            name: "confidence",
            message: format!("{} is not in (0, 1)", options.confidence),
        });
    }
    // Also checks every class against nc, so the resamples below cannot fail.
    let difference = candidate.finish(nc)?.map50_95 - baseline.finish(nc)?.map50_95;

    let models = [Ranked::new(candidate, nc), Ranked::new(baseline, nc)];
    // Resamples are independent (each draws from its own stream), so they split over threads and
    // the result does not depend on how many there are.
    let mut differences = vec![0.0; options.resamples];
    let threads = std::thread::available_parallelism().map_or(1, usize::from).clamp(1, 16);
    let chunk = options.resamples.div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        for (c, out) in differences.chunks_mut(chunk).enumerate() {
            let models = &models;
            scope.spawn(move || {
                let (mut scratch, mut draw) = (Scratch::new(nc), Draw::new(images));
                for (k, difference) in out.iter_mut().enumerate() {
                    draw.resample(options.seed, (c * chunk + k) as u64);
                    *difference =
                        models[0].map50_95(&draw, &mut scratch) - models[1].map50_95(&draw, &mut scratch);
                }
            });
        }
    });
    differences.sort_by(f64::total_cmp);
    let tail = (1.0 - options.confidence) / 2.0;
    Ok(PairedDifference {
        difference,
        low: percentile(&differences, tail),
        high: percentile(&differences, 1.0 - tail),
        resamples: options.resamples,
        confidence: options.confidence,
        seed: options.seed,
        images,
    })
}

/// `numpy.percentile(a, 100 * q)` (method "linear") of sorted, non-empty `a`.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let below = (h.floor() as usize).min(sorted.len() - 1);
    let above = (below + 1).min(sorted.len() - 1);
    let (a, b, t) = (sorted[below], sorted[above], h - below as f64);
    // numpy's _lerp: from the nearer end.
    let diff = b - a;
    if t >= 0.5 { b - diff * (1.0 - t) } else { a + diff * t }
}

/// One resample: how many times each image was drawn, and at which positions of the draw.
struct Draw {
    indices: Vec<usize>,
    /// Positions of image `i` are `positions[starts[i]..starts[i + 1]]`, ascending.
    starts: Vec<usize>,
    positions: Vec<u32>,
}

impl Draw {
    fn new(images: usize) -> Self {
        Self { indices: vec![0; images], starts: vec![0; images + 1], positions: vec![0; images] }
    }

    /// Draws resample number `resample` of `seed`: ChaCha8 seeded with `seed`, stream `resample`.
    fn resample(&mut self, seed: u64, resample: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(resample);
        let n = self.indices.len();
        for index in &mut self.indices {
            *index = rng.random_range(0..n);
        }
        self.starts.fill(0);
        for &i in &self.indices {
            self.starts[i + 1] += 1;
        }
        for i in 0..n {
            self.starts[i + 1] += self.starts[i];
        }
        let mut next = self.starts.clone();
        for (position, &i) in self.indices.iter().enumerate() {
            self.positions[next[i]] = position as u32;
            next[i] += 1;
        }
    }

    fn count(&self, image: usize) -> usize {
        self.starts[image + 1] - self.starts[image]
    }

    fn positions(&self, image: usize) -> &[u32] {
        &self.positions[self.starts[image]..self.starts[image + 1]]
    }
}

/// A model's stats prepared for resampling: predictions sorted once.
struct Ranked<'a> {
    stats: &'a DetectionStats,
    /// Per class, its predictions by decreasing confidence, equal confidences by index
    /// (`ap_per_class`'s stable order).
    by_class: Vec<Vec<u32>>,
    /// Per class, the start of each run of equal confidences in `by_class`, then its length.
    runs: Vec<Vec<usize>>,
    /// Image of each prediction.
    image_of: Vec<u32>,
    /// Ground-truth boxes per class of image `i`: `labels[label_starts[i]..label_starts[i + 1]]`.
    label_starts: Vec<usize>,
    labels: Vec<(usize, usize)>,
}

impl<'a> Ranked<'a> {
    /// `stats`' classes must be below `nc` (as `finish` checks).
    fn new(stats: &'a DetectionStats, nc: usize) -> Self {
        let n = stats.tp.len().min(stats.conf.len()).min(stats.pred_cls.len());
        let mut order: Vec<u32> = (0..n as u32).collect();
        order.sort_by(|&a, &b| score_descending(stats.conf[a as usize], stats.conf[b as usize]));
        let mut by_class = vec![Vec::new(); nc];
        for &p in &order {
            if let Some(class) = by_class.get_mut(stats.pred_cls[p as usize]) {
                class.push(p);
            }
        }
        let runs = by_class
            .iter()
            .map(|ranked| {
                let mut starts = vec![0];
                for k in 1..ranked.len() {
                    let (a, b) = (stats.conf[ranked[k - 1] as usize], stats.conf[ranked[k] as usize]);
                    if score_descending(a, b) != std::cmp::Ordering::Equal {
                        starts.push(k);
                    }
                }
                starts.push(ranked.len());
                starts.dedup();
                starts
            })
            .collect();
        let mut image_of = vec![0u32; n];
        let (mut label_starts, mut labels) = (vec![0], Vec::new());
        for image in 0..stats.images() {
            let (start, end) = stats.image_range(image);
            image_of[start.predictions.min(n)..end.predictions.min(n)].fill(image as u32);
            let mut classes = stats.target_cls[start.targets..end.targets].to_vec();
            classes.sort_unstable();
            for chunk in classes.chunk_by(|a, b| a == b) {
                labels.push((chunk[0], chunk.len()));
            }
            label_starts.push(labels.len());
        }
        Self { stats, by_class, runs, image_of, label_starts, labels }
    }

    /// mAP50-95 of `finish(subset(draw))`.
    fn map50_95(&self, draw: &Draw, scratch: &mut Scratch) -> f64 {
        let Scratch { labels, ranked, tied, aps, work } = scratch;
        labels.fill(0);
        for image in 0..self.label_starts.len() - 1 {
            let count = draw.count(image);
            if count > 0 {
                for &(class, boxes) in &self.labels[self.label_starts[image]..self.label_starts[image + 1]] {
                    labels[class] += boxes * count;
                }
            }
        }
        aps.clear();
        for (class, predictions) in self.by_class.iter().enumerate() {
            if labels[class] == 0 {
                continue;
            }
            ranked.clear();
            for run in self.runs[class].windows(2) {
                let run = &predictions[run[0]..run[1]];
                if let [p] = run {
                    // One confidence: every copy of the prediction ranks here, together.
                    let count = draw.count(self.image_of[*p as usize] as usize);
                    if count > 0 {
                        ranked.push((*p, count as u64));
                    }
                    continue;
                }
                // Equal confidences: the subset orders them by the draw position of their image's
                // copy, then by index within the image.
                tied.clear();
                for &p in run {
                    tied.extend(draw.positions(self.image_of[p as usize] as usize).iter().map(|&at| (at, p)));
                }
                tied.sort_unstable();
                ranked.extend(tied.iter().map(|&(_, p)| (p, 1)));
            }
            let rows = ranked.iter().map(|&(p, count)| (&self.stats.tp[p as usize], count));
            aps.extend(class_ap(rows, labels[class], work));
        }
        mean_or_zero(aps)
    }
}

/// Buffers reused across resamples.
struct Scratch {
    /// Ground-truth boxes per class in the draw.
    labels: Vec<usize>,
    /// One class's predictions in the draw by decreasing confidence, each with its repeats.
    ranked: Vec<(u32, u64)>,
    /// A run of equal confidences: (draw position, prediction).
    tied: Vec<(u32, u32)>,
    /// AP per class with ground truth and threshold, class-major.
    aps: Vec<f64>,
    work: ApWork,
}

impl Scratch {
    fn new(nc: usize) -> Self {
        Self {
            labels: vec![0; nc],
            ranked: Vec::new(),
            tied: Vec::new(),
            aps: Vec::with_capacity(nc * N_IOU),
            work: ApWork::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::boxes::{Detection, Xyxy};

    /// Ground truth and predictions of one image.
    type Image = (Vec<(usize, Xyxy)>, Vec<Detection>);

    /// `n` images of 0 to 5 boxes of 3 classes; each box found by a jittered prediction with
    /// probability `found`, plus 0 to 2 false positives; scores rounded to 0.05 when `ties`.
    fn scene(seed: u64, n: usize, found: f64, ties: bool) -> Vec<Image> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let score = |rng: &mut ChaCha8Rng| {
            let s: f32 = rng.random_range(0.01..1.0);
            if ties { (s * 20.0).round() / 20.0 } else { s }
        };
        (0..n)
            .map(|_| {
                let mut gt = Vec::new();
                let mut preds = Vec::new();
                for _ in 0..rng.random_range(0..6usize) {
                    let (x, y): (f32, f32) = (rng.random_range(0.0..400.0), rng.random_range(0.0..400.0));
                    let (w, h): (f32, f32) = (rng.random_range(10.0..80.0), rng.random_range(10.0..80.0));
                    let class = rng.random_range(0..3usize);
                    gt.push((class, Xyxy::new(x, y, x + w, y + h)));
                    if rng.random_bool(found) {
                        let (dx, dy): (f32, f32) = (rng.random_range(-4.0..4.0), rng.random_range(-4.0..4.0));
                        let bbox = Xyxy::new(x + dx, y + dy, x + w + dx, y + h + dy);
                        preds.push(Detection { bbox, score: score(&mut rng), class });
                    }
                }
                for _ in 0..rng.random_range(0..3usize) {
                    let (x, y): (f32, f32) = (rng.random_range(0.0..400.0), rng.random_range(0.0..400.0));
                    let bbox = Xyxy::new(x, y, x + 30.0, y + 30.0);
                    preds.push(Detection {
                        bbox,
                        score: score(&mut rng),
                        class: rng.random_range(0..3usize),
                    });
                }
                (gt, preds)
            })
            .collect()
    }

    fn stats(images: &[Image]) -> DetectionStats {
        let mut stats = DetectionStats::new();
        for (gt, preds) in images {
            stats.add_image(preds, gt);
        }
        stats
    }

    /// Every box found, at decreasing scores.
    fn perfect(images: &[Image]) -> DetectionStats {
        let mut stats = DetectionStats::new();
        for (i, (gt, _)) in images.iter().enumerate() {
            let preds: Vec<Detection> = gt
                .iter()
                .enumerate()
                .map(|(k, &(class, bbox))| Detection { bbox, score: 0.99 - 0.001 * (i + k) as f32, class })
                .collect();
            stats.add_image(&preds, gt);
        }
        stats
    }

    /// Every other box of each image found.
    fn half(images: &[Image]) -> DetectionStats {
        let mut stats = DetectionStats::new();
        for (i, (gt, _)) in images.iter().enumerate() {
            let preds: Vec<Detection> = gt
                .iter()
                .enumerate()
                .filter(|(k, _)| (k + i) % 2 == 0)
                .map(|(k, &(class, bbox))| Detection { bbox, score: 0.99 - 0.001 * (i + k) as f32, class })
                .collect();
            stats.add_image(&preds, gt);
        }
        stats
    }

    fn options(resamples: usize, seed: u64) -> BootstrapOptions {
        BootstrapOptions { resamples, seed, ..BootstrapOptions::default() }
    }

    #[test]
    fn bootstrap_resampled_map_equals_finish_of_subset() {
        for (seed, ties) in [(1, false), (2, true), (3, true)] {
            let images = scene(seed, 40, 0.7, ties);
            let stats = stats(&images);
            let ranked = Ranked::new(&stats, 3);
            let (mut scratch, mut draw) = (Scratch::new(3), Draw::new(images.len()));
            for resample in 0..30 {
                draw.resample(seed, resample);
                let expected = stats.subset(&draw.indices).finish(3).expect("classes < 3").map50_95;
                // Bit-equal: same order, same arithmetic.
                assert_eq!(ranked.map50_95(&draw, &mut scratch), expected, "seed {seed}");
            }
        }
    }

    #[test]
    fn bootstrap_of_identical_stats_is_exactly_zero() {
        let stats = stats(&scene(4, 30, 0.6, true));
        let result = paired_map_difference(&stats, &stats.clone(), 3, &options(200, 7)).expect("valid");
        assert_eq!((result.difference, result.low, result.high), (0.0, 0.0, 0.0));
        assert_eq!((result.resamples, result.images, result.seed), (200, 30, 7));
        assert_eq!(result.confidence, 0.95);
    }

    #[test]
    fn bootstrap_finding_every_box_beats_missing_half() {
        let images = scene(5, 50, 1.0, false);
        let (all, half) = (perfect(&images), half(&images));
        let gain = paired_map_difference(&all, &half, 3, &options(300, 1)).expect("valid");
        assert!(gain.difference > 0.0 && gain.low > 0.0 && gain.low <= gain.high, "{gain:?}");
        let loss = paired_map_difference(&half, &all, 3, &options(300, 1)).expect("valid");
        assert!(loss.difference < 0.0 && loss.high < 0.0, "{loss:?}");
        // Paired: the same draws, so the intervals mirror each other.
        assert_eq!(loss.difference, -gain.difference);
        assert!(
            (loss.low + gain.high).abs() < 1e-12 && (loss.high + gain.low).abs() < 1e-12,
            "{loss:?} {gain:?}"
        );
    }

    #[test]
    fn bootstrap_interval_depends_on_the_seed_only() {
        let (a, b) = (stats(&scene(6, 40, 0.8, false)), stats(&scene(6, 40, 0.5, false)));
        let first = paired_map_difference(&a, &b, 3, &options(200, 11)).expect("valid");
        let again = paired_map_difference(&a, &b, 3, &options(200, 11)).expect("valid");
        assert_eq!((first.low, first.high), (again.low, again.high));
        let other = paired_map_difference(&a, &b, 3, &options(200, 12)).expect("valid");
        assert_ne!((first.low, first.high), (other.low, other.high));
        assert_eq!(first.difference, other.difference);
        assert!(first.low <= first.difference && first.difference <= first.high, "{first:?}");
    }

    #[test]
    fn bootstrap_rejects_bad_arguments() {
        let (a, b) = (stats(&scene(7, 5, 0.5, false)), stats(&scene(7, 4, 0.5, false)));
        let e =
            paired_map_difference(&a, &b, 3, &BootstrapOptions::default()).expect_err("5 vs 4").to_string();
        assert!(e.contains("5 images") && e.contains("on 4"), "{e}");
        let empty = DetectionStats::default();
        let e = paired_map_difference(&empty, &empty, 3, &BootstrapOptions::default()).expect_err("empty");
        assert!(e.to_string().contains("no images"), "{e}");
        let e = paired_map_difference(&a, &a, 3, &options(0, 0)).expect_err("0 resamples");
        assert!(e.to_string().contains("resamples"), "{e}");
        for confidence in [0.0, 1.0, -0.5, f64::NAN] {
            let bad = BootstrapOptions { confidence, ..BootstrapOptions::default() };
            let e = paired_map_difference(&a, &a, 3, &bad).expect_err("confidence outside (0, 1)");
            assert!(e.to_string().contains("confidence"), "{e}");
        }
        let e = paired_map_difference(&a, &a, 2, &BootstrapOptions::default()).expect_err("classes up to 2");
        assert!(e.to_string().contains("2 classes"), "{e}");
    }

    #[test]
    fn bootstrap_handles_images_without_ground_truth() {
        // Only one image has ground truth: many draws have none, whose mAP is 0 for both.
        let b = Xyxy::new(0.0, 0.0, 10.0, 10.0);
        let mut a = DetectionStats::new();
        let mut c = DetectionStats::new();
        a.add_image(&[Detection { bbox: b, score: 0.9, class: 0 }], &[(0, b)]);
        c.add_image(&[], &[(0, b)]);
        for _ in 0..3 {
            a.add_image(&[Detection { bbox: b, score: 0.5, class: 1 }], &[]);
            c.add_image(&[], &[]);
        }
        let result = paired_map_difference(&a, &c, 2, &options(100, 3)).expect("valid");
        assert!(result.difference > 0.9 && result.low == 0.0 && result.high > 0.9, "{result:?}");
    }

    #[test]
    fn bootstrap_percentile_is_numpys_linear() {
        let a = [1.0, 2.0, 4.0, 8.0];
        assert_eq!(percentile(&a, 0.0), 1.0);
        assert_eq!(percentile(&a, 1.0), 8.0);
        assert_eq!(percentile(&a, 0.5), 3.0);
        assert_eq!(percentile(&a, 0.025), 1.075);
        assert_eq!(percentile(&[5.0], 0.975), 5.0);
    }

    #[test]
    fn bootstrap_options_default_and_serde() {
        let options = BootstrapOptions::default();
        assert_eq!((options.resamples, options.confidence, options.seed), (1000, 0.95, 0));
        let result = PairedDifference {
            difference: 0.1,
            low: 0.05,
            high: 0.15,
            resamples: 1000,
            confidence: 0.95,
            seed: 0,
            images: 10,
        };
        let json = serde_json::to_string(&result).expect("plain data");
        let back: PairedDifference = serde_json::from_str(&json).expect("round trip");
        assert_eq!((back.low, back.high, back.images), (0.05, 0.15, 10));
    }
}
