//! Index checkpoints beside pool files: `POOL.nvs-index`, written when the one writer of
//! a pool of many objects drops it, read by the next read-only open
//! ([`nvs_core::Pool::open_read_only_from_checkpoint`] checks it and catches up from it,
//! or recovers).
//!
//! A cache, never the truth: missing, damaged, stale or foreign, it costs one recovery.
//! It is read only when it is a regular file (not a link) of the pool file's owner, that
//! no one who may not write the pool file may write: whoever could forge one could
//! forge the pool. It is written to a temporary name and renamed over the old one, so
//! readers see a whole one or the one before; where no new one can be written, the
//! writer removes the old one (it would only cost its reading).

use super::CorePool;
use memmap2::{Mmap, MmapOptions};
use nvs_core::{HeapMemory, Media};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Pools of fewer objects get no checkpoint: their recovery is a few milliseconds.
pub const CHECKPOINT_MIN_OBJECTS: u64 = 16 << 10;

/// The checkpoint's path for the pool at `pool`.
pub fn checkpoint_path(pool: &Path) -> PathBuf {
    let mut name = pool.as_os_str().to_owned();
    name.push(".nvs-index");
    PathBuf::from(name)
}

/// The checkpoint of the pool file `pool_file` (at `pool`), mapped for reading, if there
/// is one this process may trust (see the module docs). The mapping lives only for the
/// open (a checkpoint truncated meanwhile would raise SIGBUS there, as a pool file that
/// shrinks does; nvs itself only ever renames a whole new one over it).
pub(crate) fn open_trusted(pool: &Path, pool_file: &File) -> Option<Mmap> {
    let pm = pool_file.metadata().ok()?;
    if !pm.is_file() {
        return None;
    }
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(checkpoint_path(pool))
        .ok()?;
    let m = f.metadata().ok()?;
    let writers_ok = m.mode() & 0o022 & !pm.mode() == 0;
    if !m.is_file() || m.uid() != pm.uid() || !writers_ok || m.len() == 0 {
        return None;
    }
    // SAFETY: a read-only mapping of a regular file, read as bytes only (every value in
    // it is checked before use); see above for a file truncated while mapped.
    unsafe { MmapOptions::new().map(&f) }.ok()
}

/// Index memory for the checkpoint `bytes` (mapped), and a helper thread preparing pages
/// while the open reads the one and fills the other from the front: most of an open
/// from a large checkpoint is first touches of pages. The helper maps the checkpoint's
/// pages (`MADV_POPULATE_READ`), then allocates the largest array's
/// (`MADV_POPULATE_WRITE`), each 2 MiB at a time from its end backwards. Join it
/// ([`Prepare::finish`]) once the open is done. Populating changes no memory contents, so
/// the helper is harmless wherever the memory has gone meanwhile (an address no longer
/// mapped just ends it).
pub(crate) fn memory_for(bytes: &[u8]) -> (HeapMemory, Prepare) {
    let mem = nvs_core::checkpoint_memory(bytes);
    let (base, len) = mem.spans()[0];
    let spans =
        [(bytes.as_ptr() as usize, bytes.len(), libc::MADV_POPULATE_READ), (base, len, libc::MADV_POPULATE_WRITE)];
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let helper = (len >= HELPER_MIN).then(|| {
        std::thread::Builder::new().name("nvs-prepare".into()).spawn(move || {
            const STEP: usize = 2 << 20;
            const PAGE: usize = 4096;
            for (base, len, advice) in spans {
                let start = base.next_multiple_of(PAGE);
                let mut hi = (base + len) & !(PAGE - 1);
                while hi > start && !flag.load(Ordering::Relaxed) {
                    let lo = hi.saturating_sub(STEP).max(start);
                    // SAFETY: asks the kernel to populate page tables of `lo..hi`, which
                    // changes no memory contents; an unmapped range is an error return.
                    if unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, advice) } != 0 {
                        break;
                    }
                    hi = lo;
                }
            }
        })
    });
    (mem, Prepare { stop, helper: helper.and_then(|h| h.ok()) })
}

/// Arrays smaller than this are not worth a thread.
const HELPER_MIN: usize = 8 << 20;

/// The helper of [`memory_for`].
pub(crate) struct Prepare {
    stop: Arc<AtomicBool>,
    helper: Option<std::thread::JoinHandle<()>>,
}

impl Prepare {
    /// Stop the helper and wait for it.
    pub(crate) fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.helper.take() {
            let _ = h.join();
        }
    }
}

/// Write `pool`'s checkpoint beside the pool file `pool_file` (at `path`), if the pool
/// holds enough objects and its state can be one ([`nvs_core::Pool::write_checkpoint`]).
/// Best effort: a directory the process may not write, a full disk, leave the old one
/// (or none). Returns whether one was written.
pub(crate) fn save(pool: &mut CorePool, path: &Path, pool_file: &File) -> bool {
    if pool.stats().objects < CHECKPOINT_MIN_OBJECTS || pool.media().len() == 0 {
        return false;
    }
    let Ok(pm) = pool_file.metadata() else { return false };
    if !pm.is_file() {
        return false;
    }
    let target = checkpoint_path(path);
    let mut tmp = target.clone().into_os_string();
    tmp.push(format!(".{}.tmp", std::process::id()));
    let tmp = PathBuf::from(tmp);
    // One left by a writer of this pid killed in its drop (pids come back): ours to replace.
    let _ = std::fs::remove_file(&tmp);
    let Ok(f) = OpenOptions::new().write(true).create_new(true).mode(pm.mode() & 0o644).open(&tmp) else {
        return false;
    };
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let written = pool.write_checkpoint(&mut |b| w.write_all(b).is_ok()) && w.flush().is_ok();
    let renamed = written && std::fs::rename(&tmp, &target).is_ok();
    if !renamed {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}
