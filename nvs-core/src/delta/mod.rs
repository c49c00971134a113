//! Delta puts: a version that stores only the chunks that changed since an earlier
//! version of the same name (its *parent*), and gets that rebuild the whole object.
//!
//! What a writer supplies is a [`Changes`]: the changed byte ranges, in ascending order.
//! They come from the caller (it knows what it wrote), from [`ChunkHashes`] (nvs compares
//! per-chunk hashes of this version with the parent's, kept in DRAM), or from the OS
//! (nvs-std's dirty-page tracking). The ranges are widened to whole chunks
//! ([`DeltaOptions::chunk_bytes`]) and merged; the record layout is in FORMAT.md.
//!
//! Chains stay short: the writer falls back to a full version when the parent is
//! `full_every` deltas deep, when the delta would store more than `max_percent` of the
//! object, when the object's length changed, or when the parent is unknown.
//!
//! Everything here that reads the media checks what it reads against the entry recovery
//! validated (the record's lengths against `stored_bytes`, each extent against the object's
//! length) before using it, and is compiled with the decoders' lints denied.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

pub(crate) mod read;
pub(crate) mod write;

pub(crate) use write::DeltaPlan;

use crate::error::{Error, Result};
use crate::format::hash::Hasher;
use crate::format::DELTA_DEPTH_MAX;
use core::fmt;

/// How a writer chooses between a delta and a full version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaOptions {
    /// Changes are stored in whole chunks of this many bytes (a power of two, >= 64).
    pub chunk_bytes: u64,
    /// At most this many deltas follow a full version (1 ..= 255).
    pub full_every: u32,
    /// A delta storing more than this percentage of the object is written as a full
    /// version instead (1 ..= 100).
    pub max_percent: u32,
    /// `false` (the default): a delta's parent must be in the lane's current segment, so
    /// a chain never leaves its segment and retention can always release old segments.
    /// `true`: chains may cross segments (a few more deltas) — but a chain straddling a
    /// segment boundary keeps the older segment, and a stream of deltas under retention
    /// can end `Full`.
    pub chains_cross_segments: bool,
}

impl Default for DeltaOptions {
    fn default() -> Self {
        DeltaOptions { chunk_bytes: 4096, full_every: 16, max_percent: 50, chains_cross_segments: false }
    }
}

impl DeltaOptions {
    pub(crate) fn check(&self) -> Result<()> {
        if !self.chunk_bytes.is_power_of_two() || self.chunk_bytes < 64 {
            return Err(Error::DeltaOptions { what: "chunk_bytes must be a power of two of at least 64" });
        }
        if !(1..=DELTA_DEPTH_MAX).contains(&self.full_every) {
            return Err(Error::DeltaOptions { what: "full_every must be between 1 and 255" });
        }
        if !(1..=100).contains(&self.max_percent) {
            return Err(Error::DeltaOptions { what: "max_percent must be between 1 and 100" });
        }
        Ok(())
    }
}

/// The byte ranges of an object that changed since its parent version.
pub trait Changes {
    /// Call `f(offset, len)` for every changed range, in ascending order of offset
    /// (ranges may touch or overlap; they are merged). A put asks twice (to plan the
    /// delta, then to store it) and must get the same answer both times; if not, the put
    /// fails with [`Error::ChangesInconsistent`] and commits nothing.
    fn for_each_range(&self, f: &mut dyn FnMut(u64, u64));
}

/// `(offset, len)` pairs, sorted by offset: a slice, an array, a vector.
impl<T: AsRef<[(u64, u64)]>> Changes for T {
    fn for_each_range(&self, f: &mut dyn FnMut(u64, u64)) {
        self.as_ref().iter().for_each(|&(off, len)| f(off, len));
    }
}

/// A delta request for one object: store only `changes` against version `parent`.
#[derive(Clone, Copy)]
pub struct Delta<'a> {
    pub parent: u64,
    pub changes: &'a dyn Changes,
}

impl fmt::Debug for Delta<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delta").field("parent", &self.parent).finish_non_exhaustive()
    }
}

/// Change detection by comparison with the previous version, OS-free: a 64-bit hash of
/// every chunk of the last version put, kept in caller memory (two words per chunk:
/// the last version's hashes and this scan's). A changed chunk whose hash stays equal
/// goes unnoticed with probability about 2^-64 per chunk.
///
/// ```text
/// let parent = hashes.scan(bytes)?;            // hash every chunk of the new bytes
/// let put = match parent {
///     Some(p) => pool.put(lane, Object::new(name, bytes).delta(p, &hashes))?,  // changed chunks
///     None => ...full put...,
/// };
/// hashes.committed(put.version);               // only after the put succeeded
/// ```
pub struct ChunkHashes<S> {
    words: S,
    chunk: u64,
    /// Chunks the last scan hashed.
    chunks: usize,
    /// Length and version of the last committed version (version 0: none yet).
    len: u64,
    version: u64,
    /// Length of the last scan.
    scanned_len: u64,
}

impl<S: AsRef<[u64]> + AsMut<[u64]>> ChunkHashes<S> {
    /// Track objects of up to `words.len() / 2` chunks of `chunk_bytes` (a power of two
    /// of at least 64; use the pool's [`DeltaOptions::chunk_bytes`]).
    ///
    /// # Errors
    /// `DeltaOptions` if `chunk_bytes` is not a power of two of at least 64.
    pub fn new(words: S, chunk_bytes: u64) -> Result<Self> {
        DeltaOptions { chunk_bytes, ..DeltaOptions::default() }.check()?;
        Ok(ChunkHashes { words, chunk: chunk_bytes, chunks: 0, len: 0, version: 0, scanned_len: 0 })
    }

    /// Hash every chunk of `bytes`. Returns the version to put a delta against (the last
    /// committed one), or `None` when a full version is needed (none yet, or the length
    /// changed). Nothing is adopted until [`ChunkHashes::committed`].
    ///
    /// # Errors
    /// `TooLarge` if `bytes` has more chunks than `words` holds hashes for.
    pub fn scan(&mut self, bytes: &[u8]) -> Result<Option<u64>> {
        let chunks = (bytes.len() as u64).div_ceil(self.chunk) as usize;
        let words = self.words.as_mut();
        let room = words.len() / 2;
        if chunks > room {
            return Err(Error::TooLarge { len_bytes: bytes.len() as u64, max_bytes: room as u64 * self.chunk });
        }
        let (_, fresh) = words.split_at_mut(room);
        for (slot, c) in fresh.iter_mut().zip(bytes.chunks(self.chunk as usize)) {
            *slot = chunk_hash(c);
        }
        self.chunks = chunks;
        self.scanned_len = bytes.len() as u64;
        Ok((self.version != 0 && self.len == self.scanned_len).then_some(self.version))
    }

    /// The scanned bytes were committed as `version`: they are the base of the next delta.
    pub fn committed(&mut self, version: u64) {
        let words = self.words.as_mut();
        let room = words.len() / 2;
        let (old, fresh) = words.split_at_mut(room);
        let n = self.chunks.min(room);
        if let (Some(old), Some(fresh)) = (old.get_mut(..n), fresh.get(..n)) {
            old.copy_from_slice(fresh);
        }
        self.len = self.scanned_len;
        self.version = version;
    }

    /// Memory needed to track objects of `max_len` bytes in `chunk_bytes` chunks
    /// (`usize::MAX` for more than an address space holds).
    pub fn words_for(max_len: u64, chunk_bytes: u64) -> usize {
        usize::try_from(max_len.div_ceil(chunk_bytes.max(1))).map_or(usize::MAX, |n| n.saturating_mul(2))
    }
}

/// The chunks whose hash changed between the committed version and the last scan.
impl<S: AsRef<[u64]>> Changes for ChunkHashes<S> {
    fn for_each_range(&self, f: &mut dyn FnMut(u64, u64)) {
        let words = self.words.as_ref();
        let room = words.len() / 2;
        let (old, fresh) = words.split_at(room);
        for (i, (a, b)) in old.iter().zip(fresh).take(self.chunks).enumerate() {
            if a != b {
                let off = i as u64 * self.chunk;
                f(off, self.chunk.min(self.scanned_len - off));
            }
        }
    }
}

/// A fast 64-bit hash of a chunk in DRAM (not part of the format): four independent
/// multiply/rotate lanes over 32-byte blocks, so it runs near memory speed, then mixed.
pub fn chunk_hash(bytes: &[u8]) -> u64 {
    const K: [u64; 4] = [0x9E37_79B1_85EB_CA87, 0xC2B2_AE3D_27D4_EB4F, 0x1656_67B1_9E37_79F9, 0x85EB_CA77_C2B2_AE63];
    let mut acc = K;
    let mut blocks = bytes.chunks_exact(32);
    for b in &mut blocks {
        for (i, a) in acc.iter_mut().enumerate() {
            let w = b.get(i * 8..i * 8 + 8).map_or(0, |w| u64::from_le_bytes(w.try_into().unwrap_or([0; 8])));
            *a = (*a ^ w).wrapping_mul(K[0]).rotate_left(29);
        }
    }
    let mut h = Hasher::new(bytes.len() as u64);
    for a in acc {
        h.write_u64(a);
    }
    h.write(blocks.remainder());
    h.finish()
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::write::for_each_run;
    use super::*;

    fn runs(changes: &[(u64, u64)], chunk: u64, len: u64) -> Result<([(u64, u64); 8], usize)> {
        let mut out = [(0, 0); 8];
        let mut n = 0;
        for_each_run(&changes, chunk, len, &mut |o, l| {
            out[n] = (o, l);
            n += 1;
        })?;
        Ok((out, n))
    }

    /// Ranges widen to chunks, merge when they touch or overlap, clip at the object's end.
    #[test]
    fn runs_widen_merge_and_clip() {
        let (r, n) = runs(&[(5, 1), (60, 10), (200, 1), (1000, 10)], 64, 1010).unwrap();
        assert_eq!(&r[..n], &[(0, 128), (192, 64), (960, 50)]);
        let (_, n) = runs(&[], 64, 100).unwrap();
        assert_eq!(n, 0);
        let (r, n) = runs(&[(0, 0), (64, 64), (128, 1)], 64, 4096).unwrap();
        assert_eq!(&r[..n], &[(64, 128)]);
    }

    /// Unsorted ranges and ranges past the end are refused with the bad range's offset.
    #[test]
    fn bad_ranges_are_refused() {
        assert_eq!(runs(&[(100, 1), (50, 1)], 64, 1000).unwrap_err(), Error::DeltaRanges { offset: 50 });
        assert_eq!(runs(&[(990, 11)], 64, 1000).unwrap_err(), Error::DeltaRanges { offset: 990 });
        assert_eq!(runs(&[(u64::MAX, 2)], 64, 1000).unwrap_err(), Error::DeltaRanges { offset: u64::MAX });
    }

    /// The chunk hash sees a change of any byte, and a swap of two blocks.
    #[test]
    fn chunk_hash_sees_changes() {
        let mut b = [7u8; 4096];
        let h = chunk_hash(&b);
        for i in [0, 1, 31, 32, 4000, 4095] {
            b[i] ^= 1;
            assert_ne!(chunk_hash(&b), h, "byte {i}");
            b[i] ^= 1;
        }
        b[0..32].fill(1);
        let h1 = chunk_hash(&b);
        b[0..32].fill(7);
        b[32..64].fill(1);
        assert_ne!(chunk_hash(&b), h1);
        assert_ne!(chunk_hash(&b[..4095]), chunk_hash(&b));
    }

    /// ChunkHashes reports exactly the chunks that changed, and only against a committed version.
    #[test]
    fn chunk_hashes_track_versions() {
        let mut words = [0u64; 2 * 8];
        let mut t = ChunkHashes::new(&mut words[..], 64).unwrap();
        let mut obj = [0u8; 500];
        assert_eq!(t.scan(&obj).unwrap(), None);
        t.committed(1);
        obj[70] = 1;
        obj[499] = 1;
        assert_eq!(t.scan(&obj).unwrap(), Some(1));
        let mut seen = [(0, 0); 8];
        let mut n = 0;
        t.for_each_range(&mut |o, l| {
            seen[n] = (o, l);
            n += 1
        });
        assert_eq!(&seen[..n], &[(64, 64), (448, 52)]);
        // Not committed: the next scan still compares against version 1.
        obj[0] = 9;
        assert_eq!(t.scan(&obj).unwrap(), Some(1));
        n = 0;
        t.for_each_range(&mut |_, _| n += 1);
        assert_eq!(n, 3);
        assert_eq!(t.scan(&[0u8; 499]).unwrap(), None, "length changed");
        assert!(matches!(t.scan(&[0u8; 513]), Err(Error::TooLarge { .. })));
    }
}
