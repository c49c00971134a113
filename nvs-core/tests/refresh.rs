//! A read-only pool's refresh catches up (reads only what was committed since) and must
//! give exactly what a recovery of the same media gives: random workloads on a writer —
//! puts on several lanes, batches, objects spanning segments, deltas, retention that
//! releases and reuses segments, lanes closed and detached, the writer reopened — with
//! a read-only pool over the same memory refreshed after every operation or group of
//! operations, and compared after each refresh with a pool freshly opened on the media.

mod common;

use common::{Op, Ram, Recorder, Rng};
use nvs_core::{DeltaOptions, Error, FormatOptions, HeapMemory, Object, Pool, Region, NAME_MAX};

type P = Pool<Region, HeapMemory>;

const LANES: u32 = 4;

/// Everything a reader can observe of `p`: per name (in `names` order) its bytes, its
/// versions' facts, `latest`, and per version `stat`, `get` and `meta`; per lane
/// `lane_info`; the statistics. Bytes of every version when `all_bytes`, else of the
/// latest of each name.
fn observe(p: &P, all_bytes: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut name_buf = [0u8; NAME_MAX];
    // A name's place in the listing, not its id: ids are of one index build (`NameId`).
    for (at, n) in p.names().enumerate() {
        let name = p.name_bytes(n.id, &mut name_buf).to_vec();
        out.push(format!("name {at} {:?} {} {}", name, n.versions, n.latest));
        out.push(format!("latest {:?}", p.latest(&name)));
        for v in p.versions(&name).unwrap() {
            out.push(format!("version {v:?} stat {:?}", p.stat(&name, v.version)));
            if all_bytes || v.version == n.latest {
                let mut buf = vec![0u8; v.len_bytes as usize];
                let got = p.get(&name, v.version, &mut buf);
                out.push(format!("get {got:?} {:016x}", nvs_core::internals::hash::hash64(0, &buf)));
                let mut meta = [0u8; 256];
                let m = p.meta(&name, v.version, &mut meta);
                out.push(format!("meta {m:?} {:?}", m.map(|n| meta[..n].to_vec())));
            }
        }
    }
    for lane in 0..LANES {
        out.push(format!("lane {lane} {:?}", p.lane_info(lane)));
    }
    out.push(format!("stats {:?} free {}", p.stats(), p.free_segments()));
    out
}

/// Every (name, version) in `p` (but a stale reader's names whose bytes are gone).
fn objects(p: &P) -> std::collections::BTreeSet<(Vec<u8>, u64)> {
    let mut name_buf = [0u8; NAME_MAX];
    let mut out = std::collections::BTreeSet::new();
    for n in p.names() {
        let name = p.name_bytes(n.id, &mut name_buf).to_vec();
        if name.is_empty() {
            continue;
        }
        out.extend(p.versions(&name).unwrap().map(|v| (name.clone(), v.version)));
    }
    out
}

/// A region over `ram` (a second or third view of the same memory).
fn view(ram: &mut Ram) -> Region {
    ram.region()
}

fn format_pool(ram: &mut Ram, seed: u64, segment_len: u64) -> P {
    let mut o = FormatOptions::new(0x5eed ^ seed);
    o.segment_len = Some(segment_len);
    o.lanes_max = LANES;
    o.payload_checksum = seed.is_multiple_of(2);
    let mut p = Pool::format(view(ram), o, HeapMemory::new()).unwrap();
    p.set_delta_options(delta_options()).unwrap();
    p
}

fn delta_options() -> DeltaOptions {
    DeltaOptions { chunk_bytes: 64, full_every: 4, ..DeltaOptions::default() }
}

/// The names a workload uses: a few every lane writes, and one per lane of its own.
fn name_of(rng: &mut Rng, lane: u32) -> String {
    match rng.below(3) {
        0 => format!("shared{}", rng.below(4)),
        1 => format!("lane{lane}"),
        _ => format!("n{}", rng.below(40)),
    }
}

/// One random operation on the writer. `Full` (and `Fragmented`) are answered by
/// retention, as a writer under retention would.
fn step(rng: &mut Rng, w: &mut P, ram: &mut Ram, segment_len: u64) {
    let lane = rng.below(LANES as u64) as u32;
    let r = match rng.below(100) {
        0..=44 => {
            let name = name_of(rng, lane);
            let len = rng.below(300) as usize;
            let bytes = rng.bytes(len);
            let meta_len = rng.below(3) as usize * 7;
            let meta = rng.bytes(meta_len);
            w.put(lane, Object::new(&name, &bytes).meta(&meta)).map(|_| ())
        }
        45..=59 => {
            let count = 2 + rng.below(4) as usize;
            let names: Vec<String> = (0..count).map(|k| format!("{}b{k}", name_of(rng, lane))).collect();
            let payloads: Vec<Vec<u8>> = (0..count)
                .map(|_| {
                    let len = rng.below(200) as usize;
                    rng.bytes(len)
                })
                .collect();
            let objects: Vec<Object<'_>> = names.iter().zip(&payloads).map(|(n, b)| Object::new(n, b)).collect();
            w.put_batch(lane, &objects).map(|_| ()).map_err(Error::from)
        }
        60..=64 => {
            // Spans two or three segments.
            let len = (segment_len + rng.below(segment_len + segment_len / 2)) as usize;
            let bytes = rng.bytes(len);
            w.put(lane, Object::new(&format!("big{}", rng.below(3)), &bytes)).map(|_| ())
        }
        65..=79 => {
            // A delta of a name's latest version: a few 64-byte chunks changed.
            let name = format!("grid{}", rng.below(3));
            match w.latest(&name) {
                Ok(parent) => {
                    let len = w.stat(&name, parent).unwrap().len_bytes as usize;
                    let mut bytes = vec![0u8; len];
                    w.get(&name, parent, &mut bytes).unwrap();
                    let at = rng.below(len as u64 / 64) * 64;
                    let changed = rng.bytes(64);
                    bytes[at as usize..at as usize + 64].copy_from_slice(&changed);
                    let ranges = [(at, 64u64)];
                    w.put(lane, Object::new(&name, &bytes).delta(parent, &ranges.as_slice())).map(|_| ())
                }
                Err(_) => {
                    let bytes = rng.bytes(1024);
                    w.put(lane, Object::new(&name, &bytes)).map(|_| ())
                }
            }
        }
        80..=86 => w.reclaim(1 + rng.below(3) as u32).map(|_| ()),
        87..=91 => w.close_lane(lane),
        92..=95 => w.detach_lane(lane),
        96..=97 => {
            // A lane taken for writing: joins (claims a segment) before any put.
            let mut l = w.lane(lane).unwrap();
            l.put(Object::new(&format!("lane{lane}"), b"joined")).map(|_| ())
        }
        _ => {
            // The writer closes and opens again (its open-time repair, a fresh cursor).
            let fresh = Pool::open(view(ram), HeapMemory::new()).unwrap();
            let old = std::mem::replace(w, fresh);
            drop(old);
            w.set_delta_options(delta_options()).unwrap();
            Ok(())
        }
    };
    match r {
        Ok(()) => {}
        Err(Error::Full | Error::Fragmented { .. }) => {
            w.reclaim(1).unwrap();
        }
        Err(e) => panic!("unexpected {e:?}"),
    }
}

/// One seeded workload of `ops` operations; returns (refreshes, catch-ups).
fn run(seed: u64, ops: usize, segment_len: u64, media_len: usize) -> (u64, u64) {
    let mut ram = Ram::new(media_len, 0xa5);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed.wrapping_mul(0x1000_0000_01b3));
    let mut w = format_pool(&mut ram, seed, segment_len);
    let mut reader = Pool::open_read_only(view(&mut ram), HeapMemory::new()).unwrap();
    let mut refreshes = 0u64;
    let mut done = 0usize;
    while done < ops {
        // After every operation, or after a group of them.
        let group = if rng.below(3) == 0 { 1 + rng.below(12) as usize } else { 1 };
        for _ in 0..group {
            step(&mut rng, &mut w, &mut ram, segment_len);
        }
        done += group;
        let mark = reader.index_mark();
        let known = objects(&reader);
        reader.refresh().unwrap();
        refreshes += 1;
        // What a follower reads as new: exactly the objects the refresh added.
        if let Some(new) = reader.objects_after(mark) {
            let mut name_buf = [0u8; NAME_MAX];
            let mut all = known.clone();
            for (id, info) in new {
                let name = reader.name_bytes(id, &mut name_buf).to_vec();
                assert!(all.insert((name, info.version)), "seed {seed}: an object listed as new was known");
            }
            assert_eq!(all, objects(&reader), "seed {seed}, after {done} operations: objects_after missed some");
        }
        let fresh = Pool::open_read_only(view(&mut ram), HeapMemory::new()).unwrap();
        let all_bytes = refreshes.is_multiple_of(16);
        let (a, b) = (observe(&reader, all_bytes), observe(&fresh, all_bytes));
        if a != b {
            let diff = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
            panic!(
                "seed {seed}, after {done} operations: refreshed pool differs from a fresh open at line {diff}:\n  \
                 refreshed {:?}\n  fresh     {:?}",
                a.get(diff),
                b.get(diff)
            );
        }
    }
    (refreshes, reader.catch_ups())
}

/// Several seeds, a few thousand operations in all: every refresh equals a fresh open,
/// and most refreshes caught up (so the catch-up is what was tested).
#[test]
fn refresh_catches_up_to_what_recovery_finds() {
    let (mut refreshes, mut catch_ups) = (0, 0);
    // Under miri (which checks the catch-up's memory accesses, not its coverage) one
    // short workload: the full one would take hours there.
    let (seeds, ops) = if cfg!(miri) { (1, 12) } else { (6, 500) };
    for seed in 0..seeds {
        let (r, c) = run(seed, ops, 4096, 256 << 10);
        refreshes += r;
        catch_ups += c;
    }
    eprintln!("{refreshes} refreshes, {catch_ups} caught up");
    assert!(catch_ups * 2 > refreshes, "only {catch_ups} of {refreshes} refreshes caught up");
}

/// The same with larger segments: lanes chain rarely, spans are long.
#[test]
fn refresh_catches_up_with_larger_segments() {
    let (r, c) = run(100, if cfg!(miri) { 8 } else { 600 }, 16 << 10, 1 << 20);
    assert!(c * 2 > r, "only {c} of {r} refreshes caught up");
}

/// The stores (in program order) of a workload on several lanes with retention: puts,
/// a batch, objects spanning segments, reclaims (a truncate unit, then the released
/// headers zeroed), a close. Returns the image before it and the stores.
fn recorded_workload(seed: u64) -> (Vec<u8>, Vec<(usize, Vec<u8>)>) {
    let rec = Recorder::new(vec![0x5a; 4096 + 24 * 4096]);
    let mut o = FormatOptions::new(7 + seed);
    o.segment_len = Some(4096);
    o.lanes_max = 3;
    let mut w = Pool::format(&rec, o, HeapMemory::new()).unwrap();
    let before = rec.mem.borrow().clone();
    rec.ops.borrow_mut().clear();
    let mut rng = Rng(seed + 1);
    for i in 0..60u64 {
        let lane = rng.below(3) as u32;
        let name = format!("{}{}", ["a", "b", "c"][rng.below(3) as usize], rng.below(3));
        let r = match i % 12 {
            5 => {
                let (x, y) = (rng.bytes(100), rng.bytes(150));
                w.put_batch(lane, &[Object::new(&name, &x), Object::new("batch", &y)]).map(|_| ()).map_err(Error::from)
            }
            8 => {
                let big = rng.bytes(6000);
                w.put(lane, Object::new("big", &big)).map(|_| ())
            }
            11 => w.reclaim(1).map(|_| ()),
            _ => {
                let len = rng.below(900) as usize;
                let data = rng.bytes(len);
                w.put(lane, Object::new(&name, &data)).map(|_| ())
            }
        };
        match r {
            Ok(()) => {}
            Err(Error::Full | Error::Fragmented { .. }) => {
                w.reclaim(1).unwrap();
            }
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    w.close_lane(0).unwrap();
    drop(w);
    let stores = rec
        .ops
        .borrow()
        .iter()
        .filter_map(|op| match op {
            Op::Store { off, bytes } => Some((*off, bytes.clone())),
            Op::Fence => None,
        })
        .collect();
    (before, stores)
}

/// Crash images: the workload's stores applied in order and cut after each of them (a
/// truncate unit committed while the segments it releases still have valid headers, a
/// claim's header without its unit, a half-written unit, ...). A read-only pool that
/// last refreshed at an earlier cut (the previous one, or one at random) and refreshes
/// at this one must give what a pool opened on this image gives.
#[test]
fn refresh_after_a_crash_image_equals_recovery() {
    if cfg!(miri) {
        // Hundreds of opens per image set: hours under miri; the random workloads above
        // run the same catch-up code there.
        return;
    }
    let (mut refreshes, mut catch_ups) = (0u64, 0u64);
    for seed in 0..3 {
        let (before, stores) = recorded_workload(seed);
        let mut rng = Rng(seed + 77);
        let mut ram = Ram::from_bytes(&before);
        let mut reader = Pool::open_read_only(view(&mut ram), HeapMemory::new()).unwrap();
        let mut applied = 0usize;
        let image = |upto: usize| {
            let mut img = before.clone();
            for (off, bytes) in &stores[..upto] {
                img[*off..*off + bytes.len()].copy_from_slice(bytes);
            }
            img
        };
        let mut cut = 0usize;
        while cut < stores.len() {
            cut = (cut + 1 + rng.below(3) as usize).min(stores.len());
            if rng.below(8) == 0 {
                // Catch up from an earlier cut, not the last one.
                applied = rng.below(cut as u64) as usize;
                ram.bytes_mut()[..before.len()].copy_from_slice(&image(applied));
                reader.refresh().unwrap();
                refreshes += 1;
            }
            for (off, bytes) in &stores[applied..cut] {
                ram.bytes_mut()[*off..*off + bytes.len()].copy_from_slice(bytes);
            }
            applied = cut;
            reader.refresh().unwrap();
            refreshes += 1;
            let mut fresh_ram = Ram::from_bytes(&image(cut));
            let fresh = Pool::open_read_only(fresh_ram.region(), HeapMemory::new()).unwrap();
            let (a, b) = (observe(&reader, true), observe(&fresh, true));
            if a != b {
                let diff = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
                panic!(
                    "seed {seed}, cut after store {cut}: refreshed pool differs from recovery at line {diff}:\n  \
                     refreshed {:?}\n  recovered {:?}",
                    a.get(diff),
                    b.get(diff)
                );
            }
        }
        catch_ups += reader.catch_ups();
    }
    eprintln!("{refreshes} crash-image refreshes, {catch_ups} caught up");
    assert!(catch_ups * 2 > refreshes, "only {catch_ups} of {refreshes} refreshes caught up");
}
