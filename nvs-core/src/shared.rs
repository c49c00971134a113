//! What the lanes and readers of one pool share, behind one lock, and the two ways the
//! write path reaches it (owned through `&mut Pool`, or locked by a lane writer).

use crate::error::{Error, Result};
use crate::format::BATCH_MAX;
use crate::index::{Index, IndexMemory, NONE};
use crate::object::LaneInfo;
use crate::object::PoolStats;
use crate::sync::RwLock;

/// Each lane as readers see it, as the lane cells are kept (`crate::log::lane::LaneCells`):
/// with `alloc`, on the heap and as many as the pool has lanes.
#[cfg(feature = "alloc")]
pub(crate) type LaneInfos = alloc::boxed::Box<[Option<LaneInfo>]>;
/// Each lane as readers see it: without `alloc`, inline, one per lane a pool may have.
#[cfg(not(feature = "alloc"))]
pub(crate) type LaneInfos = [Option<LaneInfo>; crate::format::LANES_MAX as usize];

/// No lane holding a segment, in a pool of `lanes` lanes.
fn lane_infos(lanes: u32) -> LaneInfos {
    #[cfg(feature = "alloc")]
    return alloc::vec![None; lanes as usize].into_boxed_slice();
    #[cfg(not(feature = "alloc"))]
    return {
        let _ = lanes;
        [None; crate::format::LANES_MAX as usize]
    };
}

/// What every lane and reader of a pool shares, behind one lock: the index, segment
/// allocation, the statistics and each lane as readers see it. Writers hold the lock
/// only to plan a unit (versions, index room, a segment) and to publish it — never while
/// they copy or fence, except for a unit that creates a new name, which holds it from
/// planning to publishing (`Committer::commit_unit` says why).
#[derive(Clone)]
pub(crate) struct Shared<X: IndexMemory> {
    pub index: Index<X>,
    pub alloc_cursor: u32,
    pub stats: PoolStats,
    /// Index entries planned by units not yet published (room reserved for them).
    pub pending_entries: usize,
    /// Per lane: units committed and whether closed, as published.
    pub lane_infos: LaneInfos,
    /// Name slot used by the object at each position of the last unit: a put of the
    /// same names again (a time step) checks the hint against the media instead of
    /// hashing the name and probing the table. A stale hint only misses.
    pub name_hints: [u32; BATCH_MAX],
    /// Why writes stopped, if they did: the invariant whose check failed
    /// ([`Error::Invariant`]), or a fence that failed ([`Error::NotDurable`]). Every later
    /// write is refused with it until the pool is opened again.
    pub stopped: Option<Error>,
}

impl<X: IndexMemory> Shared<X> {
    /// Nothing known yet: an empty index in `mem`.
    pub fn new(mem: X, lanes: u32) -> Self {
        Shared {
            index: Index::new(mem),
            alloc_cursor: 0,
            stats: PoolStats::default(),
            pending_entries: 0,
            lane_infos: lane_infos(lanes),
            name_hints: [NONE; BATCH_MAX],
            stopped: None,
        }
    }

    /// Writes go on: no invariant check and no fence has failed in this pool (else the
    /// error every later write gets: why writes stopped, nothing committed by this call).
    #[inline(always)]
    pub fn writes_allowed(&self) -> Result<()> {
        match self.stopped {
            None => Ok(()),
            Some(Error::Invariant { what, .. }) => Err(Error::Invariant { what, committed: false }),
            Some(e) => Err(e),
        }
    }

    /// `e`, having stopped every later write if it is a broken invariant or a failed fence.
    #[cold]
    pub fn stop_on(&mut self, e: Error) -> Error {
        if matches!(e, Error::Invariant { .. } | Error::NotDurable) {
            self.stopped.get_or_insert(e);
        }
        e
    }

    /// `n` planned entries are no longer pending (published, or their unit refused).
    /// More than are pending is a broken invariant (the index room planning reserves
    /// would be wrong from here on): the writes stop.
    #[inline(always)]
    pub fn unpend(&mut self, n: usize, committed: bool) -> Result<()> {
        match self.pending_entries.checked_sub(n) {
            Some(p) => {
                self.pending_entries = p;
                Ok(())
            }
            None => {
                Err(self.stop_on(Error::Invariant { what: "more index entries settled than were pending", committed }))
            }
        }
    }
}

/// Access to the [`Shared`] state: owned (`&mut Pool`) or behind the lock (a lane
/// writer); `with` runs a closure on it, taking the write lock if needed.
pub(crate) trait SharedAccess<X: IndexMemory> {
    fn with<R>(&mut self, f: impl FnOnce(&mut Shared<X>) -> R) -> R;
    /// The state without locking, when access is exclusive anyway.
    fn exclusive(&mut self) -> Option<&mut Shared<X>>;
}

/// Exclusive access: no lock.
pub(crate) struct Own<'a, X: IndexMemory>(pub &'a mut Shared<X>);

impl<X: IndexMemory> SharedAccess<X> for Own<'_, X> {
    fn with<R>(&mut self, f: impl FnOnce(&mut Shared<X>) -> R) -> R {
        f(self.0)
    }
    fn exclusive(&mut self) -> Option<&mut Shared<X>> {
        Some(self.0)
    }
}

/// Shared access: the write lock, held for the closure only. Its Release on unlock
/// publishes the index entries of a committed unit to readers, whose read lock (an
/// Acquire) then also sees the payload stores fenced before the commit.
pub(crate) struct Locked<'a, X: IndexMemory>(pub &'a RwLock<Shared<X>>);

impl<X: IndexMemory> SharedAccess<X> for Locked<'_, X> {
    fn with<R>(&mut self, f: impl FnOnce(&mut Shared<X>) -> R) -> R {
        f(&mut self.0.write())
    }
    fn exclusive(&mut self) -> Option<&mut Shared<X>> {
        None
    }
}
