//! Many writers: threads each with their own lane put concurrently (names of their own
//! and one shared name), a reader reads alongside; every acknowledged object is there,
//! byte-exact, with distinct increasing versions, in memory and after reopen.

mod common;
use common::*;
use nvs_core::{Error, HeapMemory, Object, Pool};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

fn payload(lane: u32, i: u32) -> Vec<u8> {
    let n = (i as usize * 37 + lane as usize * 11) % 700;
    (0..n).map(|k| (k as u32 ^ i ^ (lane << 4)) as u8).collect()
}

#[test]
#[cfg_attr(miri, ignore)]
fn lanes_write_concurrently_and_a_reader_follows() {
    let mut ram = Ram::new(8 << 20, 0x33);
    let pool = format(&mut ram, 64 << 10);
    const PUTS: u32 = 1500;
    let done = AtomicBool::new(false);
    // The reader's reads so far: each writer waits for one before its last put, so the
    // reader surely reads while writers write, however the threads are scheduled.
    let reads = AtomicU32::new(0);
    let shared_versions = std::thread::scope(|s| {
        let writers: Vec<_> = (0..3u32)
            .map(|lane| {
                let (pool, reads) = (&pool, &reads);
                s.spawn(move || {
                    let mut w = pool.lane(lane).unwrap();
                    assert_eq!(pool.lane(lane).err(), Some(Error::LaneBusy { lane }));
                    let mut shared = Vec::new();
                    for i in 0..PUTS {
                        while i == PUTS - 1 && reads.load(Ordering::Relaxed) == 0 {
                            std::thread::yield_now();
                        }
                        let own = format!("lane{lane}");
                        assert_eq!(
                            w.put(Object::new(own.as_bytes(), &payload(lane, i))).unwrap().version,
                            i as u64 + 1
                        );
                        if i % 10 == 0 {
                            shared.push((w.put(Object::new(b"common", &payload(lane, i))).unwrap().version, lane, i));
                        }
                    }
                    shared
                })
            })
            .collect();
        let reader = s.spawn(|| {
            let mut buf = vec![0u8; 1024];
            while !done.load(Ordering::Relaxed) {
                for lane in 0..3u32 {
                    if let Ok(v) = pool.latest(format!("lane{lane}").as_bytes()) {
                        let n = pool.get(format!("lane{lane}").as_bytes(), v, &mut buf).unwrap();
                        assert_eq!(&buf[..n], &payload(lane, v as u32 - 1)[..], "reader saw lane {lane} v{v}");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        let shared: Vec<_> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap();
        assert!(reads.load(Ordering::Relaxed) > 0);
        shared
    });
    let mut vs: Vec<u64> = shared_versions.iter().map(|x| x.0).collect();
    vs.sort();
    vs.dedup();
    assert_eq!(vs.len(), shared_versions.len(), "two lanes took the same version of a shared name");
    let check = |pool: &Pool<nvs_core::Region, HeapMemory>| {
        let mut buf = vec![0u8; 1024];
        for lane in 0..3u32 {
            for i in 0..PUTS {
                let n = pool.get(format!("lane{lane}").as_bytes(), i as u64 + 1, &mut buf).unwrap();
                assert_eq!(&buf[..n], &payload(lane, i)[..]);
            }
        }
        for &(v, lane, i) in &shared_versions {
            let n = pool.get(b"common", v, &mut buf).unwrap();
            assert_eq!(&buf[..n], &payload(lane, i)[..]);
            assert_eq!(pool.stat(b"common", v).unwrap().lane, lane);
        }
        let listed: Vec<u64> = pool.versions(b"common").unwrap().map(|i| i.version).collect();
        assert_eq!(listed, vs, "versions listed in order");
    };
    check(&pool);
    drop(pool);
    check(&open(&mut ram).unwrap());
}

/// Every lane of a pool is there and no other, whatever its lane count (1, 3, the most,
/// 256): each takes a put, as a `&mut` put and as a lane writer, and reports it after a
/// reopen, read-only too; the lane past the last is refused everywhere. A pool keeps its
/// lanes on the heap, as many as it has, so it is small to make and to move (an open
/// used to move about 20 KB of lane state several times).
#[test]
#[cfg_attr(miri, ignore)]
fn every_lane_and_no_other() {
    assert!(std::mem::size_of::<Pool<nvs_core::Region, HeapMemory>>() <= 2048, "lane state inline again?");
    for lanes in [1u32, 3, nvs_core::LANES_MAX] {
        let mut ram = Ram::new(4096 + 4096 * 2 * lanes as usize, 0x5a);
        let mut o = nvs_core::FormatOptions::new(0x1a7e5 + lanes as u64);
        o.segment_len = Some(4096);
        o.lanes_max = lanes;
        let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
        for lane in 0..lanes {
            pool.put(lane, Object::new(b"a", &lane.to_le_bytes())).unwrap();
            pool.lane(lane).unwrap().put(Object::new(b"a", &lane.to_le_bytes())).unwrap();
        }
        let past = Error::NoSuchLane { lane: lanes, lanes_max: lanes };
        assert_eq!(pool.put(lanes, Object::new(b"a", b"x")).err(), Some(past));
        assert_eq!(pool.lane(lanes).err(), Some(past));
        drop(pool);
        for pool in [open(&mut ram).unwrap(), Pool::open_read_only(ram.region(), HeapMemory::new()).unwrap()] {
            for lane in 0..lanes {
                assert_eq!(pool.lane_info(lane).map(|i| i.units), Some(2), "lane {lane} of {lanes}");
            }
            assert_eq!(pool.lane_info(lanes), None);
            assert_eq!(pool.stats().lanes, lanes);
        }
    }
}
