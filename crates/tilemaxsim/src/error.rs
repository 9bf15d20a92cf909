//! The one error type of the library. Every message names what was wrong and where, so a
//! user can fix the input without reading the source.

use std::path::PathBuf;

/// Everything that can go wrong in tilemaxsim.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The embedding dimension of a query does not match the corpus.
    #[error("dimension mismatch: {what} has d = {got}, expected d = {expected}")]
    DimMismatch {
        what: String,
        expected: usize,
        got: usize,
    },

    /// A shape that cannot be used (zero dimension, length not a multiple of d, …).
    #[error("invalid shape: {0}")]
    Shape(String),

    /// A query with no tokens.
    #[error("query {index} is empty (0 tokens); every query needs at least one token")]
    EmptyQuery { index: usize },

    /// A document with no tokens.
    #[error("document {index} is empty (0 tokens); every document needs at least one token")]
    EmptyDocument { index: usize },

    /// Document offsets that are not a valid packing of the token matrix.
    #[error("invalid offsets: {0}")]
    Offsets(String),

    /// A NaN or infinite value in the input.
    #[error("non-finite value {value} in {what}: token row {row}, column {col}")]
    NonFinite {
        what: String,
        row: usize,
        col: usize,
        value: f32,
    },

    /// An element type that is not supported where it was found.
    #[error("unsupported dtype {got} for {what} (supported: {supported})")]
    DType {
        what: String,
        got: String,
        supported: String,
    },

    /// A document index outside the corpus (e.g. in a candidate list).
    #[error("document index {index} out of range: the corpus has {len} documents")]
    DocIndex { index: usize, len: usize },

    /// An argument outside its valid range (k = 0, wrong output length, …).
    #[error("invalid argument: {0}")]
    Argument(String),

    /// A file that is truncated, corrupt, or does not follow the format.
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },

    /// A line of a text file (TREC qrels, TREC run) that does not follow its format.
    #[error("{path}, line {line}: {reason}")]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    /// An I/O error, with the file it happened on. The OS's message is part of this one's
    /// (not a `source` of it), so a report that walks the error chain says it once.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },

    /// A device that is not available in this build or on this machine.
    #[error("device unavailable: {0}")]
    DeviceUnavailable(String),

    /// Memory for a result or a working buffer could not be allocated.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
}

/// The library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            error,
        }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            message: message.into(),
        }
    }

    pub(crate) fn parse(path: impl Into<PathBuf>, line: usize, reason: impl Into<String>) -> Self {
        Error::Parse {
            path: path.into(),
            line,
            reason: reason.into(),
        }
    }
}
