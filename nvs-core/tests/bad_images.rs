//! Bad media is an error, never a crash (promise 6 of the README): zeroed, random, truncated,
//! another format version, damaged headers, stale pools — each gives `Ok` or a clear
//! error, and committed data of a valid pool is never mistaken for another's.

mod common;
use common::*;
use nvs_core::internals::format::{Superblock, FORMAT_VERSION};
use nvs_core::{CorruptKind, Error, FormatOptions, HeapMemory, Object, Pool};

fn open_bytes(bytes: &[u8]) -> nvs_core::Result<u64> {
    let mut ram = Ram::from_bytes(bytes);
    let pool = Pool::open(ram.region(), HeapMemory::new())?;
    // Read everything the index claims, to exercise the offsets it trusted.
    let mut buf = vec![0u8; bytes.len()];
    let mut n = 0;
    let names: Vec<_> = pool.names().collect();
    for info in names {
        let mut nb = [0u8; 255];
        let name = pool.name_bytes(info.id, &mut nb).to_vec();
        for v in pool.versions(&name).unwrap() {
            pool.get(&name, v.version, &mut buf)?;
            n += 1;
        }
    }
    Ok(n)
}

/// Objects in `good_pool` (fewer under miri, where every byte costs).
const PUTS: u32 = if cfg!(miri) { 12 } else { 40 };

fn good_pool() -> Vec<u8> {
    let mut ram = Ram::new(4096 + 6 * 4096, 0);
    let mut pool = format(&mut ram, 4096);
    let mut rng = Rng(3);
    for i in 0..PUTS {
        let len = rng.below(300) as usize;
        let data = rng.bytes(len);
        pool.put(i % 3, Object::vectored(format!("o{}", i % 5).as_bytes(), &[&data])).unwrap();
    }
    drop(pool);
    ram.bytes()
}

/// Zeroed, random, too-small and empty media are "not formatted".
#[test]
fn not_a_pool() {
    let len = if cfg!(miri) { 8 << 10 } else { 64 << 10 };
    assert_eq!(open_bytes(&vec![0u8; len]), Err(Error::NotFormatted));
    assert_eq!(open_bytes(&Rng(1).bytes(len)), Err(Error::NotFormatted));
    assert_eq!(open_bytes(&[]), Err(Error::NotFormatted));
}

/// A pool cut short, a flipped superblock bit and a newer format version are each named.
#[test]
fn truncated_damaged_and_newer_superblocks() {
    let img = good_pool();
    assert_eq!(open_bytes(&img).unwrap(), PUTS as u64);
    let cut = img.len() - 4096;
    assert_eq!(open_bytes(&img[..cut]), Err(Error::Corrupted { offset: 0, kind: CorruptKind::Truncated }));
    let mut flipped = img.clone();
    flipped[20] ^= 4;
    assert_eq!(open_bytes(&flipped), Err(Error::Corrupted { offset: 0, kind: CorruptKind::SuperblockChecksum }));
    let mut newer = img.clone();
    let mut sb: Superblock = bytemuck::pod_read_unaligned(&newer[..64]);
    sb.format_version = FORMAT_VERSION + 1;
    sb.checksum = sb.compute_checksum();
    newer[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    assert_eq!(open_bytes(&newer), Err(Error::UnsupportedVersion { found: FORMAT_VERSION + 1 }));
    let msg = open_bytes(&newer).unwrap_err().to_string();
    assert!(msg.contains("version 4") && msg.contains("versions 1 to 3"), "{msg}");
    // Version 0 was never written: refused too.
    sb.format_version = 0;
    sb.checksum = sb.compute_checksum();
    newer[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    assert_eq!(open_bytes(&newer), Err(Error::UnsupportedVersion { found: 0 }));
}

/// Every single-byte flip anywhere in the data area: `Ok` or `Corrupted`, never a panic.
#[test]
#[cfg_attr(miri, ignore = "thousands of recoveries: too slow under miri (fuzzed instead)")]
fn every_byte_flip_is_ok_or_corrupted() {
    let img = good_pool();
    for i in 64..img.len() {
        if img[i] == 0 && i % 7 != 0 {
            continue; // free space: sample it
        }
        let mut bad = img.clone();
        bad[i] ^= 0x10;
        match open_bytes(&bad) {
            Ok(n) => assert!(n <= PUTS as u64),
            Err(Error::Corrupted { .. }) => {}
            Err(e) => panic!("flip at {i}: unexpected {e:?}"),
        }
    }
}

/// Random bytes behind a valid superblock: every open returns, none panics.
#[test]
#[cfg_attr(miri, ignore = "pool logic, no unsafe beyond what the other tests run: too slow under miri")]
fn random_segments_behind_a_valid_superblock() {
    let img = good_pool();
    let mut rng = Rng(77);
    for _ in 0..300 {
        let mut bad = img.clone();
        let k = rng.below(200) as usize;
        for _ in 0..k {
            let i = 4096 + rng.below((img.len() - 4096) as u64) as usize;
            bad[i] = rng.next() as u8;
        }
        let _ = open_bytes(&bad);
    }
}

/// Reformatting the same media (no zeroing) shows none of the old pool's records, even
/// where the new pool reuses the same segments and lanes.
#[test]
#[cfg_attr(miri, ignore = "pool logic, no unsafe beyond what the other tests run: too slow under miri")]
fn stale_pool_is_invisible() {
    let mut ram = Ram::from_bytes(&good_pool());
    let mut o = FormatOptions::new(0x1234_5678_9abc_def0); // same id as the old pool: format must change it
    o.segment_len = Some(4096);
    o.lanes_max = 4;
    let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    assert_eq!(pool.stats().objects, 0);
    assert_eq!(pool.latest(b"o1"), Err(Error::NotFound));
    pool.put(0, Object::new(b"o1", b"new")).unwrap();
    drop(pool);
    let pool = open(&mut ram).unwrap();
    assert_eq!(pool.stats().objects, 1);
    let mut b = [0u8; 8];
    assert_eq!(pool.get(b"o1", 1, &mut b), Ok(3));
    assert_eq!(pool.latest(b"o1"), Ok(1));
}

/// Formatting one media again and again with ids of earlier generations (A, B, A) never
/// revives an earlier generation's segments.
#[test]
#[cfg_attr(miri, ignore = "pool logic, no unsafe beyond what the other tests run: too slow under miri")]
fn alternating_ids_never_revive_old_generations() {
    let mut ram = Ram::new(4096 + 8 * 4096, 0);
    for (round, id) in [0xA, 0xB, 0xA, 0xB, 0xA].into_iter().enumerate() {
        let mut o = FormatOptions::new(id);
        o.segment_len = Some(4096);
        o.lanes_max = 2;
        let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
        assert_eq!(pool.stats().objects, 0, "round {round}: an old generation came back");
        // The first generation writes both lanes (two segments), later ones lane 0 only
        // (one segment): the first generation's lane-1 segment stays on the media.
        let lanes = if round == 0 { 2 } else { 1 };
        for i in 0..(round as u32 * 3 + 2) {
            pool.put(i % lanes, Object::vectored(b"g", &[&[round as u8; 500]])).unwrap();
        }
        drop(pool);
        let pool = open(&mut ram).unwrap();
        assert_eq!(pool.stats().objects, round as u64 * 3 + 2, "round {round}");
    }
}

/// A format interrupted after it removed the old magic word leaves `NotFormatted`; a
/// format over that unsealed superblock, even with the old pool's own id, gets a fresh
/// id, so none of the old pool's segments (still on the media) comes back.
#[test]
fn format_over_an_unsealed_superblock_takes_a_fresh_id() {
    let mut ram = Ram::new(4096 + 6 * 4096, 0);
    let mut o = FormatOptions::new(0x77);
    o.segment_len = Some(4096);
    let mut pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    assert_eq!(pool.layout().pool_id, 0x77, "fresh media: the caller's id");
    pool.put(0, Object::new(b"old", b"old bytes")).unwrap();
    drop(pool);
    ram.bytes_mut()[..8].fill(0); // what a crash after format's first step leaves
    assert!(matches!(Pool::open(ram.region(), HeapMemory::new()), Err(Error::NotFormatted)));
    let pool = Pool::format(ram.region(), o, HeapMemory::new()).unwrap();
    assert_ne!(pool.layout().pool_id, 0x77);
    assert_eq!(pool.names().count(), 0, "the old pool's objects stay gone");
}

/// Regression: a forged superblock whose `segment_count * segment_len` wraps a u64
/// (2^24 segments of 2^40 bytes, `pool_len` 4096, checksum fixed up) passed the geometry
/// check, and every access then panicked. Now it is `Corrupted(Geometry)`.
#[test]
fn a_geometry_that_wraps_is_corrupted() {
    let mut img = good_pool();
    let mut sb: Superblock = bytemuck::pod_read_unaligned(&img[..64]);
    sb.segment_len = 1 << 40;
    sb.segment_count = 1 << 24;
    sb.pool_len = 4096;
    sb.checksum = sb.compute_checksum();
    img[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    assert_eq!(open_bytes(&img), Err(Error::Corrupted { offset: 0, kind: CorruptKind::Geometry }));
}

/// A flip in any byte of any valid segment header never loses a committed object
/// silently: recovery reports corruption, or every object is still there. The last
/// segment of a lane (and a lane's only one) is proven lost by its committed units
/// (`LostSegment`), a gap elsewhere by the chain.
#[test]
#[cfg_attr(miri, ignore = "hundreds of recoveries: too slow under miri")]
fn a_damaged_segment_header_is_never_silent() {
    let img = good_pool();
    let mut lost_segment = 0;
    for seg in 0..6 {
        let at = 4096 + seg * 4096;
        if img[at..at + 8] != *b"NVSSEGM\0" {
            continue;
        }
        for i in at..at + 64 {
            let mut bad = img.clone();
            bad[i] ^= 0x01;
            match open_bytes(&bad) {
                Ok(n) => assert_eq!(n, PUTS as u64, "flip at {i}: objects lost silently"),
                Err(Error::Corrupted { offset, kind: CorruptKind::LostSegment }) => {
                    assert_eq!(offset, at as u64, "flip at {i}");
                    lost_segment += 1;
                }
                Err(Error::Corrupted { .. }) => {}
                Err(e) => panic!("flip at {i}: unexpected {e:?}"),
            }
        }
    }
    assert!(lost_segment > 0, "no flip reached the free-segment check");
}

/// Retention leaves released segments free with their old units on the media (seqs below
/// their lane's next): they are legitimate, before and after the segments are reused.
#[test]
#[cfg_attr(miri, ignore = "pool logic: too slow under miri")]
fn released_segments_with_old_units_are_not_lost() {
    let mut ram = Ram::new(4096 + 6 * 4096, 0);
    let mut pool = format(&mut ram, 4096);
    let data = [7u8; 1500];
    for round in 0..6 {
        for _ in 0..5 {
            pool.put(round % 2, Object::new(b"x", &data)).unwrap();
        }
        assert!(pool.reclaim(1).unwrap() > 0, "round {round} released nothing");
        drop(pool);
        pool = open(&mut ram).unwrap();
        let latest = pool.latest(b"x").unwrap();
        assert_eq!(latest, 5 * (round as u64 + 1));
        let mut b = vec![0u8; 1500];
        assert_eq!(pool.get(b"x", latest, &mut b), Ok(1500));
    }
}

/// A flip in any byte of the header of a unit that is not its lane's newest is never
/// silent: recovery reports corruption, or every object is still there. A flip in the
/// commit or checksum word makes the slot look uncommitted (as a torn commit would), but
/// the later unit committed where the slot's length says it ends proves it was damaged
/// (`SequenceGap` at the slot); `nvs dump`'s walk reports it and goes on after it.
#[test]
#[cfg_attr(miri, ignore = "hundreds of recoveries: too slow under miri")]
fn a_damaged_unit_header_before_the_newest_is_never_silent() {
    use nvs_core::internals::format::UnitHeader;
    use nvs_core::walk::{Item, Walker};
    let img = good_pool();
    // (offset, lane, seq) of every committed unit, and the newest seq of each lane.
    let mut units = Vec::new();
    let mut ram = Ram::from_bytes(&img);
    Walker::new(&ram.region()).unwrap().walk(&mut |item| {
        if let Item::Unit(u) = item {
            units.push((u.offset, u.lane, u.seq));
        }
    });
    assert!(units.len() >= PUTS as usize, "walked {} units", units.len());
    let newest = |lane: u32| units.iter().filter(|u| u.1 == lane).map(|u| u.2).max().unwrap();
    let (mut gaps, mut checked) = (0, 0);
    for &(off, lane, seq) in units.iter().filter(|u| u.2 < newest(u.1)) {
        for i in off as usize..off as usize + 64 {
            let mut bad = img.clone();
            bad[i] ^= 0x10;
            checked += 1;
            match open_bytes(&bad) {
                Ok(n) => assert_eq!(n, PUTS as u64, "flip at {i} (lane {lane} seq {seq}): objects lost silently"),
                Err(Error::Corrupted { offset, kind: CorruptKind::SequenceGap }) => {
                    gaps += 1;
                    // In the slot itself, or (the unit was its segment's last) where the
                    // lane's next segment starts.
                    assert!(offset == off || offset % 4096 == 0, "flip at {i}: gap reported at {offset}");
                }
                Err(Error::Corrupted { .. }) => {}
                Err(e) => panic!("flip at {i}: unexpected {e:?}"),
            }
        }
    }
    assert!(checked > 0 && gaps > 0, "{checked} flips, {gaps} gaps");
    // The walk behind `nvs dump` and `salvage` reports the damaged slot and resumes.
    let &(off, _, _) = units.iter().find(|u| u.2 == 0 && units.iter().any(|v| v.1 == u.1 && v.2 == 1)).unwrap();
    let mut bad = img.clone();
    bad[off as usize] ^= 0x10;
    let h: UnitHeader = bytemuck::pod_read_unaligned(&bad[off as usize..off as usize + 64]);
    let mut ram = Ram::from_bytes(&bad);
    let region = ram.region();
    let (mut damage, mut walked) = (None, 0);
    Walker::new(&region).unwrap().walk(&mut |item| match item {
        Item::Damage(d) => damage = Some((d.offset, d.kind, d.resumed_at)),
        Item::Unit(_) => walked += 1,
        _ => {}
    });
    assert_eq!(damage, Some((off, CorruptKind::SequenceGap, Some(off + h.unit_len))));
    assert_eq!(walked, units.len() - 1, "every other unit still walked");
}

/// A span whose payload is made of valid unit headers of this very pool (a pool file
/// stored in a pool), one at every line: never read as units — not while the span
/// lives, not once retention released it, and not under a claim of one of its segments
/// that a crash tore. (A release zeroed only a covered segment's first line: its data
/// start kept a payload line, which recovery read as a committed unit there, "lost".)
#[test]
#[cfg_attr(miri, ignore = "pool logic: too slow under miri")]
fn a_payload_of_this_pools_unit_headers_is_never_read_as_one() {
    use nvs_core::internals::format::{commit_word, UnitHeader, UNIT_END_OF_STREAM};
    let mut ram = Ram::new(4096 + 8 * 4096, 0);
    let mut pool = format(&mut ram, 4096);
    let pool_id = pool.layout().pool_id;
    let mut h = UnitHeader {
        commit: 0,
        seq: 1 << 20,
        unit_len: 64,
        object_count: 0,
        lane: 0,
        flags: UNIT_END_OF_STREAM,
        base: 0,
        reserved: 0,
        checksum: 0,
    };
    h.checksum = h.compute_checksum(pool_id);
    h.commit = commit_word(pool_id, 0, h.seq, h.checksum);
    let payload = bytemuck::bytes_of(&h).repeat(3 * 4096 / 64);
    pool.put(0, Object::new(b"small", b"x")).unwrap();
    pool.put(0, Object::new(b"pool", &payload)).unwrap(); // a span of segments 1..=4
    drop(pool);
    let pool = open(&mut ram).unwrap();
    let mut back = vec![0u8; payload.len()];
    assert_eq!(pool.get(b"pool", 1, &mut back), Ok(payload.len()));
    assert_eq!(back, payload);
    drop(pool);

    let mut pool = open(&mut ram).unwrap();
    pool.put(0, Object::new(b"small", &[b'y'; 3900])).unwrap(); // past the span's room: segment 5
    pool.put(0, Object::new(b"pool", b"z")).unwrap();
    assert!(pool.reclaim(1).unwrap() > 0);
    drop(pool);
    let pool = open(&mut ram).expect("the released span's payload read as a lost segment");
    assert_eq!(pool.latest(b"pool"), Ok(2));
    drop(pool);

    // A claim of covered segment 2 torn by a crash: its magic and pool id words persisted.
    let seg2 = 4096 + 2 * 4096;
    ram.bytes_mut()[seg2..seg2 + 8].copy_from_slice(&nvs_core::internals::format::SEGMENT_MAGIC.to_le_bytes());
    ram.bytes_mut()[seg2 + 8..seg2 + 16].copy_from_slice(&pool_id.to_le_bytes());
    let mut pool = open(&mut ram).expect("a torn claim over a released span's payload");
    assert_eq!(pool.latest(b"small"), Ok(2));
    for v in 3..12u64 {
        assert_eq!(pool.put(0, Object::new(b"small", &[v as u8; 1000])).map(|p| p.version), Ok(v));
    }
}
