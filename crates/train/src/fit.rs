//! The training loop of one run: epochs of shuffled batches through the frozen trunk and the
//! (checkpointed) trainable head, Ultralytics' loss, gradients accumulated to a nominal batch, SGD
//! with warmup and a linear learning-rate decay, an exponential moving average of the weights
//! (what is written out and evaluated), skipped non-finite steps, and checkpoints to resume from
//! at epoch boundaries. Evaluation and writing ONNX files belong to the caller (the CLI).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use headroom_core::dataset::ImageRecord;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::data::make_batch;
use crate::loss::{LossConfig, detection_loss};
use crate::optim::Sgd;
use crate::{Error, Result, Student};

/// Everything that shapes a run (saved with it; see docs/TRAIN.md for the defaults' reasons).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Epochs.
    pub epochs: usize,
    /// Images per forward pass (1–2 is the point on a small device).
    pub batch: usize,
    /// Nominal batch: gradients are accumulated over `round(nbs / batch)` passes per step
    /// (Ultralytics' `nbs`, 64).
    pub nbs: usize,
    /// Initial learning rate.
    pub lr0: f64,
    /// Final learning rate as a fraction of `lr0` (linear decay).
    pub lrf: f64,
    /// SGD momentum (Nesterov).
    pub momentum: f64,
    /// Weight decay at the nominal batch (scaled by `batch · accumulate / nbs`), weights only.
    pub weight_decay: f64,
    /// Warmup length in epochs (at least 100 iterations, as Ultralytics).
    pub warmup_epochs: f64,
    /// Momentum at the start of warmup.
    pub warmup_momentum: f64,
    /// Probability of a left-right flip per image.
    pub flip: f64,
    /// Recompute the head's segments in backward instead of keeping their activations.
    pub checkpoint: bool,
    /// Seed of the data order and the flips.
    pub seed: u64,
    /// Model input width and height.
    pub imgsz: [u32; 2],
    /// Non-finite losses in a row that stop the run.
    pub max_bad_steps: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 10,
            batch: 2,
            nbs: 64,
            lr0: 1e-4,
            lrf: 0.01,
            momentum: 0.937,
            weight_decay: 5e-4,
            warmup_epochs: 3.0,
            warmup_momentum: 0.8,
            flip: 0.5,
            checkpoint: true,
            seed: 0,
            imgsz: [640, 640],
            max_bad_steps: 10,
        }
    }
}

/// What one epoch did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochStats {
    /// 0-based epoch.
    pub epoch: usize,
    /// Mean box, cls and dfl (or L1) terms (with gains) over the epoch's passes.
    pub loss: [f64; 3],
    /// Learning rate of the weights at the end of the epoch.
    pub lr: f64,
    /// Passes whose loss was not finite (skipped).
    pub bad_steps: usize,
    /// Optimiser steps taken.
    pub optimizer_steps: u64,
    /// Seconds.
    pub seconds: f64,
}

/// The state a run resumes from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Epochs finished.
    pub epochs_done: usize,
    /// Optimiser steps taken.
    pub optimizer_steps: u64,
    /// EMA updates.
    pub ema_updates: u64,
}

/// A run in progress.
pub struct Trainer<'a> {
    student: &'a Student,
    config: TrainConfig,
    loss: LossConfig,
    grids: Vec<(i64, i64)>,
    sgd: Sgd,
    ema: BTreeMap<String, Tensor>,
    progress: Progress,
}

const EMA_DECAY: f64 = 0.9999;
const EMA_TAU: f64 = 2000.0;

impl<'a> Trainer<'a> {
    /// A new run of `student` with `config`; `loss` describes the head.
    pub fn new(student: &'a Student, config: TrainConfig, loss: LossConfig) -> Result<Trainer<'a>> {
        if config.batch == 0 || config.epochs == 0 || config.nbs == 0 {
            return Err(Error::Data { reason: "epochs, batch and nbs must be at least 1".into() });
        }
        let inspection = student.inspection();
        let stride0 = inspection.strides.first().copied().unwrap_or(8);
        let grids: Vec<(i64, i64)> = inspection
            .strides
            .iter()
            .map(|s| (i64::from(config.imgsz[1]) / s, i64::from(config.imgsz[0]) / s))
            .collect();
        if i64::from(config.imgsz[0]) % stride0 != 0 || i64::from(config.imgsz[1]) % stride0 != 0 {
            return Err(Error::Data {
                reason: format!("input {:?} is not a multiple of stride {stride0}", config.imgsz),
            });
        }
        let accumulate = accumulate(&config);
        let weight_decay = config.weight_decay * (config.batch * accumulate) as f64 / config.nbs as f64;
        let sgd = Sgd::new(config.lr0, config.momentum, true, weight_decay);
        let ema = student.parameters().into_iter().map(|(n, p)| (n.to_string(), p.detach().copy())).collect();
        let progress = Progress { epochs_done: 0, optimizer_steps: 0, ema_updates: 0 };
        Ok(Trainer { student, config, loss, grids, sgd, ema, progress })
    }

    /// Where the run stands.
    pub fn progress(&self) -> &Progress {
        &self.progress
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Trains one epoch on `records`; `progress(pass, passes, components)` after each pass.
    pub fn train_epoch(
        &mut self,
        records: &[ImageRecord],
        progress: &dyn Fn(usize, usize, [f64; 3]),
    ) -> Result<EpochStats> {
        let started = std::time::Instant::now();
        let epoch = self.progress.epochs_done;
        let cfg = self.config.clone();
        let order = shuffled(records.len(), cfg.seed, epoch);
        let passes = order.len().div_ceil(cfg.batch);
        let warmup = if cfg.warmup_epochs > 0.0 {
            ((cfg.warmup_epochs * passes as f64).round() as u64).max(100)
        } else {
            0
        };
        let mut rng =
            ChaCha8Rng::seed_from_u64(cfg.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (epoch as u64 + 1));
        let lf = |e: usize| (1.0 - e as f64 / cfg.epochs as f64) * (1.0 - cfg.lrf) + cfg.lrf;
        let (mut sums, mut counted, mut bad, mut bad_in_row) = ([0f64; 3], 0usize, 0usize, 0usize);
        let mut since_step = 0usize;
        let mut lr = cfg.lr0 * lf(epoch);
        self.student.zero_grad();
        for (pass, chunk) in order.chunks(cfg.batch).enumerate() {
            let ni = (pass + passes * epoch) as u64;
            let (accumulate_now, momentum);
            if ni <= warmup && warmup > 0 {
                let t = ni as f64 / warmup as f64;
                accumulate_now =
                    ((1.0 + t * (cfg.nbs as f64 / cfg.batch as f64 - 1.0)).round() as usize).max(1);
                lr = t * cfg.lr0 * lf(epoch);
                momentum = cfg.warmup_momentum + t * (cfg.momentum - cfg.warmup_momentum);
            } else {
                accumulate_now = accumulate(&cfg);
                lr = cfg.lr0 * lf(epoch);
                momentum = cfg.momentum;
            }
            let batch_records: Vec<&ImageRecord> = chunk.iter().map(|&i| &records[i]).collect();
            let flips: Vec<bool> = chunk.iter().map(|_| rng.random::<f64>() < cfg.flip).collect();
            let batch = make_batch(
                &batch_records,
                cfg.imgsz[0],
                cfg.imgsz[1],
                &flips,
                self.student.executor().device(),
            )?;
            let cut = self.student.trunk(&batch.images)?;
            let mut components = [0f64; 3];
            let loss_fn = |outputs: &[Tensor]| {
                let (boxes, scores) = head_tensors(outputs)?;
                let out = detection_loss(&self.loss, &boxes, &scores, &self.grids, &batch.targets)?;
                components = out.components;
                Ok(out.total)
            };
            let value = if cfg.checkpoint {
                self.student.backward_checkpointed(&cut, loss_fn)?
            } else {
                self.student.backward(&cut, loss_fn)?
            };
            if !value.is_finite() {
                bad += 1;
                bad_in_row += 1;
                self.student.zero_grad();
                since_step = 0;
                tracing::warn!("epoch {epoch} pass {pass}: loss {value}, step skipped");
                if bad_in_row >= cfg.max_bad_steps {
                    return Err(Error::Data {
                        reason: format!(
                            "{bad_in_row} non-finite losses in a row (epoch {epoch}, pass {pass}): lower --lr0, or check the labels"
                        ),
                    });
                }
                continue;
            }
            bad_in_row = 0;
            for (s, c) in sums.iter_mut().zip(components) {
                *s += c;
            }
            counted += 1;
            since_step += 1;
            if since_step >= accumulate_now || pass + 1 == passes {
                self.sgd.momentum = momentum;
                self.sgd.step_with(&self.student.parameters(), lr, lr)?;
                self.student.zero_grad();
                self.progress.optimizer_steps += 1;
                self.update_ema()?;
                since_step = 0;
            }
            progress(pass + 1, passes, components);
        }
        self.progress.epochs_done += 1;
        let mean = sums.map(|s| s / counted.max(1) as f64);
        Ok(EpochStats {
            epoch,
            loss: mean,
            lr,
            bad_steps: bad,
            optimizer_steps: self.progress.optimizer_steps,
            seconds: started.elapsed().as_secs_f64(),
        })
    }

    fn update_ema(&mut self) -> Result<()> {
        let _guard = tch::no_grad_guard();
        self.progress.ema_updates += 1;
        let d = EMA_DECAY * (1.0 - (-(self.progress.ema_updates as f64) / EMA_TAU).exp());
        for (name, p) in self.student.parameters() {
            if let Some(e) = self.ema.get_mut(name) {
                let _ = e.f_mul_scalar_(d)?.f_add_(&p.f_mul_scalar(1.0 - d)?)?;
            }
        }
        Ok(())
    }

    /// The averaged weights (what is written out and evaluated), name → row-major f32.
    pub fn ema_weights(&self) -> Result<BTreeMap<String, Vec<f32>>> {
        self.ema
            .iter()
            .map(|(n, t)| Ok((n.clone(), Vec::<f32>::try_from(&t.f_reshape([-1])?.f_to_kind(Kind::Float)?)?)))
            .collect()
    }

    /// Writes the weights, averages, momentum buffers and progress to `path` atomically (a
    /// temporary beside it, then a rename).
    pub fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (n, p) in self.student.parameters() {
            named.push((format!("param/{n}"), p.detach().copy()));
        }
        for (n, e) in &self.ema {
            named.push((format!("ema/{n}"), e.shallow_clone()));
        }
        for (n, b) in self.sgd.buffers() {
            named.push((format!("momentum/{n}"), b.shallow_clone()));
        }
        let state = serde_json::to_vec(&self.progress).map_err(|e| Error::Data { reason: e.to_string() })?;
        named.push(("state".into(), Tensor::from_slice(&state)));
        let tmp = headroom_core::fsio::temporary_path(path);
        Tensor::save_multi(&named, &tmp)?;
        std::fs::rename(&tmp, path).map_err(|e| Error::Data { reason: format!("{}: {e}", path.display()) })
    }

    /// Restores a checkpoint written by [`Trainer::save_checkpoint`] for the same student.
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<()> {
        let named = Tensor::load_multi(path)?;
        let map: HashMap<String, Tensor> = named.into_iter().collect();
        let _guard = tch::no_grad_guard();
        for (n, p) in self.student.parameters() {
            let saved = map.get(&format!("param/{n}")).ok_or_else(|| Error::Data {
                reason: format!(
                    "{}: no weights for `{n}`: a checkpoint of another model or split",
                    path.display()
                ),
            })?;
            let mut p = p.shallow_clone();
            p.f_copy_(saved)?;
        }
        for (n, e) in self.ema.iter_mut() {
            if let Some(saved) = map.get(&format!("ema/{n}")) {
                e.f_copy_(saved)?;
            }
        }
        let buffers = map
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("momentum/").map(|n| (n.to_string(), v.shallow_clone())))
            .collect();
        self.sgd.set_buffers(buffers);
        let state = map
            .get("state")
            .ok_or_else(|| Error::Data { reason: format!("{}: no state", path.display()) })?;
        let bytes = Vec::<u8>::try_from(state)?;
        self.progress = serde_json::from_slice(&bytes).map_err(|e| Error::Data { reason: e.to_string() })?;
        Ok(())
    }
}

/// Passes between optimiser steps after warmup.
fn accumulate(config: &TrainConfig) -> usize {
    ((config.nbs as f64 / config.batch as f64).round() as usize).max(1)
}

/// The head outputs (per level: box distribution, class logits) as `[B, 4·reg_max, A]` and
/// `[B, nc, A]`, levels concatenated in order.
pub fn head_tensors(outputs: &[Tensor]) -> Result<(Tensor, Tensor)> {
    if outputs.is_empty() || !outputs.len().is_multiple_of(2) {
        return Err(Error::Loss {
            reason: format!("{} head outputs, expected box and class per level", outputs.len()),
        });
    }
    let (boxes, scores): (Vec<Tensor>, Vec<Tensor>) =
        outputs.chunks(2).map(|pair| (pair[0].flatten(2, 3), pair[1].flatten(2, 3))).unzip();
    Ok((Tensor::cat(&boxes, 2), Tensor::cat(&scores, 2)))
}

/// A permutation of `0..n` for `epoch`, the same for the same seed (Fisher–Yates).
fn shuffled(n: usize, seed: u64, epoch: usize) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (epoch as u64).wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = ((u128::from(rng.random::<u64>()) * (i as u128 + 1)) >> 64) as usize;
        order.swap(i, j);
    }
    order
}
