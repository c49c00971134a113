//! A pool file that shrinks while it is mapped, or is sparse on a file system with no
//! room left for its holes, raises SIGBUS at the access that finds no page behind the
//! mapping. The tool turns that signal into its usual one-line error naming the pool,
//! exit 2, instead of a signal death (exit 135). Nothing committed before is harmed: a
//! reader never writes, and a writer stops where it is (its unit is not committed).

use std::path::Path;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// The line the handler writes, made before any mapping exists (a handler may only call
/// async-signal-safe functions: `write` and `_exit`).
static MESSAGE: OnceLock<Vec<u8>> = OnceLock::new();

/// The pool `guard` was given.
static POOL: OnceLock<std::path::PathBuf> = OnceLock::new();

/// From now on, a SIGBUS ends the process with an error about `pool`.
pub fn guard(pool: &Path) {
    let _ = POOL.set(pool.to_path_buf());
    let line = format!(
        "nvs: {}: the pool's memory mapping failed (SIGBUS): the file shrank while in use, or it is \
         sparse and its file system has no room for its holes; nothing committed before is harmed\n",
        pool.display()
    );
    if MESSAGE.set(line.into_bytes()).is_err() {
        return; // installed already
    }
    // SAFETY: a zeroed `sigaction` is a valid value; every field used is set below, and
    // `on_sigbus` is an `extern "C" fn(c_int)` that only calls async-signal-safe code.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigbus as extern "C" fn(libc::c_int) as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut());
    }
}

/// The line the handler writes instead once `nvs put` maps its input file.
static INPUT_MESSAGE: OnceLock<Vec<u8>> = OnceLock::new();

/// From now on, a SIGBUS may also be `input` (a file `nvs put` maps) shrinking: the
/// handler names both (it cannot tell which mapping failed).
pub fn input_mapped(input: &Path) {
    let pool = POOL.get().map_or("the pool".to_string(), |p| p.display().to_string());
    let line = format!(
        "nvs: {pool}: a memory mapping failed (SIGBUS): the input file {} or the pool file shrank while in use, \
         or the pool is sparse and its file system has no room for its holes; nothing committed before is harmed \
         (this put is not committed)\n",
        input.display()
    );
    let _ = INPUT_MESSAGE.set(line.into_bytes());
}

/// The new file `nvs get -o` is writing, as a C string (null: none): a get that fails
/// leaves no output, a SIGBUS included.
static OUTPUT: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// While this lives, a SIGBUS also removes the output file being written.
pub struct Output(());

/// `path` is a new output file: removed by the handler until the guard is dropped. The
/// path's bytes are never freed (one small string per get): a SIGBUS on another thread
/// (the prefault helper) may still be reading them while the guard goes.
pub fn output_created(path: &Path) -> Output {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) {
        OUTPUT.store(c.into_raw(), Ordering::SeqCst);
    }
    Output(())
}

impl Drop for Output {
    fn drop(&mut self) {
        OUTPUT.store(std::ptr::null_mut(), Ordering::SeqCst);
    }
}

extern "C" fn on_sigbus(_: libc::c_int) {
    if let Some(m) = INPUT_MESSAGE.get().or_else(|| MESSAGE.get()) {
        // SAFETY: `write` and `_exit` are async-signal-safe; `m` is a live, immutable buffer.
        unsafe { libc::write(2, m.as_ptr().cast(), m.len()) };
    }
    let out = OUTPUT.load(Ordering::SeqCst);
    if !out.is_null() {
        // SAFETY: `unlink` is async-signal-safe; `out` is a C string that is never freed.
        unsafe { libc::unlink(out) };
    }
    // SAFETY: as above.
    unsafe { libc::_exit(2) }
}
