//! The fixed limits of this build's format, in one place that everything (the format,
//! the errors that name them, the public API) takes them from.

/// Format version written by this build.
pub const FORMAT_VERSION: u32 = 3;
/// The oldest format version this build writes to (format 2 pools keep the two-fence
/// commit of their units; format 3 pools with payload checksums commit with one fence).
pub const FORMAT_VERSION_WRITABLE: u32 = 2;
/// The oldest format version this build reads (format 1 pools open read-only).
pub const FORMAT_VERSION_MIN: u32 = 1;
/// Offset of segment 0: the superblock owns the first 4 KiB.
pub const DATA_OFF: u64 = 4096;
/// Most lanes a pool may have.
pub const LANES_MAX: u32 = 256;
/// Most bytes of metadata one object carries (format 2).
pub const META_MAX: usize = 1024;
/// Longest name in bytes.
pub const NAME_MAX: usize = 255;
/// Most objects in one batch (one commit) through `put_batch`, whose plan is kept on the
/// stack; `put_batch_in` commits more, with a plan slot per object from the caller.
pub const BATCH_MAX: usize = 256;
