//! Errors. Bad media bytes become [`Error::Corrupted`]. A broken invariant of nvs's own
//! that could lose or corrupt data (where a unit goes, what the index learns of a
//! committed one) is checked in release builds too and becomes [`Error::Invariant`],
//! which stops the pool's writers; nothing public panics on what a caller passes.

use core::fmt;

/// Everything an nvs call can refuse.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// No nvs superblock at offset 0 (wrong magic): not a pool, or never formatted.
    NotFormatted,
    /// A pool of a format version this build cannot read.
    UnsupportedVersion {
        /// The version the pool says it has.
        found: u32,
    },
    /// The media holds bytes a correct nvs could not have left there.
    Corrupted {
        /// Media offset of the bad bytes.
        offset: u64,
        /// What is wrong there.
        kind: CorruptKind,
    },
    /// A pool of an older format version opened for writing: this build reads it, and
    /// writes only pools of versions [`crate::FORMAT_VERSION_WRITABLE`] to
    /// [`crate::FORMAT_VERSION`]. Open it
    /// read-only, or copy its objects into a new pool.
    OldFormat {
        /// The pool's format version.
        found: u32,
    },
    /// No free segment left for this lane: nothing was written, nothing committed is harmed.
    Full,
    /// The media could not give a free segment the room a claim needs
    /// ([`crate::Media::reserve`]: a pool file that gets its blocks as it fills, on a file
    /// system with no space left): nothing was written, nothing committed is harmed; a
    /// put may succeed once space is freed.
    NoSpace,
    /// A unit larger than a segment needs `needed` free segments side by side, and the
    /// pool has `free` free segments but no run that long: nothing was written.
    Fragmented {
        /// Consecutive free segments the unit needs.
        needed: u32,
        /// Free segments in the pool.
        free: u32,
    },
    /// The object (or batch) does not fit in the pool (format 1: in one segment);
    /// `max_bytes` is the largest payload that does.
    TooLarge {
        /// The size asked for.
        len_bytes: u64,
        /// The most that fits.
        max_bytes: u64,
    },
    /// An object's metadata is at most [`crate::META_MAX`] bytes.
    MetaTooLong {
        /// The metadata's length.
        len_bytes: usize,
    },
    /// Names are 1..=[`crate::NAME_MAX`] bytes.
    NameTooLong {
        /// The name's length.
        len_bytes: usize,
    },
    /// Names are 1..=[`crate::NAME_MAX`] bytes; an empty name is refused.
    NameEmpty,
    /// Another writer process of the pool held its claim lock (segment claims and
    /// releases) for `waited_ms` and still does — stopped (SIGSTOP, a debugger) or stuck;
    /// a writer that dies lets go at once. Nothing was claimed, released or changed: try
    /// again, or end that process (`holder_pid`, where the platform can tell; 0 if not).
    ClaimLockTimeout {
        /// How long the operation waited.
        waited_ms: u64,
        /// The process holding the lock (0: unknown).
        holder_pid: u32,
    },
    /// No such name, or no such version of it.
    NotFound,
    /// The buffer is smaller than the object; `needed_bytes` is its size.
    BufferTooSmall {
        /// The object's size.
        needed_bytes: u64,
    },
    /// An explicit version must be greater than the name's latest.
    VersionNotIncreasing {
        /// The highest version the name has (or a writer has taken).
        latest: u64,
        /// The version asked for.
        given: u64,
    },
    /// A batch holds at least one object: at most [`crate::BATCH_MAX`] through
    /// `put_batch`, and through `put_batch_in` at most one per plan slot given (and
    /// below 2^32, the format's object count).
    BatchSize {
        /// Objects in the refused batch.
        count: usize,
    },
    /// Lane ids are below the pool's `lanes_max`.
    NoSuchLane {
        /// The lane asked for.
        lane: u32,
        /// The pool's lane count.
        lanes_max: u32,
    },
    /// The pool was opened read-only.
    ReadOnly,
    /// Another writer holds this lane ([`crate::Pool::lane`]).
    LaneBusy {
        /// The lane asked for.
        lane: u32,
    },
    /// A write on a lane this pool was not opened for ([`crate::Pool::open_lanes`]):
    /// another process may own it.
    LaneNotOwned {
        /// The lane asked for.
        lane: u32,
    },
    /// Writers in several processes share only a pool with lane names
    /// ([`crate::FormatOptions::lane_names`]): in one name space two processes could
    /// take the same version of a name.
    NeedsLaneNames,
    /// The index memory given to the pool is full and cannot grow: `what` ran out
    /// ("entries", "names", "hash table slots", "segment slots", or "entry ids" / "name
    /// ids" at 2^31 - 1) with the index at `entries` objects over `names` names.
    /// Retention ([`crate::Pool::reclaim`]) frees index room a whole segment at a time
    /// and never a lane's current segment: an index that fills while its objects lie in
    /// the lanes' current segments stays full (the message says what to do: more index
    /// memory, or segments small enough to hold fewer objects than the index).
    IndexFull {
        /// The part that ran out.
        what: &'static str,
        /// Objects in the index.
        entries: usize,
        /// Names in the index.
        names: usize,
    },
    /// The media or the format options cannot hold a pool (`what` says why).
    BadGeometry {
        /// Why.
        what: &'static str,
    },
    /// A delta put's changed ranges are not sorted by offset, or reach past the object's
    /// end; `offset` is the first bad range's.
    DeltaRanges {
        /// The first bad range's offset.
        offset: u64,
    },
    /// Bad [`crate::DeltaOptions`] (`what` says which).
    DeltaOptions {
        /// Which option, and why.
        what: &'static str,
    },
    /// A delta's [`crate::Changes`] gave other ranges when the delta was stored than when
    /// it was planned: the unit was not committed (nothing outside it was written).
    ChangesInconsistent,
    /// A zero-copy read of a version whose bytes are not in one place on the media (a
    /// delta, rebuilt from several), or of a media that does not lend its bytes: copy it
    /// with `get` instead.
    NotBorrowable,
    /// A read by name alone in a pool with lane names, of a name several lanes hold: name
    /// the lane ([`Key::on`](crate::Key::on)).
    AmbiguousName {
        /// How many lanes hold the name.
        lanes: u32,
    },
    /// A typed get: the object is not a whole number of elements of the type asked for.
    ElementSize {
        /// The object's length.
        len_bytes: u64,
        /// The element's size.
        elem_bytes: usize,
    },
    /// A check of nvs's own invariants failed (a bug in nvs, or its memory overwritten):
    /// the write stopped where going on could lose or corrupt data, and this pool (this
    /// open of it) takes no more writes — every later put, marker, lane or reclaim is
    /// refused with this error; reads go on. Reopen the pool to write again (recovery
    /// rebuilds everything from the media).
    Invariant {
        /// Which invariant.
        what: &'static str,
        /// The unit of this call was committed before the check failed: it is durable
        /// and a reopen recovers it, but this pool's index may lack it. `false`: this call
        /// committed nothing.
        committed: bool,
    },
    /// The media reported that a fence failed to make its stores durable
    /// ([`Media::fence_failed`](crate::Media::fence_failed): nvs-std's failed `msync`).
    /// The unit of this call was stored but may not survive a crash: this pool does not
    /// index it (no reader of this open sees it), and takes no more writes — every later
    /// put, marker, lane or reclaim gets this error; reads go on. A reopen recovers what
    /// the media kept.
    NotDurable,
}

/// What exactly was found corrupted.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptKind {
    /// The superblock checksum does not match.
    SuperblockChecksum,
    /// The superblock's geometry is not one a format makes, or does not fit the media's
    /// first segment.
    Geometry,
    /// The media ends before the pool does (a truncated file): the superblock (offset 0)
    /// is whole and its geometry sound, but describes more bytes than the media holds.
    Truncated,
    /// A valid segment header outside its lane's continuous chain.
    SegmentChain,
    /// A segment whose header fails its checks holds a committed unit its lane's chain
    /// does not reach (the header was damaged: a segment of committed objects lost).
    LostSegment,
    /// A committed unit's header, or one of its object headers, fails its checksum.
    HeaderChecksum,
    /// A committed unit's (or object's) lengths or counts point outside its bounds.
    HeaderBounds,
    /// A segment's first unit does not continue its lane's sequence.
    SequenceGap,
    /// Two committed objects carry the same name and version.
    DuplicateVersion,
    /// An object's payload does not match its checksum.
    PayloadChecksum,
    /// A delta's record (extent table) is inconsistent or fails its checksum.
    DeltaRecord,
    /// A delta's parent is missing, or not one level shallower, or of another length.
    DeltaChain,
}

impl fmt::Display for CorruptKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CorruptKind::SuperblockChecksum => "superblock checksum mismatch",
            CorruptKind::Geometry => "superblock geometry does not fit the media",
            CorruptKind::Truncated => "truncated: the file is shorter than the pool its superblock describes",
            CorruptKind::SegmentChain => "segment header outside its lane's chain",
            CorruptKind::LostSegment => {
                "segment header damaged: the segment holds committed units its lane no longer reaches"
            }
            CorruptKind::HeaderChecksum => "committed unit or object header checksum mismatch",
            CorruptKind::HeaderBounds => "committed unit or object length or count out of bounds",
            CorruptKind::SequenceGap => "gap in a lane's unit sequence",
            CorruptKind::DuplicateVersion => "duplicate (name, version)",
            CorruptKind::PayloadChecksum => "payload checksum mismatch",
            CorruptKind::DeltaRecord => "delta record inconsistent or checksum mismatch",
            CorruptKind::DeltaChain => "delta parent missing or mismatched",
        })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::NotFormatted => write!(f, "not an nvs pool (no superblock magic at offset 0)"),
            Error::UnsupportedVersion { found } => write!(
                f,
                "pool format version {found} is not supported (this build reads versions {} to {})",
                crate::limits::FORMAT_VERSION_MIN,
                crate::limits::FORMAT_VERSION
            ),
            Error::Corrupted { offset, kind } => write!(f, "pool corrupted at offset {offset:#x}: {kind}"),
            Error::OldFormat { found } => write!(
                f,
                "pool format version {found} is read-only in this build (it writes versions {} to {}): \
                 open it read-only, or copy its objects into a new pool",
                crate::limits::FORMAT_VERSION_WRITABLE,
                crate::limits::FORMAT_VERSION
            ),
            Error::Full => write!(f, "pool full: no free segment left"),
            Error::NoSpace => {
                write!(f, "no space left on the file system for another segment of the pool (nothing written)")
            }
            Error::Fragmented { needed, free } => write!(
                f,
                "pool full: this unit needs {needed} free segments side by side; {free} are free, but no run that long"
            ),
            Error::TooLarge { len_bytes, max_bytes } => {
                write!(f, "object of {len_bytes} bytes does not fit in this pool (at most {max_bytes} bytes)")
            }
            Error::MetaTooLong { len_bytes } => {
                write!(f, "metadata of {len_bytes} bytes is too long (at most {})", crate::limits::META_MAX)
            }
            Error::NameTooLong { len_bytes } => {
                write!(f, "name of {len_bytes} bytes is too long (at most {})", crate::limits::NAME_MAX)
            }
            Error::NameEmpty => write!(f, "empty name"),
            Error::ClaimLockTimeout { waited_ms, holder_pid } => {
                write!(f, "another writer process of the pool has held its claim lock for {waited_ms} ms")?;
                if holder_pid != 0 {
                    write!(f, " (process {holder_pid})")?;
                }
                write!(f, ", stopped or stuck: nothing was claimed or changed; try again, or end that process")
            }
            Error::NotFound => write!(f, "no such object"),
            Error::BufferTooSmall { needed_bytes } => write!(f, "buffer too small: object is {needed_bytes} bytes"),
            Error::VersionNotIncreasing { latest: u64::MAX, given: u64::MAX } => {
                write!(f, "no version after {}: the name's versions are used up", u64::MAX)
            }
            Error::VersionNotIncreasing { latest, given } => {
                write!(f, "version {given} is not greater than the latest version {latest}")
            }
            Error::BatchSize { count } => {
                write!(
                    f,
                    "a batch holds 1 to {} objects, not {count} (more: put_batch_in, with a plan slot per object)",
                    crate::limits::BATCH_MAX
                )
            }
            Error::NoSuchLane { lane, lanes_max } => write!(f, "lane {lane} does not exist (pool has {lanes_max})"),
            Error::ReadOnly => write!(f, "pool is open read-only"),
            Error::LaneBusy { lane } => write!(f, "lane {lane} already has a writer"),
            Error::LaneNotOwned { lane } => {
                write!(f, "lane {lane} is not one of this writer's lanes (another process may own it)")
            }
            Error::NeedsLaneNames => write!(
                f,
                "writers in several processes need a pool with lane names (create it with --lane-names / \
                 lane_names), so that no two of them take the same version of a name"
            ),
            Error::IndexFull { what, entries, names } => {
                write!(
                    f,
                    "index memory full: no room for more {what} (at {entries} objects, {names} names); \
                     retention frees room only a whole segment at a time, never a lane's current one: \
                     reclaim if older segments hold released versions, else give the index more memory \
                     (a larger FixedMemory, or smaller segments so that reclaim can free one)"
                )
            }
            Error::BadGeometry { what } => write!(f, "cannot lay out a pool: {what}"),
            Error::DeltaRanges { offset } => write!(
                f,
                "changed ranges must be sorted by offset and lie inside the object (bad range at offset {offset})"
            ),
            Error::DeltaOptions { what } => write!(f, "bad delta options: {what}"),
            Error::NotBorrowable => write!(
                f,
                "this version is not in one place on the media (a delta) or the media lends no bytes: copy it with get"
            ),
            Error::AmbiguousName { lanes } => {
                write!(f, "{lanes} lanes hold this name (the pool has lane names): name the lane to read")
            }
            Error::ElementSize { len_bytes, elem_bytes } => {
                write!(f, "object of {len_bytes} bytes is not a whole number of {elem_bytes}-byte elements")
            }
            Error::ChangesInconsistent => {
                write!(f, "a delta's changed ranges differed between planning and storing; nothing was committed")
            }
            Error::Invariant { what, committed } => {
                write!(f, "nvs invariant broken: {what}; ")?;
                match committed {
                    true => write!(
                        f,
                        "the unit was committed (reopening the pool recovers it), but this pool's index may lack it"
                    )?,
                    false => write!(f, "nothing was committed by this call")?,
                }
                write!(f, "; this pool takes no more writes: reopen it")
            }
            Error::NotDurable => write!(
                f,
                "the media failed to make a write durable (a fence failed): the unit is not indexed, and this pool takes no more writes; reopen it"
            ),
        }
    }
}

impl core::error::Error for Error {}

impl Error {
    /// A refusal of one object's own input (its name, metadata, version, size, delta
    /// ranges), as planning a unit finds it object by object.
    pub(crate) fn is_one_objects(&self) -> bool {
        matches!(
            self,
            Error::NameEmpty
                | Error::NameTooLong { .. }
                | Error::MetaTooLong { .. }
                | Error::VersionNotIncreasing { .. }
                | Error::TooLarge { .. }
                | Error::DeltaRanges { .. }
        )
    }
}

/// Why a batch ([`Pool::put_batch`](crate::Pool::put_batch) and its kin) was refused:
/// the [`Error`], and which object of the batch it is about, if it is one object's.
///
/// Displayed as `object 2 of the batch: empty name`, or as the error alone when no one
/// object is at fault. `?` turns it into its [`Error`] (dropping the index) where a
/// function returns nvs's [`Result`].
///
/// ```
/// use nvs_core::{BatchError, Error};
/// let e = BatchError { index: Some(2), error: Error::NameEmpty };
/// assert_eq!(e.to_string(), "object 2 of the batch: empty name");
/// assert_eq!(Error::from(e), Error::NameEmpty);
/// assert_eq!(BatchError::from(Error::Full).to_string(), Error::Full.to_string());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchError {
    /// The object at fault — its index in the slice of objects given — when the error is
    /// about that object's own input: `NameEmpty`, `NameTooLong`, `MetaTooLong`,
    /// `VersionNotIncreasing`, `TooLarge` (the object; `None` for a batch too large as a
    /// whole) and `DeltaRanges`. `None` for everything else: the batch's size, the pool's
    /// or the lane's state, room (`Full`, `IndexFull`, ...), and `ChangesInconsistent`
    /// (found while the unit is stored, not while its objects are checked).
    pub index: Option<usize>,
    /// What was refused.
    pub error: Error,
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "object {i} of the batch: {}", self.error),
            None => write!(f, "{}", self.error),
        }
    }
}

impl core::error::Error for BatchError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// The error, without the index.
impl From<BatchError> for Error {
    fn from(e: BatchError) -> Error {
        e.error
    }
}

/// An error no one object of the batch is at fault for.
impl From<Error> for BatchError {
    fn from(error: Error) -> BatchError {
        BatchError { index: None, error }
    }
}

/// `Result` with nvs's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
