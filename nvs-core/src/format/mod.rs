//! The on-media format, byte by byte (FORMAT.md is the prose twin of this file).
//!
//! ```text
//! offset 0            superblock (64 B), rest of the first 4 KiB unused
//! data_off (4096)     segment 0 | segment 1 | ... | segment segment_count-1
//! segment             segment header (64 B) | unit | unit | ... | free
//! unit (one commit)   unit header (64 B) | object | object | ...
//! object              object header (48 B) | name | pad to 64 | payload | pad to 64
//! ```
//! All integers little-endian (nvs refuses to build on big-endian targets). Every unit,
//! object and payload starts on a 64-byte (cache-line) boundary.
//!
//! Invariants a reader relies on, each checked on the way in (`decode_*`):
//! - a superblock counts only with the magic, a matching checksum and a geometry that
//!   fits inside the media;
//! - a segment header counts only with its magic, a matching checksum and this pool's id;
//! - a unit counts only if its commit word equals `commit_word(pool_id, lane, seq,
//!   header checksum)` for the next expected `seq` of that lane; only then are its
//!   lengths trusted, and even then only after checking them against the segment end.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]
// Reachable only through `internals`; FORMAT.md documents every field.
#![allow(missing_docs)]

pub mod decode;
pub use crate::checksum::{hash, sum};

pub use crate::limits::{
    BATCH_MAX, DATA_OFF, FORMAT_VERSION, FORMAT_VERSION_MIN, FORMAT_VERSION_WRITABLE, LANES_MAX, META_MAX, NAME_MAX,
};
pub use decode::*;

use crate::error::{Error, Result};
use crate::mutant::{self, Mutant};
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};
use hash::{hash64, hash64_words, mix};
use static_assertions::const_assert_eq;

#[cfg(not(target_endian = "little"))]
compile_error!("nvs stores its format in native byte order and supports little-endian targets only");

#[cfg(not(target_pointer_width = "64"))]
compile_error!("nvs casts the format's 64-bit offsets and lengths to usize at the media boundary: 64-bit targets only");

/// `b"NVSPOOL\0"`: superblock magic.
pub const SUPERBLOCK_MAGIC: u64 = u64::from_le_bytes(*b"NVSPOOL\0");
/// `b"NVSSEGM\0"`: segment header magic.
pub const SEGMENT_MAGIC: u64 = u64::from_le_bytes(*b"NVSSEGM\0");
/// Domain tag mixed into every commit word.
pub const COMMIT_TAG: u64 = u64::from_le_bytes(*b"NVSCMIT\0");
/// Seed of the superblock checksum (other checksums are seeded with the pool id).
pub const SUPERBLOCK_SEED: u64 = u64::from_le_bytes(*b"NVSSUPR\0");

/// Cache line: the alignment of units, objects and payloads.
pub const LINE: u64 = 64;
/// Smallest segment.
pub const SEGMENT_MIN: u64 = 4096;
/// Largest segment (1 TiB): keeps every offset sum far from overflow.
pub const SEGMENT_MAX: u64 = 1 << 40;
/// Most segments a pool may have.
pub const SEGMENTS_MAX: u64 = 1 << 24;

/// Unit header flag: the lane's writer closed its stream here (a unit of no objects).
/// A later unit on the lane reopens it.
pub const UNIT_END_OF_STREAM: u64 = 1;
/// Unit header flag: the lane released its segments below chain position
/// `base` (retention); a unit of no objects. Recovery skips those segments.
pub const UNIT_TRUNCATE: u64 = 2;

/// Unit header flag (format 2): the lane's writer detached cleanly — its process ended
/// without closing the stream, and a later writer may go on with it; a unit of no
/// objects. Followers wait for it instead of reporting the writer gone.
pub const UNIT_DETACH: u64 = 4;

/// Superblock flag: every object carries a payload checksum, verified on read.
pub const FLAG_PAYLOAD_CHECKSUM: u32 = 1;
/// Superblock flag: objects may be deltas ([`OBJECT_DELTA`]). Set by every format of
/// this build; a pool without it (made before deltas existed) takes only full versions,
/// and a build that does not know the flag refuses the pool instead of misreading it.
pub const FLAG_DELTAS: u32 = 2;
/// Superblock flag (format 2): each lane has names of its own. A name is identified by
/// (lane, name) and its versions count per lane, so writers on several lanes — ranks in
/// several processes — may all put "temperature" without agreeing on versions.
pub const FLAG_LANE_NAMES: u32 = 4;

/// Object header flag: the payload is a [`DeltaRecord`] against an earlier version.
pub const OBJECT_DELTA: u16 = 1;
/// Longest chain of deltas from a full version (a delta's `depth`).
pub const DELTA_DEPTH_MAX: u32 = 255;

/// The superblock, at offset 0.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Superblock {
    pub magic: u64,
    pub format_version: u32,
    pub flags: u32,
    /// Random per format: binds every segment header and commit word to this pool.
    pub pool_id: u64,
    pub pool_len: u64,
    pub segment_len: u64,
    pub segment_count: u32,
    pub lanes_max: u32,
    pub data_off: u64,
    /// `nvs-hash64(SUPERBLOCK_SEED, bytes 0..56)`.
    pub checksum: u64,
}

/// First 64 bytes of a segment owned by a lane; written and fenced before any unit in it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct SegmentHeader {
    pub magic: u64,
    pub pool_id: u64,
    pub lane: u32,
    pub flags: u32,
    /// Position of this segment in its lane's chain: 0, 1, 2, ...
    pub chain_seq: u64,
    /// The lane sequence number of the first unit written in this segment.
    pub first_seq: u64,
    /// Format 2: how many consecutive segments, from this one, the header owns (1 ..=
    /// the segments left in the pool): a unit larger than a segment runs through the
    /// following ones, headers and all. Format 1: 0, read as 1.
    pub span: u64,
    pub reserved: u64,
    /// `nvs-hash64(pool_id, bytes 0..56)`.
    pub checksum: u64,
}

/// First 64 bytes of a unit (one commit: one put or one batch).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct UnitHeader {
    /// Format 2, and format 3 without payload checksums: written last, alone, after a
    /// fence (an NT store of the header's line in which only this word changes):
    /// `commit_word(pool_id, lane, seq, checksum)`. Format 3 with payload checksums
    /// (a *sealed* unit, [`Superblock::one_fence`]): stored with the rest of the line,
    /// before the unit's one fence: `sealed_commit_word(pool_id, lane, seq, checksum,
    /// offset)`.
    pub commit: u64,
    /// Lane sequence number: 0, 1, 2, ... per lane, across segments.
    pub seq: u64,
    /// Bytes of the whole unit, this header included; a multiple of 64.
    pub unit_len: u64,
    pub object_count: u32,
    pub lane: u32,
    /// `UNIT_END_OF_STREAM`, `UNIT_TRUNCATE`, `UNIT_DETACH` (format 2), or 0.
    pub flags: u64,
    /// A truncate unit's retention base: the lane's new lowest chain position; else 0.
    pub base: u64,
    /// 0; in a sealed unit, `objects_digest`: nvs-hash64(pool_id) over its object
    /// headers' checksums, in order.
    pub reserved: u64,
    /// `nvs-hash64(pool_id, bytes 8..56)`.
    pub checksum: u64,
}

/// Header of one object in a unit; the name follows it directly.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct ObjectHeader {
    pub version: u64,
    pub payload_len: u64,
    pub name_len: u16,
    /// 0, or [`OBJECT_DELTA`].
    pub flags: u16,
    /// A delta's distance from its full version (1 ..= [`DELTA_DEPTH_MAX`]); 0 for a full one.
    pub depth: u16,
    /// Format 2: bytes of metadata after the name (0 ..= [`META_MAX`]); format 1: 0
    /// (these were the high bytes of a 4-byte depth, always 0).
    pub meta_len: u16,
    /// When the pool has FLAG_PAYLOAD_CHECKSUM: `nvs-sum(pool_id, payload)` (format 2)
    /// or `nvs-hash64(pool_id, payload)` (format 1); else 0.
    pub payload_sum: u64,
    /// A delta's reconstructed length (its full version's length); 0 for a full one.
    pub object_len: u64,
    /// `nvs-hash64(pool_id, bytes 0..40 ++ name)`.
    pub checksum: u64,
}

/// The start of a delta object's payload, followed by `extent_count` [`Extent`]s, zero
/// padding to the next 64-byte boundary of the payload, and the extents' bytes back to back.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct DeltaRecord {
    /// The version of the same name this delta applies to (full, or a delta one shallower).
    pub parent: u64,
    pub extent_count: u64,
    /// Sum of the extents' lengths: the payload is `delta_data_off(extent_count) + data_len` bytes.
    pub data_len: u64,
    /// `nvs-hash64(seed(pool_id), extents ++ bytes 0..24)`: the hasher takes the extents
    /// as they are streamed, then the record's first 24 bytes.
    pub table_sum: u64,
}

/// One changed range of a delta: `len` bytes at `off` of the object replace its parent's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Extent {
    pub off: u64,
    pub len: u64,
}

/// Offset of a delta's data in its payload.
pub const fn delta_data_off(extent_count: u64) -> u64 {
    line_up(size_of::<DeltaRecord>() as u64 + extent_count * size_of::<Extent>() as u64)
}

const_assert_eq!(size_of::<Superblock>(), 64);
const_assert_eq!(offset_of!(Superblock, checksum), 56);
const_assert_eq!(offset_of!(Superblock, segment_count), 40);
const_assert_eq!(size_of::<SegmentHeader>(), 64);
const_assert_eq!(offset_of!(SegmentHeader, chain_seq), 24);
const_assert_eq!(offset_of!(SegmentHeader, span), 40);
const_assert_eq!(offset_of!(SegmentHeader, checksum), 56);
const_assert_eq!(size_of::<UnitHeader>(), 64);
const_assert_eq!(offset_of!(UnitHeader, commit), 0);
const_assert_eq!(offset_of!(UnitHeader, object_count), 24);
const_assert_eq!(offset_of!(UnitHeader, checksum), 56);
const_assert_eq!(size_of::<ObjectHeader>(), 48);
const_assert_eq!(offset_of!(ObjectHeader, payload_sum), 24);
const_assert_eq!(offset_of!(ObjectHeader, depth), 20);
const_assert_eq!(offset_of!(ObjectHeader, object_len), 32);
const_assert_eq!(offset_of!(ObjectHeader, checksum), 40);
const_assert_eq!(size_of::<DeltaRecord>(), 32);
const_assert_eq!(offset_of!(DeltaRecord, table_sum), 24);
const_assert_eq!(size_of::<Extent>(), 16);

// The limits fit the fields that carry them (the write path narrows with `as`): a
// name's and metadata's lengths and a delta's depth in u16 header and index fields, a
// lane's name space (`lane + 1`) in a name key's top 16 bits, the segment count in u32.
const _: () = assert!(NAME_MAX <= u16::MAX as usize);
const _: () = assert!(META_MAX <= u16::MAX as usize);
const _: () = assert!(DELTA_DEPTH_MAX <= u16::MAX as u32);
const _: () = assert!(LANES_MAX < 1 << 16);
const _: () = assert!(SEGMENTS_MAX <= u32::MAX as u64);
// Units, objects and payloads sit on lines: the superblock's area, every segment and
// the unit and segment headers are whole lines, so a unit's commit word (its first
// word) is 8-byte aligned, one failure-atomic store.
const _: () = assert!(LINE.is_power_of_two());
const _: () = assert!(DATA_OFF.is_multiple_of(LINE));
const _: () = assert!(SEGMENT_MIN.is_multiple_of(LINE));
const _: () = assert!(size_of::<UnitHeader>() as u64 == LINE);
const _: () = assert!(size_of::<SegmentHeader>() as u64 == LINE);
// The smallest segment holds its header line, a unit header and an object of the
// longest name and metadata: `Superblock::max_object_bytes` never goes below zero.
const _: () = assert!(LINE + LINE + head_len(NAME_MAX, META_MAX) <= SEGMENT_MIN);

/// Bytes of a header a checksum covers (everything before the checksum field).
const fn covered<T>() -> usize {
    size_of::<T>() - 8
}

impl Superblock {
    /// Largest payload one object with a `name_len`-byte name can have in this pool
    /// (alone in a unit): a little under one segment in format 1; in format 2, where a
    /// unit may span segments, a little under the whole pool.
    #[inline]
    pub fn max_object_bytes(&self, name_len: usize) -> u64 {
        (self.max_unit_bytes() - LINE - object_head_len(name_len)) & !(LINE - 1)
    }

    /// The largest unit (header and objects): what the data of the longest span holds.
    #[inline]
    pub fn max_unit_bytes(&self) -> u64 {
        let span = if self.spans() { self.segment_count as u64 } else { 1 };
        span * self.segment_len - LINE
    }

    /// Units are sealed ([`UnitHeader::commit`]): format 3 with payload checksums. A
    /// sealed unit commits with one fence: its commit word is stored with its header,
    /// and it counts only once its header, its object headers (through the digest in
    /// its header) and its payloads all verify. Only a lane's newest unit can be torn,
    /// so recovery verifies the payloads of that one only.
    #[inline]
    pub fn one_fence(&self) -> bool {
        self.format_version >= 3 && self.has_payload_checksum()
    }

    /// The commit word of unit `seq` of `lane` at `off` in this pool, with header
    /// checksum `checksum`: [`sealed_commit_word`] in a sealed pool, else [`commit_word`].
    #[inline]
    pub fn commit_word_at(&self, lane: u32, seq: u64, checksum: u64, off: u64) -> u64 {
        if self.one_fence() {
            sealed_commit_word(self.pool_id, lane, seq, checksum, off)
        } else {
            commit_word(self.pool_id, lane, seq, checksum)
        }
    }

    /// Units may span segments (format 2 and later).
    pub fn spans(&self) -> bool {
        self.format_version >= 2
    }

    /// Segments a unit of `unit_len` bytes needs when it starts a span (the span's
    /// header line comes first).
    pub fn span_for(&self, unit_len: u64) -> u64 {
        (unit_len + LINE).div_ceil(self.segment_len)
    }

    pub fn compute_checksum(&self) -> u64 {
        hash64(SUPERBLOCK_SEED, bytemuck::bytes_of(self).get(..covered::<Self>()).unwrap_or(&[]))
    }
    pub fn has_payload_checksum(&self) -> bool {
        self.flags & FLAG_PAYLOAD_CHECKSUM != 0
    }
    /// Which checksum the payloads carry: none (flag bit 0 clear), nvs-hash64 (format
    /// 1) or nvs-sum (format 2).
    #[inline]
    pub fn sum_kind(&self) -> sum::SumKind {
        if !self.has_payload_checksum() {
            sum::SumKind::None
        } else if self.format_version >= 2 {
            sum::SumKind::Sum
        } else {
            sum::SumKind::Hash64
        }
    }
    pub fn has_deltas(&self) -> bool {
        self.flags & FLAG_DELTAS != 0
    }
    /// Each lane has names of its own ([`FLAG_LANE_NAMES`]).
    pub fn lane_names(&self) -> bool {
        self.flags & FLAG_LANE_NAMES != 0
    }
    /// The name space a lane's names are in: 0 for the pool's one name space, `lane + 1`
    /// in a pool with lane names (the index keys a name by it, [`crate::index::name_key`]).
    #[inline]
    pub fn name_space(&self, lane: u32) -> u32 {
        if self.lane_names() {
            lane + 1
        } else {
            0
        }
    }
    /// Media offset of segment `i` (caller keeps `i < segment_count`).
    pub fn segment_off(&self, i: u32) -> u64 {
        self.data_off + i as u64 * self.segment_len
    }
}

impl SegmentHeader {
    pub fn compute_checksum(&self) -> u64 {
        hash64(seed(self.pool_id), bytemuck::bytes_of(self).get(..covered::<Self>()).unwrap_or(&[]))
    }
}

impl UnitHeader {
    /// The header's eight words as stored (little-endian), from the fields: its bytes,
    /// in registers.
    #[inline]
    pub fn words(&self) -> [u64; 8] {
        [
            self.commit,
            self.seq,
            self.unit_len,
            self.object_count as u64 | (self.lane as u64) << 32,
            self.flags,
            self.base,
            self.reserved,
            self.checksum,
        ]
    }

    /// `nvs-hash64(pool_id, bytes 8..56)`, from the fields (the same bytes, in registers).
    #[inline]
    pub fn compute_checksum(&self, pool_id: u64) -> u64 {
        let w = self.words();
        hash64_words(seed(pool_id), w.get(1..7).unwrap_or(&[]), &[])
    }
}

impl ObjectHeader {
    /// The header's six words as stored (little-endian), from the fields: its bytes, in
    /// registers.
    #[inline]
    pub fn words(&self) -> [u64; 6] {
        [
            self.version,
            self.payload_len,
            self.name_len as u64 | (self.flags as u64) << 16 | (self.depth as u64) << 32 | (self.meta_len as u64) << 48,
            self.payload_sum,
            self.object_len,
            self.checksum,
        ]
    }

    /// `nvs-hash64(pool_id, bytes 0..40 ++ name ++ meta)`, from the fields (the same
    /// bytes, in registers).
    #[inline]
    pub fn compute_checksum(&self, pool_id: u64, name: &[u8], meta: &[u8]) -> u64 {
        let all = self.words();
        let words = all.get(..5).unwrap_or(&[]);
        if meta.is_empty() {
            return hash64_words(seed(pool_id), words, name);
        }
        let mut h = hash::Hasher::new(seed(pool_id));
        words.iter().for_each(|w| h.write_u64(*w));
        h.write(name);
        h.write(meta);
        h.finish()
    }
}

/// The commit word of unit `seq` of `lane`: unforgeable by stale bytes of another pool
/// (pool id), another lane, an older unit of this lane (seq), or a torn header (checksum).
#[inline]
pub fn commit_word(pool_id: u64, lane: u32, seq: u64, header_checksum: u64) -> u64 {
    let sum = if mutant::on(Mutant::CommitWithoutChecksum) { 0 } else { header_checksum };
    mix(&[COMMIT_TAG, seed(pool_id), lane as u64, seq, sum])
}

/// The commit word of a sealed unit (format 3 with payload checksums): as
/// [`commit_word`], and bound to the unit's place too, so that a unit's bytes copied
/// elsewhere (a pool image stored as a payload of itself) never verify there.
#[inline]
pub fn sealed_commit_word(pool_id: u64, lane: u32, seq: u64, header_checksum: u64, off: u64) -> u64 {
    let sum = if mutant::on(Mutant::CommitWithoutChecksum) { 0 } else { header_checksum };
    let place = if mutant::on(Mutant::SealWithoutPlace) { 0 } else { off };
    mix(&[COMMIT_TAG, seed(pool_id), lane as u64, seq, sum, place])
}

/// The digest of a sealed unit's object headers (its header's `reserved` word): one
/// nvs-hash64 stream over their checksums, in order.
#[derive(Clone, Copy, Debug)]
pub struct ObjectsDigest(hash::Hasher);

impl ObjectsDigest {
    pub fn new(pool_id: u64) -> Self {
        ObjectsDigest(hash::Hasher::new(seed(pool_id)))
    }
    #[inline]
    pub fn add(&mut self, object_checksum: u64) {
        self.0.write_u64(object_checksum);
    }
    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// The pool id as mixed into checksums and commit words (a mutant drops it).
#[inline(always)]
pub fn seed(pool_id: u64) -> u64 {
    if mutant::on(Mutant::NoPoolIdCheck) {
        0
    } else {
        pool_id
    }
}

/// `x` rounded up to a multiple of 64 (callers keep `x` far below `u64::MAX`).
pub const fn line_up(x: u64) -> u64 {
    (x + LINE - 1) & !(LINE - 1)
}

/// Bytes from an object's start to its payload.
pub const fn object_head_len(name_len: usize) -> u64 {
    head_len(name_len, 0)
}

/// Bytes before an object's payload when it has `meta_len` bytes of metadata: header,
/// name, metadata, zeros to the next line.
pub const fn head_len(name_len: usize, meta_len: usize) -> u64 {
    line_up(size_of::<ObjectHeader>() as u64 + name_len as u64 + meta_len as u64)
}

/// Bytes one object takes in a unit.
pub const fn object_len(name_len: usize, payload_len: u64) -> u64 {
    object_head_len(name_len) + line_up(payload_len)
}

/// Geometry chosen at format time ([`crate::FormatOptions::geometry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[warn(missing_docs)]
pub struct Geometry {
    /// Bytes of media the pool uses (the superblock's 4 KiB and whole segments).
    pub pool_len: u64,
    /// Bytes per segment.
    pub segment_len: u64,
    /// Segments.
    pub segment_count: u32,
}

/// Default segment size for a pool of `pool_len` bytes: a power of two near 1/16 of it,
/// between 4 KiB and 64 MiB, so unequal lanes can share the pool.
pub fn default_segment_len(pool_len: u64) -> u64 {
    let target = pool_len.saturating_sub(DATA_OFF) / 16;
    let pow2 = if target == 0 { 1 } else { 1u64 << (63 - target.leading_zeros()) };
    pow2.clamp(SEGMENT_MIN, 64 << 20)
}

/// Lay out a pool of at most `media_len` bytes with segments of `segment_len` bytes.
pub fn geometry(media_len: u64, segment_len: u64) -> Result<Geometry> {
    if !(SEGMENT_MIN..=SEGMENT_MAX).contains(&segment_len) || !segment_len.is_multiple_of(LINE) {
        return Err(Error::BadGeometry { what: "segment size must be a multiple of 64 between 4 KiB and 1 TiB" });
    }
    let count = media_len.saturating_sub(DATA_OFF) / segment_len;
    if count == 0 {
        return Err(Error::BadGeometry { what: "media too small for the superblock and one segment" });
    }
    let count = count.min(SEGMENTS_MAX);
    Ok(Geometry { pool_len: DATA_OFF + count * segment_len, segment_len, segment_count: count as u32 })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header checksums computed from the fields equal the byte-wise definition.
    #[test]
    fn header_checksums_match_their_bytes() {
        let bh = UnitHeader {
            commit: 7,
            seq: 0x1122_3344_5566_7788,
            unit_len: 4096,
            object_count: 0x8000_0001,
            lane: 0xfedc_ba98,
            flags: 3,
            base: u64::MAX,
            reserved: 5,
            checksum: 0,
        };
        let want = crate::format::hash::hash64(99, bytemuck::bytes_of(&bh).get(8..56).unwrap_or(&[]));
        assert_eq!(bh.compute_checksum(99), want);
        let bh = UnitHeader { checksum: 0x0bad_cafe_f00d_0001, ..bh };
        assert!(bh.words().iter().flat_map(|w| w.to_le_bytes()).eq(bytemuck::bytes_of(&bh).iter().copied()));
        let name: [u8; 40] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        for n in 0..=name.len() {
            let oh = ObjectHeader {
                version: 0xdead_beef_0000_0001,
                payload_len: 0x0102_0304_0506_0708,
                name_len: 0xabcd,
                flags: 0x8001,
                depth: 0xfffe,
                meta_len: 0xfedc,
                payload_sum: 42,
                object_len: u64::MAX - 1,
                checksum: 0,
            };
            let with_sum = ObjectHeader { checksum: 0x0bad_cafe_f00d_0002, ..oh };
            let stored = with_sum.words().into_iter().flat_map(u64::to_le_bytes);
            assert!(stored.eq(bytemuck::bytes_of(&with_sum).iter().copied()), "words are the stored bytes");
            let mut h = crate::format::hash::Hasher::new(99);
            h.write(bytemuck::bytes_of(&oh).get(..40).unwrap_or(&[]));
            h.write(name.get(..n).unwrap_or(&[]));
            assert_eq!(oh.compute_checksum(99, name.get(..n).unwrap_or(&[]), &[]), h.finish(), "name of {n} bytes");
            // With metadata: the bytes after the name are covered too.
            let meta = name.get(..n / 2).unwrap_or(&[]);
            h.write(meta);
            assert_eq!(oh.compute_checksum(99, name.get(..n).unwrap_or(&[]), meta), h.finish(), "meta of {}", n / 2);
        }
    }

    /// Layout helpers keep payloads cache-line aligned and never undercount.
    #[test]
    fn layout_is_line_aligned() {
        assert_eq!(object_head_len(1), 64);
        assert_eq!(object_head_len(16), 64);
        assert_eq!(object_head_len(17), 128);
        assert_eq!(object_len(3, 0), 64);
        assert_eq!(object_len(3, 1), 128);
        assert_eq!(object_len(3, 65), 192);
        assert_eq!(default_segment_len(1 << 30), 32 << 20);
        assert_eq!(default_segment_len(4 << 30), 64 << 20);
        assert_eq!(default_segment_len(64 << 20), 2 << 20);
        assert_eq!(default_segment_len(8192), 4096);
    }

    /// Commit words differ for every bound field.
    #[test]
    fn commit_word_binds_every_field() {
        let w = commit_word(1, 2, 3, 4);
        assert_ne!(w, commit_word(9, 2, 3, 4));
        assert_ne!(w, commit_word(1, 9, 3, 4));
        assert_ne!(w, commit_word(1, 2, 9, 4));
        assert_ne!(w, commit_word(1, 2, 3, 9));
    }
}
