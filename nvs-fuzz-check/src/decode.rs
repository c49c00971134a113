//! `decode`: every decoder of `nvs_core::internals::format` on arbitrary bytes, each outcome
//! compared with an independent predicate written from FORMAT.md, plus encode → decode
//! round trips in which a single flipped bit must be refused exactly where the format
//! says (nvs-hash64 changes whenever one input word changes, so one flip is always seen).
//!
//! Input layout (stable, so seeds can be written by hand; see [`crate::Bytes`]): byte 0
//! picks the case (mod 6), then each case reads its parameters in order, then the rest:
//!
//! | case | what |
//! |---|---|
//! | 0 | `decode_superblock` on the rest as a media, then `decode_segment` of every segment |
//! | 1 | a superblock from arbitrary fields, encoded, maybe one bit flipped, decoded |
//! | 2 | a segment header from arbitrary fields, maybe fixed up, maybe flipped, decoded |
//! | 3 | the rest as a unit slot (unit header + objects), with fix-ups of the commit word and checksums, decoded like recovery does |
//! | 4 | a unit written by a real `Pool::put_batch`, decoded, then one bit flipped and decoded again |
//! | 5 | `Hasher` over arbitrary cuts of the rest equals `hash64` of the whole |

use crate::{Bytes, VecMedia};
use nvs_core::internals::format::{
    self, commit_word, head_len, line_up, object_head_len, DecodedObject, ObjectHeader, SegmentHeader, Superblock,
    UnitHeader, UnitSlot, BATCH_MAX, DATA_OFF, FLAG_DELTAS, FLAG_LANE_NAMES, FLAG_PAYLOAD_CHECKSUM, FORMAT_VERSION,
    LINE, NAME_MAX, SEGMENTS_MAX, SEGMENT_MAGIC, SEGMENT_MAX, SEGMENT_MIN, SUPERBLOCK_MAGIC,
};
use nvs_core::internals::hash::{hash64, Hasher};
use nvs_core::{CorruptKind, Error, FormatOptions, HeapMemory, Media, Object, Pool};
use std::mem::size_of;

pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    match b.u8() % 6 {
        0 => superblock_raw(b.rest()),
        1 => superblock_round_trip(&mut b),
        2 => segment_header(&mut b),
        3 => unit_raw(&mut b),
        4 => unit_round_trip(&mut b),
        _ => hash_streaming(&mut b),
    }
}

/// What `decode_superblock` must answer for these media bytes (FORMAT.md, in order).
fn expected_superblock(bytes: &[u8], media_len: u64) -> Result<Superblock, Error> {
    let Some(head) = bytes.get(..64) else { return Err(Error::NotFormatted) };
    let sb: Superblock = bytemuck::pod_read_unaligned(head);
    if &head[..8] != b"NVSPOOL\0" {
        return Err(Error::NotFormatted);
    }
    if sb.checksum != hash64(u64::from_le_bytes(*b"NVSSUPR\0"), &head[..56]) {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::SuperblockChecksum });
    }
    // Versions 1 (read-only in this build), 2 and 3.
    if !(1..=3).contains(&sb.format_version) {
        return Err(Error::UnsupportedVersion { found: sb.format_version });
    }
    let pool_len = (sb.segment_count as u64).checked_mul(sb.segment_len).and_then(|x| x.checked_add(4096));
    let ok = sb.data_off == 4096
        && (4096..=1 << 40).contains(&sb.segment_len)
        && sb.segment_len.is_multiple_of(64)
        && (1..=1 << 24).contains(&(sb.segment_count as u64))
        && (1..=256).contains(&sb.lanes_max)
        && pool_len == Some(sb.pool_len)
        // Bits 0-2: payload checksums, deltas, lane names (format 2 only).
        && sb.flags & !7 == 0
        && (sb.flags & 4 == 0 || sb.format_version >= 2);
    if !ok {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::Geometry });
    }
    // A sound superblock on media shorter than the pool: a truncated file.
    if sb.pool_len > media_len {
        return Err(Error::Corrupted { offset: 0, kind: CorruptKind::Truncated });
    }
    Ok(sb)
}

/// Case 0: arbitrary bytes as a media.
fn superblock_raw(rest: &[u8]) {
    let media = VecMedia::from_bytes(rest.to_vec());
    let got = format::decode_superblock(&media);
    assert_eq!(got, expected_superblock(rest, rest.len() as u64));
    if let Ok(sb) = got {
        assert!(sb.pool_len <= media.len() as u64);
        for i in 0..sb.segment_count {
            check_segment(&media, &sb, i);
        }
    }
    assert_eq!(media.stores(), 0, "a decoder stored");
}

/// A media of `len` bytes of which only the first 64 are held (the rest read as zero):
/// lets the superblock decoder see any media length without allocating it.
struct Head {
    len: usize,
    head: [u8; 64],
}

impl Media for Head {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        assert!(off.checked_add(dst.len()).is_some_and(|e| e <= self.len), "nvs bug: read outside the media");
        for (i, d) in dst.iter_mut().enumerate() {
            *d = self.head.get(off + i).copied().unwrap_or(0);
        }
    }
    fn load_word(&self, off: usize) -> u64 {
        let mut w = [0u8; 8];
        self.read(off, &mut w);
        u64::from_le_bytes(w)
    }
    fn store_nt(&self, _: usize, _: &[u8]) {
        panic!("a decoder stored");
    }
    fn store_word_nt(&self, _: usize, _: u64) {
        panic!("a decoder stored");
    }
    fn store(&self, _: usize, _: &[u8]) {
        panic!("a decoder stored");
    }
    fn flush(&self, _: usize, _: usize) {}
    fn fence(&self) {}
}

/// Flip bit `bit` of byte `at` (a `u8` selector: 0 = no flip) within `len` bytes.
fn flip_of(b: &mut Bytes, len: usize) -> Option<(usize, u8)> {
    let (at, bit) = (b.u16(), b.u8());
    (at != 0).then(|| ((at as usize - 1) % len, 1 << (bit % 8)))
}

/// Case 1: encode a superblock from arbitrary fields, maybe flip a bit, decode.
fn superblock_round_trip(b: &mut Bytes) {
    let pool_id = b.u64();
    let sel = b.u8();
    let segment_len = match sel % 4 {
        0 => b.u64(),
        _ => SEGMENT_MIN << (b.u8() % 8),
    };
    let media_len = b.u64() & ((1 << 48) - 1);
    let lanes = if sel & 4 != 0 { b.u32() } else { b.u8() as u32 % 256 + 1 };
    let known = FLAG_PAYLOAD_CHECKSUM | FLAG_DELTAS | FLAG_LANE_NAMES;
    let flags = if sel & 8 != 0 { b.u32() } else { b.u32() & known };
    let version = match (sel & 16 != 0, sel & 32 != 0) {
        (true, _) => b.u32(),
        (false, true) => 1, // format 1: still read
        (false, false) => FORMAT_VERSION,
    };
    let flip = flip_of(b, 64);
    let g = match format::geometry(media_len, segment_len) {
        Ok(g) => g,
        Err(Error::BadGeometry { .. }) => {
            let bad_len = !(SEGMENT_MIN..=SEGMENT_MAX).contains(&segment_len) || segment_len % LINE != 0;
            assert!(bad_len || media_len < DATA_OFF + segment_len, "geometry refused {segment_len} on {media_len}");
            return;
        }
        Err(e) => panic!("geometry: {e:?}"),
    };
    assert!(g.pool_len <= media_len && g.segment_count as u64 <= SEGMENTS_MAX && g.segment_count >= 1);
    assert_eq!(g.pool_len, DATA_OFF + g.segment_count as u64 * g.segment_len);
    let mut sb = Superblock {
        magic: SUPERBLOCK_MAGIC,
        format_version: version,
        flags,
        pool_id,
        pool_len: g.pool_len,
        segment_len: g.segment_len,
        segment_count: g.segment_count,
        lanes_max: lanes,
        data_off: DATA_OFF,
        checksum: 0,
    };
    sb.checksum = sb.compute_checksum();
    let mut head = [0u8; 64];
    head.copy_from_slice(bytemuck::bytes_of(&sb));
    if let Some((at, mask)) = flip {
        head[at] ^= mask;
    }
    let media = Head { len: media_len as usize, head };
    let got = format::decode_superblock(&media);
    assert_eq!(got, expected_superblock(&head, media_len));
    let valid = (1..=FORMAT_VERSION).contains(&version)
        && (1..=256).contains(&lanes)
        && flags & !known == 0
        && (flags & FLAG_LANE_NAMES == 0 || version >= 2);
    match flip {
        None if valid => assert_eq!(got, Ok(sb), "round trip"),
        None => assert!(got.is_err()),
        Some((at, _)) if at < 8 => assert_eq!(got, Err(Error::NotFormatted)),
        Some(_) => assert_eq!(got, Err(Error::Corrupted { offset: 0, kind: CorruptKind::SuperblockChecksum })),
    }
}

/// A small valid superblock for segment tests.
fn small_superblock(pool_id: u64, segment_len: u64, count: u32, lanes: u32, flags: u32) -> Superblock {
    small_superblock_v(FORMAT_VERSION, pool_id, segment_len, count, lanes, flags)
}

/// [`small_superblock`] of format `version`.
fn small_superblock_v(version: u32, pool_id: u64, segment_len: u64, count: u32, lanes: u32, flags: u32) -> Superblock {
    let mut sb = Superblock {
        magic: SUPERBLOCK_MAGIC,
        format_version: version,
        flags,
        pool_id,
        pool_len: DATA_OFF + count as u64 * segment_len,
        segment_len,
        segment_count: count,
        lanes_max: lanes,
        data_off: DATA_OFF,
        checksum: 0,
    };
    sb.checksum = sb.compute_checksum();
    sb
}

/// `decode_segment` of segment `i` against the predicate of FORMAT.md.
fn check_segment<M: Media + ?Sized>(media: &M, sb: &Superblock, i: u32) -> Option<SegmentHeader> {
    let off = DATA_OFF + i as u64 * sb.segment_len;
    let mut raw = [0u8; 64];
    media.read(off as usize, &mut raw);
    let h: SegmentHeader = bytemuck::pod_read_unaligned(&raw);
    let valid = &raw[..8] == b"NVSSEGM\0"
        && h.pool_id == sb.pool_id
        && h.checksum == hash64(sb.pool_id, &raw[..56])
        && h.lane < sb.lanes_max
        && h.flags == 0
        && h.reserved == 0
        && match sb.format_version {
            // Format 2 on: the span owns 1 ..= the segments left from `i` to the pool's end.
            2.. => (1..=(sb.segment_count - i) as u64).contains(&h.span),
            // Format 1: no spans on the media (0), decoded as 1.
            _ => h.span == 0,
        };
    let got = format::decode_segment(media, sb, i);
    let want = SegmentHeader { span: h.span.max(1), ..h };
    assert_eq!(got, valid.then_some(want), "segment {i} at {off:#x} (format {})", sb.format_version);
    got
}

/// Case 2: a segment header from arbitrary fields.
fn segment_header(b: &mut Bytes) {
    let pool_id = b.u64();
    let lanes = b.u8() as u32 % 256 + 1;
    let count = b.u8() as u32 % 4 + 1;
    let i = b.u8() as u32 % count;
    let sel = b.u8();
    let mut h = SegmentHeader {
        magic: if sel & 1 != 0 { b.u64() } else { SEGMENT_MAGIC },
        pool_id: if sel & 2 != 0 { b.u64() } else { pool_id },
        lane: if sel & 4 != 0 { b.u32() } else { b.u8() as u32 },
        flags: if sel & 8 != 0 { b.u32() } else { 0 },
        chain_seq: b.u64(),
        first_seq: b.u64(),
        span: if sel & 32 != 0 { b.u64() } else { b.u8() as u64 % 5 },
        reserved: if sel & 64 != 0 { b.u64() } else { 0 },
        checksum: b.u64(),
    };
    if sel & 16 == 0 {
        h.checksum = h.compute_checksum();
    }
    let flip = flip_of(b, 64);
    let version = if sel & 128 != 0 { 1 } else { FORMAT_VERSION };
    let sb = small_superblock_v(version, pool_id, SEGMENT_MIN, count, lanes, 0);
    let media = VecMedia::zeroed(sb.pool_len as usize);
    media.poke(0, bytemuck::bytes_of(&sb));
    let off = sb.segment_off(i) as usize;
    media.poke(off, bytemuck::bytes_of(&h));
    let valid_before = check_segment(&media, &sb, i).is_some();
    if let Some((at, mask)) = flip {
        let mut raw = media.peek(off, 64);
        raw[at] ^= mask;
        media.poke(off, &raw);
        let got = check_segment(&media, &sb, i);
        assert!(got.is_none() || !valid_before, "segment header with a flipped bit {at} accepted");
    }
    // The other segments hold zeros: free.
    for k in (0..count).filter(|&k| k != i) {
        assert_eq!(check_segment(&media, &sb, k), None);
    }
    assert_eq!(media.stores(), 0, "a decoder stored");
}

/// Expected result of `decode_object` at `off` of a committed unit ending at `unit_end`.
fn expected_object(media: &VecMedia, sb: &Superblock, off: u64, unit_end: u64) -> Result<(ObjectHeader, u64), Error> {
    let pool_id = sb.pool_id;
    let bounds = Err(Error::Corrupted { offset: off, kind: CorruptKind::HeaderBounds });
    if off + 64 > unit_end {
        return bounds;
    }
    let raw = media.peek(off as usize, 48);
    let h: ObjectHeader = bytemuck::pod_read_unaligned(&raw);
    let name_len = h.name_len as u64;
    // Metadata (format 2): up to 1024 bytes after the name; format 1 has none.
    let meta_len = h.meta_len as u64;
    let meta_max = if sb.format_version >= 2 { 1024 } else { 0 };
    if name_len == 0 || name_len > 255 || meta_len > meta_max {
        return bounds;
    }
    let end = h
        .payload_len
        .div_ceil(64)
        .checked_mul(64)
        .and_then(|p| (off + (48 + name_len + meta_len).div_ceil(64) * 64).checked_add(p));
    let Some(end) = end.filter(|&e| e <= unit_end) else { return bounds };
    // FORMAT.md: a full object has flags, depth and object_len 0; a delta (flags 1) needs
    // the pool's delta flag (2), depth 1..=255, a payload of at least 64 bytes and an
    // object_len no larger than the largest unit: the data of the longest span (format
    // 2: every segment of the pool, less the header line; format 1: one segment's).
    let max_unit = if sb.format_version >= 2 { sb.segment_count as u64 } else { 1 } * sb.segment_len - 64;
    let kind_ok = match h.flags {
        0 => h.depth == 0 && h.object_len == 0,
        1 => sb.flags & 2 != 0 && (1..=255).contains(&h.depth) && h.payload_len >= 64 && h.object_len <= max_unit,
        _ => false,
    };
    if !kind_ok {
        return bounds;
    }
    let name = media.peek(off as usize + 48, name_len as usize);
    let meta = media.peek(off as usize + 48 + name_len as usize, meta_len as usize);
    if h.checksum != hash64(pool_id, &[&raw[..40], &name[..], &meta[..]].concat()) {
        return Err(Error::Corrupted { offset: off, kind: CorruptKind::HeaderChecksum });
    }
    Ok((h, end))
}

/// Decode the objects of a committed unit like recovery does, each against
/// [`expected_object`]; returns the decoded objects (stops at the first error).
fn check_objects(media: &VecMedia, sb: &Superblock, h: &UnitHeader, unit_off: u64) -> Vec<(DecodedObject, Vec<u8>)> {
    let unit_end = unit_off + h.unit_len;
    let mut out = Vec::new();
    let mut off = unit_off + LINE;
    let mut name_buf = [0u8; NAME_MAX];
    for _ in 0..h.object_count {
        let got = format::decode_object(media, sb, off, unit_end, &mut name_buf);
        let want = expected_object(media, sb, off, unit_end);
        match (got, want) {
            (Ok(d), Ok((wh, wend))) => {
                assert_eq!((d.header, d.end), (wh, wend));
                assert_eq!(d.name_off, off + size_of::<ObjectHeader>() as u64);
                assert_eq!(d.payload_off, off + head_len(wh.name_len as usize, wh.meta_len as usize));
                assert!(d.payload_off + wh.payload_len <= d.end && d.end <= unit_end && d.end > off);
                let name = name_buf[..wh.name_len as usize].to_vec();
                assert_eq!(name, media.peek(d.name_off as usize, name.len()));
                off = d.end;
                out.push((d, name));
            }
            (Err(g), Err(w)) => {
                assert_eq!(g, w, "object at {off:#x}");
                break;
            }
            (Ok(d), Err(w)) => panic!("decode_object accepted {:?} at {off:#x}, expected {w:?}", d.header),
            (Err(g), Ok(_)) => panic!("decode_object refused a good object at {off:#x}: {g:?}"),
        }
    }
    out
}

/// What `decode_unit` must answer at `off` in a segment ending at `seg_end`.
fn expected_unit(
    media: &VecMedia,
    sb: &Superblock,
    lane: u32,
    seq: u64,
    off: u64,
    seg_end: u64,
) -> Option<UnitOutcome> {
    if off + 64 > seg_end {
        return Some(UnitOutcome::End);
    }
    let raw = media.peek(off as usize, 64);
    let h: UnitHeader = bytemuck::pod_read_unaligned(&raw);
    if h.commit != commit_word(sb.pool_id, lane, seq, h.checksum) {
        return Some(UnitOutcome::End);
    }
    if h.checksum != hash64(sb.pool_id, &raw[8..56]) {
        return Some(UnitOutcome::Corrupt(CorruptKind::HeaderChecksum));
    }
    // FORMAT.md: 1..=256 objects and flags 0; or a marker unit of no objects and
    // unit_len 64: flags 1 (end of stream) or 2 (truncate, the only one with a nonzero
    // base); reserved 0.
    let (base, reserved) = (h.base, h.reserved);
    let kind_ok = match h.flags {
        0 => (1..=256).contains(&h.object_count) && base == 0,
        1 => h.object_count == 0 && base == 0 && h.unit_len == 64,
        2 => h.object_count == 0 && h.unit_len == 64,
        _ => false,
    } && reserved == 0;
    let ok = h.seq == seq
        && h.lane == lane
        && kind_ok
        && h.unit_len.is_multiple_of(64)
        && h.unit_len >= 64 + 64 * h.object_count as u64
        && h.unit_len <= seg_end - off;
    Some(if ok { UnitOutcome::Committed(h) } else { UnitOutcome::Corrupt(CorruptKind::HeaderBounds) })
}

#[derive(Debug, PartialEq)]
enum UnitOutcome {
    End,
    Committed(UnitHeader),
    Corrupt(CorruptKind),
}

fn decode_unit_outcome(media: &VecMedia, sb: &Superblock, lane: u32, seq: u64, off: u64, seg_end: u64) -> UnitOutcome {
    match format::decode_unit(media, sb, lane, seq, off, seg_end) {
        Ok(UnitSlot::End) => UnitOutcome::End,
        Ok(UnitSlot::Committed(h)) => UnitOutcome::Committed(h),
        Err(Error::Corrupted { offset, kind }) => {
            assert_eq!(offset, off, "unit corruption reported at another offset");
            UnitOutcome::Corrupt(kind)
        }
        Err(e) => panic!("decode_unit: {e:?}"),
    }
}

/// Case 3: the rest of the input as a unit slot, with fix-ups that lift the commit word
/// and checksum barriers so the bounds checks behind them are reached.
fn unit_raw(b: &mut Bytes) {
    let pool_id = b.u64();
    let fix = b.u8();
    let lane = b.u8() as u32 % 5;
    let seq = b.u8() as u64 % 4;
    let slot = b.u8() as u64;
    let count_fix = b.u8();
    let segment_len = SEGMENT_MIN << (fix >> 6);
    // Pools with and without delta objects (the low bit of the pool id chooses).
    let sb = small_superblock(pool_id, segment_len, 1, 4, if pool_id & 1 == 0 { FLAG_DELTAS } else { 0 });
    let media = VecMedia::zeroed(sb.pool_len as usize);
    media.poke(0, bytemuck::bytes_of(&sb));
    let seg_off = DATA_OFF;
    let seg_end = seg_off + segment_len;
    let off = seg_off + LINE + (slot % (segment_len / LINE)) * LINE;
    let rest = b.rest();
    let room = (sb.pool_len - off) as usize;
    media.poke(off as usize, &rest[..rest.len().min(room)]);
    if off + 64 <= seg_end {
        let mut h: UnitHeader = bytemuck::pod_read_unaligned(&media.peek(off as usize, 64));
        if fix & 1 != 0 {
            h.seq = seq;
            h.lane = lane;
        }
        if fix & 2 != 0 {
            h.object_count = count_fix as u32 % 9;
            h.flags = (count_fix as u64 >> 4) & 3;
            if count_fix & 0x40 != 0 {
                (h.base, h.reserved) = (0, 0);
            }
            h.unit_len = (h.unit_len % (segment_len + 128)) & !(LINE - 1);
        }
        if fix & 4 != 0 {
            h.checksum = h.compute_checksum(pool_id);
        }
        if fix & 8 != 0 {
            h.commit = commit_word(pool_id, lane, seq, h.checksum);
        }
        media.poke(off as usize, bytemuck::bytes_of(&h));
        // Objects: recompute each name checksum where the name lies inside the media.
        if fix & 16 != 0 {
            let mut obj = off + LINE;
            for _ in 0..h.object_count.min(BATCH_MAX as u32) {
                if obj + 64 > sb.pool_len {
                    break;
                }
                let mut oh: ObjectHeader = bytemuck::pod_read_unaligned(&media.peek(obj as usize, 48));
                if fix & 32 != 0 {
                    oh.name_len = (oh.name_len % 255) + 1;
                    oh.payload_len %= segment_len;
                }
                let name_end = obj + 48 + oh.name_len as u64;
                if name_end > sb.pool_len {
                    break;
                }
                let name = media.peek(obj as usize + 48, oh.name_len as usize);
                oh.checksum = oh.compute_checksum(pool_id, &name, &[]);
                media.poke(obj as usize, bytemuck::bytes_of(&oh));
                let Some(next) =
                    obj.checked_add(object_head_len(oh.name_len as usize) + line_up(oh.payload_len % (1 << 40)))
                else {
                    break;
                };
                obj = next;
            }
        }
    }
    let got = decode_unit_outcome(&media, &sb, lane, seq, off, seg_end);
    assert_eq!(Some(&got), expected_unit(&media, &sb, lane, seq, off, seg_end).as_ref());
    if let UnitOutcome::Committed(h) = got {
        let objs = check_objects(&media, &sb, &h, off);
        assert!(objs.len() <= h.object_count as usize);
    }
    assert_eq!(media.stores(), 0, "a decoder stored");
}

/// Case 4: a unit written by the real put path, decoded, then a bit flipped.
fn unit_round_trip(b: &mut Bytes) {
    let pool_id = b.u64();
    let sel = b.u8();
    let lane = b.u8() as u32 % 4;
    let pre = b.u8() % 4;
    let n = b.u8() as usize % 5 + 1;
    let mut names = Vec::new();
    let mut payloads = Vec::new();
    let mut versions = Vec::new();
    for k in 0..n {
        let name_len = b.u8() as usize % NAME_MAX + 1;
        let name: Vec<u8> = (0..name_len).map(|j| b'a' + ((j + k) % 26) as u8).collect();
        // sel bit 2: objects of up to 12000 bytes, so the batch may span 2 or 3 segments.
        let len = b.u16() as usize % if sel & 4 != 0 { 12000 } else { 1500 };
        payloads.push(crate::fill(pool_id.wrapping_add(k as u64), len));
        let bump = b.u8();
        versions.push((bump != 0).then_some(bump as u64 * 3));
        names.push(name);
    }
    let flip = (b.u16(), b.u8());
    let segment_len = 16384;
    let media = VecMedia::zeroed((DATA_OFF + 3 * segment_len) as usize);
    let mut o = FormatOptions::new(pool_id);
    o.segment_len = Some(segment_len);
    o.lanes_max = 4;
    o.payload_checksum = sel & 1 != 0;
    let mut pool = Pool::format(&media, o, HeapMemory::new()).expect("format");
    for k in 0..pre {
        pool.put(lane, Object::vectored(b"pre", &[&[k; 100]])).expect("pre put");
    }
    let parts: Vec<[&[u8]; 1]> = payloads.iter().map(|p| [&p[..]]).collect();
    let objects: Vec<Object> = names
        .iter()
        .zip(&parts)
        .zip(&versions)
        .map(|((nm, p), v)| {
            let o = Object::vectored(nm, p);
            match v {
                Some(v) => o.version(*v),
                None => o,
            }
        })
        .collect();
    if sel & 2 != 0 {
        close_marker_round_trip(&media, pool, lane, pre as u64, flip);
        return;
    }
    let vs = match pool.put_batch(lane, &objects).map_err(Error::from) {
        Ok(vs) => vs,
        Err(Error::VersionNotIncreasing { .. } | Error::TooLarge { .. }) => return,
        // A spanning unit after the `pre` puts' segment: 3 segments hold at most 2 more.
        Err(Error::Full | Error::Fragmented { .. }) if sel & 4 != 0 => return,
        Err(e) => panic!("put_batch: {e:?}"),
    };
    let sb = *pool.superblock();
    let first = pool.stat(&names[0], vs[0]).expect("stat");
    drop(pool);
    let unit_off = first.offset - object_head_len(names[0].len()) - LINE;
    let seq = pre as u64;
    // The unit's segment, or span: its end is where the unit's bounds are checked.
    let (found_off, seg_end) = find_unit(&media, &sb, lane, seq).expect("the unit just written is on its lane");
    assert_eq!(found_off, unit_off, "unit {seq} of lane {lane}");
    // Decode what the put wrote.
    let h = match decode_unit_outcome(&media, &sb, lane, seq, unit_off, seg_end) {
        UnitOutcome::Committed(h) => h,
        o => panic!("a unit just written does not decode: {o:?}"),
    };
    let unit_len =
        64 + names.iter().zip(&payloads).map(|(n, p)| format::object_len(n.len(), p.len() as u64)).sum::<u64>();
    assert_eq!((h.seq, h.lane, h.object_count as usize, h.unit_len), (seq, lane, n, unit_len));
    assert!(unit_off + unit_len <= seg_end, "unit {unit_off:#x}+{unit_len} past its span's end {seg_end:#x}");
    let objs = check_objects(&media, &sb, &h, unit_off);
    assert_eq!(objs.len(), n);
    let mut spans = Vec::new(); // checked bytes of each object: header + name
    for (k, (d, name)) in objs.iter().enumerate() {
        assert_eq!(
            (&name[..], d.header.version, d.header.payload_len),
            (&names[k][..], vs[k], payloads[k].len() as u64)
        );
        let sum = nvs_core::internals::sum::payload_sum(sb.sum_kind(), pool_id, &payloads[k]);
        assert_eq!(d.header.payload_sum, sum);
        assert_eq!(media.peek(d.payload_off as usize, payloads[k].len()), payloads[k]);
        let start = d.name_off - 48;
        spans.push((start, d.name_off + name.len() as u64));
    }
    // One flipped bit, refused exactly where the format says.
    let (at, bit) = flip;
    let at = unit_off + at as u64 % unit_len;
    let mut byte = media.peek(at as usize, 1);
    byte[0] ^= 1 << (bit % 8);
    media.poke(at as usize, &byte);
    let got = decode_unit_outcome(&media, &sb, lane, seq, unit_off, seg_end);
    let rel = at - unit_off;
    if rel < 8 || (56..64).contains(&rel) {
        // The commit word, or the checksum it is bound to.
        assert_eq!(got, UnitOutcome::End, "flip at unit+{rel}");
        return;
    }
    if rel < 64 {
        assert_eq!(got, UnitOutcome::Corrupt(CorruptKind::HeaderChecksum), "flip at unit+{rel}");
        return;
    }
    let UnitOutcome::Committed(h2) = got else { panic!("flip at unit+{rel} (outside the header) broke it: {got:?}") };
    let objs2 = check_objects(&media, &sb, &h2, unit_off);
    match spans.iter().position(|&(s, e)| (s..e).contains(&at)) {
        // Inside object k's header or name: objects before it decode, k is refused.
        Some(k) => assert_eq!(objs2.len(), k, "flip at unit+{rel} in object {k} not refused"),
        // Padding or payload: not covered by any header checksum.
        None => assert_eq!(objs2.len(), n),
    }
}

/// An end-of-stream unit written by `Pool::close_lane` after `seq` units: decoded as a
/// committed unit of no objects, then one bit flipped.
fn close_marker_round_trip(
    media: &VecMedia,
    mut pool: Pool<&VecMedia, HeapMemory>,
    lane: u32,
    seq: u64,
    flip: (u16, u8),
) {
    let before = pool.lane_info(lane).map_or(0, |i| i.units);
    assert_eq!(before, seq);
    pool.close_lane(lane).expect("close_lane");
    assert_eq!(pool.lane_info(lane).map(|i| (i.units, i.closed)), Some((seq + 1, true)));
    let sb = *pool.superblock();
    drop(pool);
    // The marker is the last unit of the lane: find it by walking the lane's units.
    let (off, seg_end) = find_unit(media, &sb, lane, seq).expect("the close marker is on the media");
    match decode_unit_outcome(media, &sb, lane, seq, off, seg_end) {
        UnitOutcome::Committed(h) => {
            assert_eq!((h.object_count, h.flags, h.unit_len), (0, format::UNIT_END_OF_STREAM, LINE));
            assert!(check_objects(media, &sb, &h, off).is_empty());
        }
        o => panic!("a close marker just written does not decode: {o:?}"),
    }
    let rel = flip.0 as u64 % LINE;
    let mut byte = media.peek((off + rel) as usize, 1);
    byte[0] ^= 1 << (flip.1 % 8);
    media.poke((off + rel) as usize, &byte);
    let got = decode_unit_outcome(media, &sb, lane, seq, off, seg_end);
    if !(8..56).contains(&rel) {
        assert_eq!(got, UnitOutcome::End, "flip at marker+{rel}");
    } else {
        assert_eq!(got, UnitOutcome::Corrupt(CorruptKind::HeaderChecksum), "flip at marker+{rel}");
    }
    // Recovery agrees: the lane ends before the marker (End) or the pool is corrupted.
    match Pool::open_read_only(media, HeapMemory::new()) {
        Ok(p) => assert_eq!(p.lane_info(lane).map(|i| (i.units, i.closed)), Some((seq, false))),
        Err(e) => assert!(matches!(e, Error::Corrupted { .. }), "{e:?}"),
    }
}

/// Where unit `seq` of `lane` is: walk the lane's segments (by chain) and units.
fn find_unit(media: &VecMedia, sb: &Superblock, lane: u32, seq: u64) -> Option<(u64, u64)> {
    let mut segs: Vec<(u64, SegmentHeader)> = (0..sb.segment_count)
        .filter_map(|i| format::decode_segment(media, sb, i).map(|h| (sb.segment_off(i), h)))
        .filter(|(_, h)| h.lane == lane)
        .collect();
    segs.sort_by_key(|(_, h)| h.chain_seq);
    let mut next = 0;
    for (seg_off, h) in segs {
        let seg_end = seg_off + h.span * sb.segment_len;
        let mut off = seg_off + LINE;
        while let Ok(UnitSlot::Committed(u)) = format::decode_unit(media, sb, lane, next, off, seg_end) {
            if next == seq {
                return Some((off, seg_end));
            }
            next += 1;
            off += u.unit_len;
        }
    }
    None
}

/// Case 5: the streaming hasher equals the one-shot hash for every cut.
fn hash_streaming(b: &mut Bytes) {
    let seed = b.u64();
    let cuts = [b.u8() as usize, b.u8() as usize, b.u8() as usize];
    let data = b.rest();
    let mut pos = vec![0, data.len()];
    pos.extend(cuts.iter().map(|c| c * data.len() / 256));
    pos.sort_unstable();
    let mut h = Hasher::new(seed);
    for w in pos.windows(2) {
        h.write(&data[w[0]..w[1]]);
    }
    assert_eq!(h.finish(), hash64(seed, data));
}
