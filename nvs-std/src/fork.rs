//! Which process this is, as far as a pool is concerned. A child that `fork` made shares
//! its parent's open file descriptions — and with them the parent's OFD locks, which the
//! child could take "again" and release under the parent — and its descriptors of
//! `/proc/self/...`, which name the parent. Whatever holds such state records the
//! [`generation`] it was made in; another value means this process is a fork of that
//! one, which must then work on state of its own, or refuse with nothing changed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

/// How many `fork`s separate this process from the one that first asked: a
/// `pthread_atfork` child handler, installed at the first call, counts them. (An atomic
/// load, asked before every write, where `getpid`, a system call, would cost each put.)
/// A child made without the C library's `fork` (a raw `clone` or `syscall(SYS_fork)`,
/// which run no atfork handler) is not seen as one.
pub fn generation() -> u64 {
    static FORKS: AtomicU64 = AtomicU64::new(0);
    static WATCH: Once = Once::new();
    extern "C" fn in_child() {
        FORKS.fetch_add(1, Ordering::Relaxed);
    }
    WATCH.call_once(|| {
        // SAFETY: registers a handler that only increments an atomic (async-signal-safe,
        // as a handler run in a fork child must be).
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    });
    FORKS.load(Ordering::Relaxed)
}

/// The generation something was made in: [`Born::is_fork`] tells whether this process
/// is a fork of that one.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Born(u64);

impl Born {
    /// Made now, in this process.
    pub(crate) fn now() -> Born {
        Born(generation())
    }

    /// Is this process a `fork` of the one it was made in?
    pub(crate) fn is_fork(self) -> bool {
        generation() != self.0
    }
}
