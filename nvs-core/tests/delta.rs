//! Delta puts: only changed chunks are stored, every version reads back whole (before
//! and after reopen), chains stay within `full_every`, the writer falls back to a full
//! version when a delta does not pay, bad ranges are refused with nothing written,
//! retention keeps what a live delta needs, and damage to a delta is reported.

mod common;
use common::*;
use nvs_core::{
    ChunkHashes, CorruptKind, DeltaOptions, Error, FormatOptions, HeapMemory, Media, Object, Pool, Put, Region,
};

const LEN: usize = 64 << 10;

fn pool_with(ram: &mut Ram, segment_len: u64, checksums: bool) -> Pool<Region, HeapMemory> {
    let mut o = FormatOptions::new(0xDE17A);
    o.segment_len = Some(segment_len);
    o.lanes_max = 4;
    o.payload_checksum = checksums;
    Pool::format(ram.region(), o, HeapMemory::new()).unwrap()
}

fn get(pool: &Pool<Region, HeapMemory>, name: &[u8], v: u64) -> Vec<u8> {
    let mut buf = vec![0u8; LEN + 4096];
    let n = pool.get(name, v, &mut buf).unwrap_or_else(|e| panic!("get {v}: {e}"));
    buf.truncate(n);
    buf
}

/// Change `count` random short runs of `obj`; returns the changed (offset, len), sorted.
fn scribble(rng: &mut Rng, obj: &mut [u8], count: usize) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = (0..count)
        .map(|_| {
            let off = rng.below(obj.len() as u64 - 100);
            let len = 1 + rng.below(99);
            for b in &mut obj[off as usize..(off + len) as usize] {
                *b = rng.next() as u8;
            }
            (off, len)
        })
        .collect();
    ranges.sort();
    ranges
}

/// A delta stores about the changed chunks only; v1 and v2 read back whole, also after reopen.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn delta_stores_only_changed_chunks_and_reads_back_whole() {
    let mut ram = Ram::new(4 << 20, 0x5A);
    let mut rng = Rng(1);
    let v1 = rng.bytes(LEN);
    let mut v2 = v1.clone();
    let ranges = scribble(&mut rng, &mut v2, 3);
    {
        let mut pool = pool_with(&mut ram, 1 << 20, false);
        assert_eq!(pool.put(0, Object::new(b"grid", &v1)).map(|p| p.version), Ok(1));
        let put = pool.put(0, Object::new(b"grid", &v2).delta(1, &ranges.as_slice())).unwrap();
        assert!(put.delta, "{put:?}");
        assert_eq!(put.version, 2);
        // At most 3 runs of 2 chunks each, plus the 64-byte record and table line.
        assert!(put.stored_bytes <= 64 + 3 * 2 * 4096 && put.stored_bytes >= 4096, "{put:?}");
        assert_eq!(get(&pool, b"grid", 1), v1);
        assert_eq!(get(&pool, b"grid", 2), v2);
        let info = pool.stat(b"grid", 2).unwrap();
        assert_eq!((info.len_bytes, info.stored_bytes, info.depth), (LEN as u64, put.stored_bytes, 1));
        assert_eq!(pool.stat(b"grid", 1).unwrap().depth, 0);
        assert_eq!(pool.verify_all(), Ok(2));
    }
    let pool = open(&mut ram).unwrap();
    assert_eq!(get(&pool, b"grid", 1), v1);
    assert_eq!(get(&pool, b"grid", 2), v2);
    let info = pool.stat(b"grid", 2).unwrap();
    assert_eq!((info.len_bytes, info.depth), (LEN as u64, 1));
    assert!(info.stored_bytes < LEN as u64 / 4);
}

/// A long run of deltas: depth climbs to `full_every`, then a full version; every version
/// of the whole history reads back exactly, before and after reopen.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn chains_stay_within_full_every_and_every_version_reads_back() {
    let mut ram = Ram::new(8 << 20, 0x00);
    let mut rng = Rng(2);
    let mut obj = rng.bytes(LEN);
    let mut history = vec![obj.clone()];
    let mut depths = vec![0];
    {
        let mut pool = pool_with(&mut ram, 1 << 20, true);
        pool.set_delta_options(DeltaOptions { full_every: 4, ..DeltaOptions::default() }).unwrap();
        pool.put(0, Object::new(b"g", &obj)).unwrap();
        for v in 2..=30u64 {
            let ranges = scribble(&mut rng, &mut obj, 1 + (v as usize % 4));
            let put = pool.put(0, Object::new(b"g", &obj).delta(v - 1, &ranges.as_slice())).unwrap();
            assert_eq!(put.version, v);
            history.push(obj.clone());
            depths.push(pool.stat(b"g", v).unwrap().depth);
        }
        assert_eq!(&depths[..11], &[0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0]);
        for (i, want) in history.iter().enumerate() {
            assert_eq!(&get(&pool, b"g", i as u64 + 1), want, "v{}", i + 1);
        }
        assert_eq!(pool.verify_all(), Ok(30));
    }
    let pool = open(&mut ram).unwrap();
    for (i, want) in history.iter().enumerate() {
        assert_eq!(&get(&pool, b"g", i as u64 + 1), want, "v{} after reopen", i + 1);
        assert_eq!(pool.stat(b"g", i as u64 + 1).unwrap().depth, depths[i]);
    }
}

/// Falls back to a full version: length changed, parent unknown, too much changed, or a
/// pool made before deltas; the result is still exact.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn falls_back_to_full_when_a_delta_does_not_pay() {
    let mut ram = Ram::new(4 << 20, 0x00);
    let mut pool = pool_with(&mut ram, 1 << 20, false);
    let mut rng = Rng(3);
    let v1 = rng.bytes(LEN);
    pool.put(0, Object::new(b"a", &v1)).unwrap();
    let full = |p: Put, len: usize| assert!(!p.delta && p.stored_bytes == len as u64, "{p:?}");
    // Length changed.
    let longer = [v1.clone(), vec![1; 10]].concat();
    full(pool.put(0, Object::new(b"a", &longer).delta(1, &[(0, 1)])).unwrap(), LEN + 10);
    // Unknown parent (never put, or a name never seen).
    full(pool.put(0, Object::new(b"a", &longer).delta(99, &[(0, 1)])).unwrap(), LEN + 10);
    full(pool.put(0, Object::new(b"new", &v1).delta(1, &[(0, 1)])).unwrap(), LEN);
    // More than max_percent (50 %) changed.
    let mut v = longer.clone();
    v[..LEN / 2 + 8192].fill(9);
    full(pool.put(0, Object::new(b"a", &v).delta(3, &[(0, LEN as u64 / 2 + 8192)])).unwrap(), LEN + 10);
    let small = pool.put(0, Object::new(b"a", &v).delta(4, &[(0, 1)])).unwrap();
    assert!(small.delta);
    for (ver, want) in [(1, &v1), (2, &longer), (3, &longer), (4, &v), (5, &v)] {
        assert_eq!(&get(&pool, b"a", ver), want, "v{ver}");
    }
}

/// Bad ranges are refused before anything is written; bad options too.
#[test]
fn bad_ranges_and_options_are_refused_with_nothing_written() {
    let mut ram = Ram::new(1 << 20, 0x00);
    let mut pool = pool_with(&mut ram, 64 << 10, false);
    let v1 = vec![3u8; 10_000];
    pool.put(0, Object::new(b"a", &v1)).unwrap();
    let units = pool.stats().units;
    let image = |pool: &Pool<Region, HeapMemory>| {
        let mut b = vec![0u8; pool.media().len()];
        pool.media().read(0, &mut b);
        b
    };
    let before = image(&pool);
    assert_eq!(
        pool.put(0, Object::new(b"a", &v1).delta(1, &[(500, 1), (100, 1)])),
        Err(Error::DeltaRanges { offset: 100 })
    );
    assert_eq!(pool.put(0, Object::new(b"a", &v1).delta(1, &[(9_999, 2)])), Err(Error::DeltaRanges { offset: 9_999 }));
    // Even when the answer would have been a full version (unknown parent).
    assert_eq!(
        pool.put(0, Object::new(b"zz", &v1).delta(1, &[(10_001, 1)])),
        Err(Error::DeltaRanges { offset: 10_001 })
    );
    assert_eq!(pool.stats().units, units);
    assert!(image(&pool) == before, "a refused put wrote to the media");
    assert_eq!(pool.latest(b"a"), Ok(1));
    for bad in [
        DeltaOptions { chunk_bytes: 100, ..DeltaOptions::default() },
        DeltaOptions { chunk_bytes: 32, ..DeltaOptions::default() },
        DeltaOptions { full_every: 0, ..DeltaOptions::default() },
        DeltaOptions { full_every: 256, ..DeltaOptions::default() },
        DeltaOptions { max_percent: 0, ..DeltaOptions::default() },
        DeltaOptions { max_percent: 101, ..DeltaOptions::default() },
    ] {
        assert!(matches!(pool.set_delta_options(bad), Err(Error::DeltaOptions { .. })), "{bad:?}");
    }
    assert_eq!(pool.delta_options(), DeltaOptions::default());
}

/// ChunkHashes finds the changes itself: the stored size follows what changed, not what
/// the caller claims, and every version reads back.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn chunk_hashes_detect_changes() {
    let mut ram = Ram::new(4 << 20, 0x00);
    let mut pool = pool_with(&mut ram, 1 << 20, false);
    let mut rng = Rng(4);
    let mut obj = rng.bytes(LEN);
    let mut hashes = ChunkHashes::new(vec![0u64; ChunkHashes::<Vec<u64>>::words_for(LEN as u64, 4096)], 4096).unwrap();
    let mut history = Vec::new();
    for step in 0..12u64 {
        if step > 0 {
            // Change 2 bytes in chunks 3 and 9, or nothing at all on step 5.
            if step != 5 {
                obj[3 * 4096 + step as usize] ^= 0xFF;
                obj[9 * 4096 + 17] = step as u8;
            }
        }
        let put = match hashes.scan(&obj).unwrap() {
            Some(parent) => pool.put(0, Object::new(b"sim", &obj).delta(parent, &hashes)).unwrap(),
            None => Put {
                version: pool.put(0, Object::new(b"sim", &obj)).unwrap().version,
                stored_bytes: LEN as u64,
                delta: false,
            },
        };
        hashes.committed(put.version);
        history.push(obj.clone());
        match step {
            0 => assert!(!put.delta),
            5 => assert!(put.delta && put.stored_bytes == 64, "nothing changed: {put:?}"),
            _ => assert!(put.delta && put.stored_bytes == 64 + 2 * 4096, "{put:?}"),
        }
    }
    for (i, want) in history.iter().enumerate() {
        assert_eq!(&get(&pool, b"sim", i as u64 + 1), want);
    }
}

/// A batch mixing delta and full objects, with vectored parts cut across the changed runs.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn batch_with_vectored_delta_objects() {
    let mut ram = Ram::new(4 << 20, 0x00);
    let mut pool = pool_with(&mut ram, 1 << 20, true);
    let mut rng = Rng(5);
    let a1 = rng.bytes(20_000);
    let b1 = rng.bytes(9_000);
    pool.put_batch(1, &[Object::new(b"a", &a1), Object::new(b"b", &b1)]).unwrap();
    let mut a2 = a1.clone();
    a2[5000] ^= 1;
    a2[19_999] ^= 1;
    let (x, rest) = a2.split_at(4097);
    let (y, z) = rest.split_at(3);
    let parts: [&[u8]; 3] = [x, y, z];
    let changes = [(5000u64, 1u64), (19_999, 1)];
    let b2 = rng.bytes(9_000);
    let vs = pool.put_batch(1, &[Object::vectored(b"a", &parts).delta(1, &changes), Object::new(b"b", &b2)]).unwrap();
    assert_eq!(&vs[..], &[2, 2]);
    assert_eq!(pool.stat(b"a", 2).unwrap().depth, 1);
    assert_eq!(get(&pool, b"a", 2), a2);
    assert_eq!(get(&pool, b"b", 2), b2);
    assert_eq!(get(&pool, b"a", 1), a1);
    assert_eq!(pool.verify_all(), Ok(4));
}

/// reclaim(keep 1) keeps the full version and the deltas the latest version needs, and
/// releases what no kept version needs.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn retention_keeps_what_a_live_delta_needs() {
    let mut ram = Ram::new(4096 + 40 * 65536, 0x00);
    let mut pool = pool_with(&mut ram, 65536, false);
    pool.set_delta_options(DeltaOptions { full_every: 8, ..DeltaOptions::default() }).unwrap();
    let mut rng = Rng(6);
    let mut obj = rng.bytes(40_000);
    let mut history = vec![obj.clone()];
    pool.put(0, Object::new(b"g", &obj)).unwrap();
    // Deltas of ~1 chunk each: a few fit beside a full version in one segment, then the
    // next version starts a new chain in a new segment (chains never leave theirs).
    for v in 2..=22u64 {
        let ranges = scribble(&mut rng, &mut obj, 1);
        pool.put(0, Object::new(b"g", &obj).delta(v - 1, &ranges.as_slice())).unwrap();
        history.push(obj.clone());
        // Filler on another lane takes segments between them.
        pool.put(1, Object::vectored(b"filler", &[&rng.bytes(30_000)])).unwrap();
    }
    let latest_depth = pool.stat(b"g", 22).unwrap().depth;
    assert!(latest_depth >= 1, "latest must be a delta for this test");
    let freed = pool.reclaim(1).unwrap();
    assert!(freed > 0, "something must be releasable");
    assert!(get(&pool, b"g", 22) == history[21]);
    // The chain of v22: every ancestor down to the full version is still there.
    let full = 22 - latest_depth as u64;
    for v in full..=22 {
        assert_eq!(get(&pool, b"g", v), history[v as usize - 1], "v{v}");
    }
    assert!(pool.get(b"g", 1, &mut [0u8; 1 << 16]).is_err(), "v1 should be released");
    let pool = {
        drop(pool);
        open(&mut ram).unwrap()
    };
    assert!(get(&pool, b"g", 22) == history[21]);
    assert_eq!(pool.verify_all().map(|n| n > 0), Ok(true));
}

/// Damage to a committed delta is reported, never returned as data: its extent table
/// (record checksum), and with payload checksums its data.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn damaged_deltas_are_reported() {
    for checksums in [false, true] {
        let mut ram = Ram::new(4 << 20, 0x00);
        let (off, data_off) = {
            let mut pool = pool_with(&mut ram, 1 << 20, checksums);
            let v1 = vec![1u8; LEN];
            let mut v2 = v1.clone();
            v2[100] = 2;
            pool.put(0, Object::new(b"a", &v1)).unwrap();
            pool.put(0, Object::new(b"a", &v2).delta(1, &[(100, 1)])).unwrap();
            // Not the lane's newest unit (whose damage, in a sealed pool, reads as torn).
            pool.put(0, Object::new(b"z", b"after")).unwrap();
            let info = pool.stat(b"a", 2).unwrap();
            (info.offset as usize, info.offset as usize + 64)
        };
        // The extent's offset word: the table checksum catches it.
        let mut damaged = Ram::from_bytes(&ram.bytes());
        damaged.bytes_mut()[off + 32] ^= 0x40;
        let pool = open(&mut damaged).unwrap();
        let err = pool.get(b"a", 2, &mut vec![0u8; LEN]).unwrap_err();
        assert!(matches!(err, Error::Corrupted { kind: CorruptKind::DeltaRecord, .. }), "{err:?}");
        assert!(pool.verify_all().is_err());
        // A data byte: caught only with payload checksums (otherwise it is data).
        let mut damaged = Ram::from_bytes(&ram.bytes());
        damaged.bytes_mut()[data_off + 100] ^= 0x40;
        let pool = open(&mut damaged).unwrap();
        let r = pool.get(b"a", 2, &mut vec![0u8; LEN]);
        if checksums {
            assert!(matches!(r, Err(Error::Corrupted { kind: CorruptKind::PayloadChecksum, .. })), "{r:?}");
        } else {
            assert_eq!(r, Ok(LEN));
        }
    }
}

/// A pool formatted before deltas existed (no FLAG_DELTAS) takes delta puts as full
/// versions, and a delta object in such a pool is refused by recovery.
#[test]
#[cfg_attr(miri, ignore = "64 KiB objects over MiB pools: minutes under miri; delta code has no unsafe")]
fn pools_without_the_delta_flag_take_full_versions() {
    let mut ram = Ram::new(1 << 20, 0x00);
    {
        let pool = pool_with(&mut ram, 64 << 10, false);
        drop(pool);
    }
    let mut sb: nvs_core::internals::format::Superblock = *bytemuck::from_bytes(&ram.bytes()[..64]);
    sb.flags &= !nvs_core::internals::format::FLAG_DELTAS;
    sb.checksum = sb.compute_checksum();
    ram.bytes_mut()[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    let mut pool = open(&mut ram).unwrap();
    let v1 = vec![5u8; 8192];
    pool.put(0, Object::new(b"a", &v1)).unwrap();
    let put = pool.put(0, Object::new(b"a", &v1).delta(1, &[(0, 1)])).unwrap();
    assert!(!put.delta);
    assert_eq!(get(&pool, b"a", 2), v1);
}

/// A delta that stays in the pool (its segment is kept for another reason) keeps its
/// ancestors even when no kept version needs them: reclaim never orphans a delta.
/// (nvs-verify's delta family found this: v4 shared a kept segment with v5.)
#[test]
fn reclaim_never_orphans_a_delta_that_stays() {
    let mut ram = Ram::new(4096 + 6 * 4096, 0);
    let mut o = FormatOptions::new(0x600D);
    o.segment_len = Some(4096);
    o.lanes_max = 2;
    let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    pool.set_delta_options(DeltaOptions { chunk_bytes: 64, full_every: 3, max_percent: 50, ..Default::default() })
        .unwrap();
    let mut cur = vec![1u8; 1000];
    let mut ver = 0;
    let mut put = |pool: &mut Pool<Region, HeapMemory>, ranges: &[(u64, u64)], step: u8| {
        for &(o, l) in ranges {
            cur[o as usize..(o + l) as usize].fill(step);
        }
        ver = pool.put(0, Object::new(b"d", &cur).delta(ver, &ranges)).unwrap().version;
    };
    put(&mut pool, &[(10, 5)], 1);
    put(&mut pool, &[(100, 1), (700, 130)], 2);
    put(&mut pool, &[(10, 5)], 3);
    pool.put(0, Object::new(b"filler", &[3u8; 2200])).unwrap();
    // v4 does not fit beside the filler: in a new segment it is a full version, since a
    // chain never leaves its segment (so retention can always release the old one).
    put(&mut pool, &[(100, 1), (700, 130)], 4);
    put(&mut pool, &[(10, 5)], 5); // v5: a delta of v4, in v4's segment
    assert_eq!(pool.stat(b"d", 3).unwrap().depth, 2);
    assert_eq!(pool.stat(b"d", 4).unwrap().depth, 0);
    assert_eq!(pool.stat(b"d", 5).unwrap().depth, 1);
    assert!(pool.reclaim(1).unwrap() >= 1, "the old chain's segment is released");
    let listed: Vec<_> = pool.versions(b"d").unwrap().map(|v| v.version).collect();
    assert_eq!(listed, [4, 5]);
    for v in listed {
        pool.get(b"d", v, &mut [0u8; 1000]).unwrap_or_else(|e| panic!("v{v} listed but unreadable: {e}"));
    }
    assert!(pool.verify_all().is_ok());
}

/// The deepest chain the format allows (255 deltas) reads back, and the next version is full.
#[test]
#[cfg_attr(miri, ignore = "300 puts and 255-deep rebuilds: slow under miri")]
fn deepest_chain_reads_back() {
    let mut ram = Ram::new(4 << 20, 0x00);
    let mut pool = pool_with(&mut ram, 1 << 20, true);
    pool.set_delta_options(DeltaOptions { chunk_bytes: 64, full_every: 255, max_percent: 50, ..Default::default() })
        .unwrap();
    let mut obj = vec![0u8; 4096];
    let mut history = Vec::new();
    for v in 1..=258u64 {
        obj[(v as usize * 67) % 4096] = v as u8;
        let put = pool.put(0, Object::new(b"deep", &obj).delta(v - 1, &[((v * 67) % 4096, 1)])).unwrap();
        assert_eq!(put.version, v);
        history.push(obj.clone());
    }
    assert_eq!(pool.stat(b"deep", 256).unwrap().depth, 255);
    assert_eq!(pool.stat(b"deep", 257).unwrap().depth, 0);
    for v in [1u64, 2, 128, 255, 256, 257, 258] {
        let mut buf = vec![0u8; 4096];
        assert_eq!(pool.get(b"deep", v, &mut buf), Ok(4096));
        assert_eq!(buf, history[v as usize - 1], "v{v}");
    }
    assert_eq!(pool.verify_all(), Ok(258));
}

/// A reader in another process whose index lists a delta chain the writer then releases
/// and reuses gets NotFound (or the right bytes), never someone else's bytes or a
/// corruption error; after a refresh the kept chain reads back.
#[test]
#[cfg_attr(miri, ignore = "MiB pools: slow under miri")]
fn a_stale_reader_of_a_delta_gets_not_found() {
    let mut ram = Ram::new(4096 + 6 * 4096, 0);
    let mut o = FormatOptions::new(0x57A1E);
    o.segment_len = Some(4096);
    o.lanes_max = 1;
    let mut w = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    w.set_delta_options(DeltaOptions { chunk_bytes: 64, full_every: 2, max_percent: 50, ..Default::default() })
        .unwrap();
    let mut cur = vec![1u8; 1500];
    let mut history = Vec::new();
    // v1 full, v2 delta, v3 delta, v4 full, ...: about four units per 4 KiB segment, so
    // chains spread over segments.
    for v in 1..=12u64 {
        cur[(v as usize * 200) % 1500] = v as u8;
        w.put(0, Object::new(b"d", &cur).delta(v - 1, &[((v * 200) % 1500, 1)])).unwrap();
        history.push(cur.clone());
    }
    let r = Pool::open_read_only(ram.region(), HeapMemory::new()).unwrap();
    assert!(w.reclaim(1).unwrap() >= 1);
    // Fill the pool with full versions of the same name (another length): the released
    // segments are reused, with units starting where the old ones did, so the stale
    // reader still finds the name's bytes where its index says and reads the new units'
    // bytes as if they were its deltas' parents, records and data.
    let mut k = 0u8;
    while w.put(0, Object::new(b"d", &[0xEE ^ k; 1800])).is_ok() {
        k += 1;
        assert!(k < 50);
    }
    assert!(w.free_segments() == 0);

    let mut buf = vec![0u8; 1500];
    for v in 1..=12u64 {
        match r.get(b"d", v, &mut buf) {
            Ok(n) => assert_eq!(&buf[..n], &history[v as usize - 1][..], "v{v}: wrong bytes"),
            Err(e) => assert_eq!(e, Error::NotFound, "v{v}"),
        }
    }
    assert_eq!(r.get(b"d", 1, &mut buf), Err(Error::NotFound), "a released version");
    // Caught up, the reader sees the kept chain.
    let mut r = r;
    r.refresh().unwrap();
    assert_eq!(r.get(b"d", 12, &mut buf), Ok(1500), "the kept chain reads back");
    assert_eq!(buf, history[11]);
}

/// A `Changes` (safe code) that answers `(0, 64)` the first time it is asked and the
/// whole object afterwards.
struct Flaky {
    calls: std::cell::Cell<u32>,
    len: u64,
}

impl nvs_core::Changes for Flaky {
    fn for_each_range(&self, f: &mut dyn FnMut(u64, u64)) {
        let first = self.calls.get() == 0;
        self.calls.set(self.calls.get() + 1);
        if first {
            f(0, 64)
        } else {
            f(0, self.len)
        }
    }
}

/// Regression: a delta was planned from the first answer of its `Changes` and stored from
/// a later one, unclipped: a unit planned to end exactly at its segment's end overwrote
/// the next segment — another lane's committed `y` v1 — and the put returned `Ok`. Now
/// whatever a later call answers, nothing outside the planned unit is written, and a
/// delta whose stored ranges are not the planned ones is refused before its commit.
#[test]
fn changes_that_answer_differently_later_cannot_write_past_the_unit() {
    for checksums in [false, true] {
        let mut ram = Ram::new(4096 + 4 * 4096, 0);
        let mut pool = pool_with(&mut ram, 4096, checksums);
        pool.set_delta_options(DeltaOptions { chunk_bytes: 64, full_every: 16, max_percent: 50, ..Default::default() })
            .unwrap();
        let x1: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        assert_eq!(pool.put(0, Object::new(b"x", &x1)).map(|p| p.version), Ok(1)); // lane 0, segment 0: a 1,152-byte unit
                                                                                   // Leave exactly 256 bytes (the delta's unit) before the last line of segment 0
                                                                                   // (which only a truncate unit may take): the unit ends where the room does.
        let f = vec![7u8; 4096 - 64 - 1152 - 256 - 128 - 64];
        assert_eq!(pool.put(0, Object::new(b"f", &f)).map(|p| p.version), Ok(1));
        let y = vec![0xEEu8; 500];
        assert_eq!(pool.put(1, Object::vectored(b"y", &[&y])).map(|p| p.version), Ok(1)); // lane 1, segment 1
        let y_off = pool.stat(b"y", 1).unwrap().offset;
        assert_eq!(y_off / 4096, 2, "y sits in the segment right after lane 0's");
        let mut x2 = x1.clone();
        x2[..1000].iter_mut().for_each(|b| *b ^= 0xFF);
        let flaky = Flaky { calls: std::cell::Cell::new(0), len: 1000 };
        let r = pool.put(0, Object::new(b"x", &x2).delta(1, &flaky));
        assert_eq!(r, Err(Error::ChangesInconsistent));
        assert_eq!(get(&pool, b"y", 1), y, "lane 1's object survives");
        assert_eq!(get(&pool, b"x", 1), x1);
        assert_eq!(pool.latest(b"x"), Ok(1), "the refused delta was not committed");
        // The pool goes on: the next put of x works and everything survives a reopen.
        let v = pool.put(0, Object::new(b"x", &x2)).unwrap().version;
        drop(pool);
        let pool = Pool::open(ram.region(), HeapMemory::new()).unwrap();
        assert_eq!(get(&pool, b"y", 1), y);
        assert_eq!(get(&pool, b"x", 1), x1);
        assert_eq!(get(&pool, b"x", v), x2);
    }
}

/// A round-trip model: about 10,000 delta puts — chunk sizes 64 B to 8 KiB, `full_every`
/// 1 to 255, chains kept in their segment or not, objects of 0 to 20,000 bytes that sometimes change size, single puts,
/// batches of two, vectored parts cut anywhere, payload checksums off and on, reopens —
/// each version compared with a reference copy, right away and after every reopen.
#[test]
#[cfg_attr(miri, ignore = "thousands of puts of up to 20 KB: hours under miri")]
fn delta_round_trip_model() {
    use std::collections::BTreeMap;
    let mut rng = Rng(0xD17A_5EED);
    let (mut puts, mut deltas) = (0, 0);
    for round in 0..16u32 {
        let checksums = round % 2 == 1;
        let opts = DeltaOptions {
            chunk_bytes: 64 << (round % 8),
            full_every: [1, 2, 3, 16, 255][round as usize % 5],
            max_percent: [50, 100][round as usize % 2],
            chains_cross_segments: round % 3 == 2,
        };
        let mut ram = Ram::new(4096 + 24 * (2 << 20), 0x3C);
        let mut pool = pool_with(&mut ram, 2 << 20, checksums);
        pool.set_delta_options(opts).unwrap();
        let mut model: BTreeMap<(Vec<u8>, u64), Vec<u8>> = BTreeMap::new();
        let mut last: BTreeMap<Vec<u8>, (u64, Vec<u8>)> = BTreeMap::new();
        // The next version of `name`: the last one's bytes (or new ones, maybe resized),
        // a few runs rewritten, and the ranges that say so.
        let next = |rng: &mut Rng, last: &BTreeMap<Vec<u8>, (u64, Vec<u8>)>, name: &[u8]| {
            let (parent, mut bytes) = last.get(name).cloned().unwrap_or((0, Vec::new()));
            if bytes.is_empty() || rng.below(8) == 0 {
                let len = rng.below(20_001) as usize;
                bytes.resize(len, 0);
                let fresh = rng.bytes(len);
                bytes.copy_from_slice(&fresh);
            }
            let runs = rng.below(4) as usize;
            let ranges = if bytes.len() < 100 || rng.below(3) == 0 {
                vec![(0, bytes.len() as u64)]
            } else {
                scribble(rng, &mut bytes, runs)
            };
            (parent, bytes, ranges)
        };
        for i in 0..480 {
            let k = rng.below(3);
            let name = format!("d{k}").into_bytes();
            // Mostly the name's own lane (a delta's parent must be in its lane's segment),
            // sometimes another (a full version then).
            let lane = if rng.below(8) == 0 { (k as u32 + 1) % 4 } else { k as u32 };
            let (parent, bytes, ranges) = next(&mut rng, &last, &name);
            let cut = if bytes.is_empty() { 0 } else { rng.below(bytes.len() as u64) as usize };
            let (a, b) = bytes.split_at(cut);
            let parts: [&[u8]; 2] = [a, b];
            let versions: Vec<u64> = match rng.below(3) {
                0 => vec![pool.put(lane, Object::new(&name, &bytes).delta(parent, &ranges)).unwrap().version],
                1 => {
                    let obj = Object::vectored(&name, &parts).delta(parent, &ranges);
                    pool.put_batch(lane, &[obj]).unwrap().to_vec()
                }
                _ => {
                    let other = format!("e{}", i % 2).into_bytes();
                    let (p2, bytes2, ranges2) = next(&mut rng, &last, &other);
                    let objs = [
                        Object::vectored(&name, &parts).delta(parent, &ranges),
                        Object::new(&other, &bytes2).delta(p2, &ranges2),
                    ];
                    let vs = pool.put_batch(lane, &objs).unwrap().to_vec();
                    model.insert((other.clone(), vs[1]), bytes2.clone());
                    last.insert(other, (vs[1], bytes2));
                    vs
                }
            };
            assert_eq!(get(&pool, &name, versions[0]), bytes, "round {round}, put {i}");
            model.insert((name.clone(), versions[0]), bytes.clone());
            last.insert(name, (versions[0], bytes));
            puts += versions.len();
            if i % 120 == 119 {
                drop(pool);
                pool = Pool::open(ram.region(), HeapMemory::new()).unwrap();
                pool.set_delta_options(opts).unwrap();
                for ((n, v), want) in &model {
                    assert_eq!(&get(&pool, n, *v), want, "round {round} after reopen: {v}");
                }
            }
        }
        assert_eq!(pool.verify_all(), Ok(model.len() as u64));
        deltas += model.keys().filter(|(n, v)| pool.stat(n, *v).unwrap().depth > 0).count();
    }
    assert!(puts > 9000 && deltas > puts / 4, "{puts} puts, {deltas} stored as deltas");
    println!("{puts} puts, {deltas} stored as deltas");
}

/// Regression: retention keeps what a staying delta is rebuilt from, and chains used to
/// cross segments, so with two names alternating every segment boundary was straddled
/// by a chain and the lane's oldest segment was never released: `Full` after 927 puts.
/// Chains now stay in their segment; 100,000 delta puts stream through 32 segments.
#[test]
#[cfg_attr(miri, ignore = "100,000 puts")]
fn deltas_with_retention_stream_forever_in_a_small_pool() {
    let mut ram = Ram::new(4096 + 32 * 16384, 0);
    let mut pool = pool_with(&mut ram, 16384, false);
    pool.set_delta_options(DeltaOptions { chunk_bytes: 64, full_every: 16, max_percent: 50, ..Default::default() })
        .unwrap();
    let mut objs = [vec![0u8; 2048], vec![1u8; 2048]];
    let mut last = [0u64; 2];
    let (mut deltas, mut freed) = (0, 0);
    for i in 0..100_000usize {
        let k = i % 2;
        let at = (i * 64) % 2048;
        objs[k][at] = objs[k][at].wrapping_add(1);
        let name = [b'd', b'0' + k as u8];
        let put = pool
            .put(0, Object::new(&name, &objs[k]).delta(last[k], &[(at as u64, 1)]))
            .unwrap_or_else(|e| panic!("put {i}: {e} ({freed} segments freed so far)"));
        last[k] = put.version;
        deltas += put.delta as usize;
        freed += pool.reclaim(1).unwrap();
    }
    for k in 0..2 {
        assert_eq!(get(&pool, &[b'd', b'0' + k as u8], last[k]), objs[k]);
    }
    assert!(deltas > 80_000, "{deltas} of 100,000 puts were deltas");
    println!("100,000 puts, {deltas} deltas, {freed} segments freed");
}
