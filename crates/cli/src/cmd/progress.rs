//! Progress bars on stderr for anything that takes more than a few seconds, and the writer that
//! lets log lines through without the two overwriting each other.

use std::io::Write;
use std::sync::OnceLock;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Every bar lives in this one set, so that a log line can hide them, print, and redraw them.
fn bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    BARS.get_or_init(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()))
}

/// A bar of `len` steps labelled `label`, showing items per second (one decimal); hidden when
/// stderr is not a terminal (logs and CI stay clean). End it with [`end`].
pub fn bar(len: u64, label: &str) -> ProgressBar {
    let bar = bars().add(ProgressBar::new(len));
    // indicatif's own `{per_sec}` prints four decimals (`7.4317/s`): one is enough.
    let style = ProgressStyle::with_template("{msg:>8} {bar:30} {pos}/{len} {rate} eta {eta}")
        .map(|style| {
            style.with_key("rate", |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1}/s", state.per_sec());
            })
        })
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_message(label.to_string());
    bar
}

/// The bar of a training epoch's row: the row is its prefix (set on every pass), then
/// Ultralytics' `100%|██████████| 8/8 [00:05<00:00, 1.5it/s]` shape, then the message (the whole
/// run's time left). Hidden when stderr is not a terminal.
#[cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(dead_code))]
pub fn row_bar() -> ProgressBar {
    let bar = bars().add(ProgressBar::new(0));
    let style = ProgressStyle::with_template(
        "{prefix}: {percent:>3}%|{bar:10}| {pos}/{len} [{elapsed}<{eta}, {rate}] {msg}",
    )
    .map(|style| {
        style
            .with_key("rate", |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.1}it/s", state.per_sec());
            })
            .progress_chars("█▉▊▋▌▍▎▏ ")
    })
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar
}

/// Prints `line` on stderr above the bars (which are hidden while it prints, then redrawn).
#[cfg_attr(not(all(feature = "onnxruntime", feature = "libtorch")), allow(dead_code))]
pub fn println(line: &str) {
    bars().suspend(|| eprintln!("{line}"));
}

/// Ends a bar: when the work `finished`, drawn full (100 %) and left on screen; when it stopped
/// early (an error, an interruption), left where it stopped.
pub fn end(bar: &ProgressBar, finished: bool) {
    if finished {
        if let Some(len) = bar.length() {
            bar.set_position(len);
        }
        bar.finish();
    } else {
        bar.abandon();
    }
}

/// A `tracing` writer for stderr: each log line is written whole while the bars are hidden, then
/// the bars are redrawn below it.
#[derive(Debug, Clone, Copy, Default)]
pub struct LogWriter;

/// One log line being formatted.
#[derive(Debug, Default)]
pub struct LogLine(Vec<u8>);

impl Write for LogLine {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for LogLine {
    fn drop(&mut self) {
        if !self.0.is_empty() {
            bars().suspend(|| {
                let _ = std::io::stderr().write_all(&self.0);
            });
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogLine;

    fn make_writer(&'a self) -> Self::Writer {
        LogLine::default()
    }
}

/// Whether log lines may carry ANSI colours: stderr is a terminal, `NO_COLOR` is unset or empty
/// (no-color.org), and `TERM` is not `dumb`.
pub fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
    std::io::stderr().is_terminal() && !no_color && !dumb
}
