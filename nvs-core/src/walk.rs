//! Reading a pool's bytes as they lie, without recovery: for a person debugging a pool
//! (`nvs dump`, `nvs info --stats`) and for getting objects out of a damaged one
//! (`nvs salvage`).
//!
//! [`Walker::walk`] visits every segment in index order, then the units each valid
//! segment header owns and their objects, exactly as the decoders recovery uses read
//! them (every check in FORMAT.md applies), but where recovery stops at the first damage
//! with [`Error::Corrupted`], the walk reports it as an [`Item::Damage`] and goes on:
//! - a segment whose header fails its checks (any number of damaged bytes, a zeroed
//!   line) is damaged if a committed unit of this pool starts its data that retention
//!   did not release — its seq at or past the lowest `first_seq` of its lane's segments
//!   with valid headers (any seq, if the lane has none) — or if its header is this
//!   pool's but for a damaged byte; its lane's units are walked from there
//!   ([`SegmentState::Damaged`]);
//! - a committed unit whose header fails its checksum or bounds cannot be trusted for
//!   its length: the walk looks line by line for a later unit of the lane (a higher
//!   `seq`; the commit word binds pool id, lane and seq) and resumes there, counting the
//!   units stepped over by their seqs;
//! - a slot with no committed unit, with a later committed unit of the lane after it in
//!   the segment (lines of units zeroed or torn): the same, a sequence gap, where
//!   recovery would end the lane silently (a crash never commits a unit after one that
//!   is not);
//! - an object header that fails: the rest of its unit is skipped (the unit's length was
//!   checked), the walk resumes at the next unit.
//!
//! It does not tie segments into chains, and it reads what retention released but did
//! not yet invalidate. Released segments (zeroed headers, units older than their lane's
//! segments) are free. A lost header of a lane's oldest segment looks the same (its
//! units are older than the lane's next segment): recovery (`nvs check`) reports that
//! one, from the lane's truncate units, but the walk does not read its units. Payloads are read only when asked ([`Walker::payload`], [`Walker::rebuild`]).
//! It reads only, through the [`Media`] trait, and never allocates.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

use crate::delta::read::walk_record;
use crate::error::{CorruptKind, Error, Result};
use crate::format::sum::Summer;
use crate::format::{self, Superblock, UnitSlot, LINE, META_MAX, NAME_MAX};
use crate::index::Entry;
use crate::limits::LANES_MAX;
use crate::media::Media;
use crate::pool::Layout;

/// What a segment's header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentState {
    /// A valid header of this pool: owned by `lane`.
    Owned {
        /// The owner lane.
        lane: u32,
        /// Its position in the lane's chain.
        chain_seq: u64,
        /// The lane sequence number of the segment's first unit.
        first_seq: u64,
        /// How many consecutive segments the header owns (1, or more for a span).
        span: u64,
    },
    /// No valid header, and nothing committed the lane has not released: free space.
    Free,
    /// The header fails its checks, and the segment holds committed units its lane did
    /// not release, or the header is this pool's but for a damaged byte (damage). If a
    /// committed unit starts the segment's data, `unit` is its `(lane, seq)` and the
    /// walk reads the lane's units from there.
    Damaged {
        /// The lane and seq of the committed unit at the segment's data start, if any.
        unit: Option<(u32, u64)>,
    },
}

/// A segment, as its header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// The segment's index (0 ..< segment_count).
    pub index: u32,
    /// Media offset of its header.
    pub offset: u64,
    /// What its header says.
    pub state: SegmentState,
    /// The header's checksum word as stored.
    pub checksum: u64,
}

/// A committed unit (one commit: a put, a batch or a marker).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unit {
    /// Media offset of its header.
    pub offset: u64,
    /// Its lane.
    pub lane: u32,
    /// Its lane sequence number.
    pub seq: u64,
    /// Bytes of the whole unit, header included.
    pub unit_len: u64,
    /// Objects in it (0 for a marker).
    pub object_count: u32,
    /// 0, or a marker: 1 end of stream, 2 truncate, 4 detach (FORMAT.md).
    pub flags: u64,
    /// A truncate unit's new lowest chain position; else 0.
    pub base: u64,
    /// The header checksum.
    pub checksum: u64,
    /// The commit word.
    pub commit: u64,
}

/// An object of a committed unit, its header checked (not its payload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkedObject<'a> {
    /// Media offset of its header.
    pub offset: u64,
    /// Media offset of the unit holding it.
    pub unit_offset: u64,
    /// The unit's lane.
    pub lane: u32,
    /// The unit's seq.
    pub seq: u64,
    /// Its version.
    pub version: u64,
    /// Its name.
    pub name: &'a [u8],
    /// Its metadata (empty if none).
    pub meta: &'a [u8],
    /// 0 full, 1 delta.
    pub flags: u16,
    /// 0 for a full version; a delta's distance from its full version.
    pub depth: u16,
    /// Media offset of its payload.
    pub payload_off: u64,
    /// Bytes of payload on the media (a delta's record).
    pub payload_len: u64,
    /// The object's length (what a get returns; a delta's rebuilt length).
    pub len_bytes: u64,
    /// The payload checksum stored (0 without payload checksums).
    pub payload_sum: u64,
    /// The object header's checksum.
    pub checksum: u64,
}

/// Damage the walk found and stepped over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Media offset of the bad bytes.
    pub offset: u64,
    /// What is wrong there.
    pub kind: CorruptKind,
    /// The lane and seq of the unit it hit.
    pub lane: u32,
    /// See `lane`.
    pub seq: u64,
    /// Where the walk went on (the next unit found), if it did in this segment.
    pub resumed_at: Option<u64>,
    /// Units of the lane stepped over whole, their objects unknown: from `seq` up to the
    /// unit the walk resumed at (their seqs tell how many); 0 where the damaged unit's
    /// header held and only objects of it are lost (`objects_lost`).
    pub units_lost: u64,
    /// Objects of the damaged unit that were not walked (its header counts them), where
    /// the unit's header held.
    pub objects_lost: u64,
}

/// Where a segment's (or span's) units end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentEnd {
    /// The segment's index.
    pub index: u32,
    /// Media offset just past its last unit walked (its data start if none).
    pub units_end: u64,
    /// Media offset of its end (a span's: its last segment's end).
    pub end: u64,
}

/// One thing [`Walker::walk`] met, in media order within a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// A segment's header (covered segments of a span are not visited).
    Segment(Segment),
    /// A committed unit.
    Unit(Unit),
    /// An object of the unit last visited.
    Object(WalkedObject<'a>),
    /// Damage, stepped over.
    Damage(Damage),
    /// The end of the segment last visited.
    SegmentEnd(SegmentEnd),
}

/// A read-only walk over a pool's media (see the module docs).
pub struct Walker<'m, M: Media + ?Sized> {
    media: &'m M,
    /// The superblock the walk uses: for a truncated pool, cut to the segments present.
    sb: Superblock,
    /// The superblock as formatted.
    formatted: Superblock,
}

impl<'m, M: Media + ?Sized> Walker<'m, M> {
    /// A walker over `media`, if its superblock decodes (else the error an open gives:
    /// not formatted, corrupted superblock or geometry, unsupported version).
    ///
    /// # Errors
    /// `NotFormatted`, `UnsupportedVersion`, or `Corrupted` (the superblock or its geometry).
    pub fn new(media: &'m M) -> Result<Self> {
        let sb = format::decode_superblock(media)?;
        Ok(Walker { media, sb, formatted: sb })
    }

    /// Like [`Walker::new`], but a pool whose media is shorter than its superblock says
    /// (a truncated file) is accepted if the media holds its first segment: the walk
    /// covers the whole segments the media still holds ([`Walker::segments_present`]);
    /// a span reaching past them reads as a damaged header, walked as far as the media
    /// goes. [`Walker::layout`] is still the pool as formatted.
    ///
    /// # Errors
    /// `NotFormatted`, `UnsupportedVersion`, or `Corrupted` (the superblock).
    pub fn new_truncated(media: &'m M) -> Result<Self> {
        let formatted = format::decode_superblock_short(media)?;
        let present = (media.len() as u64 - formatted.data_off) / formatted.segment_len;
        let count = present.min(formatted.segment_count as u64) as u32; // >= 1: decoded
        let sb = Superblock {
            segment_count: count,
            pool_len: formatted.data_off + count as u64 * formatted.segment_len,
            ..formatted
        };
        Ok(Walker { media, sb, formatted })
    }

    /// The pool's layout, from its superblock (as formatted).
    pub fn layout(&self) -> Layout {
        crate::pool::layout_of(&self.formatted)
    }

    /// The segments the walk covers: all of them, but for a truncated pool
    /// ([`Walker::new_truncated`]) those its media still holds whole.
    pub fn segments_present(&self) -> u32 {
        self.sb.segment_count
    }

    /// Media offset of segment `i`'s header (for an `i` past the pool's segments, where
    /// it would be, or `u64::MAX` beyond the offsets a `u64` holds).
    pub fn segment_offset(&self, i: u32) -> u64 {
        (i as u64).checked_mul(self.sb.segment_len).and_then(|o| o.checked_add(self.sb.data_off)).unwrap_or(u64::MAX)
    }

    /// Visit every segment, unit and object (see the module docs), in segment index
    /// order. Bounded: segments by `segment_count`, units by the lines of a segment.
    pub fn walk(&self, visit: &mut dyn FnMut(Item<'_>)) {
        let (sb, media) = (&self.sb, self.media);
        let count = sb.segment_count;
        let pool_end = sb.data_off + count as u64 * sb.segment_len;
        // Each lane's lowest first_seq among its valid headers: units below it were
        // released (or its oldest segment's header is lost, see the module docs).
        let mut released_below = [u64::MAX; LANES_MAX as usize];
        // And its highest chain position: where a sealed pool's newest unit may be torn.
        let mut last_chain = [0u64; LANES_MAX as usize];
        let mut i = 0u32;
        while i < count {
            match format::decode_segment(media, sb, i) {
                Some(h) => {
                    if let Some(m) = released_below.get_mut(h.lane as usize) {
                        *m = (*m).min(h.first_seq);
                    }
                    if let Some(c) = last_chain.get_mut(h.lane as usize) {
                        *c = (*c).max(h.chain_seq);
                    }
                    i = i.saturating_add(h.span as u32);
                }
                None => i += 1,
            }
        }
        let unreleased =
            |lane: u32, seq: u64| released_below.get(lane as usize).is_some_and(|&m| m == u64::MAX || seq >= m);
        let mut i = 0u32;
        while i < count {
            let off = sb.segment_off(i);
            let checksum = media.load_word(off as usize + 56);
            let seg = |state| Item::Segment(Segment { index: i, offset: off, state, checksum });
            if let Some(h) = format::decode_segment(media, sb, i) {
                let span = h.span; // decode: 1 ..= count - i
                visit(seg(SegmentState::Owned { lane: h.lane, chain_seq: h.chain_seq, first_seq: h.first_seq, span }));
                let end = off + span * sb.segment_len;
                let newest = last_chain.get(h.lane as usize) == Some(&h.chain_seq);
                let units_end = self.walk_units(h.lane, h.first_seq, off + LINE, end, newest, visit);
                visit(Item::SegmentEnd(SegmentEnd { index: i, units_end, end }));
                i = i.saturating_add(span as u32);
                continue;
            }
            // A damaged header's span is unknown: its units may run to the pool's end.
            let once_whole = format::segment_once_whole(media, sb, i);
            let first = format::decode_unit_anywhere(media, sb, off + LINE, pool_end, |l, seq| {
                once_whole || unreleased(l, seq)
            });
            if first.is_none() && !once_whole {
                visit(seg(SegmentState::Free));
                i += 1;
                continue;
            }
            visit(seg(SegmentState::Damaged { unit: first.map(|u| (u.lane, u.seq)) }));
            let units_end = match first {
                Some(u) => self.walk_units(u.lane, u.seq, off + LINE, pool_end, false, visit),
                None => off + LINE,
            };
            // The segments its units reach are this one's (a span's covered ones).
            let last = ((units_end.max(off + LINE) - 1 - sb.data_off) / sb.segment_len) as u32;
            let end = sb.segment_off(last) + sb.segment_len;
            visit(Item::SegmentEnd(SegmentEnd { index: i, units_end, end }));
            i = last.max(i).saturating_add(1);
        }
    }

    /// Walk `lane`'s units from `seq` at `off`, in a segment ending at `end`; returns
    /// where they end. `newest`: the segment is its lane's newest, where a sealed pool's
    /// newest unit, if it does not verify whole, was torn by a crash: not committed, as
    /// recovery reads it (elsewhere it would be damage, and is reported as such).
    fn walk_units(
        &self,
        lane: u32,
        mut seq: u64,
        mut off: u64,
        end: u64,
        newest: bool,
        visit: &mut dyn FnMut(Item<'_>),
    ) -> u64 {
        let (sb, media) = (&self.sb, self.media);
        let mut name = [0u8; NAME_MAX];
        let mut meta = [0u8; META_MAX];
        let lines = (end - off) / LINE;
        let mut walked = 0u64;
        while walked < lines {
            walked += 1;
            // A later committed unit of this lane in this segment, after `off`: (offset,
            // seq): damage (zeroed or torn lines) that would otherwise end the lane
            // there, hiding the units after it.
            let later = |off: u64| format::committed_later(media, sb, lane, seq, off, end);
            let h = match format::decode_unit(media, sb, lane, seq, off, end) {
                Ok(UnitSlot::End) => {
                    // The slot's commit or checksum word damaged (its length word
                    // leads to the next unit), or lines of units lost.
                    let next = match format::committed_after_end(media, sb, lane, seq, off, end) {
                        Some(at) => Some((at, seq + 1)),
                        None => later(off),
                    };
                    let Some((at, next_seq)) = next else { break };
                    visit(Item::Damage(Damage {
                        offset: off,
                        kind: CorruptKind::SequenceGap,
                        lane,
                        seq,
                        resumed_at: Some(at),
                        units_lost: next_seq - seq,
                        objects_lost: 0,
                    }));
                    walked += (at - off) / LINE - 1;
                    off = at;
                    seq = next_seq;
                    continue;
                }
                Ok(UnitSlot::Committed(h)) => h,
                Err(_) if format::sealed_torn_header(media, sb, lane, seq, off, end, !newest) => break,
                Err(e) => {
                    // Its length cannot be trusted: find the lane's next unit.
                    let next = later(off);
                    visit(Item::Damage(Damage {
                        offset: off,
                        kind: kind_of(e),
                        lane,
                        seq,
                        resumed_at: next.map(|n| n.0),
                        units_lost: next.map_or(1, |n| n.1 - seq),
                        objects_lost: 0,
                    }));
                    match next {
                        Some((at, next_seq)) => {
                            walked += (at - off) / LINE;
                            off = at;
                            seq = next_seq;
                            continue;
                        }
                        None => return off,
                    }
                }
            };
            let unit_end = off + h.unit_len;
            // (The next unit's commit word alone means its stores began after this one's fence.)
            let next_committed =
                || !matches!(format::decode_unit(media, sb, lane, seq + 1, unit_end, end), Ok(UnitSlot::End));
            if sb.one_fence()
                && newest
                && !next_committed()
                && format::sealed_newest_torn(media, sb, lane, seq, off, &h, end)
            {
                break;
            }
            visit(Item::Unit(Unit {
                offset: off,
                lane,
                seq,
                unit_len: h.unit_len,
                object_count: h.object_count,
                flags: h.flags,
                base: h.base,
                checksum: h.checksum,
                commit: h.commit,
            }));
            let mut obj = off + LINE;
            for k in 0..h.object_count {
                match format::decode_object(media, sb, obj, unit_end, &mut name) {
                    Ok(d) => {
                        let hd = d.header;
                        let meta = meta.get_mut(..hd.meta_len as usize).unwrap_or(&mut []);
                        media.read(d.name_off as usize + hd.name_len as usize, meta);
                        visit(Item::Object(WalkedObject {
                            offset: obj,
                            unit_offset: off,
                            lane,
                            seq,
                            version: hd.version,
                            name: name.get(..hd.name_len as usize).unwrap_or(&[]),
                            meta,
                            flags: hd.flags,
                            depth: hd.depth,
                            payload_off: d.payload_off,
                            payload_len: hd.payload_len,
                            len_bytes: if hd.depth == 0 { hd.payload_len } else { hd.object_len },
                            payload_sum: hd.payload_sum,
                            checksum: hd.checksum,
                        }));
                        obj = d.end;
                    }
                    Err(e) => {
                        let resumed_at = Some(unit_end).filter(|&u| u < end);
                        let objects_lost = (h.object_count - k) as u64;
                        let (kind, units_lost) = (kind_of(e), 0);
                        visit(Item::Damage(Damage {
                            offset: obj,
                            kind,
                            lane,
                            seq,
                            resumed_at,
                            units_lost,
                            objects_lost,
                        }));
                        break;
                    }
                }
            }
            walked += h.unit_len / LINE - 1;
            off = unit_end;
            seq += 1;
        }
        off
    }

    /// Whether `o`'s stored payload matches its checksum: `None` if the pool has no
    /// payload checksums. Reads the payload in 4 KiB blocks.
    pub fn payload_ok(&self, o: &WalkedObject<'_>) -> Option<bool> {
        let mut h = Summer::new(self.sb.sum_kind(), self.sb.pool_id)?;
        let mut chunk = [0u8; 4096];
        let (mut at, end) = (o.payload_off, o.payload_off + o.payload_len);
        while at < end {
            let n = ((end - at) as usize).min(chunk.len());
            let c = chunk.get_mut(..n).unwrap_or(&mut []);
            match &mut h {
                Summer::Sum(s) => self.media.read_summed(at as usize, c, s),
                Summer::Hash64(x) => {
                    self.media.read(at as usize, c);
                    x.write(c);
                }
            }
            at += n as u64;
        }
        Some(h.finish(o.payload_len) == o.payload_sum)
    }

    /// Copy full object `o`'s payload into `out` (`o.len_bytes` long) and verify its
    /// checksum if the pool has them. A delta: see [`Walker::rebuild`].
    ///
    /// # Errors
    /// `BufferTooSmall` unless `o` is a full version and `out` is exactly `o.len_bytes`
    /// long; `Corrupted { kind: PayloadChecksum }` if its checksum fails.
    pub fn payload(&self, o: &WalkedObject<'_>, out: &mut [u8]) -> Result<()> {
        if o.depth != 0 || out.len() as u64 != o.len_bytes {
            return Err(Error::BufferTooSmall { needed_bytes: o.len_bytes });
        }
        if self.payload_ok(o) == Some(false) {
            return Err(Error::Corrupted { offset: o.payload_off, kind: CorruptKind::PayloadChecksum });
        }
        self.media.read(o.payload_off as usize, out);
        Ok(())
    }

    /// The parent version delta `o` is rebuilt from (`None` for a full version).
    pub fn delta_parent(&self, o: &WalkedObject<'_>) -> Option<u64> {
        (o.depth != 0).then(|| self.media.load_word(o.payload_off as usize))
    }

    /// Rebuild delta `o` over `out`, which holds its parent's bytes (`o.len_bytes`
    /// long): check its payload checksum (if the pool has them) and its record, and copy
    /// each extent over `out`. On error `out` may be partly overwritten.
    ///
    /// # Errors
    /// `BufferTooSmall` unless `o` is a delta and `out` is exactly `o.len_bytes` long;
    /// `Corrupted` if its payload checksum or its record fails.
    pub fn rebuild(&self, o: &WalkedObject<'_>, out: &mut [u8]) -> Result<()> {
        if o.depth == 0 || out.len() as u64 != o.len_bytes {
            return Err(Error::BufferTooSmall { needed_bytes: o.len_bytes });
        }
        if self.payload_ok(o) == Some(false) {
            return Err(Error::Corrupted { offset: o.payload_off, kind: CorruptKind::PayloadChecksum });
        }
        let e = Entry {
            version: o.version,
            payload_off: o.payload_off,
            len_bytes: o.len_bytes,
            stored_bytes: o.payload_len,
            seq: o.seq,
            lane: o.lane,
            depth: o.depth,
            payload_sum: o.payload_sum,
            ..Entry::default()
        };
        walk_record(self.media, self.sb.pool_id, &e, &mut |at, from, n| {
            if let Some(d) = out.get_mut(at as usize..(at + n) as usize) {
                self.media.read(from as usize, d);
            }
        })
    }
}

/// The kind of a decoder's error (they return only `Corrupted`).
fn kind_of(e: Error) -> CorruptKind {
    match e {
        Error::Corrupted { kind, .. } => kind,
        _ => CorruptKind::HeaderBounds,
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]
mod tests {
    extern crate std;
    use super::*;
    use crate::{FormatOptions, HeapMemory, Object, Pool, Region};
    use std::vec::Vec;

    #[repr(align(64))]
    #[allow(dead_code)] // only its size and alignment matter
    struct Line([u8; 64]);

    /// (what, seq or version) of every unit, object and damage walked.
    fn walked(m: &Region) -> Vec<(char, u64)> {
        let w = Walker::new(m).unwrap();
        let mut v = Vec::new();
        w.walk(&mut |it| match it {
            Item::Unit(u) => v.push(('u', u.seq)),
            Item::Object(o) => v.push(('o', o.version)),
            Item::Damage(d) => v.push(('d', d.seq)),
            _ => {}
        });
        v
    }

    /// A clean pool walks as it was written; a damaged unit header is reported and
    /// stepped over (the lane's next unit found); a damaged payload fails `payload_ok`.
    #[test]
    fn walks_and_steps_over_damage() {
        let mut mem: Vec<Line> = (0..(1 << 20) / 64).map(|_| Line([0; 64])).collect();
        // SAFETY: `mem` is 64-byte aligned, outlives the pool, and nothing else touches it.
        let media = unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) };
        let mut opts = FormatOptions::new(7);
        opts.segment_len = Some(64 << 10);
        let mut pool = Pool::format(media, opts, HeapMemory::new()).unwrap();
        for i in 0..3u8 {
            pool.put(0, Object::new("a", &[i; 100])).unwrap();
        }
        let (media, _) = pool.close();
        assert_eq!(walked(&media), [('u', 0), ('o', 1), ('u', 1), ('o', 2), ('u', 2), ('o', 3)]);
        // Units of 64 (header) + 64 (object header, name) + 128 (payload) bytes from 0x1040.
        let unit1 = 0x1040 + 256;
        let mut b = [0u8; 1];
        media.read(unit1 + 20, &mut b);
        media.store(unit1 + 20, &[b[0] ^ 1]);
        // SAFETY: the same memory, read-only, while `media` is not written.
        let again = unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) };
        assert!(Pool::open_read_only(again, HeapMemory::new()).is_err());
        assert_eq!(walked(&media), [('u', 0), ('o', 1), ('d', 1), ('u', 2), ('o', 3)]);
        let w = Walker::new(&media).unwrap();
        let mut first = None;
        w.walk(&mut |it| {
            if let Item::Object(o) = it {
                first.get_or_insert((o.offset, o.payload_off, o.len_bytes));
            }
        });
        let (_, payload, len) = first.unwrap();
        let mut out = [0u8; 100];
        let check = |out: &mut [u8]| {
            let mut r = None;
            w.walk(&mut |it| match it {
                Item::Object(o) if o.version == 1 => r = Some((w.payload_ok(&o), w.payload(&o, out).is_ok())),
                _ => {}
            });
            r.unwrap()
        };
        assert_eq!((len, check(&mut out)), (100, (Some(true), true)));
        assert_eq!(out, [0u8; 100]);
        media.store(payload as usize + 7, &[9]);
        assert_eq!(check(&mut out), (Some(false), false));
    }
}
