//! `Media::reserve`: a media that gets its room as segments are claimed (a pool file that
//! gets its blocks as it fills). Every store lands in the first 4 KiB (the superblock) or
//! in a range reserved before it (claims reserve their segments, a writer's open its
//! lanes' last ones); a reserve that fails refuses the put with
//! `Error::NoSpace`, nothing written, every committed object intact, and puts go on once
//! there is room again.

mod common;
use common::*;
use nvs_core::{Error, FormatOptions, HeapMemory, Key, Media, Object, Pool, Region, Sum};
use std::cell::{Cell, RefCell};

/// The superblock's page: formatted before any claim.
const HEAD: usize = 4096;

/// A region that has room only up to `room` bytes, and checks every store against the
/// ranges reserved so far.
struct Tight<'a> {
    region: &'a Region,
    room: Cell<usize>,
    reserved: RefCell<Vec<(usize, usize)>>,
}

impl Tight<'_> {
    fn check(&self, off: usize, len: usize) {
        let inside = off + len <= HEAD || self.reserved.borrow().iter().any(|&(o, l)| o <= off && off + len <= o + l);
        assert!(inside, "a store at {off:#x}..{:#x} outside every reserved range", off + len);
    }
}

impl Media for Tight<'_> {
    fn len(&self) -> usize {
        self.region.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.region.read(off, dst)
    }
    fn load_word(&self, off: usize) -> u64 {
        self.region.load_word(off)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        self.region.store_nt(off, src)
    }
    fn store_nt_summed(&self, off: usize, src: &[u8], sum: &mut Sum) {
        self.check(off, src.len());
        self.region.store_nt_summed(off, src, sum)
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        self.check(off, 8);
        self.region.store_word_nt(off, word)
    }
    fn store(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        self.region.store(off, src)
    }
    fn flush(&self, off: usize, len: usize) {
        self.region.flush(off, len)
    }
    fn fence(&self) {
        self.region.fence()
    }
    fn reserve(&self, off: usize, len: usize) -> nvs_core::Result<()> {
        if off + len > self.room.get() {
            return Err(Error::NoSpace);
        }
        self.reserved.borrow_mut().push((off, len));
        Ok(())
    }
}

fn payload(v: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 31 + v * 7) as u8).collect()
}

#[test]
fn claims_reserve_first_and_a_full_file_system_refuses_the_put_only() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut o = FormatOptions::new(0x7e5e_27e0);
    o.segment_len = Some(4096);
    drop(Pool::format(ram.region(), o, HeapMemory::new()).expect("format"));
    let region = ram.region();
    // Room for the superblock and 6 segments.
    let media = Tight { region: &region, room: Cell::new(HEAD + 6 * 4096), reserved: RefCell::new(Vec::new()) };
    let mut pool = Pool::open(&media, HeapMemory::new()).unwrap();
    // Objects of 1.5 KiB: two per segment; a span of 3 segments at version 5.
    let len = |v: u64| if v == 5 { 9000 } else { 1500 };
    let mut stored = 0;
    let refused = loop {
        let v = stored + 1;
        match pool.put(0, Object::new("t", &payload(v, len(v)))) {
            Ok(put) => {
                assert_eq!(put.version, v);
                stored = v;
            }
            Err(e) => break e,
        }
        assert!(v < 100, "the pool never ran out of room");
    };
    assert_eq!(refused, Error::NoSpace);
    assert!(stored >= 5, "only {stored} objects before the first refusal");
    // Nothing committed is harmed, and a retry that needs a segment is refused again.
    for v in 1..=stored {
        assert_eq!(pool.get_vec_for_test(v), payload(v, len(v)), "v{v}");
    }
    assert_eq!(pool.put(0, Object::new("t", &payload(0, 1500))).map(|p| p.version), Err(Error::NoSpace));
    // Room again: the put goes on with the next version.
    media.room.set(1 << 20);
    assert_eq!(pool.put(0, Object::new("t", &payload(stored + 1, 100))).unwrap().version, stored + 1);
    drop(pool);
    // A writer's open reserves its lanes' last segments (a sparse copy may have holes
    // there): a small put into the open segment's tail stores only into reserved room.
    let media = Tight { region: &region, room: Cell::new(1 << 20), reserved: RefCell::new(Vec::new()) };
    let mut pool = Pool::open(&media, HeapMemory::new()).unwrap();
    assert_eq!(media.reserved.borrow().len(), 1, "the one lane's segment");
    assert_eq!(pool.put(0, Object::new("t", b"tail")).unwrap().version, stored + 2);
    drop(pool);
    let pool = Pool::open(ram.region(), HeapMemory::new()).expect("recovery");
    assert_eq!(pool.latest(Key::from("t")), Ok(stored + 2));
    for v in 1..=stored {
        assert_eq!(pool.get_vec_for_test(v), payload(v, len(v)), "v{v} after reopen");
    }
}

trait GetVec {
    fn get_vec_for_test(&self, v: u64) -> Vec<u8>;
}

impl<M: Media> GetVec for Pool<M, HeapMemory> {
    fn get_vec_for_test(&self, v: u64) -> Vec<u8> {
        let mut buf = vec![0u8; 16 << 10];
        let n = self.get(Key::from("t"), v, &mut buf).expect("get");
        buf.truncate(n);
        buf
    }
}
