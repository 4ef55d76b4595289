//! SGD as `torch.optim.SGD` computes it (momentum, optional Nesterov, L2 weight decay), with
//! Ultralytics' parameter groups: weight decay on weights (tensors of rank ≥ 2), none on biases.
//! State is kept per parameter name, so it can be saved with a checkpoint.

use std::collections::HashMap;

use tch::Tensor;

use crate::Result;

/// Stochastic gradient descent with momentum.
#[derive(Debug)]
pub struct Sgd {
    /// Learning rate.
    pub lr: f64,
    /// Momentum (Ultralytics: 0.937).
    pub momentum: f64,
    /// Nesterov momentum (Ultralytics: on).
    pub nesterov: bool,
    /// L2 weight decay applied to weights, not biases (Ultralytics: 5e-4, scaled by the effective
    /// batch over the nominal batch).
    pub weight_decay: f64,
    buffers: HashMap<String, Tensor>,
}

impl Sgd {
    /// A fresh optimiser (no momentum yet).
    pub fn new(lr: f64, momentum: f64, nesterov: bool, weight_decay: f64) -> Sgd {
        Sgd { lr, momentum, nesterov, weight_decay, buffers: HashMap::new() }
    }

    /// One step over `parameters` (name, tensor with `.grad()`); parameters without a gradient are
    /// skipped, as in torch.
    pub fn step(&mut self, parameters: &[(&str, &Tensor)]) -> Result<()> {
        self.step_with(parameters, self.lr, self.lr)
    }

    /// [`Sgd::step`] with separate learning rates for weights (rank ≥ 2) and biases, as Ultralytics'
    /// warmup sets them per parameter group.
    pub fn step_with(
        &mut self,
        parameters: &[(&str, &Tensor)],
        lr_weights: f64,
        lr_biases: f64,
    ) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for &(name, p) in parameters {
            let lr = if p.dim() >= 2 { lr_weights } else { lr_biases };
            let grad = p.grad();
            if !grad.defined() {
                continue;
            }
            let mut g = if self.weight_decay != 0.0 && p.dim() >= 2 {
                grad.f_add(&p.f_mul_scalar(self.weight_decay)?)?
            } else {
                grad.shallow_clone()
            };
            if self.momentum != 0.0 {
                let buffer = match self.buffers.remove(name) {
                    Some(b) => b.f_mul_scalar(self.momentum)?.f_add(&g)?,
                    None => g.f_detach_copy()?,
                };
                g = if self.nesterov {
                    g.f_add(&buffer.f_mul_scalar(self.momentum)?)?
                } else {
                    buffer.shallow_clone()
                };
                self.buffers.insert(name.to_string(), buffer);
            }
            let mut p = p.shallow_clone();
            let _updated = p.f_sub_(&g.f_mul_scalar(lr)?)?;
        }
        Ok(())
    }

    /// The momentum buffers, by parameter name (for checkpoints).
    pub fn buffers(&self) -> &HashMap<String, Tensor> {
        &self.buffers
    }

    /// Restores momentum buffers saved by [`Sgd::buffers`].
    pub fn set_buffers(&mut self, buffers: HashMap<String, Tensor>) {
        self.buffers = buffers;
    }
}
