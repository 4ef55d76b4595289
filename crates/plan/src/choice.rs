//! Choices of a training run that the planner counts and the trainer and the run act on: one enum
//! each, here in the lowest crate that needs it, re-exported by `headroom-train` and `headroom-run`.
//! Their text (`Display`, `FromStr`, serde) is the one `config.toml`, `plan --json` and the flags
//! use, and round-trips.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The optimiser (its state per trainable parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Optimizer {
    /// SGD with Nesterov momentum: one momentum buffer.
    Sgd,
    /// AdamW (beta1 = the momentum): two moment buffers.
    AdamW,
}

/// What runs the frozen trunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrunkRuntime {
    /// ONNX Runtime on the trunk cut out of the same file (the default: faster; a copy of the
    /// trunk's weights in its session).
    Ort,
    /// headroom's libtorch executor.
    Torch,
}

impl Optimizer {
    /// Every optimiser.
    pub const ALL: [Optimizer; 2] = [Optimizer::Sgd, Optimizer::AdamW];

    /// Its name: `sgd`, `adamw`.
    pub fn name(self) -> &'static str {
        match self {
            Optimizer::Sgd => "sgd",
            Optimizer::AdamW => "adamw",
        }
    }
}

impl TrunkRuntime {
    /// Every trunk runtime.
    pub const ALL: [TrunkRuntime; 2] = [TrunkRuntime::Ort, TrunkRuntime::Torch];

    /// Its name: `ort`, `torch`.
    pub fn name(self) -> &'static str {
        match self {
            TrunkRuntime::Ort => "ort",
            TrunkRuntime::Torch => "torch",
        }
    }
}

macro_rules! text {
    ($ty:ident, $what:literal) => {
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl FromStr for $ty {
            type Err = String;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                $ty::ALL.into_iter().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = $ty::ALL.iter().map(|v| v.name()).collect();
                    format!("{s:?} is not {} ({})", $what, names.join(", "))
                })
            }
        }
    };
}

text!(Optimizer, "an optimiser");
text!(TrunkRuntime, "a trunk runtime");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_serde_round_trip() {
        for o in Optimizer::ALL {
            assert_eq!(o.to_string().parse::<Optimizer>(), Ok(o));
            assert_eq!(serde_json::to_string(&o).expect("json"), format!("\"{o}\""));
            assert_eq!(serde_json::from_str::<Optimizer>(&format!("\"{o}\"")).expect("back"), o);
        }
        for t in TrunkRuntime::ALL {
            assert_eq!(t.to_string().parse::<TrunkRuntime>(), Ok(t));
            assert_eq!(serde_json::to_string(&t).expect("json"), format!("\"{t}\""));
            assert_eq!(serde_json::from_str::<TrunkRuntime>(&format!("\"{t}\"")).expect("back"), t);
        }
        assert_eq!("adam".parse::<Optimizer>(), Err("\"adam\" is not an optimiser (sgd, adamw)".to_string()));
        assert!("onnx".parse::<TrunkRuntime>().is_err());
    }
}
