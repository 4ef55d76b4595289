//! The labelling pipeline: image decoding and letterboxing on worker threads, inference on one
//! thread, decoding, NMS and writing on another, joined by bounded queues so that memory stays flat
//! whatever the number of images.
//!
//! ```text
//! workers ──(sync_channel)──► inference streams (batches) ──(sync_channel)──► writer
//! ```
//! Several inference streams (one session each, sharing the input queue) run in parallel when
//! given several detectors: for a small model on few cores, two 1-thread sessions do more work than
//! one 2-thread session, whose threads wait on each other between small operators.
//! An error in any stage stops the others: a stage whose queue's other end is gone returns.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use headroom_core::letterbox::{Letterbox, LetterboxOptions};
use ndarray::ArrayView4;

use super::output::Job;
use super::teacher::TeacherModel;
use crate::decode::OutputLayout;
use crate::detector::to_chw;
use crate::{Error, Result};

/// How the pipeline runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PipelineSettings {
    /// Image decoding and letterboxing threads (at least 1).
    pub workers: usize,
    /// Images per inference call (forced to the model's batch when that is fixed).
    pub batch: usize,
    /// Capacity of each queue, in items.
    pub queue: usize,
    /// Images modified less than this long ago are skipped, left for a later run (zero: none is);
    /// see [`headroom_core::imageio::usable_image`].
    pub settle: std::time::Duration,
    /// Images with more pixels are skipped before decoding
    /// ([`headroom_core::imageio::usable_image_within`]; [`headroom_core::imageio::MAX_PIXELS`]: no
    /// cap below Pillow's).
    pub max_pixels: u64,
}

/// The teacher sessions labelling runs side by side and the workers that prepare their images:
/// `streams` as asked, else 2 on a CPU-only session with two cores or more (1 otherwise), the CPU
/// threads split between them; `workers` as asked, else a quarter of the cores. Changes
/// `options.intra_threads` to each stream's share; returns `(streams, workers)`.
pub fn parallelism(
    options: &mut crate::provider::SessionOptions,
    streams: Option<usize>,
    workers: Option<usize>,
) -> (usize, usize) {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = match options.intra_threads {
        0 => cores,
        n => n,
    };
    let cpu_only = options.providers.iter().all(|p| *p == crate::provider::ExecutionProvider::Cpu);
    let streams = match streams {
        Some(n) => n,
        None if cpu_only && threads >= 2 => 2,
        None => 1,
    };
    if streams > 1 {
        options.intra_threads = (threads / streams).max(1);
    }
    (streams, workers.unwrap_or_else(|| cores.div_ceil(4)).max(1))
}

/// One letterboxed image, or why it could not be read.
#[derive(Debug)]
pub enum Prepared {
    /// Ready for inference: `[3, H, W]` values.
    Ready {
        /// Index into the job list.
        job: usize,
        /// The letterbox geometry.
        geometry: Letterbox,
        /// The input tensor of this image.
        tensor: Vec<f32>,
    },
    /// Unreadable.
    Failed {
        /// Index into the job list.
        job: usize,
        /// Why.
        reason: String,
    },
}

/// One image's raw output, or why it has none.
#[derive(Debug)]
pub enum Inferred {
    /// The model's output for this image.
    Ready {
        /// Index into the job list.
        job: usize,
        /// The letterbox geometry.
        geometry: Letterbox,
        /// The output layout.
        layout: OutputLayout,
        /// This image's `[d1, d2]` output, flat.
        output: Vec<f32>,
        /// `[d1, d2]`.
        dims: [usize; 2],
    },
    /// Unreadable image, passed through.
    Failed {
        /// Index into the job list.
        job: usize,
        /// Why.
        reason: String,
    },
}

/// Runs `jobs` (indices into `all`) through `detectors` (one inference stream each, all the same
/// model, in ONNX Runtime or libtorch), handing each result to `write` on a writer thread. Returns the writer's first error, else
/// the first inference error, else `Ok`.
///
/// When `cancel` becomes true, workers stop taking images and streams stop after their current
/// batch; what was inferred is still written, and the call returns `Ok`.
pub fn run_pipeline<T, W>(
    detectors: &mut [T],
    all: &[Job],
    jobs: &[usize],
    settings: PipelineSettings,
    cancel: &AtomicBool,
    write: W,
) -> Result<()>
where
    T: TeacherModel,
    W: FnMut(Inferred) -> Result<()> + Send,
{
    let Some(first) = detectors.first() else {
        return Err(Error::Mismatch { message: "no inference session to run".into() });
    };
    let letterbox = first.letterbox_options();
    let batch = first.static_batch().unwrap_or(settings.batch.max(1));
    let queue = settings.queue.max(batch * detectors.len());
    let next = AtomicUsize::new(0);
    let (prepared_tx, prepared_rx) = sync_channel::<Prepared>(queue);
    // Shared by the streams; taken out and dropped when they end, so that blocked workers return.
    let prepared_rx = Mutex::new(Some(prepared_rx));
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (inferred_tx, inferred_rx) = sync_channel::<Inferred>(queue);
        let mut workers = Vec::new();
        for _ in 0..settings.workers.max(1) {
            let tx = prepared_tx.clone();
            let next = &next;
            let rules = (settings.settle, settings.max_pixels);
            workers
                .push(scope.spawn(move || prepare_worker(all, jobs, next, (&letterbox, rules), cancel, &tx)));
        }
        drop(prepared_tx);
        let writer = scope.spawn(move || write_all(inferred_rx, write));
        let (main, others) = detectors.split_at_mut(1);
        let (rx, stop) = (&prepared_rx, &stop);
        // A stream that fails stops the others at their next batch.
        let run = move |detector: &mut T, tx: &SyncSender<Inferred>| {
            let result = infer_all(detector, rx, tx, batch, stop, cancel);
            if result.is_err() {
                stop.store(true, Ordering::Relaxed);
            }
            result
        };
        let streams: Vec<_> = others
            .iter_mut()
            .map(|detector| {
                let tx = inferred_tx.clone();
                scope.spawn(move || run(detector, &tx))
            })
            .collect();
        let mut inferred = run(&mut main[0], &inferred_tx);
        for stream in streams {
            let result = stream.join().unwrap_or(Err(Error::Pipeline { stage: "inference" }));
            inferred = inferred.and(result);
        }
        drop(rx.lock().map(|mut r| r.take()));
        drop(inferred_tx);
        let written = writer.join().unwrap_or(Err(Error::Pipeline { stage: "writer" }));
        for worker in workers {
            worker.join().map_err(|_| Error::Pipeline { stage: "image decoding" })?;
        }
        written.and(inferred)
    })
}

fn write_all<W: FnMut(Inferred) -> Result<()>>(rx: Receiver<Inferred>, mut write: W) -> Result<()> {
    for item in rx {
        write(item)?;
    }
    Ok(())
}

fn prepare_worker(
    all: &[Job],
    jobs: &[usize],
    next: &AtomicUsize,
    (letterbox, (settle, max_pixels)): (&LetterboxOptions, (std::time::Duration, u64)),
    cancel: &AtomicBool,
    tx: &SyncSender<Prepared>,
) {
    while !cancel.load(Ordering::Relaxed) {
        let Some(&job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else { return };
        let item = match read_checked(&all[job].source, settle, max_pixels) {
            Ok(image) => {
                let geometry = Letterbox::new(image.width(), image.height(), letterbox);
                Prepared::Ready { job, tensor: to_chw(&geometry.apply(&image)), geometry }
            }
            Err(e) => {
                // The manifest records the path beside the reason: do not repeat it inside.
                let text = e.to_string();
                let path = format!("{}: ", all[job].source.display());
                Prepared::Failed { job, reason: text.strip_prefix(&path).unwrap_or(&text).to_string() }
            }
        };
        if tx.send(item).is_err() {
            return;
        }
    }
}

/// Reads an image through the filter every step shares ([`headroom_core::imageio::usable_image`]):
/// a half-grey truncated JPEG, an empty file or one still being written is skipped, not labelled. A
/// JPEG with data after its end marker is labelled, with a warning.
fn read_checked(
    path: &std::path::Path,
    settle: std::time::Duration,
    max_pixels: u64,
) -> headroom_core::Result<image::RgbImage> {
    let usable = headroom_core::imageio::usable_image_within(path, settle, max_pixels)?;
    if let Some(warning) = usable.warning {
        tracing::warn!("{warning}");
    }
    Ok(usable.image)
}

/// Collects up to `max` ready images, blocking until the batch is full or the queue is closed;
/// unreadable images are handed to `failed` as they come. `None` when nothing is left.
pub fn next_batch(
    rx: &Receiver<Prepared>,
    max: usize,
    mut failed: impl FnMut(usize, String) -> bool,
) -> Option<Vec<(usize, Letterbox, Vec<f32>)>> {
    let mut batch = Vec::with_capacity(max);
    while batch.len() < max.max(1) {
        match rx.recv() {
            Ok(Prepared::Ready { job, geometry, tensor }) => batch.push((job, geometry, tensor)),
            Ok(Prepared::Failed { job, reason }) => {
                if !failed(job, reason) {
                    return None;
                }
            }
            Err(_) => break,
        }
    }
    (!batch.is_empty()).then_some(batch)
}

fn infer_all<T: TeacherModel>(
    detector: &mut T,
    rx: &Mutex<Option<Receiver<Prepared>>>,
    tx: &SyncSender<Inferred>,
    batch_size: usize,
    stop: &AtomicBool,
    cancel: &AtomicBool,
) -> Result<()> {
    let (w, h) = detector.input_size();
    let per_image = 3 * w as usize * h as usize;
    let mut input = Vec::with_capacity(batch_size * per_image);
    let mut layout = detector.declared_layout();
    let forward = |job, reason| tx.send(Inferred::Failed { job, reason }).is_ok();
    while !stop.load(Ordering::Relaxed) && !cancel.load(Ordering::Relaxed) {
        // One stream collects a whole batch at a time; the others wait for the queue meanwhile.
        let next = match rx.lock() {
            Ok(rx) => rx.as_ref().and_then(|rx| next_batch(rx, batch_size, forward)),
            Err(_) => return Err(Error::Pipeline { stage: "inference" }),
        };
        let Some(batch) = next else { break };
        input.clear();
        for (_, _, tensor) in &batch {
            input.extend_from_slice(tensor);
        }
        // A fixed batch larger than what is left is padded with zeros; their outputs are ignored.
        let rows = if detector.static_batch().is_some() { batch_size } else { batch.len() };
        input.resize(rows * per_image, 0.0);
        tracing::debug!("teacher call: {} images, input [{rows}, 3, {h}, {w}]", batch.len());
        let view = ArrayView4::from_shape((rows, 3, h as usize, w as usize), &input)
            .map_err(|e| Error::Mismatch { message: format!("input tensor: {e}") })?;
        let (output, shape) = detector.run_batch(view)?;
        let layout = match layout {
            Some(l) => l,
            None => *layout.insert(detector.layout_of(&shape)?),
        };
        let dims = [shape[1], shape[2]];
        let per_output = dims[0] * dims[1];
        if shape[0] < batch.len() || output.len() < batch.len() * per_output {
            let message = format!("the model returned {shape:?} for a batch of {}", batch.len());
            return Err(Error::Mismatch { message });
        }
        for (i, (job, geometry, _)) in batch.into_iter().enumerate() {
            let output = output[i * per_output..(i + 1) * per_output].to_vec();
            if tx.send(Inferred::Ready { job, geometry, layout, output, dims }).is_err() {
                return Ok(());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(job: usize) -> Prepared {
        let geometry = Letterbox::new(4, 4, &LetterboxOptions::square(4));
        Prepared::Ready { job, geometry, tensor: vec![job as f32] }
    }

    #[test]
    fn batches_fill_up_pass_failures_through_and_end_with_the_queue() {
        let (tx, rx) = sync_channel(16);
        for item in
            [ready(0), Prepared::Failed { job: 1, reason: "bad".into() }, ready(2), ready(3), ready(4)]
        {
            tx.send(item).expect("send");
        }
        drop(tx);
        let mut failed = Vec::new();
        let mut batches = Vec::new();
        while let Some(batch) = next_batch(&rx, 2, |job, _| {
            failed.push(job);
            true
        }) {
            batches.push(batch.iter().map(|b| b.0).collect::<Vec<_>>());
        }
        assert_eq!(batches, vec![vec![0, 2], vec![3, 4]]);
        assert_eq!(failed, vec![1]);
    }

    #[test]
    fn a_partial_last_batch_and_a_stopped_consumer() {
        let (tx, rx) = sync_channel(16);
        for job in 0..3 {
            tx.send(ready(job)).expect("send");
        }
        tx.send(Prepared::Failed { job: 3, reason: "bad".into() }).expect("send");
        drop(tx);
        let first = next_batch(&rx, 8, |_, _| false);
        // The failure handler says the downstream is gone: stop.
        assert!(first.is_none());
        let (tx, rx) = sync_channel(4);
        tx.send(ready(7)).expect("send");
        drop(tx);
        assert_eq!(next_batch(&rx, 8, |_, _| true).map(|b| b.len()), Some(1));
        assert!(next_batch(&rx, 8, |_, _| true).is_none());
    }
}
