//! The one error type of `headroom-train`.

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `headroom-train`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// This build of headroom was made without the native library that the call needs.
    #[error(
        "this headroom was built without the `{feature}` feature: rebuild with `--features {feature}` (scripts/setup.sh installs libtorch)"
    )]
    FeatureDisabled {
        /// The cargo feature to enable.
        feature: &'static str,
    },
    /// libtorch reported an error.
    #[cfg(feature = "libtorch")]
    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),
}
