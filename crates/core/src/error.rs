//! The one error type of `headroom-core`.

use std::path::PathBuf;

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in `headroom-core`. Every variant names the file (and line) at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// An image file could not be decoded (corrupt, truncated, or not an image).
    #[error("{path}: cannot decode image: {source}")]
    Image {
        /// The image file.
        path: PathBuf,
        /// What the decoder said.
        source: image::ImageError,
    },
    /// An image could not be encoded (e.g. as PNG) for writing.
    #[error("{path}: cannot encode image: {source}")]
    ImageEncode {
        /// The image file being written.
        path: PathBuf,
        /// What the encoder said.
        source: image::ImageError,
    },
    /// A line of a label file is wrong.
    #[error("{path}:{line}: {problem}")]
    Label {
        /// The label file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        problem: LabelProblem,
    },
    /// A YAML file could not be parsed.
    #[error("{path}: invalid YAML: {source}")]
    Yaml {
        /// The YAML file.
        path: PathBuf,
        /// What the parser said (it carries the line and column).
        source: serde_yaml_ng::Error,
    },
    /// A JSON file could not be parsed or does not have the expected structure.
    #[error("{path}: invalid JSON: {source}")]
    Json {
        /// The JSON file.
        path: PathBuf,
        /// What the parser said (it carries the line and column).
        source: serde_json::Error,
    },
    /// A dataset description (data.yaml, COCO JSON) is missing a key or has a wrong value.
    #[error("{path}: {message}")]
    Dataset {
        /// The description file.
        path: PathBuf,
        /// What is wrong and what to do about it.
        message: String,
    },
    /// An image file decodes but fails an integrity check (too small, truncated, bad checksum).
    #[error("{path}: corrupt image: {problem}")]
    CorruptImage {
        /// The image file.
        path: PathBuf,
        /// What is wrong with it.
        problem: ImageProblem,
    },
    /// An image with more pixels than the cap a step was given (`--max-pixels`; `headroom field run`
    /// sizes it for the board): left out before decoding, as decoding it would take more memory
    /// than the board can spare.
    #[error(
        "{path}: {width}x{height} is more than the cap of {limit} pixels (--max-pixels; decoding it would hold {mib} MiB)",
        mib = (u64::from(*width) * u64::from(*height) * 3) >> 20
    )]
    ImageOverCap {
        /// The image file.
        path: PathBuf,
        /// Displayed width.
        width: u32,
        /// Displayed height.
        height: u32,
        /// The cap, pixels.
        limit: u64,
    },
    /// An image file its writer may not have finished (empty, or modified moments ago): left for a
    /// later run rather than called corrupt ([`crate::imageio::usable_image`]).
    #[error("{path}: {state}: a camera may still be writing it (left for a later run)")]
    ImageNotSettled {
        /// The image file.
        path: PathBuf,
        /// Why it looks unfinished.
        state: WriteState,
    },
    /// Another process holds the lock on an output folder, or on some outputs in it
    /// ([`crate::fsio::OutputLock`]).
    #[error("{path}: another headroom run is writing {scope} ({holder}); wait for it to end, or stop it")]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// What the lock guards, for the message (`this folder`, `the export of best here`).
        scope: String,
        /// What the lock file says of its holder (pid, command, start time).
        holder: String,
    },
    /// A path that had to be a regular file (an image, a model) is a FIFO, a socket or a device:
    /// opening or reading it could block forever or never end, so it is refused unread.
    #[error("{path}: is {kind}, not a regular file (skipped unread)")]
    NotRegularFile {
        /// The path.
        path: PathBuf,
        /// What it is ([`crate::fsio::special_file_kind`]), e.g. `a FIFO (named pipe)`.
        kind: &'static str,
    },
    /// A publication journal ([`crate::fsio::FileSet`]) that cannot be read or names files outside
    /// its folder.
    #[error("{path}: {reason}")]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// What is wrong and what to do.
        reason: String,
    },
    /// An argument is outside what the function accepts.
    #[error("invalid argument `{name}`: {message}")]
    InvalidArgument {
        /// The argument.
        name: &'static str,
        /// What is wrong with it.
        message: String,
    },
}

/// `class 7 is out of range: data.yaml has 3 classes, ids 0 to 2`, or for a class field that is not
/// a whole number, `class `1.5` is not a whole number: data.yaml has 3 classes, ids 0 to 2`.
fn class_problem(text: &str, nc: usize) -> String {
    let ids = format!("data.yaml has {nc} classes, ids 0 to {}", nc.saturating_sub(1));
    match text.parse::<f64>() {
        Ok(id) if id.fract() == 0.0 => format!("class {id} is out of range: {ids}"),
        _ => format!("class `{text}` is not a whole number: {ids}"),
    }
}

/// What is wrong with one line of a label file (`class cx cy w h`, normalised).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LabelProblem {
    /// The line does not have 5 fields.
    #[error("expected 5 fields `class cx cy w h`, found {found}")]
    FieldCount {
        /// The number of whitespace-separated fields found.
        found: usize,
    },
    /// A field is not a number.
    #[error("field {field} `{text}` is not a number")]
    NotANumber {
        /// 1-based field index.
        field: usize,
        /// The text found.
        text: String,
    },
    /// The class id is a whole number, or not one, outside `0..nc`.
    #[error("{}", class_problem(text, *nc))]
    ClassOutOfRange {
        /// The class field as written.
        text: String,
        /// The number of classes.
        nc: usize,
    },
    /// The box does not lie within the image: like Ultralytics, `cx cy w h` must lie in [0, 1] with a
    /// 1% tolerance, and `w`, `h` must not be negative.
    #[error("box cx={cx} cy={cy} w={w} h={h} is outside [0, 1] (labels must be normalised)")]
    OutOfBounds {
        /// Box centre x.
        cx: f32,
        /// Box centre y.
        cy: f32,
        /// Box width.
        w: f32,
        /// Box height.
        h: f32,
    },
    /// The same box appears on an earlier line; Ultralytics removes such duplicates with a warning.
    #[error("duplicate of line {first_line} (removed)")]
    Duplicate {
        /// The earlier line with the same box.
        first_line: usize,
    },
    /// The file mixes polygon rows (`class x1 y1 x2 y2 ...`) and box rows, which Ultralytics rejects.
    #[error("box row in a file of polygon rows (line {polygon_line} is a polygon): use one kind per file")]
    MixedPolygonsAndBoxes {
        /// A line holding a polygon.
        polygon_line: usize,
    },
}

/// Why an image file looks unfinished (see [`Error::ImageNotSettled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WriteState {
    /// The file has no bytes yet.
    #[error("empty file (0 bytes)")]
    Empty,
    /// The file was modified less than the settle time ago.
    #[error("modified {age_ms} ms ago, within the {settle_ms} ms settle time")]
    Recent {
        /// How long ago it was last modified, in milliseconds.
        age_ms: u64,
        /// The settle time asked for, in milliseconds.
        settle_ms: u64,
    },
}

/// What is wrong with an image file that decodes (see [`Error::CorruptImage`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ImageProblem {
    /// Smaller than 10 pixels on a side (Ultralytics rejects these).
    #[error("image size {width}x{height} is under 10 pixels on a side")]
    TooSmall {
        /// Width in pixels (after the EXIF orientation).
        width: u32,
        /// Height in pixels (after the EXIF orientation).
        height: u32,
    },
    /// A JPEG that ends before its end-of-image marker `FF D9`: truncated (Pillow, and so
    /// Ultralytics, refuses it).
    #[error("JPEG ends before its end marker FF D9 (truncated)")]
    JpegTruncated,
    /// A JPEG with bytes after its end-of-image marker `FF D9`. It decodes, so it is kept (Ultralytics
    /// rewrites such a file in place; headroom never modifies an image).
    #[error(
        "JPEG has data after its end marker FF D9; it decodes, so it is kept (re-save it to silence this)"
    )]
    JpegTrailingData,
    /// A PNG whose chunk structure is broken: truncated, or a chunk whose CRC does not match.
    #[error("PNG chunk at byte {offset}: {reason}")]
    PngChunk {
        /// Byte offset of the chunk in the file.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// More pixels than [`crate::imageio::MAX_PIXELS`]: refused before decoding (a decompression bomb
    /// or a damaged header; Pillow, and so Ultralytics, refuses it too).
    #[error("image size {width}x{height} is more than {limit} pixels (refused before decoding)")]
    TooLarge {
        /// Declared width.
        width: u32,
        /// Declared height.
        height: u32,
        /// The limit.
        limit: u64,
    },
    /// libjpeg refused the JPEG data.
    #[error("JPEG does not decode: {message}")]
    Jpeg {
        /// libjpeg's message.
        message: String,
    },
    /// The file content is not an image format headroom reads (PNG, JPEG, BMP, WebP).
    #[error("not a PNG, JPEG, BMP or WebP file (convert it to one of these)")]
    UnknownFormat,
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}
