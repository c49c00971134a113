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

/// Forge a valid segment header (checksum recomputed) at segment `i`.
fn forge_segment(img: &mut [u8], i: usize, f: impl FnOnce(&mut nvs_core::format::SegmentHeader)) {
    use nvs_core::format::SegmentHeader;
    let off = 4096 + i * 4096;
    let mut h: SegmentHeader = bytemuck::pod_read_unaligned(&img[off..off + 64]);
    f(&mut h);
    h.checksum = h.compute_checksum();
    img[off..off + 64].copy_from_slice(bytemuck::bytes_of(&h));
}

/// A small pool with one object, as bytes.
fn one_object_pool() -> Vec<u8> {
    let media = VecMedia::zeroed(4096 + 4 * 4096);
    let mut o = FormatOptions::new(7);
    o.segment_len = Some(4096);
    let mut pool = Pool::format(&media, o, HeapMemory::new()).expect("format");
    pool.put(b"a", b"x").expect("put");
    drop(pool);
    media.peek(0, 4096 + 4 * 4096)
}

/// Open `img` read-only, then for writing and put: never a panic (debug builds check
/// overflow), only `Ok` or `Corrupted`.
fn open_and_put(img: Vec<u8>) -> Result<(), nvs_core::Error> {
    Pool::open_read_only(&VecMedia::from_bytes(img.clone()), HeapMemory::new())?;
    let media = VecMedia::from_bytes(img);
    let mut pool = Pool::open(&media, HeapMemory::new())?;
    pool.put(b"a", b"y")?;
    pool.put(b"a", b"z")?;
    Ok(())
}

/// Crafted media, finding 2: a segment header with a valid checksum and a chain or
/// sequence position near `u64::MAX` made recovery (and a writer after it) overflow
/// ("attempt to add with overflow" in debug builds; a silent wrap in release). No
/// writer gets there (2^63 segments or units), so recovery now refuses such a header
/// as `Corrupted(SegmentChain)`.
#[test]
fn segment_positions_near_u64_max_are_corruption() {
    use nvs_core::{CorruptKind, Error};
    let corrupted = Err(Error::Corrupted { offset: 4096, kind: CorruptKind::SegmentChain });
    for chain in [u64::MAX, u64::MAX - 1, 1 << 63] {
        let mut img = one_object_pool();
        forge_segment(&mut img, 0, |h| h.chain_seq = chain);
        assert_eq!(open_and_put(img), corrupted, "chain_seq {chain:#x}");
    }
    for first in [u64::MAX, u64::MAX - 1, 1 << 63] {
        let mut img = one_object_pool();
        forge_segment(&mut img, 0, |h| h.first_seq = first);
        assert_eq!(open_and_put(img), corrupted, "first_seq {first:#x}");
    }
    // Just below the limit: no overflow, whatever recovery makes of it.
    let mut img = one_object_pool();
    forge_segment(&mut img, 0, |h| h.first_seq = (1 << 63) - 1);
    let _ = open_and_put(img);
}
