//! `checkpoint`: an index checkpoint of a real pool, patched by the input, opened over
//! the pool (as it was when the checkpoint was taken, or after more puts, a new lane or
//! retention). Whatever the bytes, the open must succeed (the pool is sound), never
//! store, and never panic; a checkpoint it does not use must leave exactly what a
//! recovery gives, and so must an untouched one it uses. One patched so that it still
//! verifies (the input can ask for its sum to be fixed up) may be used: reading every
//! version of every name, and a refresh, must then still not panic.
//!
//! Input layout: byte 0: bit 0 fix the sum up after patching; byte 1 (mod 4): what
//! happens to the pool after the checkpoint (nothing, more puts, a new lane, retention);
//! then patches of 5 bytes each: a little-endian u32 offset (mod the checkpoint's length)
//! and a byte XORed in there.

use crate::{Bytes, VecMedia};
use nvs_core::internals::checkpoint::SUM_SEED;
use nvs_core::{checkpoint_memory, CheckpointUse, FormatOptions, HeapMemory, Object, Pool, Sum};

/// A pool of three lanes in 4 KiB segments with some puts, and its checkpoint.
fn pool_and_checkpoint() -> (Vec<u8>, Vec<u8>, u64) {
    let mut o = FormatOptions::new(0xF022_C4EC);
    o.segment_len = Some(4096);
    o.lanes_max = 3;
    o.payload_checksum = true;
    let m = VecMedia::zeroed(4096 * 20);
    let mut pool = Pool::format(&m, o, HeapMemory::new()).expect("format");
    for i in 0..24u8 {
        let name = [b'a' + i % 4];
        pool.put(u32::from(i % 3 == 1), Object::new(&name, &vec![i; 20 + 9 * i as usize])).expect("put");
    }
    drop(pool);
    let mut r = Pool::open_read_only(&m, HeapMemory::new()).expect("open");
    let mut bytes = Vec::new();
    assert!(r.write_checkpoint(&mut |b| {
        bytes.extend_from_slice(b);
        true
    }));
    (m.peek(0, nvs_core::Media::len(&m)), bytes, 0xF022_C4EC)
}

pub fn run(data: &[u8]) {
    let mut b = Bytes::new(data);
    let fix_sum = b.bool();
    let after = b.u8() % 4;
    let (image, mut ck, pool_id) = pool_and_checkpoint();
    let m = VecMedia::from_bytes(image);
    if after != 0 {
        let mut w = Pool::open(&m, HeapMemory::new()).expect("writer open");
        match after {
            1 => {
                for i in 0..10u8 {
                    w.put(0, Object::new(b"b", &[i; 300])).expect("put");
                }
            }
            2 => {
                w.put(2, Object::new(b"new lane", b"x")).expect("put");
            }
            _ => {
                w.reclaim(1).expect("reclaim");
            }
        }
    }
    let patched = !b.rest_is_empty();
    while !b.rest_is_empty() {
        let at = b.u32() as usize % ck.len();
        ck[at] ^= b.u8();
    }
    if fix_sum && ck.len() >= 8 {
        let n = ck.len() - 8;
        let mut s = Sum::new(pool_id ^ SUM_SEED);
        s.write(&ck[..n]);
        let sum = s.finish(n as u64).to_le_bytes();
        ck[n..].copy_from_slice(&sum);
    }
    let stores = m.stores();
    let (mut from, used) =
        Pool::open_read_only_from_checkpoint(&m, checkpoint_memory(&ck), &ck).expect("a sound pool opens");
    assert_eq!(m.stores(), stores, "an open from a checkpoint stored");
    let want = Pool::open_read_only(&m, HeapMemory::new()).expect("recovery").state_digest();
    if used != CheckpointUse::Used || !patched {
        assert_eq!(from.state_digest(), want, "checkpoint {used:?}: not what recovery gives");
    }
    // Every version of every name read (a forged entry: an error or other bytes, never a panic).
    let mut buf = vec![0u8; 1 << 12];
    let names: Vec<_> = from.names().collect();
    for n in names {
        let mut name = [0u8; nvs_core::NAME_MAX];
        let name = from.name_bytes(n.id, &mut name).to_vec();
        for v in from.versions_of(n.id).map(|o| o.version).collect::<Vec<_>>() {
            let _ = from.get(name.as_slice(), v, &mut buf);
        }
    }
    let _ = from.refresh();
}
