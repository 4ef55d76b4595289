//! headroom-plot: the pictures a run leaves behind, drawn in pure Rust.
//!
//! - [`write_plots`]: `loss.png`, `map.png`, `lr.png`, `memory.png` from a run's `metrics.csv`;
//! - [`write_plan_chart`]: the memory plan, one stacked bar per rung of the fit ladder;
//! - [`write_pr_curve`]: Ultralytics' `BoxPR_curve.png`;
//! - [`write_confusion_matrix`]: Ultralytics' `confusion_matrix.png` (and `_normalized`);
//! - [`write_mosaic`]: Ultralytics' `val_batch0_pred.jpg`, images in a grid with their boxes.
//!
//! plotters draws into an in-memory RGB buffer, text through ab_glyph with an embedded DejaVu Sans
//! (`assets/DejaVuSans.ttf`, licence beside it), the `image` crate encodes, and every file is
//! written atomically (a temporary beside it, then a rename), so a viewer never sees half a
//! picture. No native library, no other headroom crate: this crate builds and tests anywhere.

mod canvas;
mod confusion;
mod error;
mod mosaic;
#[cfg(test)]
mod pixels;
mod plan_chart;
mod plots;
mod pr_curve;

pub use confusion::write_confusion_matrix;
pub use error::{Error, Result};
pub use mosaic::{DrawBox, Tile, write_mosaic};
pub use plan_chart::{PlanChart, PlanRung, write_plan_chart};
pub use plots::{HEIGHT, MemoryLines, WIDTH, write_plots};
pub use pr_curve::{Curve, write_pr_curve};
