//! `headroom export`: deployable variants of a detector, each measured against the FP32 file (size,
//! ONNX Runtime CPU time per image, mAP50-95 on a val split when given):
//!
//! - `--fp16`: weights and compute in float16, inputs, outputs and the head's decode in float32;
//! - `--int8`: Q/DQ ONNX (per-channel int8 weights, per-tensor int8 activations on every Conv
//!   outside the decode) calibrated on `--calib` images, plus the TensorRT calibration cache for
//!   implicit INT8 (`<stem>.int8.calib`); `--sensitivity` keeps the Convs whose quantization hurts
//!   most in float until the mAP drop is within `--max-drop`;
//! - `--engine`: TensorRT engines built with trtexec where it exists, else the command to run on
//!   the device.
//!
//! The work is `headroom_export::export`; this file maps the flags to a job
//! (`headroom_export::ExportJob`, which the field loop's export step hands its child too), runs it,
//! draws its progress, and prints its report. The files of one export appear together or not at all; Ctrl-C
//! or SIGTERM stops at the next stage, publishes nothing and exits 130 or 143.
//!
//! Details in docs/ONNX.md ("FP16 export", "INT8 export", "Writing the files").

mod qat;

use std::cell::RefCell;
use std::path::PathBuf;

use headroom_export::job::{
    DEFAULT_CALIB_IMAGES, DEFAULT_PERCENTILE, DEFAULT_QAT_EPOCHS, DEFAULT_TRT_VERSION,
};
use headroom_export::{
    Board, Calibration, EngineSettings, ExportJob, ExportReport, ExportRequest, Exported, Int8Settings,
    QatSettings, Stage,
};
use headroom_onnx::quant::Method;

use super::Outcome;
use super::device_arg::{DEVICE_VALUES, device_arg};
use super::interrupt::Interrupt;
use headroom_plan::DeviceChoice;

/// Calibration method names on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MethodArg {
    /// Each of minmax, percentile and entropy is tried, and the one whose INT8 outputs are closest
    /// to FP32's on calibration images is kept.
    Auto,
    /// The largest absolute value seen.
    Minmax,
    /// `--percentile` of the absolute values.
    Percentile,
    /// KL-divergence search, as TensorRT's EntropyCalibration2.
    Entropy,
}

/// Arguments of `headroom export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The detector to export (an Ultralytics export, or a `headroom train` result).
    #[arg(long, value_name = "MODEL.onnx")]
    pub model: PathBuf,
    /// Write `<stem>.fp16.onnx`.
    #[arg(long)]
    pub fp16: bool,
    /// Write `<stem>.int8.onnx` (Q/DQ) and `<stem>.int8.calib` (TensorRT calibration cache); needs
    /// --calib.
    #[arg(long)]
    pub int8: bool,
    /// Calibration images: a folder (searched recursively) or a data.yaml (its train split).
    #[arg(long, value_name = "DIR|data.yaml")]
    pub calib: Option<PathBuf>,
    /// At most this many calibration images, evenly spread over the sorted list. An image that
    /// cannot be used (empty, truncated, under 10 pixels a side, not decodable) is skipped with a
    /// warning, as `headroom label` skips it; calibration fails only when none is left.
    #[arg(long, default_value_t = DEFAULT_CALIB_IMAGES, value_parser = super::provider_args::count_arg::<1, 100000>)]
    pub calib_images: usize,
    /// Which calibration images are too new to read yet.
    #[command(flatten)]
    pub settle: super::settle_arg::SettleArgs,
    /// How each tensor's range is chosen from its calibration histogram. auto: the method whose
    /// INT8 file's outputs are closest to the FP32 model's on calibration images (no labels, no
    /// val images); percentile lost 0.9 point where minmax lost 0.3 on a retrained student
    /// (docs/BENCHMARKS.md "Export").
    #[arg(long, value_enum, default_value_t = MethodArg::Auto)]
    pub method: MethodArg,
    /// The percentile kept by `--method percentile` (and auto's percentile candidate).
    #[arg(long, default_value_t = DEFAULT_PERCENTILE, value_parser = percentile_arg)]
    pub percentile: f64,
    /// Keep the Convs whose INT8 error is largest in float until the mAP50-95 drop on --data's val
    /// split is at most --max-drop (Convs ranked by the output error each causes alone).
    #[arg(long, requires = "data")]
    pub sensitivity: bool,
    /// The mAP50-95 drop (points) --sensitivity allows.
    #[arg(long, default_value_t = 1.0, value_parser = drop_arg)]
    pub max_drop: f64,
    /// Quantization-aware fine-tuning before the INT8 file: the model trains on this data.yaml
    /// (`headroom train --train all --qat`) with every Conv the INT8 file quantizes computing from
    /// int8-rounded activation and weight, at the calibrated scales, distilled from itself in FP32;
    /// the INT8 file is then written from the fine-tuned weights at those scales. The run and the
    /// fine-tuned FP32 model are kept in OUT/<stem>.qat/ (docs/ONNX.md "Quantization-aware
    /// training").
    #[arg(long, value_name = "DATA.yaml", requires = "int8")]
    pub qat: Option<PathBuf>,
    /// Epochs of --qat's fine-tuning.
    #[arg(long, default_value_t = DEFAULT_QAT_EPOCHS, requires = "qat", value_parser = super::provider_args::count_arg::<1, 1000>)]
    pub qat_epochs: usize,
    /// Input size for calibrating a model with a dynamic input (written into the exported files'
    /// `imgsz` metadata).
    #[arg(long, value_parser = super::provider_args::whole_arg::<u32>, value_name = "N")]
    pub imgsz: Option<u32>,
    /// The TensorRT version the calibration cache and engine names are for (JetPack 6.1/6.2: 10.3.0).
    #[arg(long, default_value_t = DEFAULT_TRT_VERSION, value_name = "X.Y.Z")]
    pub trt_version: headroom_trt::TrtVersion,
    /// Build TensorRT engines of the exported files (fp16 from the FP32 model, int8 from the Q/DQ
    /// model) with trtexec; without trtexec, print the command to run on the device and exit 1.
    #[arg(long)]
    pub engine: bool,
    /// trtexec to use [default: $TRTEXEC, JetPack's /usr/src/tensorrt/bin/trtexec, then PATH].
    #[arg(long, value_name = "PATH")]
    pub trtexec: Option<PathBuf>,
    /// trtexec's builder workspace (e.g. 1GiB) [default: half the training budget of the --board
    /// preset (memory less its reserve), TensorRT's own default for other names].
    #[arg(long, value_name = "SIZE", value_parser = headroom_plan::parse_size)]
    pub workspace: Option<u64>,
    /// The board the engines are for: its name goes into engine file names and sidecars (a preset
    /// of configs/devices.toml or --devices, whose budget bounds --workspace, or any name);
    /// `auto`: the preset of this board when one matches it, else `jetson`.
    #[arg(long, default_value = "auto", value_name = "NAME|auto")]
    pub board: Board,
    /// More board presets (configs/devices.toml's form), for --board.
    #[arg(long, value_name = "FILE")]
    pub devices: Option<PathBuf>,
    /// Where ONNX Runtime runs the calibration and the measurements: cpu, cuda, cuda:N; auto:
    /// cuda:0 when this build has the CUDA provider and a GPU is visible. Default cpu, so that the
    /// times are comparable from board to board. (trtexec builds engines on its own default GPU.)
    #[arg(long, default_value = "cpu", value_name = DEVICE_VALUES, value_parser = device_arg)]
    pub device: DeviceChoice,
    /// Output folder [default: the model's folder]. The files appear there together once all are
    /// written (Ctrl-C/SIGTERM before that: none, exit 130/143); one export per model at a time.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Score each file on this dataset's val split (mAP50-95, Ultralytics `val`'s conventions).
    #[arg(long, value_name = "data.yaml")]
    pub data: Option<PathBuf>,
    /// Replace existing outputs (all of them at once, when every one is written).
    #[arg(long)]
    pub force: bool,
    /// ONNX Runtime threads (0: its default).
    #[arg(long, default_value_t = 0, value_parser = super::provider_args::count_arg::<0, 256>)]
    pub threads: usize,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

fn percentile_arg(text: &str) -> Result<f64, String> {
    let p: f64 = text.parse().map_err(|_| format!("`{text}` is not a number"))?;
    if p > 50.0 && p <= 100.0 { Ok(p) } else { Err(format!("{p} is not a percentile in (50, 100]")) }
}

fn drop_arg(text: &str) -> Result<f64, String> {
    let d: f64 = text.parse().map_err(|_| format!("`{text}` is not a number"))?;
    if (0.0..=100.0).contains(&d) { Ok(d) } else { Err(format!("{d} is not a drop in points (0 to 100)")) }
}

impl Args {
    /// The job these flags make.
    fn job(&self) -> anyhow::Result<ExportJob> {
        let int8 = if self.int8 {
            let calib = self.calib.clone();
            let calib = calib
                .ok_or_else(|| anyhow::anyhow!("--int8 needs calibration images: --calib DIR|data.yaml"))?;
            Some(Int8Settings {
                calib,
                calib_images: self.calib_images,
                settle: self.settle.duration(),
                method: match self.method {
                    MethodArg::Auto => Calibration::auto(self.percentile),
                    MethodArg::Minmax => Calibration::Fixed(Method::MinMax),
                    MethodArg::Percentile => Calibration::Fixed(Method::Percentile(self.percentile)),
                    MethodArg::Entropy => Calibration::Fixed(Method::Entropy),
                },
                sensitivity: self.sensitivity.then_some(self.max_drop),
                scales_from: None,
            })
        } else {
            None
        };
        let engine = self.engine.then(|| EngineSettings {
            board: self.board.clone(),
            devices: self.devices.clone(),
            trtexec: self.trtexec.clone(),
            workspace: self.workspace,
        });
        let export = ExportRequest {
            model: self.model.clone(),
            fp16: self.fp16,
            int8,
            imgsz: self.imgsz,
            trt_version: self.trt_version,
            engine,
            session: Default::default(),
            out: self.out.clone(),
            data: self.data.clone(),
            force: self.force,
        };
        Ok(ExportJob {
            export,
            device: self.device,
            threads: self.threads,
            qat: self.qat.clone().map(|data| QatSettings { data, epochs: self.qat_epochs }),
            json: self.json,
        })
    }
}

/// The export's progress bars, and the signal flag it polls.
pub(super) struct Terminal {
    bar: RefCell<Option<indicatif::ProgressBar>>,
    pub(super) interrupt: Interrupt,
}

impl headroom_export::Observer for Terminal {
    fn started(&self, stage: Stage, total: u64) {
        *self.bar.borrow_mut() = Some(super::progress::bar(total, stage.label()));
    }

    fn advanced(&self, done: u64) {
        if let Some(bar) = self.bar.borrow().as_ref() {
            bar.set_position(done);
        }
    }

    fn ended(&self, finished: bool) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            super::progress::end(&bar, finished);
        }
    }

    fn stop_requested(&self) -> bool {
        self.interrupt.signal().is_some()
    }
}

/// Runs `headroom export`.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    run_job(&args.job()?)
}

/// Runs one export as `job` asks.
pub fn run_job(job: &ExportJob) -> anyhow::Result<Outcome> {
    let mut request = job.request()?;
    let terminal = Terminal { bar: RefCell::new(None), interrupt: Interrupt::install()? };
    if let Some(qat) = &job.qat {
        match qat::fine_tune(job, qat, &request, &terminal)? {
            Some(tuned) => request = tuned,
            None => {
                let signal = terminal.interrupt.signal().unwrap_or(libc::SIGINT);
                eprintln!("stopped by {}: rerun to export", super::interrupt::signal_name(signal));
                return Ok(Outcome::Interrupted(signal));
            }
        }
    }
    let report = match headroom_export::export(&request, &terminal)? {
        Exported::Published(report) => *report,
        Exported::Stopped => {
            let signal = terminal.interrupt.signal().unwrap_or(libc::SIGINT);
            eprintln!(
                "stopped by {}: nothing published (an export's files appear together or not at all); rerun to export",
                super::interrupt::signal_name(signal)
            );
            return Ok(Outcome::Interrupted(signal));
        }
    };
    print_report(job.json, &report)?;
    match &report.engines_not_built {
        Some(message) => {
            // In the words the field loop keeps with a failed step (its last `error:` line).
            eprintln!("error: {message}");
            Ok(Outcome::CheckFailed)
        }
        None => Ok(Outcome::Success),
    }
}

fn print_report(json: bool, report: &ExportReport) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{report}");
    }
    Ok(())
}
