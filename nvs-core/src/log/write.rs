//! Step 3's objects: payloads, object headers and names by NT stores (a lone put's
//! payload even before its unit is planned), and the index learning a committed unit.

use super::lane::Lane;
use super::plan::PlanSlot;
use super::steps::UnitStores;
use super::Committer;
use crate::delta;
use crate::error::{Error, Result};
use crate::format::sum::{Sum, SumKind, Summer};
use crate::format::{self, head_len, line_up, object_head_len, ObjectHeader, LINE, META_MAX, NAME_MAX};
use crate::index::{Entry, IndexMemory, NONE};
use crate::media::Media;
use crate::object::{LaneInfo, Object};
use crate::shared::Shared;
use crate::stream::NtStream;
use core::mem::size_of;

impl<M: Media> Committer<'_, M> {
    /// Store the payload of a lone full object before its unit is planned, when where it
    /// goes is already known: the lane's segment has room for the unit at its tail (so
    /// planning will not claim another). Planning (the name's index lookup, its version,
    /// index room) then runs while the payload's NT stores drain, instead of before them,
    /// which hides most of what a put costs beyond the copy and the two fences.
    /// Returns the unit's offset (the lane's tail) and the payload's checksum if the
    /// payload was stored.
    ///
    /// If planning then refuses the put (index full, the name's versions exhausted),
    /// these bytes stay behind past the lane's log end — where a crash mid-put leaves
    /// bytes too, and where nothing is read: the unit's commit word slot, headers and
    /// everything before the tail are untouched, so nothing committed changes
    /// (DESIGN.md, write path).
    pub(super) fn store_payload_ahead(&self, l: &Lane, objects: &[Object<'_>]) -> Option<(u64, u64)> {
        let [o] = objects else { return None };
        // Not for an explicit version (a caller's mistake there is refused in planning)
        // nor a delta (planning decides what it stores).
        if o.delta.is_some()
            || o.version.is_some()
            || o.name.is_empty()
            || o.name.len() > NAME_MAX
            || !o.meta.is_empty()
            || !l.active
        {
            return None;
        }
        let len = o.len_bytes();
        if len > self.sb.max_object_bytes(o.name.len()) || !UnitStores::<M>::may_store_ahead() {
            return None;
        }
        let unit_len = LINE + format::object_len(o.name.len(), len);
        if !l.has_room(unit_len) {
            return None;
        }
        let sum = self.store_full(o.parts(), l.tail + LINE + object_head_len(o.name.len()));
        Some((l.tail, sum))
    }

    /// Whether a batch's payloads can be stored while it is planned (`plan_unit`'s
    /// `interleave`): as for a lone put's [`Self::store_payload_ahead`], every object full,
    /// without an explicit version or metadata, its name and size valid, and the whole
    /// unit fits at the tail of the lane's segment (so planning claims nothing and the
    /// payloads' places are known before their versions are).
    pub(super) fn batch_fits_ahead(&self, l: &Lane, objects: &[Object<'_>]) -> bool {
        if !l.active || objects.len() < 2 || !UnitStores::<M>::may_store_ahead() {
            return false;
        }
        let mut unit_len = LINE;
        for o in objects {
            let len = o.len_bytes();
            if o.delta.is_some()
                || o.version.is_some()
                || o.name.is_empty()
                || o.name.len() > NAME_MAX
                || !o.meta.is_empty()
                || len > self.sb.max_object_bytes(o.name.len())
            {
                return false;
            }
            unit_len += format::object_len(o.name.len(), len);
        }
        l.has_room(unit_len)
    }

    /// NT-store the payload of a full object (`parts`) at `payload_off`; returns its
    /// checksum (0 without payload checksums). nvs-sum is computed by the stores
    /// themselves, in the same pass over the caller's bytes; a format-1 pool's
    /// nvs-hash64 from the caller's (cached) buffers after the copy, while it drains.
    pub(super) fn store_full(&self, parts: &[&[u8]], payload_off: u64) -> u64 {
        let kind = self.sb.sum_kind();
        // One part of whole lines (the usual payload): no partial word to carry, no
        // padding, so the media's store directly, without the stream.
        if let [p] = parts {
            if (p.len() as u64).is_multiple_of(LINE) {
                match kind {
                    SumKind::None => {
                        self.media.store_nt(payload_off as usize, p);
                        return 0;
                    }
                    SumKind::Sum => {
                        let mut sum = Sum::new(self.sb.pool_id);
                        self.media.store_nt_summed(payload_off as usize, p, &mut sum);
                        return sum.finish(p.len() as u64);
                    }
                    SumKind::Hash64 => {}
                }
            }
        }
        let mut w = NtStream::new(self.media, payload_off);
        if kind == SumKind::Sum {
            w = w.summed(Sum::new(self.sb.pool_id));
        }
        parts.iter().for_each(|p| w.write(p));
        let summed = w.finish();
        let len = parts.iter().map(|p| p.len() as u64).sum();
        match (kind, summed) {
            (SumKind::Sum, Some(s)) => s.finish(len),
            _ => Summer::new(kind, self.sb.pool_id).map_or(0, |mut h| {
                parts.iter().for_each(|p| h.write(p));
                h.finish(len)
            }),
        }
    }

    /// NT-store every object of a unit starting at `unit_off`: every payload, then every
    /// header and name; returns the digest of the headers' checksums (a sealed unit's) (the order of NT stores before a fence does not matter: all of
    /// them are pending until it). The header checksums are computed while the payloads
    /// drain.
    pub(super) fn store_objects(&self, objects: &[Object<'_>], plan: &mut [PlanSlot], unit_off: u64) -> Result<u64> {
        let pool_id = self.sb.pool_id;
        let mut digest = format::ObjectsDigest::new(pool_id);
        // Every payload first, then every header: a header's checksum covers its
        // payload's, a chain of dependent multiplies, and with the payloads done first
        // the chains of a batch's headers are independent of each other and of the
        // copies, so they run side by side instead of one after each copy.
        let mut obj_off = unit_off + LINE;
        for (o, p) in objects.iter().zip(plan.iter_mut()) {
            let payload_off = obj_off + head_len(o.name.len(), o.meta.len());
            p.payload_sum = match (o.delta, p.delta) {
                (Some(d), Some(plan)) => {
                    delta::write::store(self.media, self.sb, &self.delta, o.parts(), d.changes, plan, payload_off)?
                }
                // Stored ahead (`store_payload_ahead`), with its sum.
                _ if p.payload_stored => p.payload_sum,
                _ => self.store_full(o.parts(), payload_off),
            };
            obj_off = payload_off + line_up(p.stored);
        }
        let mut obj_off = unit_off + LINE;
        for (o, p) in objects.iter().zip(plan.iter()) {
            let payload_off = obj_off + head_len(o.name.len(), o.meta.len());
            let payload_sum = p.payload_sum;
            let mut oh = ObjectHeader {
                version: p.version,
                payload_len: p.stored,
                name_len: o.name.len() as u16,
                flags: if p.delta.is_some() { format::OBJECT_DELTA } else { 0 },
                depth: p.delta.map_or(0, |d| d.depth as u16),
                meta_len: o.meta.len() as u16,
                payload_sum,
                object_len: if p.delta.is_some() { p.len } else { 0 },
                checksum: 0,
            };
            oh.checksum = oh.compute_checksum(pool_id, o.name, o.meta);
            digest.add(oh.checksum);
            // Header, name and zero padding to the payload's line, as whole-line NT
            // stores (a partial line is a slower write-combining flush), from registers
            // (`Media::store_line_nt`): the header's six words, then the name's.
            if o.meta.is_empty() {
                let head = oh.words();
                for j in 0..(object_head_len(o.name.len()) / LINE) as usize {
                    let line = core::array::from_fn(|i| match (8 * j + i).checked_sub(head.len()) {
                        None => head.get(i).copied().unwrap_or(0),
                        Some(k) => word_of(o.name, k),
                    });
                    self.media.store_line_nt(obj_off as usize + LINE as usize * j, line);
                }
            } else {
                // With metadata: header, name, metadata and padding, assembled once.
                let head = size_of::<ObjectHeader>();
                let mut buf = [0u8; size_of::<ObjectHeader>() + NAME_MAX + META_MAX + LINE as usize];
                let (n, m) = (o.name.len(), o.meta.len());
                buf[..head].copy_from_slice(bytemuck::bytes_of(&oh));
                buf[head..head + n].copy_from_slice(o.name);
                buf[head + n..head + n + m].copy_from_slice(o.meta);
                self.media.store_nt(obj_off as usize, &buf[..head_len(n, m) as usize]);
            }
            obj_off = payload_off + line_up(p.stored);
        }
        Ok(digest.finish())
    }

    /// The index, the statistics and the lane's published state learn unit `seq` (at
    /// `unit_off`): after its commit, or before it where no one can look until then.
    ///
    /// Checked in release builds too, as the unit is (or is about to be) committed
    /// whatever happens here: the index takes every object (planning reserved the room),
    /// and the lane's published sequence advances by one. Failing either, the rest is
    /// still recorded and the pool's writes stop: `Error::Invariant` with `committed`
    /// (the unit is durable, and a reopen's recovery indexes it).
    pub(super) fn publish<X: IndexMemory>(
        &self,
        s: &mut Shared<X>,
        lane: u32,
        unit_off: u64,
        seq: u64,
        objects: &[Object<'_>],
        plan: &[PlanSlot],
    ) -> Result<()> {
        // Each object's entry, and where its name is on the media.
        let mut obj_off = unit_off + LINE;
        let entries = plan.iter().zip(objects).map(|(p, o)| {
            let name_off = obj_off + size_of::<ObjectHeader>() as u64;
            let payload_off = obj_off + head_len(o.name.len(), o.meta.len());
            obj_off = payload_off + line_up(p.stored);
            let entry = Entry {
                version: p.version,
                payload_off,
                len_bytes: p.len,
                stored_bytes: p.stored,
                seq,
                name: 0,
                next: NONE,
                lane,
                depth: p.delta.map_or(0, |d| d.depth as u16),
                meta_len: o.meta.len() as u16,
                payload_sum: p.payload_sum,
            };
            (name_off, entry)
        });
        let indexed = if plan.iter().all(|p| p.name_id != NONE) {
            // Every name known (a writer's usual unit: the names of its last one): one pass.
            let r = s.index.append_all(plan.iter().zip(entries).map(|(p, (_, e))| (p.name_id, e)));
            for (h, p) in s.name_hints.iter_mut().zip(plan) {
                *h = p.name_id;
            }
            r.is_ok()
        } else {
            let mut indexed = true;
            for (i, ((p, o), (name_off, entry))) in plan.iter().zip(objects).zip(entries).enumerate() {
                let r = match p.name_id {
                    NONE => s.index.insert(self.media, p.hash, o.name, name_off, entry),
                    id => s.index.append(id, entry),
                };
                let Ok(e_id) = r else {
                    indexed = false;
                    break;
                };
                if let Some(h) = s.name_hints.get_mut(i) {
                    *h = s.index.entry(e_id).name;
                }
            }
            indexed
        };
        // The lane's units as published so far: this unit's sequence number, unless the
        // lane held no segment (its first unit claims one).
        let follows = s.lane_infos[lane as usize].is_none_or(|info| info.units == seq);
        s.stats.objects += plan.len() as u64;
        s.stats.payload_bytes += plan.iter().map(|p| p.stored).sum::<u64>();
        s.stats.units += 1;
        s.lane_infos[lane as usize] = Some(LaneInfo { units: seq + 1, closed: false, detached: false });
        s.unpend(plan.len(), true)?;
        match (indexed, follows) {
            (true, true) => Ok(()),
            (false, _) => Err(s.stop_on(Error::Invariant {
                what: "the index refused a committed object its planning reserved room for",
                committed: true,
            })),
            (true, false) => Err(s.stop_on(Error::Invariant {
                what: "a unit's sequence number does not follow its lane's last one",
                committed: true,
            })),
        }
    }
}

/// Word `k` of `bytes` (little-endian), zero-padded past their end.
#[inline(always)]
fn word_of(bytes: &[u8], k: usize) -> u64 {
    format::hash::word_le(bytes.get(8 * k..).unwrap_or(&[]))
}
