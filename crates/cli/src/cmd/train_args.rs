//! `headroom train`'s arguments: the flags, their defaults and parsers (the verb itself is
//! `train.rs`; the spec they make, `train_spec.rs`).

#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
use std::path::Path;
use std::path::PathBuf;

use super::device_arg::{BoardArgs, DEVICE_VALUES, device_arg};
pub use super::train_shared::{OptimizerArg, part_arg};
use headroom_onnx::Trainable;
use headroom_plan::{DeviceChoice, PlanMode};
use headroom_train::config::limits;
use headroom_train::memory_guard::Allocator;

/// Arguments of `headroom train`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The student, an Ultralytics ONNX detector export (or a headroom export of one).
    #[arg(long, value_name = "MODEL.onnx", required_unless_present = "resume")]
    pub model: Option<PathBuf>,
    /// The dataset (Ultralytics `data.yaml`; `headroom label` writes one over pseudo-labels).
    #[arg(long, value_name = "data.yaml", required_unless_present = "resume")]
    pub data: Option<PathBuf>,
    /// What trains: `all` (every layer: adapts most; docs/TRAIN.md), `head` (the Detect module: the
    /// least memory and time), `neck+head`, N (modules 0..N frozen, as Ultralytics' `freeze=N`; 0
    /// trains everything), or `affine` (the head, and a scale and shift per channel of every Conv
    /// before it, trained through the whole graph and folded into the Convs' weights when written)
    /// [default: all].
    #[arg(long, value_name = "PART", value_parser = part_arg)]
    pub train: Option<Trainable>,
    /// Freeze modules 0..N and train the rest (Ultralytics' `freeze=N`; the same as --train N).
    #[arg(long, value_name = "N", conflicts_with = "train")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub freeze: Option<usize>,
    /// Epochs [default: 30].
    #[arg(long, value_parser = super::provider_args::count_arg::<{ limits::EPOCHS_MIN }, { limits::EPOCHS_MAX }>)]
    pub epochs: Option<usize>,
    /// Stop when the val fitness has not improved for N epochs (Ultralytics' `patience`; 0: never).
    /// Saved with the run; a resumed run keeps it [default: 100].
    #[arg(long, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub patience: Option<usize>,
    /// Stop before an epoch that would end past this many hours of training, summed over the run's
    /// sessions (Ultralytics' `time`: the nightly window). Saved with the run.
    #[arg(long, value_name = "HOURS", value_parser = hours_arg, allow_negative_numbers = true)]
    pub time: Option<f64>,
    /// Images per forward pass (gradients accumulate to --nbs). Not given, a static export whose
    /// batch is fixed at 1 and whose trained part reshapes with it (attention in 11, v10, 26) trains
    /// at 1 (logged) [default: 2].
    #[arg(long, value_parser = super::provider_args::count_arg::<{ limits::BATCH_MIN }, { limits::BATCH_MAX }>)]
    pub batch: Option<usize>,
    /// Nominal batch: one optimiser step per round(nbs / batch) passes (Ultralytics' nbs: 64).
    /// `auto`: sized to the data, the largest power of two up to 64 with which the run still makes
    /// about 1,000 optimiser steps (2 for 100 images x 30 epochs, 16 for 1,000). Measured: with
    /// --train all it gained on new and old scenes; with the head alone 64 kept the old scenes
    /// better (docs/TRAIN.md) [default: auto].
    #[arg(long, value_parser = nbs_arg, value_name = "auto|N")]
    pub nbs: Option<Nbs>,
    /// Optimiser: auto (AdamW at Ultralytics' 0.002·5/(4+nc), at most 0.002, momentum 0.9, for
    /// runs of any length: unlike Ultralytics it never switches to SGD at 0.01 on long runs, which
    /// wrecks a converged model), sgd (Nesterov momentum 0.937) or adamw. auto by measurement: it
    /// kept and gained the most (docs/BENCHMARKS.md) [default: auto].
    #[arg(long, value_enum)]
    pub optimizer: Option<OptimizerArg>,
    /// Initial learning rate of sgd and adamw (warmup, then decay to lr0·0.01) [default: 1e-4;
    /// SGD at 1e-3 wrecked the converged demo model]. auto chooses its own and ignores this.
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub lr0: Option<f64>,
    /// Cosine instead of linear learning-rate decay.
    #[arg(long)]
    pub cos_lr: bool,
    /// Clip the gradients' L2 norm at each step to this (Ultralytics: 10; 0: off) [default: 10].
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub max_grad_norm: Option<f64>,
    /// Distillation: gain of a KL term between the teacher's soft class scores (written by
    /// `headroom label` beside its labels) and the student's, on the anchors assigned to objects
    /// [default: 0].
    #[arg(long, value_name = "WEIGHT")]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub kd: Option<f64>,
    /// Dense distillation: this teacher (an ONNX detector with the student's classes, box bins and
    /// strides) runs on every training batch, augmented and replayed images alike, and the
    /// student's class scores and box distributions are pulled toward the teacher's at every
    /// anchor (docs/TRAIN.md). Costs one teacher forward per image, where the frozen trunk runs
    /// (libtorch when nothing is frozen); `headroom plan --teacher` counts its memory.
    #[arg(long, value_name = "T.onnx")]
    pub teacher: Option<PathBuf>,
    /// Gain of the dense distillation term (with --teacher) [default: 1].
    #[arg(long, value_name = "WEIGHT", requires = "teacher")]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub dense_kd: Option<f64>,
    /// The ignore band: pseudo-labels whose teacher confidence lies in [LOW, HIGH) count neither
    /// as objects nor as background (the class term skips the anchors they cover), those below LOW
    /// are dropped; with --teacher also the anchors the teacher scores in that band. Human labels
    /// and replayed images are never affected. Label with `--conf LOW` to keep the low ones
    /// (docs/TRAIN.md).
    #[arg(long, value_name = "LOW,HIGH", value_parser = ignore_band)]
    pub ignore_band: Option<[f64; 2]>,
    /// Pull toward the starting weights against forgetting (L2-SP: adds anchor·(w − w₀) to each
    /// step's gradient; 0: off). --replay is the measured remedy (docs/TRAIN.md) [default: 0].
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub anchor: Option<f64>,
    /// Probability of a left-right flip per image [default: 0.5].
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub flip: Option<f64>,
    /// HSV augmentation gains: hue, saturation, value (Ultralytics' values; 0,0,0: off)
    /// [default: 0.015,0.7,0.4].
    #[arg(long, value_name = "H,S,V", value_parser = hsv_arg)]
    pub hsv: Option<[f32; 3]>,
    /// Random translation, a fraction of the input (Ultralytics' value; 0: off) [default: 0.1].
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub translate: Option<f32>,
    /// Random scale gain: the image is scaled by 1 ± this (Ultralytics' value; 0: off) [default:
    /// 0.5].
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub scale: Option<f32>,
    /// Probability of a 4-image mosaic (Ultralytics' value; 0: off) [default: 1].
    #[arg(long)]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub mosaic: Option<f32>,
    /// Map dataset classes onto the student's: SRC=DST,... (ids or names; DST `drop` removes them).
    #[arg(long, value_name = "SRC=DST,...")]
    pub remap: Option<String>,
    /// Input size: a static export takes only its own; a dynamic one is rounded up to a multiple
    /// of the largest stride [default: the export's size].
    #[arg(long, value_parser = super::provider_args::count_arg::<32, 8192>)]
    pub imgsz: Option<usize>,
    /// Where libtorch trains: cpu, cuda or cuda:N; auto: cuda when this libtorch sees a CUDA
    /// device, else cpu (logged). The run's config.toml keeps the device decided. A board preset
    /// (orin-nano-4, ...) goes to --board [default: auto].
    #[arg(long, value_name = DEVICE_VALUES, value_parser = device_arg)]
    pub device: Option<DeviceChoice>,
    /// The board whose budget --plan auto fits (`--board NAME|auto`, default auto with --plan
    /// auto), and more presets (`--devices FILE`). The run's config.toml keeps the preset
    /// (results.json's memory estimate is for it), so a resume needs no device file.
    #[command(flatten)]
    pub board: BoardArgs,
    /// `auto`: train with the first configuration of `headroom plan`'s fit ladder that fits the
    /// device's budget (from --train, --imgsz, --batch down); it overrides --batch,
    /// --no-checkpoint, --amp, --cache-features, --train and --imgsz. When that configuration fits
    /// as asked, larger batches up to --nbs that fit too are timed before the first step and the
    /// fastest per image trains (accumulation keeps --nbs). `off`: as given [default: off, or the
    /// preset's `plan`: field-accurate plans].
    #[arg(long, value_enum)]
    pub plan: Option<PlanMode>,
    #[command(flatten)]
    pub budget: super::plan::PlanArgs,
    /// Stop a pass that takes more than this above what the process held when training started
    /// (checked after every pass, Linux): it is then an out-of-memory error, and the run steps
    /// down one rung (batch halved, accumulation keeping --nbs; then checkpointing; then AMP on a
    /// GPU), reloads its last checkpoint and goes on, as after a real allocation failure.
    #[arg(long, value_name = "SIZE", value_parser = headroom_plan::Bytes::at_least_1mib)]
    pub memory_cap: Option<headroom_plan::Bytes>,
    /// Re-normalise the first N convolutions of the trunk to the new images before training: each
    /// one's per-channel output mean and std on the new images set to what they are on the old
    /// (--replay) images, folded into its weight and bias (AdaBN for BatchNorm-folded exports;
    /// forward passes only). The run folder keeps the result as renorm.onnx (0: off) [default: 0].
    #[arg(long, value_parser = super::provider_args::count_arg::<0, 64>)]
    pub renorm: Option<usize>,
    /// Quantization-aware training: every Conv that INT8.onnx (a `headroom export --int8` file of
    /// this model) quantizes computes from int8-rounded activation and weight, at that file's
    /// activation scales, with straight-through gradients. Needs --train all. `headroom export
    /// --int8 --qat` runs it for you (docs/ONNX.md "Quantization-aware training").
    #[arg(long, value_name = "INT8.onnx")]
    pub qat: Option<PathBuf>,
    /// Passes before --memory-cap is checked (to hit it mid-epoch in tests).
    #[arg(long, value_parser = super::provider_args::whole_arg::<u64>, hide = true)]
    pub memory_cap_after: Option<u64>,
    /// How freed tensor memory is reused (a process setting, not saved with the run): pooled (the
    /// default: a best-fit heap kept within 1.25x the most ever in use: fast's speed at about
    /// compact's memory), compact (every block above 128 KiB mapped fresh and unmapped: 2.5-3.6x
    /// slower on a CPU) or fast (glibc's defaults: up to 1.5x the memory). docs/TRAIN.md "Memory".
    #[arg(long, value_enum, default_value_t = Allocator::Pooled)]
    pub allocator: Allocator,
    /// Prepare the next batch (read, augment, run the teacher) on a second thread while the
    /// student's forward and backward run (a process setting: the run's result is the same). auto:
    /// on where a core is spare (--threads below the machine's cores, or a GPU), not with --profile
    /// and, with --plan auto, where the budget holds the teacher's working set beside the pass. docs/TRAIN.md "Preparing
    /// the next batch".
    #[arg(long, value_enum, default_value_t = headroom_plan::Prefetch::Auto)]
    pub prefetch: headroom_plan::Prefetch,
    /// Write a Chrome trace of libtorch's ops (its own profiler: forward, backward, optimiser, the
    /// average, each inside its phase) over --profile-passes passes after the run's first, to FILE;
    /// scripts/bench/step_profile.py sums it by op beside PyTorch's profile of Ultralytics.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<std::path::PathBuf>,
    /// Passes traced by --profile.
    #[arg(long, default_value_t = 8, value_parser = super::provider_args::count_arg::<1, 10000>)]
    pub profile_passes: usize,
    /// What runs the frozen trunk: ort (ONNX Runtime on the trunk cut out of the same file) or
    /// torch (headroom's libtorch executor) [default: ort].
    #[arg(long, value_enum)]
    pub trunk: Option<headroom_plan::TrunkRuntime>,
    /// Compute the trunk's outputs once per image (and its mirror image when --flip > 0), store them
    /// as fp16 in the run folder, and train epochs on them: only the trainable part runs. It turns
    /// the default augmentation off; refused with augmentation given (--mosaic, --scale,
    /// --translate, --hsv above 0) and with --teacher.
    #[arg(long)]
    pub cache_features: bool,
    /// Mixed precision on CUDA (fp16 autocast with a dynamic loss scale). On the CPU it is ignored
    /// with a warning: the run trains in fp32.
    #[arg(long)]
    pub amp: bool,
    /// Checkpoint within an epoch every N optimiser steps (0: not by steps). Epoch ends always
    /// write one; see also --save-interval [default: 0].
    #[arg(long, value_parser = super::provider_args::whole_arg::<u64>)]
    pub save_period: Option<u64>,
    /// Checkpoint within an epoch after the first optimiser step that ends this many seconds after
    /// the last checkpoint (0: not by time). A run killed at any moment loses about this much
    /// training, or --save-period steps when that comes first [default: 60].
    #[arg(long, value_name = "SECONDS")]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub save_interval: Option<f64>,
    /// Old-domain data to replay against forgetting: each epoch adds a seeded sample of this dataset's
    /// train split to the new images (docs/TRAIN.md "Forgetting: `--replay` and `--anchor`").
    #[arg(long, value_name = "OLD.yaml")]
    pub replay: Option<PathBuf>,
    /// Replayed images per new image and epoch (with --replay) [default: 1].
    #[arg(long, requires = "replay")]
    #[arg(value_parser = super::provider_args::number_arg::<f64>)]
    pub replay_fraction: Option<f64>,
    /// Keep every activation for backward instead of recomputing the checkpointed segments' (faster,
    /// more memory).
    #[arg(long)]
    pub no_checkpoint: bool,
    /// Seed of the data order and the augmentation [default: 0].
    #[arg(long, value_parser = super::provider_args::whole_arg::<u64>)]
    pub seed: Option<u64>,
    /// Parent folder of runs.
    #[arg(long, default_value = "runs/train", value_name = "DIR")]
    pub project: PathBuf,
    /// Run name: the run is written to PROJECT/NAME [default: train, train2, ...].
    #[arg(long)]
    pub name: Option<String>,
    /// Continue a run from its last checkpoint: RUN_DIR, or PROJECT/NAME without a value. The run's
    /// saved settings (config.toml) are the only ones used: a flag that disagrees with them is an
    /// error naming it, except --epochs, which may extend the run. A run killed before its first
    /// checkpoint starts again; a finished run says so and exits 0.
    #[arg(long, value_name = "RUN_DIR", num_args = 0..=1)]
    pub resume: Option<Option<PathBuf>>,
    /// libtorch and ONNX Runtime threads (0: their defaults).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
    /// A run preset (configs/runs.toml: field-quick, field-accurate) or a TOML file of one preset's
    /// keys: it sets --epochs, --train, --nbs and the augmentation flags that are not given (a
    /// preset with `distill = true` needs --teacher).
    #[arg(long, value_name = "NAME|FILE", conflicts_with = "resume")]
    pub preset: Option<String>,
    /// Print the run's results (results.json) on stdout as JSON at the end.
    #[arg(long)]
    pub json: bool,
}

/// `--time`: hours, more than 0.
pub(super) fn hours_arg(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(h) if limits::hours(h) => Ok(h),
        _ => Err(format!("`{text}` is not a number of hours in (0, 10000]")),
    }
}

/// `--nbs`: sized to the data, or a fixed nominal batch.
pub use headroom_run::request::Nbs;

pub(super) fn nbs_arg(text: &str) -> Result<Nbs, String> {
    if text == "auto" {
        return Ok(Nbs::Auto);
    }
    match text.parse::<usize>() {
        Ok(n) if (limits::NBS_MIN..=limits::NBS_MAX).contains(&n) => Ok(Nbs::Fixed(n)),
        _ => Err(format!("`{text}` is not `auto` or a count in {}..={}", limits::NBS_MIN, limits::NBS_MAX)),
    }
}

/// `--hsv H,S,V`, each in [0, 1].
fn hsv_arg(text: &str) -> Result<[f32; 3], String> {
    let wrong = || format!("`{text}`: expected three numbers H,S,V");
    let parts: Vec<f32> =
        text.split(',').map(|p| p.trim().parse::<f32>()).collect::<Result<_, _>>().map_err(|_| wrong())?;
    let gains: [f32; 3] = parts.try_into().map_err(|_| wrong())?;
    if gains.iter().all(|g| (0.0..=1.0).contains(g)) {
        Ok(gains)
    } else {
        Err(format!("`{text}`: each gain in [0, 1]"))
    }
}

/// `--ignore-band LOW,HIGH`: two numbers, 0 ≤ LOW < HIGH ≤ 1.
fn ignore_band(text: &str) -> Result<[f64; 2], String> {
    let wrong = || format!("{text}: expected LOW,HIGH with 0 <= LOW < HIGH <= 1 (e.g. 0.1,0.5)");
    let parts: Vec<f64> =
        text.split(',').map(|p| p.trim().parse::<f64>()).collect::<Result<_, _>>().map_err(|_| wrong())?;
    let [low, high]: [f64; 2] = parts.try_into().map_err(|_| wrong())?;
    if headroom_train::config::valid_ignore_band([low, high]) { Ok([low, high]) } else { Err(wrong()) }
}

/// A file path as given, made absolute so that a run resumes from any folder.
#[cfg(all(feature = "onnxruntime", feature = "libtorch"))]
pub fn absolute(flag: &str, path: &Path) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).map_err(|e| anyhow::anyhow!("{flag} {}: {e}", path.display()))
}
