//! [`Region`]: the [`Media`] over a raw `(ptr, len)` range of real memory.
//!
//! This file, `arch.rs` and `arch_sum.rs` hold the unsafe code that touches memory (the
//! rest of nvs-core's `unsafe` is a lane's private state, `log/lane.rs`, and the pool's
//! `Sync`). A `Region` is built once through [`Region::new`], whose contract makes every
//! later access in bounds and valid; each method then checks its range against `len` (a
//! panic there is an nvs bug, never a consequence of media contents) before touching
//! memory.

use super::arch;
use super::arch_sum;
use super::Media;
use crate::checksum::sum::Sum;

/// The best store kind for this target.
fn best_kind() -> StoreKind {
    if cfg!(all(target_arch = "x86_64", not(miri))) {
        StoreKind::NonTemporal
    } else {
        StoreKind::Portable
    }
}

/// Which store instructions a region uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// x86_64 non-temporal stores: `movnti` words, `movntdq`/`vmovntdq` bulk, `sfence`.
    NonTemporal,
    /// Volatile writes and sequentially consistent fences: other architectures, miri.
    /// On real persistent memory these give no durability without a flush; use it for
    /// volatile memory, tests and miri.
    Portable,
}

/// Bytes per store of the bulk NT copy on this CPU: 64 (AVX-512F: by default on Intel
/// CPUs with VPCLMULQDQ, elsewhere if `internals::use_avx512` asked for it), 32 (AVX2),
/// 16 (SSE2), or 8 (`movnti` only: bare-metal soft-float targets; portable elsewhere).
pub fn nt_store_width() -> usize {
    if !cfg!(all(target_arch = "x86_64", not(miri))) || cfg!(target_os = "none") {
        8
    } else if arch::avx512_in_use() {
        64
    } else if arch::has_avx2() {
        32
    } else {
        16
    }
}

/// Use 64-byte AVX-512 NT stores for bulk copies from now on (`true`), or 32-byte AVX2
/// ones (`false`); process-wide. Returns whether AVX-512 stores are in use (never on a
/// CPU or OS without them). The default is AVX-512 on Intel CPUs with VPCLMULQDQ (where
/// raw NT copies run faster with them), AVX2 elsewhere (AMD cores split 512-bit stores;
/// PMDK's default too). `nvs bench` measures the ceiling with both.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn use_avx512(on: bool) -> bool {
    arch::use_avx512(on)
}

/// A persistent-memory range in this address space.
#[derive(Debug)]
pub struct Region {
    base: *mut u8,
    len: usize,
    kind: StoreKind,
    /// Another process may be writing this memory while it is read ([`Region::shared`]).
    shared: bool,
}

// SAFETY: a Region is a pointer plus a length; the memory it names stays valid for the
// region's life (constructor contract) and every access is a raw-pointer access that
// does not create references, so sharing it between threads is as sound as sharing the
// memory. Concurrent writers must write disjoint ranges (nvs gives each lane its own
// segments); concurrent readers read only what a commit word's Acquire load published.
unsafe impl Send for Region {}
// SAFETY: see `Send` above.
unsafe impl Sync for Region {}

impl Region {
    /// Wrap `len` bytes at `base`, using the best stores of this target (non-temporal
    /// on x86_64, portable elsewhere and under miri).
    ///
    /// # Safety
    /// - `base..base + len` is one allocation (or mapping) valid for reads for as long as
    ///   the `Region` (and anything built on it) lives, and valid for writes too unless no
    ///   store, flush or NT store is ever made through it (a read-only mapping under a
    ///   pool opened read-only, which never stores);
    /// - `base` is 64-byte aligned;
    /// - no one else writes the range while nvs uses it, except other processes that
    ///   follow nvs's own protocol (an nvs writer while this one only reads);
    /// - no Rust reference (`&[u8]`/`&mut [u8]`) to the range is used while the region
    ///   lives, except the shared slices [`Media::borrow`] lends (under its own contract).
    pub unsafe fn new(base: *mut u8, len: usize) -> Region {
        // SAFETY: the caller's contract is ours.
        unsafe { Self::with_kind(base, len, best_kind()) }
    }

    /// As [`Region::new`], with the store instructions chosen by the caller.
    ///
    /// # Safety
    /// As for [`Region::new`]. `StoreKind::NonTemporal` is only honoured on x86_64
    /// (elsewhere the portable stores are used).
    pub unsafe fn with_kind(base: *mut u8, len: usize, kind: StoreKind) -> Region {
        debug_assert!((base as usize).is_multiple_of(64), "region base must be 64-byte aligned");
        debug_assert!((base as usize).checked_add(len).is_some());
        let kind = if cfg!(all(target_arch = "x86_64", not(miri))) { kind } else { StoreKind::Portable };
        Region { base, len, kind, shared: false }
    }

    /// This region is memory that a writer in another process may be storing to while
    /// this one reads it (a reader's view of a live pool): its reads are made by
    /// `copy_from_media` (not a plain copy, which would be a data race in Rust's memory
    /// model), at some cost for very short and very long copies. A region this process
    /// alone writes (a writer's, whose lanes publish through the pool's lock) needs it not.
    pub fn shared(mut self) -> Region {
        self.set_shared();
        self
    }

    /// [`Region::shared`] in place (a writer that learns it shares the memory with
    /// writers in other processes only once it has mapped it).
    pub fn set_shared(&mut self) {
        self.shared = true;
    }

    /// The store instructions in use.
    pub fn kind(&self) -> StoreKind {
        self.kind
    }

    /// Base pointer (for the std shim's msync bookkeeping; nvs-core never uses it).
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    #[inline(always)]
    fn check(&self, off: usize, len: usize) {
        let ok = matches!(off.checked_add(len), Some(end) if end <= self.len);
        assert!(ok, "nvs bug: media access {off}+{len} outside {}", self.len);
    }
}

impl Media for Region {
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        // SAFETY: in bounds (checked above) of a range valid for reads (constructor);
        // `dst` is a distinct Rust allocation, so the ranges do not overlap. If a writer
        // in another process may be storing there (`shared`), not by a plain copy:
        // `copy_from_media` says why. Otherwise every writer of this memory is a thread
        // of this process that published what is read through the pool's lock.
        unsafe {
            if self.shared {
                arch::copy_from_media(dst, self.base.add(off))
            } else {
                core::ptr::copy_nonoverlapping(self.base.add(off), dst.as_mut_ptr(), dst.len())
            }
        }
    }

    #[inline]
    fn load_word(&self, off: usize) -> u64 {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "nvs bug: unaligned word load at {off}");
        // SAFETY: in bounds, 8-aligned (base is 64-aligned), valid for reads.
        unsafe { arch::load_word_acquire(self.base.add(off)) }
    }

    #[inline]
    fn store_nt(&self, off: usize, src: &[u8]) {
        self.check(off, src.len().next_multiple_of(8));
        assert!(off.is_multiple_of(8), "nvs bug: unaligned NT store at {off}");
        // SAFETY: destination in bounds including the zero padding, 8-aligned, valid for
        // writes; `src` is a Rust slice and cannot overlap the region (constructor).
        unsafe {
            match self.kind {
                StoreKind::NonTemporal => arch::copy_nt(self.base.add(off), src),
                StoreKind::Portable => arch::copy_volatile(self.base.add(off), src),
            }
        }
    }

    #[inline]
    fn store_nt_summed(&self, off: usize, src: &[u8], sum: &mut Sum) {
        self.check(off, src.len().next_multiple_of(8));
        assert!(off.is_multiple_of(8), "nvs bug: unaligned NT store at {off}");
        // SAFETY: as in `store_nt`.
        unsafe {
            match self.kind {
                StoreKind::NonTemporal => arch_sum::copy_nt_summed(self.base.add(off), src, sum),
                StoreKind::Portable => {
                    arch::copy_volatile(self.base.add(off), src);
                    sum.write(src);
                }
            }
        }
    }

    fn read_summed(&self, off: usize, dst: &mut [u8], sum: &mut Sum) {
        self.check(off, dst.len());
        // SAFETY: as in `read`: in bounds, valid for reads, `dst` a distinct allocation;
        // memory another process may be writing (`shared`) is copied in `asm!`, as
        // `copy_from_media` says, and summed in the same pass; the rest by the fused copy.
        unsafe {
            if self.shared {
                arch_sum::copy_from_media_summed(dst, self.base.add(off), sum)
            } else {
                arch_sum::copy_out_summed(dst, self.base.add(off), sum)
            }
        }
    }

    #[inline]
    fn store_word_nt(&self, off: usize, word: u64) {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "nvs bug: unaligned word store at {off}");
        // SAFETY: in bounds, 8-aligned, valid for writes.
        unsafe {
            match self.kind {
                StoreKind::NonTemporal => arch::store_word_nt(self.base.add(off), word),
                StoreKind::Portable => arch::store_word_volatile(self.base.add(off), word),
            }
        }
    }

    #[inline]
    fn store_line_nt(&self, off: usize, words: [u64; 8]) {
        self.check(off, 64);
        assert!(off.is_multiple_of(64), "nvs bug: unaligned NT line store at {off}");
        // From registers (`Media::store_line_nt` says why).
        // SAFETY: in bounds (checked above), 64-aligned, valid for writes.
        unsafe {
            match self.kind {
                StoreKind::NonTemporal => arch::store_line_nt(self.base.add(off), words),
                StoreKind::Portable => {
                    for (k, w) in words.into_iter().enumerate() {
                        arch::store_word_volatile(self.base.add(off + 8 * k), w)
                    }
                }
            }
        }
    }

    #[inline]
    fn store_commit_line(&self, off: usize, line: &[u8; 64]) {
        assert!(off.is_multiple_of(64), "nvs bug: unaligned commit line at {off}");
        // An NT store of a 64-aligned whole line fills one write-combining buffer,
        // whatever the store width (8-byte `movnti` included).
        self.store_nt(off, line);
    }

    fn store(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        // SAFETY: in bounds, valid for writes, no overlap with `src` (constructor).
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), self.base.add(off), src.len()) }
    }

    fn flush(&self, off: usize, len: usize) {
        self.check(off, len);
        if self.kind == StoreKind::NonTemporal {
            // SAFETY: the lines are in bounds of a valid mapping.
            unsafe { arch::flush_lines(self.base.add(off), len) }
        }
    }

    #[inline]
    fn fence(&self) {
        match self.kind {
            StoreKind::NonTemporal => arch::sfence(),
            StoreKind::Portable => core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst),
        }
    }

    #[inline]
    fn prefetch(&self, off: usize, len: usize) {
        let end = off.saturating_add(len).min(self.len);
        if off >= end || self.kind != StoreKind::NonTemporal {
            return;
        }
        // SAFETY: `off < end <= len`: inside the range (valid for reads); a prefetch
        // changes no memory and cannot fault.
        unsafe { arch::prefetch_lines(self.base.add(off), end - off) }
    }

    unsafe fn borrow(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: `off + len <= len`: inside the range, valid for reads for the region's
        // life (`Region::new`), which the slice cannot outlive (it borrows `self`); the
        // caller guarantees that no store touches the range while the slice lives.
        Some(unsafe { core::slice::from_raw_parts(self.base.add(off), len) })
    }
}
