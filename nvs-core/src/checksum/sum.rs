//! `nvs-sum`: the payload checksum of format 2, made to be computed in the same pass as
//! the copy that stores (or reads) a payload.
//!
//! The payload, zero-padded to a multiple of 64 bytes, is read as little-endian u64
//! words `w_0 .. w_{k-1}`; four CRC32C accumulators `c_0 .. c_3` start at `0xFFFF_FFFF`
//! and word `i` goes to accumulator `i mod 4`: `c = crc32c_u64(c, w_i)` with the exact
//! semantics of x86's `crc32 r64, r/m64` (`_mm_crc32_u64`: reflected CRC-32C,
//! polynomial `0x82F63B78`, no final xor). The result is
//! `mix(seed, c0 | c1 << 32, c2 | c3 << 32, len)` with `len` the unpadded length and
//! `seed` the pool id. Four independent streams hide the instruction's 3-cycle latency
//! (one `crc32` per cycle), so the sum keeps up with an NT copy of the same bytes.
//! FORMAT.md gives the definition byte for byte.
//!
//! A hardware path (SSE4.2, detected at run time) and a portable table-driven path
//! (other targets, bare metal, miri) give identical values; the tests below check it.

use super::hash::mix;

/// The initial value of every accumulator.
pub const SUM_INIT: u32 = 0xFFFF_FFFF;

/// Reflected CRC-32C polynomial (Castagnoli).
const POLY: u32 = 0x82F6_3B78;

/// Slicing-by-8 tables: `TABLES[k][b]` is the CRC of byte `b` followed by `k` zero bytes.
static TABLES: [[u32; 256]; 8] = make_tables();

// Evaluated at compile time: an index out of bounds would fail the build, not a put.
#[allow(clippy::indexing_slicing)]
const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut b = 0;
    while b < 256 {
        let mut c = b as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            k += 1;
        }
        t[0][b] = c;
        b += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut b = 0;
        while b < 256 {
            let prev = t[k - 1][b];
            t[k][b] = (prev >> 8) ^ t[0][(prev & 0xFF) as usize];
            b += 1;
        }
        k += 1;
    }
    t
}

/// `crc32 r64, r/m64` in software: the CRC-32C of the 8 little-endian bytes of `w`,
/// continuing from `c` (no inversion before or after, exactly as the instruction).
#[inline]
// A byte indexes a 256-entry table and `k < 8` one of 8: always in bounds.
#[allow(clippy::indexing_slicing)]
pub fn crc32c_u64_soft(c: u32, w: u64) -> u32 {
    let x = w ^ c as u64;
    let b = x.to_le_bytes();
    TABLES[7][b[0] as usize]
        ^ TABLES[6][b[1] as usize]
        ^ TABLES[5][b[2] as usize]
        ^ TABLES[4][b[3] as usize]
        ^ TABLES[3][b[4] as usize]
        ^ TABLES[2][b[5] as usize]
        ^ TABLES[1][b[6] as usize]
        ^ TABLES[0][b[7] as usize]
}

/// Whether the hardware path is used (SSE4.2's `crc32`, x86_64 with an OS, not miri):
/// detected once with cpuid (leaf 1, ECX bit 20), then cached, as the media's AVX2 is.
#[inline]
#[cfg_attr(any(target_os = "none", not(target_arch = "x86_64")), allow(dead_code))]
pub fn hardware() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
    {
        use core::sync::atomic::{AtomicU8, Ordering};
        // 0: not detected yet; 1: absent; 2: present.
        static SSE42: AtomicU8 = AtomicU8::new(0);
        match SSE42.load(Ordering::Relaxed) {
            0 => {
                let has = (core::arch::x86_64::__cpuid(1).ecx >> 20) & 1 == 1;
                SSE42.store(if has { 2 } else { 1 }, Ordering::Relaxed);
                has
            }
            v => v == 2,
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri), not(target_os = "none"))))]
    {
        false
    }
}

/// Feed the whole words of `bytes` (its length a multiple of 8) to the streams, the first
/// to stream `first % 4`.
#[inline]
fn words_soft(c: &mut [u32; 4], first: u64, bytes: &[u8]) {
    let mut i = (first % 4) as usize;
    for w in bytes.chunks_exact(8) {
        let mut a = [0u8; 8];
        a.copy_from_slice(w);
        if let Some(s) = c.get_mut(i) {
            *s = crc32c_u64_soft(*s, u64::from_le_bytes(a));
        }
        i = (i + 1) % 4;
    }
}

#[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
mod hw {
    use core::arch::x86_64::_mm_crc32_u64;

    /// As `words_soft`, by `crc32` instructions.
    ///
    /// # Safety
    /// The CPU has SSE4.2.
    #[target_feature(enable = "sse4.2")]
    pub unsafe fn words(c: &mut [u32; 4], first: u64, bytes: &[u8]) {
        let mut s = *c;
        let mut rest = bytes;
        // Single words until the next one goes to stream 0.
        let mut i = (first % 4) as usize;
        while i != 0 && rest.len() >= 8 {
            let w = word(rest, 0);
            if let Some(x) = s.get_mut(i) {
                *x = _mm_crc32_u64(*x as u64, w) as u32;
            }
            rest = rest.get(8..).unwrap_or(&[]);
            i = (i + 1) % 4;
        }
        // Four words at a time, one per stream.
        let (mut a, mut b, mut d, mut e) = (s[0] as u64, s[1] as u64, s[2] as u64, s[3] as u64);
        let mut quads = rest.chunks_exact(32);
        for q in &mut quads {
            a = _mm_crc32_u64(a, word(q, 0));
            b = _mm_crc32_u64(b, word(q, 8));
            d = _mm_crc32_u64(d, word(q, 16));
            e = _mm_crc32_u64(e, word(q, 24));
        }
        s = [a as u32, b as u32, d as u32, e as u32];
        for (k, w) in quads.remainder().chunks_exact(8).enumerate() {
            if let Some(x) = s.get_mut(k) {
                *x = _mm_crc32_u64(*x as u64, word(w, 0)) as u32;
            }
        }
        *c = s;
    }

    #[inline(always)]
    fn word(s: &[u8], at: usize) -> u64 {
        s.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()).map_or(0, u64::from_le_bytes)
    }
}

/// Feed whole words to the streams by the fastest path there is.
#[inline]
fn words(c: &mut [u32; 4], first: u64, bytes: &[u8]) {
    debug_assert!(bytes.len().is_multiple_of(8));
    #[cfg(all(target_arch = "x86_64", not(miri), not(target_os = "none")))]
    if hardware() {
        // SAFETY: SSE4.2 detected.
        unsafe { hw::words(c, first, bytes) };
        return;
    }
    words_soft(c, first, bytes)
}

/// Streaming `nvs-sum`: write the payload in any cuts, then [`Sum::finish`] with its
/// length.
#[derive(Clone, Copy, Debug)]
pub struct Sum {
    seed: u64,
    c: [u32; 4],
    /// Whole words fed so far.
    words: u64,
    tail: [u8; 8],
    tail_len: usize,
}

impl Sum {
    /// A sum over nothing yet, seeded with `seed` (a pool's payloads: its pool id).
    pub const fn new(seed: u64) -> Self {
        Sum { seed, c: [SUM_INIT; 4], words: 0, tail: [0; 8], tail_len: 0 }
    }

    /// Feed `bytes`, the next bytes of the payload (any length; a partial word is carried).
    pub fn write(&mut self, mut bytes: &[u8]) {
        if self.tail_len > 0 {
            let take = core::cmp::min(8 - self.tail_len, bytes.len());
            let (head, rest) = bytes.split_at(take);
            for (slot, b) in self.tail.iter_mut().skip(self.tail_len).zip(head) {
                *slot = *b;
            }
            self.tail_len += take;
            bytes = rest;
            if self.tail_len < 8 {
                return;
            }
            let t = self.tail;
            words(&mut self.c, self.words, &t);
            self.words += 1;
            self.tail_len = 0;
        }
        let whole = bytes.len() & !7;
        let (body, rest) = bytes.split_at(whole);
        if !body.is_empty() {
            words(&mut self.c, self.words, body);
            self.words += (whole / 8) as u64;
        }
        for (slot, b) in self.tail.iter_mut().zip(rest) {
            *slot = *b;
        }
        self.tail_len = rest.len();
    }

    /// `true` if the next byte fed starts a word that goes to stream 0 (no carried bytes,
    /// a multiple of 4 words so far): where a fused kernel can take whole lines.
    #[inline]
    pub fn at_line(&self) -> bool {
        self.tail_len == 0 && self.words.is_multiple_of(4)
    }

    /// The accumulators, for a fused kernel that continues them (only when
    /// [`Sum::at_line`]); give them back with [`Sum::lines_done`].
    #[inline]
    #[cfg_attr(any(target_os = "none", miri, not(target_arch = "x86_64")), allow(dead_code))]
    pub(crate) fn state(&self) -> [u32; 4] {
        self.c
    }

    /// A fused kernel fed `lines` whole 64-byte lines to the accumulators it took from
    /// [`Sum::state`] and now holds `c`.
    #[inline]
    #[cfg_attr(any(target_os = "none", miri, not(target_arch = "x86_64")), allow(dead_code))]
    pub(crate) fn lines_done(&mut self, c: [u32; 4], lines: usize) {
        debug_assert!(self.at_line());
        self.c = c;
        self.words += lines as u64 * 8;
    }

    /// Fast path for whole 64-byte lines (`lines.len()` a multiple of 64); any other
    /// length or state is fed as by [`Sum::write`].
    pub fn write_lines(&mut self, lines: &[u8]) {
        if self.at_line() && lines.len().is_multiple_of(64) {
            words(&mut self.c, self.words, lines);
            self.words += (lines.len() / 8) as u64;
        } else {
            self.write(lines);
        }
    }

    /// The sum of the bytes fed, `len` being the payload's (unpadded) length: the carried
    /// bytes and zero words up to a multiple of 8 words are fed first.
    pub fn finish(&self, len: u64) -> u64 {
        let mut c = self.c;
        let mut n = self.words;
        if self.tail_len > 0 {
            let mut last = [0u8; 8];
            for (slot, b) in last.iter_mut().zip(self.tail.iter().take(self.tail_len)) {
                *slot = *b;
            }
            words(&mut c, n, &last);
            n += 1;
        }
        let pad = (8 - n % 8) % 8;
        // A payload of whole lines (the usual case) has no padding to feed.
        if pad > 0 {
            let zeros = [0u8; 64];
            words(&mut c, n, zeros.get(..pad as usize * 8).unwrap_or(&[]));
        }
        let lo = c[0] as u64 | (c[1] as u64) << 32;
        let hi = c[2] as u64 | (c[3] as u64) << 32;
        mix(&[self.seed, lo, hi, len])
    }
}

/// `nvs-sum(seed, bytes)`.
#[cfg_attr(not(feature = "internals"), allow(dead_code))]
pub fn sum(seed: u64, bytes: &[u8]) -> u64 {
    let mut s = Sum::new(seed);
    s.write(bytes);
    s.finish(bytes.len() as u64)
}

/// Which checksum a pool's payloads carry ([`crate::format::Superblock::sum_kind`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SumKind {
    /// No payload checksums (superblock flag bit 0 clear).
    None,
    /// `nvs-hash64(pool_id, payload)`: format 1 pools.
    Hash64,
    /// `nvs-sum(pool_id, payload)`: format 2 pools.
    Sum,
}

/// A payload checksum being computed, of either kind: fed like a [`Sum`].
#[derive(Clone, Copy, Debug)]
pub enum Summer {
    Hash64(super::hash::Hasher),
    Sum(Sum),
}

impl Summer {
    /// A summer of `kind` seeded with `seed` (`None` for [`SumKind::None`]).
    pub fn new(kind: SumKind, seed: u64) -> Option<Summer> {
        match kind {
            SumKind::None => None,
            SumKind::Hash64 => Some(Summer::Hash64(super::hash::Hasher::new(seed))),
            SumKind::Sum => Some(Summer::Sum(Sum::new(seed))),
        }
    }
    pub fn write(&mut self, bytes: &[u8]) {
        match self {
            Summer::Hash64(h) => h.write(bytes),
            Summer::Sum(s) => s.write(bytes),
        }
    }
    /// The checksum of the `len` bytes fed.
    pub fn finish(&self, len: u64) -> u64 {
        match self {
            Summer::Hash64(h) => h.finish(),
            Summer::Sum(s) => s.finish(len),
        }
    }
}

/// The checksum of `bytes` of `kind` (0 for none).
pub fn payload_sum(kind: SumKind, seed: u64, bytes: &[u8]) -> u64 {
    Summer::new(kind, seed).map_or(0, |mut s| {
        s.write(bytes);
        s.finish(bytes.len() as u64)
    })
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    /// The definition, spelled out as plainly as FORMAT.md has it, in software.
    fn reference(seed: u64, bytes: &[u8]) -> u64 {
        let mut padded = bytes.to_vec();
        while !padded.len().is_multiple_of(64) {
            padded.push(0);
        }
        let mut c = [0xFFFF_FFFFu32; 4];
        for (i, w) in padded.chunks_exact(8).enumerate() {
            let w = u64::from_le_bytes(w.try_into().unwrap());
            // Bit by bit: the reflected CRC-32C of the 8 bytes, no inversion.
            let mut x = c[i % 4];
            for byte in w.to_le_bytes() {
                x ^= byte as u32;
                for _ in 0..8 {
                    x = if x & 1 != 0 { (x >> 1) ^ 0x82F6_3B78 } else { x >> 1 };
                }
            }
            c[i % 4] = x;
        }
        mix(&[seed, c[0] as u64 | (c[1] as u64) << 32, c[2] as u64 | (c[3] as u64) << 32, bytes.len() as u64])
    }

    fn data(n: usize, salt: u64) -> Vec<u8> {
        let mut x = salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// CRC-32C check value ("123456789" with the usual inversions is 0xE3069283), and the
    /// software word step against the bitwise definition.
    #[test]
    fn crc32c_known_values() {
        // The standard check value, byte by byte via the tables.
        let mut c = !0u32;
        for b in b"123456789" {
            c = (c >> 8) ^ TABLES[0][((c ^ *b as u32) & 0xFF) as usize];
        }
        assert_eq!(!c, 0xE306_9283);
        // `crc32 r64` of 0 from 0 is 0; of 1 from !0, pinned (the instruction's value).
        assert_eq!(crc32c_u64_soft(0, 0), 0);
        #[cfg(all(target_arch = "x86_64", not(miri)))]
        if std::is_x86_feature_detected!("sse4.2") {
            for (c, w) in [(0u32, 1u64), (!0, 0), (!0, u64::MAX), (0x1234_5678, 0xdead_beef_0bad_f00d)] {
                // SAFETY: SSE4.2 detected.
                let hw = unsafe { core::arch::x86_64::_mm_crc32_u64(c as u64, w) } as u32;
                assert_eq!(crc32c_u64_soft(c, w), hw, "{c:#x} {w:#x}");
            }
        }
    }

    /// Pinned values: a change here is a format change.
    #[test]
    fn pinned_values() {
        assert_eq!(sum(0, b""), reference(0, b""));
        let pins: [(u64, &[u8], u64); 4] = [
            (0, b"", 0xf3d1_3a82_346b_cd71),
            (1, b"a", 0x53b8_6a12_e72a_6821),
            (7, b"nvs-sum, four streams of crc32c", 0x2a71_d412_27f2_8616),
            (0x1122_3344_5566_7788, &[0xAB; 200], 0x6d3f_60d8_b24b_6244),
        ];
        for (seed, bytes, want) in pins {
            assert_eq!(sum(seed, bytes), reference(seed, bytes));
            assert_eq!(sum(seed, bytes), want, "seed {seed:#x}, {} bytes: {:#018x}", bytes.len(), sum(seed, bytes));
        }
    }

    /// Streaming over any cuts, by the hardware or the software path, equals the
    /// definition; the length and every bit matter.
    #[test]
    fn streaming_paths_and_definition_agree() {
        let lens: &[usize] = if cfg!(miri) {
            &[0, 1, 7, 8, 63, 64, 65, 200]
        } else {
            &[0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 1000, 4096, 4097, 10_000]
        };
        for &n in lens {
            let d = data(n, n as u64 + 3);
            let want = reference(42, &d);
            assert_eq!(sum(42, &d), want, "len {n}");
            let mut soft = [SUM_INIT; 4];
            let whole = n & !7;
            words_soft(&mut soft, 0, &d[..whole]);
            let mut hw = [SUM_INIT; 4];
            words(&mut hw, 0, &d[..whole]);
            assert_eq!(soft, hw, "len {n}");
            let cuts = if cfg!(miri) { 3 } else { 12 };
            for k in 0..cuts {
                let a = (k * 37 + 5) % (n + 1);
                let b = a + (n - a) * k / cuts;
                let mut s = Sum::new(42);
                s.write(&d[..a]);
                s.write_lines(&d[a..b]);
                s.write(&d[b..]);
                assert_eq!(s.finish(n as u64), want, "len {n}, cuts {a} {b}");
            }
            assert_ne!(sum(43, &d), want);
            let mut s = Sum::new(42);
            s.write(&d);
            assert_ne!(s.finish(n as u64 + 1), want);
        }
        let d = data(100, 9);
        let whole = sum(1, &d);
        for bit in 0..d.len() * 8 {
            let mut e = d.clone();
            e[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(sum(1, &e), whole, "bit {bit}");
        }
    }
}
