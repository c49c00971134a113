//! PMDK's libpmem and libpmemlog (Debian: `libpmem-dev`, `libpmemlog-dev`), loaded at
//! run time with `dlopen`, so a machine without them gets "not available" rows instead
//! of a build or start-up failure.
//!
//! `PMEM_IS_PMEM_FORCE=1` must be in the environment before the libraries load (they
//! read it in their constructors): [`load`] sets it first, before any thread exists.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

type MemcpyPersist = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> *mut c_void;
type LogCreate = unsafe extern "C" fn(*const c_char, usize, libc::mode_t) -> *mut c_void;
type LogAppend = unsafe extern "C" fn(*mut c_void, *const c_void, usize) -> c_int;
type LogVoid = unsafe extern "C" fn(*mut c_void);
type LogErrormsg = unsafe extern "C" fn() -> *const c_char;

/// `pmem_memcpy_persist` and `pmem_memcpy_nodrain` from libpmem.
#[derive(Clone, Copy)]
pub struct Pmem {
    memcpy_persist: MemcpyPersist,
    memcpy_nodrain: MemcpyPersist,
}

/// The libpmemlog calls the benchmark makes.
#[derive(Clone, Copy)]
pub struct PmemLog {
    create: LogCreate,
    append: LogAppend,
    rewind: LogVoid,
    close: LogVoid,
    errormsg: LogErrormsg,
}

/// What could be loaded; each `Err` says why not (for the "not available" rows).
pub struct Pmdk {
    pub pmem: Result<Pmem, String>,
    pub log: Result<PmemLog, String>,
}

/// Set `PMEM_IS_PMEM_FORCE=1` and load both libraries. Call before spawning threads.
pub fn load() -> Pmdk {
    if std::env::var_os("PMEM_IS_PMEM_FORCE").is_none() {
        // Single-threaded here (the bench calls this first), so changing the
        // environment races with nothing.
        std::env::set_var("PMEM_IS_PMEM_FORCE", "1");
    }
    let pmem = open("libpmem.so.1").and_then(|h| {
        // SAFETY: both have exactly this C signature in libpmem 1.x.
        let memcpy_persist = unsafe { sym::<MemcpyPersist>(h, c"pmem_memcpy_persist")? };
        // SAFETY: as above.
        let memcpy_nodrain = unsafe { sym::<MemcpyPersist>(h, c"pmem_memcpy_nodrain")? };
        Ok(Pmem { memcpy_persist, memcpy_nodrain })
    });
    let log = open("libpmemlog.so.1").and_then(|h| {
        // SAFETY: these are libpmemlog 1.x's C signatures (libpmemlog.h).
        unsafe {
            Ok(PmemLog {
                create: sym::<LogCreate>(h, c"pmemlog_create")?,
                append: sym::<LogAppend>(h, c"pmemlog_append")?,
                rewind: sym::<LogVoid>(h, c"pmemlog_rewind")?,
                close: sym::<LogVoid>(h, c"pmemlog_close")?,
                errormsg: sym::<LogErrormsg>(h, c"pmemlog_errormsg")?,
            })
        }
    });
    Pmdk { pmem, log }
}

/// `dlopen` a library; the handle is never closed (the functions stay valid for the
/// whole process).
fn open(name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: `c` is a valid C string; dlopen has no other precondition.
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if h.is_null() {
        return Err(dl_error(name));
    }
    Ok(h)
}

/// Look up `name` in `h` as a function of type `F`.
///
/// # Safety
/// `F` must be a function pointer type matching the symbol's real C signature.
unsafe fn sym<F: Copy>(h: *mut c_void, name: &CStr) -> Result<F, String> {
    // SAFETY: `h` came from a successful dlopen and `name` is a C string.
    let p = unsafe { libc::dlsym(h, name.as_ptr()) };
    if p.is_null() {
        return Err(dl_error(&name.to_string_lossy()));
    }
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: `p` is the symbol's address and `F` a function pointer of its signature
    // (caller's contract); function pointers and data pointers have one size here.
    Ok(unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) })
}

fn dl_error(what: &str) -> String {
    // SAFETY: dlerror returns NULL or a C string valid until the next dl call.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return format!("{what}: not found");
    }
    // SAFETY: non-null, NUL-terminated (dlerror's contract).
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

impl Pmem {
    /// `pmem_memcpy_persist(dst, src, len)`.
    ///
    /// # Safety
    /// `dst..dst + src.len()` is valid for writes and does not overlap `src`.
    pub unsafe fn memcpy_persist(&self, dst: *mut u8, src: &[u8]) {
        // SAFETY: caller's contract; libpmem reads `src.len()` bytes of `src`.
        unsafe { (self.memcpy_persist)(dst.cast(), src.as_ptr().cast(), src.len()) };
    }

    /// `pmem_memcpy_nodrain(dst, src, len)`: PMDK's copy without its final fence.
    ///
    /// # Safety
    /// As [`Pmem::memcpy_persist`].
    pub unsafe fn memcpy_nodrain(&self, dst: *mut u8, src: &[u8]) {
        // SAFETY: caller's contract; libpmem reads `src.len()` bytes of `src`.
        unsafe { (self.memcpy_nodrain)(dst.cast(), src.as_ptr().cast(), src.len()) };
    }
}

/// An open pmemlog pool; closed on drop.
pub struct Log {
    lib: PmemLog,
    plp: *mut c_void,
}

// SAFETY: a PMEMlogpool handle may be used from any thread (libpmemlog locks inside);
// the benchmark uses each one from one thread at a time.
unsafe impl Send for Log {}

impl Log {
    /// Create a pmemlog pool of `size` bytes at `path` (which must not exist).
    pub fn create(lib: PmemLog, path: &Path, size: usize) -> Result<Log, String> {
        let c = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())?;
        // SAFETY: valid C string; the size and mode are plain values.
        let plp = unsafe { (lib.create)(c.as_ptr(), size, 0o600) };
        if plp.is_null() {
            // SAFETY: pmemlog_errormsg returns a valid C string (thread-local buffer).
            let msg = unsafe { CStr::from_ptr((lib.errormsg)()) }.to_string_lossy().into_owned();
            return Err(format!("pmemlog_create {}: {msg}", path.display()));
        }
        Ok(Log { lib, plp })
    }

    /// `pmemlog_append`; `false` when the log is full.
    pub fn append(&mut self, bytes: &[u8]) -> bool {
        // SAFETY: `plp` is open; libpmemlog reads `bytes.len()` bytes of `bytes`.
        unsafe { (self.lib.append)(self.plp, bytes.as_ptr().cast(), bytes.len()) == 0 }
    }

    /// `pmemlog_rewind`: empty the log.
    pub fn rewind(&mut self) {
        // SAFETY: `plp` is open.
        unsafe { (self.lib.rewind)(self.plp) }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        // SAFETY: `plp` is open and closed exactly once, here.
        unsafe { (self.lib.close)(self.plp) }
    }
}
