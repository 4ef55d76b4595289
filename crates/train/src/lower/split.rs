//! `Split`: sizes from input 1 (opset 13+), the `split` attribute (older), or equal parts
//! (the last one smaller when the axis does not divide, as opset 18's `num_outputs`).

use headroom_onnx::ops::SplitConfig;
use tch::Tensor;

use super::{Fail, Inputs, Lowered, axis, rank};

pub(crate) fn run(config: &SplitConfig, inputs: &Inputs<'_>) -> Lowered<Vec<Tensor>> {
    let x = inputs.get(0)?;
    let dim = axis(config.axis, rank(x), false)?;
    let length = x.size()[dim as usize];
    let sizes = match (inputs.opt_ints(1)?, &config.split) {
        (Some(sizes), _) => sizes,
        (None, Some(sizes)) => sizes.clone(),
        (None, None) => {
            let parts = config.parts.max(1) as i64;
            let chunk = (length + parts - 1) / parts;
            (0..parts).map(|i| chunk.min(length - i * chunk).max(0)).collect()
        }
    };
    if sizes.iter().sum::<i64>() != length || sizes.len() != config.parts {
        return Err(Fail(format!(
            "split sizes {sizes:?} do not cut an axis of {length} into {} outputs",
            config.parts
        )));
    }
    Ok(x.f_split_with_sizes(sizes.as_slice(), dim)?)
}
