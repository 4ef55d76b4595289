//! The crate's error type.

use std::path::PathBuf;

/// Why a picture was not written. Input errors are found before anything is drawn, so a failed
/// call leaves no file behind.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The data cannot be drawn: `what` names the argument (or the csv line and column), `reason`
    /// says what is wrong with it.
    #[error("{what}: {reason}")]
    Invalid {
        /// The argument, or where in the input.
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// plotters or the image encoder failed on `path`.
    #[error("{}: cannot draw: {reason}", path.display())]
    Draw {
        /// The file being drawn.
        path: PathBuf,
        /// The drawing library's message.
        reason: String,
    },
    /// Writing `path` (or its temporary) failed.
    #[error("{}: cannot write: {source}", path.display())]
    Io {
        /// The file being written.
        path: PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The embedded font does not parse (a broken build).
    #[error("the embedded DejaVuSans.ttf does not parse as a font")]
    Font,
}

/// The crate's result.
pub type Result<T> = std::result::Result<T, Error>;

/// An [`Error::Invalid`].
pub(crate) fn invalid(what: impl Into<String>, reason: impl Into<String>) -> Error {
    Error::Invalid { what: what.into(), reason: reason.into() }
}
