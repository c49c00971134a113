//! [`MappedMedia`]: a `MAP_SHARED` mapping of a pool file or device, as an
//! [`nvs_core::Media`].
//!
//! Invariants:
//! - Every access to the mapping goes through the inner [`Region`]; nothing else reads or
//!   writes it, and no Rust reference to it is ever made (it is held as a
//!   [`memmap2::MmapRaw`], which hands out only raw pointers).
//! - A read-only media is mapped `PROT_READ`, and its store methods refuse before they
//!   reach the region: a read-only pool never stores (nvs-core's promise), and if a bug
//!   broke that promise it would panic here or fault, never write.
//! - In [`Durability::Msync`] mode every store records its byte range, and
//!   [`Media::fence`] msyncs the union of the ranges recorded since the last fence while
//!   holding the lock that guards them. So when any thread's fence returns, every store
//!   that thread recorded before it is on stable storage: either this fence synced it, or
//!   an earlier fence did and finished before this one took the lock.
//! - `Media::fence` cannot return an error, so a failed msync is latched (sticky) in the
//!   media; [`crate::FilePool`] checks the latch after every write and refuses to go on.

use crate::durability::{Backing, Durability};
use crate::error::{Error, Result};
use crate::pool::Access;
use memmap2::{MmapOptions, MmapRaw};
use nvs_core::{Media, Region, StoreKind};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

/// The byte range dirtied since the last fence (empty when `lo >= hi`), and the first
/// msync failure, which stays.
#[derive(Debug, Default)]
struct SyncState {
    lo: usize,
    hi: usize,
    failed: Option<(io::ErrorKind, String)>,
}

/// A pool file or device mapped shared into this process. See the module docs.
#[derive(Debug)]
pub struct MappedMedia {
    region: Region,
    map: MmapRaw,
    durability: Durability,
    backing: Backing,
    writable: bool,
    sync: Mutex<SyncState>,
}

impl MappedMedia {
    /// Map the whole of `file` (opened with at least the access asked for) as media.
    /// `durability: None` picks [`Durability::default_for`] the backing; an explicit
    /// [`Durability::Dax`] is refused unless the file is a device-DAX device and the
    /// stores are non-temporal. `populate` pre-faults the mapping (`MAP_POPULATE`): the
    /// page faults are paid here rather than at the first store into each page.
    pub fn map(
        file: &File,
        path: &Path,
        access: Access,
        durability: Option<Durability>,
        populate: bool,
    ) -> Result<MappedMedia> {
        let (backing, len) = Backing::probe(file, path)?;
        let durability = durability.unwrap_or(Durability::default_for(backing));
        durability.check(backing, path)?;
        let unsupported = |what: &str| Error::Unsupported { path: path.to_path_buf(), what: what.into() };
        if len == 0 {
            // Nothing to map: an empty file is no pool (mmap would refuse length 0).
            return Err(Error::Core { path: path.to_path_buf(), source: nvs_core::Error::NotFormatted });
        }
        let len = usize::try_from(len).map_err(|_| unsupported("too large to map"))?;
        let mut opts = MmapOptions::new();
        opts.len(len);
        if populate {
            opts.populate();
        }
        let writable = access == Access::ReadWrite;
        let map = if writable { opts.map_raw(file) } else { opts.map_raw_read_only(file) }
            .map_err(|source| Error::Io { op: "map", path: path.to_path_buf(), source })?;
        let base = map.as_mut_ptr();
        if !(base as usize).is_multiple_of(64) {
            // mmap returns page-aligned addresses; refuse rather than trust it blindly.
            return Err(unsupported("the mapping is not 64-byte aligned"));
        }
        // SAFETY: Region::new's obligations, one by one:
        // - one mapping valid for `len` bytes: `map` maps exactly `len` bytes and is stored
        //   next to the region in this struct, so it outlives every use of the region.
        //   For writes: a read-write mapping is writable; a read-only one is not, and no
        //   write ever reaches the region then, because every store method of this type
        //   checks `writable` first (module invariant);
        // - 64-byte aligned: mappings are page aligned (and checked just above);
        // - no one else writes the range: a writer holds the pool file's exclusive flock
        //   (FilePool), so the only other writer is another nvs writer while we read;
        // - no Rust reference to the range: MmapRaw never makes one, and nothing else in
        //   this crate touches the mapping.
        let region = unsafe { Region::new(base, len) };
        if durability == Durability::Dax && region.kind() != StoreKind::NonTemporal {
            return Err(unsupported("durability dax needs non-temporal stores, and this build uses portable stores"));
        }
        Ok(MappedMedia {
            region,
            map,
            durability,
            backing,
            writable,
            sync: Mutex::new(SyncState { lo: usize::MAX, ..SyncState::default() }),
        })
    }

    /// The durability mode in use.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// What the mapping is of.
    pub fn backing(&self) -> Backing {
        self.backing
    }

    /// The store instructions in use (non-temporal on x86_64, portable elsewhere).
    pub fn store_kind(&self) -> StoreKind {
        self.region.kind()
    }

    /// `true` if mapped read-write.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The first msync failure, if any: once set, it stays (see [`Error::Sync`]).
    pub fn sync_error(&self) -> Option<io::Error> {
        self.lock().failed.as_ref().map(|(kind, msg)| io::Error::new(*kind, msg.clone()))
    }

    fn lock(&self) -> MutexGuard<'_, SyncState> {
        // The state stays consistent even if a thread panicked while holding the lock
        // (every update is a plain field write), so a poisoned lock is still usable.
        self.sync.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Refuse a store on a read-only mapping before it reaches the region.
    fn writing(&self) {
        assert!(self.writable, "nvs bug: store to a read-only pool mapping");
    }

    /// Remember `off..off + len` for the next fence's msync (msync mode only).
    fn dirtied(&self, off: usize, len: usize) {
        if self.durability == Durability::Msync && len > 0 {
            let mut s = self.lock();
            s.lo = s.lo.min(off);
            s.hi = s.hi.max(off + len);
        }
    }
}

impl Media for MappedMedia {
    fn len(&self) -> usize {
        self.region.len()
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        self.region.read(off, dst)
    }

    fn load_word(&self, off: usize) -> u64 {
        self.region.load_word(off)
    }

    fn store_nt(&self, off: usize, src: &[u8]) {
        self.writing();
        self.region.store_nt(off, src);
        self.dirtied(off, src.len().next_multiple_of(8));
    }

    fn store_word_nt(&self, off: usize, word: u64) {
        self.writing();
        self.region.store_word_nt(off, word);
        self.dirtied(off, 8);
    }

    fn store(&self, off: usize, src: &[u8]) {
        self.writing();
        self.region.store(off, src);
        self.dirtied(off, src.len());
    }

    fn flush(&self, off: usize, len: usize) {
        self.writing();
        self.region.flush(off, len);
        self.dirtied(off, len);
    }

    fn prefetch(&self, off: usize, len: usize) {
        self.region.prefetch(off, len)
    }

    fn fence(&self) {
        // The sfence first: the NT stores must have left the write-combining buffers and
        // reached the page cache before the kernel writes those pages back.
        self.region.fence();
        if self.durability != Durability::Msync {
            return;
        }
        // Hold the lock through the msync: a fence that finds nothing to sync must not
        // return while another thread's msync of its stores is still running.
        let mut s = self.lock();
        if s.lo < s.hi {
            let (lo, hi) = (s.lo, s.hi);
            s.lo = usize::MAX;
            s.hi = 0;
            // memmap2 rounds the start down to a page; `hi` is inside the mapping.
            if let Err(e) = self.map.flush_range(lo, hi - lo) {
                if s.failed.is_none() {
                    s.failed = Some((e.kind(), e.to_string()));
                }
            }
        }
    }
}
