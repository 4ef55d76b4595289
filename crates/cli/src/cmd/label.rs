//! `headroom label`: pseudo-label a folder of images with a teacher ONNX detector (docs/LABEL.md).

use std::path::PathBuf;

#[cfg(feature = "onnxruntime")]
use anyhow::Context as _;
use headroom_infer::decode::DecodeOptions;
use headroom_infer::label::job::{DEFAULT_BATCH, LabelJob, TeacherRuntime};

use super::Outcome;
use super::decode_args::DecodeArgs;
use super::provider_args::{ProviderArgs, count_arg};

/// Arguments of `headroom label`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The teacher, an Ultralytics ONNX detector export.
    #[arg(long, value_name = "T.onnx")]
    pub teacher: PathBuf,
    /// The folder of images to label (searched recursively).
    #[arg(long, value_name = "DIR")]
    pub images: PathBuf,
    /// The dataset folder to write (Ultralytics layout); a rerun resumes it.
    #[arg(long, value_name = "DATASET")]
    pub out: PathBuf,
    /// Minimum confidence of a kept box (Ultralytics `predict`'s default).
    #[arg(long, default_value_t = 0.25)]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub conf: f32,
    /// Detection thresholds.
    #[command(flatten)]
    pub thresholds: DecodeArgs,
    /// Teacher → student classes: a file, or inline `0=2,1=0` (teacher id or name = student id).
    /// Unmapped teacher classes are dropped and counted.
    #[arg(long, value_name = "MAP")]
    pub class_map: Option<String>,
    /// Drop boxes narrower or lower than this many image pixels.
    #[arg(long, default_value_t = 0.0, value_name = "PIXELS")]
    #[arg(value_parser = super::provider_args::number_arg::<f32>)]
    pub min_box: f32,
    /// Also store the N best pre-NMS candidates per image in the soft-score file.
    #[arg(long, default_value_t = 0, value_name = "N")]
    #[arg(value_parser = super::provider_args::whole_arg::<usize>)]
    pub topk: usize,
    /// Image decoding and letterboxing threads (1–256) [default: a quarter of the cores, at least 1].
    #[arg(long, value_parser = count_arg::<1, 256>)]
    pub workers: Option<usize>,
    /// Images per inference call when the teacher's batch is dynamic (a fixed batch is used as is;
    /// 1–1024).
    #[arg(long, default_value_t = DEFAULT_BATCH, value_parser = count_arg::<1, 1024>)]
    pub batch: usize,
    /// Inference sessions running in parallel, sharing `--threads` (each gets threads/streams) and
    /// each holding its own copy of the model [default: 2 on the CPU provider with 2 or more
    /// threads, else 1]. On a CPU two sessions of half the threads outrun one session
    /// (docs/BENCHMARKS.md); on a GPU each session would build its own engine.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub streams: Option<u16>,
    /// Copy images into DATASET/images instead of symlinking them.
    #[arg(long, conflicts_with = "hardlink_images")]
    pub copy_images: bool,
    /// Never label an image with the bytes of a val image of this dataset (repeatable): a holdout
    /// or old scenes kept inside the folder of new images stay out of training. `headroom field
    /// run` gives its --holdout and --old.
    #[arg(long, value_name = "DATA.yaml")]
    pub exclude_like: Vec<PathBuf>,
    /// Hard-link images into DATASET/images (a copy where the file systems differ): the dataset
    /// keeps its pixels when the images folder moves or a camera deletes or replaces its files
    /// (`headroom field run` labels so).
    #[arg(long)]
    pub hardlink_images: bool,
    /// Keep at most N images in the dataset: the newest by modification time, besides every image
    /// with a human label; older ones leave it (their link and teacher labels are removed; a human
    /// label never is). `headroom field run` bounds its labelled set with it.
    #[arg(long, value_name = "N", value_parser = super::provider_args::count_arg::<1, 100_000_000>)]
    pub max_images: Option<usize>,
    /// Relabel finished images too, even with another teacher, settings or split (human labels stay).
    #[arg(long)]
    pub force: bool,
    /// Fraction of the images held out as the val split (0 ≤ F < 1), chosen by a hash of each
    /// image's path and --seed: an image always lands in the same split, also when a run is resumed
    /// or more images are added. The split is DATASET/train.txt and val.txt, named by data.yaml
    /// [default: the dataset's recorded split; else 0.2 with at least 10 images, else 0]. With 0
    /// nothing is held out: data.yaml's val is the training images (a warning says so).
    #[arg(long, value_name = "F", value_parser = fraction_arg, allow_negative_numbers = true)]
    pub val_fraction: Option<f64>,
    /// Seed of the split's hash [default: the dataset's recorded seed, else 0].
    #[arg(long, value_parser = super::provider_args::whole_arg::<u64>, value_name = "N")]
    pub seed: Option<u64>,
    /// Which images are too new to read yet.
    #[command(flatten)]
    pub settle: super::settle_arg::SettleArgs,
    /// Skip images with more than N pixels, before decoding (a frame of N pixels holds 3N bytes
    /// decoded). `headroom field run` sizes it for the board: a 32nd of its memory [default:
    /// 178956970, Pillow's decompression-bomb limit].
    #[arg(long, value_name = "N", value_parser = super::provider_args::count_arg::<100, 178_956_970>)]
    pub max_pixels: Option<usize>,
    /// What runs the teacher: onnxruntime, torch (headroom's libtorch executor: inference only,
    /// fp16 autocast on CUDA, batched), or auto: torch where --device is (or finds) a GPU that this
    /// ONNX Runtime has no provider for and libtorch sees (a Jetson bundle's CPU-only ONNX
    /// Runtime), else onnxruntime. On the CPU both give the same labels (docs/LABEL.md).
    #[arg(long, value_enum, default_value_t = TeacherRuntime::Auto)]
    pub runtime: TeacherRuntime,
    /// Print the manifest as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Execution providers.
    #[command(flatten)]
    pub provider: ProviderArgs,
}

/// `--val-fraction`: a number with 0 ≤ F < 1.
fn fraction_arg(text: &str) -> Result<f64, String> {
    let fraction: f64 = text.trim().parse().map_err(|_| format!("`{text}` is not a number"))?;
    headroom_infer::label::split::check_fraction(fraction)?;
    Ok(fraction)
}

/// Runs `headroom label`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    run_job(&args.job()?)
}

impl Args {
    /// The job these flags make.
    fn job(&self) -> anyhow::Result<LabelJob> {
        use headroom_infer::label::output::Placement;
        Ok(LabelJob {
            teacher: self.teacher.clone(),
            images: self.images.clone(),
            out: self.out.clone(),
            decode: self.thresholds.apply(self.conf, DecodeOptions::predict())?,
            class_map: self.class_map.clone(),
            min_box: self.min_box,
            top_k: self.topk,
            workers: self.workers,
            batch: self.batch,
            streams: self.streams,
            images_as: if self.copy_images {
                Placement::Copy
            } else if self.hardlink_images {
                Placement::Hardlink
            } else {
                Placement::Symlink
            },
            exclude_like: self.exclude_like.clone(),
            max_images: self.max_images,
            force: self.force,
            val_fraction: self.val_fraction,
            seed: self.seed,
            settle: self.settle.duration(),
            max_pixels: self.max_pixels.map(|n| n as u64),
            runtime: self.runtime,
            session: self.provider.request()?,
            json: self.json,
        })
    }
}

/// Runs one labelling as `job` asks.
pub fn run_job(job: &LabelJob) -> anyhow::Result<Outcome> {
    job.check()?;
    let class_map = job.class_map()?;
    label(job, class_map)
}

#[cfg(feature = "onnxruntime")]
fn label(job: &LabelJob, class_map: Option<(String, String)>) -> anyhow::Result<Outcome> {
    let opening = || format!("opening the teacher {}", job.teacher.display());
    if let Some(device) = headroom_run::label_torch::teacher_device(job)? {
        let threads = match job.session.threads {
            0 => std::thread::available_parallelism().map_or(1, usize::from),
            n => n,
        };
        headroom_train::tch::set_num_threads(i32::try_from(threads).unwrap_or(1));
        let teacher =
            headroom_run::label_torch::TorchTeacher::open(&job.teacher, device).with_context(opening)?;
        let workers = job.workers.unwrap_or_else(|| threads.div_ceil(4)).max(1);
        return label_with(job, &mut [teacher], workers, class_map);
    }
    let mut options = job.session.options()?;
    let (streams, workers) =
        headroom_infer::label::pipeline::parallelism(&mut options, job.streams.map(usize::from), job.workers);
    let mut teachers = (0..streams)
        .map(|_| headroom_infer::detector::Detector::open(&job.teacher, &options))
        .collect::<Result<Vec<_>, _>>()
        .with_context(opening)?;
    label_with(job, &mut teachers, workers, class_map)
}

#[cfg(feature = "onnxruntime")]
fn label_with<T: headroom_infer::label::TeacherModel>(
    job: &LabelJob,
    teachers: &mut [T],
    workers: usize,
    class_map: Option<(String, String)>,
) -> anyhow::Result<Outcome> {
    use headroom_infer::label::label_folder;

    let interrupt = super::interrupt::Interrupt::install()?;
    let request = job.request(workers, class_map, Some(interrupt.flag()));
    let bar = super::progress::bar(0, "label");
    let manifest = label_folder(teachers, &request, &|done, total| {
        bar.set_length(total as u64);
        bar.set_position(done as u64)
    });
    super::progress::end(&bar, manifest.is_ok());
    if let (Err(headroom_infer::Error::Interrupted { labelled, remaining }), Some(signal)) =
        (&manifest, interrupt.signal())
    {
        eprintln!(
            "stopped by {}: {labelled} images labelled and saved, {remaining} left; rerun the same command to resume",
            super::interrupt::signal_name(signal)
        );
        return Ok(Outcome::Interrupted(signal));
    }
    let manifest =
        manifest.with_context(|| format!("labelling {} into {}", job.images.display(), job.out.display()))?;
    if job.json {
        println!("{}", serde_json::to_string_pretty(&manifest)?);
    } else {
        print!("{manifest}");
        let preview = job.out.join(headroom_infer::label::preview::PREVIEW_FILE);
        if preview.exists() {
            println!("preview: {}", preview.display());
        }
        println!("dataset: {}", job.out.join("data.yaml").display());
    }
    Ok(Outcome::Success)
}

#[cfg(not(feature = "onnxruntime"))]
fn label(_job: &LabelJob, _class_map: Option<(String, String)>) -> anyhow::Result<Outcome> {
    Err(headroom_infer::Error::FeatureDisabled { feature: "onnxruntime" }.into())
}
