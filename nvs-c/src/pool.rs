//! Pools, lanes, puts and gets.
//!
//! A pool handle is shared by every thread of the caller: calls that read (gets, the
//! listing calls) run side by side; calls that write the pool as a whole (`nvs_put` and
//! friends while no lane handle is held, `nvs_reclaim`, `nvs_pool_refresh`) take it for
//! themselves for the call. A lane handle (`nvs_lane_take`) lets one thread put on its
//! lane with no lock at all, beside the other threads' lanes; while any is held, the
//! pool's own puts go through the lane they name the same way, and the calls that need
//! the whole pool (`nvs_reclaim`, `nvs_pool_refresh`, `nvs_pool_close`) return
//! `NVS_E_BUSY`.

mod batch;

use crate::error::*;
use batch::Scratch;
use nvs_core::Key;
use nvs_core::Object;
use nvs_std::{Access, CreateOptions, FileLane, FilePool};
use std::cell::UnsafeCell;
use std::ffi::{c_char, c_void, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard, TryLockError};

/// "The latest version", where a call takes a version to read.
pub const NVS_LATEST: u64 = 0;
/// Open for writing (one writer process at a time: the pool's writer lock).
pub const NVS_OPEN_READ_WRITE: i32 = 0;
/// Open read-only: any number of readers, beside a live writer in another process.
pub const NVS_OPEN_READ_ONLY: i32 = 1;
/// `nvs_pool_open_lane`: the lowest lane no other process is writing.
pub const NVS_ANY_LANE: u32 = u32::MAX;
/// The longest name, in bytes.
pub const NVS_NAME_MAX: usize = 255;
/// The most metadata an object carries, in bytes.
pub const NVS_META_MAX: usize = 1024;
const _: () = assert!(NVS_NAME_MAX == nvs_core::NAME_MAX && NVS_META_MAX == nvs_core::META_MAX);

/// An open pool (opaque). Thread-safe: share it between threads.
pub struct nvs_pool {
    /// Shared for reads and lane takes, exclusive for the calls that need `&mut`.
    lock: RwLock<()>,
    pool: UnsafeCell<FilePool>,
    /// Lane handles alive: while there are any, nothing takes `&mut` of the pool.
    lanes: AtomicUsize,
    /// Calls inside the handle ([`InCall`]), counted from before they wait for `lock`:
    /// a close refuses while any is, even one still waiting for the lock that the close
    /// could take first.
    calls: AtomicUsize,
    /// The fork generation it was opened in ([`nvs_std::fork_generation`]): in a child
    /// `fork` made, no other thread of the parent exists, and a lock one of them held at
    /// the fork stays taken for ever.
    born: u64,
    /// Where the pool's vectored and batch puts build their objects ([`Scratch`]).
    scratch: Mutex<Scratch>,
}

/// A call inside a pool handle, counted in [`nvs_pool::calls`] until it is dropped, its
/// thread [`Entered`] in it.
struct InCall<'a>(&'a nvs_pool, #[allow(dead_code)] Entered);

impl std::ops::Deref for InCall<'_> {
    type Target = nvs_pool;
    fn deref(&self) -> &nvs_pool {
        self.0
    }
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::SeqCst);
    }
}

// SAFETY: the pool inside is reached only through `shared` (a read guard, `&FilePool`,
// which is `Sync`) or `exclusive` (the write guard with no lane handle alive, so no
// other reference to it exists).
unsafe impl Sync for nvs_pool {}

/// One lane taken for writing by one thread (opaque). Use it from one thread at a time
/// (it may move between threads); release it before closing its pool.
pub struct nvs_lane {
    pool: *const nvs_pool,
    // `'static` stands for "as long as `pool`": the pool cannot be closed, nor taken for
    // `&mut`, while this handle lives (`nvs_pool::lanes`).
    w: Option<FileLane<'static>>,
    /// Where the lane's vectored and batch puts build their objects ([`Scratch`]).
    scratch: Scratch,
}

/// How `nvs_pool_create` formats a pool. All zero (or a NULL pointer) means the
/// defaults.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct nvs_create_options {
    /// Segment size in bytes (a multiple of 64, 4 KiB to 1 TiB); 0: the default (the
    /// largest power of two not above 1/16 of the pool, 4 KiB to 64 MiB).
    pub segment_len: u64,
    /// Writer lanes, 1 to 256; 0: 64.
    pub lanes_max: u32,
    /// Non-zero: no payload checksums (they are on by default).
    pub no_payload_checksum: i32,
    /// Non-zero: every lane has names of its own (ranks putting one name each get their
    /// own versions); needed for writer processes per lane (`nvs_pool_open_lane`).
    pub lane_names: i32,
}

/// One part of a vectored object.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvs_iovec {
    /// The part's bytes (NULL only with `len` 0).
    pub base: *const c_void,
    /// Its length.
    pub len: usize,
}

/// A byte range of an object that changed since its parent (delta puts).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvs_range {
    /// First byte.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// One object to put. Zero-initialise it and set what you need: `name`, and either
/// `data`/`len` or `parts`/`parts_len`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvs_object {
    /// Its name, NUL-terminated (1 to 255 bytes).
    pub name: *const c_char,
    /// Its bytes (NULL only with `len` 0).
    pub data: *const c_void,
    /// Their length.
    pub len: usize,
    /// Or its bytes in parts, stored one after the other (NULL: use `data`).
    pub parts: *const nvs_iovec,
    /// How many parts.
    pub parts_len: usize,
    /// An explicit version (above the name's latest); 0: the next one.
    pub version: u64,
    /// Metadata stored with it (for example `dtype=<f8\nshape=64,64\n`), NULL: none.
    pub meta: *const c_void,
    /// Its length (at most `NVS_META_MAX`).
    pub meta_len: usize,
    /// Non-zero: a delta put against this version of the name, storing only the ranges
    /// in `changes` (nvs stores a full version when a delta would not pay, or when
    /// `parent` is not a version of the same length).
    pub parent: u64,
    /// The ranges that differ from `parent`, ascending by offset. nvs trusts them: bytes
    /// outside them are stored as the parent's, unless the delta check is on
    /// (`nvs_set_delta_check`), which refuses a put whose ranges missed a change.
    pub changes: *const nvs_range,
    /// How many ranges.
    pub changes_len: usize,
}

/// What a put committed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct nvs_put_result {
    /// The version the object got.
    pub version: u64,
    /// Payload bytes written (less than the object's length for a delta).
    pub stored_bytes: u64,
    /// 1 if stored as a delta.
    pub delta: i32,
}

/// Facts about one committed version.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct nvs_object_info {
    /// Its version.
    pub version: u64,
    /// Its length (what a get returns).
    pub len: u64,
    /// Payload bytes on the media (less than `len` for a delta).
    pub stored_bytes: u64,
    /// 0 for a full version; for a delta, the deltas between it and its full version.
    pub depth: u32,
    /// The lane that committed it.
    pub lane: u32,
    /// Bytes of metadata stored with it.
    pub meta_len: u32,
}

/// Called by `nvs_names` for each name: the name (NUL-terminated; `len` bytes before
/// the NUL), its latest version and its number of versions, and the caller's `ctx`.
/// Return 0 to go on, anything else to stop. It must return: no `longjmp` out of it
/// (undefined behaviour), no C++ exception thrown through it (the process aborts). It
/// may call nvs, the pool included (closing it is `NVS_E_BUSY`: this call is inside).
pub type nvs_name_fn =
    Option<unsafe extern "C" fn(name: *const c_char, len: usize, latest: u64, versions: u32, ctx: *mut c_void) -> i32>;

impl nvs_pool {
    fn new(pool: FilePool) -> *mut nvs_pool {
        Box::into_raw(Box::new(nvs_pool {
            lock: RwLock::new(()),
            pool: UnsafeCell::new(pool),
            lanes: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            born: nvs_std::fork_generation(),
            scratch: Mutex::new(Scratch::with_room()),
        }))
    }

    /// Run `f` with the pool's scratch, or, while another thread's put has it (puts on
    /// several lanes through the pool while lane handles are held), with a fresh one of
    /// its own (which allocates as the batch needs). Never waits.
    fn with_scratch<T>(&self, f: impl FnOnce(&mut Scratch) -> T) -> T {
        match self.scratch.try_lock() {
            Ok(mut s) => f(&mut s),
            // A panic in a put that had it (caught at the boundary) left it empty, as
            // every put does: usable.
            Err(TryLockError::Poisoned(e)) => f(&mut e.into_inner()),
            Err(TryLockError::WouldBlock) => f(&mut Scratch::default()),
        }
    }

    /// Is this process a `fork` of the one that opened the pool?
    fn forked(&self) -> bool {
        nvs_std::fork_generation() != self.born
    }

    /// The pool for reading (and for lane takes), with its read guard.
    fn shared(&self) -> Res<(RwLockReadGuard<'_, ()>, &FilePool)> {
        let g = match self.forked() {
            false => self.lock.read().map_err(|_| poisoned())?,
            true => self.lock.try_read().map_err(held_at_fork)?,
        };
        // SAFETY: a read guard is held, so no `&mut` exists (see `exclusive`).
        Ok((g, unsafe { &*self.pool.get() }))
    }

    /// The pool for a call that needs all of it, if no lane handle is alive.
    // `&mut` from `&self`: the write guard returned with it makes it the only reference.
    #[allow(clippy::mut_from_ref)]
    fn exclusive(&self) -> Res<Option<(RwLockWriteGuard<'_, ()>, &mut FilePool)>> {
        let g = match self.forked() {
            false => self.lock.write().map_err(|_| poisoned())?,
            true => self.lock.try_write().map_err(held_at_fork)?,
        };
        if self.lanes.load(Ordering::Acquire) != 0 {
            return Ok(None);
        }
        // SAFETY: the write guard excludes every `shared` user, and no lane handle (the
        // only reference that outlives a guard) is alive: lane handles are counted under
        // a read guard, so none can appear while this guard is held.
        Ok(Some((g, unsafe { &mut *self.pool.get() })))
    }

    /// Like `exclusive`, but lane handles alive are an error.
    fn whole(&self) -> Res<(RwLockWriteGuard<'_, ()>, &mut FilePool)> {
        self.exclusive()?.ok_or_else(|| Fail {
            status: NVS_E_BUSY,
            msg: "lanes taken with nvs_lane_take are still held: release them first".into(),
        })
    }

    /// Run a write on `lane`: through the whole pool when no lane handle is alive (the
    /// faster path), else through the lane, beside the lane handles.
    fn on_lane<T>(
        &self,
        lane: u32,
        whole: impl FnOnce(&mut FilePool) -> nvs_std::Result<T>,
        one: impl FnOnce(&mut FileLane<'_>) -> nvs_std::Result<T>,
    ) -> Res<T> {
        self.on_lane_with(lane, (), |p, ()| whole(p), |w, ()| one(w))
    }

    /// [`on_lane`](Self::on_lane), with `ctx` given to the one of the two that runs.
    fn on_lane_with<C, T>(
        &self,
        lane: u32,
        ctx: C,
        whole: impl FnOnce(&mut FilePool, C) -> nvs_std::Result<T>,
        one: impl FnOnce(&mut FileLane<'_>, C) -> nvs_std::Result<T>,
    ) -> Res<T> {
        if let Some((_g, p)) = self.exclusive()? {
            return Ok(whole(p, ctx)?);
        }
        let (_g, p) = self.shared()?;
        let mut w = p.lane(lane)?;
        Ok(one(&mut w, ctx)?)
    }
}

fn in_use() -> Fail {
    Fail {
        status: NVS_E_BUSY,
        msg: "another thread is inside a call on this pool: close it once no other thread uses it".into(),
    }
}

/// In a `fork` child, the pool's lock is taken (`WouldBlock`): by a thread of the parent
/// that was inside a call at the fork, and exists no more (waiting would wait for ever).
fn held_at_fork<E>(e: std::sync::TryLockError<E>) -> Fail {
    match e {
        std::sync::TryLockError::Poisoned(_) => poisoned(),
        std::sync::TryLockError::WouldBlock => Fail {
            status: NVS_E_BUSY,
            msg: "another thread of the process this one was forked from was inside a call on this pool at the \
                  fork: the pool's state is theirs, half-changed, and this child cannot use it (open the pool \
                  again here; nvs_pool_close frees this handle)"
                .into(),
        },
    }
}

fn poisoned() -> Fail {
    Fail { status: NVS_E_PANIC, msg: "the pool is unusable after an earlier nvs bug (NVS_E_PANIC); close it".into() }
}

/// The handle `p`, with this call counted inside it until the result is dropped (keep
/// it for the whole call).
///
/// # Safety
/// `p` is null or a live handle from `nvs_pool_create`/`nvs_pool_open`.
unsafe fn pool_ref<'a>(p: *const nvs_pool) -> Res<InCall<'a>> {
    // SAFETY: the caller's promise.
    let p = unsafe { p.as_ref() }.ok_or_else(|| arg("pool is NULL"))?;
    let entered = enter(p as *const nvs_pool as usize)?;
    p.calls.fetch_add(1, Ordering::SeqCst);
    Ok(InCall(p, entered))
}

/// The lane writer of handle `l`, with this thread [`Entered`] in its pool (a signal
/// handler's call on the lane, or on its pool, while this one runs is refused).
///
/// # Safety
/// `l` is null or a live handle from `nvs_lane_take`.
unsafe fn lane_mut<'a>(l: *mut nvs_lane) -> Res<(Entered, &'a mut FileLane<'static>)> {
    // SAFETY: the caller's promise.
    let (entered, w, _) = unsafe { lane_scratch(l)? };
    Ok((entered, w))
}

/// [`lane_mut`], with the lane handle's scratch.
///
/// # Safety
/// As `lane_mut`.
unsafe fn lane_scratch<'a>(l: *mut nvs_lane) -> Res<(Entered, &'a mut FileLane<'static>, &'a mut Scratch)> {
    // SAFETY: the caller's promise.
    let l = unsafe { l.as_mut() }.ok_or_else(|| arg("lane is NULL"))?;
    let entered = enter(l.pool as usize)?;
    Ok((entered, l.w.as_mut().ok_or_else(|| arg("lane was released"))?, &mut l.scratch))
}

fn path_of(bytes: &[u8]) -> &std::path::Path {
    std::path::Path::new(OsStr::from_bytes(bytes))
}

/// Create a pool file of `size` bytes at `path` (refused if it exists) and open it for
/// writing; `opts` may be NULL (the defaults). On success `*out` is the new handle.
///
/// # Safety
/// `path` is a NUL-terminated string; `opts` is NULL or valid; `out` is valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_create(
    path: *const c_char,
    size: u64,
    opts: *const nvs_create_options,
    out: *mut *mut nvs_pool,
) -> i32 {
    // SAFETY: the caller's promises, passed on.
    guard("nvs_pool_create", || unsafe { create(path, size, opts, out, false) })
}

/// `nvs_pool_create` of a sparse pool: the file gets its blocks as segments are
/// claimed, not all at create, so a pool holding little takes little (memory on tmpfs)
/// and creates at once. A file system that fills refuses the put needing a new segment
/// (`NVS_E_FULL`, nothing written), never a signal. Fsdax files get every block anyway.
///
/// # Safety
/// As `nvs_pool_create`.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_create_sparse(
    path: *const c_char,
    size: u64,
    opts: *const nvs_create_options,
    out: *mut *mut nvs_pool,
) -> i32 {
    // SAFETY: the caller's promises, passed on.
    guard("nvs_pool_create_sparse", || unsafe { create(path, size, opts, out, true) })
}

/// # Safety
/// As `nvs_pool_create`.
unsafe fn create(
    path: *const c_char,
    size: u64,
    opts: *const nvs_create_options,
    out: *mut *mut nvs_pool,
    sparse: bool,
) -> Res<()> {
    if out.is_null() {
        return Err(arg("out is NULL"));
    }
    // SAFETY: the caller's promises.
    let (path, o) = unsafe { (cstr(path, "path")?, opts.as_ref().copied().unwrap_or_default()) };
    let mut co =
        CreateOptions::new().payload_checksum(o.no_payload_checksum == 0).lane_names(o.lane_names != 0).sparse(sparse);
    if o.segment_len != 0 {
        co = co.segment_len(o.segment_len);
    }
    if o.lanes_max != 0 {
        co = co.lanes_max(o.lanes_max);
    }
    let pool = FilePool::create(path_of(path), size, &co)?;
    // SAFETY: checked non-null; the caller's promise.
    unsafe { out.write(nvs_pool::new(pool)) };
    Ok(())
}

/// Open the pool at `path`; `mode` is `NVS_OPEN_READ_WRITE` or `NVS_OPEN_READ_ONLY`.
/// Recovery runs: every committed object is there, nothing else.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_open(path: *const c_char, mode: i32, out: *mut *mut nvs_pool) -> i32 {
    guard("nvs_pool_open", || {
        if out.is_null() {
            return Err(arg("out is NULL"));
        }
        let access = match mode {
            NVS_OPEN_READ_WRITE => Access::ReadWrite,
            NVS_OPEN_READ_ONLY => Access::ReadOnly,
            m => return Err(arg(format!("mode {m} is neither NVS_OPEN_READ_WRITE nor NVS_OPEN_READ_ONLY"))),
        };
        // SAFETY: the caller's promise.
        let path = unsafe { cstr(path, "path")? };
        let pool = FilePool::open(path_of(path), access)?;
        // SAFETY: checked non-null; the caller's promise.
        unsafe { out.write(nvs_pool::new(pool)) };
        Ok(())
    })
}

/// Open the pool at `path` to write lane `lane` (`NVS_ANY_LANE`: the lowest lane no
/// other process is writing) beside writer processes of its other lanes — an MPI rank
/// per lane. The pool must have lane names (created with `lane_names`; else `NVS_E_ARG`);
/// a lane another live process writes is `NVS_E_BUSY`; a lane whose writer died is taken
/// over where it ended. Puts to other lanes are refused; reads see the other writers'
/// objects as of the open or the last `nvs_pool_refresh`. `nvs_pool_owned_lane` tells
/// which lane was taken.
///
/// # Safety
/// `path` is a NUL-terminated string; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_open_lane(path: *const c_char, lane: u32, out: *mut *mut nvs_pool) -> i32 {
    guard("nvs_pool_open_lane", || {
        if out.is_null() {
            return Err(arg("out is NULL"));
        }
        // SAFETY: the caller's promise.
        let path = unsafe { cstr(path, "path")? };
        let lanes = [lane];
        let pool = FilePool::open_lanes(path_of(path), (lane != NVS_ANY_LANE).then_some(&lanes[..]))?;
        // SAFETY: checked non-null; the caller's promise.
        unsafe { out.write(nvs_pool::new(pool)) };
        Ok(())
    })
}

/// The lane a pool opened by `nvs_pool_open_lane` writes, into `*lane`; `NVS_E_ARG` for
/// a pool opened otherwise (which writes every lane, or none).
///
/// # Safety
/// `pool` is NULL or a live handle; `lane` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_owned_lane(pool: *const nvs_pool, lane: *mut u32) -> i32 {
    guard("nvs_pool_owned_lane", || {
        if lane.is_null() {
            return Err(arg("lane is NULL"));
        }
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        let (_g, fp) = p.shared()?;
        let owned = fp.owned_lanes().and_then(|o| o.first().copied());
        let owned = owned.ok_or_else(|| arg("the pool was not opened for one lane (nvs_pool_open_lane)"))?;
        // SAFETY: checked non-null; the caller's promise.
        unsafe { lane.write(owned) };
        Ok(())
    })
}

/// Close the pool: end the stream of every lane that joined it (followers see the end
/// of stream), unmap, unlock, free the handle. `NVS_E_BUSY` (and the pool stays open)
/// while lane handles are held, or while another thread is inside a call on the pool.
/// NULL is a no-op. No thread may make a call on the pool after it is closed. In a child
/// that `fork` made of the writer, closing writes nothing (the streams stay the parent's;
/// the child's puts are refused with `NVS_E_BUSY`). Any other error still closes the
/// pool and frees the handle: a lane whose stream cannot be ended (`NVS_E_FULL`: its
/// segment filled to the last byte, none free) keeps its objects, the other lanes' streams
/// are ended, and the first error is returned.
///
/// # Safety
/// `pool` is NULL or a live handle, not used again unless the close returned
/// `NVS_E_BUSY`.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_close(pool: *mut nvs_pool) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { close(pool, "nvs_pool_close", false) }
}

/// Close the pool without ending its streams: each lane that joined gets a detach
/// marker, so followers know this writer ended cleanly and wait for the next one (a
/// writer that restarts appends after the last committed version). Otherwise as
/// `nvs_pool_close`.
///
/// # Safety
/// As `nvs_pool_close`.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_close_detached(pool: *mut nvs_pool) -> i32 {
    // SAFETY: the caller's promise.
    unsafe { close(pool, "nvs_pool_close_detached", true) }
}

/// # Safety
/// As `nvs_pool_close`.
unsafe fn close(pool: *mut nvs_pool, what: &str, detach: bool) -> i32 {
    if pool.is_null() {
        return NVS_OK;
    }
    guard(what, || {
        // A call of this thread on it, interrupted by a signal handler making this one.
        let entered = enter(pool as usize)?;
        // SAFETY: the caller's promise.
        let p = unsafe { &*pool };
        if p.forked() {
            // A fork child: the parent's other threads (whose calls and lane handles the
            // counts below may still show) do not exist here. Close writes nothing.
            drop(entered);
            // SAFETY: the caller gives the handle up; no other thread of this process
            // can be using it.
            let fp = unsafe { Box::from_raw(pool) }.pool.into_inner();
            return Ok(fp.close()?);
        }
        // A call of another thread inside the handle (or waiting for it) would use it
        // after it is freed: refused, not waited for (a waiter would too).
        let g = p.lock.try_write().map_err(|e| match e {
            std::sync::TryLockError::WouldBlock => in_use(),
            std::sync::TryLockError::Poisoned(_) => poisoned(),
        })?;
        if p.lanes.load(Ordering::Acquire) != 0 {
            return Err(Fail {
                status: NVS_E_BUSY,
                msg: "lanes taken with nvs_lane_take are still held: release them first".into(),
            });
        }
        // A call that entered but waits for the lock (the close took it first).
        if p.calls.load(Ordering::SeqCst) != 0 {
            return Err(in_use());
        }
        drop(g);
        drop(entered);
        // SAFETY: no lane handle is alive, no other call is inside, and the caller gives
        // the handle up. From here on the handle is freed, whatever the result: no error
        // below is `NVS_E_BUSY`, the one status that promises it is still open (in a fork
        // child, close and detach write nothing and are `Ok`).
        let p = unsafe { Box::from_raw(pool) };
        let mut fp = p.pool.into_inner();
        if detach && fp.is_writable() {
            fp.detach()?;
            drop(fp);
            return Ok(());
        }
        Ok(fp.close()?)
    })
}

/// Catch up with the writers: of a pool opened read-only, or, of a pool opened for a lane
/// (`nvs_pool_open_lane`), with the other lanes' writer processes. Reads only what was
/// committed since the last refresh, or recovers again when it cannot be sure that is
/// right.
/// `NVS_E_BUSY` while lane handles are held.
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nvs_pool_refresh(pool: *mut nvs_pool) -> i32 {
    guard("nvs_pool_refresh", || {
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        let (_g, p) = p.whole()?;
        Ok(p.refresh()?)
    })
}

/// Take `lane` for writing from this thread: threads each holding their own lane put
/// side by side with no lock. `NVS_E_BUSY` if the lane is held already.
///
/// # Safety
/// `pool` is NULL or a live handle; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_lane_take(pool: *mut nvs_pool, lane: u32, out: *mut *mut nvs_lane) -> i32 {
    guard("nvs_lane_take", || {
        if out.is_null() {
            return Err(arg("out is NULL"));
        }
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        let (_g, fp) = p.shared()?;
        p.lanes.fetch_add(1, Ordering::AcqRel);
        let w = match fp.lane(lane) {
            Ok(w) => w,
            Err(e) => {
                p.lanes.fetch_sub(1, Ordering::AcqRel);
                return Err(e.into());
            }
        };
        // SAFETY: only the lifetime changes: the pool outlives the handle (it cannot be
        // closed or taken for `&mut` while `lanes` counts it).
        let w: FileLane<'static> = unsafe { std::mem::transmute::<FileLane<'_>, FileLane<'static>>(w) };
        // SAFETY: checked non-null; the caller's promise.
        unsafe { out.write(Box::into_raw(Box::new(nvs_lane { pool, w: Some(w), scratch: Scratch::with_room() }))) };
        Ok(())
    })
}

/// Give the lane back (its stream goes on: `nvs_lane_end_stream` ends it) and free the
/// handle. NULL is a no-op.
///
/// # Safety
/// `lane` is NULL or a live handle, not used again.
#[no_mangle]
pub unsafe extern "C" fn nvs_lane_release(lane: *mut nvs_lane) -> i32 {
    if lane.is_null() {
        return NVS_OK;
    }
    guard("nvs_lane_release", || {
        // Not under a put of this thread on the lane (a signal handler's release).
        // SAFETY: the caller's promise.
        drop(enter(unsafe { (*lane).pool } as usize)?);
        // SAFETY: the caller's promise.
        let mut l = unsafe { Box::from_raw(lane) };
        drop(l.w.take());
        // SAFETY: the pool outlives its lane handles.
        unsafe { &*l.pool }.lanes.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    })
}

fn result_of(p: nvs_core::Put) -> nvs_put_result {
    nvs_put_result { version: p.version, stored_bytes: p.stored_bytes, delta: p.delta as i32 }
}

/// Put `len` bytes at `data` as the next version of `name` on `lane`; `*version` (if
/// not NULL) gets its version. Returns once the put is durable.
///
/// # Safety
/// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `data` is NULL
/// or valid for `len` bytes; `version` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_put(
    pool: *mut nvs_pool,
    lane: u32,
    name: *const c_char,
    data: *const c_void,
    len: usize,
    version: *mut u64,
) -> i32 {
    guard("nvs_put", || {
        // SAFETY: the caller's promises.
        let (p, name, data) = unsafe { (pool_ref(pool)?, cstr(name, "name")?, bytes(data.cast(), len, "data")?) };
        let obj = Object::new(name, data);
        let put = p.on_lane(lane, |fp| fp.put(lane, obj), |w| w.put(obj))?;
        // SAFETY: the caller's promise.
        unsafe { put_out(version, put.version) };
        Ok(())
    })
}

/// Put one object described by `obj` (vectored, explicit version, metadata, delta) on
/// `lane`; `*result` (if not NULL) says what was committed.
///
/// # Safety
/// `pool` is NULL or a live handle; `obj` is valid, and its pointers are NULL or valid
/// for their lengths; `result` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_put_object(
    pool: *mut nvs_pool,
    lane: u32,
    obj: *const nvs_object,
    result: *mut nvs_put_result,
) -> i32 {
    guard("nvs_put_object", || {
        // SAFETY: the caller's promises.
        let (p, obj) = unsafe { (pool_ref(pool)?, obj.as_ref().ok_or_else(|| arg("obj is NULL"))?) };
        // SAFETY: the caller's promise for the object's pointers.
        let put = p.with_scratch(|s| unsafe {
            s.run(std::slice::from_ref(obj), false, |o, _| p.on_lane(lane, |fp| fp.put(lane, o[0]), |w| w.put(o[0])))
        })?;
        // SAFETY: the caller's promise.
        unsafe { put_out(result, result_of(put)) };
        Ok(())
    })
}

/// The objects of a batch, and the versions array they go to, checked; `f` runs on them
/// as `Object`s (with the plan slots of a large batch), built in `scratch`.
///
/// # Safety
/// As `nvs_put_batch`.
unsafe fn batch(
    scratch: &mut Scratch,
    objs: *const nvs_object,
    n: usize,
    versions: *mut u64,
    f: impl FnOnce(&[Object<'_>], &mut [u64], &mut Vec<nvs_core::PlanSlot>) -> Res,
) -> Res {
    // SAFETY: the caller's promises.
    unsafe {
        if n == 0 {
            return Err(arg("an empty batch (n is 0)"));
        }
        let objs = slice(objs, n, "objs")?;
        scratch.run(objs, true, |objects, slots| {
            let out: &mut [u64] = if versions.is_null() { &mut [] } else { slice_mut(versions, n, "versions")? };
            f(objects, out, slots)
        })
    }
}

/// Commit the `n` objects at `objs` together on `lane`, in one unit: after a crash all
/// of them or none are there. Any number of objects from 1, up to what the pool holds.
/// `versions` (if not NULL) gets their `n` versions, in order. A refusal of one object
/// (its name, metadata, version, size, delta, or its fields) returns that error's
/// status, and `nvs_last_error` names the object by its index in `objs`: `object 2 of
/// the batch: empty name`. Nothing is committed on any error.
///
/// # Safety
/// `pool` is NULL or a live handle; `objs` is valid for `n` objects (each as for
/// `nvs_put_object`); `versions` is NULL or valid for `n` writes.
#[no_mangle]
pub unsafe extern "C" fn nvs_put_batch(
    pool: *mut nvs_pool,
    lane: u32,
    objs: *const nvs_object,
    n: usize,
    versions: *mut u64,
) -> i32 {
    guard("nvs_put_batch", || {
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        p.with_scratch(|s| {
            // SAFETY: the caller's promises.
            unsafe {
                batch(s, objs, n, versions, |objects, out, slots| {
                    p.on_lane_with(
                        lane,
                        (out, slots),
                        |fp, (out, slots)| fp.put_batch_into(lane, objects, out, slots),
                        |w, (out, slots)| w.put_batch_into(objects, out, slots),
                    )
                })
            }
        })
    })
}

/// End `lane`'s stream: followers see its end of stream (a later put reopens it).
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nvs_end_stream(pool: *mut nvs_pool, lane: u32) -> i32 {
    guard("nvs_end_stream", || {
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        p.on_lane(lane, |fp| fp.close_lane(lane), |w| w.close())
    })
}

/// `nvs_put` on a lane handle.
///
/// # Safety
/// `lane` is NULL or a live handle; the rest as for `nvs_put`.
#[no_mangle]
pub unsafe extern "C" fn nvs_lane_put(
    lane: *mut nvs_lane,
    name: *const c_char,
    data: *const c_void,
    len: usize,
    version: *mut u64,
) -> i32 {
    guard("nvs_lane_put", || {
        // SAFETY: the caller's promises.
        let ((_in, w), name, data) =
            unsafe { (lane_mut(lane)?, cstr(name, "name")?, bytes(data.cast(), len, "data")?) };
        let put = w.put(Object::new(name, data))?;
        // SAFETY: the caller's promise.
        unsafe { put_out(version, put.version) };
        Ok(())
    })
}

/// `nvs_put_object` on a lane handle.
///
/// # Safety
/// `lane` is NULL or a live handle; the rest as for `nvs_put_object`.
#[no_mangle]
pub unsafe extern "C" fn nvs_lane_put_object(
    lane: *mut nvs_lane,
    obj: *const nvs_object,
    result: *mut nvs_put_result,
) -> i32 {
    guard("nvs_lane_put_object", || {
        // SAFETY: the caller's promises.
        let ((_in, w, s), obj) = unsafe { (lane_scratch(lane)?, obj.as_ref().ok_or_else(|| arg("obj is NULL"))?) };
        // SAFETY: the caller's promise for the object's pointers.
        let put = unsafe { s.run(std::slice::from_ref(obj), false, |o, _| Ok(w.put(o[0])?))? };
        // SAFETY: the caller's promise.
        unsafe { put_out(result, result_of(put)) };
        Ok(())
    })
}

/// `nvs_put_batch` on a lane handle.
///
/// # Safety
/// `lane` is NULL or a live handle; the rest as for `nvs_put_batch`.
#[no_mangle]
pub unsafe extern "C" fn nvs_lane_put_batch(
    lane: *mut nvs_lane,
    objs: *const nvs_object,
    n: usize,
    versions: *mut u64,
) -> i32 {
    guard("nvs_lane_put_batch", || {
        // SAFETY: the caller's promises.
        let (_in, w, s) = unsafe { lane_scratch(lane)? };
        // SAFETY: the caller's promises.
        unsafe { batch(s, objs, n, versions, |objects, out, slots| Ok(w.put_batch_into(objects, out, slots)?)) }
    })
}

/// End the lane's stream (the handle stays taken; release it after).
///
/// # Safety
/// `lane` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nvs_lane_end_stream(lane: *mut nvs_lane) -> i32 {
    guard("nvs_lane_end_stream", || {
        // SAFETY: the caller's promise.
        let (_in, w) = unsafe { lane_mut(lane)? };
        Ok(w.close()?)
    })
}

/// `version`, or the latest version of `name` for `NVS_LATEST`.
fn resolve(fp: &FilePool, name: &[u8], version: u64) -> Res<u64> {
    resolve_on(fp, None, name, version)
}

/// [`resolve`] of `lane`'s `name` (`None`: by name alone).
fn resolve_on(fp: &FilePool, lane: Option<u32>, name: &[u8], version: u64) -> Res<u64> {
    Ok(match version {
        NVS_LATEST => fp.latest(Key::new(lane, name))?,
        v => v,
    })
}

/// Copy version `version` of lane `lane`'s `name` (`NVS_LATEST`: its latest) into `buf`
/// of `cap` bytes; `*len` the object's length (size query and `NVS_E_TOO_SMALL` as for
/// `nvs_get`). In a pool with lane names, the name in that lane's name space (rank r's
/// `temperature`); otherwise the version only if that lane wrote it.
///
/// # Safety
/// As `nvs_get`.
#[no_mangle]
pub unsafe extern "C" fn nvs_get_on(
    pool: *const nvs_pool,
    lane: u32,
    name: *const c_char,
    version: u64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> i32 {
    guard("nvs_get_on", || {
        // SAFETY: the caller's promises.
        let (p, name, buf) = unsafe { (pool_ref(pool)?, cstr(name, "name")?, bytes_mut(buf.cast(), cap, "buf")?) };
        let (_g, fp) = p.shared()?;
        get_from(fp, Some(lane), name, version, buf, len)
    })
}

/// The latest version of lane `lane`'s `name` (see `nvs_get_on`).
///
/// # Safety
/// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `version` is
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_latest_on(
    pool: *const nvs_pool,
    lane: u32,
    name: *const c_char,
    version: *mut u64,
) -> i32 {
    guard("nvs_latest_on", || {
        if version.is_null() {
            return Err(arg("version is NULL"));
        }
        // SAFETY: the caller's promises.
        let (p, name) = unsafe { (pool_ref(pool)?, cstr(name, "name")?) };
        let (_g, fp) = p.shared()?;
        let v = fp.latest(Key::on(lane, name))?;
        // SAFETY: checked non-null; the caller's promise.
        unsafe { version.write(v) };
        Ok(())
    })
}

/// Copy `version` of `name` (`NVS_LATEST`: the latest) of `pool` into `buf`, with one
/// lookup: a buffer too small (an empty one: a size query) is told the length by the get.
pub(crate) fn get_from(
    fp: &FilePool,
    lane: Option<u32>,
    name: &[u8],
    version: u64,
    buf: &mut [u8],
    len: *mut usize,
) -> Res {
    let version = resolve_on(fp, lane, name, version)?;
    let got = fp.get(Key::new(lane, name), version, buf);
    let e = match got {
        Ok(n) => {
            // SAFETY: the caller's promise (len is NULL or valid).
            unsafe { put_out(len, n) };
            return Ok(());
        }
        Err(e) => e,
    };
    let Some(nvs_core::Error::BufferTooSmall { needed_bytes: need }) = e.core() else { return Err(e.into()) };
    let need_usize = usize::try_from(need).map_err(|_| arg("object larger than this address space"))?;
    // SAFETY: as above.
    unsafe { put_out(len, need_usize) };
    if buf.is_empty() {
        return Ok(()); // a size query
    }
    Err(Fail { status: NVS_E_TOO_SMALL, msg: format!("the buffer holds {} bytes, the object has {need}", buf.len()) })
}

/// Copy version `version` of `name` (`NVS_LATEST`: the latest) into `buf`, which holds
/// `cap` bytes; `*len` gets the object's length. A size query: `buf` NULL and `cap` 0
/// store the length and return `NVS_OK`. A buffer too small: `NVS_E_TOO_SMALL`, `*len`
/// the length it needs.
///
/// # Safety
/// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `buf` is NULL or
/// valid for `cap` bytes; `len` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_get(
    pool: *const nvs_pool,
    name: *const c_char,
    version: u64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> i32 {
    guard("nvs_get", || {
        // SAFETY: the caller's promises.
        let (p, name, buf) = unsafe { (pool_ref(pool)?, cstr(name, "name")?, bytes_mut(buf.cast(), cap, "buf")?) };
        let (_g, fp) = p.shared()?;
        get_from(fp, None, name, version, buf, len)
    })
}

/// The metadata stored with version `version` of `name` (`NVS_LATEST`: the latest),
/// into `buf` of `cap` bytes; `*len` its length. Size query and `NVS_E_TOO_SMALL` as
/// for `nvs_get`.
///
/// # Safety
/// As `nvs_get`.
#[no_mangle]
pub unsafe extern "C" fn nvs_get_meta(
    pool: *const nvs_pool,
    name: *const c_char,
    version: u64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> i32 {
    guard("nvs_get_meta", || {
        // SAFETY: the caller's promises.
        let (p, name, buf) = unsafe { (pool_ref(pool)?, cstr(name, "name")?, bytes_mut(buf.cast(), cap, "buf")?) };
        let (_g, fp) = p.shared()?;
        let version = resolve(fp, name, version)?;
        let meta = fp.meta(name, version)?;
        // SAFETY: the caller's promise.
        unsafe { put_out(len, meta.len()) };
        if buf.len() < meta.len() && !buf.is_empty() {
            let msg = format!("the buffer holds {} bytes, the metadata has {}", buf.len(), meta.len());
            return Err(Fail { status: NVS_E_TOO_SMALL, msg });
        }
        if let Some(b) = buf.get_mut(..meta.len()) {
            b.copy_from_slice(&meta);
        }
        Ok(())
    })
}

/// Facts about version `version` of `name` (`NVS_LATEST`: the latest).
///
/// # Safety
/// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `info` is valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_stat(
    pool: *const nvs_pool,
    name: *const c_char,
    version: u64,
    info: *mut nvs_object_info,
) -> i32 {
    guard("nvs_stat", || {
        if info.is_null() {
            return Err(arg("info is NULL"));
        }
        // SAFETY: the caller's promises.
        let (p, name) = unsafe { (pool_ref(pool)?, cstr(name, "name")?) };
        let (_g, fp) = p.shared()?;
        let version = resolve(fp, name, version)?;
        let i = fp.stat(name, version)?;
        let out = nvs_object_info {
            version: i.version,
            len: i.len_bytes,
            stored_bytes: i.stored_bytes,
            depth: i.depth,
            lane: i.lane,
            meta_len: u32::from(i.meta_len),
        };
        // SAFETY: checked non-null; the caller's promise.
        unsafe { info.write(out) };
        Ok(())
    })
}

/// The latest version of `name`.
///
/// # Safety
/// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `version` is
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_latest(pool: *const nvs_pool, name: *const c_char, version: *mut u64) -> i32 {
    guard("nvs_latest", || {
        if version.is_null() {
            return Err(arg("version is NULL"));
        }
        // SAFETY: the caller's promises.
        let (p, name) = unsafe { (pool_ref(pool)?, cstr(name, "name")?) };
        let (_g, fp) = p.shared()?;
        let v = fp.latest(name)?;
        // SAFETY: checked non-null; the caller's promise.
        unsafe { version.write(v) };
        Ok(())
    })
}

/// The versions of `name`, ascending, into `out` (room for `cap`); `*count` gets how
/// many there are. A size query: `out` NULL and `cap` 0. Room for fewer:
/// `NVS_E_TOO_SMALL`, the first `cap` stored.
///
/// # Safety
/// `pool` is NULL or a live handle; `name` is a NUL-terminated string; `out` is NULL
/// or valid for `cap` writes; `count` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_versions(
    pool: *const nvs_pool,
    name: *const c_char,
    out: *mut u64,
    cap: usize,
    count: *mut usize,
) -> i32 {
    guard("nvs_versions", || {
        if count.is_null() {
            return Err(arg("count is NULL"));
        }
        // SAFETY: the caller's promises.
        let (p, name, out) = unsafe { (pool_ref(pool)?, cstr(name, "name")?, slice_mut(out, cap, "out")?) };
        let (_g, fp) = p.shared()?;
        let versions: Vec<u64> = fp.versions(name)?.map(|i| i.version).collect();
        // SAFETY: checked non-null; the caller's promise.
        unsafe { count.write(versions.len()) };
        out.iter_mut().zip(&versions).for_each(|(o, v)| *o = *v);
        if cap != 0 && cap < versions.len() {
            let msg = format!("room for {cap} versions, the name has {}", versions.len());
            return Err(Fail { status: NVS_E_TOO_SMALL, msg });
        }
        Ok(())
    })
}

/// Call `cb` for each name in the pool, in no particular order. The names are taken
/// when the call starts; `cb` may call nvs (the pool included). In a pool with lane
/// names a name is listed once per lane that has it (each with that lane's latest
/// version and count): `nvs_names_on` lists one lane's.
///
/// # Safety
/// `pool` is NULL or a live handle; `cb` is a valid function; `ctx` is passed through.
#[no_mangle]
pub unsafe extern "C" fn nvs_names(pool: *const nvs_pool, cb: nvs_name_fn, ctx: *mut c_void) -> i32 {
    guard("nvs_names", || {
        // SAFETY: the caller's promises.
        unsafe { names_of(pool, None, cb, ctx) }
    })
}

/// `nvs_names` for lane `lane`'s names: in a pool with lane names, the names of that
/// lane's name space (rank r's); otherwise the names `lane` wrote a version of (with
/// the name's latest version and count, of every lane).
///
/// # Safety
/// As `nvs_names`.
#[no_mangle]
pub unsafe extern "C" fn nvs_names_on(pool: *const nvs_pool, lane: u32, cb: nvs_name_fn, ctx: *mut c_void) -> i32 {
    guard("nvs_names_on", || {
        // SAFETY: the caller's promises.
        unsafe { names_of(pool, Some(lane), cb, ctx) }
    })
}

/// # Safety
/// As `nvs_names`.
unsafe fn names_of(pool: *const nvs_pool, lane: Option<u32>, cb: nvs_name_fn, ctx: *mut c_void) -> Res {
    // SAFETY: the caller's promise.
    let p = unsafe { pool_ref(pool)? };
    let cb = cb.ok_or_else(|| arg("cb is NULL"))?;
    let names: Vec<(Vec<u8>, u64, u32)> = {
        let (_g, fp) = p.shared()?;
        let mut buf = [0u8; nvs_core::NAME_MAX];
        let on_lane = |n: &nvs_core::NameInfo, name: &[u8]| match (lane, n.lane) {
            (None, _) => true,
            (Some(l), Some(own)) => l == own,
            (Some(l), None) => fp.versions(name).is_ok_and(|mut v| v.any(|i| i.lane == l)),
        };
        fp.names()
            .filter_map(|n| {
                let name = fp.name_bytes(n.id, &mut buf).to_vec();
                on_lane(&n, &name).then_some((name, n.latest, n.versions))
            })
            .collect()
    };
    // Empty: a name whose bytes a live writer reused since this view's refresh.
    for (name, latest, versions) in names.into_iter().filter(|n| !n.0.is_empty()) {
        let len = name.len();
        let mut z = name;
        z.push(0);
        // SAFETY: a NUL-terminated name; the caller's promise for `cb` and `ctx`.
        if outside(pool as usize, || unsafe { cb(z.as_ptr().cast(), len, latest, versions, ctx) }) != 0 {
            break;
        }
    }
    Ok(())
}

/// Check every delta put on this pool (`nvs_object::parent`, and lane handles' puts)
/// against its parent before anything is written: `on` non-zero refuses a put whose
/// `changes` missed a change with `NVS_E_DELTA`; 0 trusts them (bytes outside the ranges
/// are stored as the parent's). The check reads the parent, a get per delta put. Off by
/// default in release builds of nvs, on in debug builds. `NVS_E_BUSY` while lane handles
/// are held.
///
/// # Safety
/// `pool` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nvs_set_delta_check(pool: *mut nvs_pool, on: i32) -> i32 {
    guard("nvs_set_delta_check", || {
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        let (_g, fp) = p.whole()?;
        fp.set_delta_check(on != 0);
        Ok(())
    })
}

/// Retention: release the oldest segments whose objects all have at least `keep` newer
/// versions; `*freed` (if not NULL) gets how many segments were freed. `NVS_E_BUSY`
/// while lane handles are held.
///
/// # Safety
/// `pool` is NULL or a live handle; `freed` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_reclaim(pool: *mut nvs_pool, keep: u32, freed: *mut u32) -> i32 {
    guard("nvs_reclaim", || {
        // SAFETY: the caller's promise.
        let p = unsafe { pool_ref(pool)? };
        let (_g, fp) = p.whole()?;
        let n = fp.reclaim(keep)?;
        // SAFETY: the caller's promise.
        unsafe { put_out(freed, n) };
        Ok(())
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    /// A close while another thread is inside a call on the pool (here: holding its read
    /// guard, as every call does) is `NVS_E_BUSY` at once; it used to wait for the call
    /// and free the handle under the next one (a segfault in a thread putting in a loop).
    #[test]
    fn close_refuses_a_pool_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::ffi::CString::new(dir.path().join("p.pool").as_os_str().as_bytes()).unwrap();
        let mut p: *mut nvs_pool = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        assert_eq!(unsafe { nvs_pool_create(path.as_ptr(), 4 << 20, std::ptr::null(), &mut p) }, NVS_OK);
        // SAFETY: a live handle, closed only below.
        let in_call = unsafe { &*p }.lock.read().unwrap();
        let addr = p as usize;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: the handle is live; a successful close frees it (none is expected).
            let rc = unsafe { nvs_pool_close(addr as *mut nvs_pool) };
            tx.send(rc).unwrap()
        });
        let rc = rx.recv_timeout(std::time::Duration::from_secs(5));
        assert_eq!(rc, Ok(NVS_E_BUSY), "a close waited for (or ran beside) a call in flight");
        drop(in_call);
        // SAFETY: nothing else uses the handle now.
        assert_eq!(unsafe { nvs_pool_close(p) }, NVS_OK);
    }

    /// A call that has entered the handle but still waits for its lock (another call
    /// held it, and the close took it first when that call returned) keeps the pool
    /// open: the close used to succeed then and free the lock the call waited on (a
    /// segfault in the waiting `nvs_get`, found by a C program retrying a close that
    /// returned `NVS_E_BUSY`). Here the entered call is the counted handle itself,
    /// holding no lock.
    #[test]
    fn close_refuses_a_pool_a_call_waits_for() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::ffi::CString::new(dir.path().join("p.pool").as_os_str().as_bytes()).unwrap();
        let mut p: *mut nvs_pool = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        assert_eq!(unsafe { nvs_pool_create(path.as_ptr(), 4 << 20, std::ptr::null(), &mut p) }, NVS_OK);
        // SAFETY: a live handle, closed only below.
        let Ok(entered) = (unsafe { pool_ref(p) }) else { panic!("a live handle") };
        // SAFETY: the handle is live; a successful close would free it (none is expected).
        assert_eq!(unsafe { nvs_pool_close(p) }, NVS_E_BUSY, "closed under a call inside the handle");
        assert!(entered.shared().is_ok(), "the call goes on");
        drop(entered);
        // SAFETY: nothing else uses the handle now.
        assert_eq!(unsafe { nvs_pool_close(p) }, NVS_OK);
    }

    /// Batches built in a handle's scratch, reused call after call: vectored objects,
    /// metadata, explicit versions and deltas beside plain ones, over `BATCH_MAX` objects
    /// (the plan in the scratch's slots) and under it, through the pool and through a lane
    /// handle, a refused batch between them (naming its object, committing nothing); every
    /// object reads back as put.
    #[test]
    fn batches_reuse_the_scratch() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::ffi::CString::new(dir.path().join("p.pool").as_os_str().as_bytes()).unwrap();
        let mut p: *mut nvs_pool = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        assert_eq!(unsafe { nvs_pool_create(path.as_ptr(), 64 << 20, std::ptr::null(), &mut p) }, NVS_OK);
        let names: Vec<std::ffi::CString> =
            (0..300).map(|i| std::ffi::CString::new(format!("n{i}")).unwrap()).collect();
        let data: Vec<Vec<u8>> = (0..300).map(|i| vec![i as u8; 100 + i]).collect();
        let meta = b"dtype=<u1\n";
        // Round `r`'s objects `0..n`: every third vectored (three parts), every fifth with
        // metadata, every seventh at an explicit version, and (after round 0) every
        // eleventh a delta of its previous version changing its first byte.
        let run = |r: u64, n: usize, lane: *mut nvs_lane, bad: Option<usize>| -> (i32, Vec<u64>, Vec<Vec<u8>>) {
            let bytes: Vec<Vec<u8>> = (0..n)
                .map(|i| {
                    let mut b = data[i].clone();
                    b[0] = r as u8;
                    b
                })
                .collect();
            let iov: Vec<[nvs_iovec; 3]> = bytes
                .iter()
                .map(|b| {
                    let (a, rest) = b.split_at(10);
                    let (m, z) = rest.split_at(20);
                    [a, m, z].map(|s| nvs_iovec { base: s.as_ptr().cast(), len: s.len() })
                })
                .collect();
            let change = [nvs_range { offset: 0, len: 1 }];
            let objs: Vec<nvs_object> = (0..n)
                .map(|i| {
                    let mut o = nvs_object {
                        name: names[i].as_ptr(),
                        data: bytes[i].as_ptr().cast(),
                        len: bytes[i].len(),
                        parts: std::ptr::null(),
                        parts_len: 0,
                        version: 0,
                        meta: std::ptr::null(),
                        meta_len: 0,
                        parent: 0,
                        changes: std::ptr::null(),
                        changes_len: 0,
                    };
                    if i % 3 == 0 {
                        (o.data, o.len, o.parts, o.parts_len) = (std::ptr::null(), 0, iov[i].as_ptr(), 3);
                    }
                    if i % 5 == 0 {
                        (o.meta, o.meta_len) = (meta.as_ptr().cast(), meta.len());
                    }
                    if i % 7 == 0 {
                        o.version = 10 * (r + 1);
                    } else if i % 11 == 0 && r > 0 {
                        (o.parent, o.changes, o.changes_len) = (10 * r, change.as_ptr(), 1);
                        o.version = 10 * (r + 1);
                    }
                    if Some(i) == bad {
                        (o.data, o.len, o.parts, o.parts_len) = (std::ptr::null(), 0, iov[i].as_ptr(), usize::MAX);
                    }
                    o
                })
                .collect();
            let mut v = vec![0u64; n];
            let rc = if lane.is_null() {
                // SAFETY: a live handle; every pointer valid for the call.
                unsafe { nvs_put_batch(p, 0, objs.as_ptr(), n, v.as_mut_ptr()) }
            } else {
                // SAFETY: a live lane handle; every pointer valid for the call.
                unsafe { nvs_lane_put_batch(lane, objs.as_ptr(), n, v.as_mut_ptr()) }
            };
            (rc, v, bytes)
        };
        let check = |n: usize, v: &[u64], bytes: &[Vec<u8>]| {
            for i in 0..n {
                let mut buf = vec![0u8; bytes[i].len()];
                let mut len = 0usize;
                // SAFETY: a live handle; valid buffers.
                let rc = unsafe { nvs_get(p, names[i].as_ptr(), v[i], buf.as_mut_ptr().cast(), buf.len(), &mut len) };
                assert_eq!((rc, len), (NVS_OK, bytes[i].len()), "object {i}");
                assert!(buf == bytes[i], "object {i} version {} reads back otherwise", v[i]);
                let mut m = [0u8; 16];
                // SAFETY: as above.
                let rc = unsafe { nvs_get_meta(p, names[i].as_ptr(), v[i], m.as_mut_ptr().cast(), 16, &mut len) };
                assert_eq!((rc, len), (NVS_OK, if i % 5 == 0 { meta.len() } else { 0 }), "object {i}'s meta");
            }
        };
        let rounds = [(300, false), (40, false), (300, true), (256, true), (257, false), (3, true)];
        for (round, (n, on_lane)) in (0u64..).zip(rounds) {
            let mut lane: *mut nvs_lane = std::ptr::null_mut();
            if on_lane {
                // SAFETY: a live handle, a valid out pointer.
                assert_eq!(unsafe { nvs_lane_take(p, 0, &mut lane) }, NVS_OK);
            }
            // A refused batch first: its last object's parts are too long.
            let (rc, ..) = run(round + 1, n, lane, Some(n - 1));
            assert_eq!(rc, NVS_E_ARG);
            // SAFETY: nvs_last_error returns a valid NUL-terminated string.
            let msg =
                unsafe { std::ffi::CStr::from_ptr(crate::error::nvs_last_error()) }.to_string_lossy().into_owned();
            assert!(msg.contains(&format!("object {} of the batch: object parts", n - 1)), "{msg}");
            let (rc, v, bytes) = run(round, n, lane, None);
            assert_eq!(rc, NVS_OK, "round {round}: {n} objects");
            for i in (0..n).filter(|i| i % 7 == 0 || (i % 11 == 0 && round > 0)) {
                assert_eq!(v[i], 10 * (round + 1), "object {i}'s explicit version");
            }
            if on_lane {
                // SAFETY: the lane handle taken above.
                assert_eq!(unsafe { nvs_lane_release(lane) }, NVS_OK);
            }
            check(n, &v, &bytes);
        }
        // SAFETY: nothing else uses the handle now.
        assert_eq!(unsafe { nvs_pool_close(p) }, NVS_OK);
    }

    /// A batch refused because of one object returns that error's status, and the last
    /// error names the object by its index: nvs-core's refusals, and this crate's own
    /// checks of an object's fields.
    #[test]
    fn a_refused_batch_names_the_object() {
        let dir = tempfile::tempdir().unwrap();
        let path = std::ffi::CString::new(dir.path().join("p.pool").as_os_str().as_bytes()).unwrap();
        let mut p: *mut nvs_pool = std::ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        assert_eq!(unsafe { nvs_pool_create(path.as_ptr(), 4 << 20, std::ptr::null(), &mut p) }, NVS_OK);
        let obj = |name: &std::ffi::CStr, version: u64| nvs_object {
            name: name.as_ptr(),
            data: b"v".as_ptr().cast(),
            len: 1,
            parts: std::ptr::null(),
            parts_len: 0,
            version,
            meta: std::ptr::null(),
            meta_len: 0,
            parent: 0,
            changes: std::ptr::null(),
            changes_len: 0,
        };
        let last = || {
            // SAFETY: nvs_last_error returns a valid NUL-terminated string.
            unsafe { std::ffi::CStr::from_ptr(crate::error::nvs_last_error()) }.to_string_lossy().into_owned()
        };
        let long = std::ffi::CString::new(vec![b'n'; nvs_core::NAME_MAX + 1]).unwrap();
        // SAFETY: a live handle; every object's pointers are valid for the call.
        let put = |objs: &[nvs_object]| unsafe { nvs_put_batch(p, 0, objs.as_ptr(), objs.len(), std::ptr::null_mut()) };
        assert_eq!(put(&[obj(c"x", 5)]), NVS_OK);
        let cases = [
            (obj(c"", 0), NVS_E_ARG, "empty name"),
            (obj(&long, 0), NVS_E_TOO_LARGE, "too long"),
            (obj(c"x", 5), NVS_E_VERSION, "version 5 is not greater than the latest version 5"),
        ];
        for (bad, status, what) in cases {
            assert_eq!(put(&[obj(c"a", 0), obj(c"b", 0), bad]), status, "{what}");
            let msg = last();
            assert!(msg.contains("object 2 of the batch: ") && msg.contains(what), "{msg}");
        }
        // A field of the object refused before nvs sees it.
        let mut no_name = obj(c"c", 0);
        no_name.name = std::ptr::null();
        assert_eq!(put(&[obj(c"a", 0), obj(c"b", 0), no_name]), NVS_E_ARG);
        assert!(last().contains("object 2 of the batch: object name is NULL"), "{}", last());
        // SAFETY: nothing else uses the handle now.
        assert_eq!(unsafe { nvs_pool_close(p) }, NVS_OK);
    }
}
