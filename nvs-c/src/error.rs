//! Status codes, the per-thread last-error message, and the guard every entry point
//! runs its body in (argument checks, error mapping, no panic across the boundary).

use std::cell::{Cell, RefCell};
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Success.
pub const NVS_OK: i32 = 0;
/// A bad argument: a null handle or pointer, a null buffer with a non-zero length, a
/// length no buffer can have (above `PTRDIFF_MAX` bytes), an empty name, a lane out of
/// range, conflicting fields of an `nvs_object`.
pub const NVS_E_ARG: i32 = 1;
/// No object of that name, or no such version of it.
pub const NVS_E_NOT_FOUND: i32 = 2;
/// The caller's buffer is too small; the length it needs was stored where the call
/// returns lengths.
pub const NVS_E_TOO_SMALL: i32 = 3;
/// The pool has no room left (no free segment, no run of them long enough, its index
/// is full, or the file system has no space for a sparse pool's next segment).
/// Retention (`nvs_reclaim`) frees room.
pub const NVS_E_FULL: i32 = 4;
/// Larger than the pool allows: an object, a name (255 bytes) or metadata (1 KiB).
pub const NVS_E_TOO_LARGE: i32 = 5;
/// The pool's bytes are damaged, or the file is not an nvs pool.
pub const NVS_E_CORRUPT: i32 = 6;
/// Another writer holds the pool, or the lane is taken, or (for calls that need the
/// whole pool) lanes taken with `nvs_lane_take` are still held; or another thread is
/// inside a call on the handle that this one may not overlap (`nvs_pool_close`, a
/// follower's calls but its gets), or this thread is (a signal handler's call).
pub const NVS_E_BUSY: i32 = 7;
/// The pool is open read-only (or has an older format, readable only).
pub const NVS_E_READ_ONLY: i32 = 8;
/// A system call failed (open, map, msync...), or the file cannot be a pool.
pub const NVS_E_IO: i32 = 9;
/// An explicit version not above the name's latest.
pub const NVS_E_VERSION: i32 = 10;
/// A delta put whose changed ranges are wrong: out of the object, or (with the delta
/// check on, `nvs_set_delta_check`) they missed a change.
pub const NVS_E_DELTA: i32 = 11;
/// A bug in nvs (a Rust panic, caught at the boundary). The handle it happened on must
/// not be used again except to close it.
pub const NVS_E_PANIC: i32 = 12;
/// Anything else (the message says what).
pub const NVS_E_OTHER: i32 = 13;

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
    /// A message that needs no memory of its own: when set, it is the last error (a
    /// refused re-entry sets it, in a signal handler where allocating could deadlock).
    static LAST_STATIC: Cell<Option<&'static CStr>> = const { Cell::new(None) };
    /// The handles this thread is inside a call on (0: a free place), see [`enter`]:
    /// every one, not only the latest, as a signal handler (or a callback) may reach a
    /// handle through a call on another.
    static INSIDE: [Cell<usize>; ENTERED_MAX] = const { [const { Cell::new(0) }; ENTERED_MAX] };
    /// The last refusal was a re-entry ([`enter`]): [`guard`] reports it with no allocation.
    static REENTERED: Cell<bool> = const { Cell::new(false) };
    /// This thread is running an entry point's body or building its result ([`guard`]),
    /// not a caller's callback ([`outside`]).
    static RUNNING: Cell<bool> = const { Cell::new(false) };
}

/// The message of the last failed call on this thread (an empty string if none failed
/// yet). Valid until the next nvs call on this thread. Thread-safe (per thread).
#[no_mangle]
pub extern "C" fn nvs_last_error() -> *const c_char {
    if let Some(s) = LAST_STATIC.with(Cell::get) {
        return s.as_ptr();
    }
    // Borrowed already: a signal handler interrupted this thread's own update of it.
    // Gone (a call from a thread-local destructor or an exit handler, after this thread's
    // own were run): no message rather than a panic.
    LAST.try_with(|l| l.try_borrow().map_or(c"".as_ptr(), |m| m.as_ptr())).unwrap_or(c"".as_ptr())
}

/// Calls on distinct handles one thread can be inside at once (a call, a signal handler's
/// call inside it, another's inside that...); one more is refused as a re-entry.
const ENTERED_MAX: usize = 8;

/// This thread inside a call on one handle, until dropped ([`enter`]).
pub(crate) struct Entered(usize);

impl Drop for Entered {
    fn drop(&mut self) {
        leave(self.0);
    }
}

/// Forget that this thread is inside a call on `key`.
fn leave(key: usize) {
    INSIDE.with(|slots| {
        if let Some(s) = slots.iter().find(|s| s.get() == key) {
            s.set(0)
        }
    });
}

/// Enter a call on the handle `key` (its address). A thread already inside a call on it
/// is refused with `NVS_E_BUSY` at once, without allocating: it would otherwise wait for
/// ever for a lock its own thread holds, or write through state the interrupted call is
/// changing. [`guard`] already refuses every call a signal handler makes inside another
/// (and a callback's calls are made [`outside`] the handle), so this is the second line,
/// per handle, for any path to a handle in use that the first does not see. Take it
/// before the handle's lock; drop it after. (A handler that interrupts this between its
/// look and its mark, and returns, leaves the places as it found them.)
pub(crate) fn enter(key: usize) -> Res<Entered> {
    let busy = || {
        REENTERED.with(|r| r.set(true));
        Err(Fail { status: NVS_E_BUSY, msg: String::new() })
    };
    INSIDE.with(|slots| {
        if slots.iter().any(|s| s.get() == key) {
            return busy();
        }
        match slots.iter().find(|s| s.get() == 0) {
            Some(s) => {
                s.set(key);
                Ok(Entered(key))
            }
            None => busy(), // calls nested ENTERED_MAX deep: handlers in handlers
        }
    })
}

/// Run a caller's callback from inside a call on `key`: it may call nvs on that handle
/// (the call holds no lock of it meanwhile), so for its duration this thread is not inside
/// `key` — but still inside every other handle it entered.
pub(crate) fn outside<T>(key: usize, f: impl FnOnce() -> T) -> T {
    leave(key);
    RUNNING.with(|r| r.set(false));
    let r = f();
    RUNNING.with(|r| r.set(true));
    INSIDE.with(|slots| {
        if let Some(s) = slots.iter().find(|s| s.get() == 0) {
            s.set(key)
        }
    });
    r
}

/// The last error of a refused re-entry ([`enter`]), set without allocating.
pub(crate) fn set_reentered() {
    LAST_STATIC.with(|s| s.set(Some(REENTERED_MSG)));
}

/// The message of a refused re-entry ([`set_reentered`]).
const REENTERED_MSG: &CStr = c"this thread is inside an nvs call already (a signal handler that interrupted \
      it?): refused, not waited for. nvs calls are not async-signal-safe: \
      set a flag in the handler and call nvs after it returns";

/// The name of a status code (`"NVS_E_FULL"`, ...), a static string.
#[no_mangle]
pub extern "C" fn nvs_status_name(status: i32) -> *const c_char {
    let s: &'static CStr = match status {
        NVS_OK => c"NVS_OK",
        NVS_E_ARG => c"NVS_E_ARG",
        NVS_E_NOT_FOUND => c"NVS_E_NOT_FOUND",
        NVS_E_TOO_SMALL => c"NVS_E_TOO_SMALL",
        NVS_E_FULL => c"NVS_E_FULL",
        NVS_E_TOO_LARGE => c"NVS_E_TOO_LARGE",
        NVS_E_CORRUPT => c"NVS_E_CORRUPT",
        NVS_E_BUSY => c"NVS_E_BUSY",
        NVS_E_READ_ONLY => c"NVS_E_READ_ONLY",
        NVS_E_IO => c"NVS_E_IO",
        NVS_E_VERSION => c"NVS_E_VERSION",
        NVS_E_DELTA => c"NVS_E_DELTA",
        NVS_E_PANIC => c"NVS_E_PANIC",
        NVS_E_OTHER => c"NVS_E_OTHER",
        _ => c"unknown status",
    };
    s.as_ptr()
}

/// A failed call: its status and message.
pub(crate) struct Fail {
    pub status: i32,
    pub msg: String,
}

pub(crate) type Res<T = ()> = Result<T, Fail>;

/// A bad argument.
pub(crate) fn arg(msg: impl Into<String>) -> Fail {
    Fail { status: NVS_E_ARG, msg: msg.into() }
}

impl From<nvs_std::Error> for Fail {
    fn from(e: nvs_std::Error) -> Fail {
        use nvs_std::Error as S;
        // A batch's error about one object: the status of that error (the message names
        // the object's index).
        let status = match e.unbatched().0 {
            S::NotFound { .. } => NVS_E_NOT_FOUND,
            S::Locked { .. } | S::Forked { .. } => NVS_E_BUSY,
            S::Io { .. }
            | S::Sync { .. }
            | S::System { .. }
            | S::Exists { .. }
            | S::Unsupported { .. }
            | S::Replaced { .. } => NVS_E_IO,
            S::DeltaMismatch { .. } => NVS_E_DELTA,
            S::BadMeta { .. } | S::NameNul { .. } => NVS_E_ARG,
            S::Core { source, .. } | S::Damaged { source, .. } => core_status(source),
            _ => NVS_E_OTHER,
        };
        // Keep the message one line whatever a source said.
        let msg = e.to_string().replace('\n', " ");
        Fail { status, msg }
    }
}

impl From<nvs_core::Error> for Fail {
    fn from(e: nvs_core::Error) -> Fail {
        Fail { status: core_status(&e), msg: e.to_string() }
    }
}

fn core_status(e: &nvs_core::Error) -> i32 {
    use nvs_core::Error as C;
    match e {
        C::NotFound => NVS_E_NOT_FOUND,
        C::BufferTooSmall { .. } => NVS_E_TOO_SMALL,
        C::Full | C::NoSpace | C::Fragmented { .. } | C::IndexFull { .. } => NVS_E_FULL,
        C::TooLarge { .. } | C::NameTooLong { .. } | C::MetaTooLong { .. } | C::BatchSize { .. } => NVS_E_TOO_LARGE,
        C::Corrupted { .. } | C::NotFormatted | C::UnsupportedVersion { .. } => NVS_E_CORRUPT,
        C::LaneBusy { .. } | C::LaneNotOwned { .. } | C::ClaimLockTimeout { .. } => NVS_E_BUSY,
        C::ReadOnly | C::OldFormat { .. } => NVS_E_READ_ONLY,
        C::VersionNotIncreasing { .. } => NVS_E_VERSION,
        C::DeltaRanges { .. } | C::ChangesInconsistent => NVS_E_DELTA,
        C::NameEmpty
        | C::NoSuchLane { .. }
        | C::BadGeometry { .. }
        | C::DeltaOptions { .. }
        | C::ElementSize { .. }
        | C::NeedsLaneNames
        | C::AmbiguousName { .. } => NVS_E_ARG,
        _ => NVS_E_OTHER,
    }
}

/// Record `msg` as this thread's last error.
pub(crate) fn set_last(msg: &str) {
    // A message with a NUL inside (from a name) is cut there.
    let c = CString::new(msg).unwrap_or_else(|e| {
        let at = e.nul_position();
        let mut v = e.into_vec();
        v.truncate(at);
        CString::new(v).unwrap_or_default()
    });
    LAST_STATIC.with(|s| s.set(None));
    // Borrowed already: a signal handler's call interrupted this thread's own update
    // of it (the handler's message is lost, never a panic at the boundary).
    // Gone (at the thread's or the process's end, a signal handler's or a destructor's
    // call): kept as a fixed message, never a panic at the boundary.
    let kept = LAST.try_with(|l| {
        if let Ok(mut m) = l.try_borrow_mut() {
            *m = c
        }
    });
    if kept.is_err() {
        LAST_STATIC.with(|s| s.set(Some(c"nvs: the call failed while this thread was ending (its message is lost)")));
    }
}

/// Clear this thread's last error, without allocating.
pub(crate) fn clear_last() {
    LAST_STATIC.with(|s| s.set(Some(c"")));
}

/// Run an entry point's body: its error becomes a status and a message, a panic
/// becomes [`NVS_E_PANIC`].
///
/// A call made while this thread runs another's body or builds its message — a signal
/// handler's, on any handle — is refused at once as a re-entry, without allocating: the
/// interrupted call may be inside the allocator, holding its lock, and any call allocates
/// (a put's index, an error's message), so it would wait for ever. Calls from a caller's
/// callback ([`outside`]) are not re-entries.
pub(crate) fn guard(what: &str, body: impl FnOnce() -> Res) -> i32 {
    guard_then(what, body, |_, _| {})
}

/// [`guard`], then `after` with the status and the failure's message (the bytes
/// `nvs_last_error` gives; empty on success), while a signal handler's call is still
/// refused: the caller's report of its own message, which such a call would replace.
pub(crate) fn guard_then(what: &str, body: impl FnOnce() -> Res, after: impl FnOnce(i32, &[u8])) -> i32 {
    if RUNNING.with(|r| r.replace(true)) {
        set_reentered();
        return NVS_E_BUSY;
    }
    let (status, msg) = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => (NVS_OK, None),
        Ok(Err(f)) if REENTERED.with(|r| r.replace(false)) => {
            set_reentered();
            (f.status, None)
        }
        Ok(Err(f)) => {
            let m = format!("{what}: {}", f.msg);
            set_last(&m);
            (f.status, Some(m))
        }
        Err(p) => {
            let why = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            let m = format!("{what}: nvs bug (please report): {why}");
            set_last(&m);
            drop(p);
            (NVS_E_PANIC, Some(m))
        }
    };
    let text = match (&msg, status) {
        (_, NVS_OK) => &b""[..],
        // As set_last keeps it: up to a NUL inside.
        (Some(m), _) => m.as_bytes().split(|&b| b == 0).next().unwrap_or_default(),
        (None, _) => REENTERED_MSG.to_bytes(),
    };
    after(status, text);
    // Freed while a signal handler's call is still refused: one let in while this
    // thread is inside the allocator would wait for its lock for ever.
    drop(msg);
    RUNNING.with(|r| r.set(false));
    status
}

/// Store `v` through `out` if it is not null.
///
/// # Safety
/// `out` is null or valid for a write of `T`.
pub(crate) unsafe fn put_out<T>(out: *mut T, v: T) {
    if !out.is_null() {
        // SAFETY: the caller's promise.
        unsafe { out.write(v) }
    }
}

/// A C string argument as bytes (without its NUL).
///
/// # Safety
/// `s` is null or points to a NUL-terminated string valid for the call.
pub(crate) unsafe fn cstr<'a>(s: *const c_char, what: &str) -> Res<&'a [u8]> {
    if s.is_null() {
        return Err(arg(format!("{what} is NULL")));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { CStr::from_ptr(s) }.to_bytes())
}

/// No buffer holds more than `isize::MAX` bytes (a slice may not): a longer length
/// (`SIZE_MAX` for "big enough", a negative length cast) is a bad argument, not UB.
fn fits<T>(len: usize, what: &str) -> Res {
    match len.checked_mul(size_of::<T>().max(1)) {
        Some(b) if b <= isize::MAX as usize => Ok(()),
        _ => Err(arg(format!("{what}: a length of {len} is more than any buffer holds (PTRDIFF_MAX bytes)"))),
    }
}

/// `(ptr, len)` as a byte slice: a null `ptr` is allowed only with `len == 0`.
///
/// # Safety
/// `ptr` is null or valid for reads of `len` bytes for the call.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize, what: &str) -> Res<&'a [u8]> {
    fits::<u8>(len, what)?;
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(arg(format!("{what} is NULL with a length of {len}"))) };
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// `(ptr, len)` as a mutable byte slice: a null `ptr` is allowed only with `len == 0`.
///
/// # Safety
/// `ptr` is null or valid for writes of `len` bytes for the call.
pub(crate) unsafe fn bytes_mut<'a>(ptr: *mut u8, len: usize, what: &str) -> Res<&'a mut [u8]> {
    // SAFETY: the caller's promise.
    unsafe { slice_mut(ptr, len, what) }
}

/// `(ptr, len)` as a mutable slice of `T`: the one door through which an entry point
/// writes to a caller's buffer or array. A null `ptr` is allowed only with `len == 0`;
/// `len` values must fit in `PTRDIFF_MAX` bytes (`SIZE_MAX` for "big enough" is
/// `NVS_E_ARG`, never a write past the array); `ptr` must be aligned for `T`.
///
/// # Safety
/// `ptr` is null or valid for writes of `len` values of `T` for the call.
pub(crate) unsafe fn slice_mut<'a, T>(ptr: *mut T, len: usize, what: &str) -> Res<&'a mut [T]> {
    fits::<T>(len, what)?;
    if ptr.is_null() {
        return if len == 0 { Ok(&mut []) } else { Err(arg(format!("{what} is NULL with a length of {len}"))) };
    }
    if !ptr.is_aligned() {
        return Err(arg(format!("{what} is not aligned for its type")));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr, len) })
}

/// `(ptr, len)` as a slice of `T`: a null `ptr` is allowed only with `len == 0`.
///
/// # Safety
/// `ptr` is null or valid for reads of `len` values of `T` for the call.
pub(crate) unsafe fn slice<'a, T>(ptr: *const T, len: usize, what: &str) -> Res<&'a [T]> {
    fits::<T>(len, what)?;
    if ptr.is_null() {
        return if len == 0 { Ok(&[]) } else { Err(arg(format!("{what} is NULL with a count of {len}"))) };
    }
    if !ptr.is_aligned() {
        return Err(arg(format!("{what} is not aligned for its type")));
    }
    // SAFETY: the caller's promise.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}
