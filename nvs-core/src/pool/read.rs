//! Reads: get, latest, stat, the versions of a name, the names — by any thread, beside
//! the writers. Wherever a writer in another process may be writing the media — a
//! read-only pool beside a live writer, and a writer of some lanes
//! ([`Pool::open_lanes`]) beside the writers of the others — every read re-checks what
//! it read against retention reusing segments (see `still_there`), and a name hint must
//! agree with the name's hash: an object is returned only if the bytes returned are the
//! bytes of that name and version, else `NotFound` (released) or real damage.

use super::Pool;
use crate::delta::{self, read::chain_of, read::Chain};
use crate::error::{CorruptKind, Error, Result};
use crate::format::sum::{payload_sum, Sum, SumKind, Summer};
use crate::format::{self, ObjectHeader, NAME_MAX};
use crate::index::{name_key, space_of, Entry, IndexMemory, NONE};
use crate::media::Media;
use crate::mutant::{self, Mutant};
use crate::object::{IndexMark, Key, LaneInfo, NameId, NameInfo, ObjectInfo};
use crate::shared::Shared;
use crate::sync::Ordering;
use core::fmt;
use core::mem::size_of;

/// Bytes of the next version a get prefetches for a reader walking versions in order.
const READ_AHEAD: u64 = 2048;

impl<M: Media, X: IndexMemory> Pool<M, X> {
    /// What recovery (and the puts and refreshes since) left on `lane`; `None` if it
    /// holds no segment.
    pub fn lane_info(&self, lane: u32) -> Option<LaneInfo> {
        *self.shared.read().lane_infos.get(lane as usize)?
    }

    /// The entry of (`name`, `version`) in `s`'s index (on `lane`, if given).
    fn lookup<'s>(&self, s: &'s Shared<X>, lane: Option<u32>, name: &[u8], version: u64) -> Result<&'s Entry> {
        Ok(s.index.entry(self.lookup_id(s, lane, name, version)?.0))
    }

    /// The name slot of `name`: in a pool with lane names, `lane`'s (`Some`), or the one
    /// lane's that holds it (`None`: `AmbiguousName` if several do); otherwise the pool's
    /// one name space's (then a `lane` is checked by the caller, on the entry).
    fn find_id(&self, s: &Shared<X>, lane: Option<u32>, name: &[u8]) -> Result<u32> {
        check_name(name)?;
        // A lane the pool cannot have is the caller's mistake, not an absent name.
        if let Some(l) = lane {
            self.check_lane_exists(l)?;
        }
        let find = |space: u32| s.index.find_name(&self.media, name_key(name, space), name);
        if !self.sb.lane_names() {
            return find(0).ok_or(Error::NotFound);
        }
        if let Some(l) = lane {
            return find(l + 1).ok_or(Error::NotFound);
        }
        // Only a lane holding a segment can hold objects.
        let mut held =
            (0..self.sb.lanes_max).filter(|&l| s.lane_infos[l as usize].is_some()).filter_map(|l| find(l + 1));
        match (held.next(), held.count()) {
            (None, _) => Err(Error::NotFound),
            (Some(id), 0) => Ok(id),
            (Some(_), more) => Err(Error::AmbiguousName { lanes: 1 + more as u32 }),
        }
    }

    /// `lane` exists in this pool.
    fn check_lane_exists(&self, lane: u32) -> Result<()> {
        match lane < self.sb.lanes_max {
            true => Ok(()),
            false => Err(Error::NoSuchLane { lane, lanes_max: self.sb.lanes_max }),
        }
    }

    /// The entry id of (`name`, `version`) in `s`'s index (on `lane`, if given), and
    /// whether this reader is walking the name's versions in order (it asked for the
    /// version after the one it read last).
    fn lookup_id(&self, s: &Shared<X>, lane: Option<u32>, name: &[u8], version: u64) -> Result<(u32, bool)> {
        check_name(name)?;
        if let Some(l) = lane {
            self.check_lane_exists(l)?;
        }
        let hint = self.read_hint.load(Ordering::Relaxed);
        let (hint_name, hint_entry) = ((hint >> 32) as u32, hint as u32);
        // The hint's name matches by its bytes on the media. A read-only pool's index may
        // be older than a writer's retention, which can have put another name's bytes
        // there: it also needs the name's hash to agree (as `find_name` always does). In
        // a pool with lane names the hint serves only a read that names its lane (a
        // read by name alone must see whether other lanes hold the name too).
        let space = match lane {
            Some(l) if self.sb.lane_names() => Some(l + 1),
            _ if self.sb.lane_names() => None,
            _ => Some(0),
        };
        let id = match (s.index.name_is(&self.media, hint_name, name), space) {
            (Some(hash), Some(space))
                if space_of(hash) == space && (!self.others_write() || hash == name_key(name, space)) =>
            {
                hint_name
            }
            _ => self.find_id(s, lane, name)?,
        };
        let e = match s.index.find_version_near(id, version, if id == hint_name { hint_entry } else { NONE }) {
            Some(e) => e,
            None => s.index.find_version(id, version).ok_or(Error::NotFound)?,
        };
        // In the pool's one name space, a read on a lane finds only that lane's objects.
        if let Some(l) = lane {
            self.check_lane_exists(l)?;
            if s.index.entry(e).lane != l {
                return Err(Error::NotFound);
            }
        }
        self.read_hint.store((id as u64) << 32 | e as u64, Ordering::Relaxed);
        let walking = id == hint_name && s.index.next_of(hint_entry).is_some_and(|n| n.version == version);
        Ok((e, walking))
    }

    /// Run `f` on version `version` of `name` in place — its bytes borrowed from the
    /// media, no copy — and return what `f` returns. Only a full version on a media that
    /// lends its bytes (a [`Region`](crate::Region)) can be; anything else is
    /// `NotBorrowable` (use [`Pool::get`]). With payload checksums the bytes are checked
    /// before `f` sees them.
    ///
    /// Safe against retention: in this process, retention needs `&mut self`, so it
    /// cannot run while `f` does. In a read-only pool beside a writer in another
    /// process, that writer's retention may reuse the segment while `f` runs: the bytes
    /// `f` sees may then change under it, and afterwards, finding the segment reused,
    /// this returns `NotFound` and drops `f`'s result — so `f` should compute a result
    /// from the bytes, not act on them.
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    /// `NotBorrowable` for a delta version or a media that does not lend its bytes.
    pub fn with_bytes<'k, R>(&self, key: impl Into<Key<'k>>, version: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let key = key.into();
        let e = *self.lookup(&self.shared.read(), key.lane(), key.name(), version)?;
        if e.depth > 0 {
            return Err(Error::NotBorrowable);
        }
        // SAFETY: the range is a committed payload. No store of this process reaches it
        // while `&self` is borrowed: lane writers store only past their lanes' tails, and
        // retention (which may reuse the segment) and format need `&mut self`. (A writer
        // in another process is outside this contract; the check below reports it.)
        let bytes = unsafe { self.media.borrow(e.payload_off as usize, e.len_bytes as usize) };
        let bytes = bytes.ok_or(Error::NotBorrowable)?;
        let kind = self.sb.sum_kind();
        if kind != SumKind::None && payload_sum(kind, self.sb.pool_id, bytes) != e.payload_sum {
            // Released and reused by a writer in another process: gone, not damaged.
            if self.others_write() && (!self.still_there(&e) || self.span_releasing(&e)) {
                return Err(Error::NotFound);
            }
            return Err(Error::Corrupted { offset: e.payload_off, kind: CorruptKind::PayloadChecksum });
        }
        let r = f(bytes);
        if self.others_write() && !self.still_there(&e) {
            return Err(Error::NotFound);
        }
        Ok(r)
    }

    /// Version `version` of `name` as plain values (`f64`, `i32`, ... any
    /// [`bytemuck::Pod`]) copied into `out`; returns how many. The object must be a whole
    /// number of them (`ElementSize`), and `out` must hold it (`BufferTooSmall`).
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    /// `ElementSize` if the object is not a whole number of `T`; `BufferTooSmall`.
    pub fn get_into<'k, T: bytemuck::Pod>(
        &self,
        key: impl Into<Key<'k>>,
        version: u64,
        out: &mut [T],
    ) -> Result<usize> {
        let key = key.into();
        let elem = core::mem::size_of::<T>();
        let len = self.stat(key, version)?.len_bytes;
        if elem == 0 || !len.is_multiple_of(elem as u64) {
            return Err(Error::ElementSize { len_bytes: len, elem_bytes: elem });
        }
        Ok(self.get(key, version, bytemuck::cast_slice_mut(out))? / elem)
    }

    /// Copy version `version` of `name` into `buf`; returns its length. A delta version
    /// is rebuilt from its full version and the deltas up to it.
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    /// `BufferTooSmall { needed_bytes }` if `buf` is shorter than the object.
    pub fn get<'k>(&self, key: impl Into<Key<'k>>, version: u64, buf: &mut [u8]) -> Result<usize> {
        let key = key.into();
        self.get_in(key.lane(), key.name(), version, buf)
    }

    fn get_in(&self, lane: Option<u32>, name: &[u8], version: u64, buf: &mut [u8]) -> Result<usize> {
        // The read lock's Acquire pairs with the publishing writer's Release: an entry
        // seen here belongs to a committed unit whose payload stores came before.
        let mut chain = Chain::new();
        let (e_id, e, walked, ahead) = {
            let s = self.shared.read();
            let (id, walking) = self.lookup_id(&s, lane, name, version)?;
            let walked = chain_of(&self.media, &s.index, id, &mut chain);
            // Read-ahead: a reader walking the versions in order reads the next one next.
            let next = walking.then(|| s.index.next_of(id)).flatten();
            (id, *s.index.entry(id), walked, next.map(|n| (n.payload_off, n.stored_bytes.min(READ_AHEAD))))
        };
        // A delta's ancestors are read under the lock again (a full version, the usual
        // case, needs no second look).
        let entry = |id: u32| if id == e_id { e } else { *self.shared.read().index.entry(id) };
        let len = e.len_bytes as usize;
        let dst = buf.get_mut(..len).ok_or(Error::BufferTooSmall { needed_bytes: e.len_bytes })?;
        // The full version first, then each delta from the oldest; each payload checked
        // against its checksum (if the pool has them) as it is used.
        let kind = self.sb.sum_kind();
        let checksums = kind != SumKind::None;
        let copied = walked.and_then(|()| {
            for &id in chain.iter().rev() {
                let link = &entry(id);
                let sum = if link.depth == 0 {
                    self.read_payload(kind, link.payload_off, dst)
                } else {
                    delta::read::walk_record(&self.media, self.sb.pool_id, link, &mut |at, from, n| {
                        if let Some(d) = dst.get_mut(at as usize..(at + n) as usize) {
                            self.media.read(from as usize, d);
                        }
                    })?;
                    checksums.then(|| self.media_sum(link.payload_off, link.stored_bytes))
                };
                if sum.is_some_and(|sum| sum != link.payload_sum) {
                    return Err(Error::Corrupted { offset: link.payload_off, kind: CorruptKind::PayloadChecksum });
                }
            }
            Ok(len)
        });
        // Start loading the next version's first lines (a hint: it reads nothing into
        // this program, and needs no lock) while this one's copy is still in flight.
        if let Some((off, len)) = ahead {
            self.media.prefetch(off as usize, len as usize);
        }
        // A writer in another process released and reused a segment while this reader's
        // index still listed it: the bytes (a parent pointer, a record, the data) may be
        // someone else's, whatever the checks above said.
        if self.others_write() && !chain.iter().all(|&id| self.still_there(&entry(id))) {
            return Err(Error::NotFound);
        }
        if self.others_write()
            && matches!(copied, Err(Error::Corrupted { kind: CorruptKind::PayloadChecksum, .. }))
            && chain.iter().any(|&id| self.span_releasing(&entry(id)))
        {
            return Err(Error::NotFound);
        }
        copied
    }

    /// Copy the payload at `off` into `dst` and return its checksum of `kind` (`None`
    /// for no checksums): nvs-sum while copying ([`Media::read_summed`]), nvs-hash64
    /// after.
    fn read_payload(&self, kind: SumKind, off: u64, dst: &mut [u8]) -> Option<u64> {
        match kind {
            SumKind::None => {
                self.media.read(off as usize, dst);
                None
            }
            SumKind::Sum if mutant::on(Mutant::PayloadSumUnchecked) => {
                self.media.read(off as usize, dst);
                None
            }
            SumKind::Sum => {
                let mut s = Sum::new(self.sb.pool_id);
                self.media.read_summed(off as usize, dst, &mut s);
                Some(s.finish(dst.len() as u64))
            }
            SumKind::Hash64 => {
                self.media.read(off as usize, dst);
                Some(payload_sum(kind, self.sb.pool_id, dst))
            }
        }
    }

    /// The pool's payload checksum of `media[off .. off + len]`, read in blocks.
    fn media_sum(&self, off: u64, len: u64) -> u64 {
        let mut chunk = [0u8; 4096];
        let Some(mut h) = Summer::new(self.sb.sum_kind(), self.sb.pool_id) else { return 0 };
        let (mut at, end) = (off, off + len);
        while at < end {
            let n = ((end - at) as usize).min(chunk.len());
            match &mut h {
                Summer::Sum(s) => self.media.read_summed(at as usize, &mut chunk[..n], s),
                Summer::Hash64(x) => {
                    self.media.read(at as usize, &mut chunk[..n]);
                    x.write(&chunk[..n]);
                }
            }
            at += n as u64;
        }
        h.finish(len)
    }

    /// May a writer in another process be storing to this pool's media while this one
    /// reads it? For a read-only pool (a live writer may be working), and for a writer of
    /// some lanes ([`Pool::open_lanes`]: the other lanes' writer processes release and
    /// reuse their segments whenever they like); not for the one writer of a whole pool,
    /// whose retention needs `&mut self` and so never runs beside its own reads.
    #[inline]
    pub(crate) fn others_write(&self) -> bool {
        !self.writable || self.owned.is_some()
    }

    /// For a reader beside a writer in another process: is the segment holding `e` still
    /// the one the index saw? Checked after the payload was copied (the Acquire fence
    /// keeps the header read after the copy): retention invalidates a segment's header
    /// before anything in it is overwritten, so an unchanged header means a clean copy.
    fn still_there(&self, e: &Entry) -> bool {
        let s = self.shared.read();
        self.still_there_in(&s, e)
    }

    /// For a reader beside a writer in another process whose copy of `e` failed its
    /// checksum: is `e`'s unit a span being released? Retention zeroes the first line of
    /// each segment a span covers (payload bytes until then) before it invalidates the
    /// span's head header, so a copy made meanwhile finds the head still there and zeros
    /// in the payload: released, not damaged. A committed span's covered first lines are
    /// never all zero where the checksum fails for no other reason, so a zeroed one on
    /// this path is a release under way (or done, by a writer killed before the head).
    fn span_releasing(&self, e: &Entry) -> bool {
        let s = self.shared.read();
        let seg = |off: u64| ((off - self.sb.data_off) / self.sb.segment_len) as u32;
        let Some(slot) = s.index.segments_ref().get(seg(e.payload_off - 1) as usize).copied() else { return false };
        let last = seg(e.payload_off + e.stored_bytes.max(1) - 1).min(self.sb.segment_count - 1);
        crate::sync::fence_acquire();
        (slot.head + 1..=last).any(|i| {
            let mut line = [0u8; 64];
            self.media.read(self.sb.segment_off(i) as usize, &mut line);
            line == [0u8; 64]
        })
    }

    /// [`Self::still_there`] with the shared state already read-locked.
    fn still_there_in(&self, s: &Shared<X>, e: &Entry) -> bool {
        crate::sync::fence_acquire();
        // From the byte before the payload (the object's own header or name): an empty
        // payload may start exactly at the segment's end.
        let seg = ((e.payload_off - 1 - self.sb.data_off) / self.sb.segment_len) as u32;
        let slot = s.index.segments_ref().get(seg as usize).copied();
        // The segment is still `e`'s lane's: a writer process that claimed a segment
        // another lane released (its index not yet told) holds it as its own, beside the
        // old entries of the other lane there.
        let Some(slot) = slot.filter(|slot| slot.lane == e.lane || mutant::on(Mutant::ReuseReadAsOthers)) else {
            return false;
        };
        // A span's header is at its head.
        matches!(format::decode_segment(&self.media, &self.sb, slot.head), Some(h) if h.lane == slot.lane && h.chain_seq == slot.chain_seq)
    }

    /// The latest (committed) version of `name`.
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    pub fn latest<'k>(&self, key: impl Into<Key<'k>>) -> Result<u64> {
        let key = key.into();
        self.latest_in(key.lane(), key.name())
    }

    fn latest_in(&self, lane: Option<u32>, name: &[u8]) -> Result<u64> {
        let s = self.shared.read();
        let id = self.find_id(&s, lane, name)?;
        let n = s.index.name(id);
        let at = if mutant::on(Mutant::LatestIsOldest) { n.first } else { n.last };
        // In the pool's one name space, a lane's latest is its newest version there.
        if let (Some(l), false) = (lane, self.sb.lane_names()) {
            let mut newest = None;
            let mut i = n.first;
            while i != NONE {
                let e = s.index.entry(i);
                if e.lane == l {
                    newest = Some(e.version);
                }
                i = e.next;
            }
            return newest.ok_or(Error::NotFound);
        }
        if at == NONE {
            return Err(Error::NotFound);
        }
        Ok(s.index.entry(at).version)
    }

    /// Facts about version `version` of `name`.
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    pub fn stat<'k>(&self, key: impl Into<Key<'k>>, version: u64) -> Result<ObjectInfo> {
        let key = key.into();
        let s = self.shared.read();
        Ok(ObjectInfo::of(self.lookup(&s, key.lane(), key.name(), version)?))
    }

    /// The metadata stored with version `version` of `name` ([`crate::Object::meta`]), copied
    /// into `buf`; returns its length (0 if it has none). `BufferTooSmall` if `buf` is
    /// shorter than [`ObjectInfo::meta_len`].
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    /// `BufferTooSmall` if `buf` is shorter than the metadata.
    pub fn meta<'k>(&self, key: impl Into<Key<'k>>, version: u64, buf: &mut [u8]) -> Result<usize> {
        let key = key.into();
        self.meta_in(key.lane(), key.name(), version, buf)
    }

    fn meta_in(&self, lane: Option<u32>, name: &[u8], version: u64, buf: &mut [u8]) -> Result<usize> {
        let (e, name_len) = {
            let s = self.shared.read();
            let e = *self.lookup(&s, lane, name, version)?;
            (e, s.index.name(e.name).name_len as usize)
        };
        let len = e.meta_len as usize;
        let dst = buf.get_mut(..len).ok_or(Error::BufferTooSmall { needed_bytes: len as u64 })?;
        if len > 0 {
            let off = e.payload_off - format::head_len(name_len, len) + size_of::<ObjectHeader>() as u64;
            self.media.read((off + name_len as u64) as usize, dst);
            // A reader beside a writer in another process: retention may have reused it.
            if self.others_write() && !self.still_there(&e) {
                return Err(Error::NotFound);
            }
        }
        Ok(len)
    }

    /// Every version of `name`, oldest first, as they were when this was called. The
    /// iterator takes the index's read lock only inside each `next`, so this thread may
    /// put while it iterates.
    ///
    /// # Errors
    /// `NotFound` (no such name, version, or lane's name), `AmbiguousName` (a name alone that
    /// several lanes hold, in a pool with lane names), `NoSuchLane`, `NameEmpty` or
    /// `NameTooLong`; `Corrupted` if what it reads fails its checks.
    pub fn versions<'k>(&self, key: impl Into<Key<'k>>) -> Result<VersionIter<'_, M, X>> {
        let key = key.into();
        self.versions_in(key.lane(), key.name())
    }

    /// Every version of name `id` (from [`Pool::names`] or [`Pool::objects_after`]),
    /// oldest first: what a tool listing every name reads, in any pool (no lookup by
    /// bytes).
    ///
    /// A stale `id` — taken before the index was rebuilt (an open, a refresh that
    /// recovered, a reclaim), or from another pool — yields nothing: never another
    /// name's versions ([`NameId`]). Take the ids again from [`Pool::names`].
    pub fn versions_of(&self, id: NameId) -> VersionIter<'_, M, X> {
        let s = self.shared.read();
        let (at, left) = match self.slot_of(&s, id) {
            Some(slot) => (s.index.name(slot).first, s.index.name(slot).count),
            None => (NONE, 0),
        };
        VersionIter { pool: self, at, left, only: None }
    }

    /// The id of the name in `slot` of the index as it stands now.
    fn name_id(&self, slot: u32) -> NameId {
        NameId { slot, index: self.index_gen }
    }

    /// `id`'s slot in `s`'s index, if `id` is of this index build and names a name.
    fn slot_of(&self, s: &Shared<X>, id: NameId) -> Option<u32> {
        (id.index == self.index_gen && id.slot < s.index.name_count() as u32).then_some(id.slot)
    }

    fn versions_in(&self, lane: Option<u32>, name: &[u8]) -> Result<VersionIter<'_, M, X>> {
        let s = self.shared.read();
        let id = self.find_id(&s, lane, name)?;
        let n = *s.index.name(id);
        let only = lane.filter(|_| !self.sb.lane_names());
        Ok(VersionIter { pool: self, at: n.first, left: n.count, only })
    }

    /// Every distinct name, in the order first committed (recovered), as they were when
    /// this was called (the lock is taken inside each `next` only, as in `versions`).
    pub fn names(&self) -> NameIter<'_, M, X> {
        NameIter { pool: self, next: 0, count: self.shared.read().index.name_count() as u32 }
    }

    /// Where the index stands now (for [`Pool::objects_after`]).
    pub fn index_mark(&self) -> IndexMark {
        IndexMark { index: self.index_gen, objects: self.shared.read().index.len() as u32 }
    }

    /// The objects indexed after `mark` was taken, in the order indexed, each with its
    /// name's id (for [`Pool::name_bytes`] and [`Pool::versions_of`], until the index is
    /// rebuilt: [`NameId`]): what puts and refreshes that caught up
    /// added since. `None` if the index was rebuilt since (a recovery: an open, a
    /// refresh that recovered, a reclaim), or the mark is of another pool: then every
    /// object may be new, as far as the mark can tell. A follower reads what is new this way in time proportional to
    /// it, not to the pool.
    pub fn objects_after(&self, mark: IndexMark) -> Option<ObjectsAfter<'_, M, X>> {
        let end = self.shared.read().index.len() as u32;
        (mark.index == self.index_gen && mark.objects <= end).then_some(ObjectsAfter {
            pool: self,
            next: mark.objects,
            end,
        })
    }

    /// The bytes of name `id` (from [`Pool::names`] or [`Pool::objects_after`]), copied
    /// into `buf`.
    ///
    /// Empty (never an error, never another name's bytes) for a stale `id` — taken
    /// before the index was rebuilt (an open, a refresh that recovered, a reclaim), or
    /// from another pool ([`NameId`]): take the ids again from [`Pool::names`]. Empty
    /// too if the bytes are gone: in a read-only pool whose index is older than a
    /// writer's retention, the segment holding a name's bytes may have been reused
    /// (checked by the name's hash; `refresh` brings the index up to date).
    pub fn name_bytes<'b>(&self, id: NameId, buf: &'b mut [u8; NAME_MAX]) -> &'b [u8] {
        let s = self.shared.read();
        // An id of another index build (a stale one from before a rebuild): no bytes.
        let Some(slot) = self.slot_of(&s, id) else { return &[] };
        let n = s.index.name(slot);
        let dst = &mut buf[..n.name_len as usize];
        self.media.read(n.name_off as usize, dst);
        if self.others_write() && name_key(dst, space_of(n.hash)) != n.hash {
            return &[];
        }
        dst
    }

    /// Read every committed payload and verify its checksum (if the pool has them).
    /// Returns the number of objects checked.
    ///
    /// # Errors
    /// `Corrupted { offset, kind: PayloadChecksum }` (or a delta's record or chain) at the
    /// first object whose bytes fail their checks.
    pub fn verify_all(&self) -> Result<u64> {
        let s = self.shared.read();
        let mut chain = Chain::new();
        let mut checked = 0;
        for id in 0..s.index.name_count() as u32 {
            let mut at = s.index.name(id).first;
            while at != NONE {
                let e = *s.index.entry(at);
                let id = at;
                chain.clear();
                let verdict = (|| {
                    if self.sb.has_payload_checksum() && self.media_sum(e.payload_off, e.stored_bytes) != e.payload_sum
                    {
                        return Err(Error::Corrupted { offset: e.payload_off, kind: CorruptKind::PayloadChecksum });
                    }
                    if e.depth > 0 {
                        // Its record is sound and its chain reaches a full version.
                        delta::read::walk_record(&self.media, self.sb.pool_id, &e, &mut |_, _, _| {})?;
                        chain_of(&self.media, &s.index, id, &mut chain)?;
                    }
                    Ok(())
                })();
                // In a read-only pool, a writer's retention may have released and reused
                // the object's segment (or a delta parent's) since the index was built:
                // that object is gone, not damaged.
                let gone = || {
                    self.others_write()
                        && !chain.iter().chain([&id]).all(|&c| self.still_there_in(&s, s.index.entry(c)))
                };
                match verdict {
                    Ok(()) => checked += 1,
                    Err(_) if gone() => {}
                    Err(err) => return Err(err),
                }
                at = e.next;
            }
        }
        Ok(checked)
    }
}

/// The versions of one name, oldest first (see [`Pool::versions`]).
pub struct VersionIter<'p, M: Media, X: IndexMemory> {
    pool: &'p Pool<M, X>,
    at: u32,
    left: u32,
    /// Only this lane's versions (a lane's versions of a name in the one name space).
    only: Option<u32>,
}

impl<M: Media, X: IndexMemory> Iterator for VersionIter<'_, M, X> {
    type Item = ObjectInfo;
    fn next(&mut self) -> Option<ObjectInfo> {
        // Entry ids stay valid while the pool is borrowed (only `&mut` methods remove
        // entries); new versions are appended after the ones counted at the start.
        let s = self.pool.shared.read();
        while self.left > 0 && self.at != NONE {
            self.left -= 1;
            let e = s.index.entry(self.at);
            self.at = e.next;
            if self.only.is_none_or(|l| l == e.lane) {
                return Some(ObjectInfo::of(e));
            }
        }
        None
    }
}

impl<M: Media, X: IndexMemory> fmt::Debug for VersionIter<'_, M, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VersionIter").field("left", &self.left).finish_non_exhaustive()
    }
}

/// The objects indexed after a mark (see [`Pool::objects_after`]): (name id, facts).
/// The ids are of the index as it stood when the iterator was made ([`NameId`]).
pub struct ObjectsAfter<'p, M: Media, X: IndexMemory> {
    pool: &'p Pool<M, X>,
    next: u32,
    end: u32,
}

impl<M: Media, X: IndexMemory> Iterator for ObjectsAfter<'_, M, X> {
    type Item = (NameId, ObjectInfo);
    fn next(&mut self) -> Option<(NameId, ObjectInfo)> {
        if self.next >= self.end {
            return None;
        }
        // Entry ids below `end` stay valid while the pool is borrowed (only `&mut`
        // methods remove or renumber entries).
        let s = self.pool.shared.read();
        let e = s.index.entry(self.next);
        self.next += 1;
        Some((self.pool.name_id(e.name), ObjectInfo::of(e)))
    }
}

impl<M: Media, X: IndexMemory> fmt::Debug for ObjectsAfter<'_, M, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectsAfter").field("next", &self.next).field("end", &self.end).finish_non_exhaustive()
    }
}

/// Every distinct name (see [`Pool::names`]).
pub struct NameIter<'p, M: Media, X: IndexMemory> {
    pool: &'p Pool<M, X>,
    next: u32,
    count: u32,
}

impl<M: Media, X: IndexMemory> Iterator for NameIter<'_, M, X> {
    type Item = NameInfo;
    fn next(&mut self) -> Option<NameInfo> {
        let s = self.pool.shared.read();
        while self.next < self.count {
            let id = self.next;
            self.next += 1;
            let n = s.index.name(id);
            if n.last != NONE {
                let lane = space_of(n.hash).checked_sub(1);
                let (id, latest) = (self.pool.name_id(id), s.index.entry(n.last).version);
                return Some(NameInfo { id, versions: n.count, latest, lane });
            }
        }
        None
    }
}

impl<M: Media, X: IndexMemory> fmt::Debug for NameIter<'_, M, X> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NameIter").field("next", &self.next).field("count", &self.count).finish()
    }
}

/// A name a lookup can find: 1 to `NAME_MAX` bytes (as a put requires).
fn check_name(name: &[u8]) -> Result<()> {
    match name.len() {
        0 => Err(Error::NameEmpty),
        n if n > NAME_MAX => Err(Error::NameTooLong { len_bytes: n }),
        _ => Ok(()),
    }
}
