//! The simulation → analytics workflow of `examples/simulation.rs`: two ranks on their
//! own lanes, rank 1 starting 300 ms late, and a follower that must see every object —
//! not stop at the end of rank 0's stream (it once did: 150 of 300).

#[path = "../examples/simulation.rs"]
mod simulation;

use simulation::{analyse, simulate, ARRAYS, RANKS, STEPS};
use std::time::Duration;

#[test]
#[cfg_attr(miri, ignore = "threads, files and sleeps")]
fn a_follower_sees_every_rank_even_a_late_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.pool");
    let report = std::thread::scope(|s| {
        let analytics = s.spawn(|| analyse(&path, Duration::from_secs(20)));
        simulate(&path, Duration::from_millis(300)).expect("simulation");
        analytics.join().expect("analytics panicked").expect("analytics")
    });
    let want = RANKS as usize * STEPS as usize * ARRAYS.len();
    assert_eq!((report.objects, report.bad, report.ended), (want, 0, true), "{report:?}");
}

#[test]
#[cfg_attr(miri, ignore = "files")]
fn a_declared_lane_holds_the_stream_open() {
    use nvs_core::Object;
    use nvs_std::{CreateOptions, FilePool, Followed, Follower};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.pool");
    let mut pool = FilePool::create(&path, 4 << 20, &CreateOptions::default()).unwrap();
    pool.put(0, Object::new("a", b"x")).unwrap();
    pool.close_lane(0).unwrap();
    let wait = |f: &mut Follower| f.wait(Some(Duration::from_millis(200)), Duration::from_millis(1)).unwrap();
    // Lane 2 has not joined yet; a follower that knows it exists waits for it.
    let mut f = Follower::open(&path, None).unwrap();
    // A lane the pool cannot have (it has 64) would hold the stream open for ever: refused,
    // and none of the lanes given with it is declared.
    let mut g = Follower::open(&path, None).unwrap();
    let e = g.expect_lanes([2, 64]).unwrap_err();
    assert_eq!(e.core(), Some(nvs_core::Error::NoSuchLane { lane: 64, lanes_max: 64 }), "{e}");
    assert!(matches!(wait(&mut g), Followed::Objects(o) if o.len() == 1));
    assert_eq!(wait(&mut g), Followed::EndOfStream, "lane 2 was not declared");
    // A name no object can have would match nothing, for ever: refused.
    for (only, e) in [
        (vec![], nvs_core::Error::NameEmpty),
        (vec![b'n'; nvs_core::NAME_MAX + 1], nvs_core::Error::NameTooLong { len_bytes: nvs_core::NAME_MAX + 1 }),
    ] {
        assert_eq!(Follower::open(&path, Some(only)).err().and_then(|e| e.core()), Some(e));
    }
    assert!(Follower::open(&path, Some(vec![b'n'; nvs_core::NAME_MAX])).is_ok());
    f.expect_lanes([0, 2]).unwrap();
    assert!(matches!(wait(&mut f), Followed::Objects(o) if o.len() == 1));
    assert_eq!(wait(&mut f), Followed::Timeout);
    let mut plain = Follower::open(&path, None).unwrap();
    assert!(matches!(wait(&mut plain), Followed::Objects(_)));
    assert_eq!(wait(&mut plain), Followed::EndOfStream, "without the declaration, lane 0 was all");
    pool.put(2, Object::new("b", b"y")).unwrap();
    pool.close_lane(2).unwrap();
    assert!(matches!(wait(&mut f), Followed::Objects(o) if o.len() == 1));
    assert_eq!(wait(&mut f), Followed::EndOfStream);
}
