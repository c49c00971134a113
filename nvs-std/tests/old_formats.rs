//! Pools written by earlier builds (tests/data, see its README) open and read byte-exact
//! with this build, and are refused for writing with an error that says what to do.

use nvs_std::{Access, FilePool};
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
    assert_eq!(p.core_pool().layout().format_version, 1);
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
    assert_eq!(names.len(), 5);
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
