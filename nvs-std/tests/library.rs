//! The library: durability defaults per backing, FilePool round trips, the writer lock,
//! readers following a live writer, and refusals that leave nothing behind.

use nvs_core::Object;
use nvs_std::{Access, Backing, CreateOptions, Durability, Error, FilePool};
use std::path::{Path, PathBuf};

/// A temporary directory on tmpfs, if this machine has a writable /dev/shm.
fn shm_dir() -> Option<tempfile::TempDir> {
    tempfile::Builder::new().prefix("nvs-std-test").tempdir_in("/dev/shm").ok()
}

/// A temporary directory under the target directory (a disk file system here).
fn disk_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("nvs-std-test")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("temp dir under the target dir")
}

fn pool_in(dir: &Path) -> PathBuf {
    dir.join("p.pool")
}

/// On tmpfs the default is Process (nothing there survives a power loss anyway).
#[test]
fn tmpfs_defaults_to_process() {
    let Some(dir) = shm_dir() else {
        eprintln!("skipped: no writable /dev/shm");
        return;
    };
    let p = FilePool::create(pool_in(dir.path()), 1 << 20, &CreateOptions::default()).unwrap();
    assert_eq!(p.media().backing(), Backing::Tmpfs);
    assert_eq!(p.media().durability(), Durability::Process);
    assert!(!p.media().durability().survives_power_loss());
}

/// On a disk file system the default is Msync; Process may be chosen explicitly; Dax
/// is refused on anything but a device-DAX device, and nothing is left behind.
#[test]
fn disk_defaults_to_msync_and_dax_is_refused() {
    let dir = disk_dir();
    let path = pool_in(dir.path());
    let mut p = FilePool::create(&path, 1 << 20, &CreateOptions::default()).unwrap();
    if p.media().backing() == Backing::Tmpfs {
        eprintln!("skipped: the target directory is on tmpfs here");
        return;
    }
    assert_eq!(p.media().backing(), Backing::DiskFile);
    assert_eq!(p.media().durability(), Durability::Msync);
    // Puts in msync mode sync at every fence and report no error.
    assert_eq!(p.put(0, Object::new(b"a", b"synced")).unwrap().version, 1);
    assert!(p.media().sync_error().is_none());
    drop(p);

    let p = FilePool::open_with(&path, Access::ReadWrite, Some(Durability::Process)).unwrap();
    assert_eq!(p.media().durability(), Durability::Process);
    assert_eq!(p.get_vec(b"a", 1).unwrap(), b"synced");
    drop(p);

    let r = FilePool::open_with(&path, Access::ReadWrite, Some(Durability::Dax));
    assert!(matches!(r, Err(Error::Unsupported { .. })), "{:?}", r.err());
    let dax = CreateOptions { durability: Some(Durability::Dax), ..CreateOptions::default() };
    let other = dir.path().join("dax.pool");
    let r = FilePool::create(&other, 1 << 20, &dax);
    assert!(matches!(r, Err(Error::Unsupported { .. })), "{:?}", r.err());
    assert!(!other.exists(), "a refused create leaves no file");
}

/// Puts, vectored puts, batches and explicit versions survive close and reopen.
#[test]
fn round_trip_through_reopen() {
    let dir = disk_dir();
    let path = pool_in(dir.path());
    let opts = CreateOptions { payload_checksum: true, lanes_max: 4, ..CreateOptions::default() };
    let mut p = FilePool::create(&path, 4 << 20, &opts).unwrap();
    assert_eq!(p.put(0, Object::new(b"x", b"one")).unwrap().version, 1);
    assert_eq!(p.put(1, Object::vectored(b"x", &[b"tw", b"o"])).unwrap().version, 2);
    assert_eq!(p.put(2, Object::new(b"y", b"ten").version(10)).unwrap().version, 10);
    let v = p.put_batch(3, &[Object::new(b"x", b"three"), Object::new(b"z", b"first z")]).unwrap();
    assert_eq!(v.as_slice(), &[3, 1]);
    drop(p);

    let p = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert_eq!(p.get_vec(b"x", 2).unwrap(), b"two");
    assert_eq!(p.get_vec(b"x", 3).unwrap(), b"three");
    assert_eq!(p.get_vec(b"y", 10).unwrap(), b"ten");
    assert_eq!(p.latest(b"z").unwrap(), 1);
    assert_eq!(p.stats().objects, 5);
    assert_eq!(p.verify().unwrap(), 5);
    assert_eq!(p.layout().lanes_max, 4);
}

/// A pool big enough for the open's page-table helper (64 MiB and up, on tmpfs): both
/// opens find every object with its bytes, and a write after a read-write open works.
#[test]
fn large_pool_reopens_with_the_prefault_helper() {
    let Some(dir) = shm_dir() else {
        eprintln!("skipped: no writable /dev/shm");
        return;
    };
    let path = pool_in(dir.path());
    let mut p = FilePool::create(&path, 96 << 20, &CreateOptions::default()).unwrap();
    let obj = |i: u64| -> Vec<u8> { (0..48_000u64).map(|k| (k * 31 + i) as u8).collect() };
    let mut n = 0u64;
    while n < 1500 && p.put(0, Object::new(format!("a{}", n % 7).as_bytes(), &obj(n))).is_ok() {
        n += 1;
    }
    assert!(n > 1000, "{n} objects fit");
    drop(p);
    for access in [Access::ReadOnly, Access::ReadWrite] {
        let p = FilePool::open(&path, access).unwrap();
        assert_eq!(p.stats().objects, n);
        for i in [0, n / 2, n - 1] {
            assert_eq!(p.get_vec(format!("a{}", i % 7).as_bytes(), i / 7 + 1).unwrap(), obj(i));
        }
    }
    let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
    assert_eq!(p.put(0, Object::new(b"after", b"reopen")).unwrap().version, 1);
}

/// One writer at a time (also within one process); readers open alongside the writer,
/// follow it with refresh, and cannot write.
#[test]
fn writer_lock_and_live_readers() {
    let dir = disk_dir();
    let path = pool_in(dir.path());
    let mut w = FilePool::create(&path, 1 << 20, &CreateOptions::default()).unwrap();
    w.put(0, Object::new(b"n", b"1")).unwrap();

    match FilePool::open(&path, Access::ReadWrite) {
        Err(e @ Error::Locked { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("locked by another writer"), "{msg}");
            assert!(msg.contains(&path.display().to_string()), "{msg}");
        }
        other => panic!("second writer not refused: {:?}", other.err()),
    }

    let mut r = FilePool::open(&path, Access::ReadOnly).unwrap();
    assert_eq!(r.latest(b"n").unwrap(), 1);
    w.put(0, Object::new(b"n", b"2")).unwrap();
    assert_eq!(r.latest(b"n").unwrap(), 1, "a reader sees its last recovery");
    r.refresh().unwrap();
    assert_eq!(r.get_vec(b"n", 2).unwrap(), b"2");
    let refused = r.put(0, Object::new(b"n", b"3"));
    assert!(matches!(refused, Err(Error::Core { source: nvs_core::Error::ReadOnly, .. })), "{refused:?}");

    drop(w);
    let w2 = FilePool::open(&path, Access::ReadWrite);
    assert!(w2.is_ok(), "lock released on close: {:?}", w2.err());
}

/// Create never overwrites; a create that fails after making the file removes it; a
/// non-pool and an empty file are "not formatted", which counts as corruption.
#[test]
fn refusals_leave_files_alone() {
    let dir = disk_dir();
    let path = pool_in(dir.path());
    std::fs::write(&path, b"precious").unwrap();
    let r = FilePool::create(&path, 1 << 20, &CreateOptions::default());
    assert!(matches!(r, Err(Error::Exists { .. })), "{:?}", r.err());
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");

    let e = FilePool::open(&path, Access::ReadOnly).err().unwrap();
    assert!(e.is_corruption(), "{e}");
    std::fs::write(&path, b"").unwrap();
    let e = FilePool::open(&path, Access::ReadOnly).err().unwrap();
    assert!(e.is_corruption(), "{e}");

    let tiny = dir.path().join("tiny.pool");
    let r = FilePool::create(&tiny, 4096, &CreateOptions::default());
    assert!(matches!(r, Err(Error::Core { source: nvs_core::Error::BadGeometry { .. }, .. })), "{:?}", r.err());
    assert!(!tiny.exists(), "a failed create removes its file");

    let e = FilePool::open(dir.path().join("missing"), Access::ReadOnly).err().unwrap();
    assert!(matches!(e, Error::Io { op: "open", .. }) && !e.is_corruption(), "{e}");
}
