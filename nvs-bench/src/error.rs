//! [`Error`]: why a benchmark could not run or finish.

use std::fmt;

/// A [`Result`](std::result::Result) whose error is an [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a benchmark failed. Its `Display` is one line, as the `nvs` tool prints it.
#[derive(Debug)]
pub enum Error {
    /// From a pool (I/O, lock, nvs-core, ...).
    Pool(nvs_std::Error),
    /// An I/O error outside a pool (output files, tracked buffers).
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// Options that cannot be used (no trials, an unknown row), or a region that could
    /// not be set up; the message names the `nvs bench` option where one is at fault.
    Usage(String),
    /// A version read back differs from what was written.
    Mismatch(String),
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io { what: what.into(), source }
    }
}

impl From<nvs_std::Error> for Error {
    fn from(e: nvs_std::Error) -> Self {
        Error::Pool(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Pool(e) => e.fmt(f),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Usage(m) | Error::Mismatch(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Pool(e) => Some(e),
            Error::Io { source, .. } => Some(source),
            Error::Usage(_) | Error::Mismatch(_) => None,
        }
    }
}
