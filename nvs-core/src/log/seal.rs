//! Sealing a unit: steps 3–6 of the commit protocol, for every kind of unit (a put, a
//! batch, an end-of-stream, truncate or detach marker). [`Committer::seal`] is the only code in
//! nvs that stores a unit's header and commit word and the fences between them; every
//! commit-sequence mutant hooks here, so the verifier checks marker units through the
//! same path as puts.

use super::lane::Lane;
use super::plan::PlanSlot;
use super::Committer;
use crate::error::{Error, Result};
use crate::format::{self, commit_word, UnitHeader, LINE};
use crate::index::IndexMemory;
use crate::media::Media;
use crate::mutant::{self, Mutant};
use crate::object::LaneInfo;
use crate::object::Object;
use crate::shared::SharedAccess;

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
    /// Seal the unit at `l`'s tail: `store_body(unit_off)` NT-stores its objects (none
    /// for a marker), then its header line, a fence, the commit word alone, a fence.
    /// Returns the unit's offset and sequence number; the lane moves past it. If
    /// `store_body` fails, what it stored is fenced (past the lane's log end, inside
    /// the planned unit) and nothing is committed: the lane stays where it was.
    ///
    /// Before anything is stored, the unit is checked to lie where a unit may (release
    /// builds too, a few compares): `Error::Invariant` if not, with nothing stored and
    /// the lane unchanged (the caller stops the pool's writes).
    ///
    /// `early_publish(unit_off, seq)` runs after every store of the unit is issued and
    /// before the first fence, for a caller no one can observe until this returns
    /// (exclusive access, or the lock held to the end): work there overlaps the drain.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn seal(
        &self,
        l: &mut Lane,
        lane: u32,
        kind: UnitKind,
        object_count: usize,
        unit_len: u64,
        store_body: impl FnOnce(u64) -> Result<()>,
        early_publish: impl FnOnce(u64, u64),
    ) -> Result<(u64, u64)> {
        // 3. Payloads and headers, all by NT stores. The unit header and commit word
        // are computed after the payloads are stored: work done while the NT stores
        // drain (before the fence) is nearly free, work done before them is not.
        let pool_id = self.sb.pool_id;
        let (unit_off, seq) = (l.tail, l.next_seq);
        // The unit lies on whole lines of the lane's segment (span), after its header
        // line and inside the pool (`Lane::sound`), from the tail: a unit stored anywhere
        // else would overwrite committed units or another lane's segment. Its sequence
        // number advances by one without wrapping, and its header holds its object count.
        if !(l.active
            && l.sound(self.sb)
            && unit_len >= LINE
            && unit_len.is_multiple_of(LINE)
            && unit_len <= l.seg_end - unit_off)
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
        let header = || {
            let mut bh = UnitHeader {
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
            bh.checksum = bh.compute_checksum(pool_id);
            (bh, commit_word(pool_id, lane, seq, bh.checksum))
        };
        let early_commit = mutant::on(Mutant::CommitBeforePayload);
        if early_commit {
            self.media.store_word_nt(unit_off as usize, header().1);
        }
        let late_body = mutant::on(Mutant::PayloadAfterFirstFence);
        let refuse = |e| {
            // Drain what was stored (a segment claim's header too) before going on.
            self.media.fence();
            Err(e)
        };
        let mut store_body = Some(store_body);
        if !late_body {
            if let Some(Err(e)) = store_body.take().map(|f| f(unit_off)) {
                return refuse(e);
            }
        }
        let (mut bh, commit) = header();
        // The header as one whole-line NT store: its first word, the commit word slot,
        // gets `!commit` — never the commit word itself, which follows alone after the
        // fence. A whole line is one write-combining flush; the 56 bytes after the slot
        // alone would be a partial one, which costs more. (The early-commit mutant stored
        // the commit word in the slot already: it keeps it there.)
        bh.commit = !commit;
        if early_commit {
            self.media.store_nt(unit_off as usize + 8, &bytemuck::bytes_of(&bh)[8..]);
        } else {
            // From registers (`Media::store_line_nt`).
            self.media.store_line_nt(unit_off as usize, bh.words());
        }
        let mut early_publish = Some(early_publish);
        if !late_body {
            if let Some(f) = early_publish.take() {
                f(unit_off, seq)
            }
        }
        // 4. Everything but the commit word is durable after this fence.
        if !mutant::on(Mutant::NoFenceBeforeCommit) {
            self.media.fence();
        }
        if let Some(Err(e)) = store_body.take().map(|f| f(unit_off)) {
            return refuse(e);
        }
        if let Some(f) = early_publish.take() {
            f(unit_off, seq)
        }
        // 5–6. The commit word (alone: nothing else changes), then the fence that makes
        // the commit durable.
        if mutant::on(Mutant::CachedCommit) {
            self.media.store(unit_off as usize, &commit.to_le_bytes());
        } else if mutant::on(Mutant::StraddlingCommit) {
            let b = commit.to_le_bytes();
            self.media.store(unit_off as usize, &b[..4]);
            self.media.store(unit_off as usize + 4, &b[4..]);
            self.media.flush(unit_off as usize, 8);
        } else if !early_commit {
            // The header's whole line again, with the commit word in its slot: bytes
            // 8..64 are the ones just made durable, so only the commit word changes (a
            // lone 8-byte store would be a partial write-combining flush, slower to fence).
            bh.commit = commit;
            self.media.store_commit_line(unit_off as usize, bytemuck::cast_ref(&bh));
        }
        if !mutant::on(Mutant::NoFinalFence) {
            self.media.fence();
        }
        l.tail = unit_off + unit_len;
        l.next_seq = next_seq;
        match kind.flags {
            format::UNIT_TRUNCATE => {}
            flags => (l.closed, l.detached) = (flags == format::UNIT_END_OF_STREAM, flags == format::UNIT_DETACH),
        }
        Ok((unit_off, seq))
    }

    /// A unit of objects, planned in `plan` (`unit_len` bytes): sealed with its objects
    /// as the body. See [`Self::seal`] for `early_publish`.
    pub(super) fn write_unit(
        &self,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut [PlanSlot],
        unit_len: u64,
        early_publish: impl FnOnce(u64, u64, &[PlanSlot]),
    ) -> Result<(u64, u64)> {
        let plan = core::cell::RefCell::new(plan);
        self.seal(
            l,
            lane,
            UnitKind::OBJECTS,
            objects.len(),
            unit_len,
            |off| self.store_objects(objects, &mut plan.borrow_mut(), off),
            |off, seq| early_publish(off, seq, &plan.borrow()),
        )
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
        let sealed = self.seal(l, lane, kind, 0, LINE, |_| Ok(()), |_, _| {});
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
