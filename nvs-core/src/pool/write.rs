//! Puts through `&mut Pool`: no other writer exists, so no lock is taken.

use super::Pool;
use crate::error::{BatchError, Error, Result};
use crate::format::{BATCH_MAX, UNIT_DETACH, UNIT_END_OF_STREAM};
use crate::index::IndexMemory;
use crate::log::plan::{Plan, PlanBuf, PlanSlot, SlotPlan};
use crate::log::seal::UnitKind;
use crate::media::Media;
use crate::object::{Object, Put, Versions};
use crate::shared::Own;

impl<M: Media, X: IndexMemory> Pool<M, X> {
    /// Put `object` on `lane`. Returns what was committed, after the commit is durable.
    ///
    /// # Errors
    /// Nothing is committed on any error, and nothing is written for a refusal of the input:
    /// `NameEmpty`, `NameTooLong`, `MetaTooLong`, `TooLarge`, `BatchSize`, `VersionNotIncreasing`,
    /// `DeltaRanges`, `NoSuchLane`. The pool's state refuses with `ReadOnly`, `LaneBusy` or
    /// `LaneNotOwned` (another writer has the lane), `Full` or `Fragmented` (no room),
    /// `IndexFull`, `ClaimLockTimeout`, `ChangesInconsistent` (a delta's `Changes` changed
    /// their answer), and `Invariant` if a check of nvs's own state failed (the pool then
    /// takes no more writes until reopened).
    pub fn put(&mut self, lane: u32, object: Object<'_>) -> Result<Put> {
        let mut plan = Plan::<1>::new();
        self.commit(lane, &[object], &mut plan)?;
        Ok(put_of(&plan))
    }

    /// Commit every object of `objects` together, on `lane`: after a crash either all
    /// are recovered or none. Returns their versions, after the commit is durable.
    ///
    /// # Errors
    /// A [`BatchError`]: the [`Error`], and the index of the object it is about when it
    /// is one object's (`index: Some(i)`, displayed as `object i of the batch: ...`).
    /// Nothing is committed on any error, and nothing is written for a refusal of the input:
    /// of one object — `NameEmpty`, `NameTooLong`, `MetaTooLong`, `TooLarge`,
    /// `VersionNotIncreasing`, `DeltaRanges`, each with the first refused object's index —
    /// or of the batch — `BatchSize`, `NoSuchLane`, and `TooLarge` for a unit too large as
    /// a whole (`index: None`). The pool's state refuses with `ReadOnly`, `LaneBusy` or
    /// `LaneNotOwned` (another writer has the lane), `Full` or `Fragmented` (no room),
    /// `IndexFull`, `ClaimLockTimeout`, `ChangesInconsistent` (a delta's `Changes` changed
    /// their answer), and `Invariant` if a check of nvs's own state failed (the pool then
    /// takes no more writes until reopened) — all with `index: None`.
    pub fn put_batch(&mut self, lane: u32, objects: &[Object<'_>]) -> core::result::Result<Versions, BatchError> {
        let mut plan = Plan::<BATCH_MAX>::new();
        let r = self.commit(lane, objects, &mut plan);
        r.map_err(|e| batch_error(e, objects.len(), plan.len()))?;
        Ok(versions_of(&plan))
    }

    /// A batch of any number of objects (up to what the pool holds), committed together
    /// like [`Self::put_batch`], with its plan kept in `slots` (at least one per object,
    /// `PlanSlot::default()`; a batch of up to [`BATCH_MAX`] needs none: `put_batch`).
    /// Returns how many objects were committed; `slots[i].version()` is object `i`'s
    /// version. Fewer slots than objects is `BatchSize`.
    ///
    /// # Errors
    /// A [`BatchError`]: the [`Error`], and the index of the object it is about when it
    /// is one object's (`index: Some(i)`, displayed as `object i of the batch: ...`).
    /// Nothing is committed on any error, and nothing is written for a refusal of the input:
    /// of one object — `NameEmpty`, `NameTooLong`, `MetaTooLong`, `TooLarge`,
    /// `VersionNotIncreasing`, `DeltaRanges`, each with the first refused object's index —
    /// or of the batch — `BatchSize`, `NoSuchLane`, and `TooLarge` for a unit too large as
    /// a whole (`index: None`). The pool's state refuses with `ReadOnly`, `LaneBusy` or
    /// `LaneNotOwned` (another writer has the lane), `Full` or `Fragmented` (no room),
    /// `IndexFull`, `ClaimLockTimeout`, `ChangesInconsistent` (a delta's `Changes` changed
    /// their answer), and `Invariant` if a check of nvs's own state failed (the pool then
    /// takes no more writes until reopened) — all with `index: None`.
    /// `BatchSize` also if `slots` is shorter than `objects`.
    pub fn put_batch_in(
        &mut self,
        lane: u32,
        objects: &[Object<'_>],
        slots: &mut [PlanSlot],
    ) -> core::result::Result<usize, BatchError> {
        let mut plan = SlotPlan::new(slots);
        let r = self.commit(lane, objects, &mut plan);
        r.map_err(|e| batch_error(e, objects.len(), plan.len()))?;
        Ok(plan.len())
    }

    /// Close `lane`'s stream: commit an end-of-stream marker (a unit of no objects) by
    /// the same protocol as a put. Followers see the end of the stream; a later put on
    /// the lane reopens it.
    ///
    /// # Errors
    /// `NoSuchLane`, `ReadOnly`, `LaneBusy`, `LaneNotOwned`; `Full` if no segment has room
    /// for the end-of-stream unit; `ClaimLockTimeout`.
    pub fn close_lane(&mut self, lane: u32) -> Result<()> {
        let (w, lanes, shared) = self.split_mut();
        w.check_writable_lane(lane)?;
        let kind = UnitKind { flags: UNIT_END_OF_STREAM, base: 0 };
        w.marker_unit(&mut Own(shared), lanes[lane as usize].get_mut(), lane, kind)
    }

    /// Detach from `lane` without closing its stream: commit a detach marker, which
    /// tells followers that the writer ended cleanly (they go on waiting for a later
    /// writer, instead of reporting it gone). A later put on the lane continues it.
    ///
    /// # Errors
    /// `NoSuchLane`, `ReadOnly`, `LaneBusy`, `LaneNotOwned`; `Full` if no segment has room
    /// for the detach unit; `ClaimLockTimeout`.
    pub fn detach_lane(&mut self, lane: u32) -> Result<()> {
        let (w, lanes, shared) = self.split_mut();
        w.check_writable_lane(lane)?;
        let kind = UnitKind { flags: UNIT_DETACH, base: 0 };
        w.marker_unit(&mut Own(shared), lanes[lane as usize].get_mut(), lane, kind)
    }

    /// A unit on `lane` through `&mut self`.
    fn commit(&mut self, lane: u32, objects: &[Object<'_>], plan: &mut impl PlanBuf) -> Result<()> {
        let (w, lanes, shared) = self.split_mut();
        let lanes_max = w.sb.lanes_max;
        let cell = lanes.get_mut(lane as usize).ok_or(Error::NoSuchLane { lane, lanes_max })?;
        w.commit_unit(&mut Own(shared), cell.get_mut(), lane, objects, plan)
    }
}

/// What the single object of a put's plan became.
pub(super) fn put_of(plan: &[PlanSlot]) -> Put {
    plan.first().map_or(Put { version: 0, stored_bytes: 0, delta: false }, |p| Put {
        version: p.version,
        stored_bytes: p.stored,
        delta: p.delta.is_some(),
    })
}

/// `error`, refusing a batch of `count` objects whose plan held `planned` slots then,
/// with the object at fault named if it is one object's ([`BatchError::index`]).
/// Planning (`plan_unit`) checks the objects in order and adds each one's slot to the
/// plan as it passes, and nothing before it refuses an object's input: a refusal of one
/// object's input comes with exactly the objects before it planned. Every error after
/// planning (the plan whole) is the unit's, not one object's.
pub(super) fn batch_error(error: Error, count: usize, planned: usize) -> BatchError {
    let index = (planned < count && error.is_one_objects()).then_some(planned);
    BatchError { index, error }
}

/// The versions of a batch's plan.
pub(super) fn versions_of(plan: &[PlanSlot]) -> Versions {
    let mut v = Versions::default();
    plan.iter().for_each(|p| v.push(p.version));
    v
}
