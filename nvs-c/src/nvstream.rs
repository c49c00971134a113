//! The NVStream wrapper API (`include/nvstream.h`), for codes already instrumented for
//! NVStream: `nvs_init(rank)` opens the rank's pool, `nvs_alloc(n, name)` returns memory
//! for a named object the application computes in, `nvs_snapshot(rank)` puts every
//! registered object as one batch (one commit; the next version of each), `nvs_free`
//! unregisters, `nvs_finalize` ends the rank's stream and closes the pool.
//!
//! One process is one rank. Its pool is `$NVS_DIR/$NVS_NAME.<rank>.pool` (defaults
//! `/dev/shm` and `nvs`), created with `$NVS_POOL_SIZE` bytes (default 256M; K, M, G
//! suffixes) when missing, else opened: a restarted rank appends after its last
//! committed snapshot. `NVS_DELTA=1`: objects live in memory the kernel tracks
//! (userfaultfd write-protect, async mode) and a snapshot stores only the pages written
//! since the last one; without that kernel feature snapshots are full (said once on
//! stderr). `NVS_DELTA=mprotect`: tracked by mprotect, whose limits (a system call
//! writing into an object fails; 64 objects) make it opt-in. `NVS_KEEP=K`: when the pool is
//! full, retention keeps the K newest versions of each object and the snapshot is
//! tried once more (still full: it fails, saying reclaim ran); followers skip the
//! versions it released before they read them. `NVS_STATS=1`: `nvs_finalize` prints what the rank stored (the objects' bytes, and the bytes
//! stored: fewer with deltas). `nvs_init`
//! reads them all; yes/no variables take 1/0, true/false, on/off, yes/no (any case),
//! blanks around values are ignored, and a bad value fails `nvs_init`, naming it.
//!
//! Failures are printed on stderr and left for `nvs_last_error`; every call clears it
//! first, so after `nvs_snapshot` (which returns nothing) an empty `nvs_last_error` means
//! it succeeded. The calls are thread-safe (one lock per process). They are not
//! async-signal-safe: a call from a signal handler that interrupted any nvs call of the
//! same thread is refused with `NVS_E_BUSY` (it would wait for ever for the lock its thread
//! holds); set a flag in the handler and snapshot after it returns.

use crate::error::*;
use nvs_core::Object;
use nvs_std::dirty::{TrackedBuf, TrackerKind, MPROTECT_CAPACITY};
use nvs_std::{Access, CreateOptions, FilePool};
use std::alloc::Layout;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int, c_ulong, c_void};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One registered object's memory.
enum Mem {
    /// Plain zeroed heap memory ([`plain`]): the object is [`PAD`] bytes into it,
    /// 64-byte aligned.
    Plain { base: NonNull<u8>, layout: Layout },
    /// OS-tracked memory (`NVS_DELTA=1` with uffd-wp, or `NVS_DELTA=mprotect`).
    Tracked(TrackedBuf),
}

// SAFETY: the memory is owned by its registration (like a `Box<[u8]>`); it is read by
// snapshots under the process's lock, written by the application as it pleases (the
// contract of `nvs_alloc`, as in NVStream).
unsafe impl Send for Mem {}

impl Mem {
    fn ptr(&mut self) -> *mut u8 {
        match self {
            // SAFETY: `PAD` bytes into the allocation, which has `PAD` more after the object.
            Mem::Plain { base, .. } => unsafe { base.as_ptr().add(PAD) },
            Mem::Tracked(b) => b.as_mut_ptr(),
        }
    }
}

impl Drop for Mem {
    fn drop(&mut self) {
        if let Mem::Plain { base, layout } = self {
            // SAFETY: allocated with this layout by `alloc_zeroed`, freed once.
            unsafe { std::alloc::dealloc(base.as_ptr(), *layout) }
        }
    }
}

struct Registered {
    name: Vec<u8>,
    len: usize,
    mem: Mem,
}

/// The rank this process is.
struct Rank {
    id: c_int,
    pool: FilePool,
    /// Registration order (snapshots put objects in it).
    objects: BTreeMap<u64, Registered>,
    by_ptr: HashMap<usize, u64>,
    by_name: HashMap<Vec<u8>, u64>,
    /// Memory of Fortran `alloc`s whose name was refused: the app's, no snapshot's.
    unstored: HashMap<usize, Mem>,
    next: u64,
    /// How objects are tracked: `None` stores every object in full.
    delta: Option<TrackerKind>,
    keep: Option<u32>,
    /// `NVS_STATS`: `nvs_finalize` prints [`Stats`].
    print_stats: bool,
    stats: Stats,
}

#[derive(Default)]
struct Stats {
    snapshots: u64,
    objects: u64,
    /// The objects' bytes (what a get returns).
    bytes: u64,
    /// The bytes the snapshots stored (a delta: the pages written since the last one).
    stored: u64,
    time: Duration,
    reclaimed: u32,
}

static RANK: Mutex<Option<Rank>> = Mutex::new(None);

/// A rank was finalized in this process: `nvs_free` of what it had registered is a no-op.
static FINALIZED: AtomicBool = AtomicBool::new(false);

/// What the last `nvs_init` said when it failed (`None` after one that succeeded):
/// calls made without a rank repeat it. Locked after `RANK`.
static INIT_FAILED: Mutex<Option<String>> = Mutex::new(None);

/// Memory a Fortran `alloc` returned while this process had no rank (its `nvs_init`
/// failed, or was not called): no snapshot stores it; `nvs_free` frees it. Locked only
/// while `RANK` is (so a `fork` child, where `rank_lock` refuses a `RANK` held at the
/// fork, never finds it held either).
static ORPHANS: Mutex<Option<HashMap<usize, Mem>>> = Mutex::new(None);

/// The error of a call that needs this process's rank when it has none.
fn no_rank() -> Fail {
    match INIT_FAILED.lock().unwrap_or_else(|e| e.into_inner()).as_deref() {
        Some(why) => arg(format!("nvs_init failed ({why})")),
        None => arg("nvs_init was not called"),
    }
}

fn rank_lock() -> Res<std::sync::MutexGuard<'static, Option<Rank>>> {
    // In a `fork` child, a thread of the parent that was inside a call at the fork holds
    // the lock for ever (it does not exist here): refused, never waited for. Otherwise
    // the lock was free at the fork, and the first call here to take it says so
    // (`LOCK_BORN`): from then on this process's threads wait for each other as usual.
    // A call that finds it taken before that waits a little for the word (a thread of
    // this process between its take and its word), then is refused.
    let born = nvs_std::fork_generation();
    if born != LOCK_BORN.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        loop {
            let taken = match RANK.try_lock() {
                Ok(g) => g,
                Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if LOCK_BORN.load(Ordering::Relaxed) == born => break,
                Err(std::sync::TryLockError::WouldBlock) if t0.elapsed() < Duration::from_millis(20) => {
                    std::thread::yield_now();
                    continue;
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    return Err(Fail {
                        status: NVS_E_BUSY,
                        msg: "another thread of the process this one was forked from was inside an nvs call at \
                              the fork: this child cannot use the rank (nothing was done)"
                            .into(),
                    })
                }
            };
            LOCK_BORN.store(born, Ordering::Relaxed);
            return Ok(taken);
        }
    }
    // A panic inside a call (caught at the boundary) leaves the state as consistent as
    // the pool's own: every field is updated after the call it follows succeeded.
    Ok(RANK.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The fork generation of the process whose threads take [`RANK`]'s lock as usual: the
/// first process, and a `fork` child once one of its calls found the lock free.
static LOCK_BORN: AtomicU64 = AtomicU64::new(0);

/// A variable naming a place (`NVS_DIR`, `NVS_NAME`), as it is; unset or empty is `None`.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// A variable holding a value (`NVS_POOL_SIZE`, `NVS_DELTA`, `NVS_KEEP`, `NVS_STATS`),
/// blanks around it ignored; unset or blank is `None`.
fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
}

/// `1`/`0`, `true`/`false`, `on`/`off`, `yes`/`no`, in any case.
fn parse_flag(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Some(true),
        "0" | "false" | "off" | "no" => Some(false),
        _ => None,
    }
}

/// A yes/no variable ([`parse_flag`]); unset or blank is no. Anything else is an error
/// naming it.
fn flag(name: &str) -> Res<bool> {
    match setting(name) {
        None => Ok(false),
        Some(v) => parse_flag(&v).ok_or_else(|| arg(format!("{name}={v} is not 1/0, true/false, on/off or yes/no"))),
    }
}

/// `256M`, `1G`, `4096`: bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 1u64 << 10),
        (i, 'm' | 'M') => (&s[..i], 1 << 20),
        (i, 'g' | 'G') => (&s[..i], 1 << 30),
        (i, 't' | 'T') => (&s[..i], 1 << 40),
        _ => (s, 1),
    };
    num.trim().parse::<u64>().ok()?.checked_mul(mult)
}

/// Where rank `id`'s pool lives.
fn pool_path(id: c_int) -> PathBuf {
    let dir = env("NVS_DIR").unwrap_or_else(|| "/dev/shm".into());
    let name = env("NVS_NAME").unwrap_or_else(|| "nvs".into());
    PathBuf::from(dir).join(format!("{name}.{id}.pool"))
}

/// A line on stderr; a stderr that cannot take it (closed, a pipe whose reader left) is
/// ignored, never a panic (which `eprintln!` would be, and at this boundary an abort).
fn say(line: &str) {
    say_parts(&[line.as_bytes()]);
}

/// `parts` (at most 7) and a newline on stderr, in one `writev(2)` (so threads' lines do
/// not interleave), the rest of a short write by `write(2)`: no lock, no allocation, no
/// panic, so a signal handler's refused call can say why. Failures are ignored.
fn say_parts(parts: &[&[u8]]) {
    let mut line: [&[u8]; 8] = [&[]; 8];
    let k = parts.len().min(7);
    line[..k].copy_from_slice(&parts[..k]);
    line[k] = b"\n";
    let iov = line.map(|p| libc::iovec { iov_base: p.as_ptr().cast_mut().cast(), iov_len: p.len() });
    let line = &line[..=k];
    let mut done = loop {
        // SAFETY: the first `line.len()` iovecs, each a live slice, read by the kernel.
        let n = unsafe { libc::writev(2, iov.as_ptr(), line.len() as c_int) };
        match usize::try_from(n) {
            Ok(n) => break n,
            _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
            _ => return,
        }
    };
    for part in line {
        let skip = done.min(part.len());
        done -= skip;
        let mut rest: &[u8] = part.get(skip..).unwrap_or_default();
        while !rest.is_empty() {
            // SAFETY: writes `rest.len()` bytes from a live slice to descriptor 2.
            let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
            match usize::try_from(n) {
                Ok(n) if n > 0 => rest = rest.get(n..).unwrap_or_default(),
                _ if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted => {}
                _ => return,
            }
        }
    }
}

/// Run a wrapper call: it clears the thread's last error first (so `nvs_last_error` is
/// empty after a call that succeeded, `nvs_snapshot`'s only report), and its failure is
/// printed (and kept for `nvs_last_error`). A call made while this thread is inside one
/// already (a signal handler that interrupted it) is refused with `NVS_E_BUSY`, not
/// waited for: the process's rank lock is held by the interrupted call.
fn wrap(what: &str, body: impl FnOnce() -> Res) -> c_int {
    clear_last();
    // The report runs inside the guard: a signal handler's call meanwhile is refused,
    // where it would replace (and free) the message being printed.
    guard_then(
        what,
        || {
            let _in = enter(&RANK as *const _ as usize)?;
            body()
        },
        |status, msg| {
            if status == NVS_OK {
                SAID.with(Repeats::succeeded);
                // A signal handler's refused call during this one left its message:
                // this call succeeded, and an empty last error is how `nvs_snapshot`
                // says so.
                clear_last();
                return;
            }
            let n = SAID.with(|s| s.failed(msg));
            if n == 1 {
                say_parts(&[b"nvs: ", msg]);
            } else if n.is_power_of_two() {
                let mut digits = [0u8; 20];
                let count = decimal(n, &mut digits);
                say_parts(&[
                    b"nvs: ",
                    msg,
                    b" (",
                    count,
                    b" times in a row: a repeated failure is printed at 2, 4, 8, ... times)",
                ]);
            }
        },
    )
}

thread_local! {
    /// This thread's wrapper failures printed so far: the same one again and again (a
    /// snapshot every step into a full pool) is printed the 1st, 2nd, 4th, 8th... time,
    /// each call still failing with its error in `nvs_last_error`. Per thread, so that
    /// another thread's calls neither hide nor reset it.
    static SAID: Repeats = const { Repeats { last: Cell::new(0), times: Cell::new(0) } };
}

/// How many times in a row calls failed with the same message (by a hash of it, not
/// kept: no allocation, as `say_parts`); a success or another message starts again.
struct Repeats {
    last: Cell<u64>,
    times: Cell<u64>,
}

impl Repeats {
    /// Count a failure with `msg`: how many in a row, this one included.
    fn failed(&self, msg: &[u8]) -> u64 {
        // FNV-1a, never 0 (what no failure is).
        let h = msg.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)) | 1;
        let n = if self.last.replace(h) == h { self.times.get() + 1 } else { 1 };
        self.times.set(n);
        n
    }

    fn succeeded(&self) {
        self.last.set(0);
    }
}

/// `n` in decimal, in the end of `buf`.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

fn init(proc_id: c_int) -> Res {
    // In a fork child, refused if the lock was held at the fork (see rank_lock), which
    // would otherwise wait for ever.
    let mut r = rank_lock()?;
    if let Some(rank) = r.as_ref() {
        return Err(Fail {
            status: NVS_E_BUSY,
            msg: format!("this process is rank {} already (nvs_finalize first)", rank.id),
        });
    }
    let opened = open_rank(proc_id);
    *INIT_FAILED.lock().unwrap_or_else(|e| e.into_inner()) = opened.as_ref().err().map(|f| f.msg.clone());
    *r = Some(opened?);
    Ok(())
}

/// Rank `proc_id`, its pool opened (or created) as the environment says.
fn open_rank(proc_id: c_int) -> Res<Rank> {
    if proc_id < 0 {
        return Err(arg(format!("proc_id {proc_id} is negative")));
    }
    // Every variable is checked before the pool is created: a failed nvs_init leaves no
    // pool behind.
    let keep = match setting("NVS_KEEP") {
        None => None,
        // 0 would release even the newest version of every object.
        Some(k) => match k.parse::<u32>() {
            Ok(k) if k >= 1 => Some(k),
            _ => return Err(arg(format!("NVS_KEEP={k} is not a number of versions to keep (1 or more)"))),
        },
    };
    let delta = delta_mode()?;
    let stats = flag("NVS_STATS")?;
    let pool = open_or_create(&pool_path(proc_id), delta.is_some())?;
    if delta == Some(TrackerKind::UffdWpAsync) {
        // Each tracked object holds a userfaultfd: thousands of objects need more than
        // the usual soft limit of 1024 descriptors.
        raise_fd_limit();
    }
    Ok(Rank {
        id: proc_id,
        pool,
        objects: BTreeMap::new(),
        by_ptr: HashMap::new(),
        by_name: HashMap::new(),
        unstored: HashMap::new(),
        next: 0,
        delta,
        keep,
        print_stats: stats,
        stats: Stats::default(),
    })
}

/// The pool at `path`, opened, or created (`NVS_POOL_SIZE`) where there is none.
///
/// Another process may create it at the same moment (the same rank started twice). Then
/// this one opens it, which says whether that process holds it ("locked by another
/// writer"), rather than "exists, remove it". Where nvs-std must name a new pool file
/// before formatting it (a file system without `O_TMPFILE`), an open can come too early
/// (the file still empty, before its creator locked it, or removed again by a creation
/// that lost its lock to this open): it tries again, for up to a second.
fn open_or_create(path: &Path, delta: bool) -> Res<FilePool> {
    let mut tries = 0;
    loop {
        let r = if path.exists() {
            FilePool::open(path, Access::ReadWrite)
        } else {
            let size_s = setting("NVS_POOL_SIZE").unwrap_or_else(|| "256M".into());
            let size = parse_size(&size_s).ok_or_else(|| arg(format!("NVS_POOL_SIZE={size_s} is not a size")))?;
            let segment = match setting("NVS_SEGMENT_SIZE") {
                Some(s) => Some(parse_size(&s).ok_or_else(|| arg(format!("NVS_SEGMENT_SIZE={s} is not a size")))?),
                // A delta's parent must lie in the lane's current segment: deltas want the
                // general default's large segments.
                None => (!delta).then(|| default_segment(size)),
            };
            let mut opts = CreateOptions::new();
            opts.segment_len = segment;
            match FilePool::create(path, size, &opts) {
                Err(nvs_std::Error::Exists { .. }) => FilePool::open(path, Access::ReadWrite),
                created => created,
            }
        };
        match r {
            Err(e) if tries < 100 && being_created(path, &e) => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return Ok(r?),
        }
    }
}

/// A rank's segment size without deltas: 1 MiB, or less in a pool under 16 MiB (at least
/// 16 segments, each a power of two of 4 KiB or more). A snapshot larger than a segment
/// takes a span of whole segments, and the next one starts in a new segment: with nvs's
/// default for other pools (1/16 of the pool) a 4.8 MB CM1 snapshot wasted most of a
/// segment; in 1 MiB segments it wastes less than 1 MiB. With deltas (whose parent must
/// be in the lane's current segment) the general default stays.
fn default_segment(pool_bytes: u64) -> u64 {
    let sixteenth = (pool_bytes / 16).max(4096);
    (1u64 << 20).min(1 << (63 - sixteenth.leading_zeros()))
}

/// `e`, from opening `path`, may be a creation under way in another process: the file
/// is empty (not formatted yet), or gone (that creation failed and removed it).
fn being_created(path: &Path, e: &nvs_std::Error) -> bool {
    match e {
        nvs_std::Error::Io { source, .. } => source.kind() == std::io::ErrorKind::NotFound,
        _ => {
            matches!(e.core(), Some(nvs_core::Error::NotFormatted))
                && std::fs::metadata(path).map_or(true, |m| m.len() == 0)
        }
    }
}

/// `NVS_DELTA`: a yes/no, or `mprotect`. Yes is uffd-wp tracking where the kernel has
/// it, else full snapshots (said once on stderr): mprotect tracking breaks system calls
/// that write into the objects (`read`, `recv`, MPI), so it is used only when asked for.
fn delta_mode() -> Res<Option<TrackerKind>> {
    let on = match setting("NVS_DELTA") {
        None => false,
        Some(v) if v.eq_ignore_ascii_case("mprotect") => return Ok(Some(TrackerKind::Mprotect)),
        Some(v) => parse_flag(&v)
            .ok_or_else(|| arg(format!("NVS_DELTA={v} is not 1/0, true/false, on/off, yes/no or mprotect")))?,
    };
    if !on {
        return Ok(None);
    }
    match nvs_std::dirty::uffd_wp_async_available() {
        Ok(()) => Ok(Some(TrackerKind::UffdWpAsync)),
        Err(e) => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                say(&format!(
                    "nvs: NVS_DELTA=1: snapshots store every object in full (no delta): dirty tracking needs \
                     userfaultfd write-protect in async mode (UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN, Linux >= 6.7), \
                     which this kernel does not give ({e}); NVS_DELTA=mprotect tracks with mprotect instead, \
                     but then read, fread, recv or MPI into the objects fail"
                ))
            });
            Ok(None)
        }
    }
}

/// The soft limit on open descriptors up to the hard limit (as far as allowed).
fn raise_fd_limit() {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain system calls on a valid struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

fn alloc_named(n: usize, name: &[u8]) -> Res<*mut c_void> {
    let mut r = rank_lock()?;
    let rank = r.as_mut().ok_or_else(no_rank)?;
    if name.is_empty() || name.len() > nvs_core::NAME_MAX {
        return Err(arg(format!("a name of {} bytes (1 to {} allowed)", name.len(), nvs_core::NAME_MAX)));
    }
    if rank.by_name.contains_key(name) {
        let shown = nvs_std::show_name(name);
        return Err(arg(format!("{shown} is registered already (nvs_free it first)")));
    }
    let mut mem = if let Some(kind) = rank.delta {
        Mem::Tracked(TrackedBuf::new(n, kind).map_err(|e| {
            let why = match kind {
                TrackerKind::UffdWpAsync => "NVS_DELTA=1: each object holds a userfaultfd descriptor, see ulimit -n",
                TrackerKind::Mprotect => {
                    &format!("NVS_DELTA=mprotect tracks at most {MPROTECT_CAPACITY} objects at once in a process")
                }
            };
            Fail {
                status: NVS_E_IO,
                msg: format!("cannot track the memory of {} ({why}): {e}", nvs_std::show_name(name)),
            }
        })?)
    } else {
        plain(n)?
    };
    let ptr = mem.ptr();
    let key = rank.next;
    rank.next += 1;
    rank.by_ptr.insert(ptr as usize, key);
    rank.by_name.insert(name.to_vec(), key);
    rank.objects.insert(key, Registered { name: name.to_vec(), len: n, mem });
    Ok(ptr.cast())
}

/// Zeroed memory for `n` bytes that no snapshot stores (a Fortran `alloc` whose name was
/// refused), freed by `nvs_free` or `nvs_finalize`.
fn alloc_unstored(n: usize) -> Res<*mut c_void> {
    let mut r = rank_lock()?;
    let mut mem = plain(n)?;
    let ptr = mem.ptr();
    match r.as_mut() {
        Some(rank) => rank.unstored.insert(ptr as usize, mem),
        None => ORPHANS.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_default().insert(ptr as usize, mem),
    };
    Ok(ptr.cast())
}

/// Bytes of zeroed padding before and after each plain object: a Fortran port's
/// off-by-one (GTC's `chargei` writes `zonali(0)`, 4 bytes before the array) lands there,
/// as it did harmlessly in NVStream's `malloc`'d memory, instead of in the allocator's
/// bookkeeping (a crash at the free).
const PAD: usize = 64;

/// Plain zeroed heap memory for `n` bytes, 64-byte aligned, with [`PAD`] bytes around it.
fn plain(n: usize) -> Res<Mem> {
    let too_large = || arg(format!("{n} bytes cannot be allocated"));
    let size = n.checked_add(2 * PAD).ok_or_else(too_large)?;
    let layout = Layout::from_size_align(size, 64).map_err(|_| too_large())?;
    // SAFETY: the layout has a non-zero size.
    let base = NonNull::new(unsafe { std::alloc::alloc_zeroed(layout) })
        .ok_or_else(|| Fail { status: NVS_E_OTHER, msg: format!("out of memory for {n} bytes") })?;
    Ok(Mem::Plain { base, layout })
}

fn free(ptr: *mut c_void) -> Res {
    let mut r = rank_lock()?;
    if ptr.is_null() {
        return Ok(());
    }
    let orphan = ORPHANS.lock().unwrap_or_else(|e| e.into_inner()).as_mut().and_then(|o| o.remove(&(ptr as usize)));
    if orphan.is_some() {
        return Ok(());
    }
    let Some(rank) = r.as_mut() else {
        // After nvs_finalize (which freed every registration: miniAMR frees each object
        // after it) there is nothing left to free: a no-op, as in NVStream. Before any
        // nvs_init no pointer can be one nvs_alloc returned.
        return if FINALIZED.load(Ordering::Relaxed) { Ok(()) } else { Err(no_rank()) };
    };
    if rank.unstored.remove(&(ptr as usize)).is_some() {
        return Ok(());
    }
    let key = rank.by_ptr.remove(&(ptr as usize)).ok_or_else(|| arg("the pointer is not one nvs_alloc returned"))?;
    if let Some(o) = rank.objects.remove(&key) {
        rank.by_name.remove(&o.name);
    }
    Ok(())
}

fn snapshot(proc_id: c_int) -> Res {
    let mut r = rank_lock()?;
    let rank = r.as_mut().ok_or_else(no_rank)?;
    if rank.id != proc_id {
        return Err(arg(format!("this process is rank {}, not {proc_id}", rank.id)));
    }
    if rank.objects.is_empty() {
        return Ok(()); // nothing registered: nothing to store
    }
    let start = Instant::now();
    let mut freed = None;
    let versions = loop {
        match (put_all(rank), rank.keep, freed) {
            (Err(e), Some(keep), None) if is_full(&e) => {
                let n = rank.pool.reclaim(keep)?;
                rank.stats.reclaimed += n;
                freed = Some(n);
            }
            (Err(e), Some(keep), Some(n)) if is_full(&e) => {
                let f = Fail::from(e);
                let msg = format!(
                    "{} (NVS_KEEP={keep}: reclaim ran and freed {n} segments, all it could while every object keeps its {keep} newest versions)",
                    f.msg
                );
                return Err(Fail { status: f.status, msg });
            }
            (Err(e), _, _) if matches!(e.core(), Some(nvs_core::Error::TooLarge { .. })) => {
                let f = Fail::from(e);
                let bytes = rank.objects.values().map(|o| o.len as u64).sum::<u64>();
                let msg = format!(
                    "{} (that is this rank's whole snapshot: {} objects, {bytes} bytes, one commit; create the \
                     pool larger: NVS_POOL_SIZE)",
                    f.msg,
                    rank.objects.len()
                );
                return Err(Fail { status: f.status, msg });
            }
            (Err(e), None, _) if is_full(&e) => {
                let f = Fail::from(e);
                let bytes = rank.objects.values().map(|o| o.len as u64).sum::<u64>();
                let msg = format!(
                    "{} (a snapshot of this rank holds {bytes} bytes of objects: create the pool larger, \
                     NVS_POOL_SIZE, or set NVS_KEEP=K to keep only the K newest versions of each object; \
                     nvs info --stats POOL shows where the room went)",
                    f.msg
                );
                return Err(Fail { status: f.status, msg });
            }
            (r, ..) => break r?,
        }
    };
    rank.stats.snapshots += 1;
    rank.stats.objects += versions.len() as u64;
    let bytes = rank.objects.values().map(|o| o.len as u64).sum::<u64>();
    rank.stats.bytes += bytes;
    rank.stats.stored += match rank.delta {
        None => bytes,
        // What each delta stored (a version just committed: its stat is there).
        Some(_) => rank
            .objects
            .values()
            .zip(&versions)
            .map(|(o, &v)| rank.pool.stat(&o.name, v).map_or(o.len as u64, |i| i.stored_bytes))
            .sum(),
    };
    rank.stats.time += start.elapsed();
    Ok(())
}

/// The pool has no room (retention may make some).
fn is_full(e: &nvs_std::Error) -> bool {
    use nvs_core::Error as C;
    e.core().is_some_and(|c| matches!(c, C::Full | C::NoSpace | C::Fragmented { .. } | C::IndexFull { .. }))
}

/// One batch of every registered object (in registration order); returns their versions.
fn put_all(rank: &mut Rank) -> nvs_std::Result<Vec<u64>> {
    if rank.delta.is_some() {
        let mut items: Vec<(&[u8], &mut TrackedBuf)> = rank
            .objects
            .values_mut()
            .filter_map(|o| match &mut o.mem {
                Mem::Tracked(b) => Some((o.name.as_slice(), b)),
                Mem::Plain { .. } => None,
            })
            .collect();
        return rank.pool.put_batch_tracked(0, &mut items);
    }
    let objects: Vec<Object<'_>> = rank
        .objects
        .values_mut()
        .map(|o| {
            let ptr = o.mem.ptr();
            // SAFETY: `ptr` holds `len` bytes (allocated so); the application does not
            // write them during the snapshot (NVStream's contract).
            Object::new(o.name.as_slice(), unsafe { std::slice::from_raw_parts(ptr, o.len) })
        })
        .collect();
    rank.pool.put_batch(0, &objects)
}

fn finalize() -> Res {
    let mut r = rank_lock()?;
    let rank = r.take().ok_or_else(no_rank)?;
    FINALIZED.store(true, Ordering::Relaxed);
    if rank.print_stats {
        let s = &rank.stats;
        let how = match rank.delta {
            None => "full snapshots".to_string(),
            Some(kind) => format!("deltas, {kind} tracking"),
        };
        say(&format!(
            "nvs: rank {}: {} snapshots, {} objects, {} bytes of objects, {} bytes stored ({how}) in {:.3} s ({:.1} MB/s of objects); {} segments reclaimed; pool {}",
            rank.id,
            s.snapshots,
            s.objects,
            s.bytes,
            s.stored,
            s.time.as_secs_f64(),
            s.bytes as f64 / s.time.as_secs_f64().max(1e-9) / 1e6,
            s.reclaimed,
            rank.pool.path().display()
        ));
    }
    Ok(rank.pool.close()?)
}

/// Open (or create) this rank's pool. Returns 0, or an `NVS_E_*` status.
#[no_mangle]
pub extern "C" fn nvs_init(proc_id: c_int) -> c_int {
    wrap("nvs_init", || init(proc_id))
}

/// Memory for `n` bytes of the object `s` (a NUL-terminated name), registered with
/// this rank: every snapshot stores it. NULL on failure.
///
/// # Safety
/// `s` is a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn nvs_alloc(n: c_ulong, s: *const c_char) -> *mut c_void {
    let mut out = std::ptr::null_mut();
    wrap("nvs_alloc", || {
        // SAFETY: the caller's promise.
        let name = unsafe { cstr(s, "name")? };
        let n = usize::try_from(n).map_err(|_| arg(format!("{n} bytes cannot be allocated")))?;
        out = alloc_named(n, name)?;
        Ok(())
    });
    out
}

/// Unregister (and free) memory from `nvs_alloc`. NULL is a no-op.
#[no_mangle]
pub extern "C" fn nvs_free(ptr: *mut c_void) {
    wrap("nvs_free", || free(ptr));
}

/// Put every registered object of the rank as one batch: one commit, the next version
/// of each (none registered: nothing to do). Durable when it returns; failures are
/// printed, and `nvs_last_error()` is empty after it exactly when it succeeded.
#[no_mangle]
pub extern "C" fn nvs_snapshot(proc_id: c_int) {
    wrap("nvs_snapshot", || snapshot(proc_id));
}

/// End the rank's stream (followers see its end), close its pool, forget every
/// registration (their memory is freed). Returns 0, or an `NVS_E_*` status.
#[no_mangle]
pub extern "C" fn nvs_finalize() -> c_int {
    wrap("nvs_finalize", finalize)
}

/// `nvs_init` for Fortran (argument by reference).
///
/// # Safety
/// `proc_id` is valid for a read.
#[no_mangle]
pub unsafe extern "C" fn nvs_init_(proc_id: *mut c_int) -> c_int {
    // SAFETY: the caller's promise.
    match unsafe { proc_id.as_ref() } {
        Some(id) => nvs_init(*id),
        None => wrap("nvs_init_", || Err(arg("proc_id is NULL"))),
    }
}

/// `nvs_alloc` for Fortran: `n` by reference; the name as Fortran passes it
/// (`fortran_name`: up to its first byte that is not a letter, digit, `_`, `-`, `.`).
/// A name that cannot be registered (none, a duplicate, no rank: `nvs_init` failed or
/// was not called) does not crash the app: the error is printed and memory returned,
/// which snapshots do not store.
///
/// # Safety
/// `n` is valid for a read; `s` is readable up to its name's end (`fortran_name`), at
/// most 256 bytes.
#[no_mangle]
pub unsafe extern "C" fn alloc(n: *mut c_ulong, s: *const c_char) -> *mut c_void {
    let mut out = std::ptr::null_mut();
    wrap("alloc", || {
        // SAFETY: the caller's promise.
        let n = unsafe { n.as_ref() }.ok_or_else(|| arg("n is NULL"))?;
        let n = usize::try_from(*n).map_err(|_| arg(format!("{n} bytes cannot be allocated")))?;
        // SAFETY: the caller's promise.
        let named = unsafe { fortran_name(s) }.and_then(|name| alloc_named(n, name));
        match named {
            Ok(p) => out = p,
            // A name that cannot be stored (none, a duplicate, no rank) must not crash
            // the app on its first use of a NULL array, as NVStream carried on: memory it
            // can use, which snapshots do not store, and the error on stderr.
            Err(f) if f.status == NVS_E_ARG => {
                out = alloc_unstored(n).map_err(|_| Fail { status: f.status, msg: f.msg.clone() })?;
                let msg = format!("{}: the memory is returned, but snapshots do not store it", f.msg);
                return Err(Fail { status: f.status, msg });
            }
            Err(f) => return Err(f),
        }
        Ok(())
    });
    out
}

/// A name from Fortran: its bytes up to the first that is not an ASCII letter, digit,
/// `_`, `-` or `.` (a NUL, the blank padding, a control byte, anything else). Fortran
/// pads a `character(len=10)` name with blanks and, through `bind(C)` or an implicit
/// interface, passes no NUL and no length (CM1, GTC): the name ended at the first NUL,
/// the bytes after the blanks ran on into the stack (`rain      ,000`), and even a clean
/// name kept its blanks (`nvs get POOL rain` found nothing). A name that fills its whole
/// declared length is followed by whatever lies after it: ended by these rules, or by a
/// `//c_null_char` the caller adds. At most `NVS_NAME_MAX` bytes are a name; none in
/// 256 bytes, or an empty one, is refused (`NVS_E_ARG`).
///
/// # Safety
/// `s` is NULL, or readable up to its end (as the name's rule above finds it), at most
/// 256 bytes.
unsafe fn fortran_name<'a>(s: *const c_char) -> Res<&'a [u8]> {
    if s.is_null() {
        return Err(arg("name is NULL"));
    }
    let mut len = 0;
    let in_name = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
    // SAFETY: the caller's promise: every byte read is at or before the name's end.
    while len <= nvs_core::NAME_MAX && in_name(unsafe { *s.add(len) } as u8) {
        len += 1;
    }
    if len > nvs_core::NAME_MAX {
        return Err(arg(format!(
            "a Fortran name with no end (a byte other than a letter, digit, _, - or .) in its first {} bytes",
            nvs_core::NAME_MAX + 1
        )));
    }
    if len == 0 {
        return Err(arg("an empty Fortran name (its first byte is not a letter, digit, _, - or .)"));
    }
    // SAFETY: `len` bytes just read.
    Ok(unsafe { std::slice::from_raw_parts(s.cast::<u8>(), len) })
}

/// `alloc` as gfortran names it for code with implicit interfaces
/// (`p = alloc(n, 'temp'//char(0))` with Cray pointers links to `alloc_`).
///
/// # Safety
/// As [`alloc`].
#[no_mangle]
pub unsafe extern "C" fn alloc_(n: *mut c_ulong, s: *const c_char) -> *mut c_void {
    // SAFETY: the caller's promise.
    unsafe { alloc(n, s) }
}

/// `nvs_free` for Fortran (the array itself is passed, which is its address).
#[no_mangle]
pub extern "C" fn nvs_free_(ptr: *mut c_void) {
    nvs_free(ptr)
}

/// `nvs_snapshot` for Fortran: a snapshot of this process's rank. Its argument is never
/// read, as NVStream never read it: codes call `call nvs_snapshot()` with no argument
/// (GTC), and gfortran then passes whatever a register holds.
#[no_mangle]
pub extern "C" fn nvs_snapshot_(_proc_id: *mut c_int) {
    wrap("nvs_snapshot_", || {
        let mut r = rank_lock()?;
        let rank = r.as_mut().ok_or_else(no_rank)?;
        let id = rank.id;
        drop(r);
        snapshot(id)
    });
}

/// `nvs_finalize` for Fortran.
#[no_mangle]
pub extern "C" fn nvs_finalize_() -> c_int {
    nvs_finalize()
}

#[cfg(test)]
mod tests {
    use super::{decimal, default_segment, parse_flag, parse_size, Repeats};
    use std::cell::Cell;

    #[test]
    fn repeated_failures_are_counted_until_another_or_a_success() {
        let r = Repeats { last: Cell::new(0), times: Cell::new(0) };
        let counts: Vec<u64> = (0..5).map(|_| r.failed(b"pool full")).collect();
        assert_eq!(counts, [1, 2, 3, 4, 5]);
        assert_eq!(r.failed(b"pool fulL"), 1, "another message");
        assert_eq!(r.failed(b"pool fulL"), 2);
        r.succeeded();
        assert_eq!(r.failed(b"pool fulL"), 1, "after a success");
        assert_eq!(r.failed(b""), 1);
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(1024, &mut buf), b"1024");
        assert_eq!(decimal(u64::MAX, &mut buf), b"18446744073709551615");
    }

    #[test]
    fn flags() {
        for yes in ["1", "true", "TRUE", "On", "yes", "YES"] {
            assert_eq!(parse_flag(yes), Some(true), "{yes}");
        }
        for no in ["0", "false", "False", "off", "OFF", "no"] {
            assert_eq!(parse_flag(no), Some(false), "{no}");
        }
        for bad in ["2", "y", "enable", "", "o"] {
            assert_eq!(parse_flag(bad), None, "{bad}");
        }
    }

    #[test]
    fn default_segments() {
        assert_eq!(default_segment(256 << 20), 1 << 20);
        assert_eq!(default_segment(8 << 20), 512 << 10);
        assert_eq!(default_segment(10 << 20), 512 << 10, "a power of two not above 1/16");
        assert_eq!(default_segment(4096), 4096);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("256M"), Some(256 << 20));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999T"), None);
    }
}
