//! `Expand`: numpy-style two-way broadcast of the input with the given shape.

use super::{Fail, Inputs, Lowered};

pub(crate) fn run(inputs: &Inputs<'_>) -> Lowered {
    let x = inputs.get(0)?;
    let target = inputs.ints(1)?;
    let size = x.size();
    let rank = size.len().max(target.len());
    let at = |v: &[i64], i: usize| if i + v.len() >= rank { v[i + v.len() - rank] } else { 1 };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let (a, b) = (at(&size, i), at(&target, i));
        out.push(match (a, b) {
            (a, b) if a == b => a,
            (1, b) => b,
            (a, 1) => a,
            (a, b) => {
                return Err(Fail(format!("cannot broadcast {size:?} to {target:?} (dim {i}: {a} vs {b})")));
            }
        });
    }
    Ok(x.f_expand(out.as_slice(), false)?)
}
