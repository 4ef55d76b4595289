//! The crate's one error type. Each message says what was being done and to which file or flag, in
//! the words `headroom export` prints; a wrapped cause is its `source`, so the binary's
//! `caused by:` lines and `{:#}` read as they did when this code lived in the binary.

use std::fmt::Display;

/// Errors of `headroom-export`, and of `headroom-field`, which runs the export as a step and
/// refuses, wraps and chains causes alike (it re-exports this type).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input or a setting the export refuses, with its reason (the file or flag named).
    #[error("{0}")]
    Refused(String),
    /// What was being done when `source` failed (`evaluating <file>`, `creating <folder>`).
    #[error("{context}")]
    Context {
        /// What was being done.
        context: String,
        /// Why it failed.
        #[source]
        source: Box<Error>,
    },
    /// The operating system refused a file operation (the file is named by the [`Error::Context`]
    /// around it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A JSON file or value.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A file, dataset or image (headroom-core).
    #[error(transparent)]
    Core(#[from] headroom_core::Error),
    /// Labels, evaluation or a model session (headroom-infer).
    #[error(transparent)]
    Infer(#[from] headroom_infer::Error),
    /// An ONNX file or one of its rewrites (headroom-onnx).
    #[error(transparent)]
    Onnx(#[from] headroom_onnx::Error),
    /// A board preset file (headroom-plan).
    #[error(transparent)]
    Plan(#[from] headroom_plan::Error),
    /// A TensorRT engine build (headroom-trt).
    #[error(transparent)]
    Trt(#[from] headroom_trt::Error),
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::Refused`] with this message.
    pub fn refused(message: impl Display) -> Self {
        Error::Refused(message.to_string())
    }

    /// The message with its causes, `outer: inner: …` (as anyhow's `{:#}`), a cause left out when
    /// the message before already quotes it.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            let cause_text = cause.to_string();
            if !text.contains(&cause_text) {
                text = format!("{text}: {cause_text}");
            }
            source = cause.source();
        }
        text
    }
}

/// `.context(..)` and `.with_context(..)` on any result whose error becomes an [`Error`]: the
/// message says what was being done, the original error stays its source.
pub trait Context<T> {
    /// Wraps the error with `context`.
    fn context(self, context: impl Display) -> Result<T>;
    /// Wraps the error with the message `context()` makes (only when there is an error).
    fn with_context<D: Display>(self, context: impl FnOnce() -> D) -> Result<T>;
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Display) -> Result<T> {
        self.ok_or_else(|| Error::Refused(context.to_string()))
    }

    fn with_context<D: Display>(self, context: impl FnOnce() -> D) -> Result<T> {
        self.ok_or_else(|| Error::Refused(context().to_string()))
    }
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Display) -> Result<T> {
        self.map_err(|e| Error::Context { context: context.to_string(), source: Box::new(e.into()) })
    }

    fn with_context<D: Display>(self, context: impl FnOnce() -> D) -> Result<T> {
        self.map_err(|e| Error::Context { context: context().to_string(), source: Box::new(e.into()) })
    }
}

/// Returns an [`Error::Refused`] with the formatted message unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err($crate::Error::Refused(format!($($message)+)));
        }
    };
}

/// Returns an [`Error::Refused`] with the formatted message.
#[macro_export]
macro_rules! bail {
    ($($message:tt)+) => {
        return Err($crate::Error::Refused(format!($($message)+)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_keeps_the_cause_as_its_source() {
        let io: std::io::Result<()> = Err(std::io::Error::from(std::io::ErrorKind::NotFound));
        let err = io.with_context(|| "reading /x/model.onnx").expect_err("an error");
        assert_eq!(err.to_string(), "reading /x/model.onnx");
        let cause = std::error::Error::source(&err).expect("a source").to_string();
        assert_eq!(cause, std::io::Error::from(std::io::ErrorKind::NotFound).to_string());
        assert_eq!(err.chain(), format!("reading /x/model.onnx: {cause}"));
    }

    #[test]
    fn ensure_and_bail_refuse_with_their_message() {
        fn check(n: u32) -> Result<u32> {
            ensure!(n > 0, "--n {n}: more than 0");
            if n > 9 {
                bail!("--n {n}: at most 9");
            }
            Ok(n)
        }
        assert_eq!(check(3).expect("fine"), 3);
        assert_eq!(check(0).expect_err("refused").to_string(), "--n 0: more than 0");
        assert_eq!(check(10).expect_err("refused").to_string(), "--n 10: at most 9");
    }
}
