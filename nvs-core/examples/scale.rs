//! Scale edges, measured: reclaim of 9,999 / 19,999 / 39,999 segments of a 1 GiB pool of
//! 4 KiB segments (262,143 of them), and the cost of puts into a `FixedMemory` index in
//! batches of 20,000 up to its capacity (it must stay flat to the end).
//!
//! `cargo run --release -p nvs-core --example scale`
//! Heap memory stands in for persistent memory.

use nvs_core::{Error, FixedMemory, FormatOptions, HeapMemory, Object, Pool, Region};
use std::time::Instant;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

fn region(mem: &mut [Line]) -> Region {
    // SAFETY: 64-aligned, valid for its whole length, outlives every pool below.
    unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) }
}

fn main() {
    let mut mem = vec![Line([0; 64]); (1 << 30) / 64];
    for release in [9_999u64, 19_999, 39_999] {
        let mut o = FormatOptions::new(1);
        o.segment_len = Some(4096);
        let mut pool = Pool::format(region(&mut mem), o, HeapMemory::new()).unwrap();
        for v in 1..=release + 1 {
            pool.put(0, Object::new(b"a", &[v as u8; 3900])).unwrap();
        }
        let t = Instant::now();
        pool.refresh().unwrap();
        let recovery = t.elapsed();
        let t = Instant::now();
        assert_eq!(pool.reclaim(1), Ok(release as u32));
        let reclaim = t.elapsed();
        println!(
            "reclaim of {release} of {} segments: {:.1} ms (one recovery of the pool: {:.1} ms)",
            pool.layout().segment_count,
            reclaim.as_secs_f64() * 1e3,
            recovery.as_secs_f64() * 1e3
        );
    }
    // FixedMemory<300_000, 1000, 602_100, 64>: the table's power-of-two part is 524,288
    // slots, so the index ends at 262,144 entries + names, with IndexFull.
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || {
            let fixed: Box<FixedMemory<300_000, 1000, 602_100, 64>> = Box::default();
            let mut o = FormatOptions::new(2);
            o.segment_len = Some(64 << 20);
            let mut pool = Pool::format(region(&mut mem), o, *fixed).unwrap();
            let (mut n, mut t) = (0u64, Instant::now());
            loop {
                match pool.put(0, Object::new(format!("n{}", n % 1000).as_bytes(), b"x")) {
                    Ok(_) => n += 1,
                    Err(e @ Error::IndexFull { .. }) => {
                        println!("after {n} puts: {e}");
                        break;
                    }
                    Err(e) => panic!("{e}"),
                }
                if n % 20_000 == 0 {
                    println!("puts {:>7}..{n:<7} {:6.1} ns per put", n - 20_000, t.elapsed().as_nanos() as f64 / 2e4);
                    t = Instant::now();
                }
            }
        })
        .unwrap()
        .join()
        .unwrap();
}
