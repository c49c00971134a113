//! [`Error`]: everything the std shim can refuse. Every variant names the path it is
//! about, so a one-line message is enough for a user to act on.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a pool could not be created, opened, read or written.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A system call on `path` failed; `op` says which step ("open", "map", ...).
    Io {
        /// The step that failed.
        op: &'static str,
        /// The file it concerned.
        path: PathBuf,
        /// What the system said.
        source: io::Error,
    },
    /// Another writer holds the exclusive `flock` on the pool file.
    Locked {
        /// The pool.
        path: PathBuf,
    },
    /// `create` refuses to overwrite anything.
    Exists {
        /// What exists already.
        path: PathBuf,
    },
    /// The path is not something nvs can map, or cannot give the durability asked for.
    Unsupported {
        /// The file.
        path: PathBuf,
        /// Why.
        what: String,
    },
    /// An `msync` failed: the last put may not be durable, and neither may any later one
    /// (the kernel may have dropped the dirty pages), so the pool refuses further writes.
    Sync {
        /// The pool.
        path: PathBuf,
        /// What msync said.
        source: io::Error,
    },
    /// nvs-core refused (bad media, not a pool, full, no such object, ...).
    Core {
        /// The pool.
        path: PathBuf,
        /// What nvs-core said.
        source: nvs_core::Error,
    },
}

/// `Result` with the shim's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// `true` if the pool's bytes are bad: corrupted, or not a pool at all. The `nvs` tool
    /// exits 1 for these and 2 for everything else.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Core { source: nvs_core::Error::Corrupted { .. } | nvs_core::Error::NotFormatted, .. })
    }

    /// The nvs-core error inside, if this is one.
    pub fn core(&self) -> Option<nvs_core::Error> {
        match self {
            Error::Core { source, .. } => Some(*source),
            _ => None,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            Error::Locked { path } => write!(f, "pool {} is locked by another writer (flock)", path.display()),
            Error::Exists { path } => {
                write!(f, "{} already exists (create never overwrites; remove it or pick another path)", path.display())
            }
            Error::Unsupported { path, what } => write!(f, "{}: {what}", path.display()),
            Error::Sync { path, source } => write!(
                f,
                "msync of {} failed ({source}): the last put may not be durable; \
                 reopen the pool to see what survived",
                path.display()
            ),
            Error::Core { path, source } => write!(f, "{}: {source}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Sync { source, .. } => Some(source),
            Error::Core { source, .. } => Some(source),
            _ => None,
        }
    }
}
