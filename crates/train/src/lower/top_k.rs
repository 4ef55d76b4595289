//! `TopK`: values and int64 indices. ONNX breaks ties by the lower index; libtorch's `topk` does not
//! promise an order among equal values (untrained heads have many), so this is a stable sort cut
//! to `K`.

use headroom_onnx::ops::TopKConfig;
use tch::Tensor;

use super::{Fail, Inputs, Lowered, axis, rank};

pub(crate) fn run(config: &TopKConfig, inputs: &Inputs<'_>) -> Lowered<Vec<Tensor>> {
    let x = inputs.get(0)?;
    let k = *inputs.ints(1)?.first().ok_or("empty `K`")?;
    let a = axis(config.axis, rank(x), false)?;
    let length = x.size()[a as usize];
    if k > length || k < 0 {
        return Err(Fail(format!("K = {k} is outside the axis (0..={length})")));
    }
    let (values, indices) = x.f_sort_stable(true, a, config.largest)?;
    Ok(vec![values.f_narrow(a, 0, k)?, indices.f_narrow(a, 0, k)?])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::test_util::{inputs, values};

    #[test]
    fn ties_go_to_the_lower_index_as_onnx_specifies() {
        let x = Tensor::from_slice(&[0.5f32, 0.9, 0.5, 0.5, 0.1]);
        let k = Tensor::from_slice(&[3i64]);
        let config = TopKConfig { axis: 0, largest: true, sorted: true };
        let out = run(&config, &inputs(&[Some(&x), Some(&k)])).expect("topk");
        assert_eq!(values(&out[0]), vec![0.9, 0.5, 0.5]);
        assert_eq!(Vec::<i64>::try_from(&out[1]).expect("ints"), vec![1, 0, 2]);
        let smallest = TopKConfig { largest: false, ..config };
        let out = run(&smallest, &inputs(&[Some(&x), Some(&k)])).expect("topk");
        assert_eq!(Vec::<i64>::try_from(&out[1]).expect("ints"), vec![4, 0, 2]);
    }
}
