//! What `train` and `plan` (and `field run`, which runs both) share: the defaults of their flags, the
//! choices as flags (each a thin clap wrapper of the library's one enum, converted exhaustively), and
//! the models `train` refuses.

use headroom_onnx::Trainable;
use headroom_plan::Optimizer;

/// What trains by default (`--train`; `headroom plan` starts its ladder from it and freezes more
/// only when memory asks for it): everything, the configuration that adapted most within the
/// memory goal (docs/BENCHMARKS.md "Adaptation"; `--train head` is the cheapest).
pub const DEFAULT_PART: &str = "all";
/// `--train PART`: `all`, `head`, `neck+head`, `affine`, N (modules 0..N frozen) or `freeze=N`.
pub fn part_arg(text: &str) -> Result<Trainable, String> {
    text.parse()
}

/// Images per pass by default (`--batch`; `headroom plan` starts from it): the batch the
/// adaptation figures were measured at (docs/BENCHMARKS.md).
pub const DEFAULT_BATCH: usize = 2;
/// `--optimizer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OptimizerArg {
    /// AdamW at 0.002·5/(4+nc) for any run length (Ultralytics' short-run rule).
    Auto,
    /// SGD with Nesterov momentum.
    Sgd,
    /// AdamW.
    Adamw,
}

impl OptimizerArg {
    /// The optimiser chosen; `None` for `auto` (chosen by the run's classes and length).
    pub fn chosen(self) -> Option<Optimizer> {
        match self {
            OptimizerArg::Auto => None,
            OptimizerArg::Sgd => Some(Optimizer::Sgd),
            OptimizerArg::Adamw => Some(Optimizer::AdamW),
        }
    }

    /// The optimiser the memory planner counts (auto is AdamW at every run length).
    pub fn planned(self) -> Optimizer {
        self.chosen().unwrap_or(Optimizer::AdamW)
    }
}
