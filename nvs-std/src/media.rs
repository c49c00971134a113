//! [`MappedMedia`]: a pool file or device mapped as an [`nvs_core::Media`] (its docs say
//! what holds of the mapping).

use crate::durability::{holes_take_memory, Backing, Durability};
use crate::error::{Error, Result};
use crate::fork::Born;
use memmap2::{MmapOptions, MmapRaw};
use nvs_core::{Media, Region, StoreKind, Sum};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// How a pool is opened, and so its file mapped: writable (`PROT_WRITE`) or read-only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// One writer at a time (the writer lock: an OFD write lock on byte 0).
    ReadWrite,
    /// Any number of readers, alongside a live writer; never writes (`PROT_READ`).
    ReadOnly,
}

/// The byte range dirtied since the last fence (empty when `lo >= hi`), and the first
/// msync failure, which stays.
#[derive(Debug, Default)]
struct SyncState {
    lo: usize,
    hi: usize,
    failed: Option<(io::ErrorKind, String)>,
    /// The next msync fails (a test of the latch; see `MappedMedia::fail_next_sync`).
    fail_next: bool,
}

/// A pool file or device mapped shared (`MAP_SHARED`) into this process, as an
/// [`nvs_core::Media`].
///
/// What holds of it:
/// - Every access to the mapping goes through the inner [`Region`]; nothing else reads or
///   writes it, and no Rust reference to it is ever made (it is held as a
///   [`memmap2::MmapRaw`] or, on a DAX file system, as a `MAP_SYNC` mapping of our own,
///   both of which hand out only raw pointers).
/// - A regular file on a disk file system is first mapped `MAP_SHARED_VALIDATE |
///   MAP_SYNC`: the kernel grants that only on a DAX file system (fsdax), where it makes
///   every write fault's block mapping durable before the fault returns, so NT stores +
///   `sfence` alone make a put durable ([`Backing::FsDax`]). Refused, the file is mapped
///   as any other.
/// - A read-only media is mapped `PROT_READ`, and its store methods refuse before they
///   reach the region: a read-only pool never stores (nvs-core's promise), and if a bug
///   broke that promise it would panic here or fault, never write.
/// - In [`Durability::Msync`] mode every store records its byte range, and
///   [`Media::fence`] msyncs the union of the ranges recorded since the last fence while
///   holding the lock that guards them. So when any thread's fence returns, every store
///   that thread recorded before it is on stable storage: either this fence synced it, or
///   an earlier fence did and finished before this one took the lock.
/// - `Media::fence` cannot return an error, so a failed msync is latched (sticky) in the
///   media and reported by `Media::fence_failed`: nvs-core then leaves the unit out of
///   the index (no reader of the pool sees what may not be durable) and stops the pool's
///   writes, and [`crate::FilePool`] reports the msync's own error ([`Error::Sync`]).
#[derive(Debug)]
pub struct MappedMedia {
    region: Region,
    map: Mapping,
    durability: Durability,
    backing: Backing,
    writable: bool,
    sync: Mutex<SyncState>,
    /// Set, for good, once `sync.failed` is: every write asks before and after it, and an
    /// atomic load is all that costs while no msync has failed.
    sync_failed: AtomicBool,
    prefault: Mutex<Option<Prefault>>,
    /// The pool file, whose claim lock ([`crate::locks::CLAIMS`]) a writer of some lanes
    /// takes around claims, releases and recoveries (`Media::lock_claims`).
    claims: Option<Claims>,
    /// A read-only mapping of a file whose holes take memory when read.
    sparse: Option<SparseFile>,
    /// A writer's pool file that gets its blocks as segments are claimed
    /// ([`Media::reserve`] allocates them): a sparse pool.
    blocks: Option<Blocks>,
}

/// The most segments whose header pages a read-only open counts the holes of one by
/// one, when the counts alone cannot show the open fits in memory.
const SEGMENTS_COUNTED: u64 = 1 << 16;

/// How a writer of a sparse pool file gives segments their blocks ([`Media::reserve`]).
#[derive(Debug)]
struct Blocks {
    file: Arc<File>,
    /// On tmpfs, the helper preparing the range after the last one reserved, if any.
    ahead: Mutex<Option<Ahead>>,
}

/// A helper thread allocating and mapping the next range a claim is likely to take.
#[derive(Debug)]
struct Ahead {
    handle: JoinHandle<()>,
    /// The process the thread runs in.
    pid: u32,
}

/// The smallest reservation whose successor a helper prepares ahead ([`Blocks`]): a
/// thread per claim is worth it only for segments that take milliseconds to allocate.
const AHEAD_MIN: usize = 1 << 20;

/// How long a writer waits for the claim lock another writer process holds before the
/// operation fails ([`nvs_core::Error::ClaimLockTimeout`]): `NVS_CLAIM_WAIT_MS`, default
/// 10 s (a claim holds it for microseconds, a recovery of a large pool for a fraction of a
/// second).
fn claim_wait() -> std::time::Duration {
    static WAIT: std::sync::OnceLock<std::time::Duration> = std::sync::OnceLock::new();
    *WAIT.get_or_init(|| {
        let ms = std::env::var("NVS_CLAIM_WAIT_MS").ok().and_then(|v| v.trim().parse().ok()).unwrap_or(10_000);
        std::time::Duration::from_millis(ms)
    })
}

/// The file a writer of some lanes takes the claim lock on. An OFD lock belongs to the
/// open file description, which a `fork` child shares with its parent: a child taking
/// the lock through it would succeed while the parent holds it, and its unlock would
/// drop the parent's lock in the middle of a claim (another writer process then claims
/// the same segment). So a fork child (which only reads: its refresh takes the lock) opens
/// a description of its own, and its lock excludes and waits like any other process's.
#[derive(Debug)]
struct Claims {
    file: File,
    born: Born,
    /// A fork child's own description of the file, and the process it was opened in.
    own: Mutex<Option<(Born, File)>>,
}

impl Claims {
    /// Run `f` on the description this process's claim lock is taken through.
    fn with_file<T>(&self, f: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
        if !self.born.is_fork() {
            return f(&self.file);
        }
        let mut own = self.own.lock().unwrap_or_else(|p| p.into_inner());
        if own.as_ref().is_none_or(|(born, _)| born.is_fork()) {
            // The same file (the link names it even if its path was removed), opened anew.
            let path = format!("/proc/self/fd/{}", self.file.as_raw_fd());
            let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
            *own = Some((Born::now(), file));
        }
        match own.as_ref() {
            Some((_, file)) => f(file),
            None => Err(io::Error::other("no description of the pool file")),
        }
    }
}

/// A helper thread filling the mapping's page tables (see [`MappedMedia::start_prefault`]).
#[derive(Debug)]
struct Prefault {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
    /// The process the thread runs in.
    pid: u32,
}

impl MappedMedia {
    /// Map the whole of `file` (opened with at least the access asked for) as media.
    /// `durability: None` picks [`Durability::default_for`] the backing; an explicit
    /// [`Durability::Dax`] is refused unless the file is a device-DAX device and the
    /// stores are non-temporal. `populate` pre-faults the mapping (`MAP_POPULATE`): the
    /// page faults are paid here rather than at the first store into each page.
    pub fn map(
        file: &File,
        path: &Path,
        access: Access,
        durability: Option<Durability>,
        populate: bool,
    ) -> Result<MappedMedia> {
        let (mut backing, len) = Backing::probe(file, path)?;
        let unsupported = |what: &str| Error::Unsupported { path: path.to_path_buf(), what: what.into() };
        if len == 0 {
            // Nothing to map: an empty file is no pool (mmap would refuse length 0).
            return Err(Error::Core { path: path.to_path_buf(), source: nvs_core::Error::NotFormatted });
        }
        let len = usize::try_from(len).map_err(|_| unsupported("too large to map"))?;
        let writable = access == Access::ReadWrite;
        let sparse = if !writable && holes_take_memory(backing, file) { SparseFile::of(file) } else { None };
        let synced = match backing {
            Backing::DiskFile => SyncMapping::map(file, len, writable, populate),
            _ => None,
        };
        let map = match synced {
            Some(m) => {
                backing = Backing::FsDax;
                Mapping::Sync(m)
            }
            None => {
                let mut opts = MmapOptions::new();
                opts.len(len);
                if populate {
                    opts.populate();
                }
                let map = if writable { opts.map_raw(file) } else { opts.map_raw_read_only(file) }
                    .map_err(|source| Error::Io { op: "map", path: path.to_path_buf(), source })?;
                Mapping::Shared(map)
            }
        };
        let durability = durability.unwrap_or(Durability::default_for(backing));
        durability.check(backing, path)?;
        let base = map.as_mut_ptr();
        if !(base as usize).is_multiple_of(64) {
            // mmap returns page-aligned addresses; refuse rather than trust it blindly.
            return Err(unsupported("the mapping is not 64-byte aligned"));
        }
        // SAFETY: Region::new's obligations, one by one:
        // - one mapping valid for `len` bytes: `map` maps exactly `len` bytes (either kind) and is stored
        //   next to the region in this struct, so it outlives every use of the region.
        //   For writes: a read-write mapping is writable; a read-only one is not, and no
        //   write ever reaches the region then, because every store method of this type
        //   checks `writable` first (module invariant);
        // - 64-byte aligned: mappings are page aligned (and checked just above);
        // - no one else writes the range: a writer holds the pool file's writer lock
        //   (FilePool), so the only other writer is another nvs writer while we read;
        // - no Rust reference to the range: neither kind of Mapping makes one, and nothing else in
        //   this crate touches the mapping.
        let region = unsafe { Region::new(base, len) };
        // A read-only mapping is a reader's: a writer in another process may be storing
        // to it meanwhile.
        let region = if writable { region } else { region.shared() };
        if durability == Durability::Dax && region.kind() != StoreKind::NonTemporal {
            return Err(unsupported("durability dax needs non-temporal stores, and this build uses portable stores"));
        }
        let media = MappedMedia {
            region,
            map,
            durability,
            backing,
            writable,
            sync: Mutex::new(SyncState { lo: usize::MAX, ..SyncState::default() }),
            sync_failed: AtomicBool::new(false),
            prefault: Mutex::new(None),
            claims: None,
            sparse,
            blocks: None,
        };
        media.check_room_to_open(path)?;
        Ok(media)
    }

    /// Open `path` read-only and map it whole, with no recovery and no check that it
    /// holds a pool: for reading a pool's bytes as they lie ([`nvs_core::walk::Walker`]:
    /// `nvs dump`, `nvs salvage`). Refuses what [`MappedMedia::map`] refuses (a
    /// directory, a FIFO, an empty file).
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<MappedMedia> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = path.as_ref();
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .map_err(|source| Error::Io { op: "open", path: path.to_path_buf(), source })?;
        // The mapping outlives the file descriptor.
        let media = MappedMedia::map(&file, path, Access::ReadOnly, None, false)?;
        // Its readers (the walker) read every unit of every segment.
        media.check_room_to_read_all(path)?;
        Ok(media)
    }

    /// Refuse a read-only open of a sparse file on a memory file system whose holes the
    /// open would read (the superblock, the lane area, each segment's header and the
    /// page where its units end) could take more than half of the memory free.
    fn check_room_to_open(&self, path: &Path) -> Result<()> {
        let Some(sparse) = &self.sparse else { return Ok(()) };
        const PAGE: u64 = 4096;
        const WHY: &str = "an open reads every segment header";
        let Ok(l) = nvs_core::read_layout(self) else {
            // The open stops at the superblock.
            return sparse.check(path, PAGE, WHY);
        };
        let segments = u64::from(l.segment_count);
        // The superblock and lane area before the segments, then two pages each.
        let head = l.pool_len.saturating_sub(segments.saturating_mul(l.segment_len));
        let window = l.segment_len.min(2 * PAGE);
        let read = head.saturating_add(segments.saturating_mul(window));
        if sparse.check(path, read, WHY).is_ok() || segments > SEGMENTS_COUNTED {
            return sparse.check(path, read, WHY);
        }
        // Too many to be sure from the counts alone: the holes those pages really have (a
        // sparse pool gives every segment header its page at create).
        let holes = (0..segments)
            .map(|i| head + i * l.segment_len)
            .fold(sparse.holes_in(0, head), |sum, at| sum.saturating_add(sparse.holes_in(at, at + window)));
        sparse.check(path, holes, WHY)
    }

    /// [`Self::check_room_to_read_all`] for reads of `ranges` only (a check reads the
    /// objects, not the free segments): the holes those ranges have must fit.
    pub(crate) fn check_room_to_read(&self, path: &Path, ranges: impl Iterator<Item = (u64, u64)>) -> Result<()> {
        let Some(sparse) = &self.sparse else { return Ok(()) };
        let holes = ranges.fold(0u64, |sum, (off, len)| sum.saturating_add(sparse.holes_in(off, off + len)));
        sparse.check(path, holes, "a check reads every object")
    }

    /// Refuse to read every unit of a read-only sparse file on a memory file system
    /// (`nvs check`, `dump`, `salvage`) if its holes could take more than half of the
    /// memory free. A get reads only its object's pages, which its buffer already holds.
    pub fn check_room_to_read_all(&self, path: &Path) -> Result<()> {
        const WHY: &str = "a check, dump or salvage reads every unit";
        let Some(sparse) = &self.sparse else { return Ok(()) };
        let estimate = sparse.check(path, u64::MAX, WHY);
        let Ok(l) = nvs_core::read_layout(self) else { return estimate };
        let segments = u64::from(l.segment_count);
        if estimate.is_ok() || segments > SEGMENTS_COUNTED {
            return estimate;
        }
        // The holes those reads really meet: each segment's first two pages, and the
        // whole of every segment (span) whose header line is not all zero (FORMAT.md: the
        // span is its sixth word). A sparse pool's holes are its free segments.
        const PAGE: u64 = 4096;
        let head = l.pool_len.saturating_sub(segments.saturating_mul(l.segment_len));
        let (mut holes, mut i) = (sparse.holes_in(0, head), 0u64);
        while i < segments {
            let at = head + i * l.segment_len;
            let first = self.load_word(at as usize);
            let span = if first != 0 { self.load_word(at as usize + 40).clamp(1, segments - i) } else { 1 };
            let end = if first != 0 { at + span * l.segment_len } else { at + l.segment_len.min(2 * PAGE) };
            holes = holes.saturating_add(sparse.holes_in(at, end));
            i += span;
        }
        sparse.check(path, holes, WHY)
    }

    /// Start a helper thread that fills the page tables of the mapping from its end
    /// backwards, 2 MiB at a time (`MADV_POPULATE_READ`), until [`Self::stop_prefault`].
    /// Recovery reads one unit header per unit from the front: on a fresh mapping nearly
    /// all of its time is page faults (each also maps the pages around it), and the two
    /// meet in the middle. Only for tmpfs files (no disk reads), and only over the
    /// file's data (`SEEK_DATA`/`SEEK_HOLE`: a read fault on a tmpfs hole would allocate
    /// the page). Best effort: a kernel without `MADV_POPULATE_READ` (before 5.14) or a
    /// failed call just ends the helper. Returns `false` if no helper was started.
    pub fn start_prefault(&self, file: &File) -> bool {
        if self.backing != Backing::Tmpfs {
            return false;
        }
        let ranges = data_ranges(file, self.region.len());
        let stop = Arc::new(AtomicBool::new(false));
        let base = self.map.as_mut_ptr() as usize;
        let flag = Arc::clone(&stop);
        let spawned = std::thread::Builder::new().name("nvs-prefault".into()).spawn(move || {
            const STEP: usize = 2 << 20;
            let page_mask = !(page_size() - 1);
            for (start, end) in ranges.into_iter().rev() {
                let mut hi = end;
                while hi > start && !flag.load(Ordering::Relaxed) {
                    let lo = hi.saturating_sub(STEP).max(start) & page_mask;
                    // SAFETY: `lo..hi` lies inside the mapping (the ranges are clipped to
                    // its length), which stays mapped until this thread is joined
                    // (`stop_prefault`, at the latest in `Drop`); populating page tables
                    // for reading changes no memory contents.
                    let r =
                        unsafe { libc::madvise((base + lo) as *mut libc::c_void, hi - lo, libc::MADV_POPULATE_READ) };
                    if r != 0 {
                        return;
                    }
                    hi = lo;
                }
            }
        });
        match spawned {
            Ok(handle) => {
                *self.prefault.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(Prefault { stop, handle, pid: std::process::id() });
                true
            }
            Err(_) => false,
        }
    }

    /// Stop the helper of [`Self::start_prefault`], if any, and wait for it (it finishes
    /// the 2 MiB step it is in).
    pub fn stop_prefault(&self) {
        let helper = self.prefault.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(p) = helper {
            p.stop.store(true, Ordering::Relaxed);
            // In a `fork` child the helper thread does not exist: joining it would wait
            // for ever.
            if std::process::id() == p.pid {
                let _ = p.handle.join();
            }
        }
    }

    /// A writer of a pool file with holes: give each segment its blocks when it is
    /// claimed ([`Media::reserve`], `fallocate`), and the ones a writer goes on storing
    /// into at the open, so a file system with no space left refuses the put that needs
    /// them ([`nvs_core::Error::NoSpace`]) instead of a store into a hole raising SIGBUS.
    pub(crate) fn allocate_as_claimed(&mut self, file: File) {
        self.blocks = Some(Blocks { file: Arc::new(file), ahead: Mutex::new(None) });
    }

    /// Allocate `off..off + len` (inside the mapping) and, on tmpfs, map its pages in one
    /// call rather than a fault each at the first store (`MADV_POPULATE_WRITE`; best
    /// effort: a kernel before 5.14 faults them as before).
    fn prepare(file: &File, tmpfs: bool, base: usize, off: usize, len: usize) -> std::io::Result<()> {
        allocate_range(file, off as u64, len as u64)?;
        if tmpfs {
            // SAFETY: the caller keeps `off..off + len` inside the mapping at `base`, and
            // the mapping alive during the call; populating page tables for writing
            // changes no byte (the pages have their blocks: nothing can fail to allocate).
            unsafe { libc::madvise((base + off) as *mut libc::c_void, len, libc::MADV_POPULATE_WRITE) };
        }
        Ok(())
    }

    /// Wait for the helper of [`Blocks::ahead`], if any (not in a `fork` child, where it
    /// does not exist).
    fn join_ahead(&self) {
        let Some(blocks) = &self.blocks else { return };
        if let Some(a) = blocks.ahead.lock().unwrap_or_else(|p| p.into_inner()).take() {
            if std::process::id() == a.pid {
                let _ = a.handle.join();
            }
        }
    }

    /// A writer of some lanes of a pool other processes write too: take the pool file's
    /// claim lock in [`Media::lock_claims`], and read as a reader does ([`Region::shared`]):
    /// the other lanes' writer processes store to this memory while this one reads it.
    pub(crate) fn share_with_writers(&mut self, file: File) {
        self.claims = Some(Claims { file, born: Born::now(), own: Mutex::new(None) });
        self.region.set_shared();
    }

    /// The durability mode in use.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// What the mapping is of.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// The store instructions in use (non-temporal on x86_64, portable elsewhere).
    pub fn store_kind(&self) -> StoreKind {
        self.region.kind()
    }

    /// `true` if mapped read-write.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Make the next msync that has dirty pages to write fail with EIO, as a failing
    /// disk would (for tests of the durability latch; msync mode only).
    #[doc(hidden)]
    pub fn fail_next_sync(&self) {
        self.lock().fail_next = true;
    }

    /// The first msync failure, if any: once set, it stays (see [`Error::Sync`]).
    pub fn sync_error(&self) -> Option<io::Error> {
        if !self.sync_failed.load(Ordering::Acquire) {
            return None;
        }
        self.lock().failed.as_ref().map(|(kind, msg)| io::Error::new(*kind, msg.clone()))
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        // The state stays consistent even if a thread panicked while holding the lock
        // (every update is a plain field write), so a poisoned lock is still usable.
        self.sync.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuse a store on a read-only mapping before it reaches the region.
    #[inline]
    fn writing(&self) {
        assert!(self.writable, "nvs bug: store to a read-only pool mapping");
    }

    /// Remember `off..off + len` for the next fence's msync (msync mode only).
    #[inline]
    fn dirtied(&self, off: usize, len: usize) {
        if self.durability == Durability::Msync && len > 0 {
            let mut s = self.lock();
            s.lo = s.lo.min(off);
            s.hi = s.hi.max(off + len);
        }
    }
}

impl Drop for MappedMedia {
    fn drop(&mut self) {
        // The helpers must be gone before the mapping is (fields drop after this).
        self.stop_prefault();
        self.join_ahead();
    }
}

/// A reader of a sparse file on tmpfs or ramfs (or an overlay, which may lie on
/// either) gets a page of memory for every page of a hole it reads (a read fault on a
/// hole of a shared mapping allocates it), and reading a pool reads some of its holes:
/// an open every segment header, a check every unit, a get its object's pages. A file
/// whose holes read could take more than half of the memory free (a forged superblock
/// of 2^24 segments on a file of 1 MiB: 64 GiB) would get its reader killed: refused,
/// before those holes are read. When the file's holes alone are too many, the holes the
/// reads would really meet are counted (`SEEK_DATA`/`SEEK_HOLE`, for pools of up to 2^16
/// segments): a sparse pool's holes are its free segments, which no read touches, so it
/// opens, gets, checks and walks on a full file system. Copies made sparse, and pools a
/// VM formats through a file (the unikernel's), read as before when they fit. (Holes are the file's length less its
/// blocks: blocks allocated past its end, `fallocate --keep-size`, hide as many holes,
/// bounded by the memory they take themselves.)
#[derive(Debug)]
struct SparseFile {
    len: u64,
    holes: u64,
    /// The memory free when it was mapped.
    free: u64,
    /// The file, to find where its holes are.
    file: Option<File>,
}

impl SparseFile {
    /// `None` for a file with no holes.
    fn of(file: &File) -> Option<SparseFile> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata().ok()?;
        let holes = meta.len().saturating_sub(meta.blocks().saturating_mul(512));
        (holes > 0).then(|| SparseFile { len: meta.len(), holes, free: free_memory(file), file: file.try_clone().ok() })
    }

    /// Bytes of holes in `off..end` (`SEEK_DATA`/`SEEK_HOLE`); all of it if the file
    /// system cannot say.
    fn holes_in(&self, off: u64, end: u64) -> u64 {
        let Some(file) = &self.file else { return end.saturating_sub(off) };
        let fd = file.as_raw_fd();
        let (mut at, mut holes) = (off, 0u64);
        while at < end {
            // SAFETY: lseek on an open descriptor; it only moves a file offset no one
            // uses (every other access is by mapping or positional I/O).
            let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                // ENXIO: no data after `at`; anything else: cannot say.
                return holes + (end - at);
            }
            let data = data as u64;
            if data >= end {
                return holes + (end - at);
            }
            holes += data - at;
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data as libc::off_t, libc::SEEK_HOLE) };
            if hole < 0 {
                return holes;
            }
            at = (hole as u64).max(data + 1);
        }
        holes
    }

    /// Refuse reading up to `read` bytes of the file (`why`) if they could be holes
    /// taking more than half of the memory free.
    fn check(&self, path: &Path, read: u64, why: &str) -> Result<()> {
        let need = self.holes.min(read);
        if need <= self.free / 2 {
            return Ok(());
        }
        Err(Error::Unsupported {
            path: path.to_path_buf(),
            what: format!(
                "a sparse pool file on tmpfs, ramfs or an overlay: {} of its {} are holes, and reading a hole \
                 there takes a page of memory for each page read ({why}): up to {}, more than half of the {} \
                 free; give the file its blocks first (fallocate -x -l {} FILE) if it is a pool",
                show_size(self.holes, true),
                show_size(self.len, false),
                show_size(need, true),
                show_size(self.free, false),
                self.len
            ),
        })
    }
}

/// `bytes` for a message: KiB, MiB or GiB, one decimal, rounded `up` or down (so that a
/// size shown over a limit shown is over it).
fn show_size(bytes: u64, up: bool) -> String {
    let (unit, div) = match bytes {
        b if b >= 1 << 30 => ("GiB", 1u64 << 30),
        b if b >= 1 << 20 => ("MiB", 1 << 20),
        _ => ("KiB", 1 << 10),
    };
    let tenths = bytes as f64 * 10.0 / div as f64;
    let tenths = if up { tenths.ceil() } else { tenths.floor() };
    format!("{:.1} {unit}", tenths / 10.0)
}

/// The bytes a file on a memory file system can still grow by: what its file system has
/// free, no more than the memory available (`MemAvailable`) nor what this process's
/// memory cgroups allow beside what they use. Unknown parts count as unlimited.
fn free_memory(file: &File) -> u64 {
    // SAFETY: a plain C struct of integers, for which all zeroes is a value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatvfs writes the struct it is given, on a descriptor `file` keeps open.
    let fs = match unsafe { libc::fstatvfs(file.as_raw_fd(), &mut st) } {
        // ramfs reports no blocks at all: no limit of its own.
        0 if st.f_blocks > 0 => (st.f_bavail as u64).saturating_mul(st.f_frsize as u64),
        _ => u64::MAX,
    };
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(u64::MAX, |kib| kib.saturating_mul(1024));
    fs.min(mem).min(cgroup_free())
}

/// The least room left (limit minus usage) of this process's memory cgroup and its
/// ancestors: cgroup v2 (`memory.max`, `memory.current`) and v1's memory controller
/// (`memory.limit_in_bytes`, `memory.usage_in_bytes`); `u64::MAX` where none is set.
fn cgroup_free() -> u64 {
    let Ok(cg) = std::fs::read_to_string("/proc/self/cgroup") else { return u64::MAX };
    let mut free = u64::MAX;
    for line in cg.lines() {
        let mut f = line.splitn(3, ':');
        let (controllers, rel) = match (f.next(), f.next(), f.next()) {
            (Some(_), Some(c), Some(rel)) => (c, rel),
            _ => continue,
        };
        let (root, limit, usage) = match controllers {
            "" => ("/sys/fs/cgroup", "memory.max", "memory.current"),
            c if c.split(',').any(|c| c == "memory") => {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")
            }
            _ => continue,
        };
        free = free.min(cgroup_room(Path::new(root), rel, limit, usage));
    }
    free
}

/// `limit - usage` at `root/rel` and each directory above it up to `root`, the least;
/// a limit that does not parse ("max") or is absent counts as none.
fn cgroup_room(root: &Path, rel: &str, limit: &str, usage: &str) -> u64 {
    let read = |dir: &Path, f: &str| std::fs::read_to_string(dir.join(f)).ok()?.trim().parse::<u64>().ok();
    let mut free = u64::MAX;
    let mut dir = root.join(rel.trim_start_matches('/'));
    loop {
        if let (Some(max), Some(cur)) = (read(&dir, limit), read(&dir, usage)) {
            free = free.min(max.saturating_sub(cur));
        }
        if dir == root || !dir.starts_with(root) || !dir.pop() {
            return free;
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|p| p.is_power_of_two()).unwrap_or(4096)
}

/// The byte ranges of `file` holding data (not holes), clipped to `len`, in order; the
/// whole `0..len` if the file system cannot say. A file with as many blocks as bytes
/// has no holes: asked first, as `SEEK_HOLE` on tmpfs walks the file page by page.
/// Give `off..off + len` of `file` its blocks (`posix_fallocate`; the file's length
/// stays). A file system that cannot reserve space (no `fallocate`) is left as it is,
/// as at create.
pub(crate) fn allocate_range(file: &File, off: u64, len: u64) -> std::io::Result<()> {
    let bad = |_| std::io::Error::from(std::io::ErrorKind::InvalidInput);
    let (off, len) = (libc::off_t::try_from(off).map_err(bad)?, libc::off_t::try_from(len).map_err(bad)?);
    if len == 0 {
        return Ok(());
    }
    loop {
        // SAFETY: plain system call on a descriptor that `file` keeps open during the call.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), off, len) };
        return match rc {
            0 | libc::EOPNOTSUPP | libc::ENOSYS => Ok(()),
            // A signal (a profiler's timer, say) interrupted it: what it allocated stays,
            // and it starts again where the range has holes.
            libc::EINTR => continue,
            e => Err(std::io::Error::from_raw_os_error(e)),
        };
    }
}

/// Whether `off..end` of `file` has a hole (`SEEK_HOLE`; `false` if the file system
/// cannot say).
fn has_hole(file: &File, off: usize, end: usize) -> bool {
    // SAFETY: lseek on an open descriptor; it only moves a file offset we do not use
    // (every other access to this file is by mapping or positional I/O).
    let hole = unsafe { libc::lseek(file.as_raw_fd(), off as libc::off_t, libc::SEEK_HOLE) };
    hole >= 0 && (hole as usize) < end
}

fn data_ranges(file: &File, len: usize) -> Vec<(usize, usize)> {
    use std::os::unix::fs::MetadataExt;
    if file.metadata().is_ok_and(|m| m.blocks().saturating_mul(512) >= m.len()) {
        return vec![(0, len)];
    }
    let fd = file.as_raw_fd();
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < len {
        // SAFETY: lseek on an open descriptor; it only moves a file offset we do not use
        // (every other access to this file is by mapping or positional I/O).
        let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
        if data < 0 {
            if out.is_empty() && io::Error::last_os_error().raw_os_error() != Some(libc::ENXIO) {
                return vec![(0, len)];
            }
            break;
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(fd, data, libc::SEEK_HOLE) };
        let (data, hole) = (data as usize, if hole < 0 { len } else { (hole as usize).min(len) });
        if data >= len || hole <= data {
            break;
        }
        out.push((data, hole));
        at = hole;
    }
    out
}

impl Media for MappedMedia {
    #[inline]
    fn len(&self) -> usize {
        self.region.len()
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        self.region.read(off, dst)
    }

    #[inline]
    fn load_word(&self, off: usize) -> u64 {
        self.region.load_word(off)
    }

    #[inline]
    fn store_nt(&self, off: usize, src: &[u8]) {
        self.writing();
        self.region.store_nt(off, src);
        self.dirtied(off, src.len().next_multiple_of(8));
    }

    #[inline]
    fn store_nt_summed(&self, off: usize, src: &[u8], sum: &mut Sum) {
        self.writing();
        self.region.store_nt_summed(off, src, sum);
        self.dirtied(off, src.len().next_multiple_of(8));
    }

    fn read_summed(&self, off: usize, dst: &mut [u8], sum: &mut Sum) {
        self.region.read_summed(off, dst, sum)
    }

    #[inline]
    fn store_word_nt(&self, off: usize, word: u64) {
        self.writing();
        self.region.store_word_nt(off, word);
        self.dirtied(off, 8);
    }

    #[inline]
    fn store_line_nt(&self, off: usize, words: [u64; 8]) {
        self.writing();
        self.region.store_line_nt(off, words);
        self.dirtied(off, 64);
    }

    #[inline]
    fn store_commit_line(&self, off: usize, line: &[u8; 64]) {
        self.writing();
        self.region.store_commit_line(off, line);
        self.dirtied(off, 64);
    }

    fn store(&self, off: usize, src: &[u8]) {
        self.writing();
        self.region.store(off, src);
        self.dirtied(off, src.len());
    }

    fn flush(&self, off: usize, len: usize) {
        self.writing();
        self.region.flush(off, len);
        self.dirtied(off, len);
    }

    fn reserve(&self, off: usize, len: usize) -> nvs_core::Result<()> {
        let Some(blocks) = &self.blocks else { return Ok(()) };
        let end = off.checked_add(len).filter(|&e| e <= self.region.len()).ok_or(nvs_core::Error::NoSpace)?;
        let tmpfs = self.backing == Backing::Tmpfs;
        let base = self.map.as_mut_ptr() as usize;
        let new_ground = tmpfs && has_hole(&blocks.file, off, end);
        // The helper, if it is still preparing this range, is waited for by the kernel
        // (the same pages): nothing here waits for it.
        if MappedMedia::prepare(&blocks.file, tmpfs, base, off, len).is_err() {
            return Err(nvs_core::Error::NoSpace);
        }
        // A lane claiming new ground (holes: not a writer's open, not a reused segment)
        // most often claims the segments right after next: a helper allocates and maps
        // them now, while the caller stores into these (on tmpfs, where both cost a page
        // each). Best effort; at most one helper at a time, joined before the mapping
        // goes. A guess that misses (another lane claims them) costs their blocks early,
        // no more.
        let next = len.min(self.region.len() - end);
        let mut ahead = blocks.ahead.lock().unwrap_or_else(|p| p.into_inner());
        let idle = ahead.as_ref().is_none_or(|a| a.handle.is_finished());
        if new_ground && len >= AHEAD_MIN && next > 0 && idle {
            if let Some(a) = ahead.take() {
                let _ = a.handle.join();
            }
            let file = Arc::clone(&blocks.file);
            let spawned = std::thread::Builder::new()
                .name("nvs-reserve".into())
                .spawn(move || drop(MappedMedia::prepare(&file, true, base, end, next)));
            if let Ok(handle) = spawned {
                *ahead = Some(Ahead { handle, pid: std::process::id() });
            }
        }
        Ok(())
    }

    fn lock_claims(&self) -> nvs_core::Result<()> {
        let Some(c) = &self.claims else { return Ok(()) };
        // A writer that cannot exclude the others' claims must not claim: a collision
        // would lose committed objects. (The kernel refuses only when out of lock records;
        // a fork child, when it cannot open the file again.) A holder that died has let
        // go; one stopped is waited for CLAIM_WAIT, then the operation fails unchanged.
        let start = std::time::Instant::now();
        let limit = claim_wait();
        let mut pause = std::time::Duration::from_micros(20);
        loop {
            match c.with_file(|f| crate::locks::try_lock(f, crate::locks::CLAIMS, 1)) {
                Ok(true) => return Ok(()),
                Ok(false) if start.elapsed() < limit => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(2));
                }
                Ok(false) => {
                    let holder_pid = c.with_file(|f| Ok(crate::locks::holder(f, crate::locks::CLAIMS))).unwrap_or(0);
                    let waited_ms = start.elapsed().as_millis() as u64;
                    return Err(nvs_core::Error::ClaimLockTimeout { waited_ms, holder_pid });
                }
                Err(e) => panic!("nvs: cannot take the pool's claim lock: {e}"),
            }
        }
    }

    fn unlock_claims(&self) {
        if let Some(c) = &self.claims {
            // Unlocking a lock this description holds does not fail; if it did, the
            // lock goes when the file is closed.
            let _ = c.with_file(|f| crate::locks::unlock(f, crate::locks::CLAIMS, 1));
        }
    }

    #[inline]
    fn prefetch(&self, off: usize, len: usize) {
        self.region.prefetch(off, len)
    }

    unsafe fn borrow(&self, off: usize, len: usize) -> Option<&[u8]> {
        // SAFETY: the caller's contract, passed on to the region over this mapping.
        unsafe { self.region.borrow(off, len) }
    }

    #[inline]
    fn fence(&self) {
        // The sfence first: the NT stores must have left the write-combining buffers and
        // reached the page cache before the kernel writes those pages back.
        self.region.fence();
        if self.durability != Durability::Msync {
            return;
        }
        // Hold the lock through the msync: a fence that finds nothing to sync must not
        // return while another thread's msync of its stores is still running.
        let mut s = self.lock();
        if s.lo < s.hi {
            let (lo, hi) = (s.lo, s.hi);
            s.lo = usize::MAX;
            s.hi = 0;
            // The start is rounded down to a page; `hi` is inside the mapping.
            let injected = std::mem::take(&mut s.fail_next).then(|| io::Error::from_raw_os_error(libc::EIO));
            if let Some(e) = injected.map_or_else(|| self.map.flush_range(lo, hi - lo).err(), Some) {
                if s.failed.is_none() {
                    s.failed = Some((e.kind(), e.to_string()));
                    self.sync_failed.store(true, Ordering::Release);
                }
            }
        }
    }

    /// In `msync` mode a fence's msync can fail (an I/O error, a full or vanished disk).
    fn fence_may_fail(&self) -> bool {
        self.durability == Durability::Msync
    }

    /// The msync latch: set by the first failed msync, and for good.
    fn fence_failed(&self) -> bool {
        self.sync_failed.load(Ordering::Acquire)
    }
}

/// The mapping of a pool: memmap2's, or a `MAP_SYNC` one on a DAX file system.
#[derive(Debug)]
enum Mapping {
    Shared(MmapRaw),
    Sync(SyncMapping),
}

impl Mapping {
    fn as_mut_ptr(&self) -> *mut u8 {
        match self {
            Mapping::Shared(m) => m.as_mut_ptr(),
            Mapping::Sync(m) => m.ptr,
        }
    }

    /// `msync(MS_SYNC)` of `off..off + len` (the start rounded down to a page).
    fn flush_range(&self, off: usize, len: usize) -> io::Result<()> {
        match self {
            Mapping::Shared(m) => m.flush_range(off, len),
            Mapping::Sync(m) => {
                let start = off & !(page_size() - 1);
                // SAFETY: `start..off + len` lies inside the mapping, which lives as long
                // as `m`; msync changes no memory contents.
                let rc = unsafe { libc::msync(m.ptr.add(start).cast(), off + len - start, libc::MS_SYNC) };
                if rc == 0 {
                    Ok(())
                } else {
                    Err(io::Error::last_os_error())
                }
            }
        }
    }
}

/// A `MAP_SHARED_VALIDATE | MAP_SYNC` mapping of a whole file, unmapped on drop. The
/// kernel grants it only for a file on a DAX file system (ext4 or xfs mounted `-o dax`)
/// whose device is synchronous: there a write fault returns only once the file system's
/// metadata for the page (its block) is durable, so the file's bytes are persistent
/// memory as a device-DAX's are.
#[derive(Debug)]
struct SyncMapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared by every thread of the process; the pointer
// is only used through `Region`, which does its own synchronisation, and for munmap.
unsafe impl Send for SyncMapping {}
// SAFETY: as for Send: `&SyncMapping` only hands out the pointer.
unsafe impl Sync for SyncMapping {}

impl SyncMapping {
    /// Map `len` bytes of `file` with `MAP_SYNC`, or `None` where the kernel refuses
    /// (not a DAX file system, a kernel before 4.15, any other failure: the caller then
    /// maps the file as any other and reports that error if there is one).
    #[cfg(target_os = "linux")]
    fn map(file: &File, len: usize, writable: bool, populate: bool) -> Option<SyncMapping> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        let mut flags = libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC;
        if populate {
            flags |= libc::MAP_POPULATE;
        }
        // SAFETY: a new mapping at an address the kernel picks, of a descriptor `file`
        // keeps open during the call; nothing else is touched.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, file.as_raw_fd(), 0) };
        (ptr != libc::MAP_FAILED).then(|| SyncMapping { ptr: ptr.cast(), len })
    }

    #[cfg(not(target_os = "linux"))]
    fn map(_file: &File, _len: usize, _writable: bool, _populate: bool) -> Option<SyncMapping> {
        None
    }
}

impl Drop for SyncMapping {
    fn drop(&mut self) {
        // SAFETY: exactly the range mmap returned; no pointer into it outlives the media
        // (the region goes with it).
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn sizes_read_as_they_are() {
        assert_eq!(show_size(156 << 20, true), "156.0 MiB");
        assert_eq!(show_size(64 << 30, false), "64.0 GiB");
        assert_eq!(show_size(1536, true), "1.5 KiB");
        // Just over half of 254 MiB reads as over it.
        let half = 127u64 << 20;
        assert_eq!((show_size(half + 1, true), show_size(2 * half, false)), ("127.1 MiB".into(), "254.0 MiB".into()));
        assert_eq!(show_size((1 << 20) - 1, false), "1023.9 KiB");
        assert!(free_memory(&File::open("/proc/self/exe").unwrap()) > 0);
    }

    #[test]
    fn cgroup_room_is_the_least_left_up_the_hierarchy() {
        let dir = tempfile::tempdir().unwrap();
        let (root, leaf) = (dir.path(), dir.path().join("a/b"));
        std::fs::create_dir_all(&leaf).unwrap();
        let set = |d: &Path, limit: &str, usage: &str| {
            std::fs::write(d.join("memory.max"), limit).unwrap();
            std::fs::write(d.join("memory.current"), usage).unwrap();
        };
        set(&leaf, "max\n", "5\n");
        assert_eq!(cgroup_room(root, "/a/b", "memory.max", "memory.current"), u64::MAX, "no limit anywhere");
        set(&root.join("a"), "1000\n", "400\n");
        assert_eq!(cgroup_room(root, "/a/b", "memory.max", "memory.current"), 600, "a parent's limit counts");
        set(&leaf, "500\n", "450\n");
        assert_eq!(cgroup_room(root, "/a/b", "memory.max", "memory.current"), 50, "the least of them");
        assert!(cgroup_free() > 0);
    }

    fn shm_file(tag: &str) -> Option<(std::path::PathBuf, File)> {
        let dir = Path::new("/dev/shm");
        if !dir.is_dir() {
            return None;
        }
        let path = dir.join(format!("nvs-media-test-{tag}-{}", std::process::id()));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).ok()?;
        Some((path, f))
    }

    #[test]
    fn data_ranges_skip_holes_and_fall_back_to_everything() {
        let Some((path, f)) = shm_file("ranges") else { return };
        let mb = 1usize << 20;
        f.set_len(8 * mb as u64).unwrap();
        // Data at 1 MiB..2 MiB and 5 MiB..5 MiB + 4 KiB; holes elsewhere.
        use std::os::unix::fs::FileExt;
        f.write_all_at(&vec![1u8; mb], mb as u64).unwrap();
        f.write_all_at(&[2u8; 4096], 5 * mb as u64).unwrap();
        let r = data_ranges(&f, 8 * mb);
        assert_eq!(r, vec![(mb, 2 * mb), (5 * mb, 5 * mb + 4096)]);
        // Clipped to the length asked for.
        assert_eq!(data_ranges(&f, mb + 100), vec![(mb, mb + 100)]);
        // A file without holes is one range, without walking it.
        let (p2, mut g) = shm_file("full").unwrap();
        g.write_all(&vec![3u8; 3 * mb]).unwrap();
        assert_eq!(data_ranges(&g, 3 * mb), vec![(0, 3 * mb)]);
        for p in [path, p2] {
            std::fs::remove_file(p).unwrap();
        }
    }

    #[test]
    fn prefault_helper_leaves_the_contents_alone_and_stops() {
        let Some((path, mut f)) = shm_file("prefault") else { return };
        let bytes: Vec<u8> = (0..(6usize << 20)).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&bytes).unwrap();
        let m = MappedMedia::map(&f, &path, Access::ReadOnly, None, false).unwrap();
        assert!(m.start_prefault(&f), "tmpfs file: a helper starts");
        m.stop_prefault();
        m.stop_prefault(); // twice is fine
        let mut back = vec![0u8; bytes.len()];
        m.read(0, &mut back);
        assert!(back == bytes);
        // Dropped with a helper running: the helper is joined before the unmap.
        let m2 = MappedMedia::map(&f, &path, Access::ReadOnly, None, false).unwrap();
        assert!(m2.start_prefault(&f));
        drop(m2);
        std::fs::remove_file(path).unwrap();
    }
}
