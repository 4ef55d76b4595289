//! Stand-ins for the numpy routines Ultralytics' metrics are built from, written to give the same
//! floating-point results (same operation order, same tie rules), not just the same maths.

/// `numpy.linspace(0, 1, num)`: `i * (1 / (num - 1))`, the last value exactly 1.
pub(crate) fn linspace_unit(num: usize) -> Vec<f64> {
    match num {
        0 => Vec::new(),
        1 => vec![0.0],
        _ => {
            let step = 1.0 / (num - 1) as f64;
            let mut values: Vec<f64> = (0..num).map(|i| i as f64 * step).collect();
            values[num - 1] = 1.0;
            values
        }
    }
}

/// `numpy.interp(x, xp, fp, left, right)` for one `x`, with `xp` non-decreasing (repeated values
/// allowed, as numpy allows them).
///
/// numpy finds `j` with `xp[j] <= x < xp[j + 1]` (so, among repeated `xp`, the last one not above
/// `x`), returns `fp[j]` when `xp[j] == x` or `j` is the last index, and interpolates otherwise.
/// `xp` and `fp` must have the same, non-zero length; an empty `xp` gives `NaN`.
pub(crate) fn interp(x: f64, xp: &[f64], fp: &[f64], left: f64, right: f64) -> f64 {
    let n = xp.len().min(fp.len());
    if n == 0 || x.is_nan() {
        return f64::NAN;
    }
    if x < xp[0] {
        return left;
    }
    if x > xp[n - 1] {
        return right;
    }
    // Number of xp <= x, minus one: the binary search of numpy's `binary_search_with_guess`.
    let j = xp[..n].partition_point(|&v| v <= x) - 1;
    interp_from(j, x, &xp[..n], &fp[..n])
}

/// [`interp`] at each of `x`, which must be non-decreasing (NaN allowed only at the end), into
/// `out`: one walk along `xp` instead of a search per point, the same values.
pub(crate) fn interp_sorted(x: &[f64], xp: &[f64], fp: &[f64], left: f64, right: f64, out: &mut Vec<f64>) {
    let n = xp.len().min(fp.len());
    out.clear();
    let mut below = 0; // xp <= the current x
    for &v in x {
        out.push(if n == 0 || v.is_nan() {
            f64::NAN
        } else if v < xp[0] {
            left
        } else if v > xp[n - 1] {
            right
        } else {
            while below < n && xp[below] <= v {
                below += 1;
            }
            interp_from(below - 1, v, &xp[..n], &fp[..n])
        });
    }
}

/// The end of [`interp`]: `x` lies in `[xp[j], xp[j + 1])`, or at `xp[j]` when `j` is the last.
fn interp_from(j: usize, x: f64, xp: &[f64], fp: &[f64]) -> f64 {
    let n = xp.len();
    if j == n - 1 || xp[j] == x {
        return fp[j];
    }
    let slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]);
    let mut y = slope * (x - xp[j]) + fp[j];
    if y.is_nan() {
        // numpy's fallback when the slope is infinite: interpolate from the right end instead.
        y = slope * (x - xp[j + 1]) + fp[j + 1];
        if y.is_nan() && fp[j] == fp[j + 1] {
            y = fp[j];
        }
    }
    y
}

/// `numpy.add.reduce` of a contiguous `float64` array: numpy's pairwise summation (blocks of 128,
/// eight partial sums inside a block).
pub(crate) fn pairwise_sum(a: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = a.len();
    if n < 8 {
        a.iter().fold(0.0, |sum, &v| sum + v)
    } else if n <= BLOCK {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let whole = n - n % 8;
        let mut i = 8;
        while i < whole {
            for (k, partial) in r.iter_mut().enumerate() {
                *partial += a[i + k];
            }
            i += 8;
        }
        let mut sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &v in &a[whole..] {
            sum += v;
        }
        sum
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
    }
}

/// `numpy.mean` of a 1-D array; `NaN` for an empty one (numpy warns and returns `nan`).
pub(crate) fn mean(a: &[f64]) -> f64 {
    pairwise_sum(a) / a.len() as f64
}

/// `numpy.trapezoid(y, x)`.
#[cfg(test)]
pub(crate) fn trapezoid(y: &[f64], x: &[f64]) -> f64 {
    trapezoid_with(y, x, &mut Vec::new())
}

/// `numpy.trapezoid(y, x)` with `terms` as scratch space.
pub(crate) fn trapezoid_with(y: &[f64], x: &[f64], terms: &mut Vec<f64>) -> f64 {
    terms.clear();
    terms.extend(x.windows(2).zip(y.windows(2)).map(|(x, y)| (x[1] - x[0]) * (y[1] + y[0]) / 2.0));
    pairwise_sum(terms)
}

/// Ultralytics' `smooth(y, f)`: a box filter `round(len * f * 2) // 2 + 1` wide (odd), the ends
/// padded with the first and last values, then `np.convolve(..., mode="valid")`.
///
/// Each output is summed on its own (never as a running sum), so equal windows give bit-equal
/// outputs, as in numpy, and `argmax` ties resolve the same way.
pub(crate) fn smooth(y: &[f64], f: f64) -> Vec<f64> {
    let (Some(&first), Some(&last)) = (y.first(), y.last()) else {
        return Vec::new();
    };
    // Python's round() rounds half to even.
    let width = (y.len() as f64 * f * 2.0).round_ties_even() as usize / 2 + 1;
    let pad = width / 2;
    let mut padded = vec![first; pad];
    padded.extend_from_slice(y);
    padded.extend(std::iter::repeat_n(last, pad));
    let weight = 1.0 / width as f64;
    padded.windows(width).map(|w| w.iter().fold(0.0, |sum, &v| sum + v * weight)).collect()
}

/// `numpy.argmax`: the first index of the largest value; the first `NaN` if there is one; 0 when
/// empty (numpy raises; callers never pass an empty slice).
pub(crate) fn argmax(y: &[f64]) -> usize {
    let mut best = 0;
    for (i, &v) in y.iter().enumerate() {
        if v.is_nan() {
            return i;
        }
        if v > y[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linspace_matches_numpy_construction() {
        let x = linspace_unit(1000);
        assert_eq!(x.len(), 1000);
        assert_eq!(x[0], 0.0);
        assert_eq!(x[999], 1.0);
        assert_eq!(x[1], 1.0 / 999.0);
        assert_eq!(linspace_unit(101)[30], 30.0 * 0.01);
    }

    #[test]
    fn interp_handles_repeated_xp_like_numpy() {
        let xp = [0.0, 0.5, 0.5, 0.5, 1.0];
        let fp = [1.0, 0.9, 0.6, 0.4, 0.0];
        // At a repeated xp numpy takes the last of the run.
        assert_eq!(interp(0.5, &xp, &fp, 9.0, 9.0), 0.4);
        // Left of the run it interpolates towards the first of the run.
        assert!((interp(0.25, &xp, &fp, 9.0, 9.0) - 0.95).abs() < 1e-15);
        // Right of the run it interpolates from the last of the run.
        assert!((interp(0.75, &xp, &fp, 9.0, 9.0) - 0.2).abs() < 1e-15);
        assert_eq!(interp(1.0, &xp, &fp, 9.0, 9.0), 0.0);
        assert_eq!(interp(-0.1, &xp, &fp, 7.0, 8.0), 7.0);
        assert_eq!(interp(1.1, &xp, &fp, 7.0, 8.0), 8.0);
    }

    #[test]
    fn interp_sorted_is_interp_at_each_point() {
        let x = linspace_unit(101);
        let xs = [
            (
                vec![0.0, 0.25, 0.25, 0.25, 0.5, 0.7, 0.7, 1.0],
                vec![1.0, 0.9, 0.6, 0.4, 0.4, 0.3, f64::NAN, 0.0],
            ),
            (vec![0.0, 0.0, 0.33, 0.33, 0.66, 0.66, 1.0], vec![1.0, 1.0, 0.5, 0.5, 0.2, 0.2, 0.0]),
            (vec![0.2, 0.8], vec![0.7, 0.1]),
            (vec![0.5], vec![0.3]),
        ];
        let mut out = Vec::new();
        for (xp, fp) in &xs {
            interp_sorted(&x, xp, fp, -1.0, -2.0, &mut out);
            let each: Vec<f64> = x.iter().map(|&v| interp(v, xp, fp, -1.0, -2.0)).collect();
            assert_eq!(format!("{out:?}"), format!("{each:?}"));
        }
        interp_sorted(&[0.5], &[], &[], 0.0, 0.0, &mut out);
        assert!(out[0].is_nan());
    }

    #[test]
    fn pairwise_sum_uses_numpy_blocking() {
        let a: Vec<f64> = (0..300).map(|i| (i as f64 * 0.37).sin()).collect();
        let naive: f64 = a.iter().sum();
        assert!((pairwise_sum(&a) - naive).abs() < 1e-12);
        assert_eq!(pairwise_sum(&[1.0, 2.0, 3.0]), 6.0);
        assert_eq!(mean(&[1.0, 2.0, 3.0, 6.0]), 3.0);
    }

    #[test]
    fn trapezoid_of_a_line() {
        let x = linspace_unit(101);
        let y: Vec<f64> = x.iter().map(|v| 1.0 - v).collect();
        assert!((trapezoid(&y, &x) - 0.5).abs() < 1e-12);
    }

    #[test]
    fn smooth_keeps_constants_and_length() {
        let y = vec![0.25; 1000];
        let s = smooth(&y, 0.1);
        assert_eq!(s.len(), 1000);
        assert!(s.windows(2).all(|w| w[0] == w[1]));
        assert_eq!(argmax(&s), 0);
    }

    #[test]
    fn argmax_takes_first_maximum() {
        assert_eq!(argmax(&[0.1, 0.3, 0.3, 0.2]), 1);
        assert_eq!(argmax(&[0.1, f64::NAN, 0.3]), 1);
    }
}
