//! SIGINT, SIGTERM or SIGHUP during a benchmark: the files it made are removed and the
//! worker processes it started are killed before the process ends by that signal (a
//! benchmark's files are hundreds of MiB to GiB of memory in /dev/shm, which nothing
//! else would free).
//!
//! The handler may only call async-signal-safe functions (`unlink`, `kill`,
//! `sigaction`, `sigprocmask`, `raise`, `_exit`) and read memory that is ready before
//! the signal: the paths and process ids it acts on sit in fixed tables of atomics,
//! filled by [`File::new`] and [`Worker::new`] and emptied when they are dropped. A path's
//! bytes are never freed (one short string per file the bench makes): a signal on
//! another thread may still be reading them while its entry goes.
//!
//! The handlers are installed by [`install`] (at the start of [`crate::run`] and
//! [`crate::delta::run`]) for each of the three signals whose disposition is the
//! default; one a caller ignores or handles itself is left alone.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use std::sync::Once;

/// Entries of each table: far more than a run holds at once (9 files, 2 workers). A
/// file or worker that finds no free entry is still removed (killed) on every other exit
/// path.
const ENTRIES: usize = 64;

/// Files to unlink: C strings (null: free entry).
static FILES: [AtomicPtr<libc::c_char>; ENTRIES] = [const { AtomicPtr::new(std::ptr::null_mut()) }; ENTRIES];

/// Worker processes to kill (0: free entry).
static WORKERS: [AtomicI32; ENTRIES] = [const { AtomicI32::new(0) }; ENTRIES];

/// The signals that end a benchmark early.
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// From now on, SIGINT, SIGTERM and SIGHUP (where their disposition is the default)
/// remove the registered files and kill the registered workers, then end the process by
/// the same signal.
pub(crate) fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        for sig in SIGNALS {
            // SAFETY: zeroed `sigaction`s are valid values; every field used is set, the
            // pointers are to live locals, and `on_signal` is an `extern "C" fn(c_int)`
            // that only calls async-signal-safe functions.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0 || old.sa_sigaction != libc::SIG_DFL {
                    continue;
                }
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

extern "C" fn on_signal(sig: libc::c_int) {
    for w in &WORKERS {
        let pid = w.load(Ordering::SeqCst);
        if pid > 0 {
            // SAFETY: `kill` is async-signal-safe; `pid` is a child not yet reaped (its
            // entry is emptied before it is waited for), so it is no other process.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    for f in &FILES {
        let p = f.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: `unlink` is async-signal-safe; `p` is a C string that is never freed.
            unsafe { libc::unlink(p) };
        }
    }
    // End by the same signal: its default action again, unblocked (it is blocked while
    // its handler runs), raised. `_exit` only if that returned.
    // SAFETY: `sigaction`, `sigprocmask`, `raise` and `_exit` are async-signal-safe; the
    // pointers are to live locals.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::raise(sig);
        libc::_exit(128 + sig);
    }
}

/// A file the signal handler removes while this lives (dropping it does not remove the
/// file: the caller does, after the drop).
pub(crate) struct File(Option<usize>);

impl File {
    /// Register `path` (no entry is taken if none is free or the path holds a NUL).
    pub(crate) fn new(path: &Path) -> File {
        let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return File(None) };
        let p = c.into_raw();
        for (k, e) in FILES.iter().enumerate() {
            if e.compare_exchange(std::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return File(Some(k));
            }
        }
        // SAFETY: `p` came from `CString::into_raw` just above and was never shared.
        drop(unsafe { CString::from_raw(p) });
        File(None)
    }
}

impl Drop for File {
    fn drop(&mut self) {
        if let Some(k) = self.0.take() {
            // The string is left allocated (module docs).
            FILES[k].store(std::ptr::null_mut(), Ordering::SeqCst);
        }
    }
}

/// A worker process the signal handler kills until [`Worker::forget`] (before the
/// process is waited for: after that its id may be another process's).
pub(crate) struct Worker(Option<usize>);

impl Worker {
    /// Register the child `pid`.
    pub(crate) fn new(pid: u32) -> Worker {
        let Ok(pid) = i32::try_from(pid) else { return Worker(None) };
        for (k, e) in WORKERS.iter().enumerate() {
            if e.compare_exchange(0, pid, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                return Worker(Some(k));
            }
        }
        Worker(None)
    }

    /// No longer killed by the handler (call before waiting for the process).
    pub(crate) fn forget(&mut self) {
        if let Some(k) = self.0.take() {
            WORKERS[k].store(0, Ordering::SeqCst);
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.forget();
    }
}
