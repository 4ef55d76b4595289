//! Progress bars on stderr for anything that takes more than a few seconds.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A bar of `len` steps labelled `label`, showing items per second; hidden when stderr is not a
/// terminal (logs and CI stay clean).
pub fn bar(len: u64, label: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template("{msg:>8} {bar:30} {pos}/{len} {per_sec} eta {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(label.to_string());
    bar
}
