//! The crate's error type is the export's ([`headroom_export::Error`]: the same causes, refusals
//! and `Context`, one `chain()`): the loop runs the export as one of its steps, and a second enum of
//! the same variants would only convert between the two. Each message says what was being done and
//! to which file or flag, in the words the `headroom field` commands print; a wrapped cause is its
//! `source`, so the binary's `caused by:` lines read as they did when this code lived in the binary.

pub use headroom_export::{Context, Error, Result};
pub(crate) use headroom_export::{bail, ensure};
