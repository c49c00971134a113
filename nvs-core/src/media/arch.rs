//! The store instructions behind [`Region`](super::region::Region): x86_64 non-temporal
//! stores and a portable fallback (volatile writes + fences) for other targets and miri.
//! The copies that also feed a payload checksum in the same pass are beside it, in
//! `arch_sum.rs`, which builds on the CPU features and stores here.
//!
//! Every function here is `unsafe` with one contract: the destination range
//! (`dst..dst + src.len()` rounded up to 8, or the 8-byte word) is valid for writes,
//! 8-byte aligned, and does not overlap `src`.

/// Split `src` into its whole 8-byte words and a last word padded with zeros.
#[inline(always)]
fn padded_tail(src: &[u8]) -> (usize, Option<u64>) {
    let whole = src.len() & !7;
    let rest = src.get(whole..).unwrap_or(&[]);
    if rest.is_empty() {
        return (whole, None);
    }
    let mut last = [0u8; 8];
    last[..rest.len()].copy_from_slice(rest);
    (whole, Some(u64::from_le_bytes(last)))
}

/// Volatile copy, word by word, zero-padding the last word.
///
/// # Safety
/// See the module contract.
pub unsafe fn copy_volatile(dst: *mut u8, src: &[u8]) {
    let (whole, last) = padded_tail(src);
    let mut i = 0;
    while i < whole {
        let mut w = [0u8; 8];
        w.copy_from_slice(&src[i..i + 8]);
        // SAFETY: `dst + i` is an aligned word inside the destination (contract).
        unsafe { store_word_volatile(dst.add(i), u64::from_le_bytes(w)) };
        i += 8;
    }
    if let Some(w) = last {
        // SAFETY: the padded last word is inside the destination (contract).
        unsafe { store_word_volatile(dst.add(whole), w) };
    }
}

/// # Safety
/// `dst` is an aligned word valid for writes.
pub unsafe fn store_word_volatile(dst: *mut u8, word: u64) {
    // SAFETY: contract.
    unsafe { core::ptr::write_volatile(dst.cast::<u64>(), word) }
}

/// Copy `dst.len()` bytes from `src` — persistent memory that a writer in another
/// process may be storing to right now — into `dst`.
///
/// A plain copy (`ptr::copy_nonoverlapping`) of such memory is a data race in Rust's
/// memory model, whatever the hardware does, and the compiler may assume it is not. So
/// the copy is made where the compiler cannot reason about it: on x86_64 in `asm!`
/// blocks (accesses the abstract machine does not see, like a device's DMA: AVX2 moves
/// for short copies, `rep movsb` for the rest); elsewhere, and under miri, volatile
/// reads (words in the aligned middle, bytes at the edges). Torn copies stay possible,
/// as with any copy of memory being written: callers detect them by re-checking the
/// segment header afterwards.
///
/// # Safety
/// `src..src + dst.len()` is valid for reads and does not overlap `dst`.
#[inline]
pub unsafe fn copy_from_media(dst: &mut [u8], src: *const u8) {
    // SAFETY: forwarded contract.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    unsafe {
        x86::copy_from_media(dst, src)
    }
    // SAFETY: forwarded contract.
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    unsafe {
        copy_in_volatile(dst, src)
    }
}

/// [`copy_from_media`] by volatile reads: words in the aligned middle, bytes at the edges.
///
/// # Safety
/// As [`copy_from_media`].
#[inline]
pub unsafe fn copy_in_volatile(dst: &mut [u8], src: *const u8) {
    let len = dst.len();
    let mut i = 0;
    while i < len && !(src as usize + i).is_multiple_of(8) {
        // SAFETY: `i < len`: inside the contract's range.
        dst[i] = unsafe { core::ptr::read_volatile(src.add(i)) };
        i += 1;
    }
    while i + 8 <= len {
        // SAFETY: `i + 8 <= len`: inside the range; `src + i` is 8-aligned (loop above).
        let w = unsafe { core::ptr::read_volatile(src.add(i).cast::<u64>()) };
        dst[i..i + 8].copy_from_slice(&w.to_ne_bytes());
        i += 8;
    }
    while i < len {
        // SAFETY: `i < len`: inside the contract's range.
        dst[i] = unsafe { core::ptr::read_volatile(src.add(i)) };
        i += 1;
    }
}

/// # Safety
/// `src` is an aligned word valid for reads.
#[inline]
pub unsafe fn load_word_acquire(src: *mut u8) -> u64 {
    // SAFETY: aligned, valid; other threads/processes access the word only atomically
    // (commit words are written by single aligned 8-byte stores).
    let a = unsafe { core::sync::atomic::AtomicU64::from_ptr(src.cast::<u64>()) };
    a.load(core::sync::atomic::Ordering::Acquire)
}

/// The x86_64 instructions and CPU features; `arch_sum.rs`'s kernels use them too.
#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use core::arch::x86_64::*;
    use core::sync::atomic::{AtomicU8, Ordering};

    const UNKNOWN: u8 = 0;
    /// Bits of the detected-features byte.
    const KNOWN: u8 = 1;
    const AVX2: u8 = 2;
    const CLWB: u8 = 4;
    const CLFLUSHOPT: u8 = 8;
    const AVX512F: u8 = 16;
    const VPCLMUL: u8 = 32;
    const INTEL: u8 = 64;

    static FEATURES: AtomicU8 = AtomicU8::new(UNKNOWN);

    /// CPU features, detected once with cpuid (no std needed). AVX2 counts only if the
    /// OS saves the YMM state (OSXSAVE and XCR0 bits 1..2).
    pub fn features() -> u8 {
        let f = FEATURES.load(Ordering::Relaxed);
        if f != UNKNOWN {
            return f;
        }
        let mut f = KNOWN;
        let leaf0 = __cpuid(0);
        let max_leaf = leaf0.eax;
        // "GenuineIntel", in ebx, edx, ecx.
        if (leaf0.ebx, leaf0.edx, leaf0.ecx) == (0x756e_6547, 0x4965_6e69, 0x6c65_746e) {
            f |= INTEL;
        }
        let leaf1 = __cpuid(1);
        let osxsave_avx = (leaf1.ecx >> 27) & 1 == 1 && (leaf1.ecx >> 28) & 1 == 1;
        if max_leaf >= 7 {
            let leaf7 = __cpuid_count(7, 0); // leaf 7 exists: max_leaf checked
            if osxsave_avx && (leaf7.ebx >> 5) & 1 == 1 && xcr0() & 6 == 6 {
                f |= AVX2;
            }
            // AVX-512F, with the OS saving the opmask and ZMM state (XCR0 bits 5..7).
            if osxsave_avx && (leaf7.ebx >> 16) & 1 == 1 && xcr0() & 0xE6 == 0xE6 {
                f |= AVX512F;
            }
            // VPCLMULQDQ (leaf 7, ECX bit 10) on 512-bit registers.
            if f & AVX512F != 0 && (leaf7.ecx >> 10) & 1 == 1 {
                f |= VPCLMUL;
            }
            if (leaf7.ebx >> 24) & 1 == 1 {
                f |= CLWB;
            }
            if (leaf7.ebx >> 23) & 1 == 1 {
                f |= CLFLUSHOPT;
            }
        }
        FEATURES.store(f, Ordering::Relaxed);
        f
    }

    fn xcr0() -> u64 {
        let (lo, hi): (u32, u32);
        // SAFETY: only called when CPUID says OSXSAVE is set, so xgetbv is enabled.
        unsafe {
            core::arch::asm!("xgetbv", in("ecx") 0u32, out("eax") lo, out("edx") hi,
                options(nomem, nostack, preserves_flags))
        };
        ((hi as u64) << 32) | lo as u64
    }

    pub fn has_avx2() -> bool {
        features() & AVX2 != 0
    }

    /// See the portable `copy_from_media`: the same contract, in `asm!`.
    ///
    /// # Safety
    /// `src..src + dst.len()` is valid for reads and does not overlap `dst`.
    #[inline]
    pub unsafe fn copy_from_media(dst: &mut [u8], src: *const u8) {
        // Long copies by `rep movsb`; short ones (headers, names, small objects), where
        // it costs more to start than to copy, by 64-byte AVX2 steps and volatile reads
        // for the last bytes.
        let len = dst.len();
        // (Bare-metal builds have no AVX2 code: `copy_lines_avx2` is a stub there.)
        if len >= 4096 || cfg!(target_os = "none") || !has_avx2() {
            // In pieces of at most 256 KiB: one `rep movsb` over many MiB copies slower than
            // the same bytes in pieces (examples/shared_reads.rs measures these copies).
            let mut at = 0;
            while at < len {
                let n = (len - at).min(256 << 10);
                // SAFETY: `rep movsb` reads rcx bytes at rsi and writes them at rdi:
                // inside the ranges the contract and `dst` make valid; it changes only
                // rcx, rsi, rdi (declared) and memory; the direction flag is clear at
                // every Rust call.
                unsafe {
                    core::arch::asm!(
                        "rep movsb",
                        inout("rcx") n => _,
                        inout("rsi") src.add(at) => _,
                        inout("rdi") dst.as_mut_ptr().add(at) => _,
                        options(nostack, preserves_flags)
                    );
                }
                at += n;
            }
            return;
        }
        let lines = len & !63;
        // SAFETY: `lines` bytes of the valid ranges; AVX2 is present (cpuid). Then the
        // rest of them.
        unsafe {
            copy_lines_avx2(dst.as_mut_ptr(), src, lines);
            super::copy_in_volatile(&mut dst[lines..], src.add(lines));
        }
    }

    /// Copy `len` bytes (a multiple of 64) from `src` to `dst` by AVX2 moves in `asm!`.
    ///
    /// # Safety
    /// Both ranges valid and disjoint; the CPU has AVX2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx2")]
    unsafe fn copy_lines_avx2(dst: *mut u8, src: *const u8, len: usize) {
        if len == 0 {
            return;
        }
        // SAFETY: reads and writes `len` bytes, 64 at a time (`len` is a non-zero
        // multiple of 64); only the declared registers change.
        unsafe {
            core::arch::asm!(
                "2:",
                "vmovdqu {a}, [{s}]",
                "vmovdqu {b}, [{s} + 32]",
                "vmovdqu [{d}], {a}",
                "vmovdqu [{d} + 32], {b}",
                "add {s}, 64",
                "add {d}, 64",
                "sub {n}, 64",
                "jnz 2b",
                // Leave no dirty upper halves behind: later SSE code would pay for them.
                "vzeroupper",
                s = inout(reg) src => _,
                d = inout(reg) dst => _,
                n = inout(reg) len => _,
                a = out(ymm_reg) _,
                b = out(ymm_reg) _,
                options(nostack)
            );
        }
    }
    #[cfg(target_os = "none")]
    unsafe fn copy_lines_avx2(_dst: *mut u8, _src: *const u8, _len: usize) {}

    pub fn has_avx512f() -> bool {
        features() & AVX512F != 0
    }

    /// AVX-512F and VPCLMULQDQ: nvs-sum by carry-less folding (`lines_summed_clmul`, arch_sum.rs).
    #[cfg(not(target_os = "none"))]
    pub fn has_clmul512() -> bool {
        features() & VPCLMUL != 0
    }

    /// Whether bulk copies use 64-byte AVX-512 stores: `DEFAULT` until [`use_avx512`]
    /// says otherwise. By default they do on Intel CPUs with VPCLMULQDQ (Ice Lake and
    /// later), where an NT copy runs faster with them; elsewhere 32-byte AVX2 ones, as
    /// PMDK does: AMD cores split 512-bit stores, and copy no slower with 32-byte ones.
    /// `nvs bench` measures the NT-copy ceiling with both.
    static AVX512_WANTED: AtomicU8 = AtomicU8::new(DEFAULT);
    const DEFAULT: u8 = 2;

    /// Ask for (or stop asking for) AVX-512 bulk NT stores; returns whether they are
    /// used from now on (only if the CPU and OS support them).
    pub fn use_avx512(on: bool) -> bool {
        AVX512_WANTED.store(on as u8, Ordering::Relaxed);
        avx512_in_use()
    }

    /// Never under miri (no cpuid there; the region stores are portable anyway).
    pub fn avx512_in_use() -> bool {
        if cfg!(miri) || !has_avx512f() {
            return false;
        }
        match AVX512_WANTED.load(Ordering::Relaxed) {
            DEFAULT => features() & (INTEL | VPCLMUL) == INTEL | VPCLMUL,
            wanted => wanted != 0,
        }
    }

    /// # Safety
    /// `dst` is an aligned word valid for writes.
    #[inline(always)]
    pub unsafe fn store_word_nt(dst: *mut u8, word: u64) {
        // SAFETY: contract.
        unsafe { _mm_stream_si64(dst.cast::<i64>(), word as i64) }
    }

    #[inline]
    pub fn sfence() {
        // SAFETY: sfence has no preconditions on x86_64.
        unsafe { _mm_sfence() }
    }

    /// NT-store the 64-byte line at `dst` from its eight words, from registers, by eight
    /// `movnti` (which fill one write-combining buffer, as one 64-byte store does): a line
    /// assembled in memory and stored by `copy_nt` would be loaded back first, a load
    /// that waits for the thread's earlier stores (`Media::store_line_nt`). `cargo bench
    /// -p nvs-core` (its batch of 64 x 1 KiB puts) measures it.
    ///
    /// # Safety
    /// `dst` is 8-aligned and `dst..dst + 64` valid for writes.
    #[inline(always)]
    pub unsafe fn store_line_nt(dst: *mut u8, w: [u64; 8]) {
        for (k, word) in w.into_iter().enumerate() {
            // SAFETY: an aligned word of the line (contract).
            unsafe { store_word_nt(dst.add(8 * k), word) };
        }
    }

    /// NT copy with the widest store the CPU has. 8-byte `movnti` until the destination
    /// is aligned for the wide store, wide stores for the body, `movnti` for the tail;
    /// the last partial word is zero-padded.
    ///
    /// # Safety
    /// Module contract.
    pub unsafe fn copy_nt(dst: *mut u8, src: &[u8]) {
        let mut d = dst;
        let mut s = src;
        // Bare-metal targets (`x86_64-unknown-none`) are soft-float: no vector registers
        // may be used, so there the copy is `movnti` only (8 B per store).
        let wide = if cfg!(target_os = "none") {
            8
        } else if avx512_in_use() {
            64
        } else if has_avx2() {
            32
        } else {
            16
        };
        while !(d as usize).is_multiple_of(wide) && s.len() >= 8 {
            // SAFETY: `d` is an aligned word inside the destination.
            unsafe { store_word_nt(d, read_word(s)) };
            // SAFETY: still inside the destination (or one past its end).
            d = unsafe { d.add(8) };
            s = &s[8..];
        }
        // AVX-512: whole 64-byte lines (its body loop takes any multiple of 64); AVX2 and
        // SSE2: multiples of four stores.
        let body = match wide {
            64 => s.len() & !63,
            8 => 0,
            _ => s.len() & !(wide * 4 - 1),
        };
        if body > 0 {
            // SAFETY: `d` is `wide`-aligned and `d..d + body` is inside the destination;
            // AVX2 is used only when detected.
            unsafe {
                copy_body_wide(d, s.as_ptr(), body, wide);
                d = d.add(body);
            }
            s = &s[body..];
        }
        while s.len() >= 8 {
            // SAFETY: aligned word inside the destination.
            unsafe { store_word_nt(d, read_word(s)) };
            // SAFETY: inside the destination or one past it.
            d = unsafe { d.add(8) };
            s = &s[8..];
        }
        if !s.is_empty() {
            let mut last = [0u8; 8];
            last[..s.len()].copy_from_slice(s);
            // SAFETY: the padded last word is inside the destination (contract).
            unsafe { store_word_nt(d, u64::from_le_bytes(last)) };
        }
    }

    #[inline(always)]
    pub fn read_word(s: &[u8]) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[..8]);
        u64::from_le_bytes(w)
    }

    /// # Safety
    /// `dst` is `wide`-aligned, `len` a multiple of `4 * wide`, both ranges valid, and
    /// `wide == 32` only if the CPU has AVX2 (64 only with AVX-512F).
    #[cfg(not(target_os = "none"))]
    unsafe fn copy_body_wide(dst: *mut u8, src: *const u8, len: usize, wide: usize) {
        // Copies of `PREFETCH_PUT` or more ask for their source ahead of the loads, as the
        // folding copy does (`lines_summed_clmul_shifted`, arch_sum.rs): two loops, with
        // and without the prefetches, rather than a test in the loop.
        let ahead = len >= PREFETCH_PUT;
        // SAFETY: forwarded contract.
        unsafe {
            match (wide, ahead) {
                (64, true) => copy_body_avx512::<true>(dst, src, len),
                (64, false) => copy_body_avx512::<false>(dst, src, len),
                (32, true) => copy_body_avx2::<true>(dst, src, len),
                (32, false) => copy_body_avx2::<false>(dst, src, len),
                _ => copy_body_sse2(dst, src, len),
            }
        }
    }

    /// # Safety
    /// Never called: bare-metal copies use `movnti` only.
    #[cfg(target_os = "none")]
    unsafe fn copy_body_wide(_dst: *mut u8, _src: *const u8, _len: usize, _wide: usize) {}

    /// NT copy by 64-byte AVX-512 stores, prefetching the source `PREFETCH_PUT_AHEAD`
    /// bytes ahead of its loads if `AHEAD`.
    ///
    /// # Safety
    /// `dst` 64-aligned, `len` a multiple of 64, both ranges valid, CPU (and OS) have
    /// AVX-512F.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f")]
    unsafe fn copy_body_avx512<const AHEAD: bool>(dst: *mut u8, src: *const u8, len: usize) {
        let mut i = 0;
        while i + 256 <= len {
            // SAFETY: `i + 256 <= len`; loads are unaligned, stores 64-aligned; a
            // prefetch never faults.
            unsafe {
                if AHEAD {
                    let p = src.wrapping_add(i + PREFETCH_PUT_AHEAD);
                    for k in 0..4 {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * k).cast());
                    }
                }
                let a = _mm512_loadu_si512(src.add(i).cast());
                let b = _mm512_loadu_si512(src.add(i + 64).cast());
                let c = _mm512_loadu_si512(src.add(i + 128).cast());
                let e = _mm512_loadu_si512(src.add(i + 192).cast());
                _mm512_stream_si512(dst.add(i).cast(), a);
                _mm512_stream_si512(dst.add(i + 64).cast(), b);
                _mm512_stream_si512(dst.add(i + 128).cast(), c);
                _mm512_stream_si512(dst.add(i + 192).cast(), e);
            }
            i += 256;
        }
        while i < len {
            // SAFETY: `i + 64 <= len` (`len` is a multiple of 64); store 64-aligned.
            unsafe { _mm512_stream_si512(dst.add(i).cast(), _mm512_loadu_si512(src.add(i).cast())) };
            i += 64;
        }
    }

    /// NT copy by 32-byte AVX2 stores, prefetching the source `PREFETCH_PUT_AHEAD` bytes
    /// ahead of its loads if `AHEAD`.
    ///
    /// # Safety
    /// `dst` 32-aligned, `len` a multiple of 128, both ranges valid, CPU has AVX2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx2")]
    unsafe fn copy_body_avx2<const AHEAD: bool>(dst: *mut u8, src: *const u8, len: usize) {
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 128 <= len`; loads are unaligned, stores 32-aligned; a
            // prefetch never faults.
            unsafe {
                if AHEAD {
                    let p = src.wrapping_add(i + PREFETCH_PUT_AHEAD);
                    _mm_prefetch::<_MM_HINT_T0>(p.cast());
                    _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64).cast());
                }
                let a = _mm256_loadu_si256(src.add(i).cast());
                let b = _mm256_loadu_si256(src.add(i + 32).cast());
                let c = _mm256_loadu_si256(src.add(i + 64).cast());
                let e = _mm256_loadu_si256(src.add(i + 96).cast());
                _mm256_stream_si256(dst.add(i).cast(), a);
                _mm256_stream_si256(dst.add(i + 32).cast(), b);
                _mm256_stream_si256(dst.add(i + 64).cast(), c);
                _mm256_stream_si256(dst.add(i + 96).cast(), e);
            }
            i += 128;
        }
    }

    /// # Safety
    /// `dst` 16-aligned, `len` a multiple of 64, both ranges valid, SSE state enabled.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "sse2")]
    unsafe fn copy_body_sse2(dst: *mut u8, src: *const u8, len: usize) {
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 64 <= len`; loads unaligned, stores 16-aligned.
            unsafe {
                let a = _mm_loadu_si128(src.add(i).cast());
                let b = _mm_loadu_si128(src.add(i + 16).cast());
                let c = _mm_loadu_si128(src.add(i + 32).cast());
                let e = _mm_loadu_si128(src.add(i + 48).cast());
                _mm_stream_si128(dst.add(i).cast(), a);
                _mm_stream_si128(dst.add(i + 16).cast(), b);
                _mm_stream_si128(dst.add(i + 32).cast(), c);
                _mm_stream_si128(dst.add(i + 48).cast(), e);
            }
            i += 64;
        }
    }

    /// How far ahead an NT copy into the pool (a put of `PREFETCH_PUT` or more, plain
    /// or folding) prefetches its source: nearer than a get's `PREFETCH_AHEAD`
    /// (arch_sum.rs), as nearer and farther both slowed a checksummed put (`nvs bench`
    /// has its put rows with and without payload checksums).
    #[cfg(not(target_os = "none"))]
    pub const PREFETCH_PUT_AHEAD: usize = 4096;
    /// Puts of this many bytes or more prefetch their source (copy-outs always do): a
    /// smaller source is likely in the caches already.
    #[cfg(not(target_os = "none"))]
    pub const PREFETCH_PUT: usize = 1 << 20;

    /// Prefetch (into all cache levels) every cache line of `p..p + len`.
    ///
    /// # Safety
    /// The range is inside a valid mapping (a prefetch never faults or writes anyway).
    #[inline]
    pub unsafe fn prefetch_lines(p: *const u8, len: usize) {
        let mut line = p as usize & !63;
        let end = p as usize + len;
        while line < end {
            // SAFETY: a hint; the line is inside the mapping (contract).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += 64;
        }
    }

    /// Write back every cache line of `p..p + len`: `clwb` where present, else
    /// `clflushopt`, else `clflush`. Durable after the next sfence.
    ///
    /// # Safety
    /// The range is inside a valid mapping.
    pub unsafe fn flush_lines(p: *mut u8, len: usize) {
        let f = features();
        let start = p as usize & !63;
        let end = p as usize + len;
        let mut line = start;
        while line < end {
            let ptr = line as *const u8;
            // SAFETY: the line is part of the valid mapping; these instructions only
            // write back cache state, they do not change memory contents.
            unsafe {
                if f & CLWB != 0 {
                    core::arch::asm!("clwb [{0}]", in(reg) ptr, options(nostack, preserves_flags));
                } else if f & CLFLUSHOPT != 0 {
                    core::arch::asm!("clflushopt [{0}]", in(reg) ptr, options(nostack, preserves_flags));
                } else {
                    _mm_clflush(ptr);
                }
            }
            line += 64;
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub use x86::{
    avx512_in_use, copy_nt, flush_lines, has_avx2, prefetch_lines, sfence, store_line_nt, store_word_nt, use_avx512,
};

#[cfg(not(target_arch = "x86_64"))]
mod fallback {
    /// # Safety
    /// Module contract.
    pub unsafe fn copy_nt(dst: *mut u8, src: &[u8]) {
        // SAFETY: same contract.
        unsafe { super::copy_volatile(dst, src) }
    }
    /// # Safety
    /// `dst` is an aligned word valid for writes.
    pub unsafe fn store_word_nt(dst: *mut u8, word: u64) {
        // SAFETY: same contract.
        unsafe { super::store_word_volatile(dst, word) }
    }
    /// # Safety
    /// `dst` is 8-aligned and `dst..dst + 64` valid for writes.
    pub unsafe fn store_line_nt(dst: *mut u8, w: [u64; 8]) {
        for (k, word) in w.into_iter().enumerate() {
            // SAFETY: an aligned word of the line (contract).
            unsafe { super::store_word_volatile(dst.add(8 * k), word) }
        }
    }
    /// # Safety
    /// None needed: nothing to write back without an architecture-specific instruction.
    pub unsafe fn flush_lines(_p: *mut u8, _len: usize) {}
    /// # Safety
    /// None needed: a hint that does nothing here.
    pub unsafe fn prefetch_lines(_p: *const u8, _len: usize) {}
    pub fn sfence() {
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst)
    }
    pub fn has_avx2() -> bool {
        false
    }
    pub fn use_avx512(_on: bool) -> bool {
        false
    }
    pub fn avx512_in_use() -> bool {
        false
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub use fallback::{
    avx512_in_use, copy_nt, flush_lines, has_avx2, prefetch_lines, sfence, store_line_nt, store_word_nt, use_avx512,
};
