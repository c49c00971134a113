//! A writer process reading another process's lane (the MPI-rank pattern: `open_lanes`,
//! `refresh`, `get(Key::on(..))`) while that lane's writer reclaims and reuses segments. Such a
//! reader used to trust its index as if only its own process wrote the pool: no re-check
//! after the copy, the read hint's name-hash check skipped, plain copies of memory
//! another process stores to. It returned another name's or version's bytes as Ok, or
//! called a healthy pool corrupted. Two writers of lanes of one pool in one process
//! (each open is its own file description, so each holds its own lane lock, as two
//! processes would), interleaved deterministically: every read is the bytes of that name
//! and version, or NotFound (released), never other bytes and never `Corrupted` — by a
//! copy (`get` of a `Key::on`) and in place (`with_bytes`, which checked the checksum before the
//! segment and so called a released object corrupted).
#![cfg(not(miri))]

use nvs_core::Key;
use nvs_core::Object;
use nvs_std::{CreateOptions, FilePool};

/// The bytes of (`name`, `version`): which is which can be told from them.
fn content(name: u64, version: u64) -> Vec<u8> {
    let len = 24 + ((name * 131 + version * 71) % 400) as usize;
    (0..len).map(|i| (i as u64 * 7 + name * 101 + version * 13) as u8).collect()
}

fn run(checksums: bool) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lanes.pool");
    let opts = CreateOptions::new().segment_len(4096).lanes_max(2).lane_names(true).payload_checksum(checksums);
    FilePool::create(&path, 160 << 10, &opts).unwrap().close().unwrap();
    let mut reader = FilePool::open_lanes(&path, Some(&[0])).unwrap();
    let mut writer = FilePool::open_lanes(&path, Some(&[1])).unwrap();
    let names: Vec<String> = (0..4).map(|n| format!("n{n}")).collect();
    let mut latest = [0u64; 4];
    let (mut good, mut gone, mut wrong) = (0u64, 0u64, Vec::new());
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut buf = vec![0u8; 1024];
    for step in 0..20_000u64 {
        let r = next();
        match r % 8 {
            // The other process's puts and its retention (which reuses segments).
            0..=3 => {
                let n = (r >> 8) % 4;
                latest[n as usize] += 1;
                let v = writer.put(1, Object::new(&names[n as usize], &content(n, latest[n as usize]))).unwrap();
                assert_eq!(v.version, latest[n as usize]);
            }
            4 if step % 3 == 0 => {
                writer.reclaim(1 + (r >> 8) as u32 % 2).unwrap();
            }
            5 if (r >> 8) % 16 == 0 => reader.refresh().unwrap(),
            // Reads of the other lane, by this process's possibly stale index.
            _ => {
                let n = (r >> 8) % 4;
                // The newest few this reader knows of: some kept, some released (and
                // their segments reused) since its last refresh.
                let Ok(known) = reader.latest(Key::on(1, &names[n as usize])) else { continue };
                let v = known.saturating_sub((r >> 16) % 4).max(1);
                // A copy, or the bytes lent in place (only lane 1 has these names).
                let got = match (r >> 24) % 2 {
                    0 => reader.get(Key::on(1, &names[n as usize]), v, &mut buf).map(|len| buf[..len].to_vec()),
                    _ => reader.with_bytes(&names[n as usize], v, |b| b.to_vec()),
                };
                match got {
                    Ok(b) if b == content(n, v) => good += 1,
                    Ok(b) => wrong.push(format!("{} v{v}: {} other bytes", names[n as usize], b.len())),
                    Err(e) if e.core() == Some(nvs_core::Error::NotFound) => gone += 1,
                    Err(e) => wrong.push(format!("{} v{v}: {e}", names[n as usize])),
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong reads (of {}), first: {:?}",
        wrong.len(),
        good + gone,
        &wrong[..wrong.len().min(5)]
    );
    (good, gone, wrong.len() as u64)
}

#[test]
fn a_lane_writer_reading_a_reclaiming_lane_gets_true_bytes_or_not_found() {
    for checksums in [true, false] {
        let (good, gone, _) = run(checksums);
        println!("checksums {checksums}: {good} reads true, {gone} released (NotFound), 0 wrong");
        // Both outcomes were exercised: reads of kept versions, and of released ones.
        assert!(good > 1000 && gone > 100, "good {good}, gone {gone}");
    }
}

/// A reader copying a span while its writer releases it: retention zeroes the first line
/// of each segment the span covers before it invalidates the head's header, and a copy
/// made between the two found the head still there and zeros in the payload. It is
/// released, not damaged: NotFound (it was a false `Corrupted { PayloadChecksum }`, a few
/// a minute in the multi-process stress). The release's first step is made by hand here.
#[test]
fn a_span_caught_halfway_through_its_release_is_not_found_not_corrupted() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("span.pool");
    let opts = CreateOptions::new().segment_len(16 << 10).lanes_max(2).lane_names(true);
    let mut w = FilePool::create(&path, 1 << 20, &opts).unwrap();
    let big: Vec<u8> = (0..40_000u32).map(|i| (i % 251) as u8).collect();
    w.put(0, Object::new("big", &big)).unwrap();
    let info = w.stat("big", 1).unwrap();
    w.close().unwrap();
    let reader = FilePool::open(&path, nvs_std::Access::ReadOnly).unwrap();
    let lanes = FilePool::open_lanes(&path, Some(&[1])).unwrap();
    assert_eq!(reader.get_vec("big", 1).unwrap(), big);
    // The first segment the span covers: the one after its head's, whose first line is
    // payload bytes until the release zeroes it.
    let layout = reader.layout();
    let data_off = 4096u64;
    let head = (info.offset - 1 - data_off) / layout.segment_len;
    let covered = data_off + (head + 1) * layout.segment_len;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&[0u8; 64], covered).unwrap();
    for (who, p) in [("a read-only reader", &reader), ("a writer of another lane", &lanes)] {
        let got = p.get_vec(Key::on(0, "big"), 1).map(|b| b.len());
        assert!(matches!(got, Err(ref e) if e.core() == Some(nvs_core::Error::NotFound)), "{who}: {got:?}");
        let lent = p.with_bytes("big", 1, |b| b.len());
        assert!(matches!(lent, Err(ref e) if e.core() == Some(nvs_core::Error::NotFound)), "{who}: {lent:?}");
    }
}
