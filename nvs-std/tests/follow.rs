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
