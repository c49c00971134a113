//! # nvs-core
//!
//! The `no_std`, allocation-free core of nvs, a Rust NVStream: named, versioned,
//! immutable objects in per-writer logs on byte-addressable persistent memory, written
//! with non-temporal stores, one fence, an 8-byte commit word and one more fence.
//!
//! Layers, bottom up (each a module):
//! - [`media`]: the [`Media`] trait, the one door to persistent memory;
//! - [`region`] + `arch`: `Media` over a raw `(ptr, len)` range (x86_64 NT stores or
//!   portable volatile stores) — the only `unsafe` in the crate;
//! - [`format`]: every on-media byte; [`hash`]: the checksum;
//! - [`index`]: the O(1) index in caller-provided memory;
//! - [`recover`]: rebuilding lanes and index from the media;
//! - [`pool`]: format/open/put/batch/get and the commit protocol;
//! - [`delta`]: delta puts (only the changed chunks) and change detection by hashes.
#![no_std]
#![forbid(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod arch;
pub mod delta;
pub mod error;
pub mod format;
pub mod hash;
pub mod index;
pub mod media;
pub mod mutant;
pub mod pool;
pub mod recover;
pub mod region;
pub mod sync;

pub use delta::{Changes, ChunkHashes, Delta, DeltaOptions, Put};
pub use error::{CorruptKind, Error, Result};
pub use format::{BATCH_MAX, LANES_MAX, NAME_MAX};
#[cfg(feature = "alloc")]
pub use index::HeapMemory;
pub use index::{FixedMemory, IndexMemory};
pub use media::Media;
pub use pool::{FormatOptions, LaneInfo, LaneWriter, NameInfo, Object, ObjectInfo, Pool, Versions, VersionsIter};
pub use recover::RecoveryStats;
pub use region::{Region, StoreKind};

/// Whether bulk NT copies use at least 32-byte AVX2 stores on this CPU (see
/// [`region::nt_store_width`] for the width).
pub fn wide_stores_avx2() -> bool {
    arch::has_avx2()
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
