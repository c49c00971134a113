//! `nvs-hash64`: the one checksum of the format (headers, names, optional payloads) and
//! the mixer that turns (pool id, lane, sequence, header checksum) into a commit word.
//!
//! A word-at-a-time multiply/rotate hash in the style of xxHash64's single lane, chosen
//! because it is a few lines, needs no tables and no CPU feature, and changes in every
//! output bit when any input word changes (which is all recovery asks of it: detect torn
//! and stale words). It is not a cryptographic hash. FORMAT.md gives the exact algorithm.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;

#[inline(always)]
fn round(acc: u64, word: u64) -> u64 {
    (acc ^ word.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

/// Final avalanche (xxHash64's).
#[inline(always)]
pub fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// Streaming form of [`hash64`], so a checksum can cover several slices (a header and
/// a name; the parts of a vectored put) exactly as if they were one.
#[derive(Clone, Copy, Debug)]
pub struct Hasher {
    acc: u64,
    len: u64,
    tail: [u8; 8],
    tail_len: usize,
}

impl Hasher {
    pub const fn new(seed: u64) -> Self {
        Hasher { acc: seed ^ P3, len: 0, tail: [0; 8], tail_len: 0 }
    }

    pub fn write(&mut self, mut bytes: &[u8]) {
        self.len = self.len.wrapping_add(bytes.len() as u64);
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
            self.acc = round(self.acc, u64::from_le_bytes(self.tail));
            self.tail_len = 0;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut a = [0u8; 8];
            a.copy_from_slice(w);
            self.acc = round(self.acc, u64::from_le_bytes(a));
        }
        let rest = words.remainder();
        for (slot, b) in self.tail.iter_mut().zip(rest) {
            *slot = *b;
        }
        self.tail_len = rest.len();
    }

    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }

    pub fn finish(&self) -> u64 {
        let mut acc = self.acc;
        if self.tail_len > 0 {
            acc = round(acc, word_le(self.tail.get(..self.tail_len).unwrap_or(&[])));
        }
        finish(acc ^ self.len.wrapping_mul(P1))
    }
}

/// The first 8 bytes of `bytes` as a little-endian word, zero-padded past their end:
/// by at most two overlapping loads, not a byte at a time (names end in a partial
/// word, and every put hashes and stores its name).
#[inline(always)]
pub fn word_le(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    match (bytes.first_chunk::<8>(), bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        (Some(w), _, _) => u64::from_le_bytes(*w),
        // 4..=7 bytes: the first four and the last four, which overlap.
        (None, Some(lo), Some(hi)) => {
            u32::from_le_bytes(*lo) as u64 | (u32::from_le_bytes(*hi) as u64) << (8 * (n - 4))
        }
        // 1..=3 bytes: the first, the middle and the last (some the same byte).
        _ => match (bytes.first(), bytes.get(n / 2), bytes.last()) {
            (Some(&a), Some(&b), Some(&c)) => a as u64 | (b as u64) << (8 * (n / 2)) | (c as u64) << (8 * (n - 1)),
            _ => 0,
        },
    }
}

/// `nvs-hash64(seed, bytes)`.
pub fn hash64(seed: u64, bytes: &[u8]) -> u64 {
    let mut h = Hasher::new(seed);
    h.write(bytes);
    h.finish()
}

/// `nvs-hash64(seed, words ++ bytes)`, the words taken as their little-endian bytes:
/// the same value as streaming those bytes through a [`Hasher`], computed word by word
/// in registers (a header's fields need not be laid out in memory first).
#[inline(always)]
pub fn hash64_words(seed: u64, words: &[u64], bytes: &[u8]) -> u64 {
    let mut acc = seed ^ P3;
    for &w in words {
        acc = round(acc, w);
    }
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        acc = round(acc, u64::from_le_bytes(a));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        acc = round(acc, word_le(rest));
    }
    let len = (words.len() * 8 + bytes.len()) as u64;
    finish(acc ^ len.wrapping_mul(P1))
}

/// Mix a few words into one (commit words, index keys).
#[inline]
pub fn mix(words: &[u64]) -> u64 {
    let mut acc = P3;
    for w in words {
        acc = round(acc, *w);
    }
    finish(acc)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    /// Hashing words in registers equals hashing their bytes, for every tail length.
    #[test]
    fn words_equal_bytes() {
        let words = [1u64, u64::MAX, 0x0123_4567_89ab_cdef];
        let tail: [u8; 19] = core::array::from_fn(|i| (i * 29 + 1) as u8);
        for n in 0..=tail.len() {
            let mut h = Hasher::new(9);
            words.iter().for_each(|w| h.write_u64(*w));
            h.write(&tail[..n]);
            assert_eq!(hash64_words(9, &words, &tail[..n]), h.finish(), "tail {n}");
            assert_eq!(hash64_words(9, &[], &tail[..n]), hash64(9, &tail[..n]), "bytes only, {n}");
        }
    }

    /// `word_le` is the zero-padded little-endian word of every length, a byte at a time.
    #[test]
    fn word_le_equals_bytewise() {
        let bytes: [u8; 11] = core::array::from_fn(|i| 0xf1 - (i * 17) as u8);
        for n in 0..=bytes.len() {
            let want = bytes[..n.min(8)].iter().rev().fold(0u64, |w, &b| w << 8 | b as u64);
            assert_eq!(word_le(&bytes[..n]), want, "{n} bytes");
        }
    }

    /// Streaming over any split equals hashing the whole; every single-bit flip changes the hash.
    #[test]
    fn streaming_equals_oneshot_and_bits_matter() {
        let data: [u8; 37] = core::array::from_fn(|i| (i * 7 + 3) as u8);
        let whole = hash64(5, &data);
        for cut in 0..data.len() {
            let mut h = Hasher::new(5);
            h.write(&data[..cut]);
            h.write(&data[cut..]);
            assert_eq!(h.finish(), whole, "cut at {cut}");
        }
        for bit in 0..data.len() * 8 {
            let mut d = data;
            d[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(hash64(5, &d), whole, "bit {bit}");
        }
        assert_ne!(hash64(6, &data), whole);
        assert_ne!(hash64(5, &data[..36]), whole);
    }
}
