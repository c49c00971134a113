//! Step 1 of the commit protocol: validate a unit, resolve its versions, make index room
//! — all before anything is written — and step 2, a segment if it does not fit.

use super::lane::Lane;
use super::segments;
use super::Committer;
use crate::delta::{self, DeltaPlan};
use crate::error::{Error, Result};
use crate::format::{self, LINE, META_MAX, NAME_MAX};
use crate::index::{name_key, space_of, IndexMemory, NONE};
use crate::media::{ClaimLock, Media};
use crate::mutant::{self, Mutant};
use crate::object::{LaneInfo, Object};
use crate::shared::{Shared, SharedAccess};

/// What validation decided for one object of a unit being written: the caller's room
/// for the plan of a batch larger than [`crate::BATCH_MAX`] objects
/// ([`crate::Pool::put_batch_in`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct PlanSlot {
    /// `name_key` of its name (in its lane's name space).
    pub(crate) hash: u64,
    pub(crate) version: u64,
    /// The object's length.
    pub(crate) len: u64,
    /// Its payload's length on the media (`len`, or its delta record's length).
    pub(crate) stored: u64,
    /// The name's slot in the index, or `NONE` if the index does not know the name yet.
    pub(crate) name_id: u32,
    /// Filled in when the payload is stored (0 when the pool has no payload checksums).
    pub(crate) payload_sum: u64,
    /// Stored as a delta.
    pub(crate) delta: Option<DeltaPlan>,
    /// The payload is on the media already (`Committer::store_payload_ahead`).
    pub(crate) payload_stored: bool,
    /// In a large unit ([`Dups`]): the index of the unit's previous object whose name
    /// hash has the same filter bit, or `NONE`.
    pub(crate) prev: u32,
}

impl PlanSlot {
    /// The version this object was committed with (after a successful put).
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// The plan of a unit of at most `N` objects (1 for a put, `BATCH_MAX` for a batch).
pub(crate) type Plan<const N: usize> = heapless::Vec<PlanSlot, N>;

/// Where a unit's plan is kept: a [`Plan`] on the stack, or the caller's slots for a
/// batch of any size ([`SlotPlan`]). Empty when a unit starts.
pub(crate) trait PlanBuf: core::ops::DerefMut<Target = [PlanSlot]> {
    /// How many objects it can plan.
    fn capacity(&self) -> usize;
    /// One more object; the caller checked the capacity.
    fn push(&mut self, p: PlanSlot);
}

impl<const N: usize> PlanBuf for Plan<N> {
    fn capacity(&self) -> usize {
        N
    }
    fn push(&mut self, p: PlanSlot) {
        let _ = heapless::Vec::push(self, p);
    }
}

/// A plan in the caller's slots.
pub(crate) struct SlotPlan<'a> {
    slots: &'a mut [PlanSlot],
    len: usize,
}

impl<'a> SlotPlan<'a> {
    pub fn new(slots: &'a mut [PlanSlot]) -> Self {
        SlotPlan { slots, len: 0 }
    }
}

impl core::ops::Deref for SlotPlan<'_> {
    type Target = [PlanSlot];
    fn deref(&self) -> &[PlanSlot] {
        self.slots.get(..self.len).unwrap_or(&[])
    }
}

impl core::ops::DerefMut for SlotPlan<'_> {
    fn deref_mut(&mut self) -> &mut [PlanSlot] {
        let len = self.len;
        self.slots.get_mut(..len).unwrap_or(&mut [])
    }
}

impl PlanBuf for SlotPlan<'_> {
    fn capacity(&self) -> usize {
        self.slots.len()
    }
    fn push(&mut self, p: PlanSlot) {
        if let Some(slot) = self.slots.get_mut(self.len) {
            *slot = p;
            self.len += 1;
        }
    }
}

/// Units of more objects than this find an earlier object of the same name through
/// per-bit chains ([`Dups::heads`]) instead of scanning every earlier object, which is
/// quadratic in the unit's objects.
const DUPS_CHAINED: usize = 64;

/// How planning finds an earlier object of the same name in its unit (its latest version
/// goes up through the unit). Bits of the name hashes seen so far: an object whose bit is
/// clear has no earlier object of the same name. Beyond [`DUPS_CHAINED`] objects, the
/// last object seen with each bit, each object's [`PlanSlot::prev`] chaining to the one
/// before it with the same bit.
struct Dups<'h> {
    seen: [u64; 8],
    /// Only for a large unit: a small one (a put) neither fills nor moves 2 KiB.
    heads: Option<&'h mut [u32; 512]>,
}

impl Dups<'_> {
    /// The latest earlier object of `plan` (objects `..i`) with `hash` and object `i`'s
    /// name; object `i` is noted as seen, and its `prev` returned.
    #[inline(always)]
    fn earlier<'p>(
        &mut self,
        plan: &'p [PlanSlot],
        objects: &[Object<'_>],
        i: usize,
        hash: u64,
    ) -> (Option<&'p PlanSlot>, u32) {
        let bit = (hash >> 39) as usize & 511; // bits 39..47: hashed (the top 16 are the name space)
        let word = &mut self.seen[bit / 64];
        let maybe_earlier = *word & 1 << (bit % 64) != 0;
        *word |= 1 << (bit % 64);
        let name = objects.get(i).map_or(&[][..], |o| o.name);
        let same = |p: &PlanSlot, e: &Object<'_>| p.hash == hash && e.name == name;
        match self.heads.as_deref_mut() {
            None if maybe_earlier => {
                let found = plan.iter().zip(objects.get(..i).unwrap_or(&[])).rev().find(|(p, e)| same(p, e));
                (found.map(|f| f.0), NONE)
            }
            None => (None, NONE),
            Some(heads) => {
                let prev = heads[bit];
                heads[bit] = i as u32;
                let mut at = prev;
                while let (Some(p), Some(e)) = (plan.get(at as usize), objects.get(at as usize)) {
                    if same(p, e) {
                        return (Some(p), prev);
                    }
                    at = p.prev;
                }
                (None, prev)
            }
        }
    }
}

impl<M: Media> Committer<'_, M> {
    /// Step 1–2 of the protocol under the shared state: validate, take versions, make
    /// index room, claim a segment if the unit does not fit. Returns the unit's length
    /// and how many names it creates. Nothing is written to the media except a claimed
    /// segment's header — and, if `interleave` (a batch whose whole unit fits at the
    /// lane's tail, [`Committer::batch_fits_ahead`]), each object's payload, stored just
    /// before the object is planned, so that planning runs while the payloads' NT
    /// stores drain instead of before them. If planning then refuses the unit, those
    /// bytes stay past the lane's log end, as a lone put's payload stored ahead does.
    ///
    /// `at_tail`: payloads were (or, interleaved, are) stored for the unit at the lane's
    /// tail, as it fits there; a unit that needed another segment then would be
    /// committed around payloads never stored in it (`Error::Invariant`, nothing taken).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan_unit<X: IndexMemory>(
        &self,
        s: &mut Shared<X>,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut impl PlanBuf,
        interleave: bool,
        at_tail: bool,
    ) -> Result<(u64, usize)> {
        s.writes_allowed()?;
        // 1. Every object validated, its version resolved, its size known; new names
        // counted; an earlier object of the same name in this unit found through `dups`.
        let (mut new_names, mut unit_len) = (0usize, LINE);
        let mut heads;
        let heads = match objects.len() > DUPS_CHAINED {
            true => {
                heads = [NONE; 512];
                Some(&mut heads)
            }
            false => None,
        };
        let mut dups = Dups { seen: [0; 8], heads };
        let mut obj_off = l.tail + LINE;
        for (i, o) in objects.iter().enumerate() {
            let stored = interleave.then(|| {
                let payload_off = obj_off + format::object_head_len(o.name.len());
                obj_off = payload_off + format::line_up(o.len_bytes());
                self.store_full(o.parts(), payload_off)
            });
            let (mut p, new_name) = self.plan_object(s, l, self.sb.name_space(lane), objects, i, plan, &mut dups)?;
            if let Some(sum) = stored {
                p.payload_stored = true;
                p.payload_sum = sum;
            }
            new_names += new_name as usize;
            unit_len += format::head_len(o.name.len(), o.meta.len()) + format::line_up(p.stored);
            // objects.len() <= plan.capacity() was checked: there is room.
            plan.push(p);
        }
        // One slot per object: the unit's stores and its index entries pair them up, and
        // an object without one would be committed unindexed, or not stored at all.
        if plan.len() != objects.len() {
            let what = "a unit's plan does not hold one slot per object";
            return Err(s.stop_on(Error::Invariant { what, committed: false }));
        }
        // A unit that needs a new segment stores its deltas as full versions: their
        // parents stay behind in the old one (see `delta::write::plan`).
        let claims = !l.has_room(unit_len);
        if claims && !self.delta.chains_cross_segments && plan.iter().any(|p| p.delta.is_some()) {
            unit_len = LINE;
            for (o, p) in objects.iter().zip(plan.iter_mut()) {
                p.delta = None;
                p.stored = p.len;
                unit_len += format::head_len(o.name.len(), o.meta.len()) + format::line_up(p.stored);
            }
        }
        if unit_len > self.sb.max_unit_bytes() {
            return Err(Error::TooLarge { len_bytes: unit_len, max_bytes: self.sb.max_unit_bytes() - LINE });
        }
        // Room for this unit beside the units other lanes planned but have not published.
        let room = objects.len() + s.pending_entries;
        s.index.reserve(room, new_names).map_err(|e| s.index.full(e))?;
        // 2. Space: the lane's segment, or a newly claimed one — a span of as many
        // segments as the unit needs, if it is larger than one.
        if !l.has_room(unit_len) {
            if at_tail {
                let what = "a unit whose payloads were stored at its lane's tail needs another segment";
                return Err(s.stop_on(Error::Invariant { what, committed: false }));
            }
            // A new segment (span) may be filled to its end by this one unit: keeping a
            // line free there would cost a whole segment to objects sized to fill one.
            *l = self.claim(s, lane, *l, self.sb.span_for(unit_len) as u32)?;
        }
        // Take the versions: no other lane may take them now (a new name's versions are
        // guarded by the lock its unit holds to the end).
        for p in plan.iter().filter(|p| p.name_id != NONE) {
            let n = s.index.name_mut(p.name_id);
            n.reserved = n.reserved.max(p.version);
        }
        s.pending_entries += objects.len();
        Ok((unit_len, new_names))
    }

    /// Object `i` of `objects` planned (after the `plan` of the objects before it): its
    /// name checked and looked up once (hashed once; the index slot found is reused when
    /// the index learns it), its version, its length, its delta. True if its name is new
    /// to the index and to the unit.
    #[inline(always)] // once per object of every unit: the hot path of small batches
    #[allow(clippy::too_many_arguments)] // the unit's state, passed down, not rebuilt per object
    fn plan_object<X: IndexMemory>(
        &self,
        s: &Shared<X>,
        l: &Lane,
        space: u32,
        objects: &[Object<'_>],
        i: usize,
        plan: &[PlanSlot],
        dups: &mut Dups<'_>,
    ) -> Result<(PlanSlot, bool)> {
        let o = &objects[i];
        if o.name.is_empty() {
            return Err(Error::NameEmpty);
        }
        if o.name.len() > NAME_MAX {
            return Err(Error::NameTooLong { len_bytes: o.name.len() });
        }
        if o.meta.len() > META_MAX {
            return Err(Error::MetaTooLong { len_bytes: o.meta.len() });
        }
        let hint = s.name_hints.get(i).copied().unwrap_or(NONE);
        let (hash, found) = match s.index.name_is(&self.media, hint, o.name) {
            Some(hash) if space_of(hash) == space => (hash, Some(hint)),
            _ => {
                let hash = name_key(o.name, space);
                (hash, s.index.find_name(&self.media, hash, o.name))
            }
        };
        // The last earlier object of this unit with the same name holds its latest
        // version (versions of one name increase through a unit).
        let (in_unit, prev) = dups.earlier(plan, objects, i, hash);
        let (name_id, latest, new_name) = match (in_unit, found) {
            (Some(p), _) => (p.name_id, Some(p.version), false),
            (None, Some(id)) => {
                let n = s.index.name(id);
                let committed = (n.last != NONE).then(|| s.index.entry(n.last).version);
                (id, committed.max((n.reserved != 0).then_some(n.reserved)), false)
            }
            (None, None) => (NONE, None, true),
        };
        let version = match (o.version, latest) {
            // Versions start at 1 (0 asks readers for the latest).
            (Some(0), l) => return Err(Error::VersionNotIncreasing { latest: l.unwrap_or(0), given: 0 }),
            (Some(v), Some(l)) if v <= l => return Err(Error::VersionNotIncreasing { latest: l, given: v }),
            (Some(v), _) => v,
            (None, Some(l)) => l.checked_add(1).ok_or(Error::VersionNotIncreasing { latest: l, given: l })?,
            (None, None) => 1,
        };
        let len = o.len_bytes();
        let max = self.sb.max_object_bytes(o.name.len());
        if len > max {
            return Err(Error::TooLarge { len_bytes: len, max_bytes: max });
        }
        let delta = match o.delta {
            Some(d) => {
                let parent = found.and_then(|id| s.index.find_version(id, d.parent)).map(|e| *s.index.entry(e));
                let segment = l.active.then_some(l.seg_start..l.seg_end);
                delta::write::plan(self.sb, &self.delta, parent, segment, d, len, version)?
            }
            None => None,
        };
        let stored = delta.map_or(len, |d| d.stored_bytes());
        let p = PlanSlot { hash, version, len, stored, name_id, payload_sum: 0, delta, payload_stored: false, prev };
        Ok((p, new_name))
    }

    /// Step 2: a new segment for `lane` after `old` ([`segments::claim`]), counted in the
    /// statistics.
    pub(super) fn claim<X: IndexMemory>(&self, s: &mut Shared<X>, lane: u32, old: Lane, span: u32) -> Result<Lane> {
        let Shared { index, alloc_cursor, stats, .. } = s;
        let segs = index.segments(self.sb.segment_count as usize)?;
        let l = match self.owned {
            None => segments::claim(self.media, self.sb, segs, alloc_cursor, lane, old, span)?,
            // Beside writers in other processes: under the claim lock, the other
            // processes' segments as their headers say now, then the claim (fenced: the
            // next claimer reads this header whole).
            Some(owned) => {
                let _lock = ClaimLock::take(self.media)?;
                if !mutant::on(Mutant::RescanSkipped) {
                    segments::rescan(self.media, self.sb, segs, &owned);
                }
                segments::claim(self.media, self.sb, segs, alloc_cursor, lane, old, span)?
            }
        };
        if !old.active {
            stats.lanes += 1;
        }
        stats.segments_used += span;
        Ok(l)
    }

    /// Join `lane` to the stream: if it holds no segment, claim one now and fence it, so
    /// that the lane is part of the pool (and followers wait for its end of stream) even
    /// before its first unit. A segment without units is a state recovery knows (a claim
    /// whose unit never committed): the lane resumes there.
    pub(crate) fn join<X: IndexMemory>(
        &self,
        shared: &mut impl SharedAccess<X>,
        l: &mut Lane,
        lane: u32,
    ) -> Result<()> {
        self.check_writable_lane(lane)?;
        if l.active {
            return Ok(());
        }
        // The claim fences its header: the join is durable when this returns.
        *l = shared.with(|s| {
            s.writes_allowed()?;
            self.claim(s, lane, *l, 1)
        })?;
        shared.with(|s| {
            s.lane_infos[lane as usize] = Some(LaneInfo { units: l.next_seq, closed: false, detached: false })
        });
        Ok(())
    }
}
