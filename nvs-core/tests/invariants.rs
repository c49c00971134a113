//! Nothing public panics on what a caller passes: lanes, ids, lengths and marks past
//! what a pool has are refused or answered as absent (the tests run with overflow
//! checks on). The invariant checks of the write path itself are unit tests in
//! `src/log` (they need to break a lane's state or the index to fire).

mod common;
use common::*;
use nvs_core::walk::Walker;
use nvs_core::Key;
use nvs_core::{ChunkHashes, Error, FormatOptions, HeapMemory, Object, PlanSlot, Pool, LANES_MAX, NAME_MAX};

/// Every lane a call can name, far past the pool's 4: refused as `NoSuchLane`.
#[test]
fn lanes_past_the_pool_are_refused() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    pool.put(0, Object::new("a", b"x")).unwrap();
    let mut buf = [0u8; 8];
    for lane in [4, LANES_MAX - 1, LANES_MAX, 300, u32::MAX] {
        let no_such = Err(Error::NoSuchLane { lane, lanes_max: 4 });
        assert_eq!(pool.put(lane, Object::new("a", b"y")).map(drop), no_such, "{lane}");
        assert_eq!(pool.put_batch(lane, &[Object::new("a", b"y")]).map(drop).map_err(Error::from), no_such);
        assert_eq!(pool.close_lane(lane), no_such);
        assert_eq!(pool.detach_lane(lane), no_such);
        assert_eq!(pool.lane(lane).map(drop), no_such);
        assert_eq!(pool.get(Key::on(lane, "a"), 1, &mut buf), no_such.map(|()| 0));
        assert_eq!(pool.latest(Key::on(lane, "a")), no_such.map(|()| 0));
        assert_eq!(pool.stat(Key::on(lane, "a"), 1).map(drop), no_such);
        assert_eq!(pool.meta(Key::on(lane, "a"), 1, &mut buf), no_such.map(|()| 0));
        assert_eq!(pool.versions(Key::on(lane, "a")).map(drop), no_such);
        assert_eq!(pool.lane_info(lane), None);
    }
    assert_eq!(pool.latest("a"), Ok(1), "the pool is unharmed");
}

/// A writer of some lanes beside other processes: a lane no pool can have (a set of
/// lanes holds `LANES_MAX`) is refused, never dropped from the set so that the pool
/// opens owning fewer lanes than asked.
#[test]
fn open_lanes_refuses_lanes_no_pool_has() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut o = FormatOptions::new(0x5ba2_ed00);
    o.segment_len = Some(4096);
    o.lanes_max = LANES_MAX;
    o.lane_names = true;
    drop(Pool::format(ram.region(), o, HeapMemory::new()).unwrap());
    for lane in [LANES_MAX, 300, u32::MAX] {
        let r = Pool::open_lanes(ram.region(), HeapMemory::new(), &[0, lane]);
        assert!(matches!(r, Err(Error::NoSuchLane { lane: l, lanes_max: LANES_MAX }) if l == lane), "{lane}: {r:?}");
    }
    let mut pool = Pool::open_lanes(ram.region(), HeapMemory::new(), &[0, LANES_MAX - 1]).unwrap();
    pool.put(LANES_MAX - 1, Object::new("a", b"x")).unwrap();
    assert_eq!(pool.put(1, Object::new("a", b"x")).map(drop), Err(Error::LaneNotOwned { lane: 1 }));
}

/// Ids, lengths and marks from the caller that no name, object or pool has.
#[test]
fn ids_and_lengths_past_the_pool_are_absent() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    pool.put(0, Object::new("a", b"x")).unwrap();
    let mut nb = [0u8; NAME_MAX];
    // Ids of another pool, of slots this one has and slots it has not.
    let mut other_ram = Ram::new(1 << 20, 0);
    let mut other = format(&mut other_ram, 4096);
    for name in ["x", "y", "z"] {
        other.put(0, Object::new(name, b"x")).unwrap();
    }
    for n in other.names() {
        assert_eq!(pool.name_bytes(n.id, &mut nb), b"", "{n:?}");
        assert_eq!(pool.versions_of(n.id).count(), 0);
    }
    for name_len in [NAME_MAX + 1, 1 << 40, usize::MAX] {
        assert_eq!(pool.max_object_bytes(name_len), 0, "no object has a name of {name_len} bytes");
    }
    assert!(pool.max_object_bytes(NAME_MAX) > 0);
    let mark = pool.index_mark();
    // Another pool's mark (its index holds as many objects or fewer) is refused.
    assert!(pool.objects_after(other.index_mark()).is_none());
    assert_eq!(pool.objects_after(mark).map(|o| o.count()), Some(0));
    let mut buf = [0u8; 8];
    for version in [2, u64::MAX] {
        assert_eq!(pool.get("a", version, &mut buf), Err(Error::NotFound));
    }
    assert_eq!(pool.put(0, Object::new("a", b"y").version(u64::MAX)).map(|p| p.version), Ok(u64::MAX));
    assert!(matches!(pool.put(0, Object::new("a", b"z")), Err(Error::VersionNotIncreasing { .. })));
    assert_eq!(pool.reclaim(u32::MAX), Ok(0));
    // A batch with fewer plan slots than objects, or none at all.
    let two = [Object::new("b", b"1"), Object::new("c", b"2")];
    for slots in [0, 1] {
        let mut plan = vec![PlanSlot::default(); slots];
        assert_eq!(pool.put_batch_in(0, &two, &mut plan), Err(Error::BatchSize { count: 2 }.into()));
    }
    assert_eq!(pool.put_batch_in(0, &[], &mut []), Err(Error::BatchSize { count: 0 }.into()));
    drop(pool);
    let media = ram.region();
    let w = Walker::new(&media).unwrap();
    assert!(w.segment_offset(u32::MAX) > w.segment_offset(w.segments_present() - 1));
    assert_eq!(ChunkHashes::<Vec<u64>>::words_for(u64::MAX, 1), usize::MAX);
    assert_eq!(ChunkHashes::<Vec<u64>>::words_for(4096, 0), 2 * 4096);
}

/// What the error of a broken invariant tells whoever meets it.
#[test]
fn an_invariant_error_says_what_was_committed() {
    let committed = Error::Invariant { what: "x", committed: true }.to_string();
    assert!(committed.contains("was committed (reopening the pool recovers it)"), "{committed}");
    let refused = Error::Invariant { what: "x", committed: false }.to_string();
    assert!(refused.contains("nothing was committed") && refused.contains("reopen"), "{refused}");
}
