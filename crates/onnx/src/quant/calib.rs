//! Calibration statistics: a histogram of a tensor's absolute values over the calibration images,
//! and the range (`amax`) each method picks from it. Every quantized tensor is symmetric int8 (zero
//! point 0, as TensorRT requires), so a method only has to choose `amax`; the scale is `amax / 127`.
//!
//! - **MinMax**: the largest absolute value seen.
//! - **Percentile**: the value below which `p` % of the absolute values lie (99.99 by default), as
//!   ONNX Runtime's and NVIDIA pytorch-quantization's percentile calibrators pick it (the lower edge
//!   of the bin where the cumulative share reaches `p`).
//! - **Entropy**: TensorRT's `EntropyCalibration2`, as NVIDIA's pytorch-quantization writes it
//!   down (`_compute_amax_entropy`): for each candidate threshold `i` from 128 to 2048 bins, the
//!   clipped reference distribution (outliers folded into the last bin) is compared with its
//!   128-level quantized version by KL divergence; the threshold with the smallest divergence
//!   (the last one on ties) wins.
//!
//! The histogram has [`BINS`] bins over `[0, range]`. Its range starts at the first batch's
//! largest value and doubles when a larger value arrives, merging bins pairwise, so one pass over
//! the images is enough (a value is never counted twice and the bins stay aligned).

use serde::{Deserialize, Serialize};

/// Bins of a calibration histogram (TensorRT and pytorch-quantization use 2048).
pub const BINS: usize = 2048;

/// Quantized levels on one side of zero for int8 (the entropy search's target resolution).
const LEVELS: usize = 128;

/// How a tensor's range is chosen from its calibration statistics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// The largest absolute value seen.
    MinMax,
    /// This percentile of the absolute values (e.g. 99.99).
    Percentile(f64),
    /// KL-divergence search, as TensorRT's EntropyCalibration2.
    Entropy,
}

impl Method {
    /// The name used on the command line and in reports.
    pub fn name(self) -> String {
        match self {
            Method::MinMax => "minmax".into(),
            Method::Percentile(p) => format!("percentile-{p}"),
            Method::Entropy => "entropy".into(),
        }
    }
}

/// Absolute values of one tensor over the calibration images.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Counts per bin; bin `i` covers `[i, i + 1) * range / BINS` (the last one includes `range`).
    pub counts: Vec<u64>,
    /// Upper end of the last bin (0 until a non-zero value arrives).
    pub range: f32,
    /// The largest absolute value seen.
    pub max: f32,
    /// Values seen (non-finite ones are not counted: see [`Histogram::non_finite`]).
    pub total: u64,
    /// NaN or infinite values seen.
    pub non_finite: u64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram { counts: vec![0; BINS], range: 0.0, max: 0.0, total: 0, non_finite: 0 }
    }
}

impl Histogram {
    /// Adds `values` (their absolute values).
    pub fn add(&mut self, values: &[f32]) {
        let batch_max = values.iter().filter(|v| v.is_finite()).fold(0f32, |m, v| m.max(v.abs()));
        self.max = self.max.max(batch_max);
        if self.range == 0.0 && batch_max > 0.0 {
            // Zeros seen before the first non-zero value are all in bin 0 already.
            self.range = batch_max;
        }
        while self.range > 0.0 && batch_max > self.range {
            self.double_range();
        }
        let per_bin = if self.range > 0.0 { BINS as f32 / self.range } else { 0.0 };
        for v in values {
            if !v.is_finite() {
                self.non_finite += 1;
                continue;
            }
            let bin = ((v.abs() * per_bin) as usize).min(BINS - 1);
            self.counts[bin] += 1;
            self.total += 1;
        }
    }

    /// Doubles the range: bins `2i` and `2i + 1` become bin `i`.
    fn double_range(&mut self) {
        for i in 0..BINS / 2 {
            self.counts[i] = self.counts[2 * i] + self.counts[2 * i + 1];
        }
        self.counts[BINS / 2..].fill(0);
        self.range *= 2.0;
    }

    /// Merges another histogram of the same tensor (from another worker).
    pub fn merge(&mut self, other: &Histogram) {
        if other.range > 0.0 {
            let mut other = other.clone();
            if self.range == 0.0 {
                let zeros = self.counts[0];
                *self = Histogram { non_finite: self.non_finite + other.non_finite, ..other };
                self.counts[0] += zeros;
                self.total += zeros;
                return;
            }
            // Bring both to the same range: ranges differ by a power of two only when both began
            // from the same first value, so rebin exactly in that case and approximately otherwise.
            while other.range < self.range * 0.999 {
                other.double_range();
            }
            while self.range < other.range * 0.999 {
                self.double_range();
            }
            for (a, b) in self.counts.iter_mut().zip(&other.counts) {
                *a += b;
            }
        } else {
            self.counts[0] += other.counts[0];
        }
        self.max = self.max.max(other.max);
        self.total += other.total;
        self.non_finite += other.non_finite;
    }

    fn edge(&self, bin: usize) -> f32 {
        self.range * bin as f32 / BINS as f32
    }

    /// The range `method` picks (0 for a tensor that was always zero).
    pub fn amax(&self, method: Method) -> f32 {
        if self.range == 0.0 || self.total == 0 {
            return 0.0;
        }
        match method {
            Method::MinMax => self.max,
            Method::Percentile(p) => self.percentile(p),
            Method::Entropy => self.entropy(),
        }
    }

    fn percentile(&self, p: f64) -> f32 {
        let target = (p / 100.0).clamp(0.0, 1.0);
        let mut cumulative = 0u64;
        for (bin, count) in self.counts.iter().enumerate() {
            cumulative += count;
            if cumulative as f64 / self.total as f64 >= target {
                return self.edge(bin).max(self.edge(1)).min(self.max);
            }
        }
        self.max
    }

    fn entropy(&self) -> f32 {
        let mut bins: Vec<f64> = self.counts.iter().map(|&c| c as f64).collect();
        // pytorch-quantization sets the zero bin to its neighbour: a mass of exact zeros (ReLU,
        // padding) would otherwise dominate the divergence.
        bins[0] = bins[1];
        let mut best = (f64::INFINITY, LEVELS);
        let mut reference = vec![0f64; BINS];
        let mut candidate = vec![0f64; BINS];
        for i in LEVELS..=BINS {
            let outliers: f64 = bins[i..].iter().sum();
            reference[..i].copy_from_slice(&bins[..i]);
            reference[i - 1] += outliers;
            // Merge the i bins into LEVELS levels, then spread each level's mass evenly over the
            // bins of the level that were not empty.
            for level in 0..LEVELS {
                let (start, end) = level_bins(i, level);
                let mass: f64 = bins[start..end].iter().sum();
                let nonzero = bins[start..end].iter().filter(|&&b| b != 0.0).count();
                for j in start..end {
                    candidate[j] = if bins[j] != 0.0 { mass / nonzero as f64 } else { 0.0 };
                }
            }
            let divergence = kl(&reference[..i], &candidate[..i]);
            if divergence <= best.0 {
                best = (divergence, i);
            }
        }
        self.edge(best.1).min(self.max.max(self.edge(LEVELS)))
    }
}

/// The bins `[start, end)` of `0..i` that fall in quantized level `level` of [`LEVELS`], as
/// `np.digitize(range(i), np.linspace(0, i, LEVELS + 1)) - 1` assigns them: bin `j` goes to level
/// `floor(j * LEVELS / i)`.
fn level_bins(i: usize, level: usize) -> (usize, usize) {
    let start = (level * i).div_ceil(LEVELS);
    let end = ((level + 1) * i).div_ceil(LEVELS).min(i);
    (start, end.max(start))
}

/// KL divergence of `q` from `p` after normalising both (scipy's `entropy(p, q)`): terms with
/// `p = 0` count 0, `q = 0` under `p > 0` make it infinite.
fn kl(p: &[f64], q: &[f64]) -> f64 {
    let (sp, sq): (f64, f64) = (p.iter().sum(), q.iter().sum());
    if sp == 0.0 || sq == 0.0 {
        return f64::INFINITY;
    }
    let mut total = 0.0;
    for (&a, &b) in p.iter().zip(q) {
        if a == 0.0 {
            continue;
        }
        if b == 0.0 {
            return f64::INFINITY;
        }
        let (a, b) = (a / sp, b / sq);
        total += a * (a / b).ln();
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_range_doubles_without_losing_counts() {
        let mut h = Histogram::default();
        h.add(&[0.0, 0.5, 1.0]);
        assert_eq!(h.range, 1.0);
        h.add(&[3.0, -3.5, f32::NAN]);
        assert_eq!(h.range, 4.0);
        assert_eq!(h.total, 5);
        assert_eq!(h.non_finite, 1);
        assert_eq!(h.counts.iter().sum::<u64>(), 5);
        assert_eq!(h.max, 3.5);
        // 0.5 and 1.0 of range 1 were in bins 1024 and 2047; after two doublings 256 and 511.
        assert_eq!(h.counts[256], 1);
        assert_eq!(h.counts[511], 1);
        assert_eq!(h.counts[(3.0 / 4.0 * BINS as f32) as usize], 1);
        assert_eq!(h.amax(Method::MinMax), 3.5);
    }

    #[test]
    fn levels_cover_every_bin_once_as_numpy_digitize_does() {
        for i in [128, 129, 200, 1000, 2047, 2048] {
            let mut next = 0;
            for level in 0..LEVELS {
                let (start, end) = level_bins(i, level);
                assert_eq!(start, next, "i={i} level={level}");
                for j in start..end {
                    assert_eq!(j * LEVELS / i, level, "i={i} j={j}");
                }
                next = end;
            }
            assert_eq!(next, i);
        }
    }

    #[test]
    fn percentile_and_entropy_clip_outliers_minmax_keeps_them() {
        // A Gaussian-like bulk in ±4 with a few outliers at 100.
        let mut values: Vec<f32> = (0..100_000)
            .map(|k| {
                let u = (k as f32 + 0.5) / 100_000.0;
                // Inverse of a logistic CDF: a heavy-ish bell shape.
                (u / (1.0 - u)).ln()
            })
            .collect();
        values.extend([100.0; 3]);
        let mut h = Histogram::default();
        h.add(&values);
        assert_eq!(h.amax(Method::MinMax), 100.0);
        let p = h.amax(Method::Percentile(99.99));
        assert!(p > 5.0 && p < 15.0, "percentile {p}");
        let e = h.amax(Method::Entropy);
        assert!(e > 4.0 && e < 40.0, "entropy {e}");
    }

    #[test]
    fn entropy_matches_pytorch_quantization_on_a_golden_histogram() {
        // scripts/fixtures/entropy_golden.py builds the same histogram and prints 1664.
        let mut counts: Vec<u64> = (0..BINS).map(|i| (1e6 * (-(i as f64) / 150.0).exp()) as u64).collect();
        counts[1500] += 50;
        counts[700..710].fill(0);
        let total = counts.iter().sum();
        let h = Histogram { counts, range: BINS as f32, max: BINS as f32, total, non_finite: 0 };
        assert_eq!(h.amax(Method::Entropy), 1664.0);
    }

    #[test]
    fn entropy_of_a_uniform_tensor_keeps_its_whole_range() {
        let values: Vec<f32> = (0..20_000).map(|k| k as f32 / 20_000.0 * 6.0).collect();
        let mut h = Histogram::default();
        h.add(&values);
        let e = h.amax(Method::Entropy);
        assert!((e - 6.0).abs() < 0.1, "entropy {e}");
        assert!((h.amax(Method::Percentile(99.99)) - 6.0).abs() < 0.01);
    }

    #[test]
    fn a_zero_tensor_has_no_range_and_merging_adds_counts() {
        let mut zero = Histogram::default();
        zero.add(&[0.0; 10]);
        assert_eq!(zero.amax(Method::Entropy), 0.0);
        let mut a = Histogram::default();
        a.add(&[1.0, 2.0]);
        let mut b = Histogram::default();
        b.add(&[4.0]);
        a.merge(&b);
        a.merge(&zero);
        assert_eq!((a.total, a.max, a.range), (13, 4.0, 4.0));
    }
}
