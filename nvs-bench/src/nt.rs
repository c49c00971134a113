//! The ceiling: a raw copy with non-temporal stores, and fences, written here without
//! any nvs code (nvs-core's copy is what is being measured). Two store widths where the
//! CPU has both: AVX2 (32 B) and AVX-512 (64 B); a row's ratio is over the faster.

/// The store width of the plain ceiling rows: 32 (AVX2), 16 (SSE2), 0 (no NT stores).
pub fn width() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            32
        } else {
            16
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// The store width of the wide ceiling rows: 64 with AVX-512F, else 0 (not available).
pub fn wide_width() -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 64;
        }
    }
    0
}

/// NT-copy `src` to `dst` with `width`-byte stores (8-byte `movnti` for the tail).
///
/// # Safety
/// `dst` is 64-byte aligned, `dst..dst + src.len()` rounded up to 8 is valid for
/// writes and does not overlap `src`; `width` is what [`width`] or [`wide_width`]
/// returned (non-zero).
#[cfg(target_arch = "x86_64")]
pub unsafe fn copy(dst: *mut u8, src: &[u8], width: usize) {
    let body = src.len() & !255;
    // SAFETY: `body` bytes fit (contract); the CPU feature matches `width` (contract).
    unsafe {
        match width {
            64 => body512(dst, src.as_ptr(), body),
            32 => body256(dst, src.as_ptr(), body),
            _ => body128(dst, src.as_ptr(), body),
        }
    }
    let mut i = body;
    while i < src.len() {
        let mut w = [0u8; 8];
        let n = (src.len() - i).min(8);
        w[..n].copy_from_slice(&src[i..i + n]);
        // SAFETY: an aligned word inside the (rounded-up) destination.
        unsafe { core::arch::x86_64::_mm_stream_si64(dst.add(i).cast(), i64::from_le_bytes(w)) };
        i += 8;
    }
}

/// `sfence`.
#[cfg(target_arch = "x86_64")]
pub fn fence() {
    // SAFETY: sfence has no preconditions.
    unsafe { core::arch::x86_64::_mm_sfence() }
}

/// The commit flag `v` as the first word of one whole 64-byte line of NT stores (the
/// other words zero): a full write-combining flush, which the fence after it waits for
/// less than for a lone 8-byte store (a partial flush).
///
/// # Safety
/// `dst` is 64-byte aligned and `dst..dst + 64` is valid for writes.
#[cfg(target_arch = "x86_64")]
pub unsafe fn flag(dst: *mut u8, v: u64) {
    for k in 0..8 {
        let w = if k == 0 { v as i64 } else { 0 };
        // SAFETY: an aligned word of the line (contract).
        unsafe { core::arch::x86_64::_mm_stream_si64(dst.add(8 * k).cast(), w) }
    }
}

/// Copies of at least this many bytes prefetch their source `PREFETCH_AHEAD` bytes ahead
/// (a source beyond the L2 cache: with it a 20 MiB copy + commit ran ~2% faster here, in
/// a C harness, where PMDK's `pmem_memcpy_persist` had beaten the plain loop).
const PREFETCH_FROM: usize = 1 << 20;
const PREFETCH_AHEAD: usize = 4096;

/// Prefetch the four lines at `p`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn prefetch4(p: *const u8) {
    use core::arch::x86_64::*;
    for k in 0..4 {
        // SAFETY: a prefetch is a hint; it never faults, whatever the address.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * k).cast()) };
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn body512(d: *mut u8, s: *const u8, n: usize) {
    use core::arch::x86_64::*;
    let ahead = n >= PREFETCH_FROM;
    let mut i = 0;
    while i < n {
        // SAFETY: i + 256 <= n; dst 64-aligned; AVX-512F present (caller); a prefetch
        // never faults.
        unsafe {
            if ahead {
                prefetch4(s.wrapping_add(i + PREFETCH_AHEAD));
            }
            let a = _mm512_loadu_si512(s.add(i).cast());
            let b = _mm512_loadu_si512(s.add(i + 64).cast());
            let c = _mm512_loadu_si512(s.add(i + 128).cast());
            let e = _mm512_loadu_si512(s.add(i + 192).cast());
            _mm512_stream_si512(d.add(i).cast(), a);
            _mm512_stream_si512(d.add(i + 64).cast(), b);
            _mm512_stream_si512(d.add(i + 128).cast(), c);
            _mm512_stream_si512(d.add(i + 192).cast(), e);
        }
        i += 256;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn body256(d: *mut u8, s: *const u8, n: usize) {
    use core::arch::x86_64::*;
    let ahead = n >= PREFETCH_FROM;
    let mut i = 0;
    while i < n {
        // SAFETY: i + 128 <= n; dst 32-aligned; AVX2 present (caller); a prefetch never
        // faults.
        unsafe {
            if ahead && i % 256 == 0 {
                prefetch4(s.wrapping_add(i + PREFETCH_AHEAD));
            }
            let a = _mm256_loadu_si256(s.add(i).cast());
            let b = _mm256_loadu_si256(s.add(i + 32).cast());
            let c = _mm256_loadu_si256(s.add(i + 64).cast());
            let e = _mm256_loadu_si256(s.add(i + 96).cast());
            _mm256_stream_si256(d.add(i).cast(), a);
            _mm256_stream_si256(d.add(i + 32).cast(), b);
            _mm256_stream_si256(d.add(i + 64).cast(), c);
            _mm256_stream_si256(d.add(i + 96).cast(), e);
        }
        i += 128;
    }
}

#[cfg(target_arch = "x86_64")]
unsafe fn body128(d: *mut u8, s: *const u8, n: usize) {
    use core::arch::x86_64::*;
    let mut i = 0;
    while i < n {
        // SAFETY: i + 16 <= n; dst 16-aligned; SSE2 is baseline on x86_64.
        unsafe { _mm_stream_si128(d.add(i).cast(), _mm_loadu_si128(s.add(i).cast())) };
        i += 16;
    }
}
