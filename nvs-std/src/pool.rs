//! [`FilePool`]: a pool in a file (or a device-DAX device), opened for writing or reading.
//!
//! Locking: a writer holds an open-file-description write lock on byte 0 of the pool file
//! for as long as it is open (it needs the file opened for writing), so a second writer,
//! in this process or another, is refused with [`Error::Locked`]. Readers take no lock at
//! all: they only read (a `PROT_READ` mapping,
//! nvs-core never stores through a read-only pool), and they must be able to
//! open and follow a live writer, which a shared lock would forbid.
//!
//! Writes: every write goes through nvs-core's [`Pool`]; afterwards the media's msync
//! latch is checked, and after a failed msync every later write is refused too (pages
//! may have been dropped, so a later acknowledged put could sit behind a lost one).
//! Lanes taken from a [`FilePool`] ([`FileLane`]) pass the same check. Reads are
//! [`FilePool`]'s own methods too, so every call returns this crate's [`Error`].

mod checkpoint;

use crate::dirty::TrackedBuf;
use crate::durability::{Backing, Durability};
use crate::error::{Error, Held, Result};
use crate::fork::Born;
use crate::locks;
use crate::media::{allocate_range, Access, MappedMedia};
pub use checkpoint::{checkpoint_path, CHECKPOINT_MIN_OBJECTS};
use nvs_core::{
    CheckpointUse, FormatOptions, HeapMemory, Key, LaneInfo, LaneWriter, Layout, NameId, NameIter, Object, ObjectInfo,
    PlanSlot, Pool, PoolStats, Put, VersionIter, DATA_OFF,
};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How [`FilePool::create`] formats a pool.
#[derive(Clone, Copy, Debug)]
pub struct CreateOptions {
    /// Segment size in bytes; `None`: nvs-core's default (see
    /// [`nvs_core::FormatOptions::new`]: the largest power of two not above 1/16 of the
    /// pool, 4 KiB to 64 MiB). An object larger than a segment takes several side by side.
    pub segment_len: Option<u64>,
    /// Writer lanes, 1..=256.
    pub lanes_max: u32,
    /// Checksum every payload (verified on every get and by `check`). On by default.
    pub payload_checksum: bool,
    /// `None`: the default for what the file is (see [`Durability::default_for`]).
    pub durability: Option<Durability>,
    /// Pre-fault the whole mapping at create (`MAP_POPULATE`), so the first puts into
    /// each page do not pay a page fault (benchmarks; costs time at create).
    pub populate: bool,
    /// Every lane has names of its own (see [`nvs_core::FormatOptions::lane_names`]):
    /// ranks writing one name each get their own versions. Off by default.
    pub lane_names: bool,
    /// Format a `/dev/dax` device that holds a pool already (its objects are lost).
    /// Off by default: `create` refuses such a device, as it refuses an existing file.
    pub replace_device_pool: bool,
    /// A sparse pool: the file gets its blocks segment by segment as writers claim them,
    /// not all at create. A pool holding little takes little (memory on tmpfs, disk
    /// elsewhere) and creates in no time; a file system that fills refuses the put that
    /// needs a new segment ([`nvs_core::Error::NoSpace`], nothing written), never a
    /// signal. Off by default: every block at create, so a full file system is refused
    /// there. No effect on fsdax (every block is written at create) or device-DAX.
    pub sparse: bool,
}

impl Default for CreateOptions {
    fn default() -> Self {
        CreateOptions::new()
    }
}

impl CreateOptions {
    /// The defaults: nvs-core's segment size (the largest power of two not above 1/16
    /// of the pool, 4 KiB to 64 MiB), 64 lanes, payload checksums on, the durability the
    /// file calls for ([`Durability::default_for`]),
    /// no pre-faulting.
    pub const fn new() -> Self {
        CreateOptions {
            segment_len: None,
            lanes_max: 64,
            payload_checksum: true,
            durability: None,
            populate: false,
            lane_names: false,
            replace_device_pool: false,
            sparse: false,
        }
    }

    /// Segments of `bytes` (a multiple of 64, 4 KiB to 1 TiB): the unit of allocation
    /// and of retention; an object larger than one takes a span of consecutive ones.
    pub const fn segment_len(mut self, bytes: u64) -> Self {
        self.segment_len = Some(bytes);
        self
    }

    /// `lanes` writer lanes (1 to 256).
    pub const fn lanes_max(mut self, lanes: u32) -> Self {
        self.lanes_max = lanes;
        self
    }

    /// Checksum every payload (verified on every get and by `check`): on by default;
    /// `false` turns it off.
    pub const fn payload_checksum(mut self, on: bool) -> Self {
        self.payload_checksum = on;
        self
    }

    /// Make puts durable this way rather than the file's default.
    pub const fn durability(mut self, d: Durability) -> Self {
        self.durability = Some(d);
        self
    }

    /// Pre-fault the mapping at create (benchmarks).
    pub const fn populate(mut self, on: bool) -> Self {
        self.populate = on;
        self
    }

    /// Give every lane names of its own ([`CreateOptions::lane_names`]).
    pub const fn lane_names(mut self, on: bool) -> Self {
        self.lane_names = on;
        self
    }

    /// A sparse pool ([`CreateOptions::sparse`]): blocks as segments are claimed.
    pub const fn sparse(mut self, on: bool) -> Self {
        self.sparse = on;
        self
    }

    /// Format a `/dev/dax` device even if it holds a pool (see
    /// [`CreateOptions::replace_device_pool`]).
    pub const fn replace_device_pool(mut self, on: bool) -> Self {
        self.replace_device_pool = on;
        self
    }
}

/// The delta check's default: on in debug builds ([`FilePool::set_delta_check`]).
const DELTA_CHECK: bool = cfg!(debug_assertions);

/// The ranges of `buf` not yet in a committed put: those of a refused put, and the pages
/// written since the last take, merged.
fn take_pending(buf: &mut TrackedBuf) -> Vec<(u64, u64)> {
    let mut fresh = Vec::new();
    buf.take_dirty(&mut fresh);
    let mut all = std::mem::take(&mut buf.pending);
    all.extend(fresh);
    all.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(all.len());
    for (off, len) in all {
        match merged.last_mut() {
            Some(last) if off <= last.0 + last.1 => last.1 = last.1.max(off + len - last.0),
            _ => merged.push((off, len)),
        }
    }
    buf.pending = merged.clone();
    merged
}

/// The object a tracked put stores: a delta against the buffer's last committed version,
/// or (the first time) a full version.
fn tracked_object<'a>(name: &'a [u8], buf: &'a TrackedBuf, changes: &'a Vec<(u64, u64)>) -> Object<'a> {
    let object = Object::new(name, buf);
    match buf.committed {
        Some(parent) => object.delta(parent, changes),
        None => object,
    }
}

/// A tracked put committed as `version`: its ranges are stored, it is the next parent.
fn commit_pending(buf: &mut TrackedBuf, version: u64) {
    buf.pending.clear();
    buf.committed = Some(version);
}

/// Smallest pool whose open gets a page-table helper thread (below it, starting a thread
/// costs more than the faults it saves).
const PREFAULT_MIN: usize = 64 << 20;

/// The nvs-core pool type behind a [`FilePool`].
pub type CorePool = Pool<MappedMedia, HeapMemory>;

/// A pool in a file: nvs-core's [`Pool`] over a [`MappedMedia`], with the writer's lock
/// and the durability check.
///
/// ```
/// use nvs_core::Object;
/// use nvs_std::{CreateOptions, FilePool, Followed, Follower};
/// use std::time::Duration;
/// let dir = std::env::temp_dir().join(format!("nvs-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("sim.pool");
/// let mut pool = FilePool::create(&path, 16 << 20, &CreateOptions::default())?;
/// // A simulation step on lane 0: two arrays, one commit.
/// let (t, p) = ([20.5f64, 21.0], [1.0f64, 0.9]);
/// pool.put_batch(0, &[Object::pod("temperature", &t), Object::pod("pressure", &p)])?;
/// // Another thread would own lane 1; its puts pass the same durability check.
/// let mut lane = pool.lane(1)?;
/// lane.put(Object::new("log", b"step 1 done"))?;
/// lane.close()?; // end of lane 1's stream
/// drop(lane);
/// // A delta: only the changed bytes are stored; a get returns the whole object.
/// let mut grid = vec![0u8; 64 << 10];
/// let v = pool.put(0, Object::new("grid", &grid))?.version;
/// grid[100] = 7;
/// assert!(pool.put(0, Object::new("grid", &grid).delta(v, &[(100, 1)]))?.delta);
/// // Retention: keep the last version of every name, release older segments.
/// pool.reclaim(1)?;
/// pool.close()?; // ends every lane's stream (lane 0 here)
/// // An analytics process follows the pool (here the same one).
/// let mut f = Follower::open(&path, None)?;
/// let wait = Some(Duration::from_secs(5));
/// let Followed::Objects(objects) = f.wait(wait, Duration::from_millis(1))? else { panic!() };
/// assert!(objects.iter().any(|o| o.name == b"grid" && o.version == 2));
/// assert_eq!(f.wait(wait, Duration::from_millis(1))?, Followed::EndOfStream);
/// assert_eq!(f.pool().get_vec("log", 1)?, b"step 1 done");
/// assert_eq!(f.pool().get_vec("grid", 2)?[100], 7);
/// std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FilePool {
    pool: CorePool,
    path: PathBuf,
    // Keeps the writer's lock; the mapping (in `pool`) also keeps the open file alive.
    file: File,
    open_time: Duration,
    /// Check every delta put against its parent before writing (`set_delta_check`).
    delta_check: bool,
    /// The lanes this pool writes beside writers in other processes
    /// ([`FilePool::open_lanes`]); `None`: the pool's one writer, or a reader.
    owned: Option<Vec<u32>>,
    /// The process that opened it: only it writes (a `fork` child is refused).
    pid: u32,
    /// When it was opened: a `fork` child of that process writes nothing.
    born: Born,
    /// How a read-only open used the index checkpoint beside the pool (`None`: there
    /// was none it could trust, or the pool was opened to write).
    checkpoint: Option<CheckpointUse>,
    /// What the pool held when it was opened: a writer that changed nothing leaves the
    /// index checkpoint as it was.
    opened_with: PoolStats,
}

impl FilePool {
    /// A pool just made or opened (`start`: when that began).
    fn new(pool: CorePool, path: &Path, file: File, start: Instant, owned: Option<Vec<u32>>) -> FilePool {
        let open_time = start.elapsed();
        let (pid, born) = (std::process::id(), Born::now());
        let opened_with = pool.stats();
        FilePool {
            pool,
            path: path.to_path_buf(),
            file,
            open_time,
            delta_check: DELTA_CHECK,
            owned,
            pid,
            born,
            checkpoint: None,
            opened_with,
        }
    }

    /// How this read-only open used the index checkpoint beside the pool file
    /// (`POOL.nvs-index`): `None` when there was none it could trust (or the pool was
    /// opened to write).
    pub fn checkpoint_use(&self) -> Option<CheckpointUse> {
        self.checkpoint
    }

    /// Create `path` (refused if it exists), `size_bytes` long, format it with a random
    /// pool id, and return it open for writing. On failure nothing is left behind.
    ///
    /// An existing device-DAX character device is the one exception to "refused if it
    /// exists": it is formatted in place, and the pool spans the whole device (which must
    /// hold at least `size_bytes`). A device that holds a pool already is refused
    /// ([`Error::Unsupported`], naming the pool) unless [`CreateOptions::replace_device_pool`]; one a live
    /// writer holds is refused always ([`Error::Locked`]).
    pub fn create(path: impl AsRef<Path>, size_bytes: u64, opts: &CreateOptions) -> Result<FilePool> {
        let path = path.as_ref();
        let start = Instant::now();
        let io = |op, source| Error::Io { op, path: path.to_path_buf(), source };
        // A size that cannot hold a pool is refused before anything is created (a size
        // of 0 used to make an empty file and report it "not an nvs pool").
        let mut fo = FormatOptions::new(random_pool_id());
        fo.segment_len = opts.segment_len;
        fo.lanes_max = opts.lanes_max;
        fo.payload_checksum = opts.payload_checksum;
        fo.lane_names = opts.lane_names;
        let geometry = fo.geometry(size_bytes).map_err(|source| Error::Core { path: path.to_path_buf(), source })?;
        // File offsets are signed: a larger size would fail as an unclear conversion error.
        if i64::try_from(size_bytes).is_err() {
            let what = format!("a file cannot be {size_bytes} bytes long (at most {})", i64::MAX);
            return Err(Error::Unsupported { path: path.to_path_buf(), what });
        }
        // A new file is made unnamed (O_TMPFILE) and gets its name only once formatted: a
        // process killed while creating (allocating a large pool takes seconds) leaves
        // nothing behind, where a named file it left was "not an nvs pool" to every later
        // open (an MPI rank killed at start could never restart).
        let unnamed = unnamed_file(path);
        let fresh = unnamed.is_some();
        let (file, mut cleanup) = match unnamed {
            Some(f) => (f, RemoveOnDrop(None)),
            None => match OpenOptions::new().read(true).write(true).create_new(true).open(path) {
                Ok(f) => (f, RemoveOnDrop(Some(path.to_path_buf()))),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let f = open_dax_device(path).ok_or_else(|| Error::Exists { path: path.to_path_buf() })?;
                    (f, RemoveOnDrop(None))
                }
                Err(e) => return Err(io("create", e)),
            },
        };
        lock(&file, path)?;
        // A file made here; anything else is a device-DAX device formatted in place.
        let new_file = fresh || cleanup.0.is_some();
        if new_file {
            // Past the process's file size limit the kernel ends the process (SIGXFSZ)
            // instead of failing the call: refused first.
            if let Some(limit) = file_size_limit().filter(|&l| size_bytes > l) {
                let what = format!(
                    "a pool of {size_bytes} bytes is over this process's file size limit of {limit} bytes \
                     (ulimit -f): raise the limit or make the pool smaller"
                );
                return Err(Error::Unsupported { path: path.to_path_buf(), what });
            }
            file.set_len(size_bytes).map_err(|e| io("size", e))?;
        }
        let mut media = MappedMedia::map(&file, path, Access::ReadWrite, opts.durability, opts.populate)?;
        if new_file {
            // Segments smaller than 16 pages are not worth the holes.
            let sparse = opts.sparse && media.backing() != Backing::FsDax && geometry.segment_len >= SPARSE_SEGMENT_MIN;
            if sparse {
                allocate_sparse(&file, &geometry).map_err(|e| io("allocate space for", e))?;
                media.allocate_as_claimed(file.try_clone().map_err(|e| io("duplicate the descriptor of", e))?);
            } else {
                allocate_range(&file, 0, size_bytes).map_err(|e| io("allocate space for", e))?;
            }
        }
        if new_file && media.backing() == Backing::FsDax {
            write_every_block(&file, size_bytes).map_err(|e| io("write the blocks of", e))?;
        }
        if !new_file && !opts.replace_device_pool {
            if let Ok(old) = nvs_core::read_layout(&media) {
                let what = format!(
                    "the device holds an nvs pool already (pool id {:#018x}, {} segments): create does not \
                     format over it (nvs create --replace does, losing its objects)",
                    old.pool_id, old.segment_count
                );
                return Err(Error::Unsupported { path: path.to_path_buf(), what });
            }
        }
        let media_len = nvs_core::Media::len(&media) as u64;
        if media_len < size_bytes {
            return Err(Error::Unsupported {
                path: path.to_path_buf(),
                what: format!("device holds {media_len} bytes, fewer than the {size_bytes} asked"),
            });
        }
        let pool = Pool::format(media, fo, HeapMemory::new())
            .map_err(|source| Error::Core { path: path.to_path_buf(), source })?;
        if fresh {
            name_file(&file, path).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => Error::Exists { path: path.to_path_buf() },
                _ => io("name the new pool file", e),
            })?;
        }
        if new_file {
            // The new name durable too (a file system on a disk could lose it in a power
            // cut with every put that came after).
            sync_dir(path).map_err(|e| io("sync the directory of", e))?;
        }
        cleanup.0 = None;
        Ok(FilePool::new(pool, path, file, start, None))
    }

    /// Open an existing pool with the default durability for what it is; recovery runs.
    pub fn open(path: impl AsRef<Path>, access: Access) -> Result<FilePool> {
        Self::open_with(path, access, None)
    }

    /// Open an existing pool; `durability: None` picks the default. Recovery runs — or,
    /// read-only, beside an index checkpoint its writer left at its last clean close
    /// (`POOL.nvs-index`), a restore from it and a catch-up ([`FilePool::checkpoint_use`]
    /// says which).
    pub fn open_with(path: impl AsRef<Path>, access: Access, durability: Option<Durability>) -> Result<FilePool> {
        Self::open_impl(path.as_ref(), access, durability, true)
    }

    /// Open an existing pool read-only by a recovery, whatever index checkpoint lies
    /// beside it: every unit's headers read (what `nvs check` and `nvs salvage` need).
    pub fn open_recovering(path: impl AsRef<Path>, durability: Option<Durability>) -> Result<FilePool> {
        Self::open_impl(path.as_ref(), Access::ReadOnly, durability, false)
    }

    fn open_impl(path: &Path, access: Access, durability: Option<Durability>, checkpoint: bool) -> Result<FilePool> {
        let start = Instant::now();
        // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
        // forever (Backing::probe refuses it right after); O_NOCTTY: a terminal never
        // becomes our controlling one. Neither changes anything for a file or device.
        let file = OpenOptions::new()
            .read(true)
            .write(access == Access::ReadWrite)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|source| Error::Io { op: "open", path: path.to_path_buf(), source })?;
        if access == Access::ReadWrite {
            lock(&file, path)?;
        }
        let mut media = MappedMedia::map(&file, path, access, durability, false)?;
        if access == Access::ReadWrite {
            is_a_pool(&media, path)?;
            back_a_writer(&file, &mut media, path)?;
        }
        // A reader of a pool with an index checkpoint beside it reads that instead of
        // every unit header (module `checkpoint`).
        let ckpt = match access {
            Access::ReadOnly if checkpoint => checkpoint::open_trusted(path, &file),
            _ => None,
        };
        // Page faults are most of a fresh mapping's recovery time: on a large pool a helper
        // thread takes half of them (MappedMedia::start_prefault), until recovery is done.
        if ckpt.is_none() && nvs_core::Media::len(&media) >= PREFAULT_MIN {
            media.start_prefault(&file);
        }
        let mem = HeapMemory::new();
        let core = |source| Error::Core { path: path.to_path_buf(), source };
        let (pool, used) = match (access, ckpt.as_deref()) {
            (Access::ReadWrite, _) => (Pool::open(media, mem).map_err(core)?, None),
            (Access::ReadOnly, None) => (Pool::open_read_only(media, mem).map_err(core)?, None),
            (Access::ReadOnly, Some(bytes)) => {
                let (mem, prepare) = checkpoint::memory_for(bytes);
                let opened = Pool::open_read_only_from_checkpoint(media, mem, bytes);
                prepare.finish();
                let (pool, used) = opened.map_err(core)?;
                (pool, Some(used))
            }
        };
        drop(ckpt);
        pool.media().stop_prefault();
        let mut fp = FilePool::new(pool, path, file, start, None);
        fp.checkpoint = used;
        Ok(fp)
    }

    /// Open an existing pool to write the lanes `lanes` asks for, beside writers of its
    /// other lanes in other processes (MPI ranks, several `nvs put`): a pool created
    /// with lane names ([`CreateOptions::lane_names`]; else `NeedsLaneNames`), where each
    /// process's names are its lanes' own. `Some(lanes)`: exactly those; `None`: the
    /// lowest lane no writer holds. Each lane is owned by an OFD write lock on its byte
    /// (`crate::locks`), which the kernel drops when this process ends however it ends:
    /// a lane another live process holds is refused ([`Error::Locked`]), a dead
    /// writer's lane is taken over (recovery has already found where it ended). The
    /// pool's one writer ([`Access::ReadWrite`]) holds every lane, so the two kinds
    /// exclude each other. Puts need no lock; segment claims take the claim lock briefly.
    /// [`FilePool::refresh`] brings in the other writers' objects.
    pub fn open_lanes(path: impl AsRef<Path>, lanes: Option<&[u32]>) -> Result<FilePool> {
        Self::open_lanes_with(path, lanes, None)
    }

    /// [`FilePool::open_lanes`] with this durability (`None`: the default).
    pub fn open_lanes_with(
        path: impl AsRef<Path>,
        lanes: Option<&[u32]>,
        durability: Option<Durability>,
    ) -> Result<FilePool> {
        let path = path.as_ref();
        let start = Instant::now();
        let io = |op, source| Error::Io { op, path: path.to_path_buf(), source };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|e| io("open", e))?;
        let mut media = MappedMedia::map(&file, path, Access::ReadWrite, durability, false)?;
        // A pool without lane names is refused before any lane lock is taken: a lane
        // lock held even briefly by this open would read as a lane writer to another.
        if nvs_core::read_layout(&media).is_ok_and(|l| !l.lane_names) {
            return Err(Error::Core { path: path.to_path_buf(), source: nvs_core::Error::NeedsLaneNames });
        }
        // Which lanes: the superblock says how many there are (checked again, with
        // everything else, when the pool opens).
        let lanes_max = lanes_of(&media);
        let lock_lane = |lane: u32| locks::try_lock(&file, locks::LANES + lane as i64, 1);
        let owned: Vec<u32> = match lanes {
            Some(lanes) => {
                // A lane past the pool's is refused by the open below (after what is
                // wrong with the file itself, if anything).
                for &lane in lanes.iter().filter(|&&l| l < lanes_max) {
                    if !lock_lane(lane).map_err(|e| io("take a lane lock of", e))? {
                        // The pool's one writer holds every lane: the pool is what is held.
                        let held = if locks::held(&file, locks::WRITER, 1) { Held::Pool } else { Held::Lane(lane) };
                        return Err(Error::Locked { path: path.to_path_buf(), held });
                    }
                }
                lanes.to_vec()
            }
            None => {
                let mut free = None;
                for lane in 0..lanes_max {
                    if lock_lane(lane).map_err(|e| io("take a lane lock of", e))? {
                        free = Some(lane);
                        break;
                    }
                }
                let Some(free) = free else {
                    // The pool's one writer holds every lane, or each lane has its writer.
                    let held =
                        if locks::held(&file, locks::WRITER, 1) { Held::Pool } else { Held::EveryLane(lanes_max) };
                    return Err(Error::Locked { path: path.to_path_buf(), held });
                };
                vec![free]
            }
        };
        is_a_pool(&media, path)?;
        back_a_writer(&file, &mut media, path)?;
        media.share_with_writers(file.try_clone().map_err(|e| io("duplicate the descriptor of", e))?);
        let pool = Pool::open_lanes(media, HeapMemory::new(), &owned)
            .map_err(|source| Error::Core { path: path.to_path_buf(), source })?;
        Ok(FilePool::new(pool, path, file, start, Some(owned)))
    }

    /// The lanes this pool writes beside writers in other processes
    /// ([`FilePool::open_lanes`]); `None` for the pool's one writer and for readers.
    pub fn owned_lanes(&self) -> Option<&[u32]> {
        self.owned.as_deref()
    }

    /// Does a writer (in any process) hold `lane` right now? (The pool's one writer
    /// holds every lane.)
    pub fn lane_writer_alive(&self, lane: u32) -> bool {
        locks::held(&self.file, locks::LANES + lane as i64, 1)
    }

    /// Nothing more can be committed to this pool: no writer (in any process) holds any
    /// of its lanes, and its path no longer names its file (removed, moved, or replaced
    /// by a new pool), so no later writer can open it.
    pub(crate) fn orphaned(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        let at_path = match (std::fs::metadata(&self.path), self.file.metadata()) {
            (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            (Err(e), _) if e.kind() == std::io::ErrorKind::NotFound => false,
            _ => true, // cannot tell: as if it were
        };
        !at_path && !locks::held(&self.file, locks::LANES, locks::LANE_COUNT)
    }

    /// A lane this pool may write: all of them for the pool's one writer.
    fn writes(&self, lane: u32) -> bool {
        self.owned.as_ref().is_none_or(|o| o.contains(&lane))
    }

    /// The pool's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How long create/open took (mapping, then format or recovery).
    pub fn open_time(&self) -> Duration {
        self.open_time
    }

    /// Put `object` on `lane`; returns what was committed, once the commit is durable.
    pub fn put(&mut self, lane: u32, object: Object<'_>) -> Result<Put> {
        self.check_object(&object)?;
        self.write(|p| p.put(lane, object))
    }

    /// Put `buf` as the next version of `name` on `lane` — the safe delta path: a delta
    /// of the pages written since this buffer's last committed put, against the version
    /// that put made (a full version the first time). The ranges count as stored only
    /// once the put commits: after a refused put, the next one stores them (and whatever
    /// was written since) again.
    pub fn put_tracked(&mut self, lane: u32, name: &[u8], buf: &mut TrackedBuf) -> Result<Put> {
        // Refused before the buffer's tracking is touched (in a fork child, say): what
        // was written stays pending for the put that will store it.
        self.check_sync()?;
        let changes = take_pending(buf);
        let object = tracked_object(name, buf, &changes);
        let put = self.put(lane, object)?;
        commit_pending(buf, put.version);
        Ok(put)
    }

    /// Check every delta put (through this pool and its lanes) against its parent before
    /// anything is written: bytes outside the changed ranges must equal the parent's,
    /// else the put is refused with [`Error::DeltaMismatch`]. It reads the parent, so it
    /// costs a get per delta put; on by default in debug builds (and so in tests).
    pub fn set_delta_check(&mut self, on: bool) {
        self.delta_check = on;
    }

    /// Refuse what nvs-core would store but a reader could not get back: a name with a
    /// NUL byte inside (C, Fortran and every C string API read a name up to its first
    /// NUL, and would get another object's bytes: `key` for `key\0secret`); and a delta
    /// put whose ranges missed a change (when the check is on).
    fn check_object(&self, object: &Object<'_>) -> Result<()> {
        let name = object.name();
        if let Some(at) = name.iter().position(|&b| b == 0) {
            return Err(Error::NameNul { name: name.to_vec(), at });
        }
        self.check_delta(object)
    }

    /// Refuse a delta put whose ranges missed a change (when the check is on).
    fn check_delta(&self, object: &Object<'_>) -> Result<()> {
        let Some((parent, changes)) = object.delta_request().filter(|_| self.delta_check) else { return Ok(()) };
        let name = object.name();
        // No parent of the same length: nvs stores a full version, nothing to check.
        match self.pool.stat(name, parent) {
            Ok(info) if info.len_bytes == object.len_bytes() => {}
            _ => return Ok(()),
        }
        let old = self.get_vec(name, parent)?;
        let new: Vec<u8> = object.parts().concat();
        let mut ranges = Vec::new();
        changes.for_each_range(&mut |off, len| ranges.push((off, len)));
        ranges.sort_unstable();
        let mut at = 0u64;
        for (off, len) in ranges.into_iter().chain([(new.len() as u64, 0)]) {
            let (from, to) = (at.min(new.len() as u64) as usize, off.min(new.len() as u64) as usize);
            if from < to {
                if let Some(i) = (from..to).find(|&i| old[i] != new[i]) {
                    let path = self.path.clone();
                    return Err(Error::DeltaMismatch { path, name: name.to_vec(), parent, offset: i as u64 });
                }
            }
            at = at.max(off.saturating_add(len));
        }
        Ok(())
    }

    /// Commit `objects` together on `lane` — any number of them, up to what the pool
    /// holds — in one unit: all or none survive a crash. Returns their versions.
    ///
    /// # Errors
    /// Nothing is committed on any error. A refusal of one object — its name (empty, too
    /// long, with a NUL), metadata, version, size or delta ([`nvs_core::BatchError`]) — is
    /// [`Error::Batch`], naming the object's index (`object 2 of the batch: empty name`);
    /// everything else (the pool's state, room, a failed msync) is the error alone, as
    /// for [`FilePool::put`].
    pub fn put_batch(&mut self, lane: u32, objects: &[Object<'_>]) -> Result<Vec<u64>> {
        let mut versions = vec![0; objects.len()];
        self.put_batch_into(lane, objects, &mut versions, &mut Vec::new())?;
        Ok(versions)
    }

    /// [`FilePool::put_batch`] with no allocation: object `i`'s version goes to
    /// `versions[i]` (for each `i` below `versions.len()`; an empty slice takes none),
    /// written only once the batch is committed. A batch of more than
    /// [`nvs_core::BATCH_MAX`] objects keeps its plan in `slots`, grown to the batch's
    /// size if shorter and left so for the next call (a caller's scratch: the C ABI keeps
    /// one per handle); a smaller batch plans on the stack and leaves it alone.
    ///
    /// # Errors
    /// As [`FilePool::put_batch`].
    pub fn put_batch_into(
        &mut self,
        lane: u32,
        objects: &[Object<'_>],
        versions: &mut [u64],
        slots: &mut Vec<PlanSlot>,
    ) -> Result<()> {
        self.check_batch(objects)?;
        let mut at = None;
        let r = if objects.len() <= nvs_core::BATCH_MAX {
            self.write(|p| p.put_batch(lane, objects).map_err(|e| unbatch(e, &mut at)))
                .map(|v| versions.iter_mut().zip(v.iter()).for_each(|(o, v)| *o = *v))
        } else {
            let slots = grown(slots, objects.len());
            let r = self.write(|p| p.put_batch_in(lane, objects, slots).map_err(|e| unbatch(e, &mut at)));
            r.map(|_| versions.iter_mut().zip(slots.iter()).for_each(|(o, s)| *o = s.version()))
        };
        r.map_err(|e| batched(e, at))
    }

    /// [`FilePool::check_object`] of every object of a batch, naming the one refused.
    fn check_batch(&self, objects: &[Object<'_>]) -> Result<()> {
        for (i, o) in objects.iter().enumerate() {
            self.check_object(o).map_err(|e| Error::in_batch(i, e))?;
        }
        Ok(())
    }

    /// [`put_tracked`](Self::put_tracked) of many buffers at once: each `(name, buffer)`
    /// the next version of its name, all committed together in one unit (one commit for
    /// a whole time step). Returns their versions, in order.
    ///
    /// # Errors
    /// As [`FilePool::put_batch`] (a refusal of one buffer is [`Error::Batch`], naming its
    /// index in `items`).
    pub fn put_batch_tracked(&mut self, lane: u32, items: &mut [(&[u8], &mut TrackedBuf)]) -> Result<Vec<u64>> {
        self.check_sync()?; // as in put_tracked: nothing taken from the buffers if refused
        let changes: Vec<_> = items.iter_mut().map(|(_, buf)| take_pending(buf)).collect();
        let versions = {
            let objects: Vec<Object<'_>> =
                items.iter().zip(&changes).map(|((name, buf), c)| tracked_object(name, buf, c)).collect();
            self.put_batch(lane, &objects)?
        };
        for ((_, buf), v) in items.iter_mut().zip(&versions) {
            commit_pending(buf, *v);
        }
        Ok(versions)
    }

    /// Take `lane` for writing from this thread: several threads, each with its own
    /// lane, put concurrently. Every put through it passes the same durability check as
    /// the pool's own (a failed msync refuses it and every later write). Taking a lane
    /// joins it to the stream durably ([`nvs_core::Pool::lane`]): followers wait for its
    /// end of stream too — take every writer's lane before any of them closes.
    pub fn lane(&self, lane: u32) -> Result<FileLane<'_>> {
        self.check_sync()?;
        let w = self.pool.lane(lane).map_err(|source| self.core(source))?;
        Ok(FileLane { pool: self, w })
    }

    /// How puts with a delta request choose between a delta and a full version.
    pub fn set_delta_options(&mut self, opts: nvs_core::DeltaOptions) -> Result<()> {
        let path = &self.path;
        self.pool.set_delta_options(opts).map_err(|source| Error::Core { path: path.clone(), source })
    }

    /// The delta options in force.
    pub fn delta_options(&self) -> nvs_core::DeltaOptions {
        self.pool.delta_options()
    }

    /// Catch up with a live writer ([`nvs_core::Pool::refresh`]): a read-only pool reads
    /// only what was committed since its last refresh, and recovers the whole pool when
    /// it cannot be sure that gives what a recovery would.
    pub fn refresh(&mut self) -> Result<()> {
        let path = &self.path;
        self.pool.refresh().map_err(|source| Error::Core { path: path.clone(), source })
    }

    /// Copy version `version` of `key` (a name, or a lane's name: [`Key`]) into `buf`;
    /// returns its length.
    pub fn get<'k>(&self, key: impl Into<Key<'k>>, version: u64, buf: &mut [u8]) -> Result<usize> {
        let key = key.into();
        self.pool.get(key, version, buf).map_err(|e| self.about(key, Some(version), e))
    }

    /// Every version of name `id` (from [`FilePool::names`]), oldest first, in any pool
    /// ([`nvs_core::Pool::versions_of`]). A stale `id` — taken before the index was
    /// rebuilt (a refresh that recovered instead of catching up, a reclaim), or from
    /// another pool — yields nothing, never another name's versions ([`NameId`]).
    pub fn versions_of(&self, id: NameId) -> VersionIter<'_, MappedMedia, HeapMemory> {
        self.pool.versions_of(id)
    }

    /// An object's length as a buffer length here.
    fn object_len(&self, len_bytes: u64) -> Result<usize> {
        usize::try_from(len_bytes).map_err(|_| Error::Unsupported {
            path: self.path.clone(),
            what: "object larger than this address space".into(),
        })
    }

    /// Version `version` of `name`, as a new vector.
    pub fn get_vec<'k>(&self, key: impl Into<Key<'k>>, version: u64) -> Result<Vec<u8>> {
        let key = key.into();
        let core = |e| self.about(key, Some(version), e);
        let info = self.pool.stat(key, version).map_err(core)?;
        let mut buf = vec![0; self.object_len(info.len_bytes)?];
        let n = self.pool.get(key, version, &mut buf).map_err(core)?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Version `version` of `name` as a vector of plain values (`f64`, `i32`, ... any
    /// [`bytemuck::Pod`]), aligned for them; the object must be a whole number of them.
    pub fn get_pod<'k, T: bytemuck::Pod>(&self, key: impl Into<Key<'k>>, version: u64) -> Result<Vec<T>> {
        let key = key.into();
        let info = self.stat(key, version)?;
        let elem = std::mem::size_of::<T>().max(1) as u64;
        let count = usize::try_from(info.len_bytes / elem).map_err(|_| Error::Unsupported {
            path: self.path.clone(),
            what: "object larger than this address space".into(),
        })?;
        let mut out = vec![T::zeroed(); count];
        let n = self.pool.get_into(key, version, &mut out).map_err(|e| self.about(key, Some(version), e))?;
        out.truncate(n);
        Ok(out)
    }

    /// Run `f` on version `version` of `name` in place, borrowed from the mapping (no
    /// copy; see [`nvs_core::Pool::with_bytes`] for what a reader beside a writer in
    /// another process must know); a delta version, which is not in one place, is
    /// rebuilt into a vector for `f`.
    pub fn with_bytes<'k, R>(&self, key: impl Into<Key<'k>>, version: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let key = key.into();
        let mut f = Some(f);
        let lent = self.pool.with_bytes(key, version, |b| f.take().map(|f| f(b)));
        match lent {
            Ok(Some(r)) => Ok(r),
            Err(nvs_core::Error::NotBorrowable) | Ok(None) => {
                let bytes = self.get_vec(key, version)?;
                f.take().map(|f| f(&bytes)).ok_or_else(|| self.core(nvs_core::Error::NotFound))
            }
            Err(e) => Err(self.about(key, Some(version), e)),
        }
    }

    /// The latest version of `key`.
    pub fn latest<'k>(&self, key: impl Into<Key<'k>>) -> Result<u64> {
        let key = key.into();
        self.pool.latest(key).map_err(|e| self.about(key, None, e))
    }

    /// Facts about version `version` of `key`.
    pub fn stat<'k>(&self, key: impl Into<Key<'k>>, version: u64) -> Result<ObjectInfo> {
        let key = key.into();
        self.pool.stat(key, version).map_err(|e| self.about(key, Some(version), e))
    }

    /// The metadata stored with version `version` of `name` (empty if none; see
    /// [`Meta::parse`](crate::Meta::parse) for the `key=value` convention).
    pub fn meta<'k>(&self, key: impl Into<Key<'k>>, version: u64) -> Result<Vec<u8>> {
        let key = key.into();
        let mut buf = vec![0u8; nvs_core::META_MAX];
        let n = self.pool.meta(key, version, &mut buf).map_err(|e| self.about(key, Some(version), e))?;
        buf.truncate(n);
        Ok(buf)
    }

    /// Put `values` as the next version of `name` on `lane`, with their element type and
    /// `shape` in its metadata (`dtype=<f8`, `shape=...`), so a reader (the Python
    /// package, the ADIOS2 engine) can hand back a shaped array. The shape's product
    /// must be `values.len()`.
    pub fn put_array<T: crate::Element>(&mut self, lane: u32, name: &str, values: &[T], shape: &[u64]) -> Result<Put> {
        let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        if count != Some(values.len() as u64) {
            return Err(Error::BadMeta { what: format!("shape {shape:?} does not hold {} values", values.len()) });
        }
        let meta = crate::Meta::new().dtype(T::DTYPE).shape(shape).to_bytes()?;
        self.put(lane, Object::pod(name, values).meta(&meta))
    }

    /// Every version of `name`, oldest first ([`nvs_core::Pool::versions`]).
    pub fn versions<'k>(&self, key: impl Into<Key<'k>>) -> Result<VersionIter<'_, MappedMedia, HeapMemory>> {
        let key = key.into();
        self.pool.versions(key).map_err(|e| self.about(key, None, e))
    }

    /// Every distinct name ([`nvs_core::Pool::names`]).
    pub fn names(&self) -> NameIter<'_, MappedMedia, HeapMemory> {
        self.pool.names()
    }

    /// The bytes of name `id` ([`nvs_core::Pool::name_bytes`]). Empty for a stale `id`
    /// — taken before the index was rebuilt (a refresh that recovered instead of
    /// catching up, a reclaim), or from another pool — never another name's bytes
    /// ([`NameId`]); empty too for a name whose bytes a writer's retention reused since
    /// this pool's last refresh.
    pub fn name_bytes<'b>(&self, id: NameId, buf: &'b mut [u8; nvs_core::NAME_MAX]) -> &'b [u8] {
        self.pool.name_bytes(id, buf)
    }

    /// What recovery and the puts since left on `lane` (`None`: it holds no segment).
    pub fn lane_info(&self, lane: u32) -> Option<LaneInfo> {
        self.pool.lane_info(lane)
    }

    /// The pool's layout (segment size and count, lanes, checksums).
    pub fn layout(&self) -> Layout {
        self.pool.layout()
    }

    /// What the pool holds ([`nvs_core::Pool::stats`]).
    pub fn stats(&self) -> PoolStats {
        self.pool.stats()
    }

    /// Free segments.
    pub fn free_segments(&self) -> u32 {
        self.pool.free_segments()
    }

    /// Largest payload one object with a `name_len`-byte name can have.
    pub fn max_object_bytes(&self, name_len: usize) -> u64 {
        self.pool.max_object_bytes(name_len)
    }

    /// Bytes of memory the index holds.
    pub fn index_bytes(&self) -> usize {
        self.pool.index_bytes()
    }

    /// Make room in the index for `objects` more objects (versions) and `names` more
    /// names than it holds, and have the kernel map its memory in now
    /// (`MADV_POPULATE_WRITE`; best effort: a kernel before 5.14 maps it at first use):
    /// for a writer that knows what it will put, so that its puts neither grow the index
    /// (new memory, a rebuild of the hash table at each doubling) nor take its page
    /// faults, ~1 per 50 small objects otherwise. Index memory never shrinks; an index
    /// that comes to hold more still grows. Costs ~80–120 bytes of memory per object or
    /// name. A hint, never a way to run the machine out of memory: counts past what the
    /// pool can hold at once (an object takes a 64-byte line of it at least), or past
    /// what half the memory free now holds at 128 bytes each, are cut to that.
    ///
    /// # Errors
    /// `IndexFull` if the memory cannot grow that far (the allocator refuses); nothing
    /// changes then.
    pub fn reserve(&mut self, objects: usize, names: usize) -> Result<()> {
        // SAFETY: sysconf reads numbers.
        let (free, page) = unsafe { (libc::sysconf(libc::_SC_AVPHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        let most = match (usize::try_from(free), usize::try_from(page)) {
            (Ok(free), Ok(page)) => free.saturating_mul(page) / 2 / 128,
            _ => usize::MAX, // not known: the pool's bound only
        };
        let objects = objects.min(most);
        let names = names.min(most - objects);
        self.pool.reserve(objects, names)?;
        const PAGE: usize = 4096;
        for (base, len) in self.pool.index_spans() {
            let (lo, hi) = (base.next_multiple_of(PAGE), (base + len) & !(PAGE - 1));
            if hi > lo {
                // SAFETY: asks the kernel to map in the pages of `lo..hi`, memory the
                // index holds (its arrays, alive while `self` is borrowed); populating
                // changes no memory contents.
                unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_POPULATE_WRITE) };
            }
        }
        Ok(())
    }

    /// Opened for writing.
    pub fn is_writable(&self) -> bool {
        self.pool.is_writable()
    }

    /// The mapping (its durability mode, the backing it maps).
    pub fn media(&self) -> &MappedMedia {
        self.pool.media()
    }

    /// The nvs-core pool, for what only nvs's own tools read (its superblock).
    #[doc(hidden)]
    pub fn core_pool(&self) -> &CorePool {
        &self.pool
    }

    fn core(&self, source: nvs_core::Error) -> Error {
        Error::Core { path: self.path.clone(), source }
    }

    /// `e` from a call about `name` (`version`): a `NotFound` names what.
    fn about(&self, key: Key<'_>, version: Option<u64>, e: nvs_core::Error) -> Error {
        Error::about(&self.path, key.name(), version, e)
    }

    /// Read every committed payload and verify its checksum (if the pool has them), as
    /// recovery verified every header; returns the number of objects checked. The first
    /// object whose bytes fail is [`Error::Damaged`], naming it.
    pub fn verify(&self) -> Result<u64> {
        let media = self.pool.media();
        if media.check_room_to_read_all(&self.path).is_err() {
            // A sparse file whose holes could not all be read: the check reads its
            // objects only (a sparse pool's holes are its free segments).
            let objects = self.names().flat_map(|n| self.versions_of(n.id)).map(|o| (o.offset, o.stored_bytes));
            media.check_room_to_read(&self.path, objects)?;
        }
        self.pool.verify_all().map_err(|source| {
            let named = match source {
                nvs_core::Error::Corrupted { offset, .. } => self.object_at(offset),
                _ => None,
            };
            match named {
                Some((name, version)) => Error::damaged(&self.path, &name, version, source),
                None => Error::Core { path: self.path.clone(), source },
            }
        })
    }

    /// The object (name, version) whose payload holds byte `offset` of the pool.
    fn object_at(&self, offset: u64) -> Option<(Vec<u8>, u64)> {
        let mut name = [0u8; nvs_core::NAME_MAX];
        self.pool.names().find_map(|n| {
            let v =
                self.pool.versions_of(n.id).find(|o| (o.offset..o.offset + o.stored_bytes.max(1)).contains(&offset))?;
            Some((self.pool.name_bytes(n.id, &mut name).to_vec(), v.version))
        })
    }

    /// Run one nvs-core write, refusing it (and all later ones) once an msync failed.
    fn write<T>(&mut self, op: impl FnOnce(&mut CorePool) -> nvs_core::Result<T>) -> Result<T> {
        self.check_sync()?;
        let r = op(&mut self.pool);
        // A failed msync during this write outranks its result: it may not be durable.
        self.check_sync()?;
        r.map_err(|source| Error::Core { path: self.path.clone(), source })
    }

    /// Close the pool: an end-of-stream marker on every lane that joined the stream and
    /// is not closed yet (so followers see the stream end), then unmap and unlock. A
    /// read-only pool just closes, and so does a writer's pool in a child `fork` made of
    /// the writer (an `atexit` handler of the parent's, run by the child): the streams
    /// and the locks stay the parent's. A lane whose stream cannot be ended (its segment
    /// filled to the last byte, none free: `Full`) does not keep the other lanes' from
    /// ending; the first such error is returned, after every lane was tried (the objects
    /// are durable either way).
    pub fn close(mut self) -> Result<()> {
        let mut first = Ok(());
        if self.pool.is_writable() && !self.forked() {
            for lane in 0..self.pool.layout().lanes_max {
                if self.writes(lane) && self.pool.lane_info(lane).is_some_and(|i| !i.closed) {
                    let r = self.close_lane(lane);
                    first = first.and(r);
                }
            }
        }
        first
    }

    /// Is a writer (in any process) holding this pool open right now?
    pub fn writer_alive(&self) -> bool {
        writer_alive(&self.file)
    }

    /// Detach from every lane that joined and is neither closed nor detached, without
    /// closing their streams: followers see that the writer ended cleanly and go on
    /// waiting for the next one (`nvs put` does this at exit), where after a death they
    /// report it gone. As [`Self::close`], a lane that cannot take its marker does not
    /// keep the others from theirs; the first error is returned. In a child `fork` made
    /// of the writer it writes nothing and returns `Ok`, as a close there does: the streams
    /// are the parent's.
    pub fn detach(&mut self) -> Result<()> {
        let mut first = Ok(());
        if self.forked() {
            return first;
        }
        for lane in 0..self.layout().lanes_max {
            if self.writes(lane) && self.lane_info(lane).is_some_and(|i| !i.closed && !i.detached) {
                let r = self.write(|p| p.detach_lane(lane));
                first = first.and(r);
            }
        }
        first
    }

    /// Close `lane`'s stream: followers see its end (a later put reopens it).
    pub fn close_lane(&mut self, lane: u32) -> Result<()> {
        self.write(|p| p.close_lane(lane))
    }

    /// Retention: release the oldest segments whose objects all have at least
    /// `keep_versions` newer versions; returns the segments freed. See
    /// [`nvs_core::Pool::reclaim`].
    pub fn reclaim(&mut self, keep_versions: u32) -> Result<u32> {
        self.write(|p| p.reclaim(keep_versions))
    }

    /// Is this process a `fork` of the one that opened the pool?
    fn forked(&self) -> bool {
        self.born.is_fork()
    }

    /// May this pool write now? Not in a `fork` of its writer, and not after a failed
    /// msync (called before and after every write).
    fn check_sync(&self) -> Result<()> {
        if self.forked() {
            return Err(Error::Forked { path: self.path.clone(), owner: self.pid });
        }
        match self.pool.media().sync_error() {
            Some(source) => Err(Error::Sync { path: self.path.clone(), source }),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for FilePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FilePool")
            .field("path", &self.path)
            .field("writable", &self.pool.is_writable())
            .field("durability", &self.pool.media().durability())
            .finish_non_exhaustive()
    }
}

/// One thread's writer for one lane of a [`FilePool`] ([`FilePool::lane`]): the
/// nvs-core lane writer, with the pool's durability check around every write.
pub struct FileLane<'p> {
    pool: &'p FilePool,
    w: LaneWriter<'p, MappedMedia, HeapMemory>,
}

impl FileLane<'_> {
    /// The lane this writer holds.
    pub fn lane(&self) -> u32 {
        self.w.lane()
    }

    /// Put `object` on this lane.
    pub fn put(&mut self, object: Object<'_>) -> Result<Put> {
        self.pool.check_object(&object)?;
        self.write(|w| w.put(object))
    }

    /// [`FilePool::put_tracked`] on this lane.
    pub fn put_tracked(&mut self, name: &[u8], buf: &mut TrackedBuf) -> Result<Put> {
        self.pool.check_sync()?; // as in FilePool::put_tracked
        let changes = take_pending(buf);
        let object = tracked_object(name, buf, &changes);
        let put = self.put(object)?;
        commit_pending(buf, put.version);
        Ok(put)
    }

    /// Commit `objects` together on this lane (any number: [`FilePool::put_batch`]).
    ///
    /// # Errors
    /// As [`FilePool::put_batch`]: a refusal of one object is [`Error::Batch`], naming
    /// its index.
    pub fn put_batch(&mut self, objects: &[Object<'_>]) -> Result<Vec<u64>> {
        let mut versions = vec![0; objects.len()];
        self.put_batch_into(objects, &mut versions, &mut Vec::new())?;
        Ok(versions)
    }

    /// [`FileLane::put_batch`] with no allocation ([`FilePool::put_batch_into`]).
    ///
    /// # Errors
    /// As [`FilePool::put_batch`].
    pub fn put_batch_into(
        &mut self,
        objects: &[Object<'_>],
        versions: &mut [u64],
        slots: &mut Vec<PlanSlot>,
    ) -> Result<()> {
        self.pool.check_batch(objects)?;
        let mut at = None;
        let r = if objects.len() <= nvs_core::BATCH_MAX {
            self.write(|w| w.put_batch(objects).map_err(|e| unbatch(e, &mut at)))
                .map(|v| versions.iter_mut().zip(v.iter()).for_each(|(o, v)| *o = *v))
        } else {
            let slots = grown(slots, objects.len());
            let r = self.write(|w| w.put_batch_in(objects, slots).map_err(|e| unbatch(e, &mut at)));
            r.map(|_| versions.iter_mut().zip(slots.iter()).for_each(|(o, s)| *o = s.version()))
        };
        r.map_err(|e| batched(e, at))
    }

    /// Close the lane's stream (an end-of-stream marker).
    pub fn close(&mut self) -> Result<()> {
        self.write(|w| w.close())
    }

    fn write<T>(
        &mut self,
        op: impl FnOnce(&mut LaneWriter<'_, MappedMedia, HeapMemory>) -> nvs_core::Result<T>,
    ) -> Result<T> {
        self.pool.check_sync()?;
        let r = op(&mut self.w);
        self.pool.check_sync()?;
        r.map_err(|source| self.pool.core(source))
    }
}

impl fmt::Debug for FileLane<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileLane").field("lane", &self.w.lane()).field("pool", &self.pool.path).finish()
    }
}

/// `n` fresh slots (`PlanSlot::default()`, as `put_batch_in` asks) in `slots`, reusing
/// its memory: it grows only for a batch larger than any before.
fn grown(slots: &mut Vec<PlanSlot>, n: usize) -> &mut [PlanSlot] {
    slots.clear();
    slots.resize(n, PlanSlot::default());
    slots
}

/// `e`'s error, its object's index kept in `at` (for [`batched`]).
fn unbatch(e: nvs_core::BatchError, at: &mut Option<usize>) -> nvs_core::Error {
    *at = e.index;
    e.error
}

/// A batch's error `e`, about object `at` if nvs-core named one ([`unbatch`]): an
/// [`Error::Batch`] — unless the write's own check refused it otherwise (a failed msync
/// outranks the batch's result).
fn batched(e: Error, at: Option<usize>) -> Error {
    match (at, &e) {
        (Some(i), Error::Core { .. }) => Error::in_batch(i, e),
        _ => e,
    }
}

/// Take the writer's lock without waiting: an open-file-description write lock on byte
/// 0. It is the one writer lock and the writer's liveness mark at once: a write lock
/// needs a descriptor opened for writing (so a user who can only read the pool cannot
/// take the writer's role or keep a writer out with `flock`), and the kernel drops it
/// when the writer's file is closed — also when the process dies — so a follower can
/// tell a live writer from a dead one without taking any lock ([`writer_alive`]). A
/// writer that cannot take it refuses to write.
fn lock(file: &File, path: &Path) -> Result<()> {
    let io = |source| Error::Io {
        op: "take the writer lock (an OFD write lock on byte 0) of",
        path: path.to_path_buf(),
        source,
    };
    if !locks::try_lock(file, locks::WRITER, 1).map_err(io)? {
        return Err(Error::Locked { path: path.to_path_buf(), held: Held::Pool });
    }
    // Every lane too: writers of some lanes in other processes are excluded, and see it.
    if !locks::try_lock(file, locks::LANES, locks::LANE_COUNT).map_err(io)? {
        let _ = locks::unlock(file, locks::WRITER, 1);
        return Err(Error::Locked { path: path.to_path_buf(), held: Held::Pool });
    }
    Ok(())
}

/// A pool file's writer locks held for a writer nvs cannot see: a virtual machine's
/// guest writing the pool through qemu's `memory-backend-file` (an emulated NVDIMM),
/// which takes no lock. While the hold lasts, host writers (`nvs put`, `reclaim`,
/// `close`, another `open`) are refused with [`Error::Locked`], and followers see a live
/// writer on every lane: they follow the guest, and report it gone only once the hold
/// ends without the guest having closed its lanes. The file need not be a pool yet (the
/// guest may format it). `nvs hold POOL -- qemu-system-x86_64 ...` holds it for the life
/// of the command it runs.
#[derive(Debug)]
pub struct WriterHold {
    file: File,
    path: PathBuf,
}

impl WriterHold {
    /// Take the writer lock and every lane lock of the file at `path` (opened for
    /// writing: a user who can only read it cannot hold it), without waiting. Only a
    /// regular file or a device-DAX device can be a pool: anything else (a FIFO, a
    /// terminal, `/dev/null`) is refused, unopened.
    pub fn take(path: impl AsRef<Path>) -> Result<WriterHold> {
        use std::os::unix::fs::FileTypeExt;
        let path = path.as_ref();
        let io = |op, source| Error::Io { op, path: path.to_path_buf(), source };
        let kind = std::fs::metadata(path).map_err(|e| io("look at", e))?.file_type();
        let file = match kind.is_file() {
            true => OpenOptions::new().read(true).write(true).open(path).map_err(|e| io("open for writing", e))?,
            false if kind.is_char_device() => open_dax_device(path).ok_or_else(|| {
                io("hold", std::io::Error::other("a character device that is not a device-DAX device"))
            })?,
            false => return Err(io("hold", std::io::Error::other("not a regular file or a device-DAX device"))),
        };
        lock(&file, path)?;
        Ok(WriterHold { file, path: path.to_path_buf() })
    }

    /// Does a writer (this hold, or a pool's writer) hold the file at `path` now?
    pub fn held(path: impl AsRef<Path>) -> bool {
        File::open(path).is_ok_and(|f| writer_alive(&f))
    }

    /// Let processes started from here on inherit the locked file description (its
    /// descriptor stays open across `exec`): the locks then last while any of them
    /// lives, even if this process is killed first — and while any of their descendants
    /// that kept the descriptor lives (a daemonized child, a shell's background job).
    pub fn inherit(&self) -> Result<()> {
        let fd = self.file.as_raw_fd();
        // SAFETY: F_GETFD/F_SETFD on a descriptor this struct owns; no memory is passed.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC) == 0
        };
        if ok {
            Ok(())
        } else {
            Err(Error::Io {
                op: "pass on the lock of",
                path: self.path.clone(),
                source: std::io::Error::last_os_error(),
            })
        }
    }
}

/// The lane count in `media`'s superblock, clamped to what a pool may have (the open
/// checks the superblock whole).
fn lanes_of(media: &MappedMedia) -> u32 {
    let mut b = [0u8; 4];
    if nvs_core::Media::len(media) < 64 {
        return 1; // no superblock: the open says what it is
    }
    nvs_core::Media::read(media, 44, &mut b);
    u32::from_le_bytes(b).clamp(1, nvs_core::LANES_MAX)
}

/// Does some writer hold the pool at `file` open right now? Asks the kernel whether an
/// open-file-description write lock on byte 0 exists (`F_OFD_GETLK`), which takes no
/// lock and so never gets in a writer's way.
pub fn writer_alive(file: &File) -> bool {
    locks::held(file, locks::WRITER, locks::LANES + locks::LANE_COUNT)
}

/// Open `path` read-write if it is a device-DAX device (the one thing `create` formats
/// in place); `None` for anything else.
fn open_dax_device(path: &Path) -> Option<File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    // Look before opening: opening some special files (a FIFO, a terminal) has effects.
    if !std::fs::metadata(path).ok()?.file_type().is_char_device() {
        return None;
    }
    let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(path).ok()?;
    match Backing::probe(&file, path) {
        Ok((Backing::DaxDevice, _)) => Some(file),
        _ => None,
    }
}

/// The superblock's own checks, before a writer fills any hole of the file: a file that
/// is not a pool (a sparse file, say) is refused as it is, with no block allocated.
fn is_a_pool(media: &MappedMedia, path: &Path) -> Result<()> {
    nvs_core::read_layout(media).map(|_| ()).map_err(|source| Error::Core { path: path.to_path_buf(), source })
}

/// The smallest segment a sparse pool leaves holes in ([`CreateOptions::sparse`]).
const SPARSE_SEGMENT_MIN: u64 = 64 << 10;

/// A sparse pool's blocks at create: the superblock's page, and each segment's first
/// page (its header, which every open reads: on tmpfs a read of a hole takes a page too,
/// and on a full one raises SIGBUS). The rest comes as segments are claimed.
fn allocate_sparse(file: &File, g: &nvs_core::Geometry) -> std::io::Result<()> {
    const PAGE: u64 = 4096;
    allocate_range(file, 0, DATA_OFF)?;
    (0..u64::from(g.segment_count)).try_for_each(|i| allocate_range(file, DATA_OFF + i * g.segment_len, PAGE))
}

/// A writer never stores into a hole of its pool file it has not given blocks: a store
/// into a hole of a file system with no room left raises SIGBUS (a signal death,
/// mid-put). A file without holes needs nothing. One with holes (a sparse pool, or a
/// sparse copy of any pool) gets the blocks of its superblock page now, and of each
/// segment when it is claimed or, for the segment each lane goes on writing, when the
/// pool opens ([`nvs_core::Media::reserve`]); a file system with no room is an error
/// there, naming the pool. On fsdax every hole is filled now, as before a put could
/// fault on one there.
fn back_a_writer(file: &File, media: &mut MappedMedia, path: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let io = |op, source| Error::Io { op, path: path.to_path_buf(), source };
    let meta = file.metadata().map_err(|e| io("stat", e))?;
    if !meta.file_type().is_file() || meta.blocks().saturating_mul(512) >= meta.len() {
        return Ok(());
    }
    let now = if media.backing() == Backing::FsDax { meta.len() } else { DATA_OFF.min(meta.len()) };
    allocate_range(file, 0, now)
        .map_err(|e| io("fill the holes (a writer needs every block) of the sparse pool file", e))?;
    if media.backing() != Backing::FsDax {
        media.allocate_as_claimed(file.try_clone().map_err(|e| io("duplicate the descriptor of", e))?);
    }
    Ok(())
}

/// Write zeros over the first `len` bytes of a new pool file on a DAX file system, and
/// make that durable. `posix_fallocate` leaves unwritten extents there, and the first
/// store into each page of one would, under `MAP_SYNC`, convert it and commit the file
/// system's journal inside the page fault: in the middle of a put. Written blocks fault
/// in with no metadata change (and in 2 MiB pages where the file's extents allow).
fn write_every_block(file: &File, len: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 2 << 20];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], off)?;
        off += n as u64;
    }
    file.sync_data()
}

/// The process's file size limit (`RLIMIT_FSIZE`) in bytes, if it has one.
fn file_size_limit() -> Option<u64> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system call writing the struct it is given.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// A pool id: random bits from the kernel; if that fails, time and pid mixed through
/// std's randomly keyed hasher (never equal to an earlier pool's in practice).
fn random_pool_id() -> u64 {
    let mut b = [0u8; 8];
    if File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)).is_ok() {
        return u64::from_le_bytes(b);
    }
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    h.write_u32(std::process::id());
    h.finish()
}

/// A new file with no name yet in `path`'s directory (`O_TMPFILE`), or `None` where that
/// is not offered (the file system, no `/proc` to name it through) or `path` exists
/// (which `create` refuses, or formats if it is a device-DAX device).
fn unnamed_file(path: &Path) -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    if path.symlink_metadata().is_ok() || !Path::new("/proc/self/fd").is_dir() {
        return None;
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).mode(0o666).open(dir).ok()
}

/// Give the unnamed `file` ([`unnamed_file`]) the name `path`; `AlreadyExists` if
/// something took that name meanwhile (nothing is overwritten).
fn name_file(file: &File, path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths that live across the call.
    let rc =
        unsafe { libc::linkat(libc::AT_FDCWD, from.as_ptr(), libc::AT_FDCWD, to.as_ptr(), libc::AT_SYMLINK_FOLLOW) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// fsync the directory holding `path` (a file system that cannot sync a directory says
/// `EINVAL`: nothing to do there).
fn sync_dir(path: &Path) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    match File::open(dir).and_then(|d| d.sync_all()) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(()),
        r => r,
    }
}

/// Removes a file it names when dropped, unless disarmed (`.0 = None`).
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The pool's one writer leaves an index checkpoint beside the pool file for the next
/// read-only open (module `checkpoint`), when the pool holds many objects and changed
/// since it was opened (and removes the old one where it cannot write a new one). Not
/// in a `fork` child, not beside writers of other lanes (N ranks would each write one),
/// not while unwinding, not after a failed msync.
impl Drop for FilePool {
    fn drop(&mut self) {
        let writer = self.owned.is_none() && self.pool.is_writable();
        if !writer || self.forked() || std::thread::panicking() || self.pool.media().sync_error().is_some() {
            return;
        }
        let exists = checkpoint::checkpoint_path(&self.path).exists();
        if exists && self.pool.stats() == self.opened_with {
            return;
        }
        // One it cannot write is none: the old one would only cost its reading.
        if !checkpoint::save(&mut self.pool, &self.path, &self.file) && exists {
            let _ = std::fs::remove_file(checkpoint::checkpoint_path(&self.path));
        }
    }
}
