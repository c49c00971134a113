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
//! 3. NT-store the unit header (all but the commit word), every object header + name
//!    and every payload;
//! 4. fence — the unit is durable, but not yet committed;
//! 5. NT-store the 8-byte commit word alone, aligned;
//! 6. fence — committed; only now does the call return, and only now can anyone see the
//!    objects in the index (written before step 4 when no one can look meanwhile).
//!
//! Rooms: [`plan`] (step 1: validate, versions, index room), [`segments`] (step 2 and
//! every other change of segment ownership), [`write`] (step 3's objects, and the index
//! learning a unit), [`seal`] (steps 3–6 for every unit: the only place a commit word is
//! stored), [`lane`] (a lane's write position).

pub(crate) mod lane;
pub(crate) mod plan;
pub(crate) mod seal;
pub(crate) mod segments;
pub(crate) mod write;

use crate::delta::DeltaOptions;
use crate::error::{Error, Result};
use crate::format::Superblock;
use crate::index::IndexMemory;
use crate::media::Media;
use crate::object::Object;
use crate::shared::SharedAccess;
use lane::Lane;
use plan::PlanBuf;

/// What the commit path needs of a pool besides the shared state and the lane: the
/// media and the superblock (both immutable once open).
pub(crate) struct Writer<'a, M: Media> {
    pub media: &'a M,
    pub sb: &'a Superblock,
    pub writable: bool,
    pub delta: DeltaOptions,
    /// The lanes this pool writes beside writers in other processes (`None`: the only
    /// writer, of every lane).
    pub owned: Option<LaneSet>,
}

/// A set of lanes: those a pool writes beside writers in other processes
/// ([`crate::Pool::open_lanes`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LaneSet([u64; 4]);

// Every lane a pool can have fits the set's 256 bits.
static_assertions::const_assert!(crate::limits::LANES_MAX <= 256);

impl LaneSet {
    pub fn insert(&mut self, lane: u32) {
        if let Some(w) = self.0.get_mut(lane as usize / 64) {
            *w |= 1 << (lane % 64);
        }
    }
    pub fn has(&self, lane: u32) -> bool {
        self.0.get(lane as usize / 64).is_some_and(|w| w & 1 << (lane % 64) != 0)
    }
}

impl<M: Media> Writer<'_, M> {
    /// One unit through the whole commit protocol (module docs, DESIGN.md). `plan` is
    /// empty on entry and holds one [`PlanSlot`] per object on success; on error nothing
    /// was committed, and nothing was written except, for a lone put refused in planning,
    /// its payload past the lane's log end ([`Self::store_payload_ahead`]).
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
        self.check_lane(lane)?;
        if objects.is_empty() || objects.len() > plan.capacity() {
            return Err(Error::BatchSize { count: objects.len() });
        }
        let ahead = self.store_payload_ahead(l, objects);
        // A batch through `&mut Pool` stores its payloads while it is planned (no lock is
        // held: nothing else waits meanwhile).
        let interleave = shared.exclusive().is_some() && self.batch_fits_ahead(l, objects);
        let unlocked = shared.with(|s| -> Result<Option<u64>> {
            let (unit_len, new_names) = self.plan_unit(s, l, lane, objects, plan, interleave)?;
            debug_assert!(!interleave || !plan.iter().any(|p| p.delta.is_some()), "a batch stored ahead has no deltas");
            s.index.prefetch_for(plan.iter().map(|p| (p.name_id, p.version)));
            if let (Some((off, sum)), Some(p)) = (ahead, plan.first_mut()) {
                debug_assert_eq!(off, l.tail, "the unit moved after its payload was stored");
                p.payload_stored = true;
                p.payload_sum = sum;
            }
            if new_names == 0 {
                return Ok(Some(unit_len));
            }
            // The lock is held until after the commit: the index may learn the unit while
            // its stores drain, as no one can look before the lock is released.
            let written = self.write_unit(l, lane, objects, plan, unit_len, |off, seq, plan| {
                self.publish(s, lane, off, seq, objects, plan)
            });
            written.inspect_err(|_| s.pending_entries -= objects.len())?;
            Ok(None)
        })?;
        if let Some(unit_len) = unlocked {
            let written = match shared.exclusive() {
                // Exclusive access (`&mut Pool`): no one can look at the index until this
                // call returns, after the commit, so it learns the unit while the unit's
                // stores drain (work between the two fences and the next unit's stores
                // would wait for the commit fence; work before the first one is free).
                Some(s) => self
                    .write_unit(l, lane, objects, plan, unit_len, |off, seq, plan| {
                        self.publish(s, lane, off, seq, objects, plan)
                    })
                    .map(|_| ()),
                // A lane writer: the index learns the unit under the lock, after its commit.
                None => self
                    .write_unit(l, lane, objects, plan, unit_len, |_, _, _| {})
                    .map(|(off, seq)| shared.with(|s| self.publish(s, lane, off, seq, objects, plan))),
            };
            // A refused unit (its delta's `Changes` changed its answer) leaves no entry
            // pending. Its versions stay taken: a version number is skipped, never reused.
            written.inspect_err(|_| shared.with(|s| s.pending_entries -= objects.len()))?;
        }
        Ok(())
    }

    /// Writes are allowed, to a lane this pool has.
    pub fn check_lane(&self, lane: u32) -> Result<()> {
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
