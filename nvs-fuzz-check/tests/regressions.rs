//! Every finding of the fuzz targets, as a named test (written before the fix; the
//! input also stays in `fuzz/corpus/<target>/`, which `tests/corpus.rs` replays).

use nvs_core::{FormatOptions, HeapMemory, Object, Pool};
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
    assert_eq!(pool.put(0, Object::new(b"a", b"x").version(u64::MAX - 1)).map(|p| p.version), Ok(u64::MAX - 1));
    assert_eq!(pool.put(0, Object::new(b"a", b"y").version(u64::MAX)).map(|p| p.version), Ok(u64::MAX));
    assert!(pool.put(0, Object::new(b"a", b"z")).is_err(), "no version after u64::MAX");
}

#[test]
fn ops_crash_touch_for_append_overflow() {
    replay("ops_crash", "regress-touch-for-append-overflow");
}

/// Forge a valid segment header (checksum recomputed) at segment `i`.
fn forge_segment(img: &mut [u8], i: usize, f: impl FnOnce(&mut nvs_core::internals::format::SegmentHeader)) {
    use nvs_core::internals::format::SegmentHeader;
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
    pool.put(0, Object::new(b"a", b"x")).expect("put");
    drop(pool);
    media.peek(0, 4096 + 4 * 4096)
}

/// Open `img` read-only, then for writing and put: never a panic (debug builds check
/// overflow), only `Ok` or `Corrupted`.
fn open_and_put(img: Vec<u8>) -> Result<(), nvs_core::Error> {
    Pool::open_read_only(&VecMedia::from_bytes(img.clone()), HeapMemory::new())?;
    let media = VecMedia::from_bytes(img);
    let mut pool = Pool::open(&media, HeapMemory::new())?;
    pool.put(0, Object::new(b"a", b"y"))?;
    pool.put(0, Object::new(b"a", b"z"))?;
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

/// A pool of `segments` 4 KiB segments whose lane 0 holds one unit: `f` v1 (3840
/// bytes) and `k` v1, empty, whose header fills the segment to its very end: `k`'s
/// payload offset is the next segment's start. (Found with two units, `f` of 3776 bytes
/// then `k`; since 2026-12-03 a unit appended to a segment leaves its last line free,
/// but the first unit of a new segment may still fill it.)
fn empty_object_at_segment_end(segments: usize) -> VecMedia {
    let media = VecMedia::zeroed(4096 + segments * 4096);
    let mut o = FormatOptions::new(9);
    o.segment_len = Some(4096);
    o.lanes_max = 2;
    let mut pool = Pool::format(&media, o, HeapMemory::new()).expect("format");
    let f = [7u8; 3840];
    pool.put_batch(0, &[Object::new(b"f", &f), Object::new(b"k", b"")]).expect("put f and k");
    let k = pool.stat(b"k", 1).expect("stat k");
    assert_eq!(k.offset, 4096 + 4096, "k's payload offset is the end of segment 0");
    drop(pool);
    media
}

/// ops_crash, finding 3: reading an empty object whose payload offset is its segment's
/// end through a read-only pool panicked ("media read outside the media") when that
/// segment was the pool's last, and answered `NotFound` otherwise: the reader's
/// released-segment check (`still_there`) took the segment from the payload offset,
/// which for such an object is the next segment's start.
#[test]
fn read_only_get_of_an_empty_object_at_a_segment_end() {
    for segments in [1, 3] {
        let media = empty_object_at_segment_end(segments);
        let pool = Pool::open_read_only(&media, HeapMemory::new()).expect("open");
        let mut buf = [0u8; 8];
        assert_eq!(pool.get(b"k", 1, &mut buf), Ok(0), "{segments} segments");
        assert_eq!(pool.get(b"f", 1, &mut [0u8; 3840]), Ok(3840));
    }
}

/// Finding 3, second face: `reclaim` took the segment of each kept version from its
/// payload offset too, so an empty kept object at a segment's end protected the next
/// segment instead of its own, and its own was released: the latest version of `k`
/// was lost.
#[test]
fn reclaim_keeps_an_empty_object_at_a_segment_end() {
    let media = empty_object_at_segment_end(4);
    let mut pool = Pool::open(&media, HeapMemory::new()).expect("open");
    pool.put(0, Object::new(b"f", b"v2 in the next segment")).expect("put f v2");
    pool.reclaim(1).expect("reclaim");
    let mut buf = [0u8; 64];
    assert_eq!(pool.get(b"k", 1, &mut buf), Ok(0), "the only version of k was released");
    drop(pool);
    let pool = Pool::open_read_only(&media, HeapMemory::new()).expect("reopen");
    assert_eq!(pool.get(b"k", 1, &mut buf), Ok(0), "after reopen");
    assert_eq!(pool.get(b"f", 2, &mut buf), Ok(22));
}

#[test]
fn ops_crash_empty_object_at_segment_end() {
    replay("ops_crash", "regress-empty-object-at-segment-end");
}

/// ops_crash, finding 4: a lane claiming a segment that retention released (its header
/// invalidated by zeroing only the magic word) rewrites the header with NT stores; a
/// crash before the claim was fenced that persisted the new magic word but none of the
/// other new words left the *old* header whole again — old fields, old checksum, valid
/// magic — so recovery saw the released segment back in its old lane's chain, with a
/// gap after it, and refused the pool: `Corrupted(SegmentChain)` on a crash image.
#[test]
fn torn_claim_of_a_released_segment_does_not_revive_its_header() {
    use nvs_sim::{Chooser, CrashView, Event, SimMedia};
    let sim = SimMedia::from_bytes(&vec![0u8; 4096 + 3 * 4096]);
    let mut o = FormatOptions::new(21);
    o.segment_len = Some(4096);
    o.lanes_max = 2;
    let mut pool = Pool::format(&sim, o, HeapMemory::new()).expect("format");
    for v in 1..=3u8 {
        pool.put(0, Object::new(b"a", &[v; 3000])).expect("put"); // one segment each: chain 0, 1, 2
    }
    assert_eq!(pool.reclaim(1), Ok(2), "chains 0 and 1 released");
    let before = sim.point();
    pool.put(1, Object::vectored(b"b", &[b"lane 1 reuses a released segment"])).expect("put on lane 1");
    drop(pool);
    // Crash at the put's first fence (the unit's, which also fences the claim: the
    // claim has none of its own): the new header's words and the unit's are pending.
    let events = sim.events();
    let fence = (before..events.len()).find(|&i| matches!(events[i], Event::Fence { .. })).expect("unit fence");
    let state = sim.crash_state(fence);
    assert!(state.undecided() >= 2, "the claim rewrote a released header");
    for first in 0..2 {
        // Choice 0 is the header's first differing word (the magic): new or old; every
        // later word keeps its old value.
        let view = CrashView::new(state.clone(), Chooser::replaying(vec![first]));
        let pool = Pool::open_read_only(&view, HeapMemory::new())
            .unwrap_or_else(|e| panic!("crash image (magic {}) refused: {e}", ["old", "new"][first]));
        let mut buf = [0u8; 3000];
        assert_eq!(pool.get(b"a", 3, &mut buf), Ok(3000));
        assert_eq!(pool.latest(b"a"), Ok(3));
        assert!(pool.get(b"a", 1, &mut buf).is_err() && pool.get(b"a", 2, &mut buf).is_err(), "released");
    }
}

#[test]
fn ops_crash_torn_claim_revives_released_header() {
    replay("ops_crash", "regress-torn-claim-revives-released-header");
}

/// ops_crash, finding 5 (CI, 2026-11-30): `reclaim(0)` over two lanes committed lane 0's
/// truncate unit, then found no free segment for lane 2's (its segment was full) and
/// returned `Full` — a refused call that had changed the pool. Reclaim now counts the
/// segments its truncate units need before writing any.
#[test]
fn ops_crash_reclaim_full_after_a_truncate_unit() {
    replay("ops_crash", "regress-reclaim-full-after-truncate");
}

/// A forged superblock whose segment_count * segment_len wraps a u64 (pool_len 4096,
/// checksum fixed up): every access panicked ("media access outside"); now Corrupted.
#[test]
fn recover_image_geometry_that_wraps() {
    replay("recover_image", "regress-geometry-wraps");
}

/// decode, a finding in the fuzz target's own model: a superblock with the lane-names
/// flag (bit 2, format 2) is valid, but the target's independent decoder still allowed
/// only bits 0-1 and expected `Corrupted(Geometry)`; nvs-core was right. The model now
/// knows the flag, and that it needs format 2.
#[test]
fn decode_superblock_with_lane_names() {
    replay("decode", "regress-lane-names-flag");
}

/// checkpoint, finding 1: an index checkpoint forged with a valid sum gave a delta entry
/// a payload offset off the line grid; a get read the delta's parent with an aligned
/// word load there ("unaligned word load"). A checkpoint's payloads now start on a line
/// and its names 48 bytes into one, as recovery's always do, or it is not used.
#[test]
fn checkpoint_forged_unaligned_delta_payload() {
    replay("checkpoint", "regress-unaligned-delta");
}

/// checkpoint, finding 2: a forged entry whose payload started at the pool's first data
/// byte made a get's segment arithmetic (`payload_off - 1 - data_off`) underflow (a
/// panic with overflow checks). A checkpoint's payloads now lie past a segment header, a
/// unit header and an object header, as every real one does.
#[test]
fn checkpoint_forged_payload_at_data_start() {
    replay("checkpoint", "regress-payload-at-data-start");
}
