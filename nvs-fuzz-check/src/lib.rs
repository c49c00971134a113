//! # nvs-fuzz-check
//!
//! The bodies of nvs's fuzz targets, in the main workspace so that the same checks run
//! two ways: under cargo-fuzz (the thin targets in `fuzz/fuzz_targets/` call these
//! functions; `fuzz/` is its own workspace and needs nightly for the sanitizers), and
//! as a plain stable `cargo test` that replays every checked-in input of
//! `fuzz/corpus/<target>/` (`tests/corpus.rs`).
//!
//! Each `run(data)` returns normally when nvs kept its promises on that input and
//! panics (a finding) when it did not:
//! - [`recover_image::run`]: `data` is a pool image. Open (recovery), list, get every
//!   version, check, open again with a small fixed index, then write on it and reopen.
//!   Bad media must be a clear error (promise 6 of the README), opening for read must never
//!   store (promise 5), and what the index says must be readable.
//! - [`decode::run`]: every header and record decoder of `nvs_core::internals::format` on arbitrary
//!   bytes, with fix-ups that lift the checksum barriers so the bounds checks behind
//!   them are reached, each outcome compared with an independent predicate; and
//!   encode → decode round trips, where any flipped bit must be refused exactly where
//!   the format says.
//! - [`ops_crash::run`]: an `Arbitrary` sequence of puts, vectored puts, batches and
//!   reopens on `nvs_sim::SimMedia` (over the stale bytes of an earlier pool), a crash
//!   after an arbitrary store with an arbitrary choice of which pending words persisted
//!   (`nvs_sim::CrashView`), recovery, and a comparison with a plain model of the
//!   contract (promises 1–4): acknowledged ops present byte-exact, the interrupted op all
//!   or nothing, nothing that was never put, per-lane prefix; then a put on the
//!   recovered pool and a reopen.
//! - [`checkpoint::run`]: an index checkpoint of a real pool, patched (its sum fixed up
//!   or not), opened over the pool as it was or after more puts, a new lane or
//!   retention: never a panic or a store; unused (or untouched), exactly what recovery
//!   gives.
//!
//! Inputs found by fuzzing that once failed are kept as regression tests
//! (`tests/regressions.rs`) and in the corpora.

use nvs_core::{Media, Region};
use std::cell::RefCell;

pub mod checkpoint;
pub mod decode;
pub mod ops_crash;
pub mod recover_image;

/// The names of the targets, as directories of `fuzz/corpus/`.
pub const TARGETS: &[&str] = &["recover_image", "decode", "ops_crash", "checkpoint"];

/// Run target `name` on `data` (the corpus replay's dispatcher).
pub fn run(name: &str, data: &[u8]) {
    match name {
        "recover_image" => recover_image::run(data),
        "decode" => decode::run(data),
        "ops_crash" => ops_crash::run(data),
        "checkpoint" => checkpoint::run(data),
        _ => panic!("no fuzz target named {name}"),
    }
}

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

/// 64-byte-aligned heap memory that a [`Region`] (the production media) can cover.
pub struct Image {
    lines: Vec<Line>,
    len: usize,
}

impl Image {
    /// A copy of `bytes`, its length rounded up to 64 with zeros.
    pub fn from_bytes(bytes: &[u8]) -> Image {
        let mut lines = vec![Line([0; 64]); bytes.len().div_ceil(64)];
        for (l, c) in lines.iter_mut().zip(bytes.chunks(64)) {
            l.0[..c.len()].copy_from_slice(c);
        }
        let len = lines.len() * 64;
        Image { lines, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// A region over the whole image. The caller must not look at [`Image::bytes`]
    /// while anything built on the region is alive.
    pub fn region(&mut self) -> Region {
        // SAFETY: the buffer is 64-aligned (Line), valid for `len` bytes and owned by
        // `self`, which outlives every region in this crate (each is dropped before the
        // image is read through `bytes` or dropped); the region is the only writer.
        unsafe { Region::new(self.lines.as_mut_ptr().cast(), self.len) }
    }

    /// The bytes (no region may be alive).
    pub fn bytes(&self) -> Vec<u8> {
        self.lines.iter().flat_map(|l| l.0).collect()
    }
}

/// A plain, safe media over a vector (for the decoders): every access is bounds
/// checked, and a store outside the media panics (an nvs bug, never a media one).
pub struct VecMedia {
    bytes: RefCell<Vec<u8>>,
    stores: RefCell<u64>,
}

impl VecMedia {
    pub fn zeroed(len: usize) -> VecMedia {
        VecMedia::from_bytes(vec![0; len])
    }

    pub fn from_bytes(bytes: Vec<u8>) -> VecMedia {
        VecMedia { bytes: RefCell::new(bytes), stores: RefCell::new(0) }
    }

    /// Overwrite `off..off + src.len()` directly (building test images; not a store).
    pub fn poke(&self, off: usize, src: &[u8]) {
        self.bytes.borrow_mut()[off..off + src.len()].copy_from_slice(src);
    }

    pub fn peek(&self, off: usize, len: usize) -> Vec<u8> {
        self.bytes.borrow()[off..off + len].to_vec()
    }

    /// Stores made through the [`Media`] trait.
    pub fn stores(&self) -> u64 {
        *self.stores.borrow()
    }

    fn check(&self, off: usize, len: usize) {
        let end = off.checked_add(len);
        assert!(matches!(end, Some(e) if e <= self.bytes.borrow().len()), "nvs bug: media access {off}+{len}");
    }
}

impl Media for VecMedia {
    fn len(&self) -> usize {
        self.bytes.borrow().len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        dst.copy_from_slice(&self.bytes.borrow()[off..off + dst.len()]);
    }
    fn load_word(&self, off: usize) -> u64 {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "nvs bug: unaligned word load at {off}");
        let mut w = [0u8; 8];
        self.read(off, &mut w);
        u64::from_le_bytes(w)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        assert!(off.is_multiple_of(8), "nvs bug: unaligned NT store at {off}");
        let mut padded = src.to_vec();
        padded.resize(src.len().next_multiple_of(8), 0);
        self.store(off, &padded);
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        assert!(off.is_multiple_of(8), "nvs bug: unaligned word store at {off}");
        self.store(off, &word.to_le_bytes());
    }
    fn store(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        self.poke(off, src);
        *self.stores.borrow_mut() += 1;
    }
    fn flush(&self, off: usize, len: usize) {
        self.check(off, len);
    }
    fn fence(&self) {}
}

/// Deterministic bytes for test payloads: `len` bytes that differ for every `seed`.
pub fn fill(seed: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    while out.len() < len {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        let take = (len - out.len()).min(8);
        out.extend_from_slice(&z.to_le_bytes()[..take]);
    }
    out
}

/// A little-endian reader over fuzz bytes with a stable layout (zeros once exhausted),
/// so seed files can be written by hand.
pub struct Bytes<'a> {
    data: &'a [u8],
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }
    pub fn u8(&mut self) -> u8 {
        let (v, rest) = self.data.split_first().map_or((0, &[][..]), |(v, r)| (*v, r));
        self.data = rest;
        v
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    pub fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }
    /// Whether everything was read.
    pub fn rest_is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.data)
    }
}
