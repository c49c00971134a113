//! [`LaneWriter`]: one thread's writer for one lane.

use super::write::{batch_error, put_of, versions_of};
use super::Pool;
use crate::error::{BatchError, Result};
use crate::format::{BATCH_MAX, UNIT_END_OF_STREAM};
use crate::index::IndexMemory;
use crate::log::plan::{Plan, PlanBuf, PlanSlot, SlotPlan};
use crate::log::seal::UnitKind;
use crate::media::Media;
use crate::object::{Object, Put, Versions};
use crate::shared::Locked;
use core::fmt;

/// One thread's writer for one lane (from [`Pool::lane`]): puts with no lock held
/// while it copies and fences, beside other lanes' writers and readers. Dropping it
/// gives the lane back (it stays open: [`LaneWriter::close`] ends its stream).
pub struct LaneWriter<'p, M: Media, X: IndexMemory> {
    pub(super) pool: &'p Pool<M, X>,
    pub(super) lane: u32,
}

impl<M: Media, X: IndexMemory> LaneWriter<'_, M, X> {
    /// The lane this writer holds.
    pub fn lane(&self) -> u32 {
        self.lane
    }

    /// Put `object` on this lane ([`Pool::put`]).
    ///
    /// # Errors
    /// Nothing is committed on any error, and nothing is written for a refusal of the input:
    /// `NameEmpty`, `NameTooLong`, `MetaTooLong`, `TooLarge`, `BatchSize`, `VersionNotIncreasing`,
    /// `DeltaRanges`, `NoSuchLane`. The pool's state refuses with `ReadOnly`, `LaneBusy` or
    /// `LaneNotOwned` (another writer has the lane), `Full` or `Fragmented` (no room),
    /// `IndexFull`, `ClaimLockTimeout`, `ChangesInconsistent` (a delta's `Changes` changed
    /// their answer), and `Invariant` if a check of nvs's own state failed (the pool then
    /// takes no more writes until reopened).
    pub fn put(&mut self, object: Object<'_>) -> Result<Put> {
        let mut plan = Plan::<1>::new();
        self.commit(&[object], &mut plan)?;
        Ok(put_of(&plan))
    }

    /// Commit every object together (all or nothing after a crash; [`Pool::put_batch`]).
    ///
    /// # Errors
    /// A [`BatchError`](crate::BatchError): the [`Error`](crate::Error), and the index of the object it is about when it
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
    pub fn put_batch(&mut self, objects: &[Object<'_>]) -> core::result::Result<Versions, BatchError> {
        let mut plan = Plan::<BATCH_MAX>::new();
        let r = self.commit(objects, &mut plan);
        r.map_err(|e| batch_error(e, objects.len(), plan.len()))?;
        Ok(versions_of(&plan))
    }

    /// A batch of any size, its plan in `slots` ([`Pool::put_batch_in`]).
    ///
    /// # Errors
    /// A [`BatchError`](crate::BatchError): the [`Error`](crate::Error), and the index of the object it is about when it
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
        objects: &[Object<'_>],
        slots: &mut [PlanSlot],
    ) -> core::result::Result<usize, BatchError> {
        let mut plan = SlotPlan::new(slots);
        let r = self.commit(objects, &mut plan);
        r.map_err(|e| batch_error(e, objects.len(), plan.len()))?;
        Ok(plan.len())
    }

    /// Close the lane's stream (an end-of-stream marker; [`Pool::close_lane`]).
    ///
    /// # Errors
    /// `Full` if no segment has room for the end-of-stream unit; `ClaimLockTimeout`.
    pub fn close(&mut self) -> Result<()> {
        let p = self.pool;
        let w = p.writer();
        let kind = UnitKind { flags: UNIT_END_OF_STREAM, base: 0 };
        // SAFETY: this writer holds the lane's claim (taken in `Pool::lane`, released in
        // `drop`), and `&mut self` keeps it from re-entering.
        unsafe {
            p.lanes[self.lane as usize].with_claimed(|l| w.marker_unit(&mut Locked(&p.shared), l, self.lane, kind))
        }
    }

    fn commit(&mut self, objects: &[Object<'_>], plan: &mut impl PlanBuf) -> Result<()> {
        let p = self.pool;
        let w = p.writer();
        // SAFETY: as in `close`.
        unsafe {
            p.lanes[self.lane as usize]
                .with_claimed(|l| w.commit_unit(&mut Locked(&p.shared), l, self.lane, objects, plan))
        }
    }
}

impl<M: Media, X: IndexMemory> Drop for LaneWriter<'_, M, X> {
    fn drop(&mut self) {
        self.pool.lanes[self.lane as usize].release();
    }
}

impl<M: Media, X: IndexMemory> fmt::Debug for LaneWriter<'_, M, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaneWriter").field("lane", &self.lane).finish_non_exhaustive()
    }
}
