//! The exponential moving average of the trained weights (Ultralytics' `ModelEMA`: decay
//! `0.9999 · (1 − e^(−updates/2000))`): what is written out and evaluated. It covers the trained
//! tensors only; frozen ones are the model's own.

use std::collections::BTreeMap;

use tch::{Kind, Tensor};

use crate::Result;

const EMA_DECAY: f64 = 0.9999;
const EMA_TAU: f64 = 2000.0;

/// The averaged copy of the trained tensors, by name.
pub struct Ema {
    tensors: BTreeMap<String, Tensor>,
}

impl Ema {
    /// An average starting at `parameters`' values.
    pub fn new(parameters: &[(&str, &Tensor)]) -> Ema {
        Ema { tensors: parameters.iter().map(|(n, p)| (n.to_string(), p.detach().copy())).collect() }
    }

    /// The decay of update number `updates` (1-based).
    pub fn decay(updates: u64) -> f64 {
        EMA_DECAY * (1.0 - (-(updates as f64) / EMA_TAU).exp())
    }

    /// Moves the average toward `parameters` as update number `updates` (one foreach call over
    /// all of them).
    pub fn update(&mut self, parameters: &[(&str, &Tensor)], updates: u64) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let pairs: Vec<(&Tensor, &Tensor)> =
            parameters.iter().filter_map(|(name, p)| Some((self.tensors.get(*name)?, *p))).collect();
        let (average, value): (Vec<&Tensor>, Vec<&Tensor>) = pairs.into_iter().unzip();
        crate::foreach::ema(&average, &value, Ema::decay(updates))
    }

    /// The averaged tensors, by name.
    pub fn tensors(&self) -> &BTreeMap<String, Tensor> {
        &self.tensors
    }

    /// Overwrites the average of `name` with `value` (loading a checkpoint).
    pub fn restore(&mut self, name: &str, value: &Tensor) -> Result<()> {
        if let Some(e) = self.tensors.get_mut(name) {
            let _guard = tch::no_grad_guard();
            e.f_copy_(value)?;
        }
        Ok(())
    }

    /// The averaged weights as name → row-major f32 on the CPU.
    pub fn weights(&self) -> Result<BTreeMap<String, Vec<f32>>> {
        self.tensors
            .iter()
            .map(|(n, t)| {
                let flat = t.f_reshape([-1])?.f_to_kind(Kind::Float)?.f_to_device(tch::Device::Cpu)?;
                Ok((n.clone(), Vec::<f32>::try_from(&flat)?))
            })
            .collect()
    }
}
