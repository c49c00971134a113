//! Recovery: rebuild every lane's state and the index from the media, reading only.
//!
//! The decision table (DESIGN.md explains why each row keeps the contract):
//!
//! | what recovery finds                                   | decision                         |
//! |-------------------------------------------------------|----------------------------------|
//! | segment header: bad magic/checksum/pool id/lane       | segment is free                  |
//! | free segment whose first unit is committed for this   |                                  |
//! |   pool with seq ≥ its lane's next seq (pass 4)        | `Corrupted(LostSegment)`         |
//! | valid header, chain_seq continues its lane's chain    | segment belongs to the lane      |
//! | valid header, gap or duplicate in its lane's chain    | `Corrupted(SegmentChain)`        |
//! | valid header, chain_seq or first_seq ≥ 2^63           | `Corrupted(SegmentChain)`        |
//! | unit slot: commit word ≠ expected for (lane, seq)     | lane's log ends in this segment  |
//! | ... but unit seq + 1 committed where the slot's length |                                  |
//! |   word says it ends (and the slot still not, reread)  | `Corrupted(SequenceGap)`         |
//! | commit word matches, header checksum wrong            | `Corrupted(HeaderChecksum)`      |
//! | commit word matches, lengths/counts out of bounds     | `Corrupted(HeaderBounds)`        |
//! | commit word matches, object header/name checksum bad  | `Corrupted(HeaderChecksum)`      |
//! | next segment's first_seq ≠ lane's next seq            | `Corrupted(SequenceGap)`         |
//! | same (name, version) committed twice                  | `Corrupted(DuplicateVersion)`    |
//! | otherwise                                             | unit committed: index it         |
//!
//! Every loop is bounded: segments by `segment_count`, units by `segment_len / 64` per
//! segment, objects by the unit's checked `object_count`.
//!
//! [`catch_up`] (a read-only pool's refresh) walks on from where the last walk stopped,
//! with the same per-segment walk ([`walk_segment`]), and gives up whenever the result
//! might differ from this table's.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

use crate::error::{CorruptKind, Error, Result};
use crate::format::{self, SegmentHeader, Superblock, UnitSlot, LANES_MAX, LINE, NAME_MAX};
use crate::index::{Entry, Full, Index, IndexMemory, InsertError, NameCache, NONE};
use crate::log::lane::Lane;
use crate::log::segments::{self, SegSlot, FREE, RELEASED};
use crate::log::LaneSet;
use crate::media::Media;
use crate::mutant::{self, Mutant};
use crate::object::PoolStats;

/// How pass 3 learns each lane's retention base.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bases {
    /// Assume no segment on a chain is released (the usual case: retention invalidates
    /// what it releases right after its truncate unit), so each lane's unit headers are
    /// walked once; the truncate units met on the way confirm it.
    Assume,
    /// Read the bases first (a walk of the unit headers), then walk again.
    Read,
}

/// Rebuild `lanes` and `index` from the media. Writes nothing to the media.
///
/// One walk of every lane's units in the usual case. Only when a lane's truncate units
/// release segments still valid on its chain (a crash between a truncate unit and the
/// invalidation of its segments, or a reader beside a writer's reclaim), or when the
/// walk finds anything wrong, does recovery start over reading the bases first — so an
/// error is always the one the careful order finds.
pub(crate) fn recover<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    lanes: &mut [Lane],
) -> Result<PoolStats> {
    match recover_with(media, sb, index, lanes, Bases::Assume) {
        Ok(Some(stats)) => Ok(stats),
        Ok(None) | Err(_) => recover_with(media, sb, index, lanes, Bases::Read)?
            .ok_or(Error::Corrupted { offset: 0, kind: CorruptKind::SegmentChain }),
    }
}

/// Recovery with bases found as `bases` says; `None`: assumed bases proved wrong.
fn recover_with<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    lanes: &mut [Lane],
    bases: Bases,
) -> Result<Option<PoolStats>> {
    index.clear();
    for l in lanes.iter_mut() {
        *l = Lane::default();
    }
    let count = sb.segment_count as usize;
    let segs = index.segments(count)?;
    read_segment_headers(media, sb, segs);
    let stats = check_chains(sb, segs)?;
    // Pass 3: walk each chain's units. `segs` is sorted, so a lane's segments are adjacent.
    let mut walk =
        Walk { stats, name_buf: [0; NAME_MAX], truncate_seen: None, name_order: None, names: NameCache::new() };
    // The bytes of the segments in use but each lane's last (a lane moves on only when
    // a unit does not fit, so these are nearly full; a lane's last may hold anything),
    // and those walked so far: what the index's room is estimated from (`presize`).
    let log_bytes = walk.stats.segments_used.saturating_sub(walk.stats.lanes) as u64 * sb.segment_len;
    let (mut walked, mut presized) = (0u64, false);
    let mut i = 0usize;
    while let Some(first) = index.segments_ref().get(..count).and_then(|v| v.get(i)).copied() {
        if first.lane == FREE {
            break;
        }
        let lane_id = first.lane;
        // 3a: the lane's retention base (its latest truncate unit): assumed to be where
        // its chain starts, or read by a walk of unit headers with the same continuity
        // checks; segments below it are released.
        let truncated = match bases {
            Bases::Assume => Some(first.chain_seq),
            Bases::Read => truncate_base(media, sb, index.segments_ref().get(..count).unwrap_or(&[]), i)?,
        };
        // A chain starting above 0 must have been released to there by a truncate unit;
        // otherwise its head was lost.
        if first.chain_seq > 0 && truncated.is_none_or(|b| b < first.chain_seq) {
            return Err(Error::Corrupted { offset: sb.segment_off(first.index), kind: CorruptKind::SegmentChain });
        }
        let base = truncated.unwrap_or(0);
        // The largest base the truncate units walked below give (3b checks the assumed one).
        walk.truncate_seen = None;
        // Released segments stay owned (not free) until a writer invalidates them.
        while let Some(s) = index.segments(count)?.get_mut(i) {
            if s.lane != lane_id || s.chain_seq >= base {
                break;
            }
            s.first_seq = RELEASED;
            walk.stats.segments_used -= 1;
            i += 1;
        }
        let first_seq = index.segments_ref().get(i).map_or(0, |s| s.first_seq);
        let mut lane = Lane { next_seq: first_seq, ..Lane::default() };
        while let Some(s) = index.segments_ref().get(..count).and_then(|v| v.get(i)).copied() {
            if s.lane != lane_id {
                break;
            }
            if s.is_covered() {
                i += 1;
                continue;
            }
            let seg_off = sb.segment_off(s.index);
            if s.first_seq != lane.next_seq {
                return Err(Error::Corrupted { offset: seg_off, kind: CorruptKind::SequenceGap });
            }
            // The lane's next segment, if any: the next slot not covered by this one's span.
            let segs = index.segments_ref().get(..count).unwrap_or(&[]);
            let more =
                segs.get(i + 1..).and_then(|v| v.iter().find(|g| !g.is_covered())).is_some_and(|g| g.lane == lane_id);
            walk_segment(media, sb, index, &s, more, seg_off + LINE, &mut lane, &mut walk)?;
            walked += lane.tail - (seg_off + LINE);
            if !presized {
                presized = presize(index, walked, log_bytes);
            }
            i += 1;
        }
        // 3b: the assumed base holds if the truncate units say exactly where the chain
        // starts (or, for a chain from 0, release nothing): else walk again, reading them.
        if bases == Bases::Assume && walk.truncate_seen.unwrap_or(0) != first.chain_seq {
            return Ok(None);
        }
        if let Some(l) = lanes.get_mut(lane_id as usize) {
            *l = lane;
        }
    }
    // Back to index order, for allocation.
    index.segments(count)?.sort_unstable_by_key(|s| s.index);
    lost_segment(media, sb, index.segments_ref().get(..count).unwrap_or(&[]), lanes)?;
    Ok(Some(walk.stats))
}

/// Make the index's room, once recovery walked a sixteenth of `log_bytes` (the
/// segments in use but each lane's last; `walked` so far), for the entries those bytes
/// hold at the density seen so far, and up to an eighth more: one growth of the entry array
/// and the table instead of a doubling after doubling (each a copy, and a rehash of the
/// table) — a large part of an open of many small objects into fresh heap memory.
/// Returns whether it is done. A hint: a refusal (fixed memory that cannot hold the
/// estimate) changes nothing, and the inserts then ask for their room one by one, as
/// they always do; an estimate above what the log holds (larger objects later) only
/// leaves memory unused. Lanes' last segments are left out of the estimate, so lanes
/// that hold one segment each, barely used, are not taken for full ones.
fn presize<X: IndexMemory>(index: &mut Index<X>, walked: u64, log_bytes: u64) -> bool {
    if log_bytes == 0 {
        return true;
    }
    if walked == 0 || walked < log_bytes / 16 {
        return false;
    }
    let Ok(base) = usize::try_from(index.len() as u128 * log_bytes as u128 / walked as u128) else { return true };
    // An eighth more, but only as far as the table the estimate needs holds (it is a
    // power of two at least twice the keys): the margin never doubles the table.
    let keys = base.saturating_add(index.name_count());
    let room = keys.saturating_mul(2).checked_next_power_of_two().map_or(usize::MAX, |t| t / 2);
    let estimate = base.saturating_add(base / 8).min(room.saturating_sub(index.name_count())).max(base);
    if let Some(more) = estimate.checked_sub(index.len()) {
        let _ = index.reserve(more, 0);
    }
    true
}

/// Never reaches a caller: a catch-up's "not sure" (the caller recovers instead).
const UNSURE: Error = Error::Corrupted { offset: 0, kind: CorruptKind::SegmentChain };

/// Most segments one catch-up follows lanes into (past that it recovers instead).
const CLAIMS_MAX: usize = 64;

/// Catch `lanes` and `index`, left by a recovery or a catch-up whose state the media
/// still holds, up with the media: the state a recovery would give now, or `Err` when
/// that cannot be made sure of — then the caller runs [`recover`] (the state left here is
/// then partly updated, and recovery starts from nothing anyway). Writes nothing.
///
/// It reads every segment header once (one word for a free one, usually) and only the
/// units committed since: per lane, from its tail (segment, offset, next sequence) on,
/// with recovery's own walk ([`walk_segment`]), into the segments its writer chained
/// since. It gives up when anything is not as a recovery of the same media would find it
/// on its plain path: the superblock changed; a known segment's header is gone or
/// different (released, reused, damaged); a free one holds a committed unit its lane
/// did not reach (pass 4 would report it); a new segment is not the next of
/// its lane's chain, or starts at another sequence; a truncate unit (retention: a
/// recovery would forget entries); a name first used on a lane below the newest name's
/// (a recovery would order the names differently); any error (corruption, a duplicate,
/// an index out of room); or, once done, a walked segment's header changed meanwhile
/// (a writer reusing it). Cost: the segment headers and the new units, whatever the
/// number of objects already indexed.
pub(crate) fn catch_up<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    lanes: &mut [Lane],
    stats: PoolStats,
) -> Result<PoolStats> {
    let count = sb.segment_count as usize;
    let now: Superblock = format::read_pod(media, 0);
    if now != *sb {
        return Err(UNSURE);
    }
    // Every header against the slots the last walk left (in index order).
    let mut claims = [SegSlot::free(0); CLAIMS_MAX];
    let mut new = 0usize;
    let segs = index.segments(count)?;
    let mut i = 0usize;
    while let Some(view) = segs.get(i).copied() {
        let h = format::decode_segment(media, sb, i as u32);
        if view.lane != FREE {
            if view.is_covered() || !h.is_some_and(|h| same_header(&view, &h)) {
                return Err(UNSURE);
            }
            i += view.span as usize;
            continue;
        }
        let Some(h) = h else {
            // Pass 4 would read its first unit: one committed that its lane's walk did
            // not reach (damage, or a claim and release since) is for a recovery to judge.
            let (start, end) = (sb.segment_off(i as u32) + LINE, sb.data_off + count as u64 * sb.segment_len);
            let next = |l: u32| lanes.get(l as usize).map_or(0, |x| x.next_seq);
            if format::decode_unit_anywhere(media, sb, start, end, |l, seq| seq >= next(l)).is_some() {
                return Err(UNSURE);
            }
            i += 1;
            continue;
        };
        // A claim since: its span over segments free until now, at positions pass 2 takes.
        let span = h.span as usize; // decode: 1 ..= count - i
        let covers_free = segs.get(i..i + span).is_some_and(|v| v.iter().all(|g| g.lane == FREE));
        if !covers_free || h.chain_seq >= POSITION_LIMIT || h.first_seq >= POSITION_LIMIT {
            return Err(UNSURE);
        }
        let slot = claims.get_mut(new).ok_or(UNSURE)?;
        *slot = SegSlot {
            chain_seq: h.chain_seq,
            first_seq: h.first_seq,
            lane: h.lane,
            index: i as u32,
            span: span as u32,
            head: i as u32,
        };
        new += 1;
        i += span;
    }
    let claims = claims.get(..new).unwrap_or(&[]);
    for c in claims {
        for (k, g) in segs.iter_mut().enumerate().skip(c.index as usize).take(c.span as usize) {
            *g = SegSlot { index: k as u32, span: if k == c.index as usize { c.span } else { 0 }, ..*c };
        }
    }
    // The lane of the newest name's first use (names are in the order recovery met them).
    let names = index.name_count();
    let newest = match names.checked_sub(1) {
        Some(last) => lane_at(sb, index, index.name(last as u32).name_off).ok_or(UNSURE)?,
        None => 0,
    };
    let mut walk =
        Walk { stats, name_buf: [0; NAME_MAX], truncate_seen: None, name_order: Some(newest), names: NameCache::new() };
    // Each lane from its tail, then into the segments it chained since, as pass 3 does.
    let mut tails = [NONE; LANES_MAX as usize];
    let mut followed = 0usize;
    for (lane_id, (l, tail)) in lanes.iter_mut().zip(tails.iter_mut()).enumerate().take(sb.lanes_max as usize) {
        let lane_id = lane_id as u32;
        if l.active {
            let head = (l.seg_start.checked_sub(sb.data_off).ok_or(UNSURE)? / sb.segment_len) as usize;
            let s = index.segments_ref().get(head).copied().ok_or(UNSURE)?;
            if s.lane != lane_id || s.chain_seq != l.chain_seq || s.is_covered() || s.first_seq == RELEASED {
                return Err(UNSURE);
            }
            *tail = head as u32;
            let more = claims.iter().any(|c| c.lane == lane_id && c.chain_seq == l.chain_seq + 1);
            walk_segment(media, sb, index, &s, more, l.tail, l, &mut walk)?;
        }
        followed += follow_claims(media, sb, index, lane_id, l, claims, &mut walk)?;
    }
    if followed != claims.len() || walk.truncate_seen.is_some() && !mutant::on(Mutant::CatchUpPastTruncate) {
        return Err(UNSURE);
    }
    // Like a get's re-check: the segments walked still hold the headers they had (a
    // segment is rewritten only after its header changed), so what was read held.
    crate::sync::fence_acquire();
    let segs = index.segments_ref();
    let walked = tails.iter().filter(|&&t| t != NONE).chain(claims.iter().map(|c| &c.index));
    for &k in walked {
        let view = segs.get(k as usize).ok_or(UNSURE)?;
        if !format::decode_segment(media, sb, k).is_some_and(|h| same_header(view, &h)) {
            return Err(UNSURE);
        }
    }
    Ok(walk.stats)
}

/// A writer process's catch-up ([`crate::Pool::refresh`] of a pool opened for some lanes,
/// run under the claim lock): the other processes' lanes, each from its tail (segment,
/// offset, next sequence) on, into the segments it chained since — the state a recovery
/// would give them now — or `Err` when that cannot be made sure of (the caller recovers
/// instead). This pool's own lanes are left alone: its own puts keep them, and their
/// entries, up to date. Writes nothing to the media.
///
/// Under the claim lock no segment header changes (claims and releases take it), so one
/// pass re-reads every header the own lanes do not hold (`segments::rescan`) and that is
/// the state to walk; units the others append meanwhile are, as to recovery, units not
/// yet committed. Another process releases its segments only after committing a truncate
/// unit on that lane, and a walk that meets one gives up (recovery forgets what it
/// released) — so a segment walked earlier is still the lane's unless a truncate unit
/// was walked since. It gives up too when the superblock changed, a lane's tail segment
/// no longer holds its header, a new segment does not continue its lane's chain or
/// starts at another sequence, a segment of another lane is ahead of its lane's chain
/// and not followed, or anything the walk reads is an error (corruption, a duplicate, an
/// index out of room). Names keep the order they were learned in (a writer's own puts
/// already order them by time, not as recovery would). Cost: the segment headers and
/// the new units, whatever the number of objects already indexed.
pub(crate) fn catch_up_others<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    lanes: &mut [Lane],
    stats: PoolStats,
    owned: &LaneSet,
) -> Result<PoolStats> {
    let count = sb.segment_count as usize;
    let now: Superblock = format::read_pod(media, 0);
    if now != *sb {
        return Err(UNSURE);
    }
    let segs = index.segments(count)?;
    segments::rescan(media, sb, segs, owned);
    // The others' segments ahead of what their lanes' walks reached: to follow.
    let mut claims = [SegSlot::free(0); CLAIMS_MAX];
    let mut new = 0usize;
    for g in segs.iter().filter(|g| g.lane != FREE && !owned.has(g.lane) && !g.is_covered()) {
        let l = lanes.get(g.lane as usize).ok_or(UNSURE)?;
        if !l.active || g.chain_seq > l.chain_seq {
            *claims.get_mut(new).ok_or(UNSURE)? = *g;
            new += 1;
        }
    }
    let claims = claims.get(..new).unwrap_or(&[]);
    let mut walk =
        Walk { stats, name_buf: [0; NAME_MAX], truncate_seen: None, name_order: None, names: NameCache::new() };
    let mut followed = 0usize;
    for (lane_id, l) in lanes.iter_mut().enumerate().take(sb.lanes_max as usize) {
        let lane_id = lane_id as u32;
        if owned.has(lane_id) || (!l.active && !claims.iter().any(|c| c.lane == lane_id)) {
            continue;
        }
        if l.active {
            let head = (l.seg_start.checked_sub(sb.data_off).ok_or(UNSURE)? / sb.segment_len) as usize;
            let s = index.segments_ref().get(..count).and_then(|s| s.get(head)).copied().ok_or(UNSURE)?;
            if s.lane != lane_id || s.chain_seq != l.chain_seq || s.is_covered() || s.first_seq == RELEASED {
                return Err(UNSURE);
            }
            if !mutant::on(Mutant::OthersTailSkipped) {
                let more = claims.iter().any(|c| c.lane == lane_id && c.chain_seq == l.chain_seq + 1);
                walk_segment(media, sb, index, &s, more, l.tail, l, &mut walk)?;
            }
        }
        followed += follow_claims(media, sb, index, lane_id, l, claims, &mut walk)?;
    }
    if followed != claims.len() || walk.truncate_seen.is_some() && !mutant::on(Mutant::CatchUpPastTruncate) {
        return Err(UNSURE);
    }
    Ok(walk.stats)
}

/// A catch-up's walk of lane `lane_id` (state `l`) into the segments its writer chained
/// since (`claims`: new heads, of any lane), as pass 3 does: each the next position of
/// the lane's chain, starting at its next sequence (a new lane at position 0). Returns
/// how many it followed.
fn follow_claims<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    lane_id: u32,
    l: &mut Lane,
    claims: &[SegSlot],
    walk: &mut Walk,
) -> Result<usize> {
    let mut followed = 0;
    loop {
        let chain = if l.active { l.chain_seq + 1 } else { 0 };
        let Some(c) = claims.iter().find(|c| c.lane == lane_id && c.chain_seq == chain) else { break };
        if !l.active {
            walk.stats.lanes += 1;
            *l = Lane { next_seq: c.first_seq, ..Lane::default() };
        }
        if c.first_seq != l.next_seq {
            return Err(UNSURE);
        }
        walk.stats.segments_used += c.span;
        followed += 1;
        let more = claims.iter().any(|n| n.lane == lane_id && n.chain_seq == c.chain_seq + 1);
        walk_segment(media, sb, index, c, more, sb.segment_off(c.index) + LINE, l, walk)?;
    }
    Ok(followed)
}

/// Whether segment header `h` is the one slot `view` (a head) was read from: lane, chain
/// position and span, and the first sequence unless retention released it.
pub(crate) fn same_header(view: &SegSlot, h: &SegmentHeader) -> bool {
    h.lane == view.lane
        && h.chain_seq == view.chain_seq
        && h.span == view.span as u64
        && (view.first_seq == RELEASED || h.first_seq == view.first_seq)
}

/// The lane owning the segment that holds media offset `off`, if one does (the slots in
/// index order, as a catch-up keeps them).
fn lane_at<X: IndexMemory>(sb: &Superblock, index: &Index<X>, off: u64) -> Option<u32> {
    let seg = off.checked_sub(sb.data_off)? / sb.segment_len;
    index.segments_ref().get(usize::try_from(seg).ok()?).map(|s| s.lane).filter(|&l| l != FREE)
}

/// What a walk of lanes carries from unit to unit.
struct Walk {
    stats: PoolStats,
    name_buf: [u8; NAME_MAX],
    /// The largest base of the truncate units walked (`None`: none walked).
    truncate_seen: Option<u64>,
    /// Only for a catch-up ([`catch_up`]): the lane of the newest name's first use. A
    /// walk that would give names an order a full recovery would not give fails.
    name_order: Option<u32>,
    /// The names met so far, by a cheap key (skips hashing and probing for them).
    names: NameCache,
}

/// Pass 3's walk of one segment `s` of lane `s.lane` (its head slot): from `off` (its
/// data start, or where an earlier walk stopped in it), expecting unit `lane.next_seq`,
/// index every committed unit up to the first slot that is not, and leave in `lane` the
/// lane's state after it. Recovery walks every segment of a chain from its data start;
/// a catch-up walks on from where the last walk stopped — this one code path.
/// `more_segments`: the lane's chain goes on after `s` (a sealed pool's newest unit is
/// not in `s`).
#[allow(clippy::too_many_arguments)]
fn walk_segment<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    s: &SegSlot,
    more_segments: bool,
    mut off: u64,
    lane: &mut Lane,
    walk: &mut Walk,
) -> Result<()> {
    let lane_id = s.lane;
    let seg_off = sb.segment_off(s.index);
    let seg_end = seg_off + s.span as u64 * sb.segment_len;
    let mut next_seq = lane.next_seq;
    let (mut closed, mut detached) = (lane.closed, lane.detached);
    // A sealed pool's next unit, when it was read to tell whether this one is the newest.
    let mut peeked = None;
    for _ in 0..seg_end.saturating_sub(off) / LINE {
        let slot = match peeked.take() {
            Some(h) => UnitSlot::Committed(h),
            None => match format::decode_unit(media, sb, lane_id, next_seq, off, seg_end) {
                Err(_) if format::sealed_torn_header(media, sb, lane_id, next_seq, off, seg_end, more_segments) => {
                    break;
                }
                r => r?,
            },
        };
        let h = match slot {
            UnitSlot::End if format::committed_after_end(media, sb, lane_id, next_seq, off, seg_end).is_some() => {
                return Err(Error::Corrupted { offset: off, kind: CorruptKind::SequenceGap });
            }
            UnitSlot::End => break,
            UnitSlot::Committed(h) => h,
        };
        let unit_end = off + h.unit_len;
        // A sealed unit is the lane's newest unless the next one is committed or the lane
        // goes on in a later segment (each unit is stored after the one before it was
        // fenced): only the newest can be torn, and it counts only if it verifies whole.
        if sb.one_fence() && !more_segments {
            // (The next unit's commit word alone, even in a header that then fails its
            // checks, means its stores began: this one was fenced before them.)
            match format::decode_unit(media, sb, lane_id, next_seq + 1, unit_end, seg_end) {
                Ok(UnitSlot::Committed(next)) => peeked = Some(next),
                Err(_) => {}
                Ok(UnitSlot::End) if format::sealed_newest_torn(media, sb, lane_id, next_seq, off, &h, seg_end) => {
                    break
                }
                Ok(UnitSlot::End) => {}
            }
        }
        // The unit after the next one, if it is as long as this one (a stream of
        // same-size puts): its header and first object header are asked for now, so
        // that they arrive while this unit and the next are indexed. A hint: it reads
        // nothing into the walk and stores nothing.
        media.prefetch((unit_end + 3 * h.unit_len) as usize, 2 * LINE as usize);
        index_objects(media, sb, index, lane_id, next_seq, off + LINE, &h, walk)?;
        walk.stats.units += 1;
        next_seq += 1;
        off = unit_end;
        if h.flags == format::UNIT_TRUNCATE {
            walk.truncate_seen = Some(walk.truncate_seen.unwrap_or(0).max(h.base));
            if mutant::on(Mutant::TruncateReopens) {
                (closed, detached) = (false, false);
            }
        } else if h.flags == format::UNIT_DETACH && mutant::on(Mutant::DetachReadAsClose) {
            (closed, detached) = (true, false);
        } else {
            closed = h.flags == format::UNIT_END_OF_STREAM;
            detached = h.flags == format::UNIT_DETACH;
        }
    }
    *lane = Lane {
        active: true,
        chain_seq: s.chain_seq,
        seg_start: seg_off,
        tail: off,
        seg_end,
        next_seq,
        closed,
        detached,
    };
    if mutant::on(Mutant::ResumeAtSegmentStart) {
        lane.tail = seg_off + LINE;
    }
    if mutant::on(Mutant::SeqRestartsAfterOpen) {
        lane.next_seq = 0;
    }
    if mutant::on(Mutant::RecoveryWrites) && off + 8 <= seg_end {
        media.store_word_nt(off as usize, 0);
    }
    Ok(())
}

/// Pass 1: every segment header, in index order, into `segs`. A span's header owns the
/// segments after it: their first lines are unit bytes, never read as headers.
fn read_segment_headers<M: Media + ?Sized>(media: &M, sb: &Superblock, segs: &mut [SegSlot]) {
    let count = segs.len();
    let mut i = 0usize;
    while i < count {
        let Some(h) = format::decode_segment(media, sb, i as u32) else {
            if let Some(slot) = segs.get_mut(i) {
                *slot = SegSlot::free(i as u32);
            }
            i += 1;
            continue;
        };
        let (head, span) = (i as u32, h.span as usize); // decode: 1 ..= count - i
        for (k, slot) in segs.iter_mut().enumerate().skip(i).take(span) {
            let covered = if k == i { span as u32 } else { 0 };
            *slot = SegSlot {
                chain_seq: h.chain_seq,
                first_seq: h.first_seq,
                lane: h.lane,
                index: k as u32,
                span: covered,
                head,
            };
        }
        i += span;
    }
}

/// Pass 2: sort `segs` into chains — runs of (lane, chain_seq), a span's covered slots
/// right after its head, free segments last — and check each chain has no gap. Returns
/// the segments and lanes in use.
fn check_chains(sb: &Superblock, segs: &mut [SegSlot]) -> Result<PoolStats> {
    segs.sort_unstable_by_key(|s| (s.lane, s.chain_seq, s.is_covered()));
    let mut stats = PoolStats::default();
    let mut expected_chain = 0u64;
    let mut prev_lane = FREE;
    for s in segs.iter() {
        if s.lane == FREE {
            break;
        }
        if s.is_covered() {
            stats.segments_used += 1;
            continue;
        }
        // No writer gets near 2^63 segments or units; a header claiming so is crafted or
        // damaged, and would make the chain and sequence arithmetic below overflow.
        if s.chain_seq >= POSITION_LIMIT || s.first_seq >= POSITION_LIMIT {
            return Err(Error::Corrupted { offset: sb.segment_off(s.index), kind: CorruptKind::SegmentChain });
        }
        if s.lane != prev_lane {
            // A chain may start above 0 once retention released its head; pass 3
            // checks that a truncate unit of the lane says so.
            expected_chain = s.chain_seq;
            prev_lane = s.lane;
            stats.lanes += 1;
        }
        if s.chain_seq != expected_chain {
            return Err(Error::Corrupted { offset: sb.segment_off(s.index), kind: CorruptKind::SegmentChain });
        }
        expected_chain += 1;
        stats.segments_used += 1;
    }
    Ok(stats)
}

/// Pass 3's work per committed unit: decode its objects (from `obj` on, `h.object_count`
/// of them) and index each as committed by unit `seq` of `lane_id`.
#[allow(clippy::too_many_arguments)]
#[inline]
fn index_objects<M: Media + ?Sized, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &mut Index<X>,
    lane_id: u32,
    seq: u64,
    mut obj: u64,
    h: &format::UnitHeader,
    walk: &mut Walk,
) -> Result<()> {
    let unit_end = obj - LINE + h.unit_len;
    let Walk { name_buf, stats, name_order, names, .. } = walk;
    let space = sb.name_space(lane_id);
    for _ in 0..h.object_count {
        let d = format::decode_object(media, sb, obj, unit_end, name_buf)?;
        let name = name_buf.get(..d.header.name_len as usize).unwrap_or(&[]);
        let (found, hash) = index.find_name_cached(names, media, name, space);
        if let Some(newest) = name_order {
            // Recovery makes names in the order it first meets them, lane by lane: a
            // catch-up gives the same order only if this object neither makes a name
            // that belongs before the newest one nor moves an older name's first use.
            let first_use = match found {
                Some(id) => lane_at(sb, index, index.name(id).name_off),
                None => Some(core::mem::replace(newest, lane_id)),
            };
            if first_use.is_none_or(|l| l > lane_id) {
                return Err(UNSURE);
            }
        }
        let entry = Entry {
            version: d.header.version,
            payload_off: d.payload_off,
            len_bytes: if d.header.depth == 0 { d.header.payload_len } else { d.header.object_len },
            stored_bytes: d.header.payload_len,
            seq,
            name: 0,
            next: NONE,
            lane: lane_id,
            depth: d.header.depth,
            meta_len: if mutant::on(Mutant::MetaLenDropped) { 0 } else { d.header.meta_len },
            payload_sum: d.header.payload_sum,
        };
        // A known name: `insert` would find it and append; a new one: `insert` makes it.
        let inserted = match found {
            Some(id) => index.append(id, entry),
            None => index.insert(media, hash, name, d.name_off, entry).inspect(|&e| {
                Index::<X>::remember_name(names, name, space, index.entry(e).name);
            }),
        };
        match inserted {
            Ok(_) => {}
            Err(InsertError::Full(what)) => return Err(index.full(Full(what))),
            Err(InsertError::Duplicate) => {
                return Err(Error::Corrupted { offset: obj, kind: CorruptKind::DuplicateVersion })
            }
        }
        stats.objects += 1;
        stats.payload_bytes += d.header.payload_len;
        obj = d.end;
    }
    Ok(())
}

/// Pass 4 (R3c): a segment recovery found free must not hold a committed unit of a lane
/// at or past that lane's next seq (0 for a lane with no segment). Ownership is proven
/// twice, by the segment header and by the self-validating units in the segment; when
/// the header is damaged (any number of its bytes, or its whole line zeroed) and the
/// segment was its lane's last, or only, one, nothing else notices (a lost middle or
/// head segment is R4), and the lane would silently hand out the lost units' sequence
/// numbers and versions again.
///
/// Every free segment is looked into, and only the unit at its data start: a lane's
/// first unit in a segment is always there, and it lies in the page of the header pass 1
/// read. Its commit word is read first, so fresh space costs one word. No legitimate
/// state trips this, since a unit commits only after its segment header was fenced
/// (DESIGN.md, put step 2), so a free segment holding a committed unit had a valid header
/// that was then zeroed or never was this pool's:
/// - released by retention: its header is zeroed only after the lane's truncate unit
///   committed in a later segment, so its units' seqs are below the lane's next;
/// - reused by another lane and released again: the same, for that lane;
/// - a torn claim, or a claim whose unit never committed: the unit's commit word was not
///   stored (it follows the fence that makes the header durable), so the slot holds the
///   new unit uncommitted, or the segment's older units (released: lower seqs);
/// - an earlier pool's bytes: another pool id, so neither checksum nor commit word match;
/// - a unit half-overwritten by a later one: its words no longer hash to its commit word.
///
/// A reader beside writer processes can see a segment free in pass 1 and its first unit
/// committed here: its header is valid by then, so it is read again before the verdict.
fn lost_segment<M: Media + ?Sized>(media: &M, sb: &Superblock, segs: &[SegSlot], lanes: &[Lane]) -> Result<()> {
    if mutant::on(Mutant::FreeSegmentsUnchecked) {
        return Ok(());
    }
    let next = |lane: u32| lanes.get(lane as usize).map_or(0, |l| l.next_seq);
    for s in segs.iter().filter(|s| s.lane == FREE) {
        let seg_off = sb.segment_off(s.index);
        let start = seg_off + LINE;
        // The segment may have been a span's head: its unit may run to the pool's end.
        let end = sb.data_off + sb.segment_count as u64 * sb.segment_len;
        if format::decode_unit_anywhere(media, sb, start, end, |l, seq| seq >= next(l)).is_some()
            && format::decode_segment(media, sb, s.index).is_none()
        {
            return Err(Error::Corrupted { offset: seg_off, kind: CorruptKind::LostSegment });
        }
    }
    Ok(())
}

/// Chain and sequence positions at or above this are corruption (see pass 2).
const POSITION_LIMIT: u64 = 1 << 63;

/// The retention base of the lane whose segments start at `segs[start]` (sorted by
/// lane, chain): the largest `base` of its truncate units, `None` if it has none.
/// Walks unit headers only, with recovery's checks.
fn truncate_base<M: Media + ?Sized>(media: &M, sb: &Superblock, segs: &[SegSlot], start: usize) -> Result<Option<u64>> {
    let Some(first) = segs.get(start) else { return Ok(None) };
    let (lane_id, mut base) = (first.lane, None);
    let mut next_seq = first.first_seq;
    let heads =
        || segs.get(start..).unwrap_or(&[]).iter().take_while(|s| s.lane == lane_id).filter(|s| !s.is_covered());
    let last = heads().count();
    for (k, s) in heads().enumerate() {
        let seg_off = sb.segment_off(s.index);
        if s.first_seq != next_seq {
            return Err(Error::Corrupted { offset: seg_off, kind: CorruptKind::SequenceGap });
        }
        let (mut off, seg_end) = (seg_off + LINE, seg_off + s.span as u64 * sb.segment_len);
        let more_segments = k + 1 < last;
        for _ in 0..(seg_end - seg_off) / LINE {
            let h = match format::decode_unit(media, sb, lane_id, next_seq, off, seg_end) {
                // A sealed pool's newest unit, its header torn by a crash (as pass 3 reads it).
                Err(_) if format::sealed_torn_header(media, sb, lane_id, next_seq, off, seg_end, more_segments) => {
                    break;
                }
                r => match r? {
                    UnitSlot::End => break,
                    UnitSlot::Committed(h) => h,
                },
            };
            if h.flags == format::UNIT_TRUNCATE {
                // A truncate unit never releases its own segment.
                if h.base > s.chain_seq {
                    return Err(Error::Corrupted { offset: off, kind: CorruptKind::HeaderBounds });
                }
                base = Some(base.unwrap_or(0).max(h.base));
            }
            next_seq += 1;
            off += h.unit_len;
        }
    }
    Ok(base)
}
