//! Segment ownership, all of it: what the per-segment slots the index keeps mean
//! (`SegSlot`, `FREE`, `RELEASED`), claiming a free segment for a lane, and invalidating
//! the segments retention released. (Recovery
//! reads ownership back from the segment headers; retention decides what to release.)

use super::lane::Lane;
use crate::error::{Error, Result};
use crate::format::{SegmentHeader, Superblock, LINE, SEGMENT_MAGIC};
pub use crate::index::SegSlot;
use crate::media::Media;
use crate::mutant::{self, Mutant};
use core::mem::size_of;

/// `SegSlot::lane` of a free segment.
pub const FREE: u32 = u32::MAX;

/// `SegSlot::chain_seq` of a free segment (as recovery leaves it) whose header was once
/// stored whole ([`crate::format::segment_once_whole`]): recovery's pass 4 looks into it
/// for lost committed units. Any other free segment has 0 there.
pub const ONCE_WHOLE: u64 = 1;

/// `SegSlot::first_seq` of a segment that retention released but whose header is still
/// valid on the media (a writer invalidates it before the segment is reused).
pub const RELEASED: u64 = u64::MAX;

/// Claim a free segment of `segs` (the pool's slots, in index order), searching from
/// `cursor`, as the next in `lane`'s chain after `old`. Its header is stored but not
/// fenced: the caller's unit, written next by this thread, fences it with its own
/// stores, before its commit word.
pub(crate) fn claim<M: Media>(
    media: &M,
    sb: &Superblock,
    segs: &mut [SegSlot],
    cursor: &mut u32,
    lane: u32,
    old: Lane,
) -> Result<Lane> {
    let count = sb.segment_count;
    let free = if mutant::on(Mutant::AllocIgnoresOwner) {
        *cursor
    } else {
        (0..count).map(|k| (*cursor + k) % count).find(|&i| segs[i as usize].lane == FREE).ok_or(Error::Full)?
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
        reserved: [0; 2],
        checksum: 0,
    };
    h.checksum = h.compute_checksum();
    let seg_off = sb.segment_off(free);
    // A header that is not all zero (a claim torn by a crash, a torn invalidation, an
    // earlier pool's, garbage) is zeroed and fenced first. Its words may agree with
    // the new header's (same magic, pool id, lane): if a crash then persisted only
    // those, the old words would make a whole, valid header again — an old claim
    // reborn, with the wrong chain or first sequence.
    const ZERO: [u8; size_of::<SegmentHeader>()] = [0; size_of::<SegmentHeader>()];
    let mut old_header = ZERO;
    media.read(seg_off as usize, &mut old_header);
    if old_header != ZERO && !mutant::on(Mutant::TornClaimKept) {
        media.store_nt(seg_off as usize, &ZERO);
        media.fence();
    }
    // No fence of its own: the claim is made only while planning a unit, as its last
    // step, and the unit's first fence (before its commit word, by this same thread)
    // makes the header durable before anything in the segment can count.
    if mutant::on(Mutant::SegmentHeaderUnfenced) {
        media.store(seg_off as usize, bytemuck::bytes_of(&h)); // cached, never flushed
    } else {
        media.store_nt(seg_off as usize, bytemuck::bytes_of(&h));
    }
    segs[free as usize] = SegSlot { chain_seq, first_seq, lane, index: free };
    *cursor = (free + 1) % count;
    Ok(Lane {
        active: true,
        chain_seq,
        tail: seg_off + LINE,
        seg_end: seg_off + sb.segment_len,
        next_seq: old.next_seq,
        closed: false,
    })
}

/// Invalidate the headers of segments retention released (a crash may have left them
/// valid), oldest first per lane, each fenced, so a lane's chain stays contiguous at
/// every step; then they are free. `segs` are the pool's slots in index order.
pub(crate) fn invalidate_released<M: Media>(media: &M, sb: &Superblock, segs: &mut [SegSlot], newest_first: bool) {
    let released = |g: &SegSlot| g.lane != FREE && g.first_seq == RELEASED;
    if !segs.iter().any(released) {
        return;
    }
    // Released segments first, in (lane, chain) order: one sort, then one pass (it
    // was a scan of every segment per released one: minutes for a large release).
    // The slots go back to index order (allocation needs it) at the end.
    segs.sort_unstable_by_key(|g| {
        let chain = if newest_first { u64::MAX - g.chain_seq } else { g.chain_seq };
        (!released(g), g.lane, chain)
    });
    for g in segs.iter_mut().take_while(|g| released(g)) {
        // The whole header, not just its magic: a later claim of this segment rewrites
        // it with NT stores, and a crash that persisted only the new magic word must
        // not leave the old header (old fields, old checksum) valid again.
        media.store_nt(sb.segment_off(g.index) as usize, &[0u8; 64]);
        media.fence();
        g.lane = FREE;
        g.first_seq = 0;
    }
    segs.sort_unstable_by_key(|g| g.index);
}
