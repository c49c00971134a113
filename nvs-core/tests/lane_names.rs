//! Pools with lane names (`FormatOptions::lane_names`): every lane has a name space of
//! its own, versions count per (lane, name), reads name the lane or find the one lane
//! that holds a name; recovery, read-only opens, lane writers and retention agree. And
//! reads of `Key::on` in a pool's one name space.

mod common;
use common::*;
use nvs_core::Key;
use nvs_core::{Error, FormatOptions, HeapMemory, Object, Pool, Region};

fn format_lane_names(ram: &mut Ram) -> Pool<Region, HeapMemory> {
    let mut o = FormatOptions::new(0x1a4e_4a3e);
    o.segment_len = Some(4096);
    o.lanes_max = 4;
    o.lane_names = true;
    Pool::format(ram.region(), o, HeapMemory::new()).expect("format")
}

fn bytes(lane: u32, step: u64) -> Vec<u8> {
    vec![(lane * 16 + step as u32) as u8; 100 + 10 * lane as usize + step as usize]
}

/// Every read of `pool` agrees that lanes 0 and 1 each wrote `temperature` 1..=3 and
/// lane 1 alone `pressure` 1.
fn check_reads(pool: &Pool<Region, HeapMemory>) {
    assert!(pool.layout().lane_names);
    for lane in [0, 1] {
        for step in 1..=3 {
            let want = bytes(lane, step);
            let mut buf = vec![0u8; 200];
            assert_eq!(pool.get(Key::on(lane, "temperature"), step, &mut buf), Ok(want.len()), "lane {lane} v{step}");
            assert_eq!(buf[..want.len()], want[..]);
            let info = pool.stat(Key::on(lane, "temperature"), step).unwrap();
            assert_eq!((info.lane, info.len_bytes), (lane, want.len() as u64));
        }
        assert_eq!(pool.latest(Key::on(lane, "temperature")), Ok(3));
        let vs: Vec<u64> = pool.versions(Key::on(lane, "temperature")).unwrap().map(|i| i.version).collect();
        assert_eq!(vs, [1, 2, 3]);
    }
    assert_eq!(pool.latest(Key::on(2, "temperature")), Err(Error::NotFound), "a lane that never wrote it");
    assert_eq!(pool.latest(Key::on(9, "temperature")), Err(Error::NoSuchLane { lane: 9, lanes_max: 4 }));
    let mut buf = [0u8; 200];
    assert_eq!(pool.get("temperature", 1, &mut buf), Err(Error::AmbiguousName { lanes: 2 }));
    assert_eq!(pool.latest("temperature"), Err(Error::AmbiguousName { lanes: 2 }));
    assert!(matches!(pool.versions("temperature"), Err(Error::AmbiguousName { lanes: 2 })));
    // A name one lane holds reads by name alone.
    assert_eq!(pool.latest("pressure"), Ok(1));
    assert_eq!(pool.get("pressure", 1, &mut buf), Ok(3));
    assert_eq!(pool.get(Key::on(0, "pressure"), 1, &mut buf), Err(Error::NotFound));
    let mut names: Vec<(Vec<u8>, Option<u32>, u64)> = pool
        .names()
        .map(|n| {
            let mut nb = [0u8; nvs_core::NAME_MAX];
            (pool.name_bytes(n.id, &mut nb).to_vec(), n.lane, n.latest)
        })
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            (b"pressure".to_vec(), Some(1), 1),
            (b"temperature".to_vec(), Some(0), 3),
            (b"temperature".to_vec(), Some(1), 3)
        ]
    );
}

#[test]
fn every_lane_counts_its_own_versions_of_a_name() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format_lane_names(&mut ram);
    for step in 1..=3 {
        for lane in [0, 1] {
            let put = pool.put(lane, Object::new("temperature", &bytes(lane, step))).unwrap();
            assert_eq!(put.version, step, "lane {lane}");
        }
    }
    pool.put(1, Object::new("pressure", b"abc")).unwrap();
    check_reads(&pool);
    drop(pool);
    // Recovery gives the same (no duplicate versions across lanes), and so does a
    // read-only open; the versions go on per lane.
    let pool = open(&mut ram).expect("recovery");
    check_reads(&pool);
    drop(pool);
    let pool = Pool::open_read_only(ram.region(), HeapMemory::new()).unwrap();
    check_reads(&pool);
    drop(pool);
    let mut pool = open(&mut ram).unwrap();
    assert_eq!(pool.put(0, Object::new("temperature", b"four")).unwrap().version, 4);
    assert_eq!(pool.latest(Key::on(1, "temperature")), Ok(3));
}

#[test]
fn lane_writers_on_threads_put_one_name_each_in_their_own_space() {
    let mut ram = Ram::new(1 << 20, 0);
    let pool = format_lane_names(&mut ram);
    std::thread::scope(|t| {
        for lane in 0..4u32 {
            let pool = &pool;
            t.spawn(move || {
                let mut w = pool.lane(lane).unwrap();
                for step in 1..=20u64 {
                    assert_eq!(w.put(Object::new("temperature", &bytes(lane, step))).unwrap().version, step);
                }
            });
        }
    });
    drop(pool);
    let pool = open(&mut ram).unwrap();
    for lane in 0..4 {
        assert_eq!(pool.latest(Key::on(lane, "temperature")), Ok(20));
        let mut buf = [0u8; 200];
        let n = pool.get(Key::on(lane, "temperature"), 7, &mut buf).unwrap();
        assert_eq!(buf[..n], bytes(lane, 7)[..]);
    }
}

#[test]
fn retention_keeps_the_newest_versions_of_every_lanes_name() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format_lane_names(&mut ram);
    for step in 1..=60 {
        for lane in [0, 1] {
            pool.put(lane, Object::new("temperature", &bytes(lane, step % 8))).unwrap();
        }
    }
    assert!(pool.reclaim(2).unwrap() > 0, "something to release");
    for lane in [0, 1] {
        assert_eq!(pool.latest(Key::on(lane, "temperature")), Ok(60));
        assert!(pool.stat(Key::on(lane, "temperature"), 59).is_ok());
        assert_eq!(pool.stat(Key::on(lane, "temperature"), 1), Err(Error::NotFound));
    }
    drop(pool);
    let pool = open(&mut ram).unwrap();
    assert_eq!(pool.latest(Key::on(0, "temperature")), Ok(60));
    assert_eq!(pool.latest(Key::on(1, "temperature")), Ok(60));
}

#[test]
fn in_one_name_space_a_lane_reads_only_what_it_wrote() {
    let mut ram = Ram::new(1 << 20, 0);
    let mut pool = format(&mut ram, 4096);
    assert!(!pool.layout().lane_names);
    assert_eq!(pool.put(0, Object::new("t", b"zero")).unwrap().version, 1);
    assert_eq!(pool.put(1, Object::new("t", b"one")).unwrap().version, 2);
    assert_eq!(pool.put(0, Object::new("t", b"zero again")).unwrap().version, 3);
    let mut buf = [0u8; 16];
    assert_eq!(pool.get(Key::on(1, "t"), 2, &mut buf), Ok(3));
    assert_eq!(pool.get(Key::on(1, "t"), 1, &mut buf), Err(Error::NotFound));
    assert_eq!(pool.latest(Key::on(0, "t")), Ok(3));
    assert_eq!(pool.latest(Key::on(1, "t")), Ok(2));
    assert_eq!(pool.latest(Key::on(2, "t")), Err(Error::NotFound));
    let v0: Vec<u64> = pool.versions(Key::on(0, "t")).unwrap().map(|i| i.version).collect();
    assert_eq!(v0, [1, 3]);
    assert_eq!(pool.latest("t"), Ok(3));
    assert!(pool.names().all(|n| n.lane.is_none()));
}
