//! The libtorch smoke check behind [`crate::libtorch_check`].

use tch::nn::{self, Module, OptimizerConfig};
use tch::{Device, Kind, Tensor};

use crate::{LibtorchReport, Result};

pub(crate) fn run() -> Result<LibtorchReport> {
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let conv = nn::conv2d(vs.root() / "conv", 3, 8, 3, nn::ConvConfig { padding: 1, ..Default::default() });
    let mut adam = nn::Adam::default().build(&vs, 1e-2)?;
    let input = Tensor::f_randn([2, 3, 16, 16], (Kind::Float, Device::Cpu))?;
    let target = Tensor::f_zeros([2, 8, 16, 16], (Kind::Float, Device::Cpu))?;
    let loss_of = |x: &Tensor| -> Result<Tensor> {
        Ok(conv.forward(x).f_sub(&target)?.f_square()?.f_mean(Kind::Float)?)
    };
    let loss_before = loss_of(&input)?.f_double_value(&[])?;
    for _ in 0..20 {
        let loss = loss_of(&input)?;
        adam.zero_grad();
        loss.f_backward()?;
        adam.step();
    }
    let loss_after = loss_of(&input)?.f_double_value(&[])?;
    Ok(LibtorchReport {
        version: crate::LIBTORCH_HEADERS,
        cuda_available: crate::cuda_available(),
        threads: tch::get_num_threads(),
        loss_before,
        loss_after,
    })
}
