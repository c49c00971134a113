//! Zero-copy and typed reads: `with_bytes` lends a full version's bytes from the media,
//! checked against their checksum; a delta (not in one place) is `NotBorrowable`; a
//! media that lends nothing is too; `get_into` returns whole elements or refuses.

mod common;

use common::Ram;
use nvs_core::{CorruptKind, Error, FormatOptions, HeapMemory, Media, Object, Pool};

#[test]
fn full_versions_are_lent_in_place_deltas_are_not() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut o = FormatOptions::new(3);
    o.payload_checksum = true;
    o.segment_len = Some(256 << 10);
    let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    let grid: Vec<f64> = (0..4096).map(|i| i as f64 * 0.5).collect();
    pool.put(0, Object::pod("grid", &grid)).unwrap();
    let sum = pool.with_bytes("grid", 1, |b| b.len()).unwrap();
    assert_eq!(sum, 4096 * 8);
    let same = pool.with_bytes("grid", 1, |b| b == bytemuck::cast_slice::<f64, u8>(&grid)).unwrap();
    assert!(same);
    let mut back = vec![0f64; 4096];
    assert_eq!(pool.get_into("grid", 1, &mut back).unwrap(), 4096);
    assert_eq!(back, grid);
    assert_eq!(
        pool.get_into::<[u8; 3]>("grid", 1, &mut [[0u8; 3]; 11000]),
        Err(Error::ElementSize { len_bytes: 32768, elem_bytes: 3 })
    );
    // A delta is rebuilt from several places: not lent.
    let mut g2 = grid.clone();
    g2[0] = 9.0;
    let put = pool.put(0, Object::pod("grid", &g2).delta(1, &[(0u64, 8u64)])).unwrap();
    assert!(put.delta);
    assert_eq!(pool.with_bytes("grid", 2, |b| b.len()), Err(Error::NotBorrowable));
    assert_eq!(pool.with_bytes("grid", 9, |b| b.len()), Err(Error::NotFound));
    assert_eq!(pool.with_bytes("", 1, |b| b.len()), Err(Error::NameEmpty));
}

#[test]
fn lent_bytes_are_checked_against_their_checksum() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut o = FormatOptions::new(4);
    o.payload_checksum = true;
    let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    pool.put(0, Object::new("a", &[5u8; 300])).unwrap();
    // Not the lane's newest unit (whose damage, in a sealed pool, reads as torn).
    pool.put(0, Object::new("b", &[6u8; 10])).unwrap();
    let off = pool.stat("a", 1).unwrap().offset as usize;
    drop(pool);
    ram.bytes_mut()[off + 17] ^= 1; // damage the payload
    let pool = Pool::open_read_only(ram.region(), HeapMemory::new()).unwrap();
    let r = pool.with_bytes("a", 1, |b| b.to_vec());
    assert_eq!(r, Err(Error::Corrupted { offset: off as u64, kind: CorruptKind::PayloadChecksum }));
}

/// A media that lends nothing (the trait's default), like a simulator.
struct NoLend(nvs_core::Region);

impl Media for NoLend {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.0.read(off, dst)
    }
    fn load_word(&self, off: usize) -> u64 {
        self.0.load_word(off)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        self.0.store_nt(off, src)
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        self.0.store_word_nt(off, word)
    }
    fn store(&self, off: usize, src: &[u8]) {
        self.0.store(off, src)
    }
    fn flush(&self, off: usize, len: usize) {
        self.0.flush(off, len)
    }
    fn fence(&self) {
        self.0.fence()
    }
}

#[test]
fn a_media_that_lends_nothing_is_not_borrowable() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = Pool::format(NoLend(ram.region()), FormatOptions::new(5), HeapMemory::new()).unwrap();
    pool.put(0, Object::new("a", b"xyz")).unwrap();
    assert_eq!(pool.with_bytes("a", 1, |b| b.len()), Err(Error::NotBorrowable));
    let mut buf = [0u8; 3];
    assert_eq!(pool.get("a", 1, &mut buf), Ok(3));
}
