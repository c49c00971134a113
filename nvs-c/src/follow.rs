//! Followers: a reader (in this process or another) that sees every object as it
//! commits, the end of the stream, and a writer that died. Versions that retention
//! (`nvs_reclaim`, the wrapper's `NVS_KEEP`) released before the follower read them are
//! skipped without an event: the next version of that name it reports is more than one
//! above the last.

use crate::error::*;
use crate::pool::get_from;
use nvs_std::{Committed, Followed, Follower};
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::ffi::{c_char, c_void, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// `nvs_follower_wait` returned a committed object.
pub const NVS_EVENT_OBJECT: i32 = 1;
/// Every lane that joined the stream (and every expected one) ended its stream, and
/// nothing new remains.
pub const NVS_EVENT_END_OF_STREAM: i32 = 2;
/// No writer holds the pool, a lane was never ended, and nothing new remains: the writer
/// died. (A pool no writer has written yet is waited on instead.)
pub const NVS_EVENT_WRITER_GONE: i32 = 3;
/// Nothing happened before the timeout.
pub const NVS_EVENT_TIMEOUT: i32 = 4;

/// A follower of a pool (opaque). Use it from one thread at a time, but for gets: several
/// threads may get from it at once while no other call on it runs (a call that would
/// overlap another thread's is `NVS_E_BUSY`, never a race; but no thread may call on it
/// once one closes it).
pub struct nvs_follower {
    /// Calls inside the handle: the gets in flight, or [`ALONE`] while any other call
    /// runs ([`follower`], [`follower_shared`]).
    calls: AtomicUsize,
    inner: UnsafeCell<Following>,
}

/// What a follower handle holds.
struct Following {
    f: Follower,
    queue: VecDeque<Committed>,
}

/// [`nvs_follower::calls`] while a call other than a get runs.
const ALONE: usize = usize::MAX;

// SAFETY: `inner` is reached as `&Following` only by gets, counted in `calls`, and as
// `&mut Following` only by the one call that swung `calls` from 0 to `ALONE`; `Following`
// is `Sync` (checked below), so gets on several threads at once may share it.
unsafe impl Sync for nvs_follower {}

const _: () = {
    const fn sync<T: Sync>() {}
    sync::<Following>()
};

/// A call other than a get inside a follower handle, alone in it until dropped.
struct Alone<'a>(&'a nvs_follower, #[allow(dead_code)] Entered);

impl Alone<'_> {
    fn get(&mut self) -> &mut Following {
        // SAFETY: this call swung `calls` to `ALONE`: no other reference to `inner` exists
        // until it is dropped.
        unsafe { &mut *self.0.inner.get() }
    }
}

impl Drop for Alone<'_> {
    fn drop(&mut self) {
        self.0.calls.store(0, Ordering::Release);
    }
}

/// A get inside a follower handle, counted in `calls` until dropped.
struct Shared<'a>(&'a nvs_follower, #[allow(dead_code)] Entered);

impl Shared<'_> {
    fn get(&self) -> &Following {
        // SAFETY: `calls` counts this get: no call holds `inner` as `&mut` until it ends.
        unsafe { &*self.0.inner.get() }
    }
}

impl Drop for Shared<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::Release);
    }
}

fn overlapping() -> Fail {
    Fail { status: NVS_E_BUSY, msg: "another thread is inside a call on this follower (only gets may overlap)".into() }
}

/// What `nvs_follower_wait` learnt.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct nvs_event {
    /// `NVS_EVENT_OBJECT`, `NVS_EVENT_END_OF_STREAM`, `NVS_EVENT_WRITER_GONE` or
    /// `NVS_EVENT_TIMEOUT`; the other fields are set for `NVS_EVENT_OBJECT` only, but
    /// `lane`.
    pub kind: i32,
    /// The lane that committed the object; for `NVS_EVENT_WRITER_GONE`, the lowest lane
    /// whose writer is gone (an MPI rank's lane names the rank that died).
    pub lane: u32,
    /// The sequence number (in its lane) of the unit that committed it.
    pub seq: u64,
    /// Its version.
    pub version: u64,
    /// Its length.
    pub len: u64,
    /// The name's length in bytes.
    pub name_len: u32,
    /// The name, NUL-terminated.
    pub name: [c_char; 256],
}

/// The follower of handle `f` for a call that is not a get, with this thread [`Entered`]
/// in it (a signal handler's call on it while this one runs is refused); `NVS_E_BUSY`
/// while another thread is inside a call on it.
///
/// # Safety
/// `f` is NULL or a live handle.
unsafe fn follower<'a>(f: *mut nvs_follower) -> Res<Alone<'a>> {
    // SAFETY: the caller's promise; only `calls` is touched before it is won.
    let h = unsafe { f.cast_const().as_ref() }.ok_or_else(|| arg("follower is NULL"))?;
    let entered = enter(f as usize)?;
    h.calls.compare_exchange(0, ALONE, Ordering::Acquire, Ordering::Relaxed).map_err(|_| overlapping())?;
    Ok(Alone(h, entered))
}

/// [`follower`] for a get, which several threads may make on one follower at once.
///
/// # Safety
/// `f` is NULL or a live handle.
unsafe fn follower_shared<'a>(f: *mut nvs_follower) -> Res<Shared<'a>> {
    // SAFETY: the caller's promise.
    let h = unsafe { f.cast_const().as_ref() }.ok_or_else(|| arg("follower is NULL"))?;
    let entered = enter(f as usize)?;
    let mut now = h.calls.load(Ordering::Relaxed);
    loop {
        if now >= ALONE - 1 {
            return Err(overlapping());
        }
        match h.calls.compare_exchange_weak(now, now + 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return Ok(Shared(h, entered)),
            Err(seen) => now = seen,
        }
    }
}

/// Follow the pool at `path` (opened read-only; it never writes and takes no lock).
/// `only` (NULL: every name) follows one name: an empty one is `NVS_E_ARG`, one longer
/// than `NVS_NAME_MAX` `NVS_E_TOO_LARGE` (it would match nothing, for ever). The first
/// wait reports every object already committed.
///
/// # Safety
/// `path` is a NUL-terminated string; `only` is NULL or one; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_follower_open(
    path: *const c_char,
    only: *const c_char,
    out: *mut *mut nvs_follower,
) -> i32 {
    guard("nvs_follower_open", || {
        if out.is_null() {
            return Err(arg("out is NULL"));
        }
        // SAFETY: the caller's promises.
        let path = unsafe { cstr(path, "path")? };
        let only = match only.is_null() {
            true => None,
            // SAFETY: the caller's promise.
            false => Some(unsafe { cstr(only, "only")? }.to_vec()),
        };
        let f = Follower::open(std::path::Path::new(OsStr::from_bytes(path)), only)?;
        let h = Box::new(nvs_follower {
            calls: AtomicUsize::new(0),
            inner: UnsafeCell::new(Following { f, queue: VecDeque::new() }),
        });
        // SAFETY: checked non-null; the caller's promise.
        unsafe { out.write(Box::into_raw(h)) };
        Ok(())
    })
}

/// Declare a lane the stream has: it ends only once that lane has joined and ended its
/// stream too (a writer yet to start cannot be missed). `NVS_E_ARG` for a lane the pool
/// does not have (its stream could never end). `NVS_E_BUSY` while another thread is
/// inside a call on the follower.
///
/// # Safety
/// `f` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn nvs_follower_expect_lane(f: *mut nvs_follower, lane: u32) -> i32 {
    guard("nvs_follower_expect_lane", || {
        // SAFETY: the caller's promise.
        let mut call = unsafe { follower(f)? };
        let h = call.get();
        // A lane the pool cannot have would never end its stream: refused (NoSuchLane).
        Ok(h.f.expect_lanes([lane])?)
    })
}

/// Wait for the next event: an object (one per call, in lane order), the end of the
/// stream, a writer gone, or the timeout. `timeout_ms` < 0 waits as long as it takes;
/// 0 looks once. `NVS_E_IO` once the pool file was removed, moved or replaced at its
/// path while no writer holds it (no writer could open it again). Versions that
/// retention (`nvs_reclaim`, `NVS_KEEP`) released before the follower read them are
/// skipped silently: a follower behind a writer that reclaims sees a gap in a name's
/// versions, nothing else. `NVS_E_BUSY` while another thread is inside a call on the
/// follower; and for as long as this waits (up to `timeout_ms`), other threads' gets
/// from it are `NVS_E_BUSY`.
///
/// # Safety
/// `f` is NULL or a live handle; `ev` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn nvs_follower_wait(f: *mut nvs_follower, timeout_ms: i64, ev: *mut nvs_event) -> i32 {
    guard("nvs_follower_wait", || {
        if ev.is_null() {
            return Err(arg("ev is NULL"));
        }
        // SAFETY: the caller's promise.
        let mut call = unsafe { follower(f)? };
        let h = call.get();
        let mut out =
            nvs_event { kind: NVS_EVENT_TIMEOUT, lane: 0, seq: 0, version: 0, len: 0, name_len: 0, name: [0; 256] };
        if h.queue.is_empty() {
            let timeout = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
            match h.f.wait(timeout, Duration::from_millis(1))? {
                Followed::Objects(objs) => h.queue.extend(objs),
                Followed::EndOfStream => out.kind = NVS_EVENT_END_OF_STREAM,
                Followed::WriterGone => {
                    out.kind = NVS_EVENT_WRITER_GONE;
                    out.lane = h.f.gone_lanes().first().copied().unwrap_or(0);
                }
                Followed::Timeout => out.kind = NVS_EVENT_TIMEOUT,
            }
        }
        if let Some(c) = h.queue.pop_front() {
            out.kind = NVS_EVENT_OBJECT;
            out.lane = c.lane;
            out.seq = c.seq;
            out.version = c.version;
            out.len = c.len_bytes;
            out.name_len = c.name.len() as u32;
            for (d, s) in out.name.iter_mut().zip(&c.name) {
                *d = *s as c_char;
            }
        }
        // SAFETY: checked non-null; the caller's promise.
        unsafe { ev.write(out) };
        Ok(())
    })
}

/// `nvs_get` on the follower's view of the pool (as of its last wait). Several threads
/// may get from one follower at once; `NVS_E_BUSY` while another thread is inside a call
/// on it that is not a get.
///
/// # Safety
/// `f` is NULL or a live handle; the rest as for `nvs_get`.
#[no_mangle]
pub unsafe extern "C" fn nvs_follower_get(
    f: *mut nvs_follower,
    name: *const c_char,
    version: u64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> i32 {
    guard("nvs_follower_get", || {
        // SAFETY: the caller's promises.
        let (call, name, buf) =
            unsafe { (follower_shared(f)?, cstr(name, "name")?, bytes_mut(buf.cast(), cap, "buf")?) };
        get_from(call.get().f.pool(), None, name, version, buf, len)
    })
}

/// `nvs_get_on` on the follower's view of the pool (as of its last wait): in a pool with
/// lane names, where several lanes hold a name (each MPI rank its own `temperature`),
/// the event's `lane` says whose version it is. Several threads may get from one
/// follower at once; `NVS_E_BUSY` while another thread is inside a call on it that is
/// not a get.
///
/// # Safety
/// `f` is NULL or a live handle; the rest as for `nvs_get`.
#[no_mangle]
pub unsafe extern "C" fn nvs_follower_get_on(
    f: *mut nvs_follower,
    lane: u32,
    name: *const c_char,
    version: u64,
    buf: *mut c_void,
    cap: usize,
    len: *mut usize,
) -> i32 {
    guard("nvs_follower_get_on", || {
        // SAFETY: the caller's promises.
        let (call, name, buf) =
            unsafe { (follower_shared(f)?, cstr(name, "name")?, bytes_mut(buf.cast(), cap, "buf")?) };
        get_from(call.get().f.pool(), Some(lane), name, version, buf, len)
    })
}

/// Stop following and free the handle. NULL is a no-op; `NVS_E_BUSY` while another
/// thread is inside a call on it. It does not stop other threads' calls: none may start
/// during the close or after it (it would find the handle freed).
///
/// # Safety
/// `f` is NULL or a live handle, not used again by any thread.
#[no_mangle]
pub unsafe extern "C" fn nvs_follower_close(f: *mut nvs_follower) -> i32 {
    if f.is_null() {
        return NVS_OK;
    }
    guard("nvs_follower_close", || {
        // Not under a call of this thread on it, nor while another thread is in one. A
        // call another thread starts meanwhile is the caller's use after close: refused
        // (`calls` is ALONE) until the free, undefined after it.
        // SAFETY: the caller's promise.
        let h = unsafe { f.cast_const().as_ref() }.ok_or_else(|| arg("follower is NULL"))?;
        drop(enter(f as usize)?);
        h.calls.compare_exchange(0, ALONE, Ordering::Acquire, Ordering::Relaxed).map_err(|_| overlapping())?;
        // SAFETY: the caller's promise; no call is inside it.
        drop(unsafe { Box::from_raw(f) });
        Ok(())
    })
}
