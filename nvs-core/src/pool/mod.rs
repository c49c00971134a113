//! [`Pool`]: a pool on some media — format, open (recovery), and the accessors; its puts
//! are in `write.rs`, its lane writers in `lane.rs`, its reads in `read.rs`. The write
//! path itself (the commit protocol) is `crate::log`, retention `crate::retention`.

#[cfg(feature = "alloc")]
mod checkpoint;
mod lane;
mod read;
mod write;

#[cfg(all(feature = "alloc", feature = "internals"))]
#[doc(hidden)]
pub use checkpoint::SUM_SEED as CHECKPOINT_SUM_SEED;
#[cfg(feature = "alloc")]
pub use checkpoint::{checkpoint_memory, CheckpointUse};
pub use lane::LaneWriter;
pub use read::{NameIter, ObjectsAfter, VersionIter};

use crate::delta::DeltaOptions;
use crate::error::{Error, Result};
use crate::format::{
    self, hash::Hasher, Geometry, SegmentHeader, Superblock, BATCH_MAX, FORMAT_VERSION, FORMAT_VERSION_WRITABLE,
    LANES_MAX, NAME_MAX, SUPERBLOCK_MAGIC,
};
use crate::index::{IndexMemory, NONE};
use crate::log::lane::{Lane, LaneCell, LaneCells};
use crate::log::segments;
use crate::log::Committer;
use crate::log::LaneSet;
use crate::media::{ClaimLock, Media};
use crate::mutant::{self, Mutant};
use crate::object::LaneInfo;
use crate::object::PoolStats;
use crate::recover::{catch_up, catch_up_others, recover};
use crate::shared::{Locked, Shared};
use crate::sync::{AtomicU64, RwLock};
use core::mem::size_of;

/// How many times a read-only refresh that found corruption looks again while the
/// segment headers keep changing under it (a writer claiming or releasing segments during
/// every one of them): then it reports what it found.
const REFRESH_LOOKS: u32 = 1000;

/// Recoveries a writer process tries without the claim lock before one under it.
const WRITER_LOOKS: u32 = 3;

/// How to format a pool.
#[derive(Clone, Copy, Debug)]
pub struct FormatOptions {
    /// Identity of this pool (use random bits). Over an earlier pool the id actually used
    /// is derived from this one and the earlier pool's, so it never repeats an id of an
    /// earlier generation whose segments may still be on the media.
    pub pool_id: u64,
    /// Segment size in bytes; `None` picks the default (see [`FormatOptions::new`]).
    pub segment_len: Option<u64>,
    /// Number of writer lanes (1..=256).
    pub lanes_max: u32,
    /// Checksum every payload (verified on every get and by check). On by default.
    pub payload_checksum: bool,
    /// Each lane has names of its own: (lane, name) identifies a name, and its versions
    /// count per lane (writers on several lanes, ranks in several processes, may all put
    /// "temperature"). Reads by name alone answer when one lane holds the name
    /// (`AmbiguousName` when several do); a read of [`Key::on`](crate::Key::on)
    /// names the lane. Off by default.
    pub lane_names: bool,
}

impl FormatOptions {
    /// Defaults with this pool id: segments of the largest power of two not above 1/16
    /// of the media (between 1/32 and 1/16 of it), at least 4 KiB and at most 64 MiB; 64
    /// lanes; payload checksums on (nvs-sum, computed by the put's own copy). An object
    /// (or a batch) larger than a segment takes a span of consecutive segments:
    /// [`Pool::max_object_bytes`] says how large one can be.
    pub fn new(pool_id: u64) -> Self {
        FormatOptions { pool_id, segment_len: None, lanes_max: 64, payload_checksum: true, lane_names: false }
    }
}

impl FormatOptions {
    /// The geometry a format of `media_len` bytes with these options gets (its segment
    /// size and count), or why it cannot hold a pool — checked without touching media.
    ///
    /// # Errors
    /// `BadGeometry` (`what` says why) if a pool of these options does not fit `media_len`
    /// bytes.
    pub fn geometry(&self, media_len: u64) -> Result<Geometry> {
        if self.lanes_max == 0 || self.lanes_max > LANES_MAX {
            return Err(Error::BadGeometry { what: "lanes must be between 1 and 256" });
        }
        format::geometry(media_len, self.segment_len.unwrap_or_else(|| format::default_segment_len(media_len)))
    }
}

/// A pool's layout (see [`Pool::layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The pool's identity (bound into every commit word).
    pub pool_id: u64,
    /// Bytes of media the pool uses.
    pub pool_len: u64,
    /// Bytes per segment.
    pub segment_len: u64,
    /// Segments.
    pub segment_count: u32,
    /// Writer lanes.
    pub lanes_max: u32,
    /// Every payload carries a checksum, verified on every get.
    pub payload_checksum: bool,
    /// Objects may be deltas (a pool made before deltas existed takes full versions only).
    pub deltas: bool,
    /// The on-media format version.
    pub format_version: u32,
    /// Each lane has names of its own ([`FormatOptions::lane_names`]).
    pub lane_names: bool,
}

impl Layout {
    /// Its units are sealed (format 3 with payload checksums): one fence per commit, and
    /// a lane's newest unit counts only once it verifies whole.
    pub fn sealed_units(&self) -> bool {
        self.format_version >= 3 && self.payload_checksum
    }
}

/// A pool on some media, with its index.
///
/// Single-threaded use goes through `&mut self` ([`Pool::put`] and [`Pool::put_batch`]
/// take a lane number). Several threads write at once through [`Pool::lane`]: each
/// takes a [`LaneWriter`] for its own lane and puts with no lock held during the copy
/// and the fences; readers in the same process use the `&self` methods meanwhile.
///
/// ```
/// use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Region};
/// // Any `Media` will do; here, 1 MiB of ordinary memory, 64-byte aligned.
/// #[repr(align(64))]
/// struct Line([u8; 64]);
/// let mut mem: Vec<Line> = (0..(1 << 20) / 64).map(|_| Line([0; 64])).collect();
/// // SAFETY: `mem` is 64-byte aligned, outlives the pool, and nothing else touches it.
/// let region = unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) };
/// let mut pool = Pool::format(region, FormatOptions::new(0x5eed), HeapMemory::new())?;
/// let step = [1.5f64, 2.5, 3.5];
/// let put = pool.put(0, Object::pod("temperature", &step))?;
/// let versions = pool.put_batch(0, &[Object::new("a", b"x"), Object::new("b", b"y")])?;
/// assert_eq!((put.version, versions.as_slice()), (1, &[1, 1][..]));
/// let mut buf = [0u8; 24];
/// assert_eq!(pool.get("temperature", 1, &mut buf)?, 24);
/// assert_eq!(pool.latest("temperature")?, 1);
/// # Ok::<(), nvs_core::Error>(())
/// ```
pub struct Pool<M: Media, X: IndexMemory> {
    pub(crate) media: M,
    pub(crate) sb: Superblock,
    pub(crate) writable: bool,
    /// The lanes this pool writes beside writers in other processes ([`Pool::open_lanes`]);
    /// `None`: the pool's only writer (or a reader).
    pub(crate) owned: Option<LaneSet>,
    pub(crate) lanes: LaneCells,
    pub(crate) shared: RwLock<Shared<X>>,
    /// How puts with a delta request choose between a delta and a full version.
    pub(crate) delta_opts: DeltaOptions,
    /// The last entry a get found (name slot << 32 | entry), for readers walking a
    /// name's versions in order. Relaxed: a hint, checked on every use.
    pub(crate) read_hint: AtomicU64,
    /// A read-only pool's index and lanes are what the last refresh found (it did not
    /// fail): the next refresh may catch up from them.
    pub(crate) caught_up: bool,
    /// Refreshes that caught up instead of recovering.
    pub(crate) catch_ups: u64,
    /// The index build the names' slots are of: a number no other build of any pool
    /// in this process has had ([`new_index_gen`]), taken at every rebuild, so that a
    /// [`NameId`](crate::NameId) or [`IndexMark`](crate::IndexMark) of an earlier
    /// build — or of another pool, or of an earlier open of the same media — names
    /// nothing here.
    pub(crate) index_gen: u64,
}

/// A number for an index build that no build before it in this process had (see
/// `Pool::index_gen`). A plain `core` atomic, under loom too: it only hands out
/// distinct numbers, and orders nothing.
fn new_index_gen() -> u64 {
    static NEXT: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, core::sync::atomic::Ordering::Relaxed)
}

#[cfg(feature = "alloc")]
impl<M: Media> Pool<M, crate::HeapMemory> {
    /// Where the index's arrays are now, as (address, bytes) ([`crate::HeapMemory::spans`]):
    /// for a caller that asks the OS to prepare their pages after [`Pool::reserve`].
    /// They move when the index grows.
    pub fn index_spans(&self) -> [(usize, usize); 4] {
        self.shared.read().index.memory().spans()
    }
}

impl<M: Media, X: IndexMemory> core::fmt::Debug for Pool<M, X> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pool")
            .field("layout", &self.layout())
            .field("writable", &self.writable)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

// SAFETY: the only non-Sync part is each lane's `LaneCell` state, which is touched only
// through `&mut Pool` or by the single `LaneWriter` that won the lane's claim (an
// Acquire swap; released with Release on drop), so no two threads ever access one
// lane's state at once; everything else is behind `RwLock` or atomic.
unsafe impl<M: Media + Sync, X: IndexMemory + Send + Sync> Sync for Pool<M, X> {}

impl<M: Media, X: IndexMemory> Pool<M, X> {
    /// Format `media` as an empty pool and open it for writing. Existing contents are not
    /// erased (nvs never relies on zeroed media): stale bytes can never match this pool.
    ///
    /// # Errors
    /// `BadGeometry` if the media cannot hold a pool of these options (nothing is written);
    /// `IndexFull` if the index memory cannot hold its segments (the pool is formatted
    /// then: open it with more index memory).
    pub fn format(media: M, opts: FormatOptions, mem: X) -> Result<Self> {
        let g = opts.geometry(media.len() as u64)?;
        // Over an earlier pool, the new id is derived from the caller's and the old one,
        // so formatting again with the ids of earlier generations (A, B, A, ...) never
        // brings back an id whose segments may still lie on the media.
        // A superblock left unsealed by a crash inside an earlier format (magic word 0,
        // the rest old or new or both) still names ids whose segments may be here.
        let old: Superblock = format::read_pod(&media, 0);
        let unsealed = old.magic == 0 && (old.pool_id != 0 || old.checksum != 0);
        let mut pool_id = opts.pool_id;
        if unsealed || format::decode_superblock(&media).is_ok() {
            pool_id = format::hash::mix(&[opts.pool_id, old.pool_id, old.checksum]);
            if pool_id == old.pool_id {
                pool_id = pool_id.wrapping_add(0x9E37_79B9_7F4A_7C15);
            }
        }
        let mut sb = Superblock {
            magic: SUPERBLOCK_MAGIC,
            format_version: FORMAT_VERSION,
            flags: format::FLAG_DELTAS
                | if opts.payload_checksum { format::FLAG_PAYLOAD_CHECKSUM } else { 0 }
                | if opts.lane_names { format::FLAG_LANE_NAMES } else { 0 },
            pool_id,
            pool_len: g.pool_len,
            segment_len: g.segment_len,
            segment_count: g.segment_count,
            lanes_max: opts.lanes_max,
            data_off: format::DATA_OFF,
            checksum: 0,
        };
        // A superblock damaged past recognition (or wiped) names no earlier id, yet that
        // pool's segments may still lie here: formatting again with its explicit id would
        // bring its objects back, or (a released segment's units at its data start)
        // make recovery call the new pool's free segments lost. An id that a segment
        // header here carries (its magic word, then the id), or that a committed unit at
        // a segment's data start was committed under, is never taken (a word or two per
        // segment; a few tries at most, bounded).
        let pool_end = sb.data_off + g.segment_count as u64 * g.segment_len;
        for attempt in 0..8u64 {
            let taken = (0..g.segment_count).any(|i| {
                let off = sb.segment_off(i);
                let header = media.load_word(off as usize) == format::SEGMENT_MAGIC
                    && media.load_word(off as usize + 8) == sb.pool_id;
                header || format::decode_unit_anywhere(&media, &sb, off + format::LINE, pool_end, |_, _| true).is_some()
            });
            if !taken {
                break;
            }
            sb.pool_id = format::hash::mix(&[sb.pool_id, attempt, 0x5EED]);
        }
        sb.checksum = sb.compute_checksum();
        if mutant::on(Mutant::FormatInOneStore) {
            media.store_nt(0, bytemuck::bytes_of(&sb));
            media.fence();
            return Self::open_with(media, mem, true, None);
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
        Self::open_with(media, mem, true, None)
    }

    /// Open a pool for writing: recovery runs, nothing is written until a put.
    ///
    /// # Errors
    /// `NotFormatted` (no pool), `UnsupportedVersion`, `Corrupted { offset, kind }` (recovery
    /// found damage; nothing was written), `IndexFull` (the index memory cannot hold the
    /// pool's objects).
    /// `OldFormat` for a format 1 pool, which opens read-only only.
    pub fn open(media: M, mem: X) -> Result<Self> {
        Self::open_with(media, mem, true, None)
    }

    /// Open a pool for reading only: recovery runs; this pool never writes the media.
    ///
    /// # Errors
    /// `NotFormatted` (no pool), `UnsupportedVersion`, `Corrupted { offset, kind }` (recovery
    /// found damage; nothing was written), `IndexFull` (the index memory cannot hold the
    /// pool's objects).
    pub fn open_read_only(media: M, mem: X) -> Result<Self> {
        Self::open_with(media, mem, false, None)
    }

    /// Open a pool to write `lanes` only, beside writers of its other lanes in other
    /// processes (each its own pool over the same media; who owns which lane is the
    /// caller's to settle — nvs-std takes a kernel lock per lane). The pool must have
    /// lane names (`NeedsLaneNames`): each process's names are its lanes' own, so no two
    /// processes take the same version. Writes to other lanes are refused
    /// (`LaneNotOwned`). Segment claims and releases, recovery here, and every
    /// [`Pool::refresh`] (which is how this pool learns what the other writers
    /// committed: it reads only their units committed since the last one) run under the
    /// media's claim lock ([`Media::lock_claims`]), and a claim reads the segment headers
    /// first: the other processes' claims and releases are in no index of this one.
    ///
    /// # Errors
    /// `NotFormatted` (no pool), `UnsupportedVersion`, `Corrupted { offset, kind }` (recovery
    /// found damage; nothing was written), `IndexFull` (the index memory cannot hold the
    /// pool's objects).
    /// `NeedsLaneNames` for a pool without lane names; `NoSuchLane`; `ClaimLockTimeout`.
    pub fn open_lanes(media: M, mem: X, lanes: &[u32]) -> Result<Self> {
        // A lane no pool can have is not in any set of lanes: refused, after what is
        // wrong with the media, if anything (a lane the pool lacks: in `open_with`).
        let mut owned = LaneSet::default();
        if let Some(&lane) = lanes.iter().find(|&&lane| !owned.insert(lane)) {
            let sb = format::decode_superblock(&media)?;
            return Err(Error::NoSuchLane { lane, lanes_max: sb.lanes_max });
        }
        Self::open_with(media, mem, true, Some(owned))
    }

    fn open_with(media: M, mem: X, writable: bool, owned: Option<LaneSet>) -> Result<Self> {
        let mut pool = Self::unrecovered(media, mem, writable, owned)?;
        pool.refresh()?;
        if writable {
            // The writer's open-time repair (a crash between a truncate unit and the
            // invalidation of its segments). Newest first only as a seeded bug.
            pool.invalidate_released(mutant::on(Mutant::RepairNewestFirst))?;
            pool.reserve_lane_segments()?;
            pool.clear_torn_tails();
        }
        Ok(pool)
    }

    /// The pool over `media` with nothing recovered yet (an empty index, no lanes):
    /// what an open refreshes, or a checkpoint fills in.
    fn unrecovered(media: M, mem: X, writable: bool, owned: Option<LaneSet>) -> Result<Self> {
        let sb = format::decode_superblock(&media)?;
        // A format 1 pool is read, never written: this build writes what format 1 does
        // not have (spans), and a format 1 reader must never meet them. A format 2 pool
        // is written as format 2 (two fences per unit).
        if writable && sb.format_version < FORMAT_VERSION_WRITABLE {
            return Err(Error::OldFormat { found: sb.format_version });
        }
        if owned.is_some() && !sb.lane_names() {
            return Err(Error::NeedsLaneNames);
        }
        let pool = Pool {
            media,
            sb,
            writable,
            owned,
            lanes: LaneCell::table(sb.lanes_max),
            shared: RwLock::new(Shared::new(mem, sb.lanes_max)),
            delta_opts: DeltaOptions::default(),
            read_hint: AtomicU64::new(u64::MAX),
            caught_up: false,
            catch_ups: 0,
            index_gen: 0,
        };
        if let Some(o) = owned {
            for lane in (0..LANES_MAX).filter(|&l| o.has(l)) {
                pool.writer().check_writable_lane(lane)?;
            }
        }
        Ok(pool)
    }

    /// Bring the index and the lanes up to date with the media (a reader catching up
    /// with a writer, or a test): the state a recovery of the media would give.
    ///
    /// A read-only pool whose last refresh (or open) succeeded catches up: it reads the
    /// segment headers and only the units committed since, each lane on from its tail
    /// and into the segments its writer chained since — a cost that does not grow with
    /// the objects already indexed. Whenever it cannot be sure to give what recovery
    /// would (a known segment header changed or went: retention released or reused it;
    /// a truncate unit; a new segment that does not continue its lane's chain; a name
    /// that recovery would order differently; any corruption; the index out of room;
    /// a walked header that changed meanwhile), it runs recovery instead, as below.
    ///
    /// A pool writing some lanes beside writers in other processes ([`Pool::open_lanes`])
    /// catches up with the others' lanes the same way, under the claim lock (its own
    /// lanes its own puts keep up to date), and recovers when it cannot be sure — without
    /// the claim lock, like the read-only pool below, but always reading the headers
    /// around it (and, after three changes, under the lock), so the other processes'
    /// claims never wait for a whole recovery. The one writer of a whole pool (whose own
    /// puts keep it up to date) always recovers.
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
    ///
    /// # Errors
    /// `NotFormatted` (no pool), `UnsupportedVersion`, `Corrupted { offset, kind }` (recovery
    /// found damage; nothing was written), `IndexFull` (the index memory cannot hold the
    /// pool's objects).
    pub fn refresh(&mut self) -> Result<()> {
        if let Some(owned) = self.owned {
            // Beside other writer processes (a catch-up under the claim lock: short).
            if self.caught_up && self.catch_up_once(Some(&owned))? {
                self.catch_ups += 1;
                return Ok(());
            }
            self.index_gen = new_index_gen();
            let mut all = [Lane::default(); LANES_MAX as usize];
            let lanes = &mut all[..self.sb.lanes_max as usize];
            // A whole recovery reads every object: not under the claim lock, which would
            // stall the other processes' claims for as long (a reclaim runs two). Like
            // a read-only refresh, a seqlock reader: the segment headers read before and
            // after; equal, the recovery saw a state that held (its own lanes only this
            // process writes). A few tries, then under the lock, where they hold still.
            let mut held = false;
            for _ in 0..WRITER_LOOKS {
                let before = self.header_digest();
                let shared = self.shared.get_mut();
                let r = recover(&self.media, &self.sb, &mut shared.index, lanes).map(|stats| shared.stats = stats);
                crate::sync::fence_acquire();
                held = r.is_ok() && self.header_digest() == before;
                if held {
                    break;
                }
            }
            // An error is judged under the lock too: what a state that held gives.
            let r = match held {
                true => Ok(()),
                false => {
                    let _lock = ClaimLock::take(&self.media)?;
                    let shared = self.shared.get_mut();
                    recover(&self.media, &self.sb, &mut shared.index, lanes).map(|stats| shared.stats = stats)
                }
            };
            self.caught_up = r.is_ok();
            r?;
            self.install_lanes(lanes);
            return Ok(());
        }
        if !self.writable && self.caught_up && self.catch_up_once(None)? {
            self.catch_ups += 1;
            return Ok(());
        }
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
        self.caught_up = r.is_ok();
        r
    }

    /// A read-only pool over `media` that starts from this pool's index and lanes as
    /// if it had recovered them there: its [`Pool::refresh`] catches up from them (or
    /// recovers, where it cannot be sure to give what a recovery would). For nvs's crash
    /// checker, whose crash images at successive points share all that was committed
    /// before them: each image costs what is new in it, not the whole pool.
    #[cfg(feature = "internals")]
    pub fn fork_read_only<N: Media>(&mut self, media: N) -> Pool<N, X>
    where
        X: Clone,
    {
        let mut lanes = LaneCell::table(self.sb.lanes_max);
        for (to, from) in lanes.iter_mut().zip(self.lanes.iter_mut()) {
            *to.get_mut() = *from.get_mut();
        }
        Pool {
            media,
            sb: self.sb,
            writable: false,
            owned: None,
            lanes,
            shared: RwLock::new(self.shared.get_mut().clone()),
            delta_opts: self.delta_opts,
            read_hint: AtomicU64::new(u64::MAX),
            caught_up: self.caught_up,
            catch_ups: self.catch_ups,
            // The same index (a clone): its names' ids hold in both until either rebuilds.
            index_gen: self.index_gen,
        }
    }

    /// A refresh that recovers from scratch, never catching up (for nvs's own checks and
    /// measurements: what [`Pool::refresh`] must equal).
    #[cfg(feature = "internals")]
    pub fn refresh_by_recovery(&mut self) -> Result<()> {
        self.caught_up = false;
        self.refresh()
    }

    /// How many refreshes of this pool caught up instead of recovering (for nvs's own
    /// checks that a catch-up was tested at all).
    #[cfg(feature = "internals")]
    pub fn catch_ups(&self) -> u64 {
        self.catch_ups
    }

    /// A catch-up ([`Pool::refresh`]): of every lane for a reader, of the other
    /// processes' lanes for a writer of `owned` lanes (under the claim lock); false if it
    /// gave up (the state is then to be recovered); an error if the claim lock was not had.
    fn catch_up_once(&mut self, owned: Option<&LaneSet>) -> Result<bool> {
        let mut all = [Lane::default(); LANES_MAX as usize];
        let lanes = &mut all[..self.sb.lanes_max as usize];
        for (l, cell) in lanes.iter_mut().zip(self.lanes.iter_mut()) {
            *l = *cell.get_mut();
        }
        let shared = self.shared.get_mut();
        let (media, sb, index, stats) = (&self.media, &self.sb, &mut shared.index, shared.stats);
        let r = match owned {
            None => catch_up(media, sb, index, lanes, stats),
            Some(owned) => {
                // A claim lock not had in time is the caller's error, not a reason to
                // recover (which would wait for it again).
                let _lock = ClaimLock::take(media)?;
                catch_up_others(media, sb, index, lanes, stats, owned)
            }
        };
        match r {
            Ok(stats) => {
                shared.stats = stats;
                self.install_lanes(lanes);
                Ok(true)
            }
            Err(_) => Ok(false),
        }
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
        self.index_gen = new_index_gen();
        let mut all = [Lane::default(); LANES_MAX as usize];
        let lanes = &mut all[..self.sb.lanes_max as usize];
        let shared = self.shared.get_mut();
        shared.stats = recover(&self.media, &self.sb, &mut shared.index, lanes)?;
        self.install_lanes(lanes);
        Ok(())
    }

    /// The lanes a recovery or a catch-up found, for writers and readers.
    fn install_lanes(&mut self, lanes: &[Lane]) {
        let shared = self.shared.get_mut();
        shared.name_hints = [NONE; BATCH_MAX];
        for (i, (cell, l)) in self.lanes.iter_mut().zip(lanes).enumerate() {
            *cell.get_mut() = *l;
            shared.lane_infos[i] =
                l.active.then_some(LaneInfo { units: l.next_seq, closed: l.closed, detached: l.detached });
        }
    }

    /// Close the pool, giving back the media and the index memory.
    pub fn close(self) -> (M, X) {
        (self.media, self.shared.into_inner().index.into_memory())
    }

    /// Take lane `lane` for writing from this thread (one writer per lane at a time):
    /// several threads each with their own lane put concurrently.
    ///
    /// Taking a lane joins it to the stream, durably: a lane that holds no segment yet
    /// claims one now (a fenced segment header, no unit), so a follower counts it from
    /// here on and reports the end of the stream only once it is closed too — take every
    /// writer's lane before any of them closes. (A put on a lane joins it as well.)
    ///
    /// # Errors
    /// `NoSuchLane`, `ReadOnly`, `LaneBusy` (another thread has it), `LaneNotOwned`,
    /// `Full` or `ClaimLockTimeout` (joining the lane claims a segment for it).
    pub fn lane(&self, lane: u32) -> Result<LaneWriter<'_, M, X>> {
        let w = self.writer();
        w.check_writable_lane(lane)?;
        let cell = &self.lanes[lane as usize];
        if !cell.claim() {
            return Err(Error::LaneBusy { lane });
        }
        // From here the writer's drop gives the lane back, also if the join fails.
        let writer = LaneWriter { pool: self, lane };
        // SAFETY: this thread just won the lane's claim; nothing else touches its state.
        unsafe { cell.with_claimed(|l| w.join(&mut Locked(&self.shared), l, lane)) }?;
        Ok(writer)
    }

    /// The media this pool is on.
    pub fn media(&self) -> &M {
        &self.media
    }

    /// The pool's layout, as formatted.
    pub fn layout(&self) -> Layout {
        layout_of(&self.sb)
    }

    /// The superblock as decoded (for nvs's own tools and checks).
    #[cfg(feature = "internals")]
    pub fn superblock(&self) -> &Superblock {
        &self.sb
    }

    /// Opened for writing ([`Pool::open`], [`Pool::format`]).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// What the pool holds: what the last recovery found, updated by every put and
    /// every refresh since.
    pub fn stats(&self) -> PoolStats {
        self.shared.read().stats
    }

    /// Bytes of index memory this pool holds (entries, names, hash table, segments).
    pub fn index_bytes(&self) -> usize {
        self.shared.read().index.memory().bytes()
    }

    /// Make room in the index for `objects` more objects (versions) and `names` more
    /// names than it holds now, so that the puts, refreshes and recoveries that add them
    /// do not grow it: the growth (new memory, and a rebuild of the hash table each time
    /// it doubles) happens here instead of inside one of them. Index memory never
    /// shrinks, so a reservation holds for the pool's life; an index that would hold more
    /// still grows. Either count past what the pool can hold at once (an object takes a
    /// 64-byte line of it at least) is cut to that.
    ///
    /// # Errors
    /// `IndexFull` if the memory cannot grow that far (a [`FixedMemory`](crate::FixedMemory)
    /// too small, a refused allocation); nothing changes then.
    pub fn reserve(&mut self, objects: usize, names: usize) -> Result<()> {
        let most = usize::try_from(u64::from(self.sb.segment_count) * self.sb.segment_len / format::LINE);
        let most = most.unwrap_or(usize::MAX);
        let index = &mut self.shared.get_mut().index;
        index.reserve(objects.min(most), names.min(most)).map_err(|f| index.full(f))
    }

    /// Free segments.
    pub fn free_segments(&self) -> u32 {
        self.sb.segment_count - self.stats().segments_used
    }

    /// Largest payload one object with a `name_len`-byte name can have (0 for a name
    /// longer than [`NAME_MAX`](crate::NAME_MAX): no object has one).
    pub fn max_object_bytes(&self, name_len: usize) -> u64 {
        match name_len <= NAME_MAX {
            true => self.sb.max_object_bytes(name_len),
            false => 0,
        }
    }

    /// How puts with a delta request choose (chunk size, chain length, size limit).
    ///
    /// # Errors
    /// `DeltaOptions` (`what` says which option) for a `chunk_bytes` that is not a power
    /// of two of at least 64, a `full_every` outside 1..=255 or a `max_percent` outside
    /// 1..=100.
    pub fn set_delta_options(&mut self, opts: DeltaOptions) -> Result<()> {
        opts.check()?;
        self.delta_opts = opts;
        Ok(())
    }

    /// The delta options in force.
    pub fn delta_options(&self) -> DeltaOptions {
        self.delta_opts
    }

    /// The write path's view of this pool.
    pub(crate) fn writer(&self) -> Committer<'_, M> {
        Committer {
            media: &self.media,
            sb: &self.sb,
            writable: self.writable,
            delta: self.delta_opts,
            owned: self.owned,
        }
    }

    /// The write path's view, the lanes and the shared state, apart (for `&mut self`
    /// writes, which need all three at once).
    pub(crate) fn split_mut(&mut self) -> (Committer<'_, M>, &mut [LaneCell], &mut Shared<X>) {
        let Pool { media, sb, writable, lanes, shared, delta_opts, owned, .. } = self;
        let lanes = &mut lanes[..sb.lanes_max as usize];
        (Committer { media, sb, writable: *writable, delta: *delta_opts, owned: *owned }, lanes, shared.get_mut())
    }

    /// Invalidate the segments retention released (`log::segments`): of this pool's own
    /// lanes, under the claim lock, when it shares the pool with other processes (and
    /// only if it has any: an open's repair usually has none, and takes no lock).
    /// [`Media::reserve`] the segment each lane this pool writes goes on storing into:
    /// claims reserve the rest, so a media that gets its room as it fills (a sparse pool
    /// file, or a sparse copy of one) has it wherever this writer stores.
    fn reserve_lane_segments(&mut self) -> Result<()> {
        let owned = self.owned;
        for (lane, cell) in self.lanes.iter_mut().enumerate() {
            let l = *cell.get_mut();
            if l.active && owned.is_none_or(|o| o.has(lane as u32)) {
                self.media.reserve(l.seg_start as usize, (l.seg_end - l.seg_start) as usize)?;
            }
        }
        Ok(())
    }

    /// A sealed pool's writer open ([`Superblock::one_fence`]): where a lane's newest
    /// unit did not verify (a crash tore it after its commit word persisted), its header
    /// line, now past the lane's end, is zeroed and fenced before the lane writes there
    /// again. Left in place, a later crash that leaves out the new unit's stores could
    /// let that header, over old words the new unit happens to repeat, verify: a unit
    /// recovery once dropped would come back. Two words read per lane; a store only
    /// after such a crash.
    fn clear_torn_tails(&mut self) {
        if !self.sb.one_fence() || mutant::on(Mutant::SealedTailKept) {
            return;
        }
        let owned = self.owned;
        let mut stored = false;
        for (lane, cell) in self.lanes.iter_mut().enumerate() {
            let l = *cell.get_mut();
            let ours = owned.is_none_or(|o| o.has(lane as u32));
            // The one case that matters: a commit word there that matches (the rest of
            // the unit did not verify, or recovery would have counted it).
            let torn = |l: &Lane| {
                let checksum = self.media.load_word(l.tail as usize + 56);
                self.media.load_word(l.tail as usize)
                    == self.sb.commit_word_at(lane as u32, l.next_seq, checksum, l.tail)
            };
            if ours && l.active && l.tail + format::LINE <= l.seg_end && torn(&l) {
                self.media.store_line_nt(l.tail as usize, [0; 8]);
                stored = true;
            }
        }
        if stored {
            self.media.fence();
        }
    }

    pub(crate) fn invalidate_released(&mut self, newest_first: bool) -> Result<()> {
        let segs = self.shared.get_mut().index.segments(self.sb.segment_count as usize)?;
        let owned = self.owned;
        let ours = |lane: u32| owned.is_none_or(|o| o.has(lane));
        if !segs.iter().any(|g| g.lane != segments::FREE && g.first_seq == segments::RELEASED && ours(g.lane)) {
            return Ok(());
        }
        let _lock = owned.map(|_| ClaimLock::take(&self.media)).transpose()?;
        segments::invalidate_released(&self.media, &self.sb, segs, newest_first, ours);
        Ok(())
    }
}

/// The layout the superblock of `media` describes, after the superblock's own checks
/// (magic, checksum, version, geometry against the media's length): what an open would
/// refuse first, with no recovery and nothing written.
///
/// # Errors
/// `NotFormatted`, `UnsupportedVersion`, or `Corrupted` (the superblock fails its checks).
pub fn read_layout<M: Media + ?Sized>(media: &M) -> Result<Layout> {
    format::decode_superblock(media).map(|sb| layout_of(&sb))
}

/// The layout a superblock describes.
pub(crate) fn layout_of(sb: &Superblock) -> Layout {
    Layout {
        pool_id: sb.pool_id,
        pool_len: sb.pool_len,
        segment_len: sb.segment_len,
        segment_count: sb.segment_count,
        lanes_max: sb.lanes_max,
        payload_checksum: sb.has_payload_checksum(),
        deltas: sb.has_deltas(),
        format_version: sb.format_version,
        lane_names: sb.lane_names(),
    }
}
