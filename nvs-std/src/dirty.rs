//! OS page-dirty tracking for delta puts: [`TrackedBuf`] is page-aligned anonymous
//! memory whose writes the kernel tracks, so a simulation writes its arrays normally and
//! [`TrackedBuf::take_dirty`] tells which byte ranges (whole pages) changed since the
//! previous take; those are the ranges a delta put stores.
//!
//! Two ways of tracking ([`TrackerKind`]):
//!
//! - [`TrackerKind::UffdWpAsync`] (Linux >= 6.7): the range is registered with a
//!   userfaultfd in write-protect mode with `UFFD_FEATURE_WP_ASYNC`. The first write to a
//!   protected page is resolved by the kernel itself (no handler thread, no signal): it
//!   un-protects the page and thereby marks it "written". `take_dirty` asks the
//!   `PAGEMAP_SCAN` ioctl of `/proc/self/pagemap` for the written pages and, in the same
//!   call, write-protects them again (`PM_SCAN_WP_MATCHING`), page by page under the page
//!   table lock, so no write can fall between the report and the re-arm.
//! - [`TrackerKind::Mprotect`] (the NVStream paper's way, any Linux): `take_dirty`
//!   `mprotect`s the dirty pages read-only; the first write to one raises `SIGSEGV`, and a
//!   process-wide handler sets the page's bit in the buffer's atomic bitmap and makes the
//!   page writable again. The handler finds the buffer in a fixed registry of
//!   [`MPROTECT_CAPACITY`] slots using atomics only (see "Signal safety" below).
//!
//! Both kinds start *unarmed*: writes before the first `take_dirty` cost nothing (that
//! is where a simulation initialises its arrays), and the first take reports the whole
//! buffer and arms tracking.
//!
//! **Granularity.** The base page (4 KiB on x86_64). Transparent huge pages are turned
//! off for the buffer (`MADV_NOHUGEPAGE`), so a one-byte write dirties 4 KiB, not 2 MiB.
//! Ranges are page-aligned; the last one is clipped to [`TrackedBuf::len`].
//!
//! **Writes by the kernel.** Only user-space writes through `DerefMut` (in any thread of
//! this process) are meant. In `Mprotect` mode a kernel write into a protected page (for
//! example `read(2)` into the buffer) is *not* handled: the syscall fails with `EFAULT`
//! (the kernel does not raise `SIGSEGV` for its own copies). Read into another buffer and
//! copy, or write one byte of each target page first. In `UffdWpAsync` mode kernel writes
//! are resolved like user writes and reported as dirty (tested).
//!
//! **Fork.** A child process inherits no userfaultfd registration, and the parent's
//! pagemap descriptor names the parent's address space: in a `fork` child a buffer the
//! parent made reports all of itself dirty and leaves the parent's tracking alone (the
//! child cannot write the parent's pool anyway); buffers a child makes are its own.
//!
//! **Signal safety (Mprotect).** The `SIGSEGV` handler runs at an arbitrary point of the
//! faulting thread, which may hold the allocator's or any other lock. It therefore only:
//! loads/stores/read-modify-writes lock-free atomics (plain `lock`-prefixed instructions
//! on x86_64, no syscalls, no locks); calls `mprotect` through `syscall(2)` (a raw kernel
//! entry: no lock, no allocation, it only sets `errno`, which the handler saves and
//! restores); and, on the chaining or fatal paths, `rt_sigprocmask` (raw, like
//! `mprotect`), `sigaction`, `raise`, `write` and `abort`, which POSIX lists as
//! async-signal-safe. It never allocates, formats or locks.
//! A slot's bitmap is freed only after the slot is deactivated and no handler is inside it
//! (a per-slot count of handlers, checked with sequentially consistent atomics).
//!
//! **Mprotect limits.** Faults not on a tracked page go to the `SIGSEGV` disposition that
//! was in place when the handler was installed; a handler installed *later* by someone
//! else must chain to ours, or mprotect tracking stops working. Every dirty run splits the
//! buffer's VMA; if the kernel refuses a split (`vm.max_map_count`), the handler makes the
//! whole buffer writable and the next take reports all of it.

use std::fmt;
use std::io;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::fork::Born;

/// How a [`TrackedBuf`] learns which pages were written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrackerKind {
    /// userfaultfd write-protect in async mode + `PAGEMAP_SCAN` (Linux >= 6.7).
    UffdWpAsync,
    /// `mprotect` + a `SIGSEGV` handler (any Linux).
    Mprotect,
}

impl fmt::Display for TrackerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TrackerKind::UffdWpAsync => "uffd-wp",
            TrackerKind::Mprotect => "mprotect",
        })
    }
}

/// How many `Mprotect` buffers can be tracked at once in one process (CM1 registers 94
/// objects, miniAMR thousands per rank). The fault handler looks only at the slots up to
/// the highest one ever used.
pub const MPROTECT_CAPACITY: usize = 16384;

// ---------------------------------------------------------------------------------------
// Kernel ABI (include/uapi/linux/userfaultfd.h and include/uapi/linux/fs.h). The libc
// crate has only SYS_userfaultfd, so the rest is spelled out here; the ioctl numbers are
// checked below against the values the C headers give (_IOWR/_IOR of these structs).
// ---------------------------------------------------------------------------------------

const UFFD_USER_MODE_ONLY: libc::c_int = 1;
const UFFD_API: u64 = 0xAA;
const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
const _UFFDIO_WRITEPROTECT: u64 = 0x06;

const PAGE_IS_WRITTEN: u64 = 1 << 1;
const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;

#[repr(C)]
#[derive(Default)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Default)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

/// `struct page_region`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct PageRegion {
    start: u64,
    end: u64,
    categories: u64,
}

/// `struct pm_scan_arg`.
#[repr(C)]
#[derive(Default)]
struct PmScanArg {
    size: u64,
    flags: u64,
    start: u64,
    end: u64,
    walk_end: u64,
    vec: u64,
    vec_len: u64,
    max_pages: u64,
    category_inverted: u64,
    category_mask: u64,
    category_anyof_mask: u64,
    return_mask: u64,
}

const fn ioc(dir: u64, ty: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (ty << 8) | nr
}
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;
const UFFDIO_API: u64 = ioc(IOC_READ | IOC_WRITE, 0xAA, 0x3F, size_of::<UffdioApi>());
const UFFDIO_REGISTER: u64 = ioc(IOC_READ | IOC_WRITE, 0xAA, 0x00, size_of::<UffdioRegister>());
const UFFDIO_WRITEPROTECT: u64 = ioc(IOC_READ | IOC_WRITE, 0xAA, _UFFDIO_WRITEPROTECT, size_of::<UffdioWriteprotect>());
const PAGEMAP_SCAN: u64 = ioc(IOC_READ | IOC_WRITE, b'f' as u64, 16, size_of::<PmScanArg>());

// The values a C program prints for these macros with the uapi headers (6.1 headers for
// the userfaultfd ones; PAGEMAP_SCAN from the 6.7 fs.h layout: twelve __u64).
const _: () = assert!(UFFDIO_API == 0xc018_aa3f);
const _: () = assert!(UFFDIO_REGISTER == 0xc020_aa00);
const _: () = assert!(UFFDIO_WRITEPROTECT == 0xc018_aa06);
const _: () = assert!(PAGEMAP_SCAN == 0xc060_6610);
const _: () = assert!(size_of::<PageRegion>() == 24 && size_of::<PmScanArg>() == 96);

// ---------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------

static PAGE_SIZE: AtomicUsize = AtomicUsize::new(0);

fn page_size() -> usize {
    let ps = PAGE_SIZE.load(Ordering::Relaxed);
    if ps != 0 {
        return ps;
    }
    // SAFETY: sysconf has no memory-safety preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let ps = if ps > 0 { ps as usize } else { 4096 };
    PAGE_SIZE.store(ps, Ordering::Relaxed);
    ps
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// An error naming the call that failed and its errno.
fn os_err(what: &str, errno: i32) -> io::Error {
    let e = io::Error::from_raw_os_error(errno);
    io::Error::new(e.kind(), format!("{what} failed: {e} ({})", errno_name(errno)))
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EINTR => "EINTR",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENOTTY => "ENOTTY",
        libc::ENOSPC => "ENOSPC",
        libc::ENOSYS => "ENOSYS",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "errno",
    }
}

/// A mapping of `map_len` read-write bytes between two pages of padding. The padding
/// keeps the buffer's VMAs from merging with neighbouring mappings (the buffer's pages
/// are `MADV_NOHUGEPAGE`, the padding's not), so making the whole buffer writable never
/// has to split a VMA outside it (see the Mprotect overflow path). The padding is plain
/// memory, untracked: a read or write a little before or after the buffer — a Fortran
/// port's off-by-one, harmless on `malloc`'d memory — lands there, as it did in NVStream,
/// where it died of SIGSEGV when the pages were `PROT_NONE` guards (GTC's `chargei`
/// writes `zonali(0)`, 4 bytes before the array).
struct Mapping {
    base: NonNull<u8>,
    map_len: usize,
}

impl Mapping {
    fn new(map_len: usize) -> io::Result<Mapping> {
        let ps = page_size();
        let total = map_len + 2 * ps;
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                ptr::null_mut(),
                total,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap", errno()));
        }
        let outer = p as *mut u8;
        // SAFETY: the interior lies inside the mapping just made, which nothing else
        // references yet. Advice only: failing it (no THP support) costs a VMA merge with
        // the padding, inside this mapping.
        unsafe { libc::madvise(outer.add(ps).cast(), map_len, libc::MADV_NOHUGEPAGE) };
        // SAFETY: mmap returned a non-null pointer; the interior starts one page in.
        Ok(Mapping { base: unsafe { NonNull::new_unchecked(outer.add(ps)) }, map_len })
    }

    fn addr(&self) -> usize {
        self.base.as_ptr() as usize
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let ps = page_size();
        // SAFETY: unmaps exactly the mapping made in `new` (padding included); the buffer's
        // owner is being dropped, so no reference into it remains.
        unsafe { libc::munmap(self.base.as_ptr().sub(ps).cast(), self.map_len + 2 * ps) };
    }
}

/// Append `[start, end)` to `out`, merging with the last range when they touch.
fn push_range(out: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    if end <= start {
        return;
    }
    if let Some(last) = out.last_mut() {
        if last.0 + last.1 == start {
            last.1 = end - last.0;
            return;
        }
    }
    out.push((start, end - start));
}

// ---------------------------------------------------------------------------------------
// TrackedBuf
// ---------------------------------------------------------------------------------------

/// Page-aligned anonymous memory of `len` bytes whose writes the OS tracks. Zeroed at
/// creation. See the module docs.
pub struct TrackedBuf {
    len: usize,
    armed: bool,
    /// Ranges taken for a put that has not committed yet (they go into the next one).
    pub(crate) pending: Vec<(u64, u64)>,
    /// The version of its name the last committed tracked put made (the next delta's
    /// parent).
    pub(crate) committed: Option<u64>,
    backend: Backend,
    /// The process it was made in: its tracking state (a userfaultfd registration, the
    /// pagemap descriptor) is that process's, never a `fork` child's to scan or re-arm.
    born: Born,
    // Dropped after `backend` (fields drop in declaration order): the registry slot or
    // the userfaultfd goes first, the memory last.
    map: Mapping,
}

enum Backend {
    Uffd { uffd: OwnedFd, regions: Vec<PageRegion> },
    Mprotect { slot: usize, bitmap: Box<[AtomicU64]> },
}

// SAFETY: the buffer owns its mapping exclusively (like a Box<[u8]>); the tracking state
// is a file descriptor or a registry slot + atomic bitmap, all usable from any thread (the
// SIGSEGV handler runs in whichever thread writes).
unsafe impl Send for TrackedBuf {}
// SAFETY: `&TrackedBuf` only reads the memory and the kind/len; every mutation (writes,
// take_dirty) needs `&mut`.
unsafe impl Sync for TrackedBuf {}

impl fmt::Debug for TrackedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TrackedBuf").field("kind", &self.kind()).field("len", &self.len).finish()
    }
}

impl TrackedBuf {
    /// `len` zeroed bytes (rounded up to whole pages in memory, at least one), tracked by `kind`. Fails
    /// with a message naming the call and errno if `kind` is unavailable here, or with
    /// "registry full" when [`MPROTECT_CAPACITY`] `Mprotect` buffers already exist.
    pub fn new(len: usize, kind: TrackerKind) -> io::Result<Self> {
        let ps = page_size();
        // An empty buffer still maps a page (a mapping cannot be empty); it reports nothing.
        let map_len = len
            .max(1)
            .checked_next_multiple_of(ps)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("TrackedBuf: len {len} too large")))?;
        let map = Mapping::new(map_len)?;
        let backend = match kind {
            TrackerKind::UffdWpAsync => uffd_setup(&map).map_err(|(what, e)| unavailable(what, e))?,
            TrackerKind::Mprotect => mprotect_setup(&map)?,
        };
        Ok(TrackedBuf { len, armed: false, pending: Vec::new(), committed: None, backend, born: Born::now(), map })
    }

    /// [`TrackerKind::UffdWpAsync`] if it works here, else [`TrackerKind::Mprotect`].
    pub fn best(len: usize) -> io::Result<Self> {
        if uffd_wp_async_available().is_ok() {
            if let Ok(b) = TrackedBuf::new(len, TrackerKind::UffdWpAsync) {
                return Ok(b);
            }
        }
        TrackedBuf::new(len, TrackerKind::Mprotect)
    }

    /// The tracking kind of this buffer.
    pub fn kind(&self) -> TrackerKind {
        match self.backend {
            Backend::Uffd { .. } => TrackerKind::UffdWpAsync,
            Backend::Mprotect { .. } => TrackerKind::Mprotect,
        }
    }

    /// The length asked for at creation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// `true` for a buffer of no bytes (it still maps a page, and reports no ranges).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Clear `out`, then push the `(offset, len)` byte ranges written since the last take
    /// (the whole buffer on the first take): page-granular, sorted, merged, the last one
    /// clipped to [`len`](Self::len). Re-arms tracking, so the next take reports only
    /// writes made after this one — the caller keeps the ranges until its put commits.
    /// [`crate::FilePool::put_tracked`] does that for it (the safe path).
    ///
    /// Over-reporting is the only failure mode: if the kernel refuses to re-arm some pages
    /// (it should not), they are reported as dirty now and on later takes until it
    /// succeeds.
    ///
    /// In a child that `fork` made of the process that made the buffer, it reports the
    /// whole buffer and touches no tracking state: a child inherits no userfaultfd
    /// registration, and a scan through the parent's pagemap descriptor would read and
    /// re-arm the parent's pages, losing the writes its next take must report.
    pub fn take_dirty(&mut self, out: &mut Vec<(u64, u64)>) {
        out.clear();
        let len = self.len as u64;
        if self.born.is_fork() {
            out.extend((len > 0).then_some((0, len)));
            return;
        }
        let base = self.map.addr();
        let map_len = self.map.map_len;
        match &mut self.backend {
            Backend::Uffd { uffd, regions } => {
                if !self.armed || !uffd_scan(base, map_len, regions, out) {
                    out.clear();
                    out.push((0, len));
                    if let Err(e) = uffd_protect(uffd.as_raw_fd(), base, map_len) {
                        panic!("TrackedBuf: cannot re-arm uffd-wp tracking: {e}");
                    }
                }
            }
            Backend::Mprotect { slot, bitmap } => {
                let first = !self.armed;
                mprotect_take(*slot, base, map_len, bitmap, first, out);
            }
        }
        self.armed = true;
        if let Some(last) = out.last_mut() {
            if last.0 + last.1 > len {
                last.1 = len.saturating_sub(last.0);
            }
        }
        out.retain(|r| r.1 > 0);
    }
}

impl Deref for TrackedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: the mapping holds `map_len >= len` readable bytes for the buffer's life;
        // writes need `&mut self`, so no one writes while this borrow lives.
        unsafe { std::slice::from_raw_parts(self.map.base.as_ptr(), self.len) }
    }
}

impl DerefMut for TrackedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow exclusive. Pages that are
        // write-protected become writable on the first write (kernel or SIGSEGV handler)
        // before the write completes, so ordinary stores are fine.
        unsafe { std::slice::from_raw_parts_mut(self.map.base.as_ptr(), self.len) }
    }
}

// ---------------------------------------------------------------------------------------
// UffdWpAsync
// ---------------------------------------------------------------------------------------

fn unavailable(what: &str, errno: i32) -> io::Error {
    os_err(&format!("uffd-wp dirty tracking unavailable: {what}"), errno)
}

/// Whether [`TrackerKind::UffdWpAsync`] works in this process (probed once on a one-page
/// buffer). The error names the call that failed and its errno.
pub fn uffd_wp_async_available() -> io::Result<()> {
    static PROBE: OnceLock<Result<(), (String, i32)>> = OnceLock::new();
    let r = PROBE.get_or_init(|| {
        let map = Mapping::new(page_size()).map_err(|e| ("mmap".to_string(), e.raw_os_error().unwrap_or(0)))?;
        uffd_setup(&map).map(drop).map_err(|(what, e)| (what.to_string(), e))
    });
    match r {
        Ok(()) => Ok(()),
        Err((what, e)) => Err(unavailable(what, *e)),
    }
}

/// The process's `/proc/self/pagemap`, opened once per process: a descriptor a `fork`
/// child inherited names its parent's address space, so a child opens its own.
fn pagemap_fd() -> Result<RawFd, i32> {
    static FD: Mutex<Option<(Born, OwnedFd)>> = Mutex::new(None);
    let mut fd = FD.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, f)) = fd.as_ref().filter(|(born, _)| !born.is_fork()) {
        return Ok(f.as_raw_fd());
    }
    // SAFETY: the path is a NUL-terminated literal.
    let raw = unsafe { libc::open(c"/proc/self/pagemap".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if raw < 0 {
        return Err(errno());
    }
    // SAFETY: `raw` was just opened and is owned by nothing else.
    let f = unsafe { OwnedFd::from_raw_fd(raw) };
    *fd = Some((Born::now(), f));
    Ok(raw)
}

fn ioctl<T>(fd: RawFd, req: u64, arg: &mut T) -> Result<libc::c_int, i32> {
    // SAFETY: every request used here takes a pointer to exactly the `T` its number encodes
    // (checked by the const asserts above), and `arg` is a live exclusive reference.
    let rc = unsafe { libc::ioctl(fd, req as _, arg as *mut T) };
    if rc < 0 {
        Err(errno())
    } else {
        Ok(rc)
    }
}

/// Open a userfaultfd with async write-protect, register the buffer, and check that
/// PAGEMAP_SCAN works on it. On failure: the step and its errno.
fn uffd_setup(map: &Mapping) -> Result<Backend, (&'static str, i32)> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
    // SAFETY: the userfaultfd syscall takes only flags.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
    if fd < 0 {
        return Err(("userfaultfd(O_CLOEXEC|O_NONBLOCK|UFFD_USER_MODE_ONLY)", errno()));
    }
    // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
    let uffd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let mut api = UffdioApi { api: UFFD_API, features: UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED, ioctls: 0 };
    ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api).map_err(|e| ("ioctl(UFFDIO_API, WP_ASYNC|WP_UNPOPULATED)", e))?;
    if api.features & UFFD_FEATURE_WP_ASYNC == 0 {
        return Err(("UFFDIO_API (no UFFD_FEATURE_WP_ASYNC in the features granted)", libc::EOPNOTSUPP));
    }
    let range = UffdioRange { start: map.addr() as u64, len: map.map_len as u64 };
    let mut reg = UffdioRegister { range, mode: UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
    ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut reg).map_err(|e| ("ioctl(UFFDIO_REGISTER, MODE_WP)", e))?;
    if reg.ioctls & (1 << _UFFDIO_WRITEPROTECT) == 0 {
        return Err(("UFFDIO_REGISTER (UFFDIO_WRITEPROTECT not offered for the range)", libc::EOPNOTSUPP));
    }
    let pm = pagemap_fd().map_err(|e| ("open(/proc/self/pagemap)", e))?;
    let mut one = [PageRegion::default(); 1];
    let mut arg = PmScanArg {
        size: size_of::<PmScanArg>() as u64,
        flags: PM_SCAN_CHECK_WPASYNC,
        start: map.addr() as u64,
        end: (map.addr() + page_size()) as u64,
        vec: one.as_mut_ptr() as u64,
        vec_len: 1,
        category_mask: PAGE_IS_WRITTEN,
        return_mask: PAGE_IS_WRITTEN,
        ..Default::default()
    };
    ioctl(pm, PAGEMAP_SCAN, &mut arg).map_err(|e| ("ioctl(/proc/self/pagemap, PAGEMAP_SCAN)", e))?;
    let pages = map.map_len / page_size();
    Ok(Backend::Uffd { uffd, regions: vec![PageRegion::default(); pages.clamp(1, 512)] })
}

/// Write-protect the whole buffer (arming; also the fallback re-arm).
fn uffd_protect(uffd: RawFd, base: usize, map_len: usize) -> io::Result<()> {
    let mut wp = UffdioWriteprotect {
        range: UffdioRange { start: base as u64, len: map_len as u64 },
        mode: UFFDIO_WRITEPROTECT_MODE_WP,
    };
    loop {
        match ioctl(uffd, UFFDIO_WRITEPROTECT, &mut wp) {
            Ok(_) => return Ok(()),
            Err(libc::EAGAIN) | Err(libc::EINTR) => continue,
            Err(e) => return Err(os_err("ioctl(UFFDIO_WRITEPROTECT)", e)),
        }
    }
}

/// Report the written pages of `[base, base + map_len)` into `out` (buffer offsets) and
/// write-protect them again, in PAGEMAP_SCAN calls of up to `regions.len()` regions each.
/// False if a call failed (the caller then reports everything and re-protects it all).
fn uffd_scan(base: usize, map_len: usize, regions: &mut [PageRegion], out: &mut Vec<(u64, u64)>) -> bool {
    let Ok(pm) = pagemap_fd() else { return false };
    let end = (base + map_len) as u64;
    let mut start = base as u64;
    while start < end {
        let mut arg = PmScanArg {
            size: size_of::<PmScanArg>() as u64,
            flags: PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
            start,
            end,
            vec: regions.as_mut_ptr() as u64,
            vec_len: regions.len() as u64,
            category_mask: PAGE_IS_WRITTEN,
            return_mask: PAGE_IS_WRITTEN,
            ..Default::default()
        };
        let n = match ioctl(pm, PAGEMAP_SCAN, &mut arg) {
            Ok(n) => n as usize,
            Err(libc::EINTR) => continue,
            Err(_) => return false,
        };
        for r in &regions[..n.min(regions.len())] {
            push_range(out, r.start - base as u64, r.end - base as u64);
        }
        if arg.walk_end <= start {
            return false; // no progress: should not happen
        }
        start = arg.walk_end;
    }
    true
}

// ---------------------------------------------------------------------------------------
// Mprotect: registry and SIGSEGV handler
// ---------------------------------------------------------------------------------------

const FREE: u8 = 0;
const BUSY: u8 = 1; // being filled in or torn down: handlers skip it
const ACTIVE: u8 = 2;

/// One tracked buffer, as the handler sees it. All fields are atomics, so the handler
/// never races with a plain access.
struct Slot {
    state: AtomicU8,
    /// Handlers currently looking at this slot; teardown waits for 0.
    users: AtomicUsize,
    start: AtomicUsize,
    len: AtomicUsize,
    bitmap: AtomicPtr<AtomicU64>,
    /// Set by the handler when it could not unprotect one page (mprotect ENOMEM: too many
    /// VMAs) and unprotected the whole buffer instead: the next take reports all of it.
    overflow: AtomicBool,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU8::new(FREE),
            users: AtomicUsize::new(0),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            bitmap: AtomicPtr::new(ptr::null_mut()),
            overflow: AtomicBool::new(false),
        }
    }
}

static SLOTS: [Slot; MPROTECT_CAPACITY] = [const { Slot::new() }; MPROTECT_CAPACITY];

/// One past the highest slot ever taken: the handler scans `SLOTS[..SLOTS_USED]`. Raised
/// before a slot is filled in, never lowered (freed slots are taken again lowest first).
static SLOTS_USED: AtomicUsize = AtomicUsize::new(0);

/// The SIGSEGV disposition found when ours was installed: handler address, flags, and
/// the kernel's part of its `sa_mask` (Linux masks are 64 bits; glibc's `sigset_t` keeps
/// them in its first 8 bytes).
static OLD_HANDLER: AtomicUsize = AtomicUsize::new(libc::SIG_DFL);
static OLD_FLAGS: AtomicUsize = AtomicUsize::new(0);
static OLD_MASK: AtomicU64 = AtomicU64::new(0);

/// Remember `old` as the disposition to chain to.
fn keep_old(old: &libc::sigaction) {
    // SAFETY: sigset_t is at least 8 bytes of plain data; an unaligned read of them.
    let mask = unsafe { ptr::read_unaligned((&old.sa_mask as *const libc::sigset_t).cast::<u64>()) };
    OLD_MASK.store(mask, Ordering::SeqCst);
    OLD_FLAGS.store(old.sa_flags as usize, Ordering::SeqCst);
    OLD_HANDLER.store(old.sa_sigaction, Ordering::SeqCst);
}

/// Install the handler once per process (the error, if any, is kept).
fn install_handler() -> io::Result<()> {
    static INSTALLED: OnceLock<Result<(), i32>> = OnceLock::new();
    let r = INSTALLED.get_or_init(|| {
        page_size();
        // SAFETY: sigaction with valid pointers to zero-initialised (valid) structs; the
        // handler is an `extern "C"` function with the SA_SIGINFO signature.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGSEGV, ptr::null(), &mut old) != 0 {
                return Err(errno());
            }
            keep_old(&old);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = segv_handler as *const () as usize;
            // SA_ONSTACK: run on the thread's alternate stack if it has one (std sets one
            // up for stack-overflow reports, which then still work through the chain).
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(libc::SIGSEGV, &sa, &mut old) != 0 {
                return Err(errno());
            }
            // Someone may have changed it between the two calls: chain to what we replaced.
            keep_old(&old);
        }
        Ok(())
    });
    r.map_err(|e| os_err("sigaction(SIGSEGV)", e))
}

fn mprotect_setup(map: &Mapping) -> io::Result<Backend> {
    install_handler()?;
    let pages = map.map_len / page_size();
    let bitmap: Box<[AtomicU64]> = (0..pages.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
    for (i, slot) in SLOTS.iter().enumerate() {
        if slot.state.compare_exchange(FREE, BUSY, Ordering::SeqCst, Ordering::Relaxed).is_ok() {
            SLOTS_USED.fetch_max(i + 1, Ordering::SeqCst);
            slot.start.store(map.addr(), Ordering::SeqCst);
            slot.len.store(map.map_len, Ordering::SeqCst);
            slot.bitmap.store(bitmap.as_ptr() as *mut AtomicU64, Ordering::SeqCst);
            slot.overflow.store(false, Ordering::SeqCst);
            slot.state.store(ACTIVE, Ordering::SeqCst);
            return Ok(Backend::Mprotect { slot: i, bitmap });
        }
    }
    Err(io::Error::other(format!(
        "mprotect dirty tracking: registry full ({MPROTECT_CAPACITY} buffers tracked at once); drop one first"
    )))
}

fn unregister(slot: usize) {
    let s = &SLOTS[slot];
    s.state.store(BUSY, Ordering::SeqCst);
    // A handler that incremented `users` before our store saw ACTIVE and may still use the
    // bitmap; one that increments after it sees BUSY (SeqCst on both sides). Handlers are
    // short and never block, so this wait is brief.
    while s.users.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
    s.bitmap.store(ptr::null_mut(), Ordering::SeqCst);
    s.start.store(0, Ordering::SeqCst);
    s.len.store(0, Ordering::SeqCst);
    s.state.store(FREE, Ordering::SeqCst);
}

impl Drop for TrackedBuf {
    fn drop(&mut self) {
        // The slot goes before the bitmap (a field of the backend) and the mapping (dropped
        // after this); the userfaultfd closes with the backend, which unregisters its range.
        if let Backend::Mprotect { slot, .. } = self.backend {
            unregister(slot);
        }
    }
}

/// mprotect as a raw system call. Async-signal-safe: `syscall(2)` enters the kernel
/// directly (no lock, no allocation); it may set `errno`, which the handler restores.
fn raw_mprotect(addr: usize, len: usize, prot: libc::c_int) -> bool {
    // SAFETY: changes the protection of pages this module mapped (never unmaps or maps);
    // the memory stays valid for every Rust reference into it.
    unsafe { libc::syscall(libc::SYS_mprotect, addr, len, prot) == 0 }
}

/// Async-signal-safe: `write(2)` and `abort(3)` are on POSIX's list.
fn fatal(msg: &[u8]) -> ! {
    // SAFETY: writes a static byte string to stderr, then aborts.
    unsafe {
        libc::write(2, msg.as_ptr().cast(), msg.len());
        libc::abort()
    }
}

extern "C" fn segv_handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot (a TLS address; no lock).
    let errno_slot = unsafe { libc::__errno_location() };
    // SAFETY: the slot is valid for the life of the thread.
    let saved = unsafe { *errno_slot };
    // SAFETY: the kernel passes a valid siginfo for a SA_SIGINFO handler.
    let handled = unsafe { handle_fault(info) };
    // SAFETY: as above.
    unsafe { *errno_slot = saved };
    if !handled {
        // SAFETY: passes the kernel's arguments on unchanged.
        unsafe { chain(sig, info, ctx) };
    }
}

/// Whether the fault was a write to a tracked page, now recorded and made writable.
/// Only atomics and raw mprotect (see the module docs).
///
/// # Safety
/// `info` is null or the siginfo of a SIGSEGV.
unsafe fn handle_fault(info: *mut libc::siginfo_t) -> bool {
    if info.is_null() {
        return false;
    }
    // SAFETY: non-null siginfo from the kernel; reading its fields has no side effect.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code <= 0 {
        return false; // sent by kill/raise/sigqueue, not a fault
    }
    let ps = PAGE_SIZE.load(Ordering::Relaxed);
    let used = SLOTS_USED.load(Ordering::Acquire).min(MPROTECT_CAPACITY);
    for slot in &SLOTS[..used] {
        // Cheap filter first (no read-modify-write for slots that cannot match). A buffer
        // is registered before it is ever protected, so a fault in it finds its slot.
        if slot.state.load(Ordering::Relaxed) != ACTIVE {
            continue;
        }
        let start = slot.start.load(Ordering::Relaxed);
        if addr.wrapping_sub(start) >= slot.len.load(Ordering::Relaxed) {
            continue;
        }
        slot.users.fetch_add(1, Ordering::SeqCst);
        let mut handled = false;
        if slot.state.load(Ordering::SeqCst) == ACTIVE {
            // Stable while we hold `users`: teardown waits for us.
            let start = slot.start.load(Ordering::SeqCst);
            let len = slot.len.load(Ordering::SeqCst);
            let bitmap = slot.bitmap.load(Ordering::SeqCst);
            let off = addr.wrapping_sub(start);
            if off < len && !bitmap.is_null() {
                let page = off / ps;
                // SAFETY: the bitmap has one bit per page of `len`; `page < len / ps`.
                let word = unsafe { &*bitmap.add(page / 64) };
                // Record first, then unprotect: a write that succeeds is always recorded.
                word.fetch_or(1 << (page % 64), Ordering::SeqCst);
                if !raw_mprotect(start + page * ps, ps, libc::PROT_READ | libc::PROT_WRITE) {
                    // Most likely ENOMEM: splitting the VMA would pass vm.max_map_count.
                    // Unprotect the whole buffer instead (merges its VMAs into one; the
                    // guard pages mean no split outside it) and have the next take
                    // report all of it.
                    slot.overflow.store(true, Ordering::SeqCst);
                    if !raw_mprotect(start, len, libc::PROT_READ | libc::PROT_WRITE) {
                        fatal(b"nvs-std dirty tracking: mprotect failed in the SIGSEGV handler\n");
                    }
                }
                handled = true;
            }
        }
        slot.users.fetch_sub(1, Ordering::SeqCst);
        if handled {
            return true;
        }
    }
    false
}

/// Hand a SIGSEGV that is not ours to the disposition we replaced, as the kernel would
/// have run it: `SIG_DFL` takes the default action; `SIG_IGN` ignores a sent signal (a
/// fault cannot be ignored: the kernel kills a process that ignores or blocks the fault
/// it takes, and so does this); a handler runs with its own `sa_mask` blocked, and the
/// signal too unless `SA_NODEFER`; `SA_RESETHAND` makes the disposition `SIG_DFL` before
/// it runs — so a crash reporter that logs and returns sees the fault once, and the
/// re-executed fault takes the default action instead of calling it again forever (ours
/// stays installed for the tracked pages).
///
/// # Safety
/// Called from the SIGSEGV handler with the kernel's arguments.
unsafe fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let h = OLD_HANDLER.load(Ordering::SeqCst);
    let flags = OLD_FLAGS.load(Ordering::SeqCst) as libc::c_int;
    // SAFETY: `info` is null or the kernel's siginfo.
    let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
    if h == libc::SIG_IGN && sent {
        return;
    }
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        // Default action: reset the disposition (sigaction is async-signal-safe) and let
        // the signal happen again: a fault re-executes the instruction, a sent signal is
        // re-raised (raise is async-signal-safe; it is delivered when this handler returns).
        // SAFETY: a zeroed sigaction is SIG_DFL with an empty mask.
        unsafe {
            let dfl: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, &dfl, ptr::null_mut());
            if sent {
                libc::raise(sig);
            }
        }
        return;
    }
    if flags & libc::SA_RESETHAND != 0 {
        OLD_FLAGS.store(0, Ordering::SeqCst);
        OLD_HANDLER.store(libc::SIG_DFL, Ordering::SeqCst);
    }
    // The mask it asked for, by raw rt_sigprocmask (a kernel entry, no lock); the kernel
    // restores the mask of the interrupted code when our handler returns, and so do we.
    let mut now = 0u64;
    let bit = 1u64 << (sig - 1);
    let mut want = OLD_MASK.load(Ordering::SeqCst);
    // SAFETY: reads this thread's mask into `now` (8 bytes: the kernel's sigset size).
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_BLOCK, ptr::null::<u64>(), &mut now, 8) };
    want |= now;
    want = if flags & libc::SA_NODEFER != 0 { want & !bit } else { want | bit };
    // SAFETY: sets this thread's mask from an 8-byte kernel sigset.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &want, ptr::null_mut::<u64>(), 8) };
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous disposition was installed with SA_SIGINFO, so it has this
        // signature; calling it is as signal-safe as it is.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain handler takes only the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
    // SAFETY: as above, back to the mask this handler ran with.
    unsafe { libc::syscall(libc::SYS_rt_sigprocmask, libc::SIG_SETMASK, &now, ptr::null_mut::<u64>(), 8) };
}

/// Report the bitmap's pages (or everything on the first take / after an overflow),
/// clear them and write-protect them again.
fn mprotect_take(
    slot: usize,
    base: usize,
    map_len: usize,
    bitmap: &[AtomicU64],
    first: bool,
    out: &mut Vec<(u64, u64)>,
) {
    let ps = page_size();
    let overflow = SLOTS[slot].overflow.swap(false, Ordering::SeqCst);
    if first || overflow {
        for w in bitmap {
            w.store(0, Ordering::SeqCst);
        }
        out.push((0, map_len as u64));
        if !raw_mprotect(base, map_len, libc::PROT_READ) {
            // Cannot arm: leave every bit set so every page keeps being reported.
            for w in bitmap {
                w.store(u64::MAX, Ordering::SeqCst);
            }
        }
        return;
    }
    let pages = map_len / ps;
    let mut run: Option<(usize, usize)> = None; // [first page, end page)
    let flush = |run: (usize, usize), out: &mut Vec<(u64, u64)>| {
        push_range(out, (run.0 * ps) as u64, (run.1 * ps) as u64);
        if !raw_mprotect(base + run.0 * ps, (run.1 - run.0) * ps, libc::PROT_READ) {
            for p in run.0..run.1 {
                bitmap[p / 64].fetch_or(1 << (p % 64), Ordering::SeqCst);
            }
        }
    };
    for (wi, w) in bitmap.iter().enumerate() {
        let mut bits = w.swap(0, Ordering::SeqCst);
        while bits != 0 {
            let b = bits.trailing_zeros() as usize;
            let p = wi * 64 + b;
            bits &= bits - 1;
            if p >= pages {
                break;
            }
            match run {
                Some((s, e)) if e == p => run = Some((s, p + 1)),
                Some(r) => {
                    flush(r, out);
                    run = Some((p, p + 1));
                }
                None => run = Some((p, p + 1)),
            }
        }
    }
    if let Some(r) = run {
        flush(r, out);
    }
}
