//! `Gather` (index along an axis; output rank = data rank − 1 + indices rank) and `GatherElements`
//! (torch.gather). Negative indices count from the end.

use headroom_onnx::ops::{GatherConfig, GatherElementsConfig};
use tch::{Kind, Tensor};

use super::{Inputs, Lowered, axis, rank};

fn positive(indices: &Tensor, length: i64) -> Lowered {
    let indices = indices.f_to_kind(Kind::Int64)?;
    Ok(indices.f_remainder(length)?)
}

pub(crate) fn gather(config: &GatherConfig, inputs: &Inputs<'_>) -> Lowered {
    let (data, indices) = (inputs.get(0)?, inputs.get(1)?);
    let a = axis(config.axis, rank(data), false)?;
    let size = data.size();
    let indices = positive(indices, size[a as usize])?;
    let picked = data.f_index_select(a, &indices.f_reshape([-1])?)?;
    let mut out: Vec<i64> = size[..a as usize].to_vec();
    out.extend(indices.size());
    out.extend(&size[a as usize + 1..]);
    Ok(picked.f_reshape(out.as_slice())?)
}

pub(crate) fn gather_elements(config: &GatherElementsConfig, inputs: &Inputs<'_>) -> Lowered {
    let (data, indices) = (inputs.get(0)?, inputs.get(1)?);
    let a = axis(config.axis, rank(data), false)?;
    let indices = positive(indices, data.size()[a as usize])?;
    Ok(data.f_gather(a, &indices, false)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::test_util::{inputs, values};

    #[test]
    fn scalar_and_negative_indices() {
        let data = Tensor::from_slice(&[1f32, 2., 3., 4., 5., 6.]).reshape([2, 3]);
        let scalar = Tensor::from(-1i64);
        let out = gather(&GatherConfig { axis: 1 }, &inputs(&[Some(&data), Some(&scalar)])).expect("gather");
        assert_eq!((out.size(), values(&out)), (vec![2], vec![3., 6.]));
        let idx = Tensor::from_slice(&[1i64, 0]).reshape([1, 2]);
        let out = gather(&GatherConfig { axis: 0 }, &inputs(&[Some(&data), Some(&idx)])).expect("gather");
        assert_eq!(out.size(), vec![1, 2, 3]);
        assert_eq!(values(&out), vec![4., 5., 6., 1., 2., 3.]);
    }
}
