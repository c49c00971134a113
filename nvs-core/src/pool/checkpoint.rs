//! Index checkpoints: a pool's recovered state (index, lanes, counts) as bytes, kept
//! beside the pool by the caller, so that a later read-only open costs the checkpoint's
//! bytes and a catch-up instead of a walk of every unit.
//!
//! A checkpoint is a cache, never the truth. A read-only open from one
//! ([`Pool::open_read_only_from_checkpoint`]) first checks that it is whole (its sum),
//! for this pool (the superblock, byte for byte) and sound (every lane a line inside its
//! segment, every name and payload inside the pool, every name id known, no two names of
//! one key, no version twice); it then rebuilds the index from the recorded names and
//! entries with the index's own inserts (links and table are never read from the bytes)
//! and runs the catch-up a live reader's refresh runs ([`Pool::refresh`]): every segment
//! header against the recorded view, each lane walked on from its recorded tail. Where
//! the catch-up cannot be sure to give what a recovery would (retention released
//! something, a segment was reused, anything damaged or odd), a recovery runs, as if
//! there were no checkpoint. What a clean open trusts that a recovery would read again:
//! the object and name headers of units committed before the checkpoint was written
//! (their payloads are still verified by every get, against their checksums).
//!
//! The bytes (FORMAT.md, "Index checkpoints"): a [`Head`], the lanes (8 words each), the
//! segment slots, the name slots, the entries, and an nvs-sum of all of it, seeded with
//! the pool id.

use super::Pool;
use crate::error::Result;
use crate::format::sum::Sum;
use crate::format::{self, ObjectHeader, Superblock, UnitHeader, DELTA_DEPTH_MAX, LINE, NAME_MAX};
use crate::index::{space_of, Entry, HeapMemory, NameSlot, SegSlot, NONE};
use crate::log::lane::Lane;
use crate::log::segments::FREE;
use crate::media::Media;
use crate::mutant::{self, Mutant};
use crate::object::PoolStats;
use crate::recover::same_header;
use bytemuck::{Pod, Zeroable};
use core::mem::size_of;

/// "NVSCKPT1", little-endian.
const MAGIC: u64 = u64::from_le_bytes(*b"NVSCKPT1");
/// This layout of the bytes.
const VERSION: u32 = 1;
/// Mixed into the pool id to seed the trailing sum.
pub const SUM_SEED: u64 = 0x636b_7074_5f73_756d;
/// Entries read and inserted at a time.
const CHUNK: usize = 1024;
/// How many entries ahead the table slot to restore into is asked for.
const PREFETCH_AHEAD: usize = 16;

/// What a checkpoint starts with.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Head {
    magic: u64,
    version: u32,
    lanes: u32,
    segments: u64,
    names: u64,
    entries: u64,
    /// The index's hash table slots (each name and entry records its own).
    table: u64,
    /// `PoolStats`: segments used, units, objects, payload bytes, lanes.
    stats: [u64; 5],
    /// The superblock of the pool it was taken of.
    sb: Superblock,
}

/// How an open from a checkpoint went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointUse {
    /// The checkpoint was the pool's state, caught up with the media since.
    Used,
    /// Sound, but the media changed in a way a catch-up does not follow (or it found
    /// something to judge): a recovery ran.
    Stale,
    /// Not a checkpoint of this pool, or not whole or not sound (what was wrong): a
    /// recovery ran.
    Invalid(&'static str),
}

impl<M: Media> Pool<M, HeapMemory> {
    /// Write this pool's state as an index checkpoint through `out` (called with the
    /// bytes in order; `false` from it stops the writing). Returns whether a whole
    /// checkpoint was written: `false` when `out` refused, or when this pool's state is
    /// not what a recovery of the media would give — a reader whose last refresh
    /// failed, a writer that stopped or has units in flight — or a lane's units do not
    /// lead to its tail. Names are written in the order recovery meets them (lane by
    /// lane, each lane in order), which a writer on several lanes may not have.
    /// `&mut`: no put runs meanwhile.
    pub fn write_checkpoint(&mut self, out: &mut dyn FnMut(&[u8]) -> bool) -> bool {
        let lanes: alloc::vec::Vec<Lane> = self.lanes.iter_mut().map(|c| *c.get_mut()).collect();
        let mut lasts = alloc::vec::Vec::with_capacity(lanes.len());
        for l in &lanes {
            match l.active.then(|| last_unit(&self.media, l)) {
                Some(None) => return false,
                last => lasts.push(last.flatten().unwrap_or(0)),
            }
        }
        let caught_up = self.caught_up;
        let writable = self.writable;
        let sb = self.sb;
        let shared = self.shared.get_mut();
        if (!writable && !caught_up) || shared.stopped.is_some() || shared.pending_entries != 0 {
            return false;
        }
        let index = &shared.index;
        // Names in the order a recovery meets them: by the first unit (lane, then
        // sequence) holding each, names first used in one unit in their order there (a
        // writer's ids for them). A writer on several lanes met them in time order:
        // they are renumbered. (Entries may be in any order: a name's versions are
        // listed in order whatever it is.)
        let mut first = alloc::vec![(u32::MAX, u64::MAX); index.name_count()];
        for i in 0..index.len() as u32 {
            let e = index.entry(i);
            if let Some(f) = first.get_mut(e.name as usize) {
                *f = (*f).min((e.lane, e.seq));
            }
        }
        let mut order: alloc::vec::Vec<u32> = (0..index.name_count() as u32).collect();
        order.sort_by_key(|&id| (first[id as usize], id));
        let mut new_of = alloc::vec![0u32; order.len()];
        for (new, &old) in order.iter().enumerate() {
            new_of[old as usize] = new as u32;
        }
        let count = sb.segment_count as usize;
        let Some(segments) = index.segments_ref().get(..count) else { return false };
        let table = table_for(index.len(), index.name_count());
        let Some((name_slots, entry_slots)) = index.rebuilt_slots(table, &order, &new_of) else { return false };
        let s = shared.stats;
        let head = Head {
            magic: MAGIC,
            version: VERSION,
            lanes: sb.lanes_max,
            segments: count as u64,
            names: index.name_count() as u64,
            entries: index.len() as u64,
            table: table as u64,
            stats: [s.segments_used as u64, s.units, s.objects, s.payload_bytes, s.lanes as u64],
            sb,
        };
        let mut sum = Sum::new(sb.pool_id ^ SUM_SEED);
        let mut put = |bytes: &[u8]| {
            sum.write(bytes);
            out(bytes)
        };
        let mut ok = put(bytemuck::bytes_of(&head));
        for (l, &last) in lanes.iter().zip(&lasts).take(sb.lanes_max as usize) {
            ok = ok && put(bytemuck::bytes_of(&lane_words(l, last)));
        }
        ok = ok && put(bytemuck::cast_slice(segments));
        let mut buf = alloc::vec::Vec::with_capacity(CHUNK);
        for first in (0..index.name_count()).step_by(CHUNK) {
            buf.clear();
            for (&old, &slot) in order.iter().zip(&name_slots).skip(first).take(CHUNK) {
                buf.push(NameSlot { first: slot, last: NONE, count: 0, ..*index.name(old) });
            }
            ok = ok && put(bytemuck::cast_slice::<NameSlot, u8>(&buf));
        }
        let mut buf = alloc::vec::Vec::with_capacity(CHUNK);
        for first in (0..index.len()).step_by(CHUNK) {
            buf.clear();
            for (i, &slot) in entry_slots.iter().enumerate().skip(first).take(CHUNK) {
                let e = index.entry(i as u32);
                buf.push(Entry { name: new_of[e.name as usize], next: slot, ..*e });
            }
            ok = ok && put(bytemuck::cast_slice::<Entry, u8>(&buf));
        }
        let total = (size_of::<Head>()
            + sb.lanes_max as usize * size_of::<[u64; 8]>()
            + count * size_of::<SegSlot>()
            + index.name_count() * size_of::<NameSlot>()
            + index.len() * size_of::<Entry>()) as u64;
        ok && out(&sum.finish(total).to_le_bytes())
    }

    /// Open a pool read-only from an index checkpoint that [`Pool::write_checkpoint`]
    /// wrote (`bytes`, all of it: a mapped file, say): the pool a
    /// [`Pool::open_read_only`] would give, at the cost of the checkpoint's bytes and of
    /// the units committed since it was written — or, when the checkpoint is not this
    /// pool's, not whole, not sound, or too old to catch up from, at the cost of that
    /// open (a recovery), with why in the [`CheckpointUse`]. Errors are those of
    /// [`Pool::open_read_only`].
    ///
    /// `mem`: the memory to build the index in; [`checkpoint_memory`] makes one of the
    /// size the checkpoint's index needs (or pass an empty one).
    pub fn open_read_only_from_checkpoint(media: M, mem: HeapMemory, bytes: &[u8]) -> Result<(Self, CheckpointUse)> {
        let mut pool = Self::unrecovered(media, mem, false, None)?;
        let used = match pool.restore(bytes) {
            Ok(()) if mutant::on(Mutant::CheckpointNotCaughtUp) => CheckpointUse::Used,
            Ok(()) => {
                if pool.catch_up_once(None)? {
                    CheckpointUse::Used
                } else {
                    CheckpointUse::Stale
                }
            }
            Err(why) => why,
        };
        if used != CheckpointUse::Used {
            pool.caught_up = false;
            pool.refresh()?;
        }
        Ok((pool, used))
    }

    /// A digest of what a reader gets from this pool — counts, lanes, and each name (in
    /// id order) with its versions (in order) and their facts — but not of where the
    /// index keeps them (entry ids, links, table slots, the build number): a catch-up
    /// indexes a lane's new units after the other lanes' old ones, a recovery lane by
    /// lane. nvs's checks compare an open from a checkpoint with a recovery by it.
    #[cfg(feature = "internals")]
    pub fn state_digest(&mut self) -> u64 {
        let mut h = crate::format::hash::Hasher::new(0x7374_6174_655f_6467);
        for l in self.lanes.iter_mut() {
            h.write(bytemuck::bytes_of(&lane_words(l.get_mut(), 0)));
        }
        let shared = self.shared.get_mut();
        let s = shared.stats;
        let index = &shared.index;
        let counts = [s.segments_used as u64, s.units, s.objects, s.payload_bytes, s.lanes as u64, index.len() as u64];
        h.write(bytemuck::bytes_of(&counts));
        for id in 0..index.name_count() as u32 {
            let n = index.name(id);
            h.write(bytemuck::bytes_of(&[n.hash, n.name_off, n.name_len as u64, n.count as u64]));
            let mut at = n.first;
            for _ in 0..n.count {
                if at == NONE {
                    break;
                }
                let e = index.entry(at);
                h.write(bytemuck::bytes_of(&Entry { name: 0, next: 0, ..*e }));
                at = e.next;
            }
        }
        h.finish()
    }

    /// Fill the index, the lanes and the counts from checkpoint bytes (see the module
    /// docs for what is checked); on `Err`, what was wrong (the state is then anything).
    /// A segment header that is no longer the one recorded (retention released or
    /// reused it since) is `Stale` before the names and entries are read: the catch-up
    /// would give up there, and the recovery it falls back to should not wait for them.
    fn restore(&mut self, bytes: &[u8]) -> core::result::Result<(), CheckpointUse> {
        let sb = self.sb;
        let head: Head = match bytes.get(..size_of::<Head>()) {
            Some(h) => bytemuck::pod_read_unaligned(h),
            None => return Err(CheckpointUse::Invalid("not an nvs index checkpoint")),
        };
        if head.magic != MAGIC {
            return Err(CheckpointUse::Invalid("not an nvs index checkpoint"));
        }
        if head.version != VERSION {
            return Err(CheckpointUse::Invalid("a checkpoint version this build does not read"));
        }
        if head.sb != sb || head.lanes != sb.lanes_max || head.segments != sb.segment_count as u64 {
            return Err(CheckpointUse::Invalid("of another pool, or of this one before it changed"));
        }
        let (names, entries, count) = (head.names as usize, head.entries as usize, sb.segment_count as usize);
        // Its length, from its counts, before anything is allocated for them.
        let len = [
            (1, size_of::<Head>()),
            (sb.lanes_max as usize, size_of::<[u64; 8]>()),
            (count, size_of::<SegSlot>()),
            (names, size_of::<NameSlot>()),
            (entries, size_of::<Entry>()),
            (1, 8),
        ]
        .iter()
        .try_fold(0usize, |t, &(n, size)| n.checked_mul(size).and_then(|b| t.checked_add(b)));
        if len != Some(bytes.len()) {
            return Err(CheckpointUse::Invalid("not as long as its counts say"));
        }
        // Every object and name takes a line of the pool at least.
        if (names as u64).max(entries as u64) > sb.pool_len / LINE {
            return Err(CheckpointUse::Invalid("more objects than the pool has room for"));
        }
        let [used, units, objects, payload_bytes, lanes_used] = head.stats;
        let stats_ok = used <= count as u64
            && units <= sb.pool_len / LINE
            && objects == entries as u64
            && payload_bytes <= sb.pool_len
            && lanes_used <= sb.lanes_max as u64;
        if !stats_ok {
            return Err(CheckpointUse::Invalid("counts the pool cannot have"));
        }
        let mut at = Taken { bytes, at: 0, sum: Sum::new(sb.pool_id ^ SUM_SEED) };
        // Lanes.
        let mut lanes = [Lane::default(); format::LANES_MAX as usize];
        at.take(size_of::<Head>());
        for (lane_id, l) in lanes.iter_mut().take(sb.lanes_max as usize).enumerate() {
            let w: [u64; 8] = bytemuck::pod_read_unaligned(at.take(64));
            let (lane, last) = lane_of(&w).ok_or(CheckpointUse::Invalid("a lane that is not a lane"))?;
            *l = lane;
            if !l.sound(&sb) || (last != 0 && !(l.seg_start < last && last < l.tail)) {
                return Err(CheckpointUse::Invalid("a lane's position outside its segment"));
            }
            // Its newest unit still there, ending at its tail (one header per lane).
            let seq = l.next_seq.wrapping_sub(1);
            if l.active && last != 0 && !ends_at(&self.media, &sb, lane_id as u32, seq, last, l.tail) {
                return Err(CheckpointUse::Stale);
            }
        }
        // Segment slots: in index order, each of a lane the pool has (or free), inside
        // the pool with its span. The catch-up compares each with its header.
        let shared = self.shared.get_mut();
        let index = &mut shared.index;
        let segs = index.segments(count).map_err(|_| CheckpointUse::Invalid("more segments than memory"))?;
        for (i, (s, b)) in segs.iter_mut().zip(at.take(count * size_of::<SegSlot>()).chunks_exact(32)).enumerate() {
            *s = bytemuck::pod_read_unaligned(b);
            let lane_ok = s.lane == FREE || s.lane < sb.lanes_max;
            let span_ok = (s.span as usize) <= count - i && (s.head as usize) < count;
            if s.index as usize != i || !lane_ok || !span_ok {
                return Err(CheckpointUse::Invalid("a segment slot out of place"));
            }
        }
        for (i, s) in segs.iter().enumerate().filter(|(_, s)| s.lane != FREE && !s.is_covered()) {
            if !format::decode_segment(&self.media, &sb, i as u32).is_some_and(|h| same_header(s, &h)) {
                return Err(CheckpointUse::Stale);
            }
        }
        // The table its keys' slots were placed in (`table_for`).
        if head.table != table_for(entries, names) as u64 {
            return Err(CheckpointUse::Invalid("a table not of its keys' size"));
        }
        index.reserve(entries, names).map_err(|_| CheckpointUse::Invalid("more objects than memory"))?;
        index
            .restore_table(head.table as usize)
            .map_err(|_| CheckpointUse::Invalid("a table that does not fit its keys"))?;
        // Names, in id order, each at its slot (recorded in `first`).
        for first in (0..names).step_by(CHUNK) {
            let n_here = (names - first).min(CHUNK);
            for b in at.take(n_here * size_of::<NameSlot>()).chunks_exact(size_of::<NameSlot>()) {
                let n: NameSlot = bytemuck::pod_read_unaligned(b);
                // A name follows its object's 48-byte header (after a segment header and
                // a unit header at least), objects start on a line.
                let inside = n.name_off >= sb.data_off + 2 * LINE
                    && n.name_off % LINE == size_of::<ObjectHeader>() as u64
                    && n.name_off.checked_add(n.name_len as u64).is_some_and(|e| e <= sb.pool_len);
                if !inside || n.name_len as usize > NAME_MAX || space_of(n.hash) > sb.lanes_max {
                    return Err(CheckpointUse::Invalid("a name outside the pool"));
                }
                index
                    .restore_name(n.hash, n.name_off, n.name_len, n.first)
                    .map_err(|_| CheckpointUse::Invalid("two names in one slot"))?;
            }
        }
        // Entries, in order, each at its slot (recorded in `next`); links rebuilt.
        const E: usize = size_of::<Entry>();
        for first in (0..entries).step_by(CHUNK) {
            let chunk = at.take((entries - first).min(CHUNK) * E);
            for (k, b) in chunk.chunks_exact(E).enumerate() {
                if let Some(ahead) = chunk.get((k + PREFETCH_AHEAD) * E..(k + PREFETCH_AHEAD + 1) * E) {
                    index.prefetch_slot(bytemuck::pod_read_unaligned::<Entry>(ahead).next);
                }
                let e: Entry = bytemuck::pod_read_unaligned(b);
                // Payloads start on a line, after a segment header, a unit header and
                // an object header at least.
                let inside = e.payload_off >= sb.data_off + 3 * LINE
                    && e.payload_off.is_multiple_of(LINE)
                    && e.payload_off.checked_add(e.stored_bytes).is_some_and(|end| end <= sb.pool_len);
                let len_ok = if e.depth == 0 { e.len_bytes == e.stored_bytes } else { e.len_bytes <= sb.pool_len };
                let ok = inside
                    && len_ok
                    && e.depth as u32 <= DELTA_DEPTH_MAX
                    && e.lane < sb.lanes_max
                    && (e.name as usize) < names;
                if !ok {
                    return Err(CheckpointUse::Invalid("an object outside the pool"));
                }
                index
                    .restore_entry(e.name, e, e.next)
                    .map_err(|_| CheckpointUse::Invalid("a version twice, or two in one slot"))?;
            }
        }
        let total = at.at as u64;
        let tail = bytes.get(at.at..).map(bytemuck::pod_read_unaligned::<u64>);
        if tail != Some(at.sum.finish(total)) {
            return Err(CheckpointUse::Invalid("damaged (its sum does not hold)"));
        }
        shared.stats =
            PoolStats { segments_used: used as u32, units, objects, payload_bytes, lanes: lanes_used as u32 };
        self.install_lanes(&lanes[..sb.lanes_max as usize]);
        self.index_gen = super::new_index_gen();
        self.caught_up = true;
        Ok(())
    }
}

/// Index memory of the size the index of checkpoint `bytes` takes (its arrays
/// allocated, zeroed, not yet written: a caller may have the OS prepare their pages,
/// [`HeapMemory::spans`], while the open fills them), or empty memory if `bytes` does
/// not start like a checkpoint. Only sizes are read here: everything is checked by
/// [`Pool::open_read_only_from_checkpoint`].
pub fn checkpoint_memory(bytes: &[u8]) -> HeapMemory {
    use crate::index::{IndexMemory, Part};
    let mut mem = HeapMemory::new();
    let Some(head) = bytes.get(..size_of::<Head>()).map(bytemuck::pod_read_unaligned::<Head>) else { return mem };
    let sized = |n: u64, size: usize| (n as usize).checked_mul(size).is_some_and(|b| b <= bytes.len());
    let room = head.sb.pool_len / LINE;
    let plausible = head.magic == MAGIC
        && head.version == VERSION
        && head.entries.max(head.names) <= room
        && sized(head.entries, size_of::<Entry>())
        && sized(head.names, size_of::<NameSlot>())
        && sized(head.segments, size_of::<SegSlot>())
        && head.table == table_for(head.entries as usize, head.names as usize) as u64;
    if plausible {
        let _ = mem.grow(Part::Entries, head.entries as usize)
            && mem.grow(Part::Names, head.names as usize)
            && mem.grow(Part::Table, head.table as usize)
            && mem.grow(Part::Segments, head.segments as usize);
    }
    mem
}

/// The bytes of a checkpoint taken in order, each summed as it is taken.
struct Taken<'a> {
    bytes: &'a [u8],
    at: usize,
    sum: Sum,
}

impl<'a> Taken<'a> {
    /// The next `n` bytes (the length was checked against every count first: a
    /// shorter slice than asked only ever ends the walk early).
    fn take(&mut self, n: usize) -> &'a [u8] {
        let end = self.at.saturating_add(n).min(self.bytes.len());
        let b = self.bytes.get(self.at..end).unwrap_or(&[]);
        self.sum.write(b);
        self.at = end;
        b
    }
}

/// The table slots a checkpoint of `entries` entries and `names` names places them in:
/// the least power of two at least twice the keys (and 64), as a rebuilt table has.
fn table_for(entries: usize, names: usize) -> usize {
    (2 * (entries + names)).next_power_of_two().max(64)
}

/// A lane as 8 words: active, chain position, segment start, tail, segment end, next
/// sequence, flags (closed 1, detached 2), and `last`: the offset of its newest unit,
/// which ends at its tail (0: none in its current segment).
fn lane_words(l: &Lane, last: u64) -> [u64; 8] {
    let flags = l.closed as u64 | (l.detached as u64) << 1;
    [l.active as u64, l.chain_seq, l.seg_start, l.tail, l.seg_end, l.next_seq, flags, last]
}

/// The lane and `last` of [`lane_words`]; `None` if a flag is not one.
fn lane_of(w: &[u64; 8]) -> Option<(Lane, u64)> {
    if w[0] > 1 || w[6] > 3 {
        return None;
    }
    let lane = Lane {
        active: w[0] == 1,
        chain_seq: w[1],
        seg_start: w[2],
        tail: w[3],
        seg_end: w[4],
        next_seq: w[5],
        closed: w[6] & 1 != 0,
        detached: w[6] & 2 != 0,
    };
    Some((lane, w[7]))
}

/// The offset of lane `l`'s newest unit (the one ending at its tail), found by
/// following unit lengths from its segment's data start; 0 if its segment holds none;
/// `None` if the units do not lead to the tail.
fn last_unit<M: Media + ?Sized>(media: &M, l: &Lane) -> Option<u64> {
    let mut at = l.seg_start + LINE;
    let mut last = 0;
    while at < l.tail {
        let h: UnitHeader = format::read_pod(media, at);
        if h.unit_len < LINE || !h.unit_len.is_multiple_of(LINE) {
            return None;
        }
        last = at;
        at = at.checked_add(h.unit_len)?;
    }
    (at == l.tail).then_some(last)
}

/// Whether the unit at `last` is lane `lane_id`'s committed unit `seq`, ending at `tail`:
/// its header's checksum and commit word (a pool file put back to an older copy of
/// itself, or a power cut that kept less than the checkpoint saw, has no such unit).
fn ends_at<M: Media + ?Sized>(media: &M, sb: &Superblock, lane_id: u32, seq: u64, last: u64, tail: u64) -> bool {
    let h: UnitHeader = format::read_pod(media, last);
    let checksum = h.compute_checksum(sb.pool_id);
    h.checksum == checksum
        && h.seq == seq
        && h.lane == lane_id
        && last.checked_add(h.unit_len) == Some(tail)
        && h.commit == sb.commit_word_at(lane_id, seq, checksum, last)
}

/// The head's size, as FORMAT.md's table of a checkpoint has it.
const _: () = assert!(size_of::<Head>() == 152);
