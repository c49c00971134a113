//! The store instructions behind [`super::Region`]: x86_64 non-temporal stores and a
//! portable fallback (volatile writes + fences) for other targets and miri.
//!
//! Every function here is `unsafe` with one contract: the destination range
//! (`dst..dst + src.len()` rounded up to 8, or the 8-byte word) is valid for writes,
//! 8-byte aligned, and does not overlap `src`.

use crate::format::sum::Sum;

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

/// NT copy of `src` to `dst` (as [`copy_nt`]) that feeds `src` to `sum` in the same pass
/// (x86_64 with SSE4.2: each 64-byte source line is loaded once, streamed out and fed
/// to the four CRC streams while it is in L1; elsewhere a copy, then the sum).
///
/// # Safety
/// Module contract.
pub unsafe fn copy_nt_summed(dst: *mut u8, src: &[u8], sum: &mut Sum) {
    #[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
    if crate::format::sum::hardware() {
        // SAFETY: forwarded contract; SSE4.2 detected.
        unsafe { x86::copy_nt_summed(dst, src, sum) };
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { copy_nt(dst, src) };
    sum.write(src);
}

/// Copy `dst.len()` bytes from `src` (memory no other process writes meanwhile: a plain
/// copy is sound) into `dst` by ordinary loads and stores, feeding them to `sum` in the
/// same pass where the CPU has SSE4.2 (else a copy, then the sum).
///
/// # Safety
/// `src..src + dst.len()` is valid for reads and does not overlap `dst`.
pub unsafe fn copy_out_summed(dst: &mut [u8], src: *const u8, sum: &mut Sum) {
    #[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
    if crate::format::sum::hardware() {
        // SAFETY: forwarded contract; SSE4.2 detected.
        unsafe { x86::copy_out_summed(dst, src, sum) };
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
    sum.write(dst);
}

/// [`copy_from_media`] (memory another process may be writing meanwhile) that feeds the
/// bytes to `sum` in the same pass where the CPU has AVX2 and SSE4.2 (the copy and the
/// CRC steps in one `asm!` loop); else the copy, then the sum of the copy.
///
/// # Safety
/// As [`copy_from_media`].
pub unsafe fn copy_from_media_summed(dst: &mut [u8], src: *const u8, sum: &mut Sum) {
    #[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
    if crate::format::sum::hardware() && x86::has_avx2() && sum.at_line() && dst.len() >= 64 {
        let lines = dst.len() & !63;
        let mut c = sum.state();
        let folded = if x86::has_clmul512() && lines >= 128 { lines & !127 } else { 0 };
        let single = lines - folded;
        // SAFETY: `lines` bytes of the valid ranges (`single + folded`); AVX2 and SSE4.2
        // detected, AVX-512F and VPCLMULQDQ for the folded part.
        unsafe {
            if single > 0 {
                x86::media_lines_summed(dst.as_mut_ptr(), src, single, &mut c);
            }
            if folded > 0 {
                x86::media_lines_summed_clmul(dst.as_mut_ptr().add(single), src.add(single), folded, &mut c);
            }
        }
        sum.lines_done(c, lines / 64);
        let rest = &mut dst[lines..];
        // SAFETY: the rest of the ranges.
        unsafe { copy_from_media(rest, src.add(lines)) };
        sum.write(rest);
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { copy_from_media(dst, src) };
    sum.write(dst);
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

#[cfg(target_arch = "x86_64")]
mod x86 {
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
            // In pieces of at most 256 KiB: one `rep movsb` over many MiB was slower here
            // (0.66x a plain copy at 20 MiB, 0.70-0.74x in pieces; 1.0x up to 1 MiB).
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

    /// AVX-512F and VPCLMULQDQ: nvs-sum by carry-less folding ([`lines_summed_clmul`]).
    #[cfg(not(target_os = "none"))]
    pub fn has_clmul512() -> bool {
        features() & VPCLMUL != 0
    }

    /// Whether bulk copies use 64-byte AVX-512 stores: `DEFAULT` until [`use_avx512`]
    /// says otherwise. By default they do on Intel CPUs with VPCLMULQDQ (Ice Lake and
    /// later): on the Intel Xeon host of the README's table a raw NT copy + fences ran
    /// 7-12% faster at 32 KiB and 1 MiB with them (other Intel generations unmeasured). Elsewhere 32-byte AVX2 ones, which copy 1-3% faster into a tmpfs mapping on
    /// the reference AMD EPYC (it splits 512-bit stores), and which PMDK defaults to.
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
    /// `movnti` (which fill one write-combining buffer, as one 64-byte store does). In
    /// `cargo bench -p nvs-core` (put, heap memory, six alternating rounds) a batch of
    /// 64 x 1 KiB took 10.6-13.0 us (mean 11.6) with this, 11.4-13.4 us (mean 12.8) with
    /// the line assembled in memory and stored by `copy_nt`; with four 16-byte SSE2
    /// stores built in registers 12.2-13.0 us in three of those rounds.
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
    fn read_word(s: &[u8]) -> u64 {
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
        // folding copy does (`lines_summed_clmul_shifted`): two loops, with and without
        // the prefetches, rather than a test in the loop.
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

    /// See the portable `copy_nt_summed`.
    ///
    /// # Safety
    /// Module contract; the CPU has SSE4.2.
    #[cfg(not(target_os = "none"))]
    pub unsafe fn copy_nt_summed(dst: *mut u8, src: &[u8], sum: &mut crate::format::sum::Sum) {
        // 64-byte stores where the lines are summed by folding: with 32-byte ones that
        // kernel lost 5-10% more of the copy's speed here.
        let wide = if avx512_in_use() || has_clmul512() {
            64
        } else if has_avx2() {
            32
        } else {
            16
        };
        let (mut d, mut s) = (dst, src);
        // Single words until the destination is aligned for the wide stores and the next
        // word goes to CRC stream 0 (a payload starts on a line, so both at once).
        let mut n = 0;
        while s.len() >= 8 && !((d as usize).is_multiple_of(wide) && sum.at_line()) && n < 8 {
            // SAFETY: an aligned word inside the destination (contract).
            unsafe { store_word_nt(d, read_word(s)) };
            sum.write(&s[..8]);
            // SAFETY: inside the destination or one past it.
            d = unsafe { d.add(8) };
            s = &s[8..];
            n += 1;
        }
        let lines = s.len() & !63;
        if lines > 0 && (d as usize).is_multiple_of(wide) && sum.at_line() {
            let mut c = sum.state();
            // An odd line first by `crc32`, the pairs after it by folding (where the CPU
            // has VPCLMULQDQ); else every line by `crc32`.
            let folded = if has_clmul512() && lines >= 128 { lines & !127 } else { 0 };
            let single = lines - folded;
            // SAFETY: `d` is `wide`-aligned, `d..d + lines` inside the destination, `lines`
            // a multiple of 64 (`folded` of 128); AVX2/AVX-512/VPCLMULQDQ only when
            // detected, SSE4.2 by contract.
            unsafe {
                match wide {
                    64 => nt_lines_summed_avx512(d, s.as_ptr(), single, &mut c),
                    32 => nt_lines_summed_avx2(d, s.as_ptr(), single, &mut c),
                    _ => nt_lines_summed_sse2(d, s.as_ptr(), single, &mut c),
                }
                if folded > 0 {
                    lines_summed_clmul::<STORE_NT>(d.add(single), s.as_ptr().add(single), folded, &mut c);
                }
                d = d.add(lines);
            }
            sum.lines_done(c, lines / 64);
            s = &s[lines..];
        }
        // The rest (none for a payload of whole lines: no calls then).
        if !s.is_empty() {
            // SAFETY: the rest of the destination (contract).
            unsafe { copy_nt(d, s) };
            sum.write(s);
        }
    }

    /// Eight CRC32C steps over the 64-byte line at `p`, word `j` to stream `j % 4`.
    ///
    /// # Safety
    /// `p..p + 64` valid for reads; SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[inline(always)]
    unsafe fn crc_line(c: &mut [u64; 4], p: *const u8) {
        // SAFETY: eight words inside the line (contract); unaligned reads.
        unsafe {
            let w = |k: usize| core::ptr::read_unaligned(p.add(8 * k).cast::<u64>());
            c[0] = _mm_crc32_u64(c[0], w(0));
            c[1] = _mm_crc32_u64(c[1], w(1));
            c[2] = _mm_crc32_u64(c[2], w(2));
            c[3] = _mm_crc32_u64(c[3], w(3));
            c[0] = _mm_crc32_u64(c[0], w(4));
            c[1] = _mm_crc32_u64(c[1], w(5));
            c[2] = _mm_crc32_u64(c[2], w(6));
            c[3] = _mm_crc32_u64(c[3], w(7));
        }
    }

    #[cfg(not(target_os = "none"))]
    #[inline(always)]
    fn widen(c: &[u32; 4]) -> [u64; 4] {
        [c[0] as u64, c[1] as u64, c[2] as u64, c[3] as u64]
    }

    #[cfg(not(target_os = "none"))]
    #[inline(always)]
    fn narrow(c: &[u64; 4]) -> [u32; 4] {
        [c[0] as u32, c[1] as u32, c[2] as u32, c[3] as u32]
    }

    /// NT-copy `len` bytes (a multiple of 64) by 64-byte AVX-512 stores, each source line
    /// fed to the CRC streams `c` while in L1.
    ///
    /// # Safety
    /// `dst` 64-aligned, both ranges valid, the CPU has AVX-512F and SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f,sse4.2")]
    unsafe fn nt_lines_summed_avx512(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let mut k = widen(c);
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 64 <= len`; load unaligned, store 64-aligned.
            unsafe {
                _mm512_stream_si512(dst.add(i).cast(), _mm512_loadu_si512(src.add(i).cast()));
                crc_line(&mut k, src.add(i));
            }
            i += 64;
        }
        *c = narrow(&k);
    }

    /// As [`nt_lines_summed_avx512`] with 32-byte AVX2 stores.
    ///
    /// # Safety
    /// `dst` 32-aligned, both ranges valid, the CPU has AVX2 and SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx2,sse4.2")]
    unsafe fn nt_lines_summed_avx2(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let mut k = widen(c);
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 64 <= len`; loads unaligned, stores 32-aligned.
            unsafe {
                let a = _mm256_loadu_si256(src.add(i).cast());
                let b = _mm256_loadu_si256(src.add(i + 32).cast());
                _mm256_stream_si256(dst.add(i).cast(), a);
                _mm256_stream_si256(dst.add(i + 32).cast(), b);
                crc_line(&mut k, src.add(i));
            }
            i += 64;
        }
        *c = narrow(&k);
    }

    /// As [`nt_lines_summed_avx512`] with 16-byte SSE2 stores.
    ///
    /// # Safety
    /// `dst` 16-aligned, both ranges valid, the CPU has SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "sse2,sse4.2")]
    unsafe fn nt_lines_summed_sse2(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let mut k = widen(c);
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 64 <= len`; loads unaligned, stores 16-aligned.
            unsafe {
                let a = _mm_loadu_si128(src.add(i).cast());
                let b = _mm_loadu_si128(src.add(i + 16).cast());
                let e = _mm_loadu_si128(src.add(i + 32).cast());
                let f = _mm_loadu_si128(src.add(i + 48).cast());
                _mm_stream_si128(dst.add(i).cast(), a);
                _mm_stream_si128(dst.add(i + 16).cast(), b);
                _mm_stream_si128(dst.add(i + 32).cast(), e);
                _mm_stream_si128(dst.add(i + 48).cast(), f);
                crc_line(&mut k, src.add(i));
            }
            i += 64;
        }
        *c = narrow(&k);
    }

    /// See the portable `copy_out_summed`.
    ///
    /// # Safety
    /// `src..src + dst.len()` valid for reads, not overlapping `dst`, written by no one
    /// meanwhile; the CPU has SSE4.2.
    #[cfg(not(target_os = "none"))]
    pub unsafe fn copy_out_summed(dst: &mut [u8], src: *const u8, sum: &mut crate::format::sum::Sum) {
        let lines = if sum.at_line() { dst.len() & !63 } else { 0 };
        if lines > 0 {
            let mut c = sum.state();
            let folded = if has_clmul512() && lines >= 128 { lines & !127 } else { 0 };
            let single = lines - folded;
            let d = dst.as_mut_ptr();
            // SAFETY: `lines` bytes of both valid ranges (`single + folded`); SSE4.2 by
            // contract, AVX2 and VPCLMULQDQ if detected.
            unsafe {
                if has_avx2() {
                    out_lines_summed_avx2(d, src, single, &mut c)
                } else {
                    out_lines_summed_sse2(d, src, single, &mut c)
                }
                if folded > 0 {
                    // The 64-byte stores aligned where `d` is not, as memcpy aligns
                    // them: a store split across two lines cost a 32 KiB verified get
                    // 30% of its speed (0.68x memcpy out on an AMD EPYC host).
                    let (d, s) = (d.add(single), src.add(single));
                    let shift = (d as usize).wrapping_neg() & 63;
                    if folded >= NT_OUT {
                        // Large copies out by NT stores, as memcpy does them (no read of
                        // the destination's lines first).
                        lines_summed_clmul_shifted::<STORE_NT>(d, s, folded, shift, &mut c);
                    } else {
                        lines_summed_clmul_shifted::<STORE_PLAIN>(d, s, folded, shift, &mut c);
                    }
                    core::ptr::copy_nonoverlapping(s, d, shift);
                    let after = folded - 64 + shift;
                    if shift > 0 {
                        core::ptr::copy_nonoverlapping(s.add(after), d.add(after), 64 - shift);
                    }
                    if folded >= NT_OUT {
                        // The NT stores ordered before anything after this copy (a
                        // release of the buffer to another thread does not order them).
                        sfence();
                    }
                }
            }
            sum.lines_done(c, lines / 64);
        }
        let rest = &mut dst[lines..];
        // SAFETY: the rest of the ranges (contract).
        unsafe { core::ptr::copy_nonoverlapping(src.add(lines), rest.as_mut_ptr(), rest.len()) };
        sum.write(rest);
    }

    /// Copy `len` bytes (a non-zero multiple of 64) from `src`, memory another process
    /// may be writing, to `dst` by AVX2 moves in `asm!` (see `copy_from_media`), feeding
    /// each copied line's 8 words to the CRC streams `c` by `crc32`, read back from the
    /// copy (in L1): each source byte is read once, and the sum is of the very bytes
    /// returned, whatever a concurrent writer stores meanwhile.
    ///
    /// # Safety
    /// Both ranges valid and disjoint; AVX2 and SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx2")]
    pub unsafe fn media_lines_summed(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let mut k = widen(c);
        // SAFETY: reads and writes `len` bytes, 64 at a time (`len` a non-zero multiple
        // of 64); `crc32` only reads the line just stored to `dst`; only the declared
        // registers (and flags) change.
        unsafe {
            core::arch::asm!(
                "2:",
                "vmovdqu {a}, [{s}]",
                "vmovdqu {b}, [{s} + 32]",
                "vmovdqu [{d}], {a}",
                "vmovdqu [{d} + 32], {b}",
                "crc32 {c0}, qword ptr [{d}]",
                "crc32 {c1}, qword ptr [{d} + 8]",
                "crc32 {c2}, qword ptr [{d} + 16]",
                "crc32 {c3}, qword ptr [{d} + 24]",
                "crc32 {c0}, qword ptr [{d} + 32]",
                "crc32 {c1}, qword ptr [{d} + 40]",
                "crc32 {c2}, qword ptr [{d} + 48]",
                "crc32 {c3}, qword ptr [{d} + 56]",
                "add {s}, 64",
                "add {d}, 64",
                "sub {n}, 64",
                "jnz 2b",
                "vzeroupper",
                s = inout(reg) src => _,
                d = inout(reg) dst => _,
                n = inout(reg) len => _,
                c0 = inout(reg) k[0],
                c1 = inout(reg) k[1],
                c2 = inout(reg) k[2],
                c3 = inout(reg) k[3],
                a = out(ymm_reg) _,
                b = out(ymm_reg) _,
                options(nostack)
            );
        }
        *c = narrow(&k);
    }

    /// [`media_lines_summed`] by carry-less folding, in `asm!` (see `copy_from_media`):
    /// each line is loaded once by a 64-byte move, stored, and folded into the four
    /// streams as [`lines_summed_clmul`] does it (the same constants and final steps),
    /// so the sum is of the very bytes copied.
    ///
    /// # Safety
    /// Both ranges valid and disjoint; `len` a non-zero multiple of 128; AVX-512F,
    /// VPCLMULQDQ and SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f,vpclmulqdq,sse4.2")]
    pub unsafe fn media_lines_summed_clmul(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let (idx, k256, init) = clmul_start(c);
        let (mut a, mut b): (__m512i, __m512i);
        // SAFETY: reads and writes `len` bytes, 128 at a time (`len` a non-zero multiple
        // of 128); only the declared registers (and flags) change.
        unsafe {
            core::arch::asm!(
                // The first two lines start the accumulators (the state into the first).
                "vmovdqu64 {x}, [{s}]",
                "vmovdqu64 [{d}], {x}",
                "vpermq {x}, {idx}, {x}",
                "vpxorq {a}, {x}, {init}",
                "vmovdqu64 {x}, [{s} + 64]",
                "vmovdqu64 [{d} + 64], {x}",
                "vpermq {b}, {idx}, {x}",
                "add {s}, 128",
                "add {d}, 128",
                "sub {n}, 128",
                "jz 3f",
                "2:",
                // `PREFETCH_AHEAD`, as in `lines_summed_clmul` (a prefetch never faults).
                "prefetcht0 [{s} + {ahead}]",
                "vmovdqu64 {x}, [{s}]",
                "vmovdqu64 [{d}], {x}",
                "vpermq {x}, {idx}, {x}",
                "vpclmulqdq {t}, {a}, {k}, 0x00",
                "vpclmulqdq {a}, {a}, {k}, 0x11",
                "vpternlogq {a}, {t}, {x}, 0x96",
                "vmovdqu64 {x}, [{s} + 64]",
                "vmovdqu64 [{d} + 64], {x}",
                "vpermq {x}, {idx}, {x}",
                "vpclmulqdq {t}, {b}, {k}, 0x00",
                "vpclmulqdq {b}, {b}, {k}, 0x11",
                "vpternlogq {b}, {t}, {x}, 0x96",
                "add {s}, 128",
                "add {d}, 128",
                "sub {n}, 128",
                "jnz 2b",
                "3:",
                s = inout(reg) src => _,
                d = inout(reg) dst => _,
                n = inout(reg) len => _,
                idx = in(zmm_reg) idx,
                k = in(zmm_reg) k256,
                init = in(zmm_reg) init,
                a = out(zmm_reg) a,
                b = out(zmm_reg) b,
                x = out(zmm_reg) _,
                t = out(zmm_reg) _,
                ahead = const PREFETCH_AHEAD,
                options(nostack)
            );
        }
        clmul_finish(a, b, c);
    }

    /// Fold constants of nvs-sum's streams (lane low: for the first word of 16 bytes,
    /// high: for the second): x^256 and x^128 mod the CRC32C polynomial, as `pclmulqdq`
    /// takes them for a reflected CRC.
    #[cfg(not(target_os = "none"))]
    const CLMUL_K256: [i64; 2] = [0x3da6_d0cb, 0xba4f_c28e];
    #[cfg(not(target_os = "none"))]
    const CLMUL_K128: [i64; 2] = [0xf20c_0dfe, 0x493c_7d27];
    #[cfg(not(target_os = "none"))]
    const CLMUL_K512: [i64; 2] = [0x740e_ef02, 0x9e4a_ddf8];

    /// A fold constant in every 128-bit lane.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f")]
    fn clmul_constant(k: [i64; 2]) -> __m512i {
        _mm512_set4_epi64(k[1], k[0], k[1], k[0])
    }

    /// What a folding kernel starts with: the permutation that gives stream `i` lane `i`
    /// (words `i` and `i + 4` of a line), the x^256 constant, and the streams' states
    /// `c` in their lanes' first words.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f")]
    fn clmul_start(c: &[u32; 4]) -> (__m512i, __m512i, __m512i) {
        let idx = _mm512_set_epi64(7, 3, 6, 2, 5, 1, 4, 0);
        let init = _mm512_set_epi64(0, c[3] as i64, 0, c[2] as i64, 0, c[1] as i64, 0, c[0] as i64);
        (idx, clmul_constant(CLMUL_K256), init)
    }

    /// The last steps of a folding kernel: accumulator `a` (even lines) folded by 16
    /// bytes into `b` (odd lines), then two `crc32` steps per stream.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f,vpclmulqdq,sse4.2")]
    fn clmul_finish(a: __m512i, b: __m512i, c: &mut [u32; 4]) {
        let k128 = clmul_constant(CLMUL_K128);
        let x = _mm512_ternarylogic_epi64::<0x96>(
            _mm512_clmulepi64_epi128::<0x00>(a, k128),
            _mm512_clmulepi64_epi128::<0x11>(a, k128),
            b,
        );
        let mut o = [0u64; 8];
        // SAFETY: 64 bytes into `o`.
        unsafe { _mm512_storeu_si512(o.as_mut_ptr().cast(), x) };
        for (s, w) in c.iter_mut().zip(o.chunks_exact(2)) {
            *s = _mm_crc32_u64(_mm_crc32_u64(0, w[0]), w[1]) as u32;
        }
    }

    /// Copy `len` bytes (a multiple of 64) by AVX2 loads and stores, each source line fed
    /// to the CRC streams while in L1.
    ///
    /// # Safety
    /// Both ranges valid and disjoint; AVX2 and SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx2,sse4.2")]
    unsafe fn out_lines_summed_avx2(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let mut k = widen(c);
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 64 <= len`; unaligned loads and stores.
            unsafe {
                let a = _mm256_loadu_si256(src.add(i).cast());
                let b = _mm256_loadu_si256(src.add(i + 32).cast());
                _mm256_storeu_si256(dst.add(i).cast(), a);
                _mm256_storeu_si256(dst.add(i + 32).cast(), b);
                crc_line(&mut k, dst.add(i)); // the copy: the sum is of the bytes returned
            }
            i += 64;
        }
        *c = narrow(&k);
    }

    /// As [`out_lines_summed_avx2`] with SSE2 moves.
    ///
    /// # Safety
    /// Both ranges valid and disjoint; SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "sse2,sse4.2")]
    unsafe fn out_lines_summed_sse2(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        let mut k = widen(c);
        let mut i = 0;
        while i < len {
            // SAFETY: `i + 64 <= len`; unaligned loads and stores.
            unsafe {
                for j in [0, 16, 32, 48] {
                    _mm_storeu_si128(dst.add(i + j).cast(), _mm_loadu_si128(src.add(i + j).cast()));
                }
                crc_line(&mut k, dst.add(i)); // the copy: the sum is of the bytes returned
            }
            i += 64;
        }
        *c = narrow(&k);
    }

    /// How [`lines_summed_clmul`] stores: 64-byte NT stores, or ordinary ones.
    #[cfg(not(target_os = "none"))]
    const STORE_NT: bool = true;
    #[cfg(not(target_os = "none"))]
    const STORE_PLAIN: bool = false;
    /// Copies out of this many bytes or more use NT stores (where they are summed by
    /// folding): larger than the caches, where memcpy does the same.
    #[cfg(not(target_os = "none"))]
    const NT_OUT: usize = 4 << 20;
    /// How far ahead of its loads a folding copy out of the pool (a get) prefetches the
    /// source: 1 KiB gave a 32 KiB verified get 0.62x memcpy out of the mapping on an
    /// AMD EPYC (Zen 5) host, 4 KiB 0.85x, 8 KiB 1.01-1.05x (16 KiB no better).
    #[cfg(not(target_os = "none"))]
    const PREFETCH_AHEAD: usize = 8192;
    /// How far ahead a folding NT copy into the pool (a put of `PREFETCH_PUT` or more)
    /// prefetches its source (1 MiB puts on that host: 0.91-0.93x the unchecksummed put
    /// with 1 KiB, 0.97-0.99x with 4 KiB, 0.92-0.96x with 16 KiB).
    #[cfg(not(target_os = "none"))]
    const PREFETCH_PUT_AHEAD: usize = 4096;
    /// Puts of this many bytes or more prefetch their source (copy-outs always do).
    #[cfg(not(target_os = "none"))]
    const PREFETCH_PUT: usize = 1 << 20;

    /// nvs-sum's four CRC32C streams by carry-less multiplication, while copying by
    /// 64-byte moves: the same values as eight `crc32` steps per line, for less (`crc32`
    /// runs on one port, one per cycle, and cost a put 15-20% of its copy speed here;
    /// this 5-10%).
    ///
    /// Each 128-bit lane `i` of a 512-bit register holds stream `i`'s next 16 bytes of
    /// message (words `i` and `i + 4` of a line). Four accumulators take every fourth
    /// line while 256 bytes are left (each step folds an accumulator forward by 64 bytes
    /// of its stream's message: multiplies by x^512 mod P, as two 32-bit constants, and
    /// adds the new line), then are folded into two that take alternate lines (forward
    /// by 32 bytes, x^256), keeping polynomials congruent, modulo the CRC32C polynomial
    /// P, to the stream's message so far. At the end one accumulator is folded by 16
    /// bytes into the other,
    /// and two `crc32` steps per stream reduce the 128 bits left to the stream's state.
    /// The state going in is added to the stream's first word, as `crc32` itself does.
    /// The constants are the standard CRC32C folding constants; tests/region.rs checks
    /// the result against `crc32` for line counts from 2 on.
    ///
    /// # Safety
    /// `len` a non-zero multiple of 128; `src..src + len` valid for reads and
    /// `dst..dst + len` for writes, disjoint; `dst` 64-aligned for NT stores; the CPU
    /// has AVX-512F, VPCLMULQDQ and SSE4.2.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f,vpclmulqdq,sse4.2")]
    pub unsafe fn lines_summed_clmul<const NT: bool>(dst: *mut u8, src: *const u8, len: usize, c: &mut [u32; 4]) {
        // SAFETY: forwarded contract; no shift.
        unsafe { lines_summed_clmul_shifted::<NT>(dst, src, len, 0, c) }
    }

    /// [`lines_summed_clmul`] whose 64-byte stores start `shift` bytes (0..64) into the
    /// range, so that they are aligned where `dst` is not: they cover `shift .. shift +
    /// len - 64` (all of it for a shift of 0); the caller copies the `shift` bytes before
    /// and the `64 - shift` after. The sums still read the source by its own lines.
    ///
    /// # Safety
    /// As [`lines_summed_clmul`], with `dst + shift` 64-aligned for NT stores and
    /// `shift < 64`.
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f,vpclmulqdq,sse4.2")]
    pub unsafe fn lines_summed_clmul_shifted<const NT: bool>(
        dst: *mut u8,
        src: *const u8,
        len: usize,
        shift: usize,
        c: &mut [u32; 4],
    ) {
        // The source asked for ahead of the loads where it is likely not cached: a get
        // out of the pool is bound by loading it (without this the folding copy-out ran
        // 0.80-0.90x memcpy at 32 KiB; with it 0.92-1.02x), and so is a put of a source
        // larger than the caches (20 MiB: 1.07-1.14x the unchecksummed put, was 0.96x).
        // A put's source of a few KiB is usually cached: prefetching it did not help a
        // 32 KiB put. Two loops, with and without the prefetches: with one loop that
        // tested whether to prefetch at each line, a 32 KiB put (which never did) ran
        // 0.75-0.95x the unchecksummed put in seven `nvs bench` runs (median 0.78x);
        // without the test 0.87-1.00x in eight (median 0.93x).
        // SAFETY: forwarded contract.
        unsafe {
            if !NT || len >= PREFETCH_PUT {
                lines_summed_clmul_loop::<NT, true>(dst, src, len, shift, c)
            } else {
                lines_summed_clmul_loop::<NT, false>(dst, src, len, shift, c)
            }
        }
    }

    /// [`lines_summed_clmul_shifted`], prefetching the source ahead of its loads if
    /// `AHEAD`.
    ///
    /// # Safety
    /// As [`lines_summed_clmul_shifted`].
    #[cfg(not(target_os = "none"))]
    #[target_feature(enable = "avx512f,vpclmulqdq,sse4.2")]
    unsafe fn lines_summed_clmul_loop<const NT: bool, const AHEAD: bool>(
        dst: *mut u8,
        src: *const u8,
        len: usize,
        shift: usize,
        c: &mut [u32; 4],
    ) {
        let (idx, k256, init) = clmul_start(c);
        // NT stores: a put (or a copy out of 4 MiB or more).
        let distance = if NT { PREFETCH_PUT_AHEAD } else { PREFETCH_AHEAD };
        let line = |i: usize| {
            // SAFETY: `i + 64 <= len` (contract), and `i + shift + 64 <= len` for the
            // store; `dst + i + shift` 64-aligned for NT stores.
            unsafe {
                if AHEAD {
                    // SAFETY: a prefetch never faults.
                    _mm_prefetch::<_MM_HINT_T0>(src.wrapping_add(i + distance).cast());
                }
                let x = _mm512_loadu_si512(src.add(i).cast());
                let y = if shift == 0 { x } else { _mm512_loadu_si512(src.add(i + shift).cast()) };
                if shift == 0 || i + shift + 64 <= len {
                    if NT {
                        _mm512_stream_si512(dst.add(i + shift).cast(), y);
                    } else {
                        _mm512_storeu_si512(dst.add(i + shift).cast(), y);
                    }
                }
                _mm512_permutexvar_epi64(idx, x)
            }
        };
        let fold = |a: __m512i, k: __m512i, d: __m512i| {
            _mm512_ternarylogic_epi64::<0x96>(
                _mm512_clmulepi64_epi128::<0x00>(a, k),
                _mm512_clmulepi64_epi128::<0x11>(a, k),
                d,
            )
        };
        // Four accumulators (lines 4j, 4j + 1, ... each folded by 64 bytes of its
        // stream) while 256 bytes are left, then two: with two chains (each waiting on
        // a multiply every other line) a 32 KiB verified get out of a 512 MiB pool ran
        // 0.955x memcpy out on an AMD EPYC (Zen 5) host, with four 1.01-1.05x.
        let (mut a, mut b, mut i);
        if len >= 256 {
            let k512 = clmul_constant(CLMUL_K512);
            let mut q = [_mm512_xor_si512(line(0), init), line(64), line(128), line(192)];
            i = 256;
            while i + 256 <= len {
                q[0] = fold(q[0], k512, line(i));
                q[1] = fold(q[1], k512, line(i + 64));
                q[2] = fold(q[2], k512, line(i + 128));
                q[3] = fold(q[3], k512, line(i + 192));
                i += 256;
            }
            // What two accumulators would hold after line i - 1: lines 4j and 4j + 2
            // are the even lines, 4j + 1 and 4j + 3 the odd ones.
            a = fold(q[0], k256, q[2]);
            b = fold(q[1], k256, q[3]);
        } else {
            a = _mm512_xor_si512(line(0), init);
            b = line(64);
            i = 128;
        }
        while i < len {
            a = fold(a, k256, line(i));
            b = fold(b, k256, line(i + 64));
            i += 128;
        }
        clmul_finish(a, b, c);
    }

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
