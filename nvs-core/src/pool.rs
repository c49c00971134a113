//! [`Pool`]: format, open (recover), put, batch, get — the commit protocol lives here.
//!
//! The commit protocol of one unit (one put or one batch), per lane:
//! 1. validate everything (names, versions, sizes, index room, space) — nothing is
//!    written before the call is known to succeed;
//! 2. if the unit does not fit the lane's segment, claim a free segment: its header by
//!    NT stores, then a fence, so its ownership is durable before any unit in it;
//! 3. NT-store the batch header (all but the commit word), every object header + name
//!    and every payload;
//! 4. fence — the unit is durable, but not yet committed;
//! 5. NT-store the 8-byte commit word alone, aligned;
//! 6. fence — committed; only now does the call return, and only now can anyone see the
//!    objects in the index (written before step 4 when no one can look meanwhile).

use crate::delta::{self, Changes, Delta, DeltaOptions, DeltaPlan, Put};
use crate::error::{CorruptKind, Error, Result};
use crate::format::{
    self, commit_word, line_up, object_head_len, BatchHeader, ObjectHeader, SegmentHeader, Superblock, BATCH_MAX,
    FORMAT_VERSION, LANES_MAX, LINE, NAME_MAX, SEGMENT_MAGIC, SUPERBLOCK_MAGIC,
};
use crate::hash::{hash64, Hasher};
use crate::index::{name_hash, Entry, Index, IndexMemory, FREE, NONE};
use crate::media::Media;
use crate::mutant;
use crate::recover::{recover, RecoveryStats};
use crate::sync::{AtomicBool, AtomicU64, Ordering, ReadGuard, RwLock, UnsafeCell};
use core::mem::size_of;

/// How to format a pool.
#[derive(Clone, Copy, Debug)]
pub struct FormatOptions {
    /// Identity of this pool (use random bits). Over an earlier pool the id actually used
    /// is derived from this one and the earlier pool's, so it never repeats an id of an
    /// earlier generation whose segments may still be on the media.
    pub pool_id: u64,
    /// Segment size in bytes; `None` picks [`format::default_segment_len`].
    pub segment_len: Option<u64>,
    /// Number of writer lanes (1..=256).
    pub lanes_max: u32,
    /// Checksum every payload (verified on every get and by check).
    pub payload_checksum: bool,
}

impl FormatOptions {
    pub fn new(pool_id: u64) -> Self {
        FormatOptions { pool_id, segment_len: None, lanes_max: 64, payload_checksum: false }
    }
}

/// One object of a put or a batch: a name, its bytes as one or more slices (a vectored
/// put), its version (`None`: the name's latest + 1, starting at 1), and optionally a
/// delta request (store only what changed since a parent version, when that pays).
#[derive(Clone, Copy, Debug)]
pub struct Object<'a> {
    pub name: &'a [u8],
    pub parts: &'a [&'a [u8]],
    pub version: Option<u64>,
    pub delta: Option<Delta<'a>>,
}

impl<'a> Object<'a> {
    pub fn new(name: &'a [u8], parts: &'a [&'a [u8]]) -> Self {
        Object { name, parts, version: None, delta: None }
    }
    pub fn with_version(mut self, version: u64) -> Self {
        self.version = Some(version);
        self
    }
    /// Store only `changes` (the byte ranges that differ from version `parent` of the
    /// same name) when the pool's [`DeltaOptions`] allow; else a full version.
    pub fn with_delta(mut self, parent: u64, changes: &'a dyn Changes) -> Self {
        self.delta = Some(Delta { parent, changes });
        self
    }
    fn len_bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.len() as u64).sum()
    }
}

/// A lane's write position.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Lane {
    /// Holds a segment.
    pub active: bool,
    pub chain_seq: u64,
    /// Where the next unit goes.
    pub tail: u64,
    pub seg_end: u64,
    /// Sequence number of the next unit.
    pub next_seq: u64,
    /// The last committed unit was an end-of-stream marker.
    pub closed: bool,
}

/// A lane as recovery (and this writer's puts) left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneInfo {
    /// Units committed on the lane (its next sequence number).
    pub units: u64,
    /// The lane's last unit is an end-of-stream marker ([`Pool::close_lane`]).
    pub closed: bool,
}

/// Facts about one committed object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    pub version: u64,
    /// The object's length (what a get returns).
    pub len_bytes: u64,
    /// Payload bytes on the media: `len_bytes` for a full version, less for a delta.
    pub stored_bytes: u64,
    /// 0 for a full version; for a delta, how many deltas lie between it and its full version, itself included.
    pub depth: u32,
    pub lane: u32,
    /// Sequence number (in its lane) of the unit that committed it.
    pub seq: u64,
    /// Media offset of the payload.
    pub offset: u64,
}

/// One distinct name (see [`Pool::names`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameInfo {
    pub id: u32,
    pub versions: u32,
    pub latest: u64,
}

/// What validation decided for one object of a unit being written.
#[derive(Clone, Copy, Debug)]
struct Planned {
    /// `name_hash` of its name.
    hash: u64,
    version: u64,
    /// The object's length.
    len: u64,
    /// Its payload's length on the media (`len`, or its delta record's length).
    stored: u64,
    /// The name's slot in the index, or `NONE` if the index does not know the name yet.
    name_id: u32,
    /// Filled in when the payload is stored (0 when the pool has no payload checksums).
    payload_sum: u64,
    /// Stored as a delta.
    delta: Option<DeltaPlan>,
    /// The payload is on the media already (`Writer::store_payload_ahead`).
    payload_stored: bool,
}

/// The plan of a unit of at most `N` objects (1 for a put, `BATCH_MAX` for a batch).
type Plan<const N: usize> = heapless::Vec<Planned, N>;

/// A delta's entry and its ancestors down to the full version, as entry ids, newest
/// first (ids stay valid while the pool is borrowed: only `&mut` methods remove entries;
/// the entries themselves are read under the lock).
type Chain = heapless::Vec<u32, { format::DELTA_DEPTH_MAX as usize + 1 }>;

/// How many times a read-only refresh that found corruption looks again while the
/// segment headers keep changing under it (a writer claiming or releasing segments during
/// every one of them): then it reports what it found.
const REFRESH_LOOKS: u32 = 1000;

/// Bytes of the next version a get prefetches for a reader walking versions in order.
const READ_AHEAD: u64 = 2048;

/// Entry `id` and, if it is a delta, its ancestors down to its full version, newest
/// first, into `chain`. Each parent must be in the index, one level shallower, of the
/// same length; on error `chain` holds the links found so far.
fn chain_of<M: Media, X: IndexMemory>(media: &M, s: &Shared<X>, id: u32, chain: &mut Chain) -> Result<()> {
    chain.clear();
    let mut id = id;
    loop {
        let at = *s.index.entry(id);
        let bad = Error::Corrupted { offset: at.payload_off, kind: CorruptKind::DeltaChain };
        chain.push(id).map_err(|_| bad)?;
        if at.depth == 0 {
            return Ok(());
        }
        let parent = delta::parent_of(media, &at);
        let ok = |p: &u32| {
            let p = s.index.entry(*p);
            p.depth + 1 == at.depth && p.len_bytes == at.len_bytes && p.version < at.version
        };
        id = s.index.find_version(at.name, parent).filter(ok).ok_or(bad)?;
    }
}

/// Versions committed by one put or batch, in object order.
pub type Versions = heapless::Vec<u64, BATCH_MAX>;

/// What every lane and reader of a pool shares, behind one lock: the index, segment
/// allocation, the statistics and each lane as readers see it. Writers hold the lock
/// only to plan a unit (versions, index room, a segment) and to publish it after its
/// commit — never while they copy or fence, unless the unit creates a new name (see
/// [`LaneWriter`]).
pub(crate) struct Shared<X: IndexMemory> {
    pub index: Index<X>,
    pub alloc_cursor: u32,
    pub stats: RecoveryStats,
    /// Index entries planned by units not yet published (room reserved for them).
    pub pending_entries: usize,
    /// Per lane: units committed and whether closed, as published.
    pub lane_infos: [Option<LaneInfo>; LANES_MAX as usize],
    /// Name slot used by the object at each position of the last unit: a put of the
    /// same names again (a time step) checks the hint against the media instead of
    /// hashing the name and probing the table. A stale hint only misses.
    pub name_hints: [u32; BATCH_MAX],
}

/// A lane's write position, touched only by whoever writes the lane: the `&mut Pool`,
/// or the one [`LaneWriter`] holding `claimed`.
struct LaneCell {
    claimed: AtomicBool,
    state: UnsafeCell<Lane>,
}

/// A pool on some media, with its index.
///
/// Single-threaded use goes through `&mut self` (`put`, `put_batch`, ... take a lane
/// number). Several threads write at once through [`Pool::lane`]: each takes a
/// [`LaneWriter`] for its own lane and puts with no lock held during the copy and the
/// fences; readers in the same process use the `&self` methods meanwhile.
pub struct Pool<M: Media, X: IndexMemory> {
    media: M,
    sb: Superblock,
    writable: bool,
    lanes: [LaneCell; LANES_MAX as usize],
    shared: RwLock<Shared<X>>,
    /// How puts with a delta request choose between a delta and a full version.
    delta_opts: DeltaOptions,
    /// The last entry a get found (name slot << 32 | entry), for readers walking a
    /// name's versions in order. Relaxed: a hint, checked on every use.
    read_hint: AtomicU64,
}

// SAFETY: the only non-Sync part is each lane's `UnsafeCell<Lane>`, which is touched
// only through `&mut Pool` or by the single `LaneWriter` that won the lane's `claimed`
// flag (an Acquire swap; released with Release on drop), so no two threads ever access
// one lane's state at once; everything else is behind `RwLock` or atomic.
unsafe impl<M: Media + Sync, X: IndexMemory + Send + Sync> Sync for Pool<M, X> {}

impl<M: Media, X: IndexMemory> Pool<M, X> {
    /// Format `media` as an empty pool and open it for writing. Existing contents are not
    /// erased (nvs never relies on zeroed media): stale bytes can never match this pool.
    pub fn format(media: M, opts: FormatOptions, mem: X) -> Result<Self> {
        if opts.lanes_max == 0 || opts.lanes_max > LANES_MAX {
            return Err(Error::BadGeometry { what: "lanes must be between 1 and 256" });
        }
        let segment_len = opts.segment_len.unwrap_or_else(|| format::default_segment_len(media.len() as u64));
        let g = format::geometry(media.len() as u64, segment_len)?;
        // Over an earlier pool, the new id is derived from the caller's and the old one,
        // so formatting again with the ids of earlier generations (A, B, A, ...) never
        // brings back an id whose segments may still lie on the media.
        // A superblock left unsealed by a crash inside an earlier format (magic word 0,
        // the rest old or new or both) still names ids whose segments may be here.
        let old: Superblock = format::read_pod(&media, 0);
        let unsealed = old.magic == 0 && (old.pool_id != 0 || old.checksum != 0);
        let mut pool_id = opts.pool_id;
        if unsealed || format::decode_superblock(&media).is_ok() {
            pool_id = crate::hash::mix(&[opts.pool_id, old.pool_id, old.checksum]);
            if pool_id == old.pool_id {
                pool_id = pool_id.wrapping_add(0x9E37_79B9_7F4A_7C15);
            }
        }
        let mut sb = Superblock {
            magic: SUPERBLOCK_MAGIC,
            format_version: FORMAT_VERSION,
            flags: format::FLAG_DELTAS | if opts.payload_checksum { format::FLAG_PAYLOAD_CHECKSUM } else { 0 },
            pool_id,
            pool_len: g.pool_len,
            segment_len: g.segment_len,
            segment_count: g.segment_count,
            lanes_max: opts.lanes_max,
            data_off: format::DATA_OFF,
            checksum: 0,
        };
        sb.checksum = sb.compute_checksum();
        if mutant::on("format_in_one_store") {
            media.store_nt(0, bytemuck::bytes_of(&sb));
            media.fence();
            return Self::open_with(media, mem, true);
        }
        // Crash-safe in three fenced steps, so that a crash leaves the old pool, no pool
        // (`NotFormatted`), or the new empty one — never a torn superblock: (1) the old
        // magic word goes (the old pool is gone from here on); (2) the new superblock but
        // its magic word; (3) the magic word, alone (one failure-atomic 8-byte store).
        if old.magic != 0 {
            media.store_word_nt(0, 0);
            media.fence();
        }
        media.store_nt(8, &bytemuck::bytes_of(&sb)[8..]);
        media.fence();
        media.store_word_nt(0, sb.magic);
        media.fence();
        Self::open_with(media, mem, true)
    }

    /// Open a pool for writing: recovery runs, nothing is written until a put.
    pub fn open(media: M, mem: X) -> Result<Self> {
        Self::open_with(media, mem, true)
    }

    /// Open a pool for reading only: recovery runs; this pool never writes the media.
    pub fn open_read_only(media: M, mem: X) -> Result<Self> {
        Self::open_with(media, mem, false)
    }

    fn open_with(media: M, mem: X, writable: bool) -> Result<Self> {
        let sb = format::decode_superblock(&media)?;
        let mut pool = Pool {
            media,
            sb,
            writable,
            lanes: core::array::from_fn(|_| LaneCell {
                claimed: AtomicBool::new(false),
                state: UnsafeCell::new(Lane::default()),
            }),
            shared: RwLock::new(Shared {
                index: Index::new(mem),
                alloc_cursor: 0,
                stats: RecoveryStats::default(),
                pending_entries: 0,
                lane_infos: [None; LANES_MAX as usize],
                name_hints: [NONE; BATCH_MAX],
            }),
            delta_opts: DeltaOptions::default(),
            read_hint: AtomicU64::new(u64::MAX),
        };
        pool.refresh()?;
        if writable {
            // The writer's open-time repair (a crash between a truncate unit and the
            // invalidation of its segments). Newest first only as a seeded bug.
            pool.invalidate_released(mutant::on("repair_newest_first"));
        }
        Ok(pool)
    }

    /// Re-run recovery from the media (a reader catching up with a writer, or a test).
    ///
    /// In a read-only pool a writer in another process may be working meanwhile, and
    /// recovery reads the media at many moments, not at one: while retention invalidates
    /// and reuses segments it can see an older segment still valid beside a newer one
    /// already zeroed, or walk a reused segment with old sequence numbers — and report a
    /// healthy pool corrupted. So a read-only refresh that finds corruption looks again,
    /// like a seqlock reader: it reads every segment header, recovers, and reads the
    /// headers once more. Segments are reused only after their header changed (a
    /// released header is zeroed, fenced, before anything in the segment is written, and
    /// a claim's header never equals an earlier one: chain positions only grow), so equal
    /// headers mean that recovery saw a state that held, and its error is real damage.
    pub fn refresh(&mut self) -> Result<()> {
        let mut r = self.recover_once();
        let mut looks = 0;
        while !self.writable && matches!(r, Err(Error::Corrupted { .. })) && looks < REFRESH_LOOKS {
            let before = self.header_digest();
            r = self.recover_once();
            crate::sync::fence_acquire();
            if self.header_digest() == before {
                break;
            }
            looks += 1;
        }
        r
    }

    /// A hash of every segment header as the media holds it now.
    fn header_digest(&self) -> u64 {
        let mut h = Hasher::new(self.sb.pool_id);
        let mut header = [0u8; size_of::<SegmentHeader>()];
        for i in 0..self.sb.segment_count {
            self.media.read(self.sb.segment_off(i) as usize, &mut header);
            h.write(&header);
        }
        h.finish()
    }

    fn recover_once(&mut self) -> Result<()> {
        let mut lanes = [Lane::default(); LANES_MAX as usize];
        let shared = self.shared.get_mut();
        shared.stats = recover(&self.media, &self.sb, &mut shared.index, &mut lanes)?;
        shared.name_hints = [NONE; BATCH_MAX];
        for (i, (cell, l)) in self.lanes.iter_mut().zip(lanes).enumerate() {
            *cell.state.get_mut() = l;
            shared.lane_infos[i] = l.active.then_some(LaneInfo { units: l.next_seq, closed: l.closed });
        }
        Ok(())
    }

    /// Close the pool, giving back the media and the index memory.
    pub fn close(self) -> (M, X) {
        (self.media, self.shared.into_inner().index.into_memory())
    }

    /// Take lane `lane` for writing from this thread (one writer per lane at a time):
    /// several threads each with their own lane put concurrently.
    pub fn lane(&self, lane: u32) -> Result<LaneWriter<'_, M, X>> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        let cell = self.lanes.get(lane as usize).filter(|_| lane < self.sb.lanes_max);
        let cell = cell.ok_or(Error::NoSuchLane { lane, lanes_max: self.sb.lanes_max })?;
        // Acquire: this writer sees every change the lane's previous writer made to
        // its state (published by that writer's Release store in `drop`).
        if cell.claimed.swap(true, Ordering::Acquire) {
            return Err(Error::LaneBusy { lane });
        }
        Ok(LaneWriter { pool: self, lane })
    }

    pub fn media(&self) -> &M {
        &self.media
    }

    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// What the last recovery found, updated by every put since.
    pub fn stats(&self) -> RecoveryStats {
        self.shared.read().stats
    }

    /// Bytes of index memory this pool holds (records, names, hash table, segments).
    pub fn index_bytes(&self) -> usize {
        self.shared.read().index.memory().bytes()
    }

    /// Free segments.
    pub fn free_segments(&self) -> u32 {
        self.sb.segment_count - self.stats().segments_used
    }

    /// Largest payload one object with a `name_len`-byte name can have.
    pub fn max_object_bytes(&self, name_len: usize) -> u64 {
        max_object_bytes(&self.sb, name_len)
    }

    /// Put `bytes` as the next version of `name` on lane 0. Returns the version, after
    /// the commit is durable.
    pub fn put(&mut self, name: &[u8], bytes: &[u8]) -> Result<u64> {
        self.put_vectored(0, name, &[bytes])
    }

    /// Put several non-contiguous slices as one object on `lane`.
    pub fn put_vectored(&mut self, lane: u32, name: &[u8], parts: &[&[u8]]) -> Result<u64> {
        let mut plan = Plan::<1>::new();
        self.commit_own(lane, &[Object::new(name, parts)], &mut plan)?;
        Ok(plan.first().map_or(0, |p| p.version))
    }

    /// Put `bytes` as version `version` of `name` on `lane` (must exceed the latest).
    pub fn put_version(&mut self, lane: u32, name: &[u8], version: u64, bytes: &[u8]) -> Result<u64> {
        let mut plan = Plan::<1>::new();
        self.commit_own(lane, &[Object::new(name, &[bytes]).with_version(version)], &mut plan)?;
        Ok(plan.first().map_or(0, |p| p.version))
    }

    /// Put `bytes` as the next version of `name` on `lane`, storing only `changes` (the
    /// byte ranges that differ from version `parent`, sorted by offset) when the pool's
    /// [`DeltaOptions`] allow, else the whole object. A get of the new version returns
    /// all of `bytes` either way. The caller promises that bytes outside `changes` equal
    /// version `parent`'s (see [`crate::ChunkHashes`] to have nvs find the changes).
    pub fn put_delta(
        &mut self,
        lane: u32,
        name: &[u8],
        bytes: &[u8],
        parent: u64,
        changes: &dyn Changes,
    ) -> Result<Put> {
        let mut plan = Plan::<1>::new();
        self.commit_own(lane, &[Object::new(name, &[bytes]).with_delta(parent, changes)], &mut plan)?;
        Ok(put_of(&plan))
    }

    /// How puts with a delta request choose (chunk size, chain length, size limit).
    pub fn set_delta_options(&mut self, opts: DeltaOptions) -> Result<()> {
        opts.check()?;
        self.delta_opts = opts;
        Ok(())
    }

    pub fn delta_options(&self) -> DeltaOptions {
        self.delta_opts
    }

    /// Commit every object of `objects` together, on `lane`: after a crash either all
    /// are recovered or none. Returns their versions, after the commit is durable.
    pub fn put_batch(&mut self, lane: u32, objects: &[Object<'_>]) -> Result<Versions> {
        let mut plan = Plan::<BATCH_MAX>::new();
        self.commit_own(lane, objects, &mut plan)?;
        Ok(plan.iter().map(|p| p.version).collect())
    }

    /// A unit on `lane` through `&mut self`: no other writer exists, so no lock.
    fn commit_own<const N: usize>(&mut self, lane: u32, objects: &[Object<'_>], plan: &mut Plan<N>) -> Result<()> {
        let cell = self.lanes.get_mut(lane as usize).filter(|_| lane < self.sb.lanes_max);
        let cell = cell.ok_or(Error::NoSuchLane { lane, lanes_max: self.sb.lanes_max })?;
        let w = Writer { media: &self.media, sb: &self.sb, writable: self.writable, delta: self.delta_opts };
        w.commit_unit(&mut Own(self.shared.get_mut()), cell.state.get_mut(), lane, objects, plan)
    }
}

/// Access to the [`Shared`] state: owned (`&mut Pool`) or behind the lock (a
/// [`LaneWriter`]); `with` runs a closure on it, taking the write lock if needed.
pub(crate) trait SharedAccess<X: IndexMemory> {
    fn with<R>(&mut self, f: impl FnOnce(&mut Shared<X>) -> R) -> R;
    /// The state without locking, when access is exclusive anyway.
    fn exclusive(&mut self) -> Option<&mut Shared<X>>;
}

/// Exclusive access: no lock.
struct Own<'a, X: IndexMemory>(&'a mut Shared<X>);

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
struct Locked<'a, X: IndexMemory>(&'a RwLock<Shared<X>>);

impl<X: IndexMemory> SharedAccess<X> for Locked<'_, X> {
    fn with<R>(&mut self, f: impl FnOnce(&mut Shared<X>) -> R) -> R {
        f(&mut self.0.write())
    }
    fn exclusive(&mut self) -> Option<&mut Shared<X>> {
        None
    }
}

/// What the commit path needs of a pool besides the shared state and the lane: the
/// media and the superblock (both immutable once open).
struct Writer<'a, M: Media> {
    media: &'a M,
    sb: &'a Superblock,
    writable: bool,
    delta: DeltaOptions,
}

impl<M: Media> Writer<'_, M> {
    /// One unit through the whole commit protocol (module docs, DESIGN.md). `plan` is
    /// empty on entry and holds one [`Planned`] per object on success; on error nothing
    /// was committed, and nothing was written except, for a lone put refused in planning,
    /// its payload past the lane's log end ([`Self::store_payload_ahead`]).
    ///
    /// Locking: planning (versions, index room, a segment) and publishing (the index
    /// learns the committed objects) each run under `shared` — no lock is held while the
    /// unit is copied and fenced. A unit that creates a new name holds `shared` from
    /// planning to publishing instead: a name's bytes are on the media only once its
    /// unit is written, so no other lane may plan the same new name meanwhile.
    fn commit_unit<X: IndexMemory, const N: usize>(
        &self,
        shared: &mut impl SharedAccess<X>,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut Plan<N>,
    ) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        if lane >= self.sb.lanes_max {
            return Err(Error::NoSuchLane { lane, lanes_max: self.sb.lanes_max });
        }
        if objects.is_empty() || objects.len() > BATCH_MAX || objects.len() > N {
            return Err(Error::BatchSize { count: objects.len() });
        }
        let ahead = self.store_payload_ahead(l, objects);
        let unlocked = shared.with(|s| -> Result<Option<u64>> {
            let (unit_len, new_names) = self.plan_unit(s, l, lane, objects, plan)?;
            if let (Some(off), Some(p)) = (ahead, plan.first_mut()) {
                debug_assert_eq!(off, l.tail, "the unit moved after its payload was stored");
                p.payload_stored = true;
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

    /// Store the payload of a lone full object before its unit is planned, when where it
    /// goes is already known: the lane's segment has room for the unit at its tail (so
    /// planning will not claim another). Planning (the name's index lookup, its version,
    /// index room) then runs while the payload's NT stores drain, instead of before them;
    /// on this CPU that is most of what a put costs beyond the copy and the two fences.
    /// Returns the unit's offset (the lane's tail) if the payload was stored.
    ///
    /// If planning then refuses the put (index full, the name's versions exhausted),
    /// these bytes stay behind past the lane's log end — where a crash mid-put leaves
    /// bytes too, and where nothing is read: the unit's commit word slot, headers and
    /// everything before the tail are untouched, so nothing committed changes
    /// (DESIGN.md, write path).
    fn store_payload_ahead(&self, l: &Lane, objects: &[Object<'_>]) -> Option<u64> {
        let [o] = objects else { return None };
        // Not for an explicit version (a caller's mistake there is refused in planning)
        // nor a delta (planning decides what it stores).
        if o.delta.is_some() || o.version.is_some() || o.name.is_empty() || o.name.len() > NAME_MAX || !l.active {
            return None;
        }
        let len = o.len_bytes();
        if len > max_object_bytes(self.sb, o.name.len()) || mutant::on("payload_after_first_fence") {
            return None;
        }
        let unit_len = LINE + format::object_len(o.name.len(), len);
        if l.tail + unit_len > l.seg_end {
            return None;
        }
        let mut w = NtStream::new(self.media, l.tail + LINE + object_head_len(o.name.len()));
        o.parts.iter().for_each(|p| w.write(p));
        w.finish();
        Some(l.tail)
    }

    /// Step 1–2 of the protocol under the shared state: validate, take versions, make
    /// index room, claim a segment if the unit does not fit. Returns the unit's length
    /// and how many names it creates. Nothing is written to the media except a claimed
    /// segment's header.
    fn plan_unit<X: IndexMemory, const N: usize>(
        &self,
        s: &mut Shared<X>,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut Plan<N>,
    ) -> Result<(u64, usize)> {
        // 1. Validate and resolve versions; count new names; size the unit. Each name is
        // hashed once; its index slot, found here, is reused when the index learns it.
        let mut new_names = 0usize;
        let mut unit_len = LINE;
        // Bits of the name hashes seen so far in this unit: an object whose bit is clear
        // has no earlier object of the same name, and skips the scan for one.
        let mut seen = [0u64; 8];
        for (i, o) in objects.iter().enumerate() {
            if o.name.is_empty() {
                return Err(Error::NameEmpty);
            }
            if o.name.len() > NAME_MAX {
                return Err(Error::NameTooLong { len_bytes: o.name.len() });
            }
            let hint = s.name_hints.get(i).copied().unwrap_or(NONE);
            let (hash, found) = match s.index.name_is(&self.media, hint, o.name) {
                Some(hash) => (hash, Some(hint)),
                None => {
                    let hash = name_hash(o.name);
                    (hash, s.index.find_name(&self.media, hash, o.name))
                }
            };
            // The last earlier object of this unit with the same name holds its latest
            // version (versions of one name increase through a unit).
            let bit = (hash >> 55) as usize; // 0..512
            let word = &mut seen[bit / 64];
            let maybe_earlier = *word & 1 << (bit % 64) != 0;
            *word |= 1 << (bit % 64);
            let earlier = objects.get(..i).unwrap_or(&[]);
            let in_unit = match maybe_earlier {
                true => plan.iter().zip(earlier).rev().find(|(p, e)| p.hash == hash && e.name == o.name),
                false => None,
            };
            let (name_id, latest) = match (in_unit, found) {
                (Some((p, _)), _) => (p.name_id, Some(p.version)),
                (None, Some(id)) => {
                    let n = s.index.name(id);
                    let committed = (n.last != NONE).then(|| s.index.entry(n.last).version);
                    (id, committed.max((n.reserved != 0).then_some(n.reserved)))
                }
                (None, None) => {
                    new_names += 1;
                    (NONE, None)
                }
            };
            let version = match (o.version, latest) {
                (Some(v), Some(l)) if v <= l => return Err(Error::VersionNotIncreasing { latest: l, given: v }),
                (Some(v), _) => v,
                (None, Some(l)) => l.checked_add(1).ok_or(Error::VersionNotIncreasing { latest: l, given: l })?,
                (None, None) => 1,
            };
            let len = o.len_bytes();
            let max = max_object_bytes(self.sb, o.name.len());
            if len > max {
                return Err(Error::TooLarge { len_bytes: len, max_bytes: max });
            }
            let delta = match o.delta {
                Some(d) => self.plan_delta(s, l, found, d, len, version)?,
                None => None,
            };
            let stored = delta.map_or(len, |d| d.stored_len());
            unit_len += format::object_len(o.name.len(), stored);
            // objects.len() <= N was checked: this cannot fail.
            let _ = plan.push(Planned {
                hash,
                version,
                len,
                stored,
                name_id,
                payload_sum: 0,
                delta,
                payload_stored: false,
            });
        }
        // A unit that needs a new segment stores its deltas as full versions: their
        // parents stay behind in the old one (see `plan_delta`).
        let claims = !l.active || l.tail + unit_len > l.seg_end;
        if claims && !self.delta.chains_cross_segments && plan.iter().any(|p| p.delta.is_some()) {
            unit_len = LINE;
            for (o, p) in objects.iter().zip(plan.iter_mut()) {
                p.delta = None;
                p.stored = p.len;
                unit_len += format::object_len(o.name.len(), p.stored);
            }
        }
        if unit_len > self.sb.segment_len - LINE {
            return Err(Error::TooLarge { len_bytes: unit_len, max_bytes: self.sb.segment_len - 2 * LINE });
        }
        // Room for this unit beside the units other lanes planned but have not published.
        let room = objects.len() + s.pending_entries;
        s.index.reserve(room, new_names).map_err(|e| s.index.full(e))?;
        // 2. Space: the lane's segment, or a newly claimed one.
        if !l.active || l.tail + unit_len > l.seg_end {
            *l = self.claim_segment(s, lane, *l)?;
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

    /// A delta of `len` bytes against `d.parent` of name `found`, if the options allow:
    /// `None` means a full version. Refuses bad ranges even when the answer is `None`.
    ///
    /// A chain never leaves its segment (unless `chains_cross_segments`): the parent must
    /// be in the lane's current segment (and [`Self::plan_unit`] makes the delta a full
    /// version if the unit then needs a new one). So every delta's ancestors share its
    /// segment, and retention, which keeps what a staying delta is rebuilt from, never
    /// has to keep an older segment for it — with chains across segments, every boundary
    /// was straddled by one and a lane's oldest segment could never be released: a
    /// stream of deltas with retention ended `Full`.
    fn plan_delta<X: IndexMemory>(
        &self,
        s: &Shared<X>,
        l: &Lane,
        found: Option<u32>,
        d: Delta<'_>,
        len: u64,
        version: u64,
    ) -> Result<Option<DeltaPlan>> {
        let record = delta::plan_record(self.sb.pool_id, d.parent, d.changes, self.delta.chunk_bytes, len)?;
        // The parent: committed (in the index), of the same length, not too deep, in the
        // lane's current segment (by the byte before its payload: its own header or name).
        let parent = found.and_then(|id| s.index.find_version(id, d.parent)).map(|e| *s.index.entry(e));
        let same_len = |p: &Entry| p.len_bytes == len || mutant::on("delta_ignores_parent_len");
        let here = |p: &Entry| {
            self.delta.chains_cross_segments
                || l.active && (l.seg_end - self.sb.segment_len..l.seg_end).contains(&(p.payload_off - 1))
        };
        let Some(parent) = parent.filter(|p| same_len(p) && here(p) && p.version < version) else { return Ok(None) };
        let plan = DeltaPlan { record, depth: parent.depth + 1 };
        let small = plan.stored_len().saturating_mul(100) <= len.saturating_mul(self.delta.max_percent as u64);
        let ok = self.sb.has_deltas() && plan.depth <= self.delta.full_every && small;
        Ok(ok.then_some(plan))
    }

    /// Steps 3–6: store the unit, fence, store the commit word, fence. Returns the
    /// unit's offset and sequence number; the lane's position moves past it. Fails only
    /// when a delta's `Changes` answers differently than when it was planned
    /// ([`Self::store_delta`]): then nothing is committed and the lane stays where it
    /// was (the stores made are fenced, past its log end, inside the planned unit).
    /// `early_publish(unit_off, seq, plan)` runs after the unit's stores are issued and
    /// before the first fence, for a caller no one else can observe until this returns
    /// (exclusive access, or the lock held to the end): work there overlaps the drain.
    fn write_unit(
        &self,
        l: &mut Lane,
        lane: u32,
        objects: &[Object<'_>],
        plan: &mut [Planned],
        unit_len: u64,
        early_publish: impl FnOnce(u64, u64, &[Planned]),
    ) -> Result<(u64, u64)> {
        // 3. Payloads and headers, all by NT stores. The batch header and commit word
        // are computed after the payloads are stored: work done while the NT stores
        // drain (before the fence) is nearly free, work done before them is not.
        let pool_id = self.sb.pool_id;
        let unit_off = l.tail;
        let header = |seq: u64| {
            let mut bh = BatchHeader {
                commit: 0,
                seq,
                unit_len,
                object_count: objects.len() as u32,
                lane,
                flags: 0,
                reserved: [0; 2],
                checksum: 0,
            };
            bh.checksum = bh.compute_checksum(pool_id);
            (bh, commit_word(pool_id, lane, seq, bh.checksum))
        };
        if mutant::on("commit_before_payload") {
            self.media.store_word_nt(unit_off as usize, header(l.next_seq).1);
        }
        let late_payload = mutant::on("payload_after_first_fence");
        let refuse = |e| {
            // Drain what was stored (a segment claim's header too) before going on.
            self.media.fence();
            Err(e)
        };
        if !late_payload {
            if let Err(e) = self.store_objects(objects, plan, unit_off) {
                return refuse(e);
            }
        }
        let seq = l.next_seq;
        let (bh, commit) = header(seq);
        self.store_unit_header(unit_off, bh, commit);
        let mut early_publish = Some(early_publish);
        if !late_payload {
            if let Some(f) = early_publish.take() {
                f(unit_off, seq, plan)
            }
        }
        // 4. Everything but the commit word is durable after this fence.
        if !mutant::on("no_fence_before_commit") {
            self.media.fence();
        }
        if late_payload {
            if let Err(e) = self.store_objects(objects, plan, unit_off) {
                return refuse(e);
            }
            if let Some(f) = early_publish.take() {
                f(unit_off, seq, plan)
            }
        }
        // 5–6. The commit word, alone, then the fence that makes the commit durable.
        if mutant::on("cached_commit") {
            self.media.store(unit_off as usize, &commit.to_le_bytes());
        } else if mutant::on("straddling_commit") {
            let b = commit.to_le_bytes();
            self.media.store(unit_off as usize, &b[..4]);
            self.media.store(unit_off as usize + 4, &b[4..]);
            self.media.flush(unit_off as usize, 8);
        } else if !mutant::on("commit_before_payload") {
            self.media.store_word_nt(unit_off as usize, commit);
        }
        if !mutant::on("no_final_fence") {
            self.media.fence();
        }
        l.tail = unit_off + unit_len;
        l.next_seq = seq + 1;
        l.closed = false;
        Ok((unit_off, seq))
    }

    /// A unit's batch header (step 3), as one whole-line NT store: its first word, the
    /// commit word slot, gets `!commit` — never the commit word itself, which follows
    /// alone after the fence (steps 4–5). A whole line is one write-combining flush on
    /// this CPU; the 56 bytes after the slot alone were a partial one, costing more.
    fn store_unit_header(&self, unit_off: u64, mut bh: BatchHeader, commit: u64) {
        let from = if mutant::on("commit_before_payload") {
            8 // that mutant stored the commit word in the slot already: keep it there
        } else {
            bh.commit = !commit;
            0
        };
        self.media.store_nt(unit_off as usize + from, &bytemuck::bytes_of(&bh)[from..]);
    }

    /// The index, the statistics and the lane's published state learn unit `seq` (at
    /// `unit_off`): after its commit, or before it where no one can look until then.
    fn publish<X: IndexMemory>(
        &self,
        s: &mut Shared<X>,
        lane: u32,
        unit_off: u64,
        seq: u64,
        objects: &[Object<'_>],
        plan: &[Planned],
    ) {
        let mut obj_off = unit_off + LINE;
        for (i, (p, o)) in plan.iter().zip(objects).enumerate() {
            let payload_off = obj_off + object_head_len(o.name.len());
            let entry = Entry {
                version: p.version,
                payload_off,
                len_bytes: p.len,
                stored_len: p.stored,
                seq,
                name: 0,
                next: NONE,
                lane,
                depth: p.delta.map_or(0, |d| d.depth),
                payload_sum: p.payload_sum,
            };
            let r = if p.name_id != NONE {
                s.index.append(p.name_id, entry)
            } else {
                let name_off = obj_off + size_of::<ObjectHeader>() as u64;
                s.index.insert(self.media, p.hash, o.name, name_off, entry)
            };
            debug_assert!(r.is_ok(), "index room was reserved and versions taken: {r:?}");
            let Ok(e_id) = r else { continue };
            if let Some(h) = s.name_hints.get_mut(i) {
                *h = s.index.entry(e_id).name;
            }
            s.stats.objects += 1;
            s.stats.payload_bytes += p.stored;
            obj_off = payload_off + line_up(p.stored);
        }
        s.stats.units += 1;
        s.pending_entries -= plan.len();
        s.lane_infos[lane as usize] = Some(LaneInfo { units: seq + 1, closed: false });
    }

    /// NT-store every object of a unit starting at `unit_off`: each payload, then its
    /// header and name (the order of NT stores before a fence does not matter: all of
    /// them are pending until it). The header checksums are computed while the payload
    /// drains.
    fn store_objects(&self, objects: &[Object<'_>], plan: &mut [Planned], unit_off: u64) -> Result<()> {
        let pool_id = self.sb.pool_id;
        let checksum = self.sb.has_payload_checksum();
        let mut obj_off = unit_off + LINE;
        for (o, p) in objects.iter().zip(plan) {
            let payload_off = obj_off + object_head_len(o.name.len());
            let payload_sum = match (o.delta, p.delta) {
                (Some(d), Some(plan)) => self.store_delta(o.parts, d.changes, plan, payload_off, checksum)?,
                _ => {
                    if !p.payload_stored {
                        let mut w = NtStream::new(self.media, payload_off);
                        o.parts.iter().for_each(|p| w.write(p));
                        w.finish();
                    }
                    if checksum {
                        let mut h = Hasher::new(pool_id);
                        o.parts.iter().for_each(|p| h.write(p));
                        h.finish()
                    } else {
                        0
                    }
                }
            };
            let mut oh = ObjectHeader {
                version: p.version,
                payload_len: p.stored,
                name_len: o.name.len() as u16,
                flags: if p.delta.is_some() { format::OBJECT_DELTA } else { 0 },
                depth: p.delta.map_or(0, |d| d.depth),
                payload_sum,
                object_len: if p.delta.is_some() { p.len } else { 0 },
                checksum: 0,
            };
            oh.checksum = oh.compute_checksum(pool_id, o.name);
            // Header, name and zero padding to the payload's line, as whole-line NT
            // stores (a partial line is a slower write-combining flush): one line for a
            // name of up to 16 bytes, else one store of the header and one of the name
            // with its padding (the header is 48 bytes, so the name starts on a word).
            let head = size_of::<ObjectHeader>();
            if head + o.name.len() <= LINE as usize {
                let mut line = [0u8; LINE as usize];
                line[..head].copy_from_slice(bytemuck::bytes_of(&oh));
                line[head..head + o.name.len()].copy_from_slice(o.name);
                self.media.store_nt(obj_off as usize, &line);
            } else {
                let mut name = [0u8; NAME_MAX + LINE as usize];
                name[..o.name.len()].copy_from_slice(o.name);
                let padded = (object_head_len(o.name.len()) as usize) - head;
                self.media.store_nt(obj_off as usize, bytemuck::bytes_of(&oh));
                self.media.store_nt(obj_off as usize + head, &name[..padded]);
            }
            p.payload_sum = payload_sum;
            obj_off = payload_off + line_up(p.stored);
        }
        Ok(())
    }

    /// NT-store a delta payload at `payload_off`: its record and extent table, zeros to
    /// the next line, and the changed runs of the object (`parts`). Returns its payload
    /// checksum (0 without payload checksums), hashed from the caller's buffers.
    ///
    /// `changes` is asked once more here, and it is caller code that may answer
    /// differently than when the delta was planned: what it gives is clipped to the
    /// planned table and data, so nothing outside this payload is ever written, and
    /// re-hashed as planning hashed it; any difference is `ChangesInconsistent`, and the
    /// caller does not commit the unit. The payload checksum then takes the extents from
    /// the table just stored, not from `changes`.
    fn store_delta(
        &self,
        parts: &[&[u8]],
        changes: &dyn Changes,
        plan: DeltaPlan,
        payload_off: u64,
        checksum: bool,
    ) -> Result<u64> {
        let chunk = self.delta.chunk_bytes;
        let record = plan.record;
        let object_len = parts.iter().map(|p| p.len() as u64).sum();
        let data_off = format::delta_data_off(record.extent_count);
        let mut table = NtStream::new(&self.media, payload_off);
        let mut data = NtStream::new(&self.media, payload_off + data_off);
        table.write(bytemuck::bytes_of(&record));
        let mut h = delta::table_hasher(self.sb.pool_id);
        let (mut extents, mut stored, mut over) = (0u64, 0u64, false);
        let ranges = delta::for_each_run(changes, chunk, object_len, &mut |off, n| {
            if over || extents == record.extent_count || n > record.data_len - stored {
                over = true;
                return;
            }
            let x = format::Extent { off, len: n };
            h.write(bytemuck::bytes_of(&x));
            table.write(bytemuck::bytes_of(&x));
            for_each_part_slice(parts, off, n, &mut |b| data.write(b));
            extents += 1;
            stored += n;
        });
        let pad = data_off - size_of::<format::DeltaRecord>() as u64 - extents * 16;
        table.write(&[0u8; LINE as usize][..pad.min(LINE) as usize]);
        table.finish();
        data.finish();
        let same = ranges.is_ok()
            && !over
            && extents == record.extent_count
            && stored == record.data_len
            && delta::table_sum(h, &record) == record.table_sum;
        if !same {
            return Err(Error::ChangesInconsistent);
        }
        if !checksum {
            return Ok(0);
        }
        // The record, the table and its zero pad as stored above (read back, line by
        // line), then the object's bytes at each stored extent.
        let mut h = Hasher::new(self.sb.pool_id);
        let mut line = [0u8; LINE as usize];
        for at in (payload_off..payload_off + data_off).step_by(LINE as usize) {
            self.media.read(at as usize, &mut line);
            h.write(&line);
        }
        let mut at = payload_off + size_of::<format::DeltaRecord>() as u64;
        for _ in 0..extents {
            let x: format::Extent = format::read_pod(&self.media, at);
            for_each_part_slice(parts, x.off, x.len, &mut |b| h.write(b));
            at += size_of::<format::Extent>() as u64;
        }
        Ok(h.finish())
    }

    /// Claim a free segment as the next in `lane`'s chain. Its header is stored but not
    /// fenced: the caller's unit, written next by this thread, fences it with its own
    /// stores, before its commit word.
    fn claim_segment<X: IndexMemory>(&self, s: &mut Shared<X>, lane: u32, old: Lane) -> Result<Lane> {
        let count = self.sb.segment_count;
        let cursor = s.alloc_cursor;
        let segs =
            s.index.segments(count as usize).ok_or(Error::IndexFull { what: "segment slots", records: 0, names: 0 })?;
        let free = if mutant::on("alloc_ignores_owner") {
            cursor
        } else {
            (0..count).map(|k| (cursor + k) % count).find(|&i| segs[i as usize].lane == FREE).ok_or(Error::Full)?
        };
        let (chain_seq, mut first_seq) = if old.active { (old.chain_seq + 1, old.next_seq) } else { (0, 0) };
        if mutant::on("first_seq_off_by_one") && old.active {
            first_seq += 1;
        }
        let mut h = SegmentHeader {
            magic: SEGMENT_MAGIC,
            pool_id: self.sb.pool_id,
            lane,
            flags: 0,
            chain_seq,
            first_seq,
            reserved: [0; 2],
            checksum: 0,
        };
        h.checksum = h.compute_checksum();
        let seg_off = self.sb.segment_off(free);
        // A header that is not all zero (a claim torn by a crash, a torn invalidation, an
        // earlier pool's, garbage) is zeroed and fenced first. Its words may agree with
        // the new header's (same magic, pool id, lane): if a crash then persisted only
        // those, the old words would make a whole, valid header again — an old claim
        // reborn, with the wrong chain or first sequence.
        const ZERO: [u8; size_of::<SegmentHeader>()] = [0; size_of::<SegmentHeader>()];
        let mut old_header = ZERO;
        self.media.read(seg_off as usize, &mut old_header);
        if old_header != ZERO && !mutant::on("torn_claim_kept") {
            self.media.store_nt(seg_off as usize, &ZERO);
            self.media.fence();
        }
        // No fence of its own: the claim is made only while planning a unit, as its last
        // step, and the unit's first fence (before its commit word, by this same thread)
        // makes the header durable before anything in the segment can count.
        if mutant::on("segment_header_unfenced") {
            self.media.store(seg_off as usize, bytemuck::bytes_of(&h)); // cached, never flushed
        } else {
            self.media.store_nt(seg_off as usize, bytemuck::bytes_of(&h));
        }
        segs[free as usize] = crate::index::SegSlot { chain_seq, first_seq, lane, index: free };
        s.alloc_cursor = (free + 1) % count;
        if !old.active {
            s.stats.lanes += 1;
        }
        s.stats.segments_used += 1;
        Ok(Lane {
            active: true,
            chain_seq,
            tail: seg_off + LINE,
            seg_end: seg_off + self.sb.segment_len,
            next_seq: old.next_seq,
            closed: false,
        })
    }

    /// Steps 2–6 for an end-of-stream marker: a unit of no objects.
    fn close_unit<X: IndexMemory>(&self, shared: &mut impl SharedAccess<X>, l: &mut Lane, lane: u32) -> Result<()> {
        self.marker_unit(shared, l, lane, format::UNIT_END_OF_STREAM, 0)
    }

    /// A unit of no objects (`flags`: end of stream, or truncate with retention base
    /// `base`) by the whole commit protocol.
    fn marker_unit<X: IndexMemory>(
        &self,
        shared: &mut impl SharedAccess<X>,
        l: &mut Lane,
        lane: u32,
        flags: u64,
        base: u64,
    ) -> Result<()> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        if !l.active || l.tail + LINE > l.seg_end {
            *l = shared.with(|s| self.claim_segment(s, lane, *l))?;
        }
        let mut bh = BatchHeader {
            commit: 0,
            seq: l.next_seq,
            unit_len: LINE,
            object_count: 0,
            lane,
            flags,
            reserved: [base, 0],
            checksum: 0,
        };
        bh.checksum = bh.compute_checksum(self.sb.pool_id);
        let commit = commit_word(self.sb.pool_id, lane, l.next_seq, bh.checksum);
        self.store_unit_header(l.tail, bh, commit);
        self.media.fence();
        self.media.store_word_nt(l.tail as usize, commit);
        if !mutant::on("no_final_fence_marker") {
            self.media.fence();
        }
        l.tail += LINE;
        l.next_seq += 1;
        if flags == format::UNIT_END_OF_STREAM {
            l.closed = true;
        }
        shared.with(|s| {
            s.stats.units += 1;
            s.lane_infos[lane as usize] = Some(LaneInfo { units: l.next_seq, closed: l.closed });
        });
        Ok(())
    }
}

impl<M: Media, X: IndexMemory> Pool<M, X> {
    /// Close `lane`'s stream: commit an end-of-stream marker (a unit of no objects) by
    /// the same protocol as a put. Followers see the end of the stream; a later put on
    /// the lane reopens it.
    pub fn close_lane(&mut self, lane: u32) -> Result<()> {
        let cell = self.lanes.get_mut(lane as usize).filter(|_| lane < self.sb.lanes_max);
        let cell = cell.ok_or(Error::NoSuchLane { lane, lanes_max: self.sb.lanes_max })?;
        let w = Writer { media: &self.media, sb: &self.sb, writable: self.writable, delta: self.delta_opts };
        w.close_unit(&mut Own(self.shared.get_mut()), cell.state.get_mut(), lane)
    }

    /// Retention: on every lane, release the oldest segments whose objects all have at
    /// least `keep_versions` newer versions of their name and are not the full version
    /// or an earlier delta that a version staying in the pool is rebuilt from — never a
    /// lane's current segment, and only a prefix of each lane's chain. Returns the
    /// segments freed.
    ///
    /// Crash-safe in two steps: a truncate unit (committed like a put) records the lane's
    /// new base; then the released segments' headers are invalidated, oldest first, each
    /// fenced. A crash between them leaves released segments with valid headers, which
    /// recovery skips and the next writer's open invalidates before any is reused. The
    /// index forgets the released objects (a recovery runs at the end).
    pub fn reclaim(&mut self, keep_versions: u32) -> Result<u32> {
        if !self.writable {
            return Err(Error::ReadOnly);
        }
        let lanes_max = self.sb.lanes_max as usize;
        let mut base = [u64::MAX; LANES_MAX as usize];
        let mut lowest = [u64::MAX; LANES_MAX as usize];
        {
            let s = self.shared.get_mut();
            let count = self.sb.segment_count as usize;
            let segs =
                s.index.segments(count).ok_or(Error::IndexFull { what: "segment slots", records: 0, names: 0 })?;
            for seg in segs.iter().filter(|g| g.lane != FREE && g.first_seq != crate::recover::RELEASED) {
                if let Some(l) = lowest.get_mut(seg.lane as usize) {
                    *l = (*l).min(seg.chain_seq);
                }
            }
            // A lane's current segment bounds its base; so does every segment holding one
            // of the last `keep_versions` versions of some name.
            for (lane, cell) in self.lanes.iter_mut().enumerate().take(lanes_max) {
                let l = *cell.state.get_mut();
                if l.active {
                    base[lane] = l.chain_seq;
                }
            }
            // The chain position of the segment holding `e`. The byte before the payload is
            // the object's own (its header or name): an empty payload may start exactly at
            // the segment's end.
            let chain_pos = |s: &Shared<X>, e: &Entry| {
                let seg = ((e.payload_off - 1 - self.sb.data_off) / self.sb.segment_len) as usize;
                s.index.segments_ref().get(seg).map_or(0, |g| g.chain_seq)
            };
            // Lower `base` so that entry `id` and its ancestors down to its full version
            // stay (as far as its chain is intact); true if it moved.
            let mut chain = Chain::new();
            let mut keep_chain = |s: &Shared<X>, base: &mut [u64; LANES_MAX as usize], id: u32| {
                let _ = chain_of(&self.media, s, id, &mut chain);
                let links = if mutant::on("retention_drops_delta_bases") { &chain[..1] } else { &chain[..] };
                let mut moved = false;
                for &link in links {
                    let link = s.index.entry(link);
                    let pos = chain_pos(s, link);
                    if let Some(b) = base.get_mut(link.lane as usize).filter(|b| pos < **b) {
                        *b = pos;
                        moved = true;
                    }
                }
                moved
            };
            for id in 0..s.index.name_count() as u32 {
                let n = *s.index.name(id);
                let mut at = n.first;
                for i in 0..n.count {
                    if at == NONE {
                        break;
                    }
                    let e = *s.index.entry(at);
                    if n.count - 1 - i < keep_versions {
                        keep_chain(s, &mut base, at);
                    }
                    at = e.next;
                }
            }
            // Every delta that stays (its segment is at or above its lane's base) keeps its
            // ancestors too, which may keep more deltas: repeat until nothing moves (bases
            // only go down, so this ends).
            let mut moved = true;
            while moved {
                moved = false;
                for i in 0..s.index.len() as u32 {
                    let e = *s.index.entry(i);
                    let stays = base.get(e.lane as usize).is_some_and(|&b| chain_pos(s, &e) >= b);
                    if e.depth > 0 && stays {
                        moved |= keep_chain(s, &mut base, i);
                    }
                }
            }
        }
        // All or nothing: a lane whose segment has no room for its truncate unit claims a
        // new one, and if the free segments do not cover every such lane, nothing is
        // written (a lane truncated before a later lane found the pool full would leave a
        // refused reclaim half done).
        let releasing = |lane: usize| base[lane] != u64::MAX && base[lane] > lowest[lane];
        let claims = (0..lanes_max)
            .filter(|&lane| releasing(lane))
            .filter(|&lane| {
                let l = *self.lanes[lane].state.get_mut();
                !l.active || l.tail + LINE > l.seg_end
            })
            .count() as u32;
        let count = self.sb.segment_count as usize;
        let segs = self.shared.get_mut().index.segments(count).ok_or(Error::IndexFull {
            what: "segment slots",
            records: 0,
            names: 0,
        })?;
        if claims as usize > segs.iter().filter(|g| g.lane == FREE).count() {
            return Err(Error::Full);
        }
        let mut freed = 0;
        for lane in 0..lanes_max {
            if !releasing(lane) {
                continue;
            }
            let w = Writer { media: &self.media, sb: &self.sb, writable: self.writable, delta: self.delta_opts };
            let l = self.lanes[lane].state.get_mut();
            w.marker_unit(&mut Own(self.shared.get_mut()), l, lane as u32, format::UNIT_TRUNCATE, base[lane])?;
            freed += (base[lane] - lowest[lane]) as u32;
        }
        if freed > 0 {
            // Mark the released segments as recovery would, then invalidate them.
            self.refresh()?;
            self.invalidate_released(false);
            self.refresh()?;
        }
        Ok(freed)
    }

    /// Invalidate the headers of segments retention released (a crash may have left them
    /// valid), oldest first per lane, each fenced, so a lane's chain stays contiguous at
    /// every step; then they are free.
    fn invalidate_released(&mut self, newest_first: bool) {
        let count = self.sb.segment_count as usize;
        let s = self.shared.get_mut();
        let Some(segs) = s.index.segments(count) else { return };
        let released = |g: &crate::index::SegSlot| g.lane != FREE && g.first_seq == crate::recover::RELEASED;
        if !segs.iter().any(released) {
            return;
        }
        // Released segments first, in (lane, chain) order: one sort, then one pass (it
        // was a scan of every segment per released one: minutes for a large release).
        // The slots go back to index order (allocation needs it) at the end.
        segs.sort_unstable_by_key(|g| {
            let chain = if newest_first { u64::MAX - g.chain_seq } else { g.chain_seq };
            (!released(g), g.lane, chain)
        });
        for g in segs.iter_mut().take_while(|g| released(g)) {
            // The whole header, not just its magic: a later claim of this segment rewrites
            // it with NT stores, and a crash that persisted only the new magic word must
            // not leave the old header (old fields, old checksum) valid again.
            self.media.store_nt(self.sb.segment_off(g.index) as usize, &[0u8; 64]);
            self.media.fence();
            g.lane = FREE;
            g.first_seq = 0;
        }
        segs.sort_unstable_by_key(|g| g.index);
    }

    /// What recovery (and the puts since) left on `lane`; `None` if it holds no segment.
    pub fn lane_info(&self, lane: u32) -> Option<LaneInfo> {
        *self.shared.read().lane_infos.get(lane as usize)?
    }

    /// The entry of (`name`, `version`) in `s`'s index.
    fn lookup<'s>(&self, s: &'s Shared<X>, name: &[u8], version: u64) -> Result<&'s Entry> {
        Ok(s.index.entry(self.lookup_id(s, name, version)?.0))
    }

    /// The entry id of (`name`, `version`) in `s`'s index, and whether this reader is
    /// walking the name's versions in order (it asked for the version after the one it
    /// read last).
    fn lookup_id(&self, s: &Shared<X>, name: &[u8], version: u64) -> Result<(u32, bool)> {
        let hint = self.read_hint.load(Ordering::Relaxed);
        let (hint_name, hint_entry) = ((hint >> 32) as u32, hint as u32);
        // The hint's name matches by its bytes on the media. A read-only pool's index may
        // be older than a writer's retention, which can have put another name's bytes
        // there: it also needs the name's hash to agree (as `find_name` always does).
        let id = match s.index.name_is(&self.media, hint_name, name) {
            Some(hash) if self.writable || hash == name_hash(name) => hint_name,
            _ => s.index.find_name(&self.media, name_hash(name), name).ok_or(Error::NotFound)?,
        };
        let e = match s.index.find_version_near(id, version, if id == hint_name { hint_entry } else { NONE }) {
            Some(e) => e,
            None => s.index.find_version(id, version).ok_or(Error::NotFound)?,
        };
        self.read_hint.store((id as u64) << 32 | e as u64, Ordering::Relaxed);
        let walking = id == hint_name && s.index.next_of(hint_entry).is_some_and(|n| n.version == version);
        Ok((e, walking))
    }

    /// Copy version `version` of `name` into `buf`; returns its length. A delta version
    /// is rebuilt from its full version and the deltas up to it.
    pub fn get(&self, name: &[u8], version: u64, buf: &mut [u8]) -> Result<usize> {
        // The read lock's Acquire pairs with the publishing writer's Release: an entry
        // seen here belongs to a committed unit whose payload stores came before.
        let mut chain = Chain::new();
        let (e_id, e, walked, ahead) = {
            let s = self.shared.read();
            let (id, walking) = self.lookup_id(&s, name, version)?;
            let walked = chain_of(&self.media, &s, id, &mut chain);
            // Read-ahead: a reader walking the versions in order reads the next one next.
            let next = walking.then(|| s.index.next_of(id)).flatten();
            (id, *s.index.entry(id), walked, next.map(|n| (n.payload_off, n.stored_len.min(READ_AHEAD))))
        };
        // A delta's ancestors are read under the lock again (a full version, the usual
        // case, needs no second look).
        let entry = |id: u32| if id == e_id { e } else { *self.shared.read().index.entry(id) };
        let len = e.len_bytes as usize;
        let dst = buf.get_mut(..len).ok_or(Error::BufferTooSmall { needed_bytes: e.len_bytes })?;
        // The full version first, then each delta from the oldest; each payload checked
        // against its checksum (if the pool has them) as it is used.
        let checksums = self.sb.has_payload_checksum();
        let copied = walked.and_then(|()| {
            for &id in chain.iter().rev() {
                let link = &entry(id);
                let sum = if link.depth == 0 {
                    self.media.read(link.payload_off as usize, dst);
                    checksums.then(|| hash64(self.sb.pool_id, dst))
                } else {
                    delta::walk_record(&self.media, self.sb.pool_id, link, &mut |at, from, n| {
                        if let Some(d) = dst.get_mut(at as usize..(at + n) as usize) {
                            self.media.read(from as usize, d);
                        }
                    })?;
                    checksums.then(|| self.media_sum(link.payload_off, link.stored_len))
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
        if !self.writable && !chain.iter().all(|&id| self.still_there(&entry(id))) {
            return Err(Error::NotFound);
        }
        copied
    }

    /// `nvs-hash64(pool_id, media[off .. off + len])`, read in blocks.
    fn media_sum(&self, off: u64, len: u64) -> u64 {
        let mut chunk = [0u8; 4096];
        let mut h = Hasher::new(self.sb.pool_id);
        let (mut off, end) = (off, off + len);
        while off < end {
            let n = ((end - off) as usize).min(chunk.len());
            self.media.read(off as usize, &mut chunk[..n]);
            h.write(&chunk[..n]);
            off += n as u64;
        }
        h.finish()
    }

    /// For a reader beside a writer in another process: is the segment holding `e` still
    /// the one the index saw? Checked after the payload was copied (the Acquire fence
    /// keeps the header read after the copy): retention invalidates a segment's header
    /// before anything in it is overwritten, so an unchanged header means a clean copy.
    fn still_there(&self, e: &Entry) -> bool {
        let s = self.shared.read();
        self.still_there_in(&s, e)
    }

    /// [`Self::still_there`] with the shared state already read-locked.
    fn still_there_in(&self, s: &Shared<X>, e: &Entry) -> bool {
        crate::sync::fence_acquire();
        // From the byte before the payload (the object's own header or name): an empty
        // payload may start exactly at the segment's end.
        let seg = ((e.payload_off - 1 - self.sb.data_off) / self.sb.segment_len) as u32;
        let slot = s.index.segments_ref().get(seg as usize).copied();
        let Some(slot) = slot else { return false };
        matches!(format::decode_segment(&self.media, &self.sb, seg), Some(h) if h.lane == slot.lane && h.chain_seq == slot.chain_seq)
    }

    /// The latest (committed) version of `name`.
    pub fn latest(&self, name: &[u8]) -> Result<u64> {
        let s = self.shared.read();
        let id = s.index.find_name(&self.media, name_hash(name), name).ok_or(Error::NotFound)?;
        let last = if mutant::on("latest_is_oldest") { s.index.name(id).first } else { s.index.name(id).last };
        if last == NONE {
            return Err(Error::NotFound);
        }
        Ok(s.index.entry(last).version)
    }

    /// Facts about version `version` of `name`.
    pub fn stat(&self, name: &[u8], version: u64) -> Result<ObjectInfo> {
        let s = self.shared.read();
        Ok(info(self.lookup(&s, name, version)?))
    }

    /// Every version of `name`, oldest first. The iterator holds the index's read lock:
    /// drop it before putting from this thread.
    pub fn versions(&self, name: &[u8]) -> Result<VersionsIter<'_, X>> {
        let s = self.shared.read();
        let id = s.index.find_name(&self.media, name_hash(name), name).ok_or(Error::NotFound)?;
        let n = *s.index.name(id);
        Ok(VersionsIter { shared: s, at: n.first, left: n.count })
    }

    /// Every distinct name, in the order first committed (recovered).
    pub fn names(&self) -> impl Iterator<Item = NameInfo> + '_ {
        let s = self.shared.read();
        let count = s.index.name_count() as u32;
        (0..count).filter_map(move |id| {
            let n = s.index.name(id);
            (n.last != NONE).then(|| NameInfo { id, versions: n.count, latest: s.index.entry(n.last).version })
        })
    }

    /// The bytes of name `id` (from [`Pool::names`]), copied into `buf`. Empty if they
    /// are gone: in a read-only pool whose index is older than a writer's retention, the
    /// segment holding a name's bytes may have been reused (checked by the name's hash;
    /// `refresh` brings the index up to date).
    pub fn name_bytes<'b>(&self, id: u32, buf: &'b mut [u8; NAME_MAX]) -> &'b [u8] {
        let s = self.shared.read();
        let n = s.index.name(id);
        let dst = &mut buf[..n.name_len as usize];
        self.media.read(n.name_off as usize, dst);
        if !self.writable && name_hash(dst) != n.hash {
            return &[];
        }
        dst
    }

    /// Read every committed payload and verify its checksum (if the pool has them).
    /// Returns the number of objects checked.
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
                    if self.sb.has_payload_checksum() && self.media_sum(e.payload_off, e.stored_len) != e.payload_sum {
                        return Err(Error::Corrupted { offset: e.payload_off, kind: CorruptKind::PayloadChecksum });
                    }
                    if e.depth > 0 {
                        // Its record is sound and its chain reaches a full version.
                        delta::walk_record(&self.media, self.sb.pool_id, &e, &mut |_, _, _| {})?;
                        chain_of(&self.media, &s, id, &mut chain)?;
                    }
                    Ok(())
                })();
                // In a read-only pool, a writer's retention may have released and reused
                // the object's segment (or a delta parent's) since the index was built:
                // that object is gone, not damaged.
                let gone =
                    || !self.writable && !chain.iter().chain([&id]).all(|&c| self.still_there_in(&s, s.index.entry(c)));
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
pub struct VersionsIter<'a, X: IndexMemory> {
    shared: ReadGuard<'a, Shared<X>>,
    at: u32,
    left: u32,
}

impl<X: IndexMemory> Iterator for VersionsIter<'_, X> {
    type Item = ObjectInfo;
    fn next(&mut self) -> Option<ObjectInfo> {
        if self.left == 0 || self.at == NONE {
            return None;
        }
        self.left -= 1;
        let e = self.shared.index.entry(self.at);
        self.at = e.next;
        Some(info(e))
    }
}

/// One thread's writer for one lane (from [`Pool::lane`]): puts with no lock held
/// while it copies and fences, beside other lanes' writers and readers.
pub struct LaneWriter<'p, M: Media, X: IndexMemory> {
    pool: &'p Pool<M, X>,
    lane: u32,
}

impl<M: Media, X: IndexMemory> LaneWriter<'_, M, X> {
    pub fn lane(&self) -> u32 {
        self.lane
    }

    fn commit<const N: usize>(&mut self, objects: &[Object<'_>], plan: &mut Plan<N>) -> Result<()> {
        let p = self.pool;
        let w = Writer { media: &p.media, sb: &p.sb, writable: p.writable, delta: p.delta_opts };
        let cell = &p.lanes[self.lane as usize];
        // SAFETY: this writer holds the lane's claim (taken in `Pool::lane`, released in
        // `drop`), and `&mut self` keeps it from re-entering: nothing else touches the
        // lane's state meanwhile.
        unsafe { cell.state.with_mut(|l| w.commit_unit(&mut Locked(&p.shared), l, self.lane, objects, plan)) }
    }

    /// Put `bytes` as the next version of `name`.
    pub fn put(&mut self, name: &[u8], bytes: &[u8]) -> Result<u64> {
        self.put_vectored(name, &[bytes])
    }

    /// Put several slices as one object.
    pub fn put_vectored(&mut self, name: &[u8], parts: &[&[u8]]) -> Result<u64> {
        let mut plan = Plan::<1>::new();
        self.commit(&[Object::new(name, parts)], &mut plan)?;
        Ok(plan.first().map_or(0, |p| p.version))
    }

    /// Put `bytes` as version `version` of `name` (must exceed every version taken).
    pub fn put_version(&mut self, name: &[u8], version: u64, bytes: &[u8]) -> Result<u64> {
        let mut plan = Plan::<1>::new();
        self.commit(&[Object::new(name, &[bytes]).with_version(version)], &mut plan)?;
        Ok(plan.first().map_or(0, |p| p.version))
    }

    /// [`Pool::put_delta`] on this writer's lane.
    pub fn put_delta(&mut self, name: &[u8], bytes: &[u8], parent: u64, changes: &dyn Changes) -> Result<Put> {
        let mut plan = Plan::<1>::new();
        self.commit(&[Object::new(name, &[bytes]).with_delta(parent, changes)], &mut plan)?;
        Ok(put_of(&plan))
    }

    /// Commit every object together (all or nothing after a crash).
    pub fn put_batch(&mut self, objects: &[Object<'_>]) -> Result<Versions> {
        let mut plan = Plan::<BATCH_MAX>::new();
        self.commit(objects, &mut plan)?;
        Ok(plan.iter().map(|p| p.version).collect())
    }

    /// Close the lane's stream (an end-of-stream marker).
    pub fn close(&mut self) -> Result<()> {
        let p = self.pool;
        let w = Writer { media: &p.media, sb: &p.sb, writable: p.writable, delta: p.delta_opts };
        let cell = &p.lanes[self.lane as usize];
        // SAFETY: as in `commit`.
        unsafe { cell.state.with_mut(|l| w.close_unit(&mut Locked(&p.shared), l, self.lane)) }
    }
}

impl<M: Media, X: IndexMemory> Drop for LaneWriter<'_, M, X> {
    fn drop(&mut self) {
        // Release: the next writer of this lane (its Acquire swap) sees the lane state
        // this one left.
        self.pool.lanes[self.lane as usize].claimed.store(false, Ordering::Release);
    }
}

/// What the single object of a put's plan became.
fn put_of(plan: &[Planned]) -> Put {
    plan.first().map_or(Put { version: 0, stored_bytes: 0, delta: false }, |p| Put {
        version: p.version,
        stored_bytes: p.stored,
        delta: p.delta.is_some(),
    })
}

/// Largest payload one object with a `name_len`-byte name can have in a pool.
fn max_object_bytes(sb: &Superblock, name_len: usize) -> u64 {
    (sb.segment_len - LINE - LINE - object_head_len(name_len)) & !(LINE - 1)
}

fn info(e: &Entry) -> ObjectInfo {
    ObjectInfo {
        version: e.version,
        len_bytes: e.len_bytes,
        stored_bytes: e.stored_len,
        depth: e.depth,
        lane: e.lane,
        seq: e.seq,
        offset: e.payload_off,
    }
}

/// Call `f` on the slices of `parts` (one object cut into pieces) covering bytes
/// `off .. off + len` of the object, in order.
fn for_each_part_slice(parts: &[&[u8]], off: u64, len: u64, f: &mut dyn FnMut(&[u8])) {
    let (mut start, end) = (off as usize, (off + len) as usize);
    let mut base = 0usize;
    for p in parts {
        let p_end = base + p.len();
        if start < p_end && start < end {
            let stop = end.min(p_end);
            f(&p[start - base..stop - base]);
            start = stop;
        }
        base = p_end;
        if start >= end {
            break;
        }
    }
}

/// Streams slices to the media with NT stores at 8-byte aligned offsets, however the
/// slices are cut (vectored puts): a partial word is carried to the next slice.
struct NtStream<'m, M: Media> {
    media: &'m M,
    off: u64,
    carry: [u8; 8],
    carry_len: usize,
}

impl<'m, M: Media> NtStream<'m, M> {
    fn new(media: &'m M, off: u64) -> Self {
        debug_assert!(off.is_multiple_of(8));
        NtStream { media, off, carry: [0; 8], carry_len: 0 }
    }

    fn write(&mut self, mut bytes: &[u8]) {
        if self.carry_len > 0 {
            let take = (8 - self.carry_len).min(bytes.len());
            self.carry[self.carry_len..self.carry_len + take].copy_from_slice(&bytes[..take]);
            self.carry_len += take;
            bytes = &bytes[take..];
            if self.carry_len < 8 {
                return;
            }
            self.media.store_nt(self.off as usize, &self.carry);
            self.off += 8;
            self.carry_len = 0;
        }
        let whole = bytes.len() & !7;
        if whole > 0 {
            self.media.store_nt(self.off as usize, &bytes[..whole]);
            self.off += whole as u64;
        }
        let rest = &bytes[whole..];
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carry_len = rest.len();
    }

    /// Store the partial last word (zero-padded) and zeros to the end of its line: every
    /// stream ends where a line does (payloads are padded to 64 bytes), and a whole line
    /// is a faster write-combining flush than a partial one.
    fn finish(self) {
        let mut off = self.off;
        if self.carry_len > 0 {
            self.media.store_nt(off as usize, &self.carry[..self.carry_len]);
            off += 8;
        }
        let pad = (line_up(off) - off) as usize;
        if pad > 0 {
            self.media.store_nt(off as usize, &[0u8; LINE as usize][..pad]);
        }
    }
}
