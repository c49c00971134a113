//! What a follower pays to pick up one new object from a big pool: a 1 GiB pool file in
//! /dev/shm holding 1,000,000 small objects, a read-only pool opened on it, then, many
//! times over, one more object put by the writer and the reader's refresh plus a get of
//! that object, timed (median). Once with the refresh catching up (what
//! `Pool::refresh` does), once recovering the whole pool (what it did before).
//!
//! `cargo run --release -p nvs-std --example follow_pickup [SEGMENT_BYTES]` (default:
//! nvs-core's segment size for 1 GiB, 64 MiB).

use nvs_core::{HeapMemory, Object, Pool};
use nvs_std::{CreateOptions, FilePool, MappedMedia};
use std::time::{Duration, Instant};

const OBJECTS: u64 = 1_000_000;
const NAMES: u64 = 1000;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let segment_len = std::env::args().nth(1).map(|s| s.parse::<u64>()).transpose()?;
    let path = std::path::PathBuf::from(format!("/dev/shm/nvs-follow-pickup-{}.pool", std::process::id()));
    let mut opts = CreateOptions::new();
    opts.segment_len = segment_len;
    let mut w = FilePool::create(&path, 1 << 30, &opts)?;
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
    let media = MappedMedia::open_read_only(&path)?;
    let t = Instant::now();
    let mut r = Pool::open_read_only(media, HeapMemory::new())?;
    println!("read-only open (recovery): {:.1} ms", t.elapsed().as_secs_f64() * 1e3);
    let mut buf = [0u8; 64];
    let mut pick_up = |w: &mut FilePool, r: &mut Pool<MappedMedia, HeapMemory>, i: u64, full: bool| {
        let v = w.put(1, Object::new("new", &i.to_le_bytes())).unwrap().version;
        let t = Instant::now();
        if full {
            r.refresh_by_recovery().unwrap();
        } else {
            r.refresh().unwrap();
        }
        let n = r.get("new", v, &mut buf).unwrap();
        let took = t.elapsed();
        assert_eq!(&buf[..n], i.to_le_bytes());
        took
    };
    let before: Vec<Duration> = (0..21).map(|i| pick_up(&mut w, &mut r, i, true)).collect();
    let catch_ups = r.catch_ups();
    let after: Vec<Duration> = (0..2001).map(|i| pick_up(&mut w, &mut r, 100 + i, false)).collect();
    assert_eq!(r.catch_ups() - catch_ups, after.len() as u64, "a refresh fell back to recovery");
    println!(
        "pick-up (put, then refresh + get of it), median: recovery {:.1} ms ({} runs), catch-up {:.1} us ({} runs)",
        median(before).as_secs_f64() * 1e3,
        21,
        median(after).as_secs_f64() * 1e6,
        2001
    );
    drop(w);
    std::fs::remove_file(&path)?;
    Ok(())
}
