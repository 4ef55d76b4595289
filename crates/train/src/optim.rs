//! SGD and AdamW as `torch.optim.SGD` and `AdamW` compute them (SGD: momentum, optional Nesterov,
//! L2 weight decay; AdamW: decoupled decay), with Ultralytics' parameter groups: weight decay on
//! weights (tensors of rank ≥ 2), none on biases. Each step is libtorch's fused kernel over all
//! tensors of a group ([`crate::foreach`]); state is kept per parameter name, so it can be saved
//! with a checkpoint.

use std::collections::HashMap;

use tch::Tensor;

use crate::{Result, foreach};

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
    /// warmup sets them per parameter group: libtorch's fused SGD over every parameter that has a
    /// gradient, one call per group (weights with decay, biases without) and per state (momentum
    /// buffers to update, or to start from the gradients).
    pub fn step_with(
        &mut self,
        parameters: &[(&str, &Tensor)],
        lr_weights: f64,
        lr_biases: f64,
    ) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let grads: Vec<(&str, &Tensor, Tensor)> =
            parameters.iter().map(|&(n, p)| (n, p, p.grad())).filter(|(_, _, g)| g.defined()).collect();
        for (weights, lr, decay) in [(true, lr_weights, self.weight_decay), (false, lr_biases, 0.0)] {
            // Tensors with a buffer first: the second call gives the others theirs.
            for first in [false, true] {
                let group: Vec<&(&str, &Tensor, Tensor)> = grads
                    .iter()
                    .filter(|(n, p, _)| (p.dim() >= 2) == weights && self.buffers.contains_key(*n) != first)
                    .collect();
                if group.is_empty() {
                    continue;
                }
                if first {
                    for (name, p, _) in &group {
                        self.buffers.insert(name.to_string(), p.f_zeros_like()?);
                    }
                }
                let buffers: Vec<&Tensor> =
                    group.iter().filter_map(|(n, _, _)| self.buffers.get(*n)).collect();
                foreach::fused_sgd(
                    &group.iter().map(|(_, p, _)| *p).collect::<Vec<_>>(),
                    &group.iter().map(|(_, _, g)| g).collect::<Vec<_>>(),
                    &buffers,
                    lr,
                    self.momentum,
                    decay,
                    self.nesterov,
                    first,
                )?;
            }
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

/// AdamW as `torch.optim.AdamW` computes it (decoupled weight decay, bias-corrected moments), with
/// Ultralytics' parameter groups (decay on weights, none on biases).
#[derive(Debug)]
pub struct AdamW {
    /// First-moment decay (Ultralytics passes its momentum, 0.9 under `optimizer=auto`).
    pub beta1: f64,
    /// Second-moment decay.
    pub beta2: f64,
    /// Denominator guard.
    pub eps: f64,
    /// Decoupled weight decay on weights (rank ≥ 2).
    pub weight_decay: f64,
    steps: u64,
    moments: HashMap<String, (Tensor, Tensor)>,
}

impl AdamW {
    /// A fresh optimiser.
    pub fn new(beta1: f64, weight_decay: f64) -> AdamW {
        AdamW { beta1, beta2: 0.999, eps: 1e-8, weight_decay, steps: 0, moments: HashMap::new() }
    }

    /// One step with separate learning rates for weights (rank ≥ 2) and biases: two calls of
    /// libtorch's fused AdamW (weights with decay, biases without) over every parameter that has a
    /// gradient, whose moments start at zero.
    pub fn step_with(
        &mut self,
        parameters: &[(&str, &Tensor)],
        lr_weights: f64,
        lr_biases: f64,
    ) -> Result<()> {
        let _guard = tch::no_grad_guard();
        self.steps += 1;
        let grads: Vec<(&str, &Tensor, Tensor)> =
            parameters.iter().map(|&(n, p)| (n, p, p.grad())).filter(|(_, _, g)| g.defined()).collect();
        for (name, p, _) in &grads {
            if !self.moments.contains_key(*name) {
                self.moments.insert(name.to_string(), (p.f_zeros_like()?, p.f_zeros_like()?));
            }
        }
        for (weights, lr, decay) in [(true, lr_weights, self.weight_decay), (false, lr_biases, 0.0)] {
            let group: Vec<&(&str, &Tensor, Tensor)> =
                grads.iter().filter(|(_, p, _)| (p.dim() >= 2) == weights).collect();
            let moments: Vec<&(Tensor, Tensor)> =
                group.iter().filter_map(|(n, _, _)| self.moments.get(*n)).collect();
            foreach::fused_adamw(
                &group.iter().map(|(_, p, _)| *p).collect::<Vec<_>>(),
                &group.iter().map(|(_, _, g)| g).collect::<Vec<_>>(),
                &moments.iter().map(|(m, _)| m).collect::<Vec<_>>(),
                &moments.iter().map(|(_, v)| v).collect::<Vec<_>>(),
                self.steps,
                lr,
                (self.beta1, self.beta2),
                decay,
                self.eps,
            )?;
        }
        Ok(())
    }

    /// Moments by parameter name (`m/NAME`, `v/NAME`) and the step count, for checkpoints.
    pub fn state(&self) -> (u64, Vec<(String, Tensor)>) {
        let mut named = Vec::new();
        for (name, (m, v)) in &self.moments {
            named.push((format!("m/{name}"), m.shallow_clone()));
            named.push((format!("v/{name}"), v.shallow_clone()));
        }
        (self.steps, named)
    }

    /// Restores what [`AdamW::state`] returned.
    pub fn set_state(&mut self, steps: u64, named: &HashMap<String, Tensor>) {
        self.steps = steps;
        self.moments.clear();
        for (key, m) in named {
            if let Some(name) = key.strip_prefix("m/")
                && let Some(v) = named.get(&format!("v/{name}"))
            {
                self.moments.insert(name.to_string(), (m.shallow_clone(), v.shallow_clone()));
            }
        }
    }
}

/// Scales the gradients of `parameters` so that their joint L2 norm is at most `max_norm`
/// (`torch.nn.utils.clip_grad_norm_`, as Ultralytics applies with 10.0); returns the norm before.
pub fn clip_grad_norm(parameters: &[(&str, &Tensor)], max_norm: f64) -> Result<f64> {
    let _guard = tch::no_grad_guard();
    let grads: Vec<Tensor> = parameters.iter().map(|(_, p)| p.grad()).filter(Tensor::defined).collect();
    let grads: Vec<&Tensor> = grads.iter().collect();
    let norm = foreach::norm(&grads)?;
    if max_norm > 0.0 && norm.is_finite() && norm > max_norm {
        foreach::mul_(&grads, max_norm / (norm + 1e-6))?;
    }
    Ok(norm)
}
