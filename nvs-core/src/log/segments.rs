//! Segment ownership, all of it: what the per-segment slots the index keeps mean
//! (`SegSlot`, `FREE`, `RELEASED`), claiming a free segment for a lane, and invalidating
//! the segments retention released. (Recovery
//! reads ownership back from the segment headers; retention decides what to release.)

use super::lane::Lane;
use super::LaneSet;
use crate::error::{Error, Result};
use crate::format::{self, SegmentHeader, Superblock, LINE, SEGMENT_MAGIC};
pub use crate::index::SegSlot;
use crate::media::Media;
use crate::mutant::{self, Mutant};
use core::mem::size_of;

/// `SegSlot::lane` of a free segment.
pub const FREE: u32 = u32::MAX;

/// `SegSlot::first_seq` of a segment that retention released but whose header is still
/// valid on the media (a writer invalidates it before the segment is reused).
pub const RELEASED: u64 = u64::MAX;

/// The first of `span` consecutive free slots of `segs` (in index order): the first
/// run from `cursor` on, else the first from the start (a run never wraps).
fn find_free(segs: &[SegSlot], cursor: u32, span: u32) -> Result<u32> {
    let count = segs.len() as u32;
    let free = |i: u32| segs[i as usize].lane == FREE;
    if span == 1 {
        return (0..count).map(|k| (cursor + k) % count).find(|&i| free(i)).ok_or(Error::Full);
    }
    let run_in = |from: u32| {
        let mut run = 0u32;
        (from..count).find(|&i| {
            run = if free(i) { run + 1 } else { 0 };
            run == span
        })
    };
    if let Some(end) = run_in(cursor).or_else(|| run_in(0)) {
        return Ok(end + 1 - span);
    }
    let free_count = segs.iter().filter(|g| g.lane == FREE).count() as u32;
    Err(if free_count < span { Error::Full } else { Error::Fragmented { needed: span, free: free_count } })
}

/// Claim `span` consecutive free segments of `segs` (the pool's slots, in index order),
/// searching from `cursor`, as the next in `lane`'s chain after `old`: one header, at
/// the first, owns them all (1 for a plain segment). The header is stored and fenced
/// before the caller stores anything in the segment.
pub(crate) fn claim<M: Media>(
    media: &M,
    sb: &Superblock,
    segs: &mut [SegSlot],
    cursor: &mut u32,
    lane: u32,
    old: Lane,
    span: u32,
) -> Result<Lane> {
    let count = sb.segment_count;
    let free = match mutant::on(Mutant::AllocIgnoresOwner) {
        true if *cursor + span <= count => *cursor,
        _ => find_free(segs, *cursor, span)?,
    };
    let (chain_seq, mut first_seq) = if old.active { (old.chain_seq + 1, old.next_seq) } else { (0, 0) };
    if mutant::on(Mutant::FirstSeqOffByOne) && old.active {
        first_seq += 1;
    }
    let mut h = SegmentHeader {
        magic: SEGMENT_MAGIC,
        pool_id: sb.pool_id,
        lane,
        flags: 0,
        chain_seq,
        first_seq,
        span: match sb.spans() {
            true if mutant::on(Mutant::SpanHeaderOfOne) => 1,
            true => span as u64,
            false => 0,
        },
        reserved: 0,
        checksum: 0,
    };
    h.checksum = h.compute_checksum();
    let seg_off = sb.segment_off(free);
    // Room first (a pool file that gets its blocks as it fills): a file system with no
    // space left refuses the claim here, before any store.
    media.reserve(seg_off as usize, span as usize * sb.segment_len as usize)?;
    // A header that is not all zero (a claim torn by a crash, a torn invalidation, an
    // earlier pool's, garbage) is zeroed and fenced first. Its words may agree with
    // the new header's (same magic, pool id, lane): if a crash then persisted only
    // those, the old words would make a whole, valid header again — an old claim
    // reborn, with the wrong chain or first sequence.
    const ZERO: [u8; size_of::<SegmentHeader>()] = [0; size_of::<SegmentHeader>()];
    // The segments a span covers are zeroed too, without looking: their first lines
    // become unit bytes, but until the unit is written an old header there must not
    // complete. (Reading them first would save a fence per span, and cost the crash
    // checker a branch per word a crashed unit left undecided there.)
    let mut zeroed = false;
    for k in free..free + span {
        let off = sb.segment_off(k) as usize;
        let stale = k > free || {
            let mut old_header = ZERO;
            media.read(off, &mut old_header);
            old_header != ZERO
        };
        if stale && !mutant::on(Mutant::TornClaimKept) {
            media.store_nt(off, &ZERO);
            zeroed = true;
        }
    }
    if zeroed {
        media.fence();
    }
    // Fenced before the caller's unit stores anything in the segment: a crash can then
    // leave the header torn only over what the segment held before (zeros, or a released
    // segment's old units), never over bytes of the new unit. Recovery reads the unit at
    // the data start of every segment it finds free (a committed one there means a lost
    // header), so a torn header over a span's payload could show it user bytes as a
    // unit, and over a half-stored first unit would make the crash checker branch on
    // every word of it. One fence per segment claimed.
    if mutant::on(Mutant::SegmentHeaderUnfenced) {
        media.store(seg_off as usize, bytemuck::bytes_of(&h)); // cached, never flushed
    } else {
        media.store_nt(seg_off as usize, bytemuck::bytes_of(&h));
    }
    if !mutant::on(Mutant::ClaimUnfenced) {
        media.fence();
    }
    for k in free..free + span {
        let covered = if k == free { span } else { 0 };
        segs[k as usize] = SegSlot { chain_seq, first_seq, lane, index: k, span: covered, head: free };
    }
    *cursor = (free + span) % count;
    Ok(Lane {
        active: true,
        chain_seq,
        seg_start: seg_off,
        tail: seg_off + LINE,
        seg_end: seg_off + span as u64 * sb.segment_len,
        next_seq: old.next_seq,
        closed: false,
        detached: false,
    })
}

/// Before a claim beside writers in other processes (under the claim lock): the slots of
/// every segment `owned` lanes do not hold, as the headers say now — another process's
/// claims (a valid header of another lane, and the segments its span covers) are taken,
/// and what another process released (no valid header) is free. The slots of this
/// pool's own lanes are its own to keep (its index knows them better than any header:
/// released but still valid ones, for one). Segments a span of this pool covers are
/// skipped: their first lines are unit bytes.
pub(crate) fn rescan<M: Media + ?Sized>(media: &M, sb: &Superblock, segs: &mut [SegSlot], owned: &LaneSet) {
    let count = sb.segment_count.min(segs.len() as u32);
    let mut i = 0;
    while i < count {
        let slot = segs[i as usize];
        if slot.lane != FREE && owned.has(slot.lane) {
            // Ours: a head skips what it covers (a covered slot is skipped with its head).
            i += slot.span.max(1);
            continue;
        }
        match format::decode_segment(media, sb, i) {
            Some(h) if !owned.has(h.lane) => {
                let span = if sb.spans() { (h.span as u32).max(1) } else { 1 };
                let span = span.min(count - i);
                for k in i..i + span {
                    let covered = if k == i { span } else { 0 };
                    segs[k as usize] = SegSlot {
                        chain_seq: h.chain_seq,
                        first_seq: h.first_seq,
                        lane: h.lane,
                        index: k,
                        span: covered,
                        head: i,
                    };
                }
                i += span;
            }
            // A header of one of our lanes that our index does not place: leave it as
            // recovery left it.
            Some(_) => i += 1,
            None => {
                if slot.lane != FREE {
                    segs[i as usize] = SegSlot::free(i);
                }
                i += 1;
            }
        }
    }
}

/// Invalidate the headers of segments retention released (a crash may have left them
/// valid), oldest first per lane, each fenced, so a lane's chain stays contiguous at
/// every step; then they are free. `segs` are the pool's slots in index order.
pub(crate) fn invalidate_released<M: Media>(
    media: &M,
    sb: &Superblock,
    segs: &mut [SegSlot],
    newest_first: bool,
    ours: impl Fn(u32) -> bool,
) {
    let released = |g: &SegSlot| g.lane != FREE && g.first_seq == RELEASED && ours(g.lane);
    if !segs.iter().any(released) {
        return;
    }
    // Released segments first, in (lane, chain) order: one sort, then one pass (not a
    // scan of every segment per released one, quadratic in a large release).
    // The slots go back to index order (allocation needs it) at the end.
    // A span's covered segments before its head: until the head's header is gone, their
    // first lines are inside its span and never read as headers.
    segs.sort_unstable_by_key(|g| {
        let chain = if newest_first { u64::MAX - g.chain_seq } else { g.chain_seq };
        let covered_first = !mutant::on(Mutant::SpanHeadReleasedFirst);
        (!released(g), g.lane, chain, g.is_covered() != covered_first)
    });
    for g in segs.iter_mut().take_while(|g| released(g)) {
        // The whole header, not just its magic: a later claim of this segment rewrites
        // it with NT stores, and a crash that persisted only the new magic word must
        // not leave the old header (old fields, old checksum) valid again.
        // A span's covered segment also loses the line after (its data start, where a
        // segment's first unit header lies): once the segment is free, recovery reads
        // that line as a unit header, and it held the span's payload, user bytes.
        let zeros = if g.is_covered() && !mutant::on(Mutant::CoveredDataStartKept) { 2 * LINE } else { LINE } as usize;
        media.store_nt(sb.segment_off(g.index) as usize, &[0u8; 2 * LINE as usize][..zeros]);
        media.fence();
        *g = SegSlot::free(g.index);
    }
    segs.sort_unstable_by_key(|g| g.index);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(free: &[u32], count: u32) -> heapless::Vec<SegSlot, 16> {
        (0..count)
            .map(|i| if free.contains(&i) { SegSlot::free(i) } else { SegSlot { lane: 0, ..SegSlot::free(i) } })
            .collect()
    }

    #[test]
    fn runs_are_found_wherever_they_are() {
        let s = slots(&[1, 2], 4);
        assert_eq!(find_free(&s, 2, 2), Ok(1), "a run across the cursor");
        assert_eq!(find_free(&s, 0, 2), Ok(1));
        assert_eq!(find_free(&s, 3, 1), Ok(1), "wraps for one segment");
        let s = slots(&[0, 2, 3, 5, 6, 7], 8);
        assert_eq!(find_free(&s, 4, 2), Ok(5), "from the cursor first");
        assert_eq!(find_free(&s, 6, 2), Ok(6));
        assert_eq!(find_free(&s, 7, 2), Ok(2), "then from the start");
        assert_eq!(find_free(&s, 0, 3), Ok(5));
        assert_eq!(find_free(&s, 0, 4), Err(Error::Fragmented { needed: 4, free: 6 }));
        assert_eq!(find_free(&s, 0, 7), Err(Error::Full));
    }
}
