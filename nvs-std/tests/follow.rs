//! A follower in the same process as its writer: it reports each committed object once,
//! in lane order, sees the end of the stream when every written lane is closed, and
//! "writer gone" when the writer let go of the pool without closing.

use nvs_core::Object;
use nvs_std::{Access, CreateOptions, FilePool, Followed, Follower};
use std::time::Duration;

fn objects(f: Followed) -> Vec<(u32, Vec<u8>, u64)> {
    match f {
        Followed::Objects(o) => o.into_iter().map(|c| (c.lane, c.name, c.version)).collect(),
        other => panic!("expected objects, got {other:?}"),
    }
}

#[test]
fn follower_sees_objects_end_of_stream_and_writer_gone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let mut w = FilePool::create(&path, 8 << 20, &CreateOptions::default()).unwrap();
    let mut f = Follower::open(&path, None).unwrap();
    let tick = Duration::from_millis(1);
    assert_eq!(f.wait(Some(Duration::from_millis(20)), tick).unwrap(), Followed::Timeout, "a live writer, nothing yet");
    w.put(0, Object::new(b"a", b"1")).unwrap();
    w.put(1, Object::vectored(b"b", &[b"2"])).unwrap();
    w.put(0, Object::new(b"a", b"3")).unwrap();
    assert_eq!(
        objects(f.wait(None, tick).unwrap()),
        vec![(0, b"a".to_vec(), 1), (0, b"a".to_vec(), 2), (1, b"b".to_vec(), 1)]
    );
    assert_eq!(f.wait(Some(Duration::from_millis(10)), tick).unwrap(), Followed::Timeout, "reported once");
    w.close_lane(0).unwrap();
    assert_eq!(f.wait(Some(Duration::from_millis(10)), tick).unwrap(), Followed::Timeout, "lane 1 still open");
    w.put(1, Object::vectored(b"b", &[b"4"])).unwrap();
    w.close_lane(1).unwrap();
    assert_eq!(objects(f.wait(None, tick).unwrap()), vec![(1, b"b".to_vec(), 2)]);
    assert_eq!(f.wait(None, tick).unwrap(), Followed::EndOfStream);
    // A new session reopens lane 0, then the writer goes away without closing it.
    w.put(0, Object::new(b"a", b"5")).unwrap();
    assert_eq!(objects(f.wait(None, tick).unwrap()), vec![(0, b"a".to_vec(), 3)]);
    assert!(f.pool().writer_alive());
    drop(w);
    assert_eq!(f.wait(None, tick).unwrap(), Followed::WriterGone);
    assert_eq!(f.pool().get_vec(b"a", 3).unwrap(), b"5");
    let r = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert!(!r.writer_alive(), "a reader is not a writer");
}

/// Many polls, most of them catching up (only what the refresh added is looked at), some
/// after a reclaim (the index rebuilt: everything is looked at again): every object is
/// reported exactly once, in lane order within each poll, with a name filter too.
#[test]
fn follower_reports_each_object_once_across_catch_ups_and_recoveries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let mut w = FilePool::create(&path, 1 << 20, &CreateOptions::new().segment_len(4096).lanes_max(3)).unwrap();
    let mut all = Follower::open(&path, None).unwrap();
    let mut only = Follower::open(&path, Some(b"s1".to_vec())).unwrap();
    let (mut put, mut seen, mut seen_only) = (Vec::new(), Vec::new(), Vec::new());
    let mut x = 7u64;
    for i in 0..600u64 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let lane = (x >> 33) as u32 % 3;
        let name = format!("s{}", (x >> 40) % 4);
        let v = w.put(lane, Object::new(&name, &vec![i as u8; (x >> 50) as usize % 700])).unwrap().version;
        put.push((lane, name.into_bytes(), v));
        if i % 97 == 96 {
            w.reclaim(2).unwrap();
        }
        if (x >> 20).is_multiple_of(3) {
            let got = all.poll().unwrap();
            assert!(got.windows(2).all(|p| (p[0].lane, p[0].seq) <= (p[1].lane, p[1].seq)), "lane order");
            seen.extend(got.into_iter().map(|c| (c.lane, c.name, c.version)));
            seen_only.extend(only.poll().unwrap().into_iter().map(|c| (c.lane, c.name, c.version)));
        }
    }
    seen.extend(all.poll().unwrap().into_iter().map(|c| (c.lane, c.name, c.version)));
    seen_only.extend(only.poll().unwrap().into_iter().map(|c| (c.lane, c.name, c.version)));
    // Objects released by a reclaim before a poll saw them are never reported.
    let mut seen_sorted = seen.clone();
    seen_sorted.sort();
    seen_sorted.dedup();
    assert_eq!(seen_sorted.len(), seen.len(), "an object was reported twice");
    let mut expected = put.clone();
    expected.sort();
    assert!(seen_sorted.iter().all(|o| expected.binary_search(o).is_ok()), "reported an object never put");
    let last: Vec<_> = put.iter().rev().take(50).collect();
    assert!(last.iter().all(|o| seen.contains(o)), "the newest objects were not all reported");
    let want_only: Vec<_> = seen.iter().filter(|o| o.1 == b"s1").cloned().collect();
    assert_eq!(seen_only, want_only, "the name filter");
}

/// A follower waiting on a pool whose writers detached (it waits for the next writer)
/// ends with `Error::Replaced` once the pool's path names another file and no writer
/// holds the old one: it waited for ever, on a file no writer could open again. While a
/// writer still holds the old file, or the path still names it, it keeps waiting.
#[test]
fn follower_of_a_replaced_pool_file_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let tick = Duration::from_millis(1);
    let short = Some(Duration::from_millis(20));
    let mut w = FilePool::create(&path, 8 << 20, &CreateOptions::default()).unwrap();
    w.put(0, Object::new(b"a", b"1")).unwrap();
    let mut f = Follower::open(&path, None).unwrap();
    assert_eq!(objects(f.wait(None, tick).unwrap()), vec![(0, b"a".to_vec(), 1)]);
    // The path now names a new pool, but the old file's writer is alive: it may write on.
    std::fs::remove_file(&path).unwrap();
    let mut new = FilePool::create(&path, 8 << 20, &CreateOptions::default()).unwrap();
    new.put(0, Object::new(b"b", b"other")).unwrap();
    assert_eq!(f.wait(short, tick).unwrap(), Followed::Timeout, "the old file's writer is alive");
    w.put(0, Object::new(b"a", b"2")).unwrap();
    assert_eq!(objects(f.wait(None, tick).unwrap()), vec![(0, b"a".to_vec(), 2)]);
    // It detaches (followers wait for a next writer, which can only open the new file).
    w.detach().unwrap();
    drop(w);
    let e = f.wait(Some(Duration::from_secs(10)), tick).unwrap_err();
    assert!(matches!(e, nvs_std::Error::Replaced { .. }), "{e}");
    assert!(e.to_string().contains("removed, moved or replaced"), "{e}");
    // A detached pool still at its path: the follower waits for the next writer.
    new.detach().unwrap();
    drop(new);
    let mut f = Follower::open(&path, None).unwrap();
    assert_eq!(objects(f.wait(None, tick).unwrap()), vec![(0, b"b".to_vec(), 1)]);
    assert_eq!(f.wait(short, tick).unwrap(), Followed::Timeout, "a writer may still come");
}
