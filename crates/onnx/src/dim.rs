//! Tensor dimensions that may be symbolic (`batch`, `height/8`), with folding arithmetic.

use std::fmt;

/// One dimension: a number, or a symbolic expression of the dynamic input dims.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(untagged)]
pub enum Dim {
    /// A known size.
    Known(i64),
    /// A symbolic size such as `height` or `(height/8)*(width/8)`.
    Symbol(String),
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Symbol(s) => f.write_str(s),
        }
    }
}

/// Longest symbolic expression kept (the longest in the committed dynamic exports has ~1,900
/// characters); a longer one becomes [`UNKNOWN`].
pub const MAX_EXPRESSION: usize = 8192;

/// A dim whose expression was too long to keep.
pub const UNKNOWN: &str = "?";

fn wrap(d: &Dim) -> String {
    match d {
        Dim::Symbol(s) if s.contains(['+', '-', '*', '/', '%']) => format!("({s})"),
        other => other.to_string(),
    }
}

impl Dim {
    /// The number, if known.
    pub fn known(&self) -> Option<i64> {
        match self {
            Dim::Known(n) => Some(*n),
            Dim::Symbol(_) => None,
        }
    }

    fn combine(&self, other: &Dim, op: char, f: impl Fn(i64, i64) -> Option<i64>) -> Dim {
        match (self, other) {
            (Dim::Known(a), Dim::Known(b)) => {
                f(*a, *b).map_or_else(|| Dim::Symbol(format!("{a}{op}{b}")), Dim::Known)
            }
            (a, Dim::Known(1)) if op == '*' || op == '/' => a.clone(),
            (Dim::Known(1), b) if op == '*' => b.clone(),
            (a, Dim::Known(0)) if op == '+' || op == '-' => a.clone(),
            (a, b) => {
                let (a, b) = (wrap(a), wrap(b));
                // `x*x` chains would double the expression at every node (gigabytes from a 4 KB file).
                if a.len() + b.len() + 1 > MAX_EXPRESSION {
                    return Dim::Symbol(UNKNOWN.into());
                }
                Dim::Symbol(format!("{a}{op}{b}"))
            }
        }
    }

    /// `self + other`.
    pub fn add(&self, other: &Dim) -> Dim {
        self.combine(other, '+', i64::checked_add)
    }

    /// `self - other`.
    pub fn sub(&self, other: &Dim) -> Dim {
        self.combine(other, '-', i64::checked_sub)
    }

    /// `self * other`.
    pub fn mul(&self, other: &Dim) -> Dim {
        self.combine(other, '*', i64::checked_mul)
    }

    /// `self / other`, rounding toward negative infinity (shape arithmetic).
    pub fn div(&self, other: &Dim) -> Dim {
        self.combine(other, '/', |a, b| if b == 0 { None } else { Some(a.div_euclid(b)) })
    }

    /// `self % other`.
    pub fn rem(&self, other: &Dim) -> Dim {
        self.combine(other, '%', |a, b| if b == 0 { None } else { Some(a.rem_euclid(b)) })
    }

    /// ONNX `Div` on integers: rounds toward zero, as C does (`-7 / 2 = -3`).
    pub fn onnx_div(&self, other: &Dim) -> Dim {
        self.combine(other, '/', i64::checked_div)
    }

    /// ONNX `Mod` on integers: the remainder takes the divisor's sign (Python's `%`), or with `fmod`
    /// the dividend's (C's `fmod`).
    pub fn onnx_mod(&self, other: &Dim, fmod: bool) -> Dim {
        self.combine(other, '%', |a, b| {
            let r = a.checked_rem(b)?;
            Some(if !fmod && r != 0 && (r < 0) != (b < 0) { r + b } else { r })
        })
    }
}

/// The product of dims (`1` for none).
pub fn product(dims: &[Dim]) -> Dim {
    dims.iter().fold(Dim::Known(1), |acc, d| acc.mul(d))
}

/// Formats a shape as `[1, 3, height, width]`.
pub fn format_shape(dims: &[Dim]) -> String {
    format!("[{}]", dims.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_known_and_keeps_symbols() {
        let h = Dim::Symbol("height".into());
        assert_eq!(Dim::Known(6).div(&Dim::Known(4)), Dim::Known(1));
        // ONNX integer Div truncates; Mod follows the divisor's sign, or the dividend's with fmod.
        let k = Dim::Known;
        assert_eq!((k(-7).onnx_div(&k(2)), k(7).onnx_div(&k(-2))), (k(-3), k(-3)));
        assert_eq!((k(-7).onnx_mod(&k(3), false), k(7).onnx_mod(&k(-3), false)), (k(2), k(-2)));
        assert_eq!((k(-7).onnx_mod(&k(3), true), k(7).onnx_mod(&k(-3), true)), (k(-1), k(1)));
        assert!(matches!(k(i64::MIN).onnx_div(&k(-1)), Dim::Symbol(_)), "overflow is unknown, not a panic");
        assert_eq!(h.div(&Dim::Known(8)).to_string(), "height/8");
        assert_eq!(h.div(&Dim::Known(8)).mul(&Dim::Known(2)).to_string(), "(height/8)*2");
        assert_eq!(h.mul(&Dim::Known(1)), h);
        assert_eq!(product(&[Dim::Known(2), Dim::Known(3)]), Dim::Known(6));
    }

    #[test]
    fn squaring_a_symbol_over_and_over_stays_bounded() {
        let mut d = Dim::Symbol("height".into());
        for _ in 0..64 {
            d = d.mul(&d);
        }
        assert!(d.to_string().len() <= MAX_EXPRESSION, "{} characters", d.to_string().len());
    }
}
