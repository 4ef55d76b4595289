//! Arithmetic helpers that give the same bits on every target.
//!
//! Only `+ - * /`, `sqrt`, `floor` and `round` are used: IEEE 754 defines them exactly, whereas
//! `sin`, `exp` or `ln` come from the platform's libm and may differ in the last bit between
//! x86_64 and aarch64, which would change a rounded pixel now and then.

use rand::RngExt;

use super::SynthRng;

/// `(sin, cos)` of an angle given in turns (1.0 = 360°), accurate to about 1e-6.
pub(crate) fn sin_cos_turns(turns: f32) -> (f32, f32) {
    let t = f64::from(turns);
    let quarters = (t - t.floor()) * 4.0;
    let quadrant = quarters.floor();
    // r in [0, π/2): a Taylor series is accurate there to a few 1e-7.
    let r = (quarters - quadrant) * std::f64::consts::FRAC_PI_2;
    let (s, c) = (sin_taylor(r), sin_taylor(std::f64::consts::FRAC_PI_2 - r));
    let (s, c) = match quadrant as u8 {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    };
    (s as f32, c as f32)
}

fn sin_taylor(x: f64) -> f64 {
    let x2 = x * x;
    // x - x³/3! + x⁵/5! - … up to x¹³ (error below 1e-9 on [0, π/2]).
    let mut term = x;
    let mut sum = x;
    for k in 1..7 {
        let k = f64::from(k);
        term *= -x2 / ((2.0 * k) * (2.0 * k + 1.0));
        sum += term;
    }
    sum
}

/// A uniform sample in `[lo, hi)` (or `lo` when `hi <= lo`); never panics.
pub(crate) fn uniform(rng: &mut SynthRng, (lo, hi): (f32, f32)) -> f32 {
    let u: f32 = rng.random();
    if hi > lo { lo + (hi - lo) * u } else { lo }
}

/// A uniform integer in `lo..=hi` (or `lo` when `hi <= lo`); never panics.
pub(crate) fn uniform_int(rng: &mut SynthRng, (lo, hi): (u32, u32)) -> u32 {
    if hi <= lo {
        return lo;
    }
    let span = u64::from(hi - lo) + 1;
    lo + ((u64::from(rng.random::<u32>()) * span) >> 32) as u32
}

/// `true` with probability `p`.
pub(crate) fn chance(rng: &mut SynthRng, p: f32) -> bool {
    rng.random::<f32>() < p
}

/// An approximately standard normal sample: the sum of the four bytes of one random `u32`,
/// centred and scaled (Irwin–Hall); bounded to ±3.45, which is what image noise wants anyway.
pub(crate) fn gauss(rng: &mut SynthRng) -> f32 {
    let bits = rng.random::<u32>();
    let sum: u32 = bits.to_le_bytes().iter().map(|&b| u32::from(b)).sum();
    // Four uniform bytes: mean 510, variance 4 · (256² − 1) / 12.
    (sum as f32 - 510.0) * (1.0 / 147.800_54)
}

/// An RGB colour (0–255 per channel) from hue (turns), saturation and value (both 0–1).
pub(crate) fn hsv(hue: f32, saturation: f32, value: f32) -> [f32; 3] {
    let h = (hue - hue.floor()) * 6.0;
    let (s, v) = (saturation.clamp(0.0, 1.0), value.clamp(0.0, 1.0));
    let sector = h.floor();
    let f = h - sector;
    let (p, q, t) = (v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f)));
    let rgb = match sector as u8 {
        0 => [v, t, p],
        1 => [q, v, p],
        2 => [p, v, t],
        3 => [p, q, v],
        4 => [t, p, v],
        _ => [v, p, q],
    };
    rgb.map(|c| c * 255.0)
}

/// Rec. 601 luma of an RGB colour (0–255).
pub(crate) fn luma(rgb: [f32; 3]) -> f32 {
    0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]
}

/// Hermite smoothstep of `t` in [0, 1].
pub(crate) fn smoothstep(t: f32) -> f32 {
    t * t * (3.0 - 2.0 * t)
}

/// A float in [0, 1) from integer lattice coordinates and a salt (a hash, not a generator).
pub(crate) fn lattice(ix: i32, iy: i32, salt: u64) -> f32 {
    let mut z = salt ^ (u64::from(ix as u32) << 32 | u64::from(iy as u32));
    // splitmix64 finaliser.
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 40) as f32 / (1u64 << 24) as f32
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn sin_cos_matches_std() {
        let mut worst = 0f32;
        for i in 0..=1000 {
            let turns = i as f32 / 997.0 - 0.3;
            let (s, c) = sin_cos_turns(turns);
            let angle = f64::from(turns) * std::f64::consts::TAU;
            worst = worst.max((s - angle.sin() as f32).abs()).max((c - angle.cos() as f32).abs());
        }
        assert!(worst < 2e-6, "largest error {worst}");
    }

    #[test]
    fn uniform_helpers_stay_in_range_and_tolerate_empty_ranges() {
        let mut rng = SynthRng::seed_from_u64(1);
        for _ in 0..1000 {
            let v = uniform_int(&mut rng, (3, 5));
            assert!((3..=5).contains(&v));
            let f = uniform(&mut rng, (0.25, 0.5));
            assert!((0.25..0.5).contains(&f));
            assert!(gauss(&mut rng).abs() <= 3.46);
        }
        assert_eq!(uniform_int(&mut rng, (7, 2)), 7);
        assert_eq!(uniform(&mut rng, (1.0, 1.0)), 1.0);
    }

    #[test]
    fn hsv_primaries() {
        assert_eq!(hsv(0.0, 1.0, 1.0), [255.0, 0.0, 0.0]);
        assert_eq!(hsv(1.0 / 3.0, 0.0, 0.5), [127.5, 127.5, 127.5]);
        let blue = hsv(2.0 / 3.0, 1.0, 1.0);
        assert!(blue[2] == 255.0 && blue[0] < 1e-3 && blue[1] < 1e-3, "{blue:?}");
    }

    #[test]
    fn gauss_has_unit_variance() {
        let mut rng = SynthRng::seed_from_u64(2);
        let samples: Vec<f32> = (0..20_000).map(|_| gauss(&mut rng)).collect();
        let mean = samples.iter().sum::<f32>() / samples.len() as f32;
        let var = samples.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / samples.len() as f32;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.03, "mean {mean} var {var}");
    }

    #[test]
    fn lattice_is_uniformish() {
        let mean: f32 = (0..1000).map(|i| lattice(i, -i, 42)).sum::<f32>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.05, "{mean}");
    }
}
