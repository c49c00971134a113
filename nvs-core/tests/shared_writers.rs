//! Writers of one pool in several processes (`Pool::open_lanes`), modelled by several
//! pools over one media in one process: each writes its own lanes, segment claims never
//! collide (the claim reads the other writers' headers under the claim lock), retention
//! releases only a writer's own segments, a refresh sees the others' objects, and a
//! recovery of the whole media finds every acknowledged object byte-exact.

mod common;
use common::Rng;
use common::*;
use nvs_core::Key;
use nvs_core::{Error, FormatOptions, HeapMemory, Media, Object, Pool, Region, Sum};
use std::sync::atomic::{AtomicBool, Ordering};

/// A region whose claim lock is a real lock (a spin lock; nvs-std's is a file lock), for
/// pools on several threads.
struct Shared<'a> {
    region: &'a Region,
    lock: &'a AtomicBool,
}

impl Media for Shared<'_> {
    fn len(&self) -> usize {
        self.region.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.region.read(off, dst)
    }
    fn load_word(&self, off: usize) -> u64 {
        self.region.load_word(off)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        self.region.store_nt(off, src)
    }
    fn store_nt_summed(&self, off: usize, src: &[u8], sum: &mut Sum) {
        self.region.store_nt_summed(off, src, sum)
    }
    fn read_summed(&self, off: usize, dst: &mut [u8], sum: &mut Sum) {
        self.region.read_summed(off, dst, sum)
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        self.region.store_word_nt(off, word)
    }
    fn store(&self, off: usize, src: &[u8]) {
        self.region.store(off, src)
    }
    fn flush(&self, off: usize, len: usize) {
        self.region.flush(off, len)
    }
    fn fence(&self) {
        self.region.fence()
    }
    fn lock_claims(&self) -> nvs_core::Result<()> {
        while self.lock.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            std::hint::spin_loop();
        }
        Ok(())
    }
    fn unlock_claims(&self) {
        self.lock.store(false, Ordering::Release);
    }
}

fn format_shared(ram: &mut Ram, segment_len: u64) {
    let mut o = FormatOptions::new(0x5ba2_ed00);
    o.segment_len = Some(segment_len);
    o.lanes_max = 4;
    o.lane_names = true;
    drop(Pool::format(ram.region(), o, HeapMemory::new()).expect("format"));
}

fn payload(lane: u32, step: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u64 * 7 + step * 13 + lane as u64 * 101) as u8).collect()
}

/// Every lane's `t` holds versions 1..=steps with `payload(lane, v, len(v))`.
fn check_all(pool: &Pool<Region, HeapMemory>, lanes: &[u32], steps: u64, len: impl Fn(u64) -> usize) {
    for &lane in lanes {
        assert_eq!(pool.latest(Key::on(lane, "t")), Ok(steps), "lane {lane}");
        for v in 1..=steps {
            let mut buf = vec![0u8; len(v)];
            assert_eq!(pool.get(Key::on(lane, "t"), v, &mut buf), Ok(len(v)), "lane {lane} v{v}");
            assert!(buf == payload(lane, v, len(v)), "lane {lane} v{v}: other bytes");
        }
    }
}

#[test]
fn two_writers_claim_segments_in_turn_and_never_collide() {
    let mut ram = Ram::new(1 << 20, 0);
    format_shared(&mut ram, 4096);
    let region = ram.region();
    let mut a = Pool::open_lanes(&region, HeapMemory::new(), &[0]).unwrap();
    let mut b = Pool::open_lanes(&region, HeapMemory::new(), &[1]).unwrap();
    // Sizes that need new segments often, and spans of 2 and 3 segments now and then.
    let len = |v: u64| if v.is_multiple_of(9) { 9000 } else { 300 + (v as usize * 37) % 1500 };
    // Miri runs the portable media path, slowly: fewer puts there (a span among them).
    let steps = if cfg!(miri) { 10 } else { 60 };
    for v in 1..=steps {
        assert_eq!(a.put(0, Object::new("t", &payload(0, v, len(v)))).unwrap().version, v);
        assert_eq!(b.put(1, Object::new("t", &payload(1, v, len(v)))).unwrap().version, v);
    }
    // A writer does not write another's lane, and sees its objects after a refresh.
    assert_eq!(a.put(1, Object::new("t", b"x")), Err(Error::LaneNotOwned { lane: 1 }));
    assert_eq!(a.close_lane(1), Err(Error::LaneNotOwned { lane: 1 }));
    assert!(matches!(a.lane(2), Err(Error::LaneNotOwned { lane: 2 })));
    a.refresh().unwrap();
    assert_eq!(a.latest(Key::on(1, "t")), Ok(steps));
    drop((a, b));
    let pool = Pool::open(ram.region(), HeapMemory::new()).expect("recovery of both writers' lanes");
    check_all(&pool, &[0, 1], steps, len);
    assert!(pool.layout().lane_names);
}

#[test]
fn only_a_pool_with_lane_names_takes_writers_in_several_processes() {
    let mut ram = Ram::new(1 << 20, 0);
    drop(format(&mut ram, 4096));
    assert!(matches!(Pool::open_lanes(ram.region(), HeapMemory::new(), &[0]), Err(Error::NeedsLaneNames)));
    format_shared(&mut ram, 4096);
    assert!(matches!(
        Pool::open_lanes(ram.region(), HeapMemory::new(), &[7]),
        Err(Error::NoSuchLane { lane: 7, lanes_max: 4 })
    ));
}

#[test]
fn retention_of_one_writer_leaves_the_other_writers_segments_alone() {
    let mut ram = Ram::new(1 << 20, 0);
    format_shared(&mut ram, 4096);
    let region = ram.region();
    let mut a = Pool::open_lanes(&region, HeapMemory::new(), &[0]).unwrap();
    let mut b = Pool::open_lanes(&region, HeapMemory::new(), &[1]).unwrap();
    let len = |_| 1000;
    // Miri: fewer puts (still several segments per lane before and after the reclaim).
    let (first, total) = if cfg!(miri) { (16, 30) } else { (40, 120) };
    for v in 1..=first {
        a.put(0, Object::new("t", &payload(0, v, 1000))).unwrap();
        b.put(1, Object::new("t", &payload(1, v, 1000))).unwrap();
    }
    assert!(a.reclaim(2).unwrap() > 0);
    // B's old versions are all there, and both go on claiming (A reuses what it freed).
    for v in first + 1..=total {
        a.put(0, Object::new("t", &payload(0, v, 1000))).unwrap();
        b.put(1, Object::new("t", &payload(1, v, 1000))).unwrap();
        if v % 30 == 0 {
            a.reclaim(2).unwrap();
        }
    }
    drop((a, b));
    let pool = Pool::open(ram.region(), HeapMemory::new()).unwrap();
    check_all(&pool, &[1], total, len);
    assert_eq!(pool.latest(Key::on(0, "t")), Ok(total));
    assert!(pool.stat(Key::on(0, "t"), 1).is_err(), "A's reclaim released its own old versions");
}

/// A writer that knows another's objects (a refresh) and then claims a segment the other
/// released (and it was not told): its index still holds the other's entries there,
/// which now lie in its own segment. Reads of them answer `NotFound`, never its own
/// bytes (they did, found by the checker's cross-reads family).
#[test]
fn a_writer_reusing_a_segment_another_released_does_not_read_its_own_bytes_as_the_others() {
    let mut ram = Ram::new(64 << 10, 0);
    format_shared(&mut ram, 4096);
    let region = ram.region();
    let mut a = Pool::open_lanes(&region, HeapMemory::new(), &[0]).unwrap();
    let mut b = Pool::open_lanes(&region, HeapMemory::new(), &[1]).unwrap();
    // One segment per version (2,500 bytes), so B's reclaim releases whole segments.
    for v in 1..=3 {
        b.put(1, Object::new("t", &payload(1, v, 2500))).unwrap();
    }
    a.refresh().unwrap();
    assert_eq!(a.latest(Key::on(1, "t")), Ok(3));
    assert!(b.reclaim(1).unwrap() >= 2);
    // A fills every free segment, the released ones included.
    let mut v = 0;
    while a.put(0, Object::new("t", &payload(0, v + 1, 2500))).is_ok() {
        v += 1;
    }
    assert!(v >= 2, "A took {v} segments");
    for old in 1..=2 {
        let mut buf = vec![0u8; 2500];
        assert_eq!(a.get(Key::on(1, "t"), old, &mut buf), Err(Error::NotFound), "B's v{old}");
    }
    let mut buf = vec![0u8; 2500];
    assert_eq!(a.get(Key::on(1, "t"), 3, &mut buf), Ok(2500));
    assert!(buf == payload(1, 3, 2500));
}

#[test]
fn writers_on_threads_over_one_media_claim_under_the_lock() {
    // Miri runs the portable media path, whose stores are plain: fewer puts there.
    let puts = if cfg!(miri) { 6 } else { 150 };
    let mut ram = Ram::new(4 << 20, 0);
    format_shared(&mut ram, 4096);
    let region = ram.region();
    let lock = AtomicBool::new(false);
    let len = |v: u64| 200 + (v as usize * 131) % 6000;
    // Each writer opens (recovers) before any writes: a recovery reading words another
    // thread is storing is a data race in Rust's model (processes do not share it), and
    // what is checked here is the claims.
    let pools: Vec<_> = (0..4u32)
        .map(|lane| Pool::open_lanes(Shared { region: &region, lock: &lock }, HeapMemory::new(), &[lane]).unwrap())
        .collect();
    std::thread::scope(|t| {
        for (lane, mut p) in (0..4u32).zip(pools) {
            t.spawn(move || {
                for v in 1..=puts {
                    assert_eq!(p.put(lane, Object::new("t", &payload(lane, v, len(v)))).unwrap().version, v);
                }
            });
        }
    });
    let pool = Pool::open(ram.region(), HeapMemory::new()).expect("recovery");
    check_all(&pool, &[0, 1, 2, 3], puts, len);
}

/// Everything a writer process can observe of `p`, order-independent (a writer learns
/// names in the order puts and refreshes met them, a recovery in lane order): per name,
/// its lane, versions and their facts, bytes and metadata; per lane its info.
fn observe<M: Media>(p: &Pool<M, HeapMemory>, lanes: u32) -> std::collections::BTreeSet<String> {
    let mut out = std::collections::BTreeSet::new();
    let mut name_buf = [0u8; nvs_core::NAME_MAX];
    for n in p.names() {
        let name = p.name_bytes(n.id, &mut name_buf).to_vec();
        out.insert(format!("name {name:?} lane {:?} versions {} latest {}", n.lane, n.versions, n.latest));
        for v in p.versions_of(n.id) {
            let mut buf = vec![0u8; v.len_bytes as usize];
            let got = p.get(Key::on(v.lane, &name), v.version, &mut buf);
            let mut meta = [0u8; 64];
            let m = p.meta(Key::on(v.lane, &name), v.version, &mut meta).map(|k| meta[..k].to_vec());
            out.insert(format!(
                "{name:?} {v:?} get {got:?} {:016x} meta {m:?}",
                nvs_core::internals::hash::hash64(0, &buf)
            ));
        }
    }
    for lane in 0..lanes {
        out.insert(format!("lane {lane} {:?}", p.lane_info(lane)));
    }
    out
}

/// Random bytes, fewer than `n`.
fn some(rng: &mut Rng, n: u64) -> Vec<u8> {
    let len = rng.below(n) as usize;
    rng.bytes(len)
}

/// One random operation of writer `w` on one of `own` lanes; `Full` is answered by
/// retention, as a writer under retention would.
fn writer_step<M: Media>(rng: &mut Rng, w: &mut Pool<M, HeapMemory>, own: [u32; 2], segment_len: u64) {
    let lane = own[rng.below(2) as usize];
    let name = format!("n{}", rng.below(6));
    let r = match rng.below(100) {
        0..=49 => {
            let bytes = some(rng, 1500);
            let meta = some(rng, 3 * 7);
            w.put(lane, Object::new(&name, &bytes).meta(&meta)).map(|_| ())
        }
        50..=64 => {
            let names: Vec<String> = (0..3).map(|k| format!("{name}b{k}")).collect();
            let payloads: Vec<Vec<u8>> = (0..3).map(|_| some(rng, 400)).collect();
            let objects: Vec<Object<'_>> = names.iter().zip(&payloads).map(|(n, b)| Object::new(n, b)).collect();
            w.put_batch(lane, &objects).map(|_| ()).map_err(Error::from)
        }
        65..=71 => {
            // Spans two or three segments.
            let len = segment_len + rng.below(segment_len + segment_len / 2);
            let bytes = rng.bytes(len as usize);
            w.put(lane, Object::new("big", &bytes)).map(|_| ())
        }
        72..=81 => match w.latest(Key::on(lane, "grid")) {
            // A delta of the lane's latest grid: one 64-byte chunk changed.
            Ok(parent) => {
                let mut bytes = vec![0u8; w.stat(Key::on(lane, "grid"), parent).unwrap().len_bytes as usize];
                w.get(Key::on(lane, "grid"), parent, &mut bytes).unwrap();
                let at = rng.below(bytes.len() as u64 / 64) * 64;
                bytes[at as usize..at as usize + 64].copy_from_slice(&rng.bytes(64));
                let ranges = [(at, 64u64)];
                w.put(lane, Object::new("grid", &bytes).delta(parent, &ranges.as_slice())).map(|_| ())
            }
            Err(_) => w.put(lane, Object::new("grid", &rng.bytes(1024))).map(|_| ()),
        },
        82..=89 => w.reclaim(1 + rng.below(3) as u32).map(|_| ()),
        90..=94 => w.close_lane(lane),
        _ => w.detach_lane(lane),
    };
    match r {
        Ok(()) | Err(Error::Full | Error::Fragmented { .. }) => {}
        Err(e) => panic!("unexpected {e:?}"),
    }
}

/// Two writer processes (lanes 0-1 and 2-3) run random operations (puts, batches, spans,
/// deltas, retention that releases and reuses segments, closes, detaches); after each
/// group one of them refreshes, and what it then holds — the other's objects and its own
/// — must equal a recovery of the media. Most refreshes must catch up (read only what the
/// other committed since), so that is what was tested.
#[test]
fn a_writer_process_catches_up_with_the_other_to_what_recovery_finds() {
    let (seeds, groups) = if cfg!(miri) { (1, 6) } else { (6, 150) };
    let (mut refreshes, mut catch_ups) = (0u64, 0u64);
    for seed in 0..seeds {
        let mut ram = Ram::new(192 << 10, 0xa5);
        format_shared(&mut ram, 4096);
        let region = ram.region();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ seed);
        let delta = nvs_core::DeltaOptions { chunk_bytes: 64, full_every: 4, ..Default::default() };
        let mut ws = [[0, 1], [2, 3]].map(|own| {
            let mut p = Pool::open_lanes(&region, HeapMemory::new(), &own).unwrap();
            p.set_delta_options(delta).unwrap();
            (p, own)
        });
        for g in 0..groups {
            for _ in 0..1 + rng.below(4) {
                let (w, own) = &mut ws[rng.below(2) as usize];
                writer_step(&mut rng, w, *own, 4096);
            }
            let (w, _) = &mut ws[rng.below(2) as usize];
            w.refresh().unwrap();
            refreshes += 1;
            let fresh = Pool::open_read_only(&region, HeapMemory::new()).unwrap();
            let (a, b) = (observe(w, 4), observe(&fresh, 4));
            let diff: Vec<_> = a.symmetric_difference(&b).take(4).collect();
            assert!(diff.is_empty(), "seed {seed}, group {g}: a refreshed writer and a recovery differ: {diff:?}");
        }
        catch_ups += ws.iter().map(|(w, _)| w.catch_ups()).sum::<u64>();
    }
    eprintln!("{refreshes} writer refreshes, {catch_ups} caught up");
    assert!(catch_ups * 2 > refreshes, "only {catch_ups} of {refreshes} refreshes caught up");
}
