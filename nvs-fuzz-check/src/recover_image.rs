//! `recover_image`: arbitrary bytes as a pool image (promises 5 and 6 of the README).
//!
//! An input of 64·k + 1 bytes ends with a selector of checksum fix-ups ([`fix_up`]), so
//! field values behind checksums and commit words are fuzzed too.
//!
//! On a [`Region`](nvs_core::Region) over a copy of the bytes (the production media):
//! 1. open read-only: `Ok`, or `NotFormatted` / `UnsupportedVersion` / `Corrupted` with
//!    an offset inside the media — nothing else, and never a panic;
//! 2. if `Ok`: every name, every version, `stat`, `get`, `latest`, `verify_all` agree with
//!    each other and with the recovery statistics, and every payload lies inside the
//!    pool; the bytes are unchanged afterwards (opening for read never stores);
//! 3. recovery is deterministic: a refresh of the open pool and a second read-only open
//!    give the same answer, and one with a small fixed index the same answer or
//!    `IndexFull`;
//! 4. if `Ok` and format 1 (read-only in this build): opening for writing is refused
//!    with `OldFormat { found: 1 }` and stores nothing;
//! 5. if `Ok` and format 2: open for writing (same answer, no store), put an object, a
//!    batch and an object larger than a segment (a span; `Ok` or a clean refusal:
//!    `Full`, `Fragmented`, `TooLarge`), read them back, reopen: `Ok` with every put present
//!    byte-exact and everything recovered before still there, or a `Corrupted` error —
//!    never a panic. (Damaged media may legitimately hold units that become visible
//!    after a write; see the note at `write_phase`.)

use crate::Image;
use nvs_core::{CorruptKind, Error, FixedMemory, HeapMemory, IndexMemory, Media, Object, Pool, NAME_MAX};
use std::collections::BTreeMap;

/// What a successful open recovered: (name, version) → (bytes or the get error, lane, seq).
type Seen = BTreeMap<(Vec<u8>, u64), (Result<Vec<u8>, Error>, u32, u64)>;

/// Summary of an open, to compare two opens of the same bytes.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Ok { stats: nvs_core::PoolStats, seen: Seen },
    Err(Error),
}

pub fn run(data: &[u8]) {
    // An input one byte past a multiple of 64 ends with a fix-up selector (see `fix_up`).
    let fixed;
    let data = match data.split_last() {
        Some((&sel, image)) if data.len() % 64 == 1 => {
            fixed = fix_up(image, sel);
            &fixed[..]
        }
        _ => data,
    };
    let mut img = Image::from_bytes(data);
    let before = img.bytes();
    let first = {
        let region = img.region();
        let len = region.len() as u64;
        outcome(Pool::open_read_only(region, HeapMemory::new()), len)
    };
    assert_eq!(img.bytes(), before, "a read-only open changed the media");
    let again = outcome(Pool::open_read_only(img.region(), HeapMemory::new()), img.len() as u64);
    assert_eq!(first, again, "recovery is not deterministic");
    let small = outcome(Pool::open_read_only(img.region(), FixedMemory::<24, 8, 64, 8>::new()), img.len() as u64);
    match (&first, &small) {
        (_, Outcome::Err(Error::IndexFull { .. })) => {}
        (a, b) => assert_eq!(a, b, "a fixed-memory index recovered something else"),
    }
    assert_eq!(img.bytes(), before, "a read-only open changed the media");
    if let Outcome::Ok { seen, .. } = first {
        let version = nvs_core::internals::format::decode_superblock(&crate::VecMedia::from_bytes(before.clone()))
            .expect("opened")
            .format_version;
        if version < nvs_core::internals::format::FORMAT_VERSION_WRITABLE {
            // An older format: read, never written (no store, and the same error again).
            for _ in 0..2 {
                let r = Pool::open(img.region(), HeapMemory::new()).map(|_| ());
                assert_eq!(r, Err(Error::OldFormat { found: version }), "a format {version} pool opened for writing");
            }
            assert_eq!(img.bytes(), before, "a refused writable open changed the media");
        } else {
            write_phase(&mut img, seen, data);
        }
    }
}

/// Recompute what the fuzzer cannot forge, so that the checks behind checksums and
/// commit words are reached with arbitrary field values (any byte image is fair game:
/// nvs-hash64 is not a MAC). `sel` bit 0: the superblock checksum; bit 1: every segment
/// header with the segment magic; bit 2: every unit header along each such segment (its
/// checksum and commit word, for the header's own lane and seq) while its length stays
/// in the segment; bit 3: the object headers in those units.
pub fn fix_up(image: &[u8], sel: u8) -> Vec<u8> {
    use nvs_core::internals::format::{
        ObjectHeader, SegmentHeader, Superblock, UnitHeader, SEGMENT_MAGIC, SUPERBLOCK_MAGIC,
    };
    let mut b = image.to_vec();
    if b.len() < 64 {
        return b;
    }
    let mut sb: Superblock = bytemuck::pod_read_unaligned(&b[..64]);
    if sb.magic != SUPERBLOCK_MAGIC {
        return b;
    }
    if sel & 1 != 0 {
        sb.checksum = sb.compute_checksum();
        b[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    }
    let seg_len = sb.segment_len as usize;
    if !(4096..=b.len()).contains(&seg_len) || !seg_len.is_multiple_of(64) {
        return b;
    }
    let count = ((b.len().saturating_sub(4096)) / seg_len).min(sb.segment_count as usize);
    let mut i = 0;
    while i < count {
        let seg = 4096 + i * seg_len;
        let mut h: SegmentHeader = bytemuck::pod_read_unaligned(&b[seg..seg + 64]);
        i += 1;
        if h.magic != SEGMENT_MAGIC {
            continue;
        }
        if sel & 2 != 0 {
            h.checksum = h.compute_checksum();
            b[seg..seg + 64].copy_from_slice(bytemuck::bytes_of(&h));
        }
        // Format 2: the header owns `span` segments (units run through the covered
        // segments' first lines, which are not headers); a span field out of range
        // (damaged, or forged by the fuzzer) is left for recovery to refuse.
        let span = match sb.format_version {
            2 if (1..=(count - i + 1) as u64).contains(&h.span) => h.span as usize,
            _ => 1,
        };
        i += span - 1;
        let seg_end = seg + span * seg_len;
        let mut off = seg + 64;
        while sel & 4 != 0 && off + 64 <= seg_end {
            let mut u: UnitHeader = bytemuck::pod_read_unaligned(&b[off..off + 64]);
            let len = u.unit_len as usize;
            if u.lane != h.lane || len < 64 || !len.is_multiple_of(64) || len > seg_end - off {
                break;
            }
            u.checksum = u.compute_checksum(sb.pool_id);
            u.commit = sb.commit_word_at(u.lane, u.seq, u.checksum, off as u64);
            b[off..off + 64].copy_from_slice(bytemuck::bytes_of(&u));
            let mut obj = off + 64;
            for _ in 0..u.object_count.min(256) {
                if sel & 8 == 0 || obj + 64 > off + len {
                    break;
                }
                let mut o: ObjectHeader = bytemuck::pod_read_unaligned(&b[obj..obj + 48]);
                let name_end = obj + 48 + o.name_len as usize;
                if o.name_len == 0 || name_end > off + len {
                    break;
                }
                let name = b[obj + 48..name_end].to_vec();
                o.checksum = o.compute_checksum(sb.pool_id, &name, &[]);
                b[obj..obj + 48].copy_from_slice(bytemuck::bytes_of(&o));
                let step = nvs_core::internals::format::object_head_len(name.len()) as usize;
                let payload = (o.payload_len.min(len as u64) as usize).next_multiple_of(64);
                obj += step + payload;
            }
            off += len;
        }
    }
    b
}

/// Open result → outcome, checking everything a successful open claims.
fn outcome<M: Media, X: IndexMemory>(r: nvs_core::Result<Pool<M, X>>, media_len: u64) -> Outcome {
    match r {
        Ok(mut pool) => {
            assert!(!pool.media().is_empty());
            let seen = walk(&pool);
            let stats = pool.stats();
            // Recovery again into the same pool (a reader catching up): the same answer.
            pool.refresh().unwrap_or_else(|e| panic!("refresh failed where open succeeded: {e:?}"));
            assert_eq!((pool.stats(), walk(&pool)), (stats, seen.clone()), "refresh recovered something else");
            Outcome::Ok { stats, seen }
        }
        Err(e) => {
            check_open_error(e, media_len);
            Outcome::Err(e)
        }
    }
}

/// The only errors an open of arbitrary bytes may give.
fn check_open_error(e: Error, media_len: u64) {
    match e {
        Error::NotFormatted | Error::UnsupportedVersion { .. } | Error::IndexFull { .. } => {}
        Error::Corrupted { offset, kind } => {
            assert!(offset < media_len.max(1), "corruption reported at {offset:#x}, outside the media");
            assert_ne!(kind, CorruptKind::PayloadChecksum, "recovery never reads payloads");
        }
        e => panic!("unexpected error opening an image: {e:?} ({e})"),
    }
}

/// Every name and version of `pool`, cross-checked.
fn walk<M: Media, X: IndexMemory>(pool: &Pool<M, X>) -> Seen {
    let sb = *pool.superblock();
    let stats = pool.stats();
    let mut seen = Seen::new();
    let mut buf = Vec::new();
    let (mut objects, mut bytes) = (0u64, 0u64);
    let names: Vec<_> = pool.names().collect();
    for n in &names {
        let mut name_buf = [0u8; NAME_MAX];
        let name = pool.name_bytes(n.id, &mut name_buf).to_vec();
        assert!(!name.is_empty() && name.len() <= NAME_MAX);
        let versions: Vec<_> = pool.versions(&name).expect("a listed name has versions").collect();
        assert_eq!(versions.len(), n.versions as usize, "version count of {name:?}");
        assert!(versions.windows(2).all(|w| w[0].version < w[1].version), "versions of {name:?} out of order");
        assert_eq!(versions.last().map(|v| v.version), Some(n.latest));
        assert_eq!(pool.latest(&name), Ok(n.latest));
        for v in versions {
            assert_eq!(pool.stat(&name, v.version), Ok(v));
            assert!(v.lane < sb.lanes_max, "object on lane {} of {}", v.lane, sb.lanes_max);
            assert!(v.offset >= nvs_core::internals::format::DATA_OFF && v.offset + v.stored_bytes <= sb.pool_len);
            // A delta's object is no longer than the largest unit (format 2: the data of a
            // span over the whole pool; format 1: of one segment).
            let max_unit = if sb.format_version >= 2 { sb.segment_count as u64 } else { 1 } * sb.segment_len - 64;
            assert!(v.depth == 0 || v.len_bytes <= max_unit, "delta longer than the largest unit");
            buf.resize(v.len_bytes as usize, 0);
            let got = match pool.get(&name, v.version, &mut buf) {
                Ok(n) => {
                    assert_eq!(n as u64, v.len_bytes);
                    Ok(buf[..n].to_vec())
                }
                Err(e @ Error::Corrupted { kind: CorruptKind::PayloadChecksum, offset }) => {
                    assert!(sb.has_payload_checksum() && (offset == v.offset || v.depth > 0), "{e}");
                    Err(e)
                }
                // A crafted delta: its record or its chain may be bad, which a get reports.
                Err(e @ Error::Corrupted { kind: CorruptKind::DeltaRecord | CorruptKind::DeltaChain, .. })
                    if v.depth > 0 =>
                {
                    Err(e)
                }
                Err(e) => panic!("get of a listed object failed: {e:?}"),
            };
            if v.len_bytes > 0 {
                let mut short = vec![0u8; v.len_bytes as usize - 1];
                assert_eq!(
                    pool.get(&name, v.version, &mut short),
                    Err(Error::BufferTooSmall { needed_bytes: v.len_bytes })
                );
            }
            objects += 1;
            bytes += v.stored_bytes;
            assert!(seen.insert((name.clone(), v.version), (got, v.lane, v.seq)).is_none());
        }
        if n.latest < u64::MAX {
            assert_eq!(pool.stat(&name, n.latest + 1), Err(Error::NotFound));
        }
    }
    assert_eq!((objects, bytes), (stats.objects, stats.payload_bytes), "statistics disagree with the index");
    assert!(stats.segments_used <= sb.segment_count && stats.lanes <= sb.lanes_max);
    // A lane's units are its next sequence number; recovery walks only those after the
    // retention base (a lane's first kept segment says where its sequence resumes).
    let lane_units: u128 = (0..sb.lanes_max).filter_map(|l| pool.lane_info(l)).map(|i| i.units as u128).sum();
    assert!(lane_units >= stats.units as u128, "lanes hold {lane_units} units, recovery walked {}", stats.units);
    match pool.verify_all() {
        Ok(n) => {
            assert_eq!(n, objects);
            assert!(seen.values().all(|(g, _, _)| g.is_ok()), "verify_all missed a bad payload");
        }
        Err(Error::Corrupted { kind: CorruptKind::PayloadChecksum, .. }) => {
            assert!(seen.values().any(|(g, _, _)| g.is_err()), "verify_all failed where every get succeeded");
        }
        Err(e) => panic!("verify_all: {e:?}"),
    }
    seen
}

/// Write on an image that opened: a put and a batch, then reopen.
///
/// Why "everything recovered before is still there" but not "nothing else appears":
/// on *damaged* media (say a flipped commit word in the middle of a lane) recovery
/// ends the lane at the damage, the writer continues there, and a later unit of the
/// old log whose slot lines up again can become visible. No crash can leave such an
/// image (a unit exists only after the previous one committed), so the crash contract
/// is checked by `ops_crash`; here only promise 6 is held — no panic, clear errors.
fn write_phase(img: &mut Image, seen: Seen, data: &[u8]) {
    let region = img.region();
    let len = region.len() as u64;
    let mut pool = match Pool::open(region, HeapMemory::new()) {
        Ok(p) => p,
        Err(e) => panic!("opened read-only but not for writing: {e:?}"),
    };
    assert_eq!(walk(&pool), seen, "a writable open recovered something else");
    let lanes = pool.superblock().lanes_max;
    let payload = &data[..data.len().min(3000)];
    let mut written: Vec<(Vec<u8>, u64, Vec<u8>)> = Vec::new();
    let note = |r: nvs_core::Result<u64>, name: &[u8], bytes: &[u8], written: &mut Vec<_>| match r {
        Ok(v) => written.push((name.to_vec(), v, bytes.to_vec())),
        Err(Error::Full | Error::Fragmented { .. } | Error::TooLarge { .. } | Error::VersionNotIncreasing { .. }) => {}
        Err(e) => panic!("put on a recovered image: {e:?}"),
    };
    let r = pool.put(0, Object::new(b"fuzz", payload)).map(|p| p.version);
    note(r, b"fuzz", payload, &mut written);
    let (a, b) = payload.split_at(payload.len() / 2);
    let r = pool.put_batch(lanes - 1, &[Object::new(b"fuzz-a", a), Object::vectored(b"fuzz-b", &[b, a])]);
    let r = r.map_err(Error::from);
    match r {
        Ok(vs) => {
            written.push((b"fuzz-a".to_vec(), vs[0], a.to_vec()));
            written.push((b"fuzz-b".to_vec(), vs[1], [b, a].concat()));
        }
        Err(Error::Full | Error::Fragmented { .. } | Error::TooLarge { .. } | Error::VersionNotIncreasing { .. }) => {}
        Err(e) => panic!("batch on a recovered image: {e:?}"),
    }
    // A unit larger than one segment (a span of 2, if the pool has 2 segments side by
    // side free): the input's bytes repeated.
    let seg_len = pool.superblock().segment_len as usize;
    let big: Vec<u8> = data.iter().copied().cycle().take(seg_len + 200).collect();
    if !data.is_empty() {
        let r = pool.put(0, Object::new(b"fuzz-span", &big)).map(|p| p.version);
        note(r, b"fuzz-span", &big, &mut written);
    }
    let mut buf = vec![0u8; 2 * payload.len() + big.len()];
    for (name, v, bytes) in &written {
        let n = pool.get(name, *v, &mut buf).expect("get what was just put");
        assert_eq!(&buf[..n], &bytes[..], "read back what was just put");
    }
    let (region, _) = pool.close();
    match Pool::open_read_only(region, HeapMemory::new()) {
        Ok(pool) => {
            let after = walk(&pool);
            for (k, v) in &seen {
                assert_eq!(after.get(k), Some(v), "a put lost recovered object {k:?}");
            }
            for (name, v, bytes) in &written {
                let got = after.get(&(name.clone(), *v)).map(|x| &x.0);
                assert_eq!(got, Some(&Ok(bytes.clone())), "acknowledged put {name:?} v{v} lost on reopen");
            }
        }
        Err(e @ Error::Corrupted { .. }) => check_open_error(e, len),
        Err(e) => panic!("reopen after writing on a recovered image: {e:?}"),
    }
}
