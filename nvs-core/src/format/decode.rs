//! Reading the format back: every `decode_*` checks what it reads before trusting it
//! (the invariants listed in the format module's docs).
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::error::{CorruptKind, Error, Result};
use crate::media::Media;
use crate::mutant::{self, Mutant};
use bytemuck::Pod;
use core::mem::size_of;

/// Read a `T` at `off`; the caller has checked `off + size_of::<T>() <= media.len()`.
pub fn read_pod<T: Pod, M: Media + ?Sized>(media: &M, off: u64) -> T {
    let mut v = T::zeroed();
    media.read(off as usize, bytemuck::bytes_of_mut(&mut v));
    v
}

/// Read and validate the superblock. Never trusts a field before checking it.
pub fn decode_superblock<M: Media + ?Sized>(media: &M) -> Result<Superblock> {
    decode_superblock_in(media, false)
}

/// [`decode_superblock`], but a pool longer than its media (a truncated file) is
/// accepted if the media holds its first segment: for reading what is left
/// ([`crate::walk::Walker::new_truncated`]), never for opening it.
pub fn decode_superblock_short<M: Media + ?Sized>(media: &M) -> Result<Superblock> {
    decode_superblock_in(media, true)
}

fn decode_superblock_in<M: Media + ?Sized>(media: &M, short: bool) -> Result<Superblock> {
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
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&sb.format_version) {
        return Err(Error::UnsupportedVersion { found: sb.format_version });
    }
    let geometry_ok = sb.data_off == DATA_OFF
        && (SEGMENT_MIN..=SEGMENT_MAX).contains(&sb.segment_len)
        && sb.segment_len.is_multiple_of(LINE)
        && sb.segment_count >= 1
        && sb.segment_count as u64 <= SEGMENTS_MAX
        && sb.lanes_max >= 1
        && sb.lanes_max <= LANES_MAX
        // Checked: 2^24 segments of 2^40 bytes wrap a u64 to 0, and a forged superblock
        // whose pool_len and checksum match the wrapped sum would pass, every access past
        // its media.
        && (sb.segment_count as u64).checked_mul(sb.segment_len).and_then(|n| n.checked_add(DATA_OFF))
            == Some(sb.pool_len)
        && sb.flags & !(FLAG_PAYLOAD_CHECKSUM | FLAG_DELTAS | FLAG_LANE_NAMES) == 0
        && (sb.flags & FLAG_LANE_NAMES == 0 || sb.format_version >= 2);
    if !geometry_ok || short && sb.data_off + sb.segment_len > media_len {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::Geometry });
    }
    if sb.pool_len > media_len && !short {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::Truncated });
    }
    Ok(sb)
}

/// Read segment `i`'s header; `Some` only if it is a valid header of this pool. Its
/// `span` is returned as read for format 2 (1 ..= the segments from `i` to the pool's
/// end) and as 1 for format 1 (where it is 0 on the media).
pub fn decode_segment<M: Media + ?Sized>(media: &M, sb: &Superblock, i: u32) -> Option<SegmentHeader> {
    let off = sb.segment_off(i);
    // The magic word first: a free or torn segment is usually told by it alone, and a
    // reader that stops there reads (and, in the crash checker, branches on) one word.
    if media.load_word(off as usize) != SEGMENT_MAGIC {
        return None;
    }
    let h: SegmentHeader = read_pod(media, off);
    let valid = h.magic == SEGMENT_MAGIC
        && (h.pool_id == sb.pool_id || mutant::on(Mutant::NoPoolIdCheck))
        && h.checksum == h.compute_checksum()
        && h.lane < sb.lanes_max
        && h.flags == 0
        && (h.reserved == 0 || sb.one_fence())
        && match sb.spans() {
            true => (1..=(sb.segment_count - i) as u64).contains(&h.span),
            false => h.span == 0,
        };
    valid.then_some(SegmentHeader { span: h.span.max(1), ..h })
}

/// Whether segment `i`'s (invalid) header is recognisably this pool's, damaged: its
/// magic and pool id words this pool's but for one byte, its checksum word not 0. Fresh
/// and released segments (zeroed headers), an earlier pool's, and most claims a crash
/// tore (a claim zeroes a non-zero header first) are not. Recovery does not need it (it
/// looks into every free segment); `nvs dump` and `salvage` walk such a segment's units
/// even when retention released them. Reads the magic word, and the other two only when
/// it is within a byte of the magic.
pub fn segment_once_whole<M: Media + ?Sized>(media: &M, sb: &Superblock, i: u32) -> bool {
    let off = sb.segment_off(i) as usize;
    let bytes_off = |w: u64, want: u64| (w ^ want).to_le_bytes().iter().filter(|&&b| b != 0).count();
    let magic = bytes_off(media.load_word(off + offset_of!(SegmentHeader, magic)), SEGMENT_MAGIC);
    magic <= 1
        && magic + bytes_off(media.load_word(off + offset_of!(SegmentHeader, pool_id)), sb.pool_id) <= 1
        && media.load_word(off + offset_of!(SegmentHeader, checksum)) != 0
}

/// What recovery finds at a unit slot.
pub enum UnitSlot {
    /// The lane's log ends here (uncommitted, torn, stale or free space).
    End,
    /// A committed unit, its header validated against its segment end.
    Committed(UnitHeader),
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
    if off + size_of::<UnitHeader>() as u64 > seg_end {
        return Ok(UnitSlot::End);
    }
    // The commit word and the checksum it binds decide whether the unit counts; the
    // rest of the header is read only then (an uncommitted slot costs two words).
    let commit = media.load_word(off as usize);
    let checksum = media.load_word(off as usize + offset_of!(UnitHeader, checksum));
    let seq =
        if mutant::on(Mutant::NoSeqCheck) { media.load_word(off as usize + offset_of!(UnitHeader, seq)) } else { seq };
    if commit != sb.commit_word_at(lane, seq, checksum, off) {
        return Ok(UnitSlot::End);
    }
    // The rest of the header, a word at a time (inlined loads, not a copy through
    // `Media::read`: recovery reads a header per unit, and a call per header was a
    // tenth of a scan of small units).
    let h = unit_header_rest(media, off, commit, checksum);
    // The commit word matches: the unit was committed, so its header was durable before
    // the commit word was written. From here on, a mismatch is damage, not a torn write
    // — but for a sealed unit, whose commit word was stored with the rest of its line:
    // a crash may have left any of its words out. Recovery tells the two apart
    // (`sealed_torn_header`).
    let corrupted = |kind| Err(Error::Corrupted { offset: off, kind });
    if h.checksum != h.compute_checksum(sb.pool_id) && !mutant::on(Mutant::RecoveryIgnoresChecksum) {
        return corrupted(CorruptKind::HeaderChecksum);
    }
    let in_bounds = h.seq == seq && h.lane == lane && unit_in_bounds(sb, &h, off, seg_end);
    if !in_bounds && !mutant::on(Mutant::RecoveryTrustsLength) {
        return corrupted(CorruptKind::HeaderBounds);
    }
    Ok(UnitSlot::Committed(h))
}

/// The unit header at `off` whose commit and checksum words were read already: its
/// other six words, read one by one (the same bytes `read_pod` would copy).
#[inline(always)]
fn unit_header_rest<M: Media + ?Sized>(media: &M, off: u64, commit: u64, checksum: u64) -> UnitHeader {
    let w = |k: usize| media.load_word(off as usize + 8 * k);
    let counts = w(3);
    UnitHeader {
        commit,
        seq: w(1),
        unit_len: w(2),
        object_count: counts as u32,
        lane: (counts >> 32) as u32,
        flags: w(4),
        base: w(5),
        reserved: w(6),
        checksum,
    }
}

/// The object header at `off`, a word at a time (see [`unit_header_rest`]).
#[inline(always)]
fn object_header_words<M: Media + ?Sized>(media: &M, off: u64) -> ObjectHeader {
    let w = |k: usize| media.load_word(off as usize + 8 * k);
    let lens = w(2);
    ObjectHeader {
        version: w(0),
        payload_len: w(1),
        name_len: lens as u16,
        flags: (lens >> 16) as u16,
        depth: (lens >> 32) as u16,
        meta_len: (lens >> 48) as u16,
        payload_sum: w(3),
        object_len: w(4),
        checksum: w(5),
    }
}

/// Read the `name.len()` bytes at `off` (8-aligned) into `name`, a word at a time; the
/// words may run up to 7 bytes past the name, which the caller has checked lie in the
/// unit (bytes past the name are not kept).
#[inline(always)]
fn read_name_words<M: Media + ?Sized>(media: &M, off: u64, name: &mut [u8]) {
    for (k, chunk) in name.chunks_mut(8).enumerate() {
        let w = media.load_word(off as usize + 8 * k).to_le_bytes();
        chunk.copy_from_slice(w.get(..chunk.len()).unwrap_or(&[]));
    }
}

/// Where a committed unit follows the slot at `off`, which [`decode_unit`] found holds no
/// committed unit `seq` of `lane`: `Some(offset)` if, where the header in that slot says
/// its unit ends (its length word, unverified: the checksum may be what is damaged),
/// unit `seq + 1` of the lane is committed (its commit word matches; a damaged rest
/// counts too), and the slot is still not committed when read again. A crash never
/// leaves that: a unit is stored only after the one before it is committed. So it is
/// damage to the slot's commit or checksum word, which would otherwise end the lane's
/// log there and hide the later units. The second look tells a reader beside a live
/// writer, who committed both since the first (the earlier commit is visible before the
/// later unit is stored), from damage.
pub fn committed_after_end<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    lane: u32,
    seq: u64,
    off: u64,
    seg_end: u64,
) -> Option<u64> {
    if off + size_of::<UnitHeader>() as u64 > seg_end || mutant::on(Mutant::EndNotProbed) {
        return None;
    }
    let len = media.load_word(off as usize + offset_of!(UnitHeader, unit_len));
    if len < LINE || !len.is_multiple_of(LINE) || len > seg_end - off {
        return None;
    }
    let next = off + len;
    let later = !matches!(decode_unit(media, sb, lane, seq.checked_add(1)?, next, seg_end), Ok(UnitSlot::End));
    let still_not = !matches!(decode_unit(media, sb, lane, seq, off, seg_end), Ok(UnitSlot::Committed(_)));
    (later && still_not).then_some(next)
}

/// Where a later committed unit of `lane` (a seq past `seq`) lies after the slot at `off`,
/// which [`decode_unit`] found holds no committed unit `seq`, in a segment ending at
/// `seg_end`: `Some((offset, seq))`, if the slot is still not committed when read again.
/// Units are stored in seq order, each only after the one before it is committed, so
/// such a unit is damage before it — lines of units zeroed or torn, past what the slot's
/// own length word ([`committed_after_end`]) can lead to. Reads a word per line to the
/// segment's end: for the offline walk (`nvs dump`, `salvage`, `check`). Recovery does
/// not look (in the crash checker every such read of a word a crash left undecided is a
/// branch, multiplying the states it checks), and ends the lane at the slot.
pub fn committed_later<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    lane: u32,
    seq: u64,
    off: u64,
    seg_end: u64,
) -> Option<(u64, u64)> {
    if mutant::on(Mutant::EndNotProbed) {
        return None;
    }
    let later = (1..=seg_end.saturating_sub(off) / LINE).map(|k| off + k * LINE).find_map(|at| {
        decode_unit_anywhere(media, sb, at, seg_end, |l, s| l == lane && s > seq).map(|h| (at, h.seq))
    })?;
    let still_not = !matches!(decode_unit(media, sb, lane, seq, off, seg_end), Ok(UnitSlot::Committed(_)));
    still_not.then_some(later)
}

/// A unit header's flags, counts and lengths are consistent, and it ends by `seg_end`.
fn unit_in_bounds(sb: &Superblock, h: &UnitHeader, off: u64, seg_end: u64) -> bool {
    let min_len = size_of::<UnitHeader>() as u64 + h.object_count as u64 * object_head_len(0);
    (h.flags == 0) == (h.object_count >= 1)
        && (matches!(h.flags, 0 | UNIT_END_OF_STREAM | UNIT_TRUNCATE) || h.flags == UNIT_DETACH && sb.spans())
        && (h.flags == UNIT_TRUNCATE || h.base == 0)
        && (h.flags == 0 || h.unit_len == LINE)
        && (h.reserved == 0 || sb.one_fence())
        // Format 2: a batch of any size (the unit's length bounds the count).
        && (h.object_count as usize <= BATCH_MAX || sb.spans())
        && h.unit_len.is_multiple_of(LINE)
        && h.unit_len >= min_len
        && h.unit_len <= seg_end - off
}

/// The committed unit of this pool at `off` (a free segment's data start, in a segment
/// ending at `seg_end`), of whatever lane and seq, if `wanted(lane, seq)`: recovery asks
/// whether a segment it finds free holds a unit its lane's walk did not reach (R3c in
/// DESIGN.md). Valid means what it means for [`decode_unit`], with the unit's own lane
/// and seq in place of the expected ones: the commit word equals `commit_word(pool_id,
/// lane, seq, checksum)` of its own fields, the checksum matches, the lane is below
/// `lanes_max` and the lengths are in bounds. The commit word is read first (0: fresh
/// space, one word), then the seq and lane words, so a unit `wanted` refuses (the usual
/// case: a released segment's old units) costs three words.
pub fn decode_unit_anywhere<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    off: u64,
    seg_end: u64,
    wanted: impl Fn(u32, u64) -> bool,
) -> Option<UnitHeader> {
    if off + size_of::<UnitHeader>() as u64 > seg_end {
        return None;
    }
    let commit = media.load_word(off as usize);
    if commit == 0 {
        return None;
    }
    let seq = media.load_word(off as usize + offset_of!(UnitHeader, seq));
    let lane = (media.load_word(off as usize + offset_of!(UnitHeader, object_count)) >> 32) as u32;
    if lane >= sb.lanes_max || !wanted(lane, seq) {
        return None;
    }
    let checksum = media.load_word(off as usize + offset_of!(UnitHeader, checksum));
    if commit != sb.commit_word_at(lane, seq, checksum, off) {
        return None;
    }
    let h: UnitHeader = read_pod(media, off);
    let valid = h.seq == seq && h.lane == lane && h.checksum == h.compute_checksum(sb.pool_id);
    (valid && unit_in_bounds(sb, &h, off, seg_end)).then_some(h)
}

/// Whether the sealed unit `h` at `off` ([`Superblock::one_fence`]), whose header
/// [`decode_unit`] accepted, is whole: its object headers decode, the digest of their
/// checksums is its header's, and every payload's nvs-sum holds. A sealed unit is
/// committed by one fence after all its stores, so a crash can leave its header line
/// whole and anything after it torn; a lane's newest unit counts only if this holds
/// (units before it were fenced before it was stored). Reads every payload, in 4 KiB
/// pieces through [`Media::read_summed`].
pub fn sealed_unit_whole<M: Media + ?Sized>(media: &M, sb: &Superblock, off: u64, h: &UnitHeader) -> bool {
    if mutant::on(Mutant::SealedTailTrusted) {
        return true;
    }
    let unit_end = off + h.unit_len;
    media.sealed_range((off + LINE) as usize, (h.unit_len - LINE) as usize);
    let mut name = [0u8; NAME_MAX];
    let mut digest = ObjectsDigest::new(sb.pool_id);
    let mut obj = off + LINE;
    for _ in 0..h.object_count {
        let Ok(d) = decode_object(media, sb, obj, unit_end, &mut name) else {
            return false;
        };
        digest.add(d.header.checksum);
        obj = d.end;
    }
    if digest.finish() != h.reserved {
        return false;
    }
    let mut obj = off + LINE;
    for _ in 0..h.object_count {
        let Ok(d) = decode_object(media, sb, obj, unit_end, &mut name) else {
            return false;
        };
        let mut sum = sum::Sum::new(sb.pool_id);
        let mut chunk = [0u8; 4096];
        let (mut at, end) = (d.payload_off, d.payload_off + d.header.payload_len);
        while at < end {
            let n = ((end - at) as usize).min(chunk.len());
            let c = chunk.get_mut(..n).unwrap_or(&mut []);
            media.read_summed(at as usize, c, &mut sum);
            at += n as u64;
        }
        if sum.finish(d.header.payload_len) != d.header.payload_sum {
            return false;
        }
        obj = d.end;
    }
    true
}

/// Whether the sealed unit `h` at `off` (unit `seq` of `lane`, in a segment ending at
/// `seg_end`), which no committed unit follows, was torn by a crash: it does not verify
/// whole ([`sealed_unit_whole`]) and no later committed unit of the lane lies further
/// on in the segment ([`committed_later`], read only in this rare case). With a later
/// one it was not the newest: damage, which the caller reports as it would in any unit.
pub fn sealed_newest_torn<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    lane: u32,
    seq: u64,
    off: u64,
    h: &UnitHeader,
    seg_end: u64,
) -> bool {
    !sealed_unit_whole(media, sb, off, h)
        && committed_later(media, sb, lane, seq + 1, off + h.unit_len, seg_end).is_none()
}

/// Whether the header at `off` that [`decode_unit`] refused as damaged (its commit word
/// matches, its checksum or bounds do not), in a sealed pool, is rather a crash's torn
/// header: the lane's newest unit, whose words did not all persist. It is when the lane
/// goes on in no later segment (`more_segments` false) and no later committed unit of
/// the lane lies after it in the segment ([`committed_later`]: a word per line to the
/// segment's end, read only in this rare case). Everything after the header in the
/// segment is that unit's own stores, so the crash simulator decides it as one
/// ([`Media::sealed_range`]) before it is read.
#[allow(clippy::too_many_arguments)]
pub fn sealed_torn_header<M: Media + ?Sized>(
    media: &M,
    sb: &Superblock,
    lane: u32,
    seq: u64,
    off: u64,
    seg_end: u64,
    more_segments: bool,
) -> bool {
    if !sb.one_fence() || more_segments || off + LINE > seg_end {
        return false;
    }
    media.sealed_range((off + LINE) as usize, (seg_end - off - LINE) as usize);
    committed_later(media, sb, lane, seq, off, seg_end).is_none()
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
    let bounds = Err(Error::Corrupted { offset: off, kind: CorruptKind::HeaderBounds });
    if off + object_head_len(0) > unit_end {
        return bounds;
    }
    let header = object_header_words(media, off);
    let (name_len, meta_len) = (header.name_len as usize, header.meta_len as usize);
    let trust = mutant::on(Mutant::RecoveryTrustsLength);
    // Metadata exists from format 2 on (in format 1 these bytes are a depth's high half).
    let meta_max = if sb.format_version >= 2 { META_MAX } else { 0 };
    if (name_len == 0 || name_len > NAME_MAX || meta_len > meta_max || header.payload_len > unit_end) && !trust {
        return bounds;
    }
    let head_len = head_len(name_len, meta_len);
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
                && (1..=DELTA_DEPTH_MAX).contains(&(header.depth as u32))
                && header.payload_len >= delta_data_off(0)
                && header.object_len <= sb.max_unit_bytes()
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
    // The words holding the name end by the object's head (`end` is checked above, and
    // the head is whole lines); a trusted length (a mutant) may not: a plain read.
    if name_off + (name_len as u64).next_multiple_of(8) <= unit_end {
        read_name_words(media, name_off, name);
    } else {
        media.read(name_off as usize, name);
    }
    let sum = if meta_len == 0 {
        header.compute_checksum(sb.pool_id, name, &[])
    } else {
        // Only an object with metadata pays for reading it (recovery reads no payload).
        let mut meta_buf = [0u8; META_MAX];
        let meta = meta_buf.get_mut(..meta_len).unwrap_or(&mut []);
        media.read(name_off as usize + name_len, meta);
        header.compute_checksum(sb.pool_id, name, meta)
    };
    if header.checksum != sum && !mutant::on(Mutant::RecoveryIgnoresChecksum) {
        return Err(Error::Corrupted { offset: off, kind: CorruptKind::HeaderChecksum });
    }
    Ok(DecodedObject { header, name_off, payload_off: off + head_len, end })
}
