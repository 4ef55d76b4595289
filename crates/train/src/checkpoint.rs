//! Checkpoints of a run: the trained weights, their average, the optimiser's state and the
//! progress (the position in the epoch included), in one file that a run resumes from exactly.
//!
//! libtorch serialises into the temporary of [`headroom_core::fsio::write_atomic_with`] as it goes
//! (not into memory: a whole copy was the run's peak): a full disk or any other I/O failure is an
//! error naming the file, the temporary is removed and the previous checkpoint stays whole. The
//! writer never fails towards libtorch (its own file writer reports a failed write from a
//! destructor, which aborts the process): it keeps the first error and reports it after.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::state::Progress;
use crate::trainer::{Optimizer, Trainer};
use crate::{Error, Result};

/// Where libtorch writes a checkpoint: the temporary file, buffered. It never reports an error to
/// libtorch (a failed write thrown through its archive writer can reach a destructor, which
/// aborts): the first error is kept, later bytes are dropped, and [`Sink::finish`] returns it.
#[derive(Clone)]
struct Sink(std::sync::Arc<std::sync::Mutex<SinkState>>);

struct SinkState {
    out: std::io::BufWriter<std::fs::File>,
    written: u64,
    error: Option<std::io::Error>,
}

impl Sink {
    fn new(file: std::fs::File) -> Sink {
        let state = SinkState { out: std::io::BufWriter::new(file), written: 0, error: None };
        Sink(std::sync::Arc::new(std::sync::Mutex::new(state)))
    }

    /// Flushes what is buffered; the bytes written, or the first error.
    fn finish(&self) -> std::io::Result<u64> {
        let mut state = self.0.lock().map_err(|_| std::io::Error::other("a checkpoint writer panicked"))?;
        if let Some(e) = state.error.take() {
            return Err(e);
        }
        state.out.flush()?;
        Ok(state.written)
    }
}

impl std::io::Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut state) = self.0.lock()
            && state.error.is_none()
        {
            match state.out.write_all(buf) {
                Ok(()) => state.written += buf.len() as u64,
                Err(e) => state.error = Some(e),
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The JSON inside a checkpoint.
#[derive(Serialize, Deserialize)]
struct SavedState {
    progress: Progress,
    #[serde(default)]
    adam_steps: u64,
    /// The batch of the run when it was saved (0: older checkpoints).
    #[serde(default)]
    batch: usize,
}

impl Trainer<'_> {
    /// Writes the weights, averages, optimiser state and progress (position in the epoch included)
    /// to `path` atomically (a temporary beside it, then a rename).
    pub fn save_checkpoint(&self, path: &Path) -> Result<()> {
        let started = std::time::Instant::now();
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (n, p) in self.student.parameters() {
            named.push((format!("param/{n}"), p.detach()));
        }
        for (n, e) in self.ema.tensors() {
            named.push((format!("ema/{n}"), e.shallow_clone()));
        }
        let mut adam_steps = 0;
        match &self.optimizer {
            Optimizer::Sgd(sgd) => {
                for (n, b) in sgd.buffers() {
                    named.push((format!("momentum/{n}"), b.shallow_clone()));
                }
            }
            Optimizer::AdamW(adam) => {
                let (steps, moments) = adam.state();
                adam_steps = steps;
                named.extend(moments.into_iter().map(|(k, v)| (format!("adam/{k}"), v)));
            }
        }
        let state = serde_json::to_vec(&SavedState {
            progress: self.progress.clone(),
            adam_steps,
            batch: self.config.batch,
        })
        .map_err(|e| Error::File { path: path.to_path_buf(), reason: e.to_string() })?;
        named.push(("state".into(), Tensor::from_slice(&state)));
        // Streamed into the temporary file: a serialised copy of everything in memory at once was
        // the run's peak (+46 MiB at 640 for YOLOv8n, docs/BENCHMARKS.md "The allocator").
        let mut written = 0;
        headroom_core::fsio::write_atomic_with(path, |out| {
            let sink = Sink::new(out.get_ref().try_clone()?);
            Tensor::save_multi_to_stream(&named, sink.clone()).map_err(|e| {
                std::io::Error::other(crate::error::torch_message(&e.to_string()).to_string())
            })?;
            written = sink.finish()?;
            Ok(())
        })?;
        self.saved_at.set(std::time::Instant::now());
        tracing::debug!(
            "checkpoint {} written: {:.1} MB in {:.3} s",
            path.display(),
            written as f64 / 1e6,
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Restores a checkpoint written by [`Trainer::save_checkpoint`] for the same student. Saved
    /// with another batch (a step down since), its position in the epoch is converted to this
    /// configuration's batch (exact when one divides the other the way halving does).
    pub fn load_checkpoint(&mut self, path: &Path) -> Result<()> {
        let file = std::fs::File::open(path).map_err(|e| headroom_core::Error::io(path, e))?;
        let named = Tensor::load_multi_from_stream(std::io::BufReader::new(file)).map_err(|e| {
            // libtorch's first sentence; the rest guesses at what the message below says.
            let text = e.to_string();
            let why = crate::error::torch_message(&text).split(". ").next().unwrap_or_default().to_string();
            Error::File {
                path: path.to_path_buf(),
                reason: format!("not a readable checkpoint ({why}): the file is damaged: restore it, or start a new run with another --name"),
            }
        })?;
        let map: HashMap<String, Tensor> = named.into_iter().collect();
        let _guard = tch::no_grad_guard();
        for (n, p) in self.student.parameters() {
            let saved = map.get(&format!("param/{n}")).ok_or_else(|| Error::File {
                path: path.to_path_buf(),
                reason: format!("no weights for `{n}`: a checkpoint of another model or split"),
            })?;
            let mut p = p.shallow_clone();
            p.f_copy_(saved)?;
        }
        for (n, saved) in map.iter().filter_map(|(k, v)| Some((k.strip_prefix("ema/")?, v))) {
            self.ema.restore(n, saved)?;
        }
        let state = map.get("state").ok_or_else(|| Error::File {
            path: path.to_path_buf(),
            reason: "no state: not a headroom checkpoint".into(),
        })?;
        let bytes = Vec::<u8>::try_from(state)?;
        let saved: SavedState = serde_json::from_slice(&bytes)
            .map_err(|e| Error::File { path: path.to_path_buf(), reason: e.to_string() })?;
        let strip = |prefix: &str| -> HashMap<String, Tensor> {
            map.iter()
                .filter_map(|(k, v)| k.strip_prefix(prefix).map(|n| (n.to_string(), v.shallow_clone())))
                .collect()
        };
        match &mut self.optimizer {
            Optimizer::Sgd(sgd) => sgd.set_buffers(strip("momentum/")),
            Optimizer::AdamW(adam) => adam.set_state(saved.adam_steps, &strip("adam/")),
        }
        self.progress = saved.progress;
        if saved.batch > 0 && saved.batch != self.config.batch {
            self.progress.pass = self.progress.pass * saved.batch / self.config.batch;
        }
        Ok(())
    }
}
