//! The fixed limits of this build's format, in one place that everything (the format,
//! the errors that name them, the public API) takes them from.

/// Format version written by this build (it reads every version from
/// [`FORMAT_VERSION_OLDEST`] up to this one).
pub const FORMAT_VERSION: u32 = 2;
/// Oldest format version this build reads (1: payload checksums are nvs-hash64).
pub const FORMAT_VERSION_OLDEST: u32 = 1;
/// Most lanes a pool may have.
pub const LANES_MAX: u32 = 256;
/// Longest name in bytes.
pub const NAME_MAX: usize = 255;
/// Most objects in one batch (one commit).
pub const BATCH_MAX: usize = 256;
