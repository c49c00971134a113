//! Sealing a unit: steps 3–6 of the commit protocol, for every kind of unit (a put, a
//! batch, an end-of-stream, truncate or detach marker). [`Committer::store_unit`] and
//! [`Committer::commit`] are the only code in nvs that stores a unit's header and commit
//! word and the fences between them (through [`UnitStores`], where the commit-sequence
//! mutants hook), so the verifier checks marker units through the same path as puts.

use super::lane::Lane;
use super::steps::UnitStores;
use super::Committer;
use crate::error::{Error, Result};
use crate::format::{self, UnitHeader, LINE};
use crate::index::IndexMemory;
use crate::media::Media;
use crate::object::LaneInfo;
use crate::shared::SharedAccess;

/// A unit stored but not yet committed ([`Committer::store_unit`]).
pub(super) struct Sealing<'a, M: Media> {
    stores: UnitStores<'a, M>,
    /// Its offset, sequence number, and the lane's next ones.
    pub off: u64,
    pub seq: u64,
    next_seq: u64,
    end: u64,
    kind: UnitKind,
}

/// What a unit is, besides its objects.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UnitKind {
    /// Unit header flags: 0 for objects, `UNIT_END_OF_STREAM`, `UNIT_TRUNCATE`,
    /// `UNIT_DETACH`.
    pub flags: u64,
    /// The retention base of a truncate unit (`UnitHeader::base`), else 0.
    pub base: u64,
}

impl UnitKind {
    /// A unit of objects.
    pub const OBJECTS: UnitKind = UnitKind { flags: 0, base: 0 };
}

impl<M: Media> Committer<'_, M> {
    /// Step 3 for the unit at `l`'s tail: `store_body(unit_off)` NT-stores its objects
    /// (none for a marker) and returns their digest ([`format::ObjectsDigest`]), then
    /// its header. Returns the unit's stores, for
    /// [`Self::commit`] to fence and commit; nothing is fenced yet, so work between the
    /// two calls overlaps the drain. If `store_body` fails, what it stored is fenced
    /// (past the lane's log end, inside the planned unit) and nothing is committed.
    ///
    /// Before anything is stored, the unit is checked to lie where a unit may (release
    /// builds too, a few compares): `Error::Invariant` if not, with nothing stored (the
    /// caller stops the pool's writes). The lane is unchanged either way.
    pub(super) fn store_unit(
        &self,
        l: &Lane,
        lane: u32,
        kind: UnitKind,
        object_count: usize,
        unit_len: u64,
        store_body: impl FnOnce(u64) -> Result<u64>,
    ) -> Result<Sealing<'_, M>> {
        let (off, seq) = (l.tail, l.next_seq);
        // The unit lies on whole lines of the lane's segment (span), after its header
        // line and inside the pool (`Lane::sound`), from the tail: a unit stored anywhere
        // else would overwrite committed units or another lane's segment. Its sequence
        // number advances by one without wrapping, and its header holds its object count.
        if !(l.active
            && l.sound(self.sb)
            && unit_len >= LINE
            && unit_len.is_multiple_of(LINE)
            && unit_len <= l.seg_end - off)
        {
            return Err(Error::Invariant {
                what: "a unit to seal does not fit its lane's segment at the tail",
                committed: false,
            });
        }
        let (Some(next_seq), Ok(object_count)) = (seq.checked_add(1), u32::try_from(object_count)) else {
            return Err(Error::Invariant {
                what: "a unit's sequence number or object count overflows",
                committed: false,
            });
        };
        let header = UnitHeader {
            commit: 0,
            seq,
            unit_len,
            object_count,
            lane,
            flags: kind.flags,
            base: kind.base,
            reserved: 0,
            checksum: 0,
        };
        let mut stores = UnitStores::new(self.media, off, self.sb.pool_id, header, self.sb.one_fence());
        // 3. The objects, then the header.
        let mut digest = 0;
        stores.body(|| store_body(off).map(|d| digest = d))?;
        stores.set_digest(digest);
        stores.header();
        Ok(Sealing { stores, off, seq, next_seq, end: off + unit_len, kind })
    }

    /// Steps 4–6 of a unit [`Self::store_unit`] stored: fence, the commit word alone,
    /// fence (a sealed unit: its one fence). The lane moves past the unit. Returns its offset and sequence number.
    pub(super) fn commit(&self, l: &mut Lane, unit: Sealing<'_, M>) -> (u64, u64) {
        unit.stores.fence_before_commit(); // 4. durable, not yet committed
        unit.stores.commit(); // 5.
        unit.stores.fence_after_commit(); // 6. committed
        l.tail = unit.end;
        l.next_seq = unit.next_seq;
        match unit.kind.flags {
            format::UNIT_TRUNCATE => {}
            flags => (l.closed, l.detached) = (flags == format::UNIT_END_OF_STREAM, flags == format::UNIT_DETACH),
        }
        (unit.off, unit.seq)
    }

    /// Steps 3–6 at once ([`Self::store_unit`], then [`Self::commit`]), for a unit no
    /// one publishes while it drains.
    pub(super) fn seal(
        &self,
        l: &mut Lane,
        lane: u32,
        kind: UnitKind,
        object_count: usize,
        unit_len: u64,
        store_body: impl FnOnce(u64) -> Result<u64>,
    ) -> Result<(u64, u64)> {
        let unit = self.store_unit(l, lane, kind, object_count, unit_len, store_body)?;
        Ok(self.commit(l, unit))
    }

    /// A unit of no objects (an end-of-stream, truncate or detach marker) at the lane's tail,
    /// claiming a segment first if the lane has no room for it.
    pub(crate) fn marker_unit<X: IndexMemory>(
        &self,
        shared: &mut impl SharedAccess<X>,
        l: &mut Lane,
        lane: u32,
        kind: UnitKind,
    ) -> Result<()> {
        self.check_writable_lane(lane)?;
        // A truncate unit may take a segment's last line; other markers leave it free
        // (`Lane::has_room`).
        let room = if kind.flags == format::UNIT_TRUNCATE { l.has_room_for_truncate() } else { l.has_room(LINE) };
        *l = shared.with(|s| {
            s.writes_allowed()?;
            match room {
                true => Ok(*l),
                false => self.claim(s, lane, *l, 1),
            }
        })?;
        let empty = format::ObjectsDigest::new(self.sb.pool_id).finish();
        let sealed = self.seal(l, lane, kind, 0, LINE, |_| Ok(empty));
        shared.with(|s| {
            sealed.map_err(|e| s.stop_on(e))?;
            // A media whose fences can fail, and one did: readers keep the lane as it was.
            if self.media.fence_may_fail() && self.media.fence_failed() {
                return Err(s.stop_on(Error::NotDurable));
            }
            s.stats.units += 1;
            s.lane_infos[lane as usize] = Some(LaneInfo { units: l.next_seq, closed: l.closed, detached: l.detached });
            Ok(())
        })
    }
}
