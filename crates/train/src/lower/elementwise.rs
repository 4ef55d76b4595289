//! Element-wise ops without attributes (broadcasting as in numpy, like ONNX), `MatMul`, `Where`
//! and `Mod`. Integer `Div` truncates as ONNX specifies (libtorch's plain division would give floats).

use headroom_onnx::ops::ModConfig;
use tch::Tensor;

use super::{Inputs, Lowered};

fn pair<'a>(inputs: &Inputs<'a>) -> Lowered<(&'a Tensor, &'a Tensor)> {
    Ok((inputs.get(0)?, inputs.get(1)?))
}

pub(crate) fn add(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_add(b)?)
}

pub(crate) fn sub(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_sub(b)?)
}

pub(crate) fn mul(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_mul(b)?)
}

pub(crate) fn div(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    if a.is_floating_point() || b.is_floating_point() {
        Ok(a.f_div(b)?)
    } else {
        Ok(a.f_div_tensor_mode(b, "trunc")?)
    }
}

pub(crate) fn pow(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    // ONNX keeps the base's type; libtorch would promote an int base with a float exponent.
    Ok(a.f_pow(b)?.f_to_kind(a.kind())?)
}

pub(crate) fn sqrt(inputs: &Inputs<'_>) -> Lowered {
    Ok(inputs.get(0)?.f_sqrt()?)
}

pub(crate) fn neg(inputs: &Inputs<'_>) -> Lowered {
    Ok(inputs.get(0)?.f_neg()?)
}

pub(crate) fn sigmoid(inputs: &Inputs<'_>) -> Lowered {
    Ok(inputs.get(0)?.f_sigmoid()?)
}

pub(crate) fn identity(inputs: &Inputs<'_>) -> Lowered {
    Ok(inputs.get(0)?.shallow_clone())
}

pub(crate) fn matmul(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_matmul(b)?)
}

pub(crate) fn equal(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_eq_tensor(b)?)
}

pub(crate) fn less(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_lt_tensor(b)?)
}

pub(crate) fn greater(inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    Ok(a.f_gt_tensor(b)?)
}

pub(crate) fn not(inputs: &Inputs<'_>) -> Lowered {
    Ok(inputs.get(0)?.f_logical_not()?)
}

pub(crate) fn where_(inputs: &Inputs<'_>) -> Lowered {
    let (condition, x, y) = (inputs.get(0)?, inputs.get(1)?, inputs.get(2)?);
    Ok(x.f_where_self(&condition.f_to_kind(tch::Kind::Bool)?, y)?)
}

/// `fmod = 1`: C's remainder (sign of the dividend); `fmod = 0`: Python's (sign of the divisor).
pub(crate) fn modulo(config: &ModConfig, inputs: &Inputs<'_>) -> Lowered {
    let (a, b) = pair(inputs)?;
    if config.fmod { Ok(a.f_fmod_tensor(b)?) } else { Ok(a.f_remainder_tensor(b)?) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::test_util::{inputs, values};

    #[test]
    fn integer_division_truncates_and_mod_follows_the_flag() {
        let a = Tensor::from_slice(&[7i64, -7]);
        let b = Tensor::from_slice(&[2i64, 2]);
        let q = div(&inputs(&[Some(&a), Some(&b)])).expect("div");
        assert_eq!(Vec::<i64>::try_from(&q).expect("ints"), vec![3, -3]);
        let python = modulo(&ModConfig { fmod: false }, &inputs(&[Some(&a), Some(&b)])).expect("mod");
        let c = modulo(&ModConfig { fmod: true }, &inputs(&[Some(&a), Some(&b)])).expect("fmod");
        assert_eq!(Vec::<i64>::try_from(&python).expect("ints"), vec![1, 1]);
        assert_eq!(Vec::<i64>::try_from(&c).expect("ints"), vec![1, -1]);
        let f = div(&inputs(&[Some(&Tensor::from_slice(&[1f32])), Some(&Tensor::from_slice(&[4f32]))]));
        assert_eq!(values(&f.expect("float div")), vec![0.25]);
    }
}
