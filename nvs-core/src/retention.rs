//! Retention: which of a lane's oldest segments can go, and releasing them crash-safely
//! ([`Pool::reclaim`]). The segments themselves are invalidated by `log::segments`.

use crate::delta::read::{chain_of, Chain};
use crate::error::{Error, Result};
use crate::format::{Superblock, LANES_MAX, UNIT_TRUNCATE};
use crate::index::{Entry, Index, IndexMemory, NONE};
use crate::log::lane::LaneCell;
use crate::log::seal::UnitKind;
use crate::log::segments::{FREE, RELEASED};
use crate::media::Media;
use crate::mutant::{self, Mutant};
use crate::pool::Pool;
use crate::shared::Own;

/// Per lane, a chain position.
type PerLane = [u64; LANES_MAX as usize];

impl<M: Media, X: IndexMemory> Pool<M, X> {
    /// Retention: on every lane (of a pool opened for some lanes, [`Pool::open_lanes`]:
    /// on its own), release the oldest segments whose objects all have at
    /// least `keep_versions` newer versions of their name and are not the full version
    /// or an earlier delta that a version staying in the pool is rebuilt from — never a
    /// lane's current segment, and only a prefix of each lane's chain. Returns the
    /// segments freed.
    ///
    /// Crash-safe in two steps: a truncate unit (committed like a put) records the lane's
    /// new base; then the released segments' headers are invalidated, oldest first, each
    /// fenced. A crash between them leaves released segments with valid headers, which
    /// recovery skips and the next writer's open invalidates before any is reused. The
    /// index forgets the released objects (a recovery runs at the end).
    ///
    /// # Errors
    /// `ReadOnly`; `Full` if a lane has no room for its truncate unit; `ClaimLockTimeout`;
    /// `Corrupted` if the pool's segments fail their checks (nothing is released then).
    pub fn reclaim(&mut self, keep_versions: u32) -> Result<u32> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        self.shared.get_mut().writes_allowed()?;
        let lanes_max = self.sb.lanes_max as usize;
        let s = self.shared.get_mut();
        let lowest = lowest_held(&mut s.index, &self.sb)?;
        let base = bases(&self.media, &self.sb, &s.index, &mut self.lanes, keep_versions);
        // All or nothing: a lane whose segment has no room for its truncate unit claims a
        // new one, and if the free segments do not cover every such lane, nothing is
        // written (a lane truncated before a later lane found the pool full would leave a
        // refused reclaim half done).
        // Beside writers in other processes, only this pool's own lanes (their truncate
        // units are written on the lane, and only its owner writes a lane).
        let owned = self.owned;
        let releasing = |lane: usize| {
            base[lane] != u64::MAX && base[lane] > lowest[lane] && owned.is_none_or(|o| o.has(lane as u32))
        };
        let claims = (0..lanes_max)
            .filter(|&lane| releasing(lane))
            .filter(|&lane| !self.lanes[lane].get_mut().has_room_for_truncate())
            .count();
        let segs = s.index.segments(self.sb.segment_count as usize)?;
        if claims > segs.iter().filter(|g| g.lane == FREE).count() {
            return Err(Error::Full);
        }
        // Segments, not chain positions: a span is one position and several segments.
        let freed = segs
            .iter()
            .filter(|g| g.lane != FREE && g.first_seq != RELEASED)
            .filter(|g| releasing(g.lane as usize) && g.chain_seq < base[g.lane as usize])
            .count() as u32;
        let (w, lanes, shared) = self.split_mut();
        for lane in (0..lanes_max).filter(|&lane| releasing(lane)) {
            let kind = UnitKind { flags: UNIT_TRUNCATE, base: base[lane] };
            w.marker_unit(&mut Own(shared), lanes[lane].get_mut(), lane as u32, kind)?;
        }
        if freed > 0 {
            // Mark the released segments as recovery would, then invalidate them. A
            // recovery each time, never a catch-up: the truncate units are this pool's
            // own, which a writer process's catch-up leaves to its own puts.
            self.caught_up = false;
            self.refresh()?;
            self.invalidate_released(false)?;
            self.caught_up = false;
            self.refresh()?;
        }
        Ok(freed)
    }
}

/// Per lane, the lowest chain position it still holds (`u64::MAX`: none).
fn lowest_held<X: IndexMemory>(index: &mut Index<X>, sb: &Superblock) -> Result<PerLane> {
    let mut lowest = [u64::MAX; LANES_MAX as usize];
    for seg in index.segments(sb.segment_count as usize)?.iter() {
        if seg.lane == FREE || seg.first_seq == RELEASED {
            continue;
        }
        if let Some(l) = lowest.get_mut(seg.lane as usize) {
            *l = (*l).min(seg.chain_seq);
        }
    }
    Ok(lowest)
}

/// Per lane, the chain position retention keeps from (`u64::MAX`: nothing to keep). A
/// lane's current segment bounds its base; so does every segment holding one of the
/// last `keep_versions` versions of some name, and every ancestor a staying delta is
/// rebuilt from.
fn bases<M: Media, X: IndexMemory>(
    media: &M,
    sb: &Superblock,
    index: &Index<X>,
    lanes: &mut [LaneCell],
    keep_versions: u32,
) -> PerLane {
    let mut base = [u64::MAX; LANES_MAX as usize];
    for (lane, cell) in lanes.iter_mut().enumerate().take(sb.lanes_max as usize) {
        let l = *cell.get_mut();
        if l.active {
            base[lane] = l.chain_seq;
        }
    }
    // The chain position of the segment holding `e`. The byte before the payload is
    // the object's own (its header or name): an empty payload may start exactly at
    // the segment's end.
    let chain_pos = |e: &Entry| {
        let seg = ((e.payload_off - 1 - sb.data_off) / sb.segment_len) as usize;
        index.segments_ref().get(seg).map_or(0, |g| g.chain_seq)
    };
    // Lower `base` so that entry `id` and its ancestors down to its full version
    // stay (as far as its chain is intact); true if it moved.
    let mut chain = Chain::new();
    let mut keep_chain = |base: &mut PerLane, id: u32| {
        let _ = chain_of(media, index, id, &mut chain);
        let links = if mutant::on(Mutant::RetentionDropsDeltaBases) { &chain[..1] } else { &chain[..] };
        let mut moved = false;
        for &link in links {
            let link = index.entry(link);
            let pos = chain_pos(link);
            if let Some(b) = base.get_mut(link.lane as usize).filter(|b| pos < **b) {
                *b = pos;
                moved = true;
            }
        }
        moved
    };
    for id in 0..index.name_count() as u32 {
        let n = *index.name(id);
        let mut at = n.first;
        for i in 0..n.count {
            if at == NONE {
                break;
            }
            if n.count - 1 - i < keep_versions {
                keep_chain(&mut base, at);
            }
            at = index.entry(at).next;
        }
    }
    // Every delta that stays (its segment is at or above its lane's base) keeps its
    // ancestors too, which may keep more deltas: repeat until nothing moves (bases
    // only go down, so this ends).
    let mut moved = true;
    while moved {
        moved = false;
        for i in 0..index.len() as u32 {
            let e = *index.entry(i);
            let stays = base.get(e.lane as usize).is_some_and(|&b| chain_pos(&e) >= b);
            if e.depth > 0 && stays {
                moved |= keep_chain(&mut base, i);
            }
        }
    }
    base
}
