//! Every finding of the fuzz targets, as a named test (written before the fix; the
//! input also stays in `fuzz/corpus/<target>/`, which `tests/corpus.rs` replays).

use nvs_core::{FormatOptions, HeapMemory, Pool};
use nvs_fuzz_check::VecMedia;

fn replay(target: &str, file: &str) {
    let path = format!("{}/../fuzz/corpus/{target}/{file}", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    nvs_fuzz_check::run(target, &data);
}

/// ops_crash, finding 1: a put to a name whose latest version is near `u64::MAX`
/// panicked with "attempt to add with overflow" in debug builds: the put path's cache
/// warming (`Index::touch_for_append`) summed a name hash and versions with `+`.
/// (Release builds wrapped silently; tests and fuzzing run with overflow checks.)
#[test]
fn put_next_to_version_max_does_not_overflow() {
    let media = VecMedia::zeroed(4096 + 4 * 4096);
    let mut o = FormatOptions::new(7);
    o.segment_len = Some(4096);
    let mut pool = Pool::format(&media, o, HeapMemory::new()).expect("format");
    assert_eq!(pool.put_version(0, b"a", u64::MAX - 1, b"x"), Ok(u64::MAX - 1));
    assert_eq!(pool.put_version(0, b"a", u64::MAX, b"y"), Ok(u64::MAX));
    assert!(pool.put(b"a", b"z").is_err(), "no version after u64::MAX");
}

#[test]
fn ops_crash_touch_for_append_overflow() {
    replay("ops_crash", "regress-touch-for-append-overflow");
}
