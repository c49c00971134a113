//! Test support: pools in ordinary heap memory, a media that records every store (for
//! the cheap "crash after the k-th stored byte" model), and a small deterministic RNG.
#![allow(dead_code)]

use nvs_core::{FormatOptions, HeapMemory, Media, Pool, Region};
use std::cell::RefCell;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub struct Line(pub [u8; 64]);

/// Heap memory that a [`Region`] can cover (64-byte aligned).
pub struct Ram {
    lines: Vec<Line>,
}

impl Ram {
    pub fn new(len: usize, fill: u8) -> Ram {
        assert!(len.is_multiple_of(64));
        Ram { lines: vec![Line([fill; 64]); len / 64] }
    }
    pub fn from_bytes(bytes: &[u8]) -> Ram {
        let mut r = Ram::new(bytes.len().next_multiple_of(64), 0);
        r.bytes_mut()[..bytes.len()].copy_from_slice(bytes);
        r
    }
    pub fn region(&mut self) -> Region {
        let len = self.lines.len() * 64;
        // SAFETY: the Vec's buffer is 64-aligned (Line), valid for `len` bytes, and outlives
        // the region in every test (the region is dropped before the Ram is touched again).
        unsafe { Region::new(self.lines.as_mut_ptr().cast(), len) }
    }
    pub fn bytes(&self) -> Vec<u8> {
        self.lines.iter().flat_map(|l| l.0).collect()
    }
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: Line is 64 plain bytes; the Vec owns them.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.lines.len() * 64) }
    }
}

pub fn format(ram: &mut Ram, segment_len: u64) -> Pool<Region, HeapMemory> {
    let mut o = FormatOptions::new(0x1234_5678_9abc_def0);
    o.segment_len = Some(segment_len);
    o.lanes_max = 4;
    Pool::format(ram.region(), o, HeapMemory::new()).expect("format")
}

pub fn open(ram: &mut Ram) -> nvs_core::Result<Pool<Region, HeapMemory>> {
    Pool::open(ram.region(), HeapMemory::new())
}

/// One store the recorder saw, or a fence.
#[derive(Clone, Debug)]
pub enum Op {
    Store { off: usize, bytes: Vec<u8> },
    Fence,
}

/// A media over plain bytes that records every store and fence in order.
pub struct Recorder {
    pub mem: RefCell<Vec<u8>>,
    pub ops: RefCell<Vec<Op>>,
}

impl Recorder {
    pub fn new(image: Vec<u8>) -> Recorder {
        Recorder { mem: RefCell::new(image), ops: RefCell::new(Vec::new()) }
    }
    fn put(&self, off: usize, bytes: &[u8]) {
        self.mem.borrow_mut()[off..off + bytes.len()].copy_from_slice(bytes);
        self.ops.borrow_mut().push(Op::Store { off, bytes: bytes.to_vec() });
    }
}

impl Media for Recorder {
    fn len(&self) -> usize {
        self.mem.borrow().len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.mem.borrow()[off..off + dst.len()]);
    }
    fn load_word(&self, off: usize) -> u64 {
        u64::from_le_bytes(self.mem.borrow()[off..off + 8].try_into().unwrap())
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        let mut padded = src.to_vec();
        padded.resize(src.len().next_multiple_of(8), 0);
        self.put(off, &padded);
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        self.put(off, &word.to_le_bytes());
    }
    fn store(&self, off: usize, src: &[u8]) {
        self.put(off, src);
    }
    fn flush(&self, _off: usize, _len: usize) {}
    fn fence(&self) {
        self.ops.borrow_mut().push(Op::Fence);
    }
}

/// xorshift64*: deterministic test randomness.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}
