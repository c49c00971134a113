//! What the index holds per object, per name and per segment.

use bytemuck::{Pod, Zeroable};
use static_assertions::const_assert_eq;

/// "No entry" in `next`/`first`/`last`.
pub const NONE: u32 = u32::MAX;

/// One committed object (one cache line).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Entry {
    /// The object's version.
    pub version: u64,
    /// Media offset of the payload.
    pub payload_off: u64,
    /// The object's length (what a get returns).
    pub len_bytes: u64,
    /// The payload's length on the media: `len_bytes` for a full version, its delta
    /// record's length for a delta.
    pub stored_bytes: u64,
    /// Lane sequence number of the unit that committed it.
    pub seq: u64,
    /// Index of its `NameSlot`.
    pub name: u32,
    /// Next entry of the same name (higher version), or `NONE`.
    pub next: u32,
    /// The lane that wrote it.
    pub lane: u32,
    /// 0 for a full version; a delta's distance from its full version.
    pub depth: u16,
    /// Bytes of metadata after the name in its object header.
    pub meta_len: u16,
    /// The payload checksum (0 when the pool has none).
    pub payload_sum: u64,
}

/// One distinct name.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct NameSlot {
    pub hash: u64,
    /// Media offset of the name bytes (in the object header that first used the name).
    pub name_off: u64,
    pub first: u32,
    pub last: u32,
    pub count: u32,
    pub name_len: u16,
    pub pad: u16,
    /// The highest version a writer has taken for this name, committed or not: lanes
    /// writing one name concurrently never take the same version.
    pub reserved: u64,
}

const_assert_eq!(core::mem::size_of::<Entry>(), 64);
const_assert_eq!(core::mem::size_of::<NameSlot>(), 40);

/// Per-segment state: owner lane (or `FREE`) and place in its chain. Recovery sorts
/// these by (lane, chain_seq, covered last) to walk chains, then back by `index`.
///
/// A span (a segment header owning several consecutive segments) is its head slot
/// (`span` ≥ 1) and `span - 1` covered slots (`span` 0) with the head's lane, chain
/// position and first sequence number, and `head` its index.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SegSlot {
    pub chain_seq: u64,
    pub first_seq: u64,
    pub lane: u32,
    pub index: u32,
    /// Segments the header at this slot owns; 0 for a slot a span covers.
    pub span: u32,
    /// The index of the slot holding this segment's header (its own for a head).
    pub head: u32,
}

impl SegSlot {
    /// A free slot at `index`.
    pub const fn free(index: u32) -> SegSlot {
        SegSlot { chain_seq: 0, first_seq: 0, lane: u32::MAX, index, span: 1, head: index }
    }

    /// A span's covered slot, not its head.
    pub const fn is_covered(&self) -> bool {
        self.span == 0
    }
}

const_assert_eq!(core::mem::size_of::<SegSlot>(), 32);
