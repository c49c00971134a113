//! What it costs to pick up one new object from a big pool, and how soon a waiting
//! follower wakes: a 1 GiB pool file in /dev/shm with lane names, holding 1,000,000
//! small objects on lane 0, written by a writer process's pool (`open_lanes`, lane 0).
//! Then, many times over, the writer puts one more object and, timed (median):
//!
//! 1. a read-only pool refreshes and gets it — catching up (what `Pool::refresh` does)
//!    and recovering the whole pool (what it did before catching up existed);
//! 2. a second writer process's pool (lane 1) refreshes and gets it (its refresh used to
//!    recover the whole pool too: about what its open, timed here, costs);
//! 3. a `Follower` blocked in `wait` (polling every 1 ms, as the C ABI's
//!    `nvs_follower_wait` does; `nvs follow` polls every 2 ms) wakes: the time from the
//!    put's return to `wait`'s, and the CPU time the waiting thread used per second.
//!
//! `cargo run --release -p nvs-std --example follow_pickup [SEGMENT_BYTES]` (default:
//! nvs-core's segment size for 1 GiB).

use nvs_core::Key;
use nvs_core::{HeapMemory, Object, Pool};
use nvs_std::{CreateOptions, FilePool, Followed, Follower, MappedMedia};
use std::time::{Duration, Instant};

const OBJECTS: u64 = 1_000_000;
const NAMES: u64 = 1000;
const RECOVERIES: usize = 21;
const CATCH_UPS: usize = 2001;
const WAKES: usize = 200;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec to write.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The writer's next object: `new`, its bytes the step number.
fn put(w: &mut FilePool, step: &mut u64) -> (u64, u64) {
    *step += 1;
    (*step, w.put(0, Object::new("new", &step.to_le_bytes())).unwrap().version)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let segment_len = std::env::args().nth(1).map(|s| s.parse::<u64>()).transpose()?;
    let path = std::path::PathBuf::from(format!("/dev/shm/nvs-follow-pickup-{}.pool", std::process::id()));
    let mut opts = CreateOptions::new();
    opts.segment_len = segment_len;
    opts.lane_names = true;
    drop(FilePool::create(&path, 1 << 30, &opts)?);
    let mut w = FilePool::open_lanes(&path, Some(&[0]))?;
    let names: Vec<String> = (0..NAMES).map(|i| format!("sensor/{i:04}")).collect();
    let t = Instant::now();
    let payload = [7u8; 32];
    // Batches of 100 distinct names, round robin over all of them.
    for b in 0..OBJECTS / 100 {
        let base = (b % (NAMES / 100)) as usize * 100;
        let batch: Vec<Object<'_>> = names[base..base + 100].iter().map(|n| Object::new(n, &payload)).collect();
        w.put_batch(0, &batch)?;
    }
    let layout = w.core_pool().layout();
    println!(
        "{} objects in {:.1} s; {} segments of {} KiB",
        w.core_pool().stats().objects,
        t.elapsed().as_secs_f64(),
        layout.segment_count,
        layout.segment_len >> 10
    );
    let t = Instant::now();
    let mut r = Pool::open_read_only(MappedMedia::open_read_only(&path)?, HeapMemory::new())?;
    println!("read-only open (recovery): {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let mut other = FilePool::open_lanes(&path, Some(&[1]))?;
    println!("second writer process's open (recovery): {:.1} ms", t.elapsed().as_secs_f64() * 1e3);

    // 1 and 2: put, then refresh + get, timed.
    let mut buf = [0u8; 64];
    let mut step = 0u64;
    let mut reader_pick_up = |w: &mut FilePool, r: &mut Pool<MappedMedia, HeapMemory>, step: &mut u64, full: bool| {
        let (i, v) = put(w, step);
        let t = Instant::now();
        if full {
            r.refresh_by_recovery().unwrap();
        } else {
            r.refresh().unwrap();
        }
        let n = r.get(Key::on(0, "new"), v, &mut buf).unwrap();
        let took = t.elapsed();
        assert_eq!(&buf[..n], i.to_le_bytes());
        took
    };
    let recovered: Vec<Duration> = (0..RECOVERIES).map(|_| reader_pick_up(&mut w, &mut r, &mut step, true)).collect();
    let caught = r.catch_ups();
    let caught_up: Vec<Duration> = (0..CATCH_UPS).map(|_| reader_pick_up(&mut w, &mut r, &mut step, false)).collect();
    assert_eq!(r.catch_ups() - caught, CATCH_UPS as u64, "a reader's refresh fell back to recovery");
    println!(
        "reader pick-up (put, then refresh + get of it), median: recovery {:.1} ms ({RECOVERIES} runs), catch-up {:.1} us ({CATCH_UPS} runs)",
        median(recovered).as_secs_f64() * 1e3,
        us(median(caught_up)),
    );
    let mut writer_pick_up = |w: &mut FilePool, other: &mut FilePool, step: &mut u64| {
        let (i, v) = put(w, step);
        let t = Instant::now();
        other.refresh().unwrap();
        let n = other.get(Key::on(0, "new"), v, &mut buf).unwrap();
        let took = t.elapsed();
        assert_eq!(&buf[..n], i.to_le_bytes());
        took
    };
    let caught = other.core_pool().catch_ups();
    let caught_up: Vec<Duration> = (0..CATCH_UPS).map(|_| writer_pick_up(&mut w, &mut other, &mut step)).collect();
    assert_eq!(other.core_pool().catch_ups() - caught, CATCH_UPS as u64, "a writer's refresh fell back to recovery");
    println!(
        "writer process pick-up (the other writer's put, then refresh + get), median: catch-up {:.1} us ({CATCH_UPS} runs)",
        us(median(caught_up)),
    );
    drop(other);

    // 3: a follower blocked in wait, woken by the writer's next put.
    let mut f = Follower::open(&path, Some(b"new".to_vec()))?;
    while matches!(f.wait(Some(Duration::ZERO), Duration::from_millis(1))?, Followed::Objects(_)) {}
    let (acked_tx, acked_rx) = std::sync::mpsc::channel::<Instant>();
    let waiter = std::thread::spawn(move || {
        let (mut wakes, mut cpu_per_s) = (Vec::new(), Vec::new());
        for _ in 0..WAKES {
            let (cpu, t) = (thread_cpu(), Instant::now());
            match f.wait(Some(Duration::from_secs(10)), Duration::from_millis(1)).unwrap() {
                Followed::Objects(o) => assert_eq!(o.len(), 1),
                other => panic!("woke with {other:?}"),
            }
            let woke = Instant::now();
            cpu_per_s.push((thread_cpu() - cpu).as_secs_f64() / t.elapsed().as_secs_f64());
            wakes.push(woke - acked_rx.recv().unwrap());
        }
        (wakes, cpu_per_s)
    });
    for k in 0..WAKES {
        // 20-60 ms apart, at no fixed phase to the follower's polls.
        std::thread::sleep(Duration::from_micros(20_000 + (k as u64 * 7919) % 40_000));
        put(&mut w, &mut step);
        acked_tx.send(Instant::now()).unwrap();
    }
    let (wakes, mut cpu_per_s) = waiter.join().unwrap();
    cpu_per_s.sort_by(f64::total_cmp);
    let max = *wakes.iter().max().unwrap();
    println!(
        "follower wake-up (polling every 1 ms; put's return to wait's return, {WAKES} puts): median {:.0} us, max {:.0} us; the waiting thread used {:.2}% of a core (median)",
        us(median(wakes)),
        us(max),
        cpu_per_s[cpu_per_s.len() / 2] * 100.0
    );
    drop(w);
    std::fs::remove_file(&path)?;
    Ok(())
}
