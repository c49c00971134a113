//! The write path: the commit protocol, from planning a unit to sealing it.
//!
//! The commit protocol of one unit (one put or one batch), per lane:
//! 1. validate everything (names, versions, sizes, index room, space) — nothing is
//!    committed before the call is known to succeed. Two named branches store early,
//!    past the lane's log end where no unit is until a commit word says so: a lone put
//!    NT-stores its payload while it is planned (`store_payload_ahead`), and a batch
//!    through `&mut Pool` that fits its segment stores each payload as it is planned
//!    (`batch_fits_ahead`). A refused call leaves those bytes unread, after the last
//!    committed unit;
//! 2. if the unit does not fit the lane's segment, claim a free segment: its header by
//!    NT stores, then a fence, so its ownership is durable before any unit in it;
//! 3. NT-store every payload, every object header + name, then the unit header (all
//!    but the commit word);
//! 4. fence — the unit is durable, but not yet committed;
//! 5. NT-store the 8-byte commit word alone, aligned;
//! 6. fence — committed; only now does the call return, and only now can anyone see the
//!    objects in the index (written before step 4 when no one can look meanwhile).
//!
//! Invariants whose breach would lose or corrupt data are checked in release builds,
//! each a few integer compares: the lane's position before anything is stored at it
//! (`Lane::sound`), the unit's place and header fields before it is sealed
//! (`Committer::store_unit`), and after the commit, the index taking every object and the lane's
//! published sequence advancing by one (`Committer::publish`). A failed check is
//! [`Error::Invariant`] and stops the pool's writes (`Shared::stop_on`); one after the
//! commit word says so (`committed`), as the unit is durable but not indexed.
//!
//! Rooms: [`plan`] (step 1: validate, versions, index room), [`segments`] (step 2 and
//! every other change of segment ownership), [`write`] (step 3's objects, and the index
//! learning a unit), [`seal`] (steps 3–6 for every unit: the only place a commit word is
//! stored), [`steps`] (each step's stores and fences; the commit-sequence mutants hook
//! there only), [`lane`] (a lane's write position).

pub(crate) mod lane;
pub(crate) mod plan;
pub(crate) mod seal;
pub(crate) mod segments;
pub(crate) mod steps;
pub(crate) mod write;

use crate::delta::DeltaOptions;
use crate::error::{Error, Result};
use crate::format::{Superblock, LANES_MAX};
use crate::index::IndexMemory;
use crate::media::Media;
use crate::object::Object;
use crate::shared::{Shared, SharedAccess};
use lane::Lane;
use plan::{PlanBuf, PlanSlot};
use seal::UnitKind;

/// What the commit path needs of a pool besides the shared state and the lane: the
/// media and the superblock (both immutable once open).
pub(crate) struct Committer<'a, M: Media> {
    pub media: &'a M,
    pub sb: &'a Superblock,
    pub writable: bool,
    pub delta: DeltaOptions,
    /// The lanes this pool writes beside writers in other processes (`None`: the only
    /// writer, of every lane).
    pub owned: Option<LaneSet>,
}

/// A set of lanes: those a pool writes beside writers in other processes
/// ([`crate::Pool::open_lanes`]). It holds lanes below [`LANES_MAX`], every lane a pool
/// can have (a superblock with more lanes does not decode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LaneSet([u64; LaneSet::WORDS]);

impl LaneSet {
    const WORDS: usize = (LANES_MAX as usize).div_ceil(64);

    /// Add `lane`; false (the set unchanged) for a lane no pool can have.
    #[must_use]
    pub fn insert(&mut self, lane: u32) -> bool {
        match self.0.get_mut(lane as usize / 64).filter(|_| lane < LANES_MAX) {
            Some(w) => {
                *w |= 1 << (lane % 64);
                true
            }
            None => false,
        }
    }

    pub fn has(&self, lane: u32) -> bool {
        self.0.get(lane as usize / 64).is_some_and(|w| w & 1 << (lane % 64) != 0)
    }
}

impl<M: Media> Committer<'_, M> {
    /// One unit through the whole commit protocol (module docs, DESIGN.md). `plan` is
    /// empty on entry and holds one [`PlanSlot`] per object on success. On error nothing
    /// was committed — but for [`Error::Invariant`] with `committed` — and nothing was
    /// written except payloads stored at the lane's tail before the unit was refused
    /// ([`Self::store_payload_ahead`], [`Self::batch_fits_ahead`]), past its log end.
    ///
    /// Locking: planning (versions, index room, a segment) and publishing (the index
    /// learns the committed objects) each run under `shared` — no lock is held while the
    /// unit is copied and fenced. A unit that creates a new name holds `shared` from
    /// planning to publishing instead: a name's bytes are on the media only once its
    /// unit is written, so no other lane may plan the same new name meanwhile.
    pub fn commit_unit<X: IndexMemory>(
        &self,
        shared: &mut impl SharedAccess<X>,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut impl PlanBuf,
    ) -> Result<()> {
        self.check_writable_lane(lane)?;
        // A unit header counts its objects in 32 bits.
        if objects.is_empty() || objects.len() > plan.capacity() || u32::try_from(objects.len()).is_err() {
            return Err(Error::BatchSize { count: objects.len() });
        }
        // Payloads may be stored at the tail before the unit is planned: the tail must be
        // a place a unit can go (`store_unit` checks the whole unit again).
        if !l.sound(self.sb) {
            let broken = Error::Invariant { what: lane::UNSOUND, committed: false };
            return Err(shared.with(|s| s.stop_on(broken)));
        }
        // 1. Plan; in two named branches, payloads are stored already (module docs): a
        // lone put's before it is planned, and a batch's through `&mut Pool` (no lock is
        // held: nothing else waits meanwhile) while it is planned.
        let ahead = self.store_payload_ahead(l, objects);
        let interleave = shared.exclusive().is_some() && self.batch_fits_ahead(l, objects);
        let unlocked = shared.with(|s| -> Result<Option<u64>> {
            let at_tail = ahead.is_some() || interleave;
            let (unit_len, new_names) = self.plan_unit(s, l, lane, objects, plan, interleave, at_tail)?;
            debug_assert!(!interleave || !plan.iter().any(|p| p.delta.is_some()), "a batch stored ahead has no deltas");
            s.index.prefetch_for(plan.iter().map(|p| (p.name_id, p.version)));
            // Planning kept the unit at the tail (`plan_unit`'s `at_tail`): where the payload went.
            if let (Some((_, sum)), Some(p)) = (ahead, plan.first_mut()) {
                p.payload_stored = true;
                p.payload_sum = sum;
            }
            match new_names {
                0 => Ok(Some(unit_len)),
                // A new name: the lock is held through steps 3–6 (see above).
                _ => self.write_unit_watched(s, l, lane, objects, plan, unit_len).map(|()| None),
            }
        })?;
        let Some(unit_len) = unlocked else { return Ok(()) };
        match shared.exclusive() {
            // `&mut Pool`: no one can look until this call returns.
            Some(s) => self.write_unit_watched(s, l, lane, objects, plan, unit_len),
            // A lane writer: steps 3–6 without the lock, then the index learns the unit
            // under it.
            None => {
                let written = self
                    .store_unit(l, lane, UnitKind::OBJECTS, objects.len(), unit_len, |off| {
                        self.store_objects(objects, plan, off)
                    })
                    .map(|unit| self.commit(l, unit));
                shared.with(|s| match written {
                    Ok((off, seq)) => self.publish_if_durable(s, lane, off, seq, objects, plan),
                    Err(e) => Err(refused(s, objects.len(), e)),
                })
            }
        }
    }

    /// Steps 3–6 of a planned unit, and the index learning it, where no one can look at
    /// the index before this returns (the lock held, or exclusive access): it learns
    /// the unit while the unit's stores drain, as work before the first fence is nearly
    /// free (between the fences, or after them, it would wait for the drain). A media
    /// whose fences can fail publishes after the last fence instead, and only if none
    /// failed.
    ///
    /// A unit refused before its commit (its delta's `Changes` changed its answer, or a
    /// broken invariant) leaves no entry pending. Its versions stay taken: a version
    /// number is skipped, never reused.
    fn write_unit_watched<X: IndexMemory>(
        &self,
        s: &mut Shared<X>,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut [PlanSlot],
        unit_len: u64,
    ) -> Result<()> {
        let stored = self.store_unit(l, lane, UnitKind::OBJECTS, objects.len(), unit_len, |off| {
            self.store_objects(objects, plan, off)
        });
        let unit = stored.map_err(|e| refused(s, objects.len(), e))?;
        if self.media.fence_may_fail() {
            let (off, seq) = self.commit(l, unit);
            return self.publish_if_durable(s, lane, off, seq, objects, plan);
        }
        let published = self.publish(s, lane, unit.off, unit.seq, objects, plan);
        self.commit(l, unit);
        published
    }

    /// Writes are allowed, to a lane this pool has.
    pub fn check_writable_lane(&self, lane: u32) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        if lane >= self.sb.lanes_max {
            return Err(Error::NoSuchLane { lane, lanes_max: self.sb.lanes_max });
        }
        if self.owned.is_some_and(|o| !o.has(lane)) {
            return Err(Error::LaneNotOwned { lane });
        }
        Ok(())
    }
}

impl<M: Media> Committer<'_, M> {
    /// [`Self::publish`] of a unit whose last fence returned, if the media made it
    /// durable: where a fence can fail and one did, the unit is not indexed — no reader
    /// of this pool sees what may not survive a crash — and the writes stop
    /// ([`Error::NotDurable`]).
    fn publish_if_durable<X: IndexMemory>(
        &self,
        s: &mut Shared<X>,
        lane: u32,
        off: u64,
        seq: u64,
        objects: &[Object<'_>],
        plan: &[PlanSlot],
    ) -> Result<()> {
        if self.media.fence_may_fail() && self.media.fence_failed() {
            return Err(refused(s, objects.len(), Error::NotDurable));
        }
        self.publish(s, lane, off, seq, objects, plan)
    }
}

/// A planned unit of `count` objects refused before its commit, for `e`: its entries no
/// longer pending, and the pool's writes stopped if `e` is a broken invariant.
#[cold]
fn refused<X: IndexMemory>(s: &mut Shared<X>, count: usize, e: Error) -> Error {
    match s.unpend(count, false) {
        Ok(()) => s.stop_on(e),
        Err(broken) => broken,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    extern crate std;
    use super::*;
    use crate::format::LINE;
    use crate::log::plan::PlanSlot;
    use crate::{FixedMemory, FormatOptions, HeapMemory, Pool, Region};
    use std::vec;
    use std::vec::Vec;

    #[repr(align(64))]
    #[derive(Clone, Copy)]
    #[allow(dead_code)] // only its size and alignment matter
    struct Line([u8; 64]);

    /// 1 MiB of zeroed, line-aligned memory for a pool.
    fn memory() -> Vec<Line> {
        vec![Line([0; 64]); (1 << 20) / 64]
    }

    fn region(mem: &mut [Line]) -> Region {
        // SAFETY: `mem` is 64-byte aligned and outlives every pool of the test, which is
        // the only user of the region.
        unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) }
    }

    fn bytes(media: &Region) -> Vec<u8> {
        let mut b = vec![0u8; media.len()];
        media.read(0, &mut b);
        b
    }

    #[test]
    fn a_lane_set_refuses_lanes_no_pool_has() {
        let mut set = LaneSet::default();
        for lane in [0, 63, 64, LANES_MAX - 1] {
            assert!(set.insert(lane) && set.has(lane), "lane {lane}");
        }
        for lane in [LANES_MAX, 300, u32::MAX] {
            assert!(!set.insert(lane), "lane {lane} is past every pool's lanes");
            assert!(!set.has(lane));
        }
        assert!(!set.has(1) && !set.has(65));
    }

    /// The index refusing a committed object (forced here: a unit published without the
    /// index room its planning would have reserved) is an error saying it is committed,
    /// and every later write of the pool is refused; reads go on, and a reopen writes.
    #[test]
    fn a_committed_object_the_index_refuses_stops_the_writes() {
        let mut mem = memory();
        let media = region(&mut mem);
        let opts = FormatOptions { segment_len: Some(64 << 10), ..FormatOptions::new(7) };
        // One entry, one name.
        let mut pool = Pool::format(&media, opts, FixedMemory::<1, 1, 4, 16>::new()).unwrap();
        assert_eq!(pool.put(0, Object::new("a", b"x")).unwrap().version, 1);
        let (w, lanes, shared) = pool.split_mut();
        let l = *lanes[0].get_mut();
        shared.pending_entries += 1; // as planning the unit would have
        let plan = [PlanSlot { name_id: 0, version: 2, len: 1, stored: 1, ..PlanSlot::default() }];
        let r = w.publish(shared, 0, l.tail, l.next_seq, &[Object::new("a", b"y")], &plan);
        assert!(matches!(r, Err(Error::Invariant { committed: true, .. })), "{r:?}");
        assert_eq!(shared.pending_entries, 0);
        let stopped = |r: Result<()>| matches!(r, Err(Error::Invariant { committed: false, .. }));
        assert!(stopped(pool.put(0, Object::new("b", b"z")).map(drop)));
        assert!(stopped(
            pool.put_batch(0, &[Object::new("a", b"z"), Object::new("b", b"z")]).map(drop).map_err(Error::from)
        ));
        assert!(stopped(pool.close_lane(0)));
        assert!(stopped(pool.lane(1).map(drop)));
        assert!(stopped(pool.reclaim(0).map(drop)));
        let mut buf = [0u8; 8];
        assert_eq!(pool.get("a", 1, &mut buf), Ok(1));
        drop(pool);
        let mut pool = Pool::open(&media, HeapMemory::new()).unwrap();
        assert_eq!(pool.put(0, Object::new("a", b"y")).unwrap().version, 2);
    }

    /// A lane whose write position left its segment (forced here) stops the put before
    /// anything is stored — no payload ahead, no header, no commit word — and every later
    /// write of the pool; a reopen writes again.
    #[test]
    fn a_lane_outside_its_segment_stops_the_writes_before_any_store() {
        let mut mem = memory();
        let media = region(&mut mem);
        let opts = FormatOptions { segment_len: Some(64 << 10), ..FormatOptions::new(7) };
        let broken: [fn(&mut Lane); 4] = [
            |l| l.tail = l.seg_end + LINE,
            |l| l.tail += 8,
            |l| l.tail = l.seg_start,
            |l| l.seg_end = u64::MAX - LINE + 1,
        ];
        for (i, f) in broken.iter().enumerate() {
            let mut pool = Pool::format(&media, opts, HeapMemory::new()).unwrap();
            pool.put(0, Object::new("a", &[1; 100])).unwrap();
            f(pool.split_mut().1[0].get_mut());
            let before = bytes(&media);
            for lone in [true, false] {
                let r = match lone {
                    true => pool.put(0, Object::new("a", &[2; 100])).map(drop),
                    false => pool
                        .put_batch(0, &[Object::new("a", &[2; 64]), Object::new("b", &[3; 64])])
                        .map(drop)
                        .map_err(Error::from),
                };
                assert!(matches!(r, Err(Error::Invariant { committed: false, .. })), "case {i}: {r:?}");
            }
            assert!(bytes(&media) == before, "case {i}: nothing stored");
            let other = pool.put(1, Object::new("b", &[2; 100]));
            assert!(matches!(other, Err(Error::Invariant { committed: false, .. })), "case {i}: {other:?}");
            let (_, mem) = pool.close();
            let mut pool = Pool::open(&media, mem).unwrap();
            assert_eq!(pool.put(0, Object::new("a", &[2; 100])).unwrap().version, 2, "case {i}");
        }
    }

    /// `store_unit` refuses a unit that does not fit the lane's segment at its tail, storing
    /// nothing and leaving the lane where it was.
    #[test]
    fn seal_refuses_a_unit_past_its_segment() {
        let mut mem = memory();
        let media = region(&mut mem);
        let opts = FormatOptions { segment_len: Some(64 << 10), ..FormatOptions::new(7) };
        let mut pool = Pool::format(&media, opts, HeapMemory::new()).unwrap();
        pool.put(0, Object::new("a", &[1; 100])).unwrap();
        let (w, lanes, _) = pool.split_mut();
        let l = lanes[0].get_mut();
        let at = *l;
        let before = bytes(&media);
        for len in [l.seg_end - l.tail + LINE, LINE + 8, 0] {
            let r = w.seal(l, 0, seal::UnitKind::OBJECTS, 0, len, |_| Ok(0));
            assert!(matches!(r, Err(Error::Invariant { committed: false, .. })), "{len}: {r:?}");
            assert_eq!((l.tail, l.next_seq), (at.tail, at.next_seq));
        }
        assert!(bytes(&media) == before);
        // What fits is sealed.
        assert_eq!(w.seal(l, 0, seal::UnitKind::OBJECTS, 0, l.seg_end - l.tail, |_| Ok(0)), Ok((at.tail, at.next_seq)));
    }
}
