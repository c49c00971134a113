//! The copies behind [`Region`](super::region::Region)'s summed stores and reads
//! ([`Media::store_nt_summed`](super::Media::store_nt_summed),
//! [`Media::read_summed`](super::Media::read_summed)): each copies a payload (an NT copy
//! into the pool, a copy out of it, or a copy out of memory another process may be
//! writing) and feeds the bytes to nvs-sum's four CRC32C streams (`checksum::sum`) in the
//! same pass, while each line is in L1: by `crc32` on x86_64 with SSE4.2, and by
//! carry-less folding where the CPU also has AVX-512F and VPCLMULQDQ. Elsewhere (other
//! targets, bare metal, miri) the copy of `arch.rs`, then the sum.
//!
//! Every function here is `unsafe` with `arch.rs`'s contract (for an NT copy: the
//! destination range, `dst..dst + src.len()` rounded up to 8, is valid for writes,
//! 8-byte aligned, and does not overlap `src`), or the one it states.

use super::arch::{copy_from_media, copy_nt};
use crate::checksum::sum::Sum;

/// NT copy of `src` to `dst` (as [`copy_nt`]) that feeds `src` to `sum` in the same pass
/// (x86_64 with SSE4.2: each 64-byte source line is loaded once, streamed out and fed
/// to the four CRC streams while it is in L1; elsewhere a copy, then the sum).
///
/// # Safety
/// Module contract.
pub unsafe fn copy_nt_summed(dst: *mut u8, src: &[u8], sum: &mut Sum) {
    #[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
    if crate::checksum::sum::hardware() {
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
    if crate::checksum::sum::hardware() {
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
    if crate::checksum::sum::hardware() && x86::has_avx2() && sum.at_line() && dst.len() >= 64 {
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

#[cfg(all(target_arch = "x86_64", not(target_os = "none")))]
mod x86 {
    use super::Sum;
    use crate::media::arch::x86::{
        avx512_in_use, copy_nt, read_word, sfence, store_word_nt, PREFETCH_PUT, PREFETCH_PUT_AHEAD,
    };
    pub use crate::media::arch::x86::{has_avx2, has_clmul512};
    use core::arch::x86_64::*;

    /// See the portable `copy_nt_summed`.
    ///
    /// # Safety
    /// Module contract; the CPU has SSE4.2.
    pub unsafe fn copy_nt_summed(dst: *mut u8, src: &[u8], sum: &mut Sum) {
        // 64-byte stores where the lines are summed by folding: that kernel holds each
        // line in one 512-bit register, and storing it as two 32-byte halves slowed it.
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

    #[inline(always)]
    fn widen(c: &[u32; 4]) -> [u64; 4] {
        [c[0] as u64, c[1] as u64, c[2] as u64, c[3] as u64]
    }

    #[inline(always)]
    fn narrow(c: &[u64; 4]) -> [u32; 4] {
        [c[0] as u32, c[1] as u32, c[2] as u32, c[3] as u32]
    }

    /// NT-copy `len` bytes (a multiple of 64) by 64-byte AVX-512 stores, each source line
    /// fed to the CRC streams `c` while in L1.
    ///
    /// # Safety
    /// `dst` 64-aligned, both ranges valid, the CPU has AVX-512F and SSE4.2.
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
    pub unsafe fn copy_out_summed(dst: &mut [u8], src: *const u8, sum: &mut Sum) {
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
                    // them: a 64-byte store split across two cache lines is much slower
                    // than an aligned one.
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
    const CLMUL_K256: [i64; 2] = [0x3da6_d0cb, 0xba4f_c28e];
    const CLMUL_K128: [i64; 2] = [0xf20c_0dfe, 0x493c_7d27];
    const CLMUL_K512: [i64; 2] = [0x740e_ef02, 0x9e4a_ddf8];

    /// A fold constant in every 128-bit lane.
    #[target_feature(enable = "avx512f")]
    fn clmul_constant(k: [i64; 2]) -> __m512i {
        _mm512_set4_epi64(k[1], k[0], k[1], k[0])
    }

    /// What a folding kernel starts with: the permutation that gives stream `i` lane `i`
    /// (words `i` and `i + 4` of a line), the x^256 constant, and the streams' states
    /// `c` in their lanes' first words.
    #[target_feature(enable = "avx512f")]
    fn clmul_start(c: &[u32; 4]) -> (__m512i, __m512i, __m512i) {
        let idx = _mm512_set_epi64(7, 3, 6, 2, 5, 1, 4, 0);
        let init = _mm512_set_epi64(0, c[3] as i64, 0, c[2] as i64, 0, c[1] as i64, 0, c[0] as i64);
        (idx, clmul_constant(CLMUL_K256), init)
    }

    /// The last steps of a folding kernel: accumulator `a` (even lines) folded by 16
    /// bytes into `b` (odd lines), then two `crc32` steps per stream.
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
    const STORE_NT: bool = true;
    const STORE_PLAIN: bool = false;
    /// Copies out of this many bytes or more use NT stores (where they are summed by
    /// folding): larger than the caches, where memcpy does the same.
    const NT_OUT: usize = 4 << 20;
    /// How far ahead of its loads a folding copy out of the pool (a get) prefetches the
    /// source: far enough to hide the memory's latency at the copy's speed (nearer left
    /// a verified get bound by its loads, farther gained nothing; `nvs bench` compares
    /// nvs get with memcpy out of the mapping).
    const PREFETCH_AHEAD: usize = 8192;
    /// nvs-sum's four CRC32C streams by carry-less multiplication, while copying by
    /// 64-byte moves: the same values as eight `crc32` steps per line, for less
    /// (`crc32` runs on one port, one per cycle, and eight per line slow the copy; two
    /// 512-bit carry-less multiplies per line slow it less).
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
    #[target_feature(enable = "avx512f,vpclmulqdq,sse4.2")]
    pub unsafe fn lines_summed_clmul_shifted<const NT: bool>(
        dst: *mut u8,
        src: *const u8,
        len: usize,
        shift: usize,
        c: &mut [u32; 4],
    ) {
        // The source asked for ahead of the loads where it is likely not cached: a get
        // out of the pool is bound by loading it, and so is a put of a source larger
        // than the caches. A put's source of a few KiB is usually cached, and gains
        // nothing. Two loops, with and without the prefetches, rather than a test at
        // each line, which slowed the small puts that never prefetch.
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
        // stream) while 256 bytes are left, then two: four independent chains keep the
        // multiplier busy, where two would each wait on a multiply every other line.
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
}
