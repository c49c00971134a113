//! # nvs-core
//!
//! The `no_std` core of nvs (allocation-free without the `alloc` feature), a Rust
//! NVStream: named, versioned, immutable objects in per-writer logs on byte-addressable
//! persistent memory, written with non-temporal stores, one fence, an 8-byte commit word
//! and one more fence.
//!
//! The front door is this page:
//! - [`Pool`] over a [`Media`] ([`Region`] for real memory) and an [`IndexMemory`]
//!   ([`FixedMemory`], or `HeapMemory` with the `alloc` feature): [`Pool::format`],
//!   [`Pool::open`], [`Pool::open_read_only`];
//! - puts of [`Object`]s, one shape everywhere: [`Pool::put`] / [`Pool::put_batch`] on a
//!   lane, or the same on a [`LaneWriter`] from [`Pool::lane`] (one thread per lane);
//! - gets: [`Pool::get`], [`Pool::latest`], [`Pool::stat`], [`Pool::versions`],
//!   [`Pool::names`];
//! - deltas ([`Object::delta`], [`ChunkHashes`]) and retention ([`Pool::reclaim`]);
//! - reading a pool's bytes as they lie, damaged or not, without recovery:
//!   [`walk::Walker`] (inspection and salvage);
//! - one error type, [`Error`].
//!
//! ```
//! use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Region};
//! #[repr(align(64))]
//! struct Line([u8; 64]);
//! let mut mem: Vec<Line> = (0..(1 << 20) / 64).map(|_| Line([0; 64])).collect(); // 1 MiB
//! // SAFETY: `mem` is 64-byte aligned, outlives the pool, and nothing else touches it.
//! let media = unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) };
//! let pool = Pool::format(media, FormatOptions::new(7), HeapMemory::new())?;
//! std::thread::scope(|s| {
//!     for lane in 0..2u32 {
//!         let mut w = pool.lane(lane).unwrap(); // one writer per lane, no lock while copying
//!         s.spawn(move || w.put(Object::pod(&format!("rank{lane}"), &[lane as f64; 8])).unwrap());
//!     }
//! });
//! let mut buf = [0u8; 64];
//! assert_eq!(pool.get("rank1", 1, &mut buf)?, 64);
//! # Ok::<(), nvs_core::Error>(())
//! ```
//!
//! Where things are (DESIGN.md has the why): `media/` (the [`Media`] trait, [`Region`],
//! the NT-store instructions), `format/` (every on-media byte, decoding, the checksum),
//! `log/` (the commit protocol: planning, segment ownership, sealing a unit), `recover.rs`,
//! `retention.rs`, `delta/`, `index/`, `pool/` (the API above). What nvs's own simulator,
//! verifier and fuzz targets need beyond it is behind the `internals` feature, in
//! `internals` when enabled: not a stable API.
#![no_std]
#![deny(missing_docs)]
#![forbid(clippy::undocumented_unsafe_blocks)]

#[cfg(feature = "alloc")]
extern crate alloc;

mod checksum;
mod delta;
mod error;
mod format;
mod index;
mod limits;
mod log;
mod media;
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
mod mutant;
mod object;
mod pool;
mod recover;
mod retention;
mod shared;
mod stream;
mod sync;
pub mod walk;

pub use delta::{Changes, ChunkHashes, DeltaOptions};
pub use error::{BatchError, CorruptKind, Error, Result};
pub use format::sum::Sum;
pub use format::Geometry;
#[cfg(feature = "alloc")]
pub use index::HeapMemory;
pub use index::{FixedMemory, IndexMemory};
pub use limits::{
    BATCH_MAX, DATA_OFF, FORMAT_VERSION, FORMAT_VERSION_MIN, FORMAT_VERSION_WRITABLE, LANES_MAX, META_MAX, NAME_MAX,
};
pub use log::plan::PlanSlot;
pub use media::region::{nt_store_width, Region, StoreKind};
pub use media::Media;
pub use object::{IndexMark, Key, LaneInfo, NameId, NameInfo, Object, ObjectInfo, PoolStats, Put, Versions};
#[cfg(feature = "alloc")]
pub use pool::{checkpoint_memory, CheckpointUse};
pub use pool::{read_layout, FormatOptions, LaneWriter, Layout, NameIter, ObjectsAfter, Pool, VersionIter};

// What users share between threads is shareable: a pool (readers and lane writers on
// many threads), its lane writers (each moved to its thread). Checked at compile time.
static_assertions::assert_impl_all!(Pool<Region, FixedMemory<1, 1, 2, 1>>: Send, Sync);
static_assertions::assert_impl_all!(LaneWriter<'static, Region, FixedMemory<1, 1, 2, 1>>: Send);
#[cfg(feature = "alloc")]
static_assertions::assert_impl_all!(Pool<Region, HeapMemory>: Send, Sync);

/// Not a stable API: what nvs's own simulator, verifier, fuzz targets and tools use
/// beyond the front door (the on-media format, the checksum, the seeded protocol
/// mutants). Enabled by the `internals` feature; may change in any release.
#[cfg(feature = "internals")]
pub mod internals {
    /// The on-media format: every header, constant and decoder (FORMAT.md in prose).
    pub mod format {
        pub use crate::format::*;
    }
    /// The checksum (nvs-hash64) every header and payload uses.
    pub mod hash {
        pub use crate::format::hash::*;
    }
    /// nvs-sum, the payload checksum of format 2 (and which kind a pool uses).
    pub mod sum {
        pub use crate::format::sum::*;
    }
    /// The in-memory index (for the index's own benchmark, `floor/index_64`).
    pub mod index {
        pub use crate::index::{name_key, Entry, Index, NONE};
    }
    /// Index checkpoints: the seed of their trailing sum (mixed into the pool id), for
    /// checks that forge one.
    #[cfg(feature = "alloc")]
    pub mod checkpoint {
        pub use crate::pool::CHECKPOINT_SUM_SEED as SUM_SEED;
    }
    /// Seeded protocol bugs, live one at a time in a `--cfg nvs_mutant` build.
    pub mod mutant {
        pub use crate::mutant::*;
    }
    /// Use AVX-512 NT stores where the CPU has them (off by default); returns whether
    /// they are now in use (for benchmarks).
    pub use crate::media::region::use_avx512;
}

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
