//! Pools written by earlier builds (tests/data, see its README) open and read byte-exact
//! with this build, and are refused for writing with an error that says what to do.

use nvs_core::CorruptKind;
use nvs_std::{Access, CreateOptions, Error, FilePool};
use std::path::PathBuf;

/// The pattern `tests/data/make_v1.rs.txt` wrote.
fn pattern(name: &str, v: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 31 + v * 7 + name.len() as u64) as u8).collect()
}

fn fixture(name: &str, test: &str) -> PathBuf {
    // Read from a copy: opening must not need (or take) write access to the fixture.
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name);
    let dir = std::env::temp_dir().join(format!("nvs-old-formats-{}-{test}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dst = dir.join(name);
    std::fs::copy(&src, &dst).unwrap();
    dst
}

fn expect_v1_contents(p: &FilePool) {
    expect_contents(p, 1, 5);
}

fn expect_contents(p: &FilePool, format: u32, name_count: usize) {
    assert_eq!(p.core_pool().layout().format_version, format);
    for v in 11..=12 {
        assert_eq!(p.get_vec("a", v).unwrap(), pattern("a", v, 3000), "a v{v}");
    }
    assert!(p.get_vec("a", 10).is_err(), "retention released a v10");
    for v in 1..=3 {
        assert_eq!(p.get_vec("b", v).unwrap(), pattern("b", v, 100), "b v{v}");
    }
    assert_eq!(p.get_vec("temperature", 1).unwrap(), pattern("t", 1, 640));
    assert_eq!(p.get_vec("u", 1).unwrap(), pattern("u", 1, 64));
    let mut c = pattern("c", 1, 8192);
    assert_eq!(p.get_vec("c", 1).unwrap(), c);
    c[100..200].fill(0xAB);
    assert_eq!(p.get_vec("c", 2).unwrap(), c, "the delta rebuilds");
    assert_eq!(p.stat("c", 2).unwrap().depth, 1);
    let names: Vec<_> = p.names().collect();
    assert_eq!(names.len(), name_count);
}

#[test]
fn format_1_pools_read_byte_exact() {
    for name in ["v1.pool", "v1-checksums.pool"] {
        let path = fixture(name, "read");
        let p = FilePool::open(&path, Access::ReadOnly).unwrap_or_else(|e| panic!("{name}: {e}"));
        expect_v1_contents(&p);
        assert_eq!(p.verify().unwrap(), 9, "{name}: every object verifies");
        let _ = std::fs::remove_dir_all(path.parent().unwrap());
    }
}

#[test]
fn format_1_pools_are_refused_for_writing_and_left_alone() {
    let path = fixture("v1.pool", "write");
    let before = std::fs::read(&path).unwrap();
    let Err(e) = FilePool::open(&path, Access::ReadWrite) else { panic!("a format 1 pool opened for writing") };
    let msg = e.to_string();
    assert!(msg.contains("format version 1") && msg.contains("read-only"), "{msg}");
    assert!(msg.contains("v1.pool"), "names the pool: {msg}");
    assert!(std::fs::read(&path).unwrap() == before, "the refused open changed the file");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// A writable copy of a fixture in `dir` (never write the fixture itself).
fn copy_of(name: &str, dir: &tempfile::TempDir) -> PathBuf {
    let to = dir.path().join(name);
    std::fs::copy(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name), &to).unwrap();
    to
}

/// The fixture's checksums are really checked (nvs-hash64): one payload byte changed is
/// a payload checksum error on get and on verify; without checksums it is just data.
#[test]
fn format_1_payload_damage_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    for (file, sums) in [("v1.pool", false), ("v1-checksums.pool", true)] {
        let path = copy_of(file, &dir);
        let off = FilePool::open(&path, Access::ReadOnly).unwrap().stat("b", 2).unwrap().offset;
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[off as usize + 10] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let p = FilePool::open(&path, Access::ReadOnly).unwrap();
        let got = p.get_vec("b", 2);
        fn corrupted<T>(r: &Result<T, Error>) -> bool {
            // The object named: "b" version 2.
            matches!(
                r,
                Err(Error::Damaged {
                    name,
                    version: 2,
                    source: nvs_core::Error::Corrupted { kind: CorruptKind::PayloadChecksum, .. },
                    ..
                }) if name == b"b"
            )
        }
        if sums {
            assert!(corrupted(&got), "{file}: {got:?}");
            assert!(corrupted(&p.verify()), "{file}");
        } else {
            assert_ne!(got.unwrap(), pattern("b", 2, 100));
            p.verify().unwrap();
        }
    }
}

/// Format 2 pools (written before sealed units) read byte-exact, and stay writable as
/// format 2: new units are committed with two fences, as a format 2 build reads them,
/// and everything old and new reads back after a reopen.
#[test]
fn format_2_pools_read_and_write_as_format_2() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["v2.pool", "v2-checksums.pool"] {
        let path = copy_of(name, &dir);
        let p = FilePool::open(&path, Access::ReadOnly).unwrap_or_else(|e| panic!("{name}: {e}"));
        expect_contents(&p, 2, 5);
        assert_eq!(p.verify().unwrap(), 9, "{name}: every object verifies");
        drop(p);
        let mut p = FilePool::open(&path, Access::ReadWrite).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(p.put(0, nvs_core::Object::new("a", &pattern("a", 13, 5000))).unwrap().version, 13);
        p.put_batch(3, &[nvs_core::Object::new("n", &pattern("n", 1, 10)), nvs_core::Object::new("m", b"")]).unwrap();
        p.close().unwrap();
        let p = FilePool::open(&path, Access::ReadOnly).unwrap();
        expect_contents(&p, 2, 7);
        assert_eq!(p.get_vec("a", 13).unwrap(), pattern("a", 13, 5000));
        assert_eq!(p.get_vec("n", 1).unwrap(), pattern("n", 1, 10));
        assert_eq!(p.get_vec("m", 1).unwrap(), b"");
        assert_eq!(p.verify().unwrap(), 12, "{name}");
    }
}

/// A pool this build formats is format 3 with payload checksums (nvs-sum) by default:
/// sealed units, one fence per commit.
#[test]
fn new_pools_are_format_3_with_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let p = FilePool::create(&path, 1 << 20, &CreateOptions::new().segment_len(64 << 10)).unwrap();
    let layout = p.layout();
    assert_eq!((layout.format_version, layout.payload_checksum), (3, true));
    drop(p);
    let off = dir.path().join("q.pool");
    let p = FilePool::create(&off, 1 << 20, &CreateOptions::new().payload_checksum(false)).unwrap();
    assert!(!p.layout().payload_checksum);
}
