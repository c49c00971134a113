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
    /// Another process writes what was asked for: the pool (its writer lock, an OFD
    /// write lock on byte 0), a lane, or every lane.
    Locked {
        /// The pool.
        path: PathBuf,
        /// What is held.
        held: Held,
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
    /// An I/O error that concerns no pool (for example setting up a
    /// [`TrackedBuf`](crate::dirty::TrackedBuf)), through `From<io::Error>`: its message
    /// says what failed.
    System {
        /// What the system said.
        source: io::Error,
    },
    /// A name with a NUL byte inside, refused at put: C (and every binding over it)
    /// reads a name up to its first NUL, so it could not be got back, and a shorter name
    /// would read another object's bytes.
    NameNul {
        /// The name.
        name: Vec<u8>,
        /// Where its first NUL is.
        at: usize,
    },
    /// No object of that name (`version: None`), or no such version of it.
    NotFound {
        /// The pool.
        path: PathBuf,
        /// The name asked for.
        name: Vec<u8>,
        /// The version asked for, if one was.
        version: Option<u64>,
    },
    /// A delta put whose bytes outside its changed ranges differ from its parent's: its
    /// ranges missed a change (checked before anything is written, when the pool's delta
    /// check is on; see `FilePool::set_delta_check`). Nothing was committed.
    DeltaMismatch {
        /// The pool.
        path: PathBuf,
        /// The object's name.
        name: Vec<u8>,
        /// The parent version it was compared with.
        parent: u64,
        /// The first byte that differs outside the ranges.
        offset: u64,
    },
    /// Metadata that does not follow the `key=value` convention ([`crate::Meta`]).
    BadMeta {
        /// What is wrong with it.
        what: String,
    },
    /// A write through a pool opened by another process: a child that `fork` made from
    /// the writer shares its mapping and its locks but not its state, so its writes would
    /// interleave with the parent's and corrupt the log. Nothing was written.
    Forked {
        /// The pool.
        path: PathBuf,
        /// The process that opened it.
        owner: u32,
    },
    /// A followed pool whose file was removed, moved or replaced (a new pool made at its
    /// path), and which no writer holds: nothing more can be committed to it.
    Replaced {
        /// The path the pool was followed at.
        path: PathBuf,
    },
    /// nvs-core refused (bad media, not a pool, full, ...). `path` is empty when the
    /// error came from a call on a plain nvs-core pool (through `From`).
    Core {
        /// The pool.
        path: PathBuf,
        /// What nvs-core said.
        source: nvs_core::Error,
    },
    /// A batch (`put_batch`) refused because of one of its objects — its name, metadata,
    /// version, size or delta ([`nvs_core::BatchError`]), or what this shim checks of it
    /// (a NUL in its name, a delta that missed a change): `index` is its place in the
    /// batch, `source` the error about it. Nothing of the batch was committed.
    Batch {
        /// The object's index in the batch (0 for the first).
        index: usize,
        /// The error about that object.
        source: Box<Error>,
    },
    /// One object's bytes fail their checks (`source`: nvs-core's `Corrupted`, naming the
    /// offset and the kind): a read of that version, or `verify` finding it.
    Damaged {
        /// The pool.
        path: PathBuf,
        /// The object's name.
        name: Vec<u8>,
        /// Its version.
        version: u64,
        /// What failed.
        source: nvs_core::Error,
    },
}

/// `Result` with the shim's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// `true` if the pool's bytes are bad: corrupted, or not a pool at all. The `nvs` tool
    /// exits 1 for these and 2 for everything else.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Batch { source, .. } => source.is_corruption(),
            e => matches!(
                e,
                Error::Core { source: nvs_core::Error::Corrupted { .. } | nvs_core::Error::NotFormatted, .. }
                    | Error::Damaged { .. }
            ),
        }
    }

    /// The nvs-core error inside, if this is one (`NotFound` for [`Error::NotFound`]; an
    /// [`Error::Batch`]'s object's).
    pub fn core(&self) -> Option<nvs_core::Error> {
        match self {
            Error::Core { source, .. } | Error::Damaged { source, .. } => Some(*source),
            Error::NotFound { .. } => Some(nvs_core::Error::NotFound),
            Error::Batch { source, .. } => source.core(),
            _ => None,
        }
    }

    /// The error itself, and the index of the batch's object it is about if it is an
    /// [`Error::Batch`]: what to classify an error by, wherever it came from.
    pub fn unbatched(&self) -> (&Error, Option<usize>) {
        match self {
            Error::Batch { index, source } => (source.unbatched().0, Some(*index)),
            e => (e, None),
        }
    }

    /// `source` about version `version` of `name`: [`Error::Damaged`].
    pub(crate) fn damaged(path: &std::path::Path, name: &[u8], version: u64, source: nvs_core::Error) -> Error {
        Error::Damaged { path: path.to_path_buf(), name: name.to_vec(), version, source }
    }

    /// `e` about object `index` of a batch ([`Error::Batch`]).
    pub(crate) fn in_batch(index: usize, e: Error) -> Error {
        Error::Batch { index, source: Box::new(e) }
    }

    /// `e` from a call about `name` (and `version`) on the pool at `path`: a `NotFound`
    /// names what was not found, a `Corrupted` of a known version the object
    /// ([`Error::Damaged`]).
    pub(crate) fn about(path: &std::path::Path, name: &[u8], version: Option<u64>, e: nvs_core::Error) -> Error {
        match (e, version) {
            (nvs_core::Error::NotFound, _) => {
                Error::NotFound { path: path.to_path_buf(), name: name.to_vec(), version }
            }
            (nvs_core::Error::Corrupted { .. }, Some(v)) => Error::damaged(path, name, v, e),
            (source, _) => Error::Core { path: path.to_path_buf(), source },
        }
    }
}

/// What another writer holds ([`Error::Locked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The pool's writer lock: its one writer, or writers of lanes, write it.
    Pool,
    /// This lane.
    Lane(u32),
    /// Every lane of the pool (how many it has): no lane is free to take.
    EveryLane(u32),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "cannot {op} {}: {source}", path.display())
            }
            Error::Locked { path, held: Held::Pool } => {
                write!(f, "pool {} is locked by another writer", path.display())
            }
            Error::Locked { path, held: Held::Lane(lane) } => {
                write!(f, "lane {lane} of pool {} is locked by another writer", path.display())
            }
            Error::Locked { path, held: Held::EveryLane(lanes) } => write!(
                f,
                "pool {} is locked by other writers: none of its {lanes} lanes is free (a lane frees when \
                 the process writing it ends)",
                path.display()
            ),
            Error::Forked { path, owner } => write!(
                f,
                "{}: opened for writing by process {owner}, of which this process is a fork: a \
                 fork cannot write it (nothing was written; write from process {owner}, or \
                 open the pool in a process of its own)",
                path.display()
            ),
            Error::Replaced { path } => write!(
                f,
                "{}: the pool file followed was removed, moved or replaced by another file, and no writer \
                 holds it: nothing more can be committed to it (follow the file now at that path anew)",
                path.display()
            ),
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
            Error::System { source } => write!(f, "{source}"),
            Error::NotFound { path, name, version: None } => {
                write!(f, "{}: no object named {}", path.display(), show_name(name))
            }
            Error::NotFound { path, name, version: Some(v) } => {
                write!(f, "{}: no version {v} of {}", path.display(), show_name(name))
            }
            Error::DeltaMismatch { path, name, parent, offset } => write!(
                f,
                "{}: delta put of {}: byte {offset} differs from version {parent} outside the changed ranges \
                 (the ranges missed a change); nothing was committed",
                path.display(),
                show_name(name)
            ),
            Error::BadMeta { what } => write!(f, "metadata: {what}"),
            Error::NameNul { name, at } => write!(
                f,
                "name {} has a NUL byte at {at}: names are NUL-free (C reads a name up to its first NUL)",
                show_name(name)
            ),
            Error::Core { path, source } if path.as_os_str().is_empty() => write!(f, "{source}"),
            Error::Core { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Damaged { path, name, version, source } => {
                write!(f, "{}: {} version {version}: {source}", path.display(), show_name(name))
            }
            // The pool's path first, as in every message about one.
            Error::Batch { index, source } => match &**source {
                Error::Core { path, source } if !path.as_os_str().is_empty() => {
                    write!(f, "{}: object {index} of the batch: {source}", path.display())
                }
                source => write!(f, "object {index} of the batch: {source}"),
            },
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } | Error::Sync { source, .. } | Error::System { source } => Some(source),
            Error::Core { source, .. } | Error::Damaged { source, .. } => Some(source),
            Error::Batch { source, .. } => Some(&**source),
            Error::NotFound { .. } => Some(&NOT_FOUND),
            _ => None,
        }
    }
}

/// The cause of every [`Error::NotFound`].
static NOT_FOUND: nvs_core::Error = nvs_core::Error::NotFound;

/// An I/O error that concerns no pool ([`Error::System`]).
impl From<io::Error> for Error {
    fn from(source: io::Error) -> Self {
        Error::System { source }
    }
}

/// An error of a call on a plain nvs-core pool (no path to name).
impl From<nvs_core::Error> for Error {
    fn from(source: nvs_core::Error) -> Self {
        Error::Core { path: PathBuf::new(), source }
    }
}

/// A name as a person can read it: UTF-8 as is, control characters, backslashes and
/// bytes that are not UTF-8 escaped (so a name cannot forge lines in a terminal or log).
pub fn show_name(name: &[u8]) -> String {
    match std::str::from_utf8(name) {
        Ok(s) if !s.chars().any(|c| c.is_control() || c == '\\') => s.to_owned(),
        Ok(s) => s.escape_debug().to_string(),
        Err(_) => name.escape_ascii().to_string(),
    }
}
