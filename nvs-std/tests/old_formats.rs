//! Pools of earlier formats (tests/data/README.md) open and read byte-exact with this
//! build, verify, and take new versions: a format-1 pool keeps its nvs-hash64 payload
//! checksums (this build writes format 2, nvs-sum, only into pools it formats).

use nvs_core::{CorruptKind, Object};
use nvs_std::{Access, CreateOptions, Error, FilePool};
use std::path::{Path, PathBuf};

/// The fixtures' contents (make_v1.rs.txt).
fn pattern(name: &str, v: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 31 + v * 7 + name.len() as u64) as u8).collect()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A writable copy of a fixture (never write the fixture itself).
fn copy_of(name: &str, dir: &tempfile::TempDir) -> PathBuf {
    let to = dir.path().join(name);
    std::fs::copy(fixture(name), &to).unwrap();
    to
}

/// Every object the fixture holds, as make_v1.rs.txt wrote it.
fn check_contents(p: &FilePool) {
    for v in 11..=12 {
        assert_eq!(p.get_vec("a", v).unwrap(), pattern("a", v, 3000), "a v{v}");
    }
    for v in 1..=3 {
        assert_eq!(p.get_vec("b", v).unwrap(), pattern("b", v, 100), "b v{v}");
    }
    let mut c = pattern("c", 1, 8192);
    assert_eq!(p.get_vec("c", 1).unwrap(), c);
    c[100..200].fill(0xAB);
    assert_eq!(p.get_vec("c", 2).unwrap(), c, "the delta version");
    assert_eq!(p.get_vec("temperature", 1).unwrap(), pattern("t", 1, 640));
    assert_eq!(p.get_vec("u", 1).unwrap(), pattern("u", 1, 64));
}

#[test]
fn format_1_pools_read_verify_and_take_new_versions() {
    let dir = tempfile::tempdir().unwrap();
    for (file, sums) in [("v1.pool", false), ("v1-checksums.pool", true)] {
        let p = FilePool::open(fixture(file), Access::ReadOnly).unwrap();
        let layout = p.layout();
        assert_eq!((layout.format_version, layout.payload_checksum), (1, sums), "{file}");
        check_contents(&p);
        let objects = p.verify().unwrap();
        assert!(objects >= 9, "{file}: {objects} verified");
        drop(p);

        // Written by this build: still format 1, its payload sums still nvs-hash64.
        let path = copy_of(file, &dir);
        let mut p = FilePool::open(&path, Access::ReadWrite).unwrap();
        let big = pattern("new", 9, 5000);
        let v = p.put(3, Object::new("new", &big)).unwrap().version;
        let parts: [&[u8]; 3] = [&big[..7], &big[7..4099], &big[4099..]];
        let w = p.put(3, Object::vectored(b"new", &parts)).unwrap().version;
        p.close().unwrap();
        let p = FilePool::open(&path, Access::ReadOnly).unwrap();
        assert_eq!(p.layout().format_version, 1);
        assert_eq!(p.get_vec("new", v).unwrap(), big);
        assert_eq!(p.get_vec("new", w).unwrap(), big);
        check_contents(&p);
        p.verify().unwrap();
    }
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
            matches!(
                r,
                Err(Error::Core { source: nvs_core::Error::Corrupted { kind: CorruptKind::PayloadChecksum, .. }, .. })
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

/// A pool this build formats is format 2 with payload checksums (nvs-sum) by default.
#[test]
fn new_pools_are_format_2_with_checksums() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let p = FilePool::create(&path, 1 << 20, &CreateOptions::new().segment_len(64 << 10)).unwrap();
    let layout = p.layout();
    assert_eq!((layout.format_version, layout.payload_checksum), (2, true));
    drop(p);
    let off = dir.path().join("q.pool");
    let p = FilePool::create(&off, 1 << 20, &CreateOptions::new().payload_checksum(false)).unwrap();
    assert!(!p.layout().payload_checksum);
}
