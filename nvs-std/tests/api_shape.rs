//! The API's promises that are easy to lose in a refactor: lanes taken from a `FilePool`
//! pass its durability check, listings do not hold the index lock (a put from the same
//! thread while iterating used to spin forever), and errors chain to their cause.

use nvs_core::Object;
use nvs_std::{Access, CreateOptions, Durability, Error, FilePool};
use std::sync::mpsc;
use std::time::Duration;

fn msync_pool(dir: &tempfile::TempDir) -> FilePool {
    let opts = CreateOptions { durability: Some(Durability::Msync), ..CreateOptions::default() };
    FilePool::create(dir.path().join("p.pool"), 4 << 20, &opts).expect("create")
}

/// Run `f` on another thread; fail (instead of hanging the suite) if it takes too long.
fn within(secs: u64, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("did not finish: a lock held across the loop?");
}

#[test]
fn a_lane_put_after_a_failed_msync_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let pool = msync_pool(&dir);
    let mut lane = pool.lane(3).expect("lane");
    assert_eq!(lane.put(Object::new("a", b"one")).expect("put").version, 1);
    pool.media().fail_next_sync();
    let e = lane.put(Object::new("a", b"two")).expect_err("the msync failed: not durable");
    assert!(matches!(e, Error::Sync { .. }), "{e}");
    // Not durable, so not visible: the pool's readers never see version 2.
    assert_eq!(pool.latest("a").expect("latest"), 1);
    assert!(pool.get_vec("a", 2).is_err(), "a put whose msync failed is not served");
    // And every later write, on any lane or through the pool itself.
    assert!(matches!(lane.put(Object::new("a", b"three")), Err(Error::Sync { .. })));
    drop(lane);
    assert!(matches!(pool.lane(4).map(|_| ()), Err(Error::Sync { .. })));
    let mut pool = pool;
    assert!(matches!(pool.put(0, Object::new("b", b"x")), Err(Error::Sync { .. })));
    assert!(matches!(pool.reclaim(1), Err(Error::Sync { .. })));
}

#[test]
fn a_pool_put_after_a_failed_msync_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut pool = msync_pool(&dir);
    pool.put(0, Object::new("a", b"one")).expect("put");
    pool.media().fail_next_sync();
    assert!(matches!(pool.put(0, Object::new("a", b"two")), Err(Error::Sync { .. })));
    assert_eq!(pool.latest("a").expect("latest"), 1, "a put whose msync failed is not served");
    assert!(matches!(pool.close_lane(0), Err(Error::Sync { .. })));
}

#[test]
fn a_new_name_whose_msync_failed_is_not_served() {
    // A put that creates a name holds the index's lock throughout (and, where fences
    // cannot fail, lets the index learn the unit while it drains): here it must not.
    let dir = tempfile::tempdir().unwrap();
    let mut pool = msync_pool(&dir);
    pool.put(0, Object::new("a", b"one")).expect("put");
    pool.media().fail_next_sync();
    assert!(matches!(pool.put(0, Object::new("fresh", b"x")), Err(Error::Sync { .. })));
    assert!(pool.latest("fresh").is_err(), "a put whose msync failed is not served");
    assert!(pool.names().all(|n| n.latest == 1 && n.versions == 1), "only a's version 1 is listed");
}

#[test]
fn reclaim_is_reachable_and_keeps_the_latest() {
    let dir = tempfile::tempdir().unwrap();
    let opts = CreateOptions { segment_len: Some(4096), lanes_max: 1, ..CreateOptions::default() };
    let mut pool = FilePool::create(dir.path().join("r.pool"), 1 << 20, &opts).expect("create");
    let bytes = [7u8; 1500];
    for _ in 0..40 {
        pool.put(0, Object::new("x", &bytes)).expect("put");
    }
    let used = pool.stats().segments_used;
    assert!(pool.reclaim(1).expect("reclaim") > 0);
    assert!(pool.stats().segments_used < used);
    assert_eq!(pool.get_vec("x", 40).expect("latest kept"), bytes);
}

#[test]
fn putting_while_listing_versions_and_names_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let mut pool = FilePool::create(dir.path().join("l.pool"), 4 << 20, &CreateOptions::default()).expect("create");
    for i in 0..3u8 {
        pool.put(0, Object::new("a", &[i])).expect("put");
    }
    within(20, move || {
        let mut lane = pool.lane(1).expect("lane");
        let mut seen = 0;
        for v in pool.versions("a").expect("versions") {
            lane.put(Object::new("a", &[v.version as u8])).expect("put while listing versions");
            seen += 1;
        }
        // The listing is of the versions there were when it started.
        assert_eq!(seen, 3);
        let mut names = 0;
        for n in pool.names() {
            lane.put(Object::new("b", &[n.versions as u8])).expect("put while listing names");
            names += 1;
        }
        assert_eq!(names, 1);
        drop(lane);
        assert_eq!(pool.latest("a").unwrap(), 6);
        assert_eq!(pool.latest("b").unwrap(), 1);
    });
}

#[test]
fn errors_chain_to_their_core_cause() {
    use std::error::Error as _;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.pool");
    FilePool::create(&path, 1 << 20, &CreateOptions::default()).expect("create");
    let pool = FilePool::open(&path, Access::ReadOnly).expect("open");
    let e = pool.get_vec("nothing", 1).expect_err("no such object");
    let source = e.source().expect("a source").downcast_ref::<nvs_core::Error>().copied();
    assert_eq!(source, Some(nvs_core::Error::NotFound));
    // A name no put could take is refused as such, not as "not found".
    let long = [b'n'; 256];
    assert_eq!(
        pool.latest(&long[..]).expect_err("too long").core(),
        Some(nvs_core::Error::NameTooLong { len_bytes: 256 })
    );
}

#[test]
fn a_delta_whose_ranges_miss_a_change_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut pool = FilePool::create(dir.path().join("d.pool"), 4 << 20, &CreateOptions::default()).expect("create");
    pool.set_delta_check(true); // the default of debug builds only
    let v1 = vec![1u8; 16 << 10];
    pool.put(0, Object::new("g", &v1)).expect("put");
    let mut v2 = v1.clone();
    v2[10] = 9; // a change the ranges below do not list
    v2[12_000] = 9;
    let ranges = [(12_000u64, 1u64)];
    let e = pool.put(0, Object::new("g", &v2).delta(1, &ranges)).expect_err("the ranges missed byte 10");
    assert!(matches!(e, Error::DeltaMismatch { offset: 10, parent: 1, .. }), "{e}");
    assert_eq!(pool.latest("g").unwrap(), 1, "nothing was committed");
    // With the check off the caller's promise is trusted (what release builds do).
    pool.set_delta_check(false);
    assert!(pool.put(0, Object::new("g", &v2).delta(1, &ranges)).expect("put").delta);
    assert_ne!(pool.get_vec("g", 2).unwrap(), v2, "the missed byte is not stored: why the check exists");
}

#[test]
#[cfg_attr(miri, ignore = "page tracking")]
fn a_tracked_put_that_fails_keeps_its_ranges_for_the_next() {
    use nvs_std::dirty::TrackedBuf;
    let dir = tempfile::tempdir().unwrap();
    let mut pool = FilePool::create(dir.path().join("t.pool"), 8 << 20, &CreateOptions::default()).expect("create");
    let mut buf = TrackedBuf::best(64 << 10).expect("tracked memory");
    buf[..].iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
    let first = pool.put_tracked(0, b"grid", &mut buf).expect("first put");
    assert!(!first.delta, "the first tracked put is a full version");
    buf[3 * 4096] = 0xAA;
    // Refused (no such lane): its ranges must not be lost.
    assert!(pool.put_tracked(999, b"grid", &mut buf).is_err());
    buf[9 * 4096 + 7] = 0xBB;
    let put = pool.put_tracked(0, b"grid", &mut buf).expect("second put");
    assert!(put.delta && put.stored_bytes < 4 * 4096, "{put:?}: a delta of the two written pages");
    assert_eq!(pool.get_vec("grid", put.version).unwrap(), &buf[..], "both writes are in the version");
}

#[test]
#[cfg_attr(miri, ignore = "page tracking")]
fn a_tracked_batch_commits_each_buffer_as_a_delta_of_its_written_pages() {
    use nvs_std::dirty::TrackedBuf;
    let dir = tempfile::tempdir().unwrap();
    let mut pool = FilePool::create(dir.path().join("b.pool"), 8 << 20, &CreateOptions::default()).expect("create");
    let mut a = TrackedBuf::best(64 << 10).expect("tracked memory");
    let mut b = TrackedBuf::best(16 << 10).expect("tracked memory");
    a[100] = 1;
    b[200] = 2;
    let v = pool.put_batch_tracked(0, &mut [(b"a", &mut a), (b"b", &mut b)]).expect("first batch");
    assert_eq!(v, [1, 1]);
    a[5 * 4096] = 3; // one page of a; nothing of b
    let v = pool.put_batch_tracked(0, &mut [(b"a", &mut a), (b"b", &mut b)]).expect("second batch");
    assert_eq!(v, [2, 2]);
    let (sa, sb) = (pool.stat("a", 2).unwrap(), pool.stat("b", 2).unwrap());
    assert!(sa.depth == 1 && sa.stored_bytes < 2 * 4096, "{sa:?}");
    assert!(sb.stored_bytes < 4096, "{sb:?}: b was not written");
    assert_eq!(pool.get_vec("a", 2).unwrap(), &a[..]);
    assert_eq!(pool.get_vec("b", 2).unwrap(), &b[..]);
    assert_eq!(pool.get_vec("a", 1).unwrap()[5 * 4096], 0, "version 1 is as it was");
}

#[test]
fn close_ends_every_joined_lane_and_the_builder_sets_what_it_says() {
    use nvs_std::{Followed, Follower};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.pool");
    let opts = CreateOptions::new().lanes_max(4).segment_len(64 << 10).payload_checksum(true);
    let mut pool = FilePool::create(&path, 4 << 20, &opts).expect("create");
    let layout = pool.layout();
    assert_eq!((layout.lanes_max, layout.segment_len, layout.payload_checksum), (4, 64 << 10, true));
    pool.put(0, Object::new("a", b"x")).expect("put");
    drop(pool.lane(2).expect("lane 2 joins, writes nothing"));
    assert!(format!("{pool:?}").contains("c.pool"));
    pool.close().expect("close");
    let mut f = Follower::open(&path, None).expect("follow");
    let wait = Some(Duration::from_secs(2));
    assert!(matches!(f.wait(wait, Duration::from_millis(1)).unwrap(), Followed::Objects(o) if o.len() == 1));
    assert_eq!(f.wait(wait, Duration::from_millis(1)).unwrap(), Followed::EndOfStream, "lanes 0 and 2 closed");
    assert!(format!("{f:?}").starts_with("Follower"));
}

#[test]
fn with_bytes_lends_full_versions_and_rebuilds_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let mut pool = FilePool::create(dir.path().join("w.pool"), 8 << 20, &CreateOptions::default()).expect("create");
    let mut grid = vec![3u8; 64 << 10];
    pool.put(0, Object::new("g", &grid)).expect("put");
    grid[5] = 4;
    assert!(pool.put(0, Object::new("g", &grid).delta(1, &[(5u64, 1u64)])).expect("delta").delta);
    assert_eq!(pool.with_bytes("g", 1, |b| b[5]).expect("lent"), 3);
    assert_eq!(pool.with_bytes("g", 2, |b| (b.len(), b[5])).expect("rebuilt"), (64 << 10, 4));
    let e = pool.with_bytes("g", 3, |b| b.len()).expect_err("no version 3");
    assert_eq!(e.to_string(), format!("{}: no version 3 of g", dir.path().join("w.pool").display()));
}

/// Byte 0 of `f` locked (`kind`) with a classic POSIX record lock, as `lockf` or
/// Python's `fcntl.lockf` take it; true if granted.
fn posix_lock_byte0(f: &std::fs::File, kind: libc::c_int) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: plain data, then filled in; the descriptor is open for the call.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_len = 1;
    // SAFETY: `fl` is a valid `struct flock`; the descriptor is open for the call.
    unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &mut fl) == 0 }
}

#[test]
fn a_reader_can_neither_take_the_writer_role_nor_fake_its_death() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.pool");
    drop(FilePool::create(&path, 1 << 20, &CreateOptions::default()).expect("create"));
    // `flock -x POOL` by someone who can only read it: writers are not kept out.
    let reader = std::fs::File::open(&path).unwrap();
    // SAFETY: a plain flock call on an open descriptor.
    assert_eq!(unsafe { libc::flock(reader.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) }, 0);
    let writer = FilePool::open(&path, Access::ReadWrite).expect("a reader's flock does not block the writer");
    let follower = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert!(follower.writer_alive());
    // A read lock on byte 0 cannot be taken beside the writer's lock, so it cannot hide it.
    assert!(!posix_lock_byte0(&reader, libc::F_RDLCK));
    assert!(follower.writer_alive());
    drop(writer);
    assert!(!follower.writer_alive());
    // Taken first, a read lock keeps a writer out — the writer refuses (it used to write
    // without its liveness lock, and followers called it dead).
    assert!(posix_lock_byte0(&reader, libc::F_RDLCK));
    assert!(matches!(FilePool::open(&path, Access::ReadWrite), Err(Error::Locked { .. })));
}

/// Issue 13, defect 2(b): a writer never stores into a hole of its pool file (a sparse
/// copy) it has not given blocks first (a store into a hole of a full file system was a
/// SIGBUS death mid-put): its lanes' open segments at open, each segment it claims.
#[test]
fn a_writer_gives_blocks_to_the_holes_of_a_sparse_pool_before_storing_there() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.pool");
    let mut pool = FilePool::create(&path, 4 << 20, &CreateOptions::default()).expect("create");
    pool.put(0, Object::new("keep", b"kept")).expect("put");
    drop(pool);
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    // SAFETY: a plain system call on an open descriptor: a hole in the data area.
    let rc = unsafe {
        libc::fallocate(f.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, 1 << 20, 2 << 20)
    };
    if rc != 0 {
        eprintln!("skipped: this file system cannot punch holes");
        return;
    }
    let holes = |p: &std::path::Path| {
        let meta = std::fs::metadata(p).unwrap();
        meta.len().saturating_sub(meta.blocks() * 512)
    };
    assert!(holes(&path) >= 1 << 20, "the file is sparse now");
    let mut w = FilePool::open(&path, Access::ReadWrite).expect("a writer on a sparse pool");
    assert_eq!(w.get_vec("keep", 1).unwrap(), b"kept");
    // Puts until the pool is full claim every free segment, the holes' among them: each
    // gets its blocks at its claim.
    let obj = |v: u64| vec![v as u8; 100_000];
    let mut v = 0;
    let full = loop {
        match w.put(0, Object::new("new", &obj(v + 1))) {
            Ok(_) => v += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(full.core(), Some(nvs_core::Error::Full), "{full}");
    assert_eq!(holes(&path), 0, "every segment claimed has its blocks");
    assert!(v >= 30, "{v}");
    for k in 1..=v {
        assert!(w.get_vec("new", k).unwrap() == obj(k), "v{k}");
    }
}

/// One error type: `?` takes nvs-core's and the system's errors into `nvs_std::Error`.
#[test]
#[cfg_attr(miri, ignore = "page tracking")]
fn question_mark_works_across_the_layers() {
    fn run() -> nvs_std::Result<u64> {
        let buf = nvs_std::dirty::TrackedBuf::best(4096)?; // io::Error
        nvs_core::FormatOptions::new(1).geometry(1 << 20)?; // nvs_core::Error
        let opts = nvs_core::DeltaOptions { chunk_bytes: 3, ..nvs_core::DeltaOptions::default() };
        let dir = tempfile::tempdir()?;
        let mut pool = FilePool::create(dir.path().join("q.pool"), 1 << 20, &CreateOptions::default())?;
        pool.set_delta_options(opts)?; // a core refusal, with the pool's path
        Ok(buf.len() as u64)
    }
    let e = run().expect_err("chunk of 3 bytes is refused");
    assert!(matches!(e.core(), Some(nvs_core::Error::DeltaOptions { .. })), "{e}");
}

/// Format 2 through FilePool: an object of many segments and a batch of 10,000 objects
/// (one unit) put, reopened and read back byte-exact, on a lane writer too.
#[test]
#[cfg_attr(miri, ignore)]
fn large_objects_and_large_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("large.pool");
    let mut p = FilePool::create(&path, 64 << 20, &CreateOptions::new().segment_len(256 << 10)).unwrap();
    let big: Vec<u8> = (0..6_000_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
    assert_eq!(p.put(0, Object::new("big", &big)).unwrap().version, 1);
    let names: Vec<String> = (0..10_000).map(|i| format!("b{i}")).collect();
    let objs: Vec<Object> = names.iter().map(|n| Object::new(n.as_bytes(), n.as_bytes())).collect();
    let units = p.stats().units;
    assert_eq!(p.put_batch(1, &objs).unwrap(), vec![1u64; 10_000]);
    assert_eq!(p.stats().units, units + 1);
    let v2 = p.lane(2).unwrap().put_batch(&objs).unwrap();
    assert_eq!(v2, vec![2u64; 10_000], "a lane writer's batch of 10,000");
    p.close().unwrap();
    let p = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert!(p.get_vec("big", 1).unwrap() == big);
    for n in names.iter().step_by(97) {
        assert_eq!(p.get_vec(n, 2).unwrap(), n.as_bytes());
    }
    assert_eq!(p.verify().unwrap(), 20_001);
}

/// A lane that cannot end its stream on close (its span filled to the last byte, no
/// segment free) does not keep another lane's from ending: close (and detach) report
/// `Full` after ending (detaching) every stream they can, and every object stays.
#[test]
#[cfg_attr(miri, ignore)]
fn close_ends_every_stream_it_can() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.pool");
    let mut p = FilePool::create(&path, 8 << 20, &CreateOptions::new().segment_len(256 << 10)).unwrap();
    assert_eq!(p.put(1, Object::new("small", b"one")).unwrap().version, 1);
    let layout = p.layout();
    let free = u64::from(p.free_segments());
    // Span header line, unit header line, object header line, payload: the whole span.
    let fill = vec![9u8; (free * layout.segment_len - 3 * 64) as usize];
    assert_eq!(p.put(0, Object::new("fill", &fill)).unwrap().version, 1);
    let e = p.detach().expect_err("lane 0 has no room for a detach marker");
    assert!(matches!(e.core(), Some(nvs_core::Error::Full)), "{e}");
    assert!(p.lane_info(1).is_some_and(|i| i.detached), "lane 1 detached");
    assert_eq!(p.put(1, Object::new("small", b"two")).unwrap().version, 2);
    let e = p.close().expect_err("lane 0 has no room for its end-of-stream marker");
    assert!(matches!(e.core(), Some(nvs_core::Error::Full)), "{e}");
    let p = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert!(p.lane_info(1).is_some_and(|i| i.closed), "lane 1's stream ended");
    assert!(p.lane_info(0).is_some_and(|i| !i.closed), "lane 0's could not");
    assert_eq!(p.get_vec("small", 2).unwrap(), b"two");
    assert!(p.get_vec("fill", 1).unwrap() == fill);
}

/// Objects carry their shape: metadata is stored under the object's commit, survives a
/// reopen, is returned by `meta` and counted by `stat`/`versions`; too long is refused
/// before anything is written; a typed array's dtype and shape read back.
#[test]
fn objects_carry_their_shape() {
    use nvs_std::{Element, Meta};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("meta.pool");
    let mut p = FilePool::create(&path, 8 << 20, &CreateOptions::new()).unwrap();
    let t: Vec<f64> = (0..600).map(|i| i as f64 * 0.5).collect();
    assert_eq!(p.put_array(0, "temperature", &t, &[20, 30]).unwrap().version, 1);
    assert!(p.put_array(0, "temperature", &t, &[20, 31]).is_err(), "a shape that does not hold the values");
    let attrs = Meta::new().set("units", "K").set("step", "1").to_bytes().unwrap();
    let vs = p
        .put_batch(
            1,
            &[
                Object::new("a", b"xyz").meta(&attrs),
                Object::new("b", b"no meta"),
                Object::new("c", b"").meta(b"k=v\n"),
            ],
        )
        .unwrap();
    assert_eq!(vs, vec![1, 1, 1]);
    let long = vec![b'x'; nvs_core::META_MAX + 1];
    assert!(p.put(0, Object::new("d", b"1").meta(&long)).is_err());
    assert!(p.get_vec("d", 1).is_err(), "nothing was stored");
    p.close().unwrap();
    let p = FilePool::open(&path, Access::ReadOnly).unwrap();
    let m = Meta::parse(&p.meta("temperature", 1).unwrap()).unwrap();
    assert_eq!((m.dtype_str(), m.dims()), (Some(f64::DTYPE), Some(vec![20, 30])));
    assert_eq!(p.get_pod::<f64>("temperature", 1).unwrap(), t);
    assert_eq!(p.meta("a", 1).unwrap(), attrs);
    assert_eq!(Meta::parse(&p.meta("a", 1).unwrap()).unwrap().get("units"), Some("K"));
    assert_eq!(p.meta("b", 1).unwrap(), b"");
    assert_eq!(p.meta("c", 1).unwrap(), b"k=v\n");
    assert_eq!(p.get_vec("a", 1).unwrap(), b"xyz");
    assert_eq!(p.stat("a", 1).unwrap().meta_len as usize, attrs.len());
    assert_eq!(p.versions("temperature").unwrap().next().unwrap().meta_len, m.to_bytes().unwrap().len() as u16);
    assert_eq!(p.verify().unwrap(), 4);
}

#[test]
#[cfg_attr(miri, ignore = "files")]
fn a_size_no_file_can_have_is_a_clear_error_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("huge.pool");
    let Err(e) = FilePool::create(&path, 1 << 63, &CreateOptions::default()) else { panic!("created") };
    assert!(e.to_string().contains("cannot be 9223372036854775808 bytes long"), "{e}");
    assert!(!path.exists());
}

/// A new pool file gets its name only once it is formatted (O_TMPFILE, then a link): a
/// process killed while creating leaves nothing, where a named, unformatted file it left
/// was "not an nvs pool" to every later open. Whenever the path exists, it opens.
#[test]
#[cfg_attr(miri, ignore = "files")]
fn a_pool_file_has_its_name_only_once_formatted() {
    let dir = tempfile::tempdir().expect("tempdir");
    for round in 0..4 {
        let path = dir.path().join(format!("c{round}.pool"));
        let seen = std::thread::scope(|s| {
            let watcher = s.spawn(|| {
                let t = std::time::Instant::now();
                while !path.exists() {
                    if t.elapsed() > std::time::Duration::from_secs(20) {
                        return None;
                    }
                    std::hint::spin_loop();
                }
                Some(FilePool::open(&path, nvs_std::Access::ReadOnly).map(|_| ()).map_err(|e| e.to_string()))
            });
            let pool = FilePool::create(&path, 96 << 20, &CreateOptions::default()).expect("create");
            let seen = watcher.join().expect("watcher");
            drop(pool);
            seen
        });
        assert_eq!(seen, Some(Ok(())), "round {round}: the path existed before it was a pool");
        std::fs::remove_file(&path).expect("remove");
    }
    // Create still never overwrites, and a failed create leaves nothing.
    let path = dir.path().join("once.pool");
    FilePool::create(&path, 1 << 20, &CreateOptions::default()).expect("create");
    let Err(e) = FilePool::create(&path, 1 << 20, &CreateOptions::default()) else { panic!("overwrote") };
    assert!(matches!(e, nvs_std::Error::Exists { .. }), "{e}");
    let Err(_) = FilePool::create(dir.path().join("none/x.pool"), 1 << 20, &CreateOptions::default()) else {
        panic!("created in a missing directory")
    };
    assert_eq!(std::fs::read_dir(dir.path()).expect("list").count(), 1, "a failed create left a file");
}

#[test]
fn a_locked_lane_and_no_free_lane_say_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lanes.pool");
    let opts = CreateOptions { lanes_max: 2, lane_names: true, ..CreateOptions::default() };
    FilePool::create(&path, 1 << 20, &opts).unwrap().close().unwrap();
    let _a = FilePool::open_lanes(&path, Some(&[1])).unwrap();
    let msg = |r: nvs_std::Result<FilePool>| match r {
        Err(e @ Error::Locked { .. }) => e.to_string(),
        other => panic!("not refused as locked: {:?}", other.err()),
    };
    let taken = msg(FilePool::open_lanes(&path, Some(&[1])));
    assert!(taken.starts_with("lane 1 of pool") && taken.contains("locked by another writer"), "{taken}");
    let _b = FilePool::open_lanes(&path, None).unwrap();
    let none = msg(FilePool::open_lanes(&path, None));
    assert!(none.contains("none of its 2 lanes is free"), "{none}");
    let whole = msg(FilePool::open(&path, Access::ReadWrite));
    assert!(whole.starts_with("pool ") && whole.ends_with("is locked by another writer"), "{whole}");
    drop((_a, _b));
    // The pool's one writer holds every lane: the pool is what is held, whichever lane.
    let _w = FilePool::open(&path, Access::ReadWrite).unwrap();
    for lanes in [Some(&[1u32][..]), None] {
        let m = msg(FilePool::open_lanes(&path, lanes));
        assert!(m.starts_with("pool ") && m.ends_with("is locked by another writer"), "{lanes:?}: {m}");
    }
    // A pool without lane names is refused for lanes before any lane lock is taken.
    let plain = dir.path().join("plain.pool");
    FilePool::create(&plain, 1 << 20, &CreateOptions::default()).unwrap().close().unwrap();
    match FilePool::open_lanes(&plain, Some(&[0])) {
        Err(e) => assert_eq!(e.core(), Some(nvs_core::Error::NeedsLaneNames), "{e}"),
        Ok(_) => panic!("lanes of a pool without lane names"),
    }
    let _plain_writer = FilePool::open(&plain, Access::ReadWrite).expect("no lane lock was left behind");
}

/// A name with a NUL byte inside is refused at every put (pool, batch, lane, tracked),
/// with nothing written: C and every binding over it read a name up to its first NUL, so
/// `key\0secret` was listed to them as `key`, whose get returned another object's bytes.
#[test]
fn names_with_a_nul_byte_are_refused_at_put() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nul.pool");
    let mut pool = FilePool::create(&path, 8 << 20, &CreateOptions::default()).unwrap();
    pool.put(0, Object::new("key", b"public")).unwrap();
    // (In a batch, the error names the object too: `Error::Batch`.)
    let nul = |r: nvs_std::Result<()>| match r {
        Err(e) if matches!(e.unbatched().0, Error::NameNul { at: 3, .. }) => {
            assert!(e.to_string().contains("NUL"), "{e}")
        }
        other => panic!("{other:?}"),
    };
    nul(pool.put(0, Object::new(b"key\0secret", b"secret")).map(drop));
    nul(pool.put_batch(0, &[Object::new("ok", b"1"), Object::new(b"key\0", b"2")]).map(drop));
    let mut buf = nvs_std::dirty::TrackedBuf::best(16).unwrap();
    nul(pool.put_tracked(0, b"key\0t", &mut buf).map(drop));
    {
        let mut lane = pool.lane(1).unwrap();
        nul(lane.put(Object::new(b"key\0l", b"3")).map(drop));
        nul(lane.put_batch(&[Object::new(b"key\0b", b"4")]).map(drop));
    }
    let names: Vec<Vec<u8>> =
        pool.names().map(|n| pool.name_bytes(n.id, &mut [0; nvs_core::NAME_MAX]).to_vec()).collect();
    assert_eq!(names, vec![b"key".to_vec()], "nothing of the refused puts was written");
}

/// `FilePool::reserve`: the index grows once, at the call, and the puts it made room
/// for do not grow it; past the room it still grows; a reservation survives a reclaim
/// (whose recovery reuses the index's memory); a count past what the pool can hold is
/// cut to that.
#[test]
fn reserve_makes_room_once_and_puts_do_not_grow_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut pool = FilePool::create(dir.path().join("p.pool"), 64 << 20, &CreateOptions::default()).unwrap();
    let before = pool.index_bytes();
    pool.reserve(20_000, 10).unwrap();
    let reserved = pool.index_bytes();
    assert!(reserved >= before + 20_000 * 64, "{before} -> {reserved}");
    for i in 0..20_000u32 {
        let name = format!("n{}", i % 10);
        pool.put(0, Object::new(name.as_bytes(), &i.to_le_bytes())).unwrap();
    }
    assert_eq!(pool.index_bytes(), reserved, "the puts grew the index");
    assert!(pool.reclaim(1).unwrap() > 0);
    assert_eq!(pool.index_bytes(), reserved, "a reclaim gave the memory back");
    let put = pool.put(0, Object::new("n0", b"after")).unwrap();
    assert_eq!(pool.get_vec("n0", put.version).unwrap(), b"after");
    let held = pool.stats().objects as usize;
    pool.reserve(0, 0).unwrap();
    assert_eq!(pool.index_bytes(), reserved, "no room asked, none made");
    // Past the reservation, the index grows as before.
    for i in 0..(reserved / 64) as u32 {
        pool.put(0, Object::new("m", &i.to_le_bytes())).unwrap();
    }
    assert!(pool.index_bytes() > reserved, "{held} objects held before");
    // A careless count is cut to what the pool can hold (64 MiB: 1 Mi lines), not an
    // allocation of exabytes (refused) or of all the memory there is.
    pool.reserve(usize::MAX, usize::MAX).unwrap();
    let most = pool.index_bytes();
    assert!(most > 1_000_000 * 64 && most < 1_000_000 * 300, "{most} bytes");
    pool.reserve(usize::MAX / 2, 0).unwrap();
    assert_eq!(pool.index_bytes(), most, "room enough for what the pool can hold");
    let put = pool.put(0, Object::new("n0", b"last")).unwrap();
    assert_eq!(pool.get_vec("n0", put.version).unwrap(), b"last");
}
