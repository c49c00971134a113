//! The on-media format, byte by byte (FORMAT.md is the prose twin of this file).
//!
//! ```text
//! offset 0            superblock (64 B), rest of the first 4 KiB unused
//! data_off (4096)     segment 0 | segment 1 | ... | segment segment_count-1
//! segment             segment header (64 B) | unit | unit | ... | free
//! unit (one commit)   batch header (64 B) | object | object | ...
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

use crate::error::{CorruptKind, Error, Result};
use crate::hash::{hash64, hash64_words, mix};
use crate::media::Media;
use crate::mutant;
use bytemuck::{Pod, Zeroable};
use core::mem::{offset_of, size_of};
use static_assertions::const_assert_eq;

#[cfg(not(target_endian = "little"))]
compile_error!("nvs stores its format in native byte order and supports little-endian targets only");

/// Format version written by and readable by this build.
pub const FORMAT_VERSION: u32 = 1;
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
/// Offset of segment 0: the superblock owns the first 4 KiB.
pub const DATA_OFF: u64 = 4096;
/// Smallest segment.
pub const SEGMENT_MIN: u64 = 4096;
/// Largest segment (1 TiB): keeps every offset sum far from overflow.
pub const SEGMENT_MAX: u64 = 1 << 40;
/// Most segments a pool may have.
pub const SEGMENTS_MAX: u64 = 1 << 24;
/// Most lanes a pool may have.
pub const LANES_MAX: u32 = 256;
/// Longest name in bytes.
pub const NAME_MAX: usize = 255;
/// Most objects in one batch (one commit).
pub const BATCH_MAX: usize = 256;

/// Batch header flag: the lane's writer closed its stream here (a unit of no objects).
/// A later unit on the lane reopens it.
pub const UNIT_END_OF_STREAM: u64 = 1;
/// Batch header flag: the lane released its segments below chain position
/// `reserved[0]` (retention); a unit of no objects. Recovery skips those segments.
pub const UNIT_TRUNCATE: u64 = 2;

/// Superblock flag: every object carries a payload checksum, verified on read.
pub const FLAG_PAYLOAD_CHECKSUM: u32 = 1;
/// Superblock flag: objects may be deltas ([`OBJECT_DELTA`]). Set by every format of
/// this build; a pool without it (made before deltas existed) takes only full versions,
/// and a build that does not know the flag refuses the pool instead of misreading it.
pub const FLAG_DELTAS: u32 = 2;

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
    pub reserved: [u64; 2],
    /// `nvs-hash64(pool_id, bytes 0..56)`.
    pub checksum: u64,
}

/// First 64 bytes of a unit (one commit: one put or one batch).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct BatchHeader {
    /// Written last, alone, by one aligned 8-byte NT store after a fence:
    /// `commit_word(pool_id, lane, seq, checksum)`.
    pub commit: u64,
    /// Lane sequence number: 0, 1, 2, ... per lane, across segments.
    pub seq: u64,
    /// Bytes of the whole unit, this header included; a multiple of 64.
    pub unit_len: u64,
    pub object_count: u32,
    pub lane: u32,
    /// `UNIT_END_OF_STREAM`, `UNIT_TRUNCATE`, or 0.
    pub flags: u64,
    pub reserved: [u64; 2],
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
    pub depth: u32,
    /// `nvs-hash64(pool_id, payload)` when the pool has FLAG_PAYLOAD_CHECKSUM, else 0.
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
    /// `nvs-hash64(pool_id, bytes 0..24 ++ extents)`.
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
const_assert_eq!(offset_of!(SegmentHeader, checksum), 56);
const_assert_eq!(size_of::<BatchHeader>(), 64);
const_assert_eq!(offset_of!(BatchHeader, commit), 0);
const_assert_eq!(offset_of!(BatchHeader, object_count), 24);
const_assert_eq!(offset_of!(BatchHeader, checksum), 56);
const_assert_eq!(size_of::<ObjectHeader>(), 48);
const_assert_eq!(offset_of!(ObjectHeader, payload_sum), 24);
const_assert_eq!(offset_of!(ObjectHeader, depth), 20);
const_assert_eq!(offset_of!(ObjectHeader, object_len), 32);
const_assert_eq!(offset_of!(ObjectHeader, checksum), 40);
const_assert_eq!(size_of::<DeltaRecord>(), 32);
const_assert_eq!(offset_of!(DeltaRecord, table_sum), 24);
const_assert_eq!(size_of::<Extent>(), 16);

/// Bytes of a header a checksum covers (everything before the checksum field).
const fn covered<T>() -> usize {
    size_of::<T>() - 8
}

impl Superblock {
    pub fn compute_checksum(&self) -> u64 {
        hash64(SUPERBLOCK_SEED, bytemuck::bytes_of(self).get(..covered::<Self>()).unwrap_or(&[]))
    }
    pub fn has_payload_checksum(&self) -> bool {
        self.flags & FLAG_PAYLOAD_CHECKSUM != 0
    }
    pub fn has_deltas(&self) -> bool {
        self.flags & FLAG_DELTAS != 0
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

impl BatchHeader {
    /// `nvs-hash64(pool_id, bytes 8..56)`, from the fields (the same bytes, in registers).
    pub fn compute_checksum(&self, pool_id: u64) -> u64 {
        let words = [
            self.seq,
            self.unit_len,
            self.object_count as u64 | (self.lane as u64) << 32,
            self.flags,
            self.reserved[0],
            self.reserved[1],
        ];
        hash64_words(seed(pool_id), &words, &[])
    }
}

impl ObjectHeader {
    /// `nvs-hash64(pool_id, bytes 0..40 ++ name)`, from the fields (the same bytes, in
    /// registers).
    pub fn compute_checksum(&self, pool_id: u64, name: &[u8]) -> u64 {
        let words = [
            self.version,
            self.payload_len,
            self.name_len as u64 | (self.flags as u64) << 16 | (self.depth as u64) << 32,
            self.payload_sum,
            self.object_len,
        ];
        hash64_words(seed(pool_id), &words, name)
    }
}

/// The commit word of unit `seq` of `lane`: unforgeable by stale bytes of another pool
/// (pool id), another lane, an older unit of this lane (seq), or a torn header (checksum).
pub fn commit_word(pool_id: u64, lane: u32, seq: u64, header_checksum: u64) -> u64 {
    let sum = if mutant::on("commit_without_checksum") { 0 } else { header_checksum };
    mix(&[COMMIT_TAG, seed(pool_id), lane as u64, seq, sum])
}

/// The pool id as mixed into checksums and commit words (a mutant drops it).
#[inline(always)]
pub fn seed(pool_id: u64) -> u64 {
    if mutant::on("no_pool_id_check") {
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
    line_up(size_of::<ObjectHeader>() as u64 + name_len as u64)
}

/// Bytes one object takes in a unit.
pub const fn object_len(name_len: usize, payload_len: u64) -> u64 {
    object_head_len(name_len) + line_up(payload_len)
}

/// Geometry chosen at format time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub pool_len: u64,
    pub segment_len: u64,
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

/// Read a `T` at `off`; the caller has checked `off + size_of::<T>() <= media.len()`.
pub fn read_pod<T: Pod, M: Media + ?Sized>(media: &M, off: u64) -> T {
    let mut v = T::zeroed();
    media.read(off as usize, bytemuck::bytes_of_mut(&mut v));
    v
}

/// Read and validate the superblock. Never trusts a field before checking it.
pub fn decode_superblock<M: Media + ?Sized>(media: &M) -> Result<Superblock> {
    let media_len = media.len() as u64;
    if media_len < size_of::<Superblock>() as u64 {
        return Err(Error::NotFormatted);
    }
    let sb: Superblock = read_pod(media, 0);
    if sb.magic != SUPERBLOCK_MAGIC {
        return Err(Error::NotFormatted);
    }
    if sb.checksum != sb.compute_checksum() {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::SuperblockChecksum });
    }
    if sb.format_version != FORMAT_VERSION {
        return Err(Error::UnsupportedVersion { found: sb.format_version });
    }
    let geometry_ok = sb.data_off == DATA_OFF
        && (SEGMENT_MIN..=SEGMENT_MAX).contains(&sb.segment_len)
        && sb.segment_len.is_multiple_of(LINE)
        && sb.segment_count >= 1
        && sb.segment_count as u64 <= SEGMENTS_MAX
        && sb.lanes_max >= 1
        && sb.lanes_max <= LANES_MAX
        // Checked: 2^24 segments of 2^40 bytes wrap a u64 to 0 (a forged superblock with
        // pool_len 4096 and a fixed-up checksum passed, and every access then panicked).
        && (sb.segment_count as u64).checked_mul(sb.segment_len).and_then(|n| n.checked_add(DATA_OFF))
            == Some(sb.pool_len)
        && sb.pool_len <= media_len
        && sb.flags & !(FLAG_PAYLOAD_CHECKSUM | FLAG_DELTAS) == 0;
    if !geometry_ok {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::Geometry });
    }
    Ok(sb)
}

/// Read segment `i`'s header; `Some` only if it is a valid header of this pool.
pub fn decode_segment<M: Media + ?Sized>(media: &M, sb: &Superblock, i: u32) -> Option<SegmentHeader> {
    let off = sb.segment_off(i);
    // The magic word first: a free or torn segment is usually told by it alone, and a
    // reader that stops there reads (and, in the crash checker, branches on) one word.
    if media.load_word(off as usize) != SEGMENT_MAGIC {
        return None;
    }
    let h: SegmentHeader = read_pod(media, off);
    let valid = h.magic == SEGMENT_MAGIC
        && (h.pool_id == sb.pool_id || mutant::on("no_pool_id_check"))
        && h.checksum == h.compute_checksum()
        && h.lane < sb.lanes_max
        && h.flags == 0;
    valid.then_some(h)
}

/// What recovery finds at a unit slot.
pub enum UnitSlot {
    /// The lane's log ends here (uncommitted, torn, stale or free space).
    End,
    /// A committed unit, its header validated against its segment end.
    Committed(BatchHeader),
}

/// Decode the unit slot at `off` in a segment ending at `seg_end`, expecting `seq` of `lane`.
pub fn decode_unit<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    lane: u32,
    seq: u64,
    off: u64,
    seg_end: u64,
) -> Result<UnitSlot> {
    if off + size_of::<BatchHeader>() as u64 > seg_end {
        return Ok(UnitSlot::End);
    }
    // The commit word and the checksum it binds decide whether the unit counts; the
    // rest of the header is read only then (an uncommitted slot costs two words).
    let commit = media.load_word(off as usize);
    let checksum = media.load_word(off as usize + offset_of!(BatchHeader, checksum));
    let seq =
        if mutant::on("no_seq_check") { media.load_word(off as usize + offset_of!(BatchHeader, seq)) } else { seq };
    if commit != commit_word(sb.pool_id, lane, seq, checksum) {
        return Ok(UnitSlot::End);
    }
    let h: BatchHeader = read_pod(media, off);
    // The commit word matches: the unit was committed, so its header was durable before
    // the commit word was written. From here on, a mismatch is damage, not a torn write.
    let corrupted = |kind| Err(Error::Corrupted { offset: off, kind });
    if h.checksum != h.compute_checksum(sb.pool_id) && !mutant::on("recovery_ignores_checksum") {
        return corrupted(CorruptKind::RecordChecksum);
    }
    let min_len = size_of::<BatchHeader>() as u64 + h.object_count as u64 * object_head_len(0);
    let in_bounds = h.seq == seq
        && h.lane == lane
        && (h.flags == 0) == (h.object_count >= 1)
        && matches!(h.flags, 0 | UNIT_END_OF_STREAM | UNIT_TRUNCATE)
        && (h.flags == UNIT_TRUNCATE || h.reserved[0] == 0)
        && (h.flags == 0 || h.unit_len == LINE)
        && h.reserved[1] == 0
        && h.object_count as usize <= BATCH_MAX
        && h.unit_len.is_multiple_of(LINE)
        && h.unit_len >= min_len
        && h.unit_len <= seg_end - off;
    if !in_bounds && !mutant::on("recovery_trusts_length") {
        return corrupted(CorruptKind::RecordBounds);
    }
    Ok(UnitSlot::Committed(h))
}

/// A decoded object of a committed unit.
pub struct DecodedObject {
    pub header: ObjectHeader,
    /// Media offset of the name bytes.
    pub name_off: u64,
    /// Media offset of the payload.
    pub payload_off: u64,
    /// Offset just past this object (the next object's start).
    pub end: u64,
}

/// Decode the object at `off` of a committed unit ending at `unit_end`; `name_buf` gets
/// its name. Checks the checksum and every length against `unit_end`.
pub fn decode_object<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    off: u64,
    unit_end: u64,
    name_buf: &mut [u8; NAME_MAX],
) -> Result<DecodedObject> {
    let bounds = Err(Error::Corrupted { offset: off, kind: CorruptKind::RecordBounds });
    if off + object_head_len(0) > unit_end {
        return bounds;
    }
    let header: ObjectHeader = read_pod(media, off);
    let name_len = header.name_len as usize;
    let trust = mutant::on("recovery_trusts_length");
    if (name_len == 0 || name_len > NAME_MAX || header.payload_len > unit_end) && !trust {
        return bounds;
    }
    let head_len = object_head_len(name_len);
    let end = off.wrapping_add(head_len).wrapping_add(line_up(header.payload_len));
    if end > unit_end && !trust {
        return bounds;
    }
    // A full object has no delta fields; a delta needs a pool that allows them, a depth
    // in range, a payload holding at least its record, and a length a full version of
    // this pool could have had.
    let kind_ok = match header.flags {
        0 => header.depth == 0 && header.object_len == 0,
        OBJECT_DELTA => {
            sb.has_deltas()
                && (1..=DELTA_DEPTH_MAX).contains(&header.depth)
                && header.payload_len >= delta_data_off(0)
                && header.object_len <= sb.segment_len
        }
        _ => false,
    };
    if !kind_ok && !trust {
        return bounds;
    }
    let name_off = off + size_of::<ObjectHeader>() as u64;
    let Some(name) = name_buf.get_mut(..name_len) else {
        return bounds;
    };
    media.read(name_off as usize, name);
    if header.checksum != header.compute_checksum(sb.pool_id, name) && !mutant::on("recovery_ignores_checksum") {
        return Err(Error::Corrupted { offset: off, kind: CorruptKind::RecordChecksum });
    }
    Ok(DecodedObject { header, name_off, payload_off: off + head_len, end })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header checksums computed from the fields equal the byte-wise definition.
    #[test]
    fn header_checksums_match_their_bytes() {
        let bh = BatchHeader {
            commit: 7,
            seq: 0x1122_3344_5566_7788,
            unit_len: 4096,
            object_count: 0x8000_0001,
            lane: 0xfedc_ba98,
            flags: 3,
            reserved: [u64::MAX, 5],
            checksum: 0,
        };
        let want = crate::hash::hash64(99, bytemuck::bytes_of(&bh).get(8..56).unwrap_or(&[]));
        assert_eq!(bh.compute_checksum(99), want);
        let name: [u8; 40] = core::array::from_fn(|i| (i * 37 + 11) as u8);
        for n in 0..=name.len() {
            let oh = ObjectHeader {
                version: 0xdead_beef_0000_0001,
                payload_len: 0x0102_0304_0506_0708,
                name_len: 0xabcd,
                flags: 0x8001,
                depth: 0xffff_fffe,
                payload_sum: 42,
                object_len: u64::MAX - 1,
                checksum: 0,
            };
            let mut h = crate::hash::Hasher::new(99);
            h.write(bytemuck::bytes_of(&oh).get(..40).unwrap_or(&[]));
            h.write(name.get(..n).unwrap_or(&[]));
            assert_eq!(oh.compute_checksum(99, name.get(..n).unwrap_or(&[])), h.finish(), "name of {n} bytes");
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
