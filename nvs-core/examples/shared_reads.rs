//! What a reader beside a live writer pays for race-free copies: `get` through a
//! region marked [`Region::shared`] (the reads are `asm!`/volatile copies, see
//! `arch::copy_from_media`) next to `get` through a plain region of the same memory,
//! in one run, as ratios.
//!
//! `cargo run --release -p nvs-core --example shared_reads`

use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Region};
use std::time::Instant;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

const SIZES: [usize; 4] = [1 << 10, 32 << 10, 1 << 20, 20 << 20];

fn main() {
    let mut mem = vec![Line([0; 64]); (1 << 30) / 64];
    let (base, len) = (mem.as_mut_ptr().cast::<u8>(), mem.len() * 64);
    // SAFETY: 64-aligned, valid for its whole length, outlives the pools below.
    let region = || unsafe { Region::new(base, len) };
    let mut o = FormatOptions::new(1);
    o.segment_len = Some(64 << 20);
    let mut w = Pool::format(region(), o, HeapMemory::new()).unwrap();
    for (k, size) in SIZES.into_iter().enumerate() {
        for _ in 0..3 {
            w.put(0, Object::new(format!("s{k}").as_bytes(), &vec![k as u8; size])).unwrap();
        }
    }
    let plain = Pool::open_read_only(region(), HeapMemory::new()).unwrap();
    let shared = Pool::open_read_only(region().shared(), HeapMemory::new()).unwrap();
    for (k, size) in SIZES.into_iter().enumerate() {
        let name = format!("s{k}");
        let mut dst = vec![0u8; size];
        let reps = ((512 << 20) / size).max(8);
        let mut best = [f64::MAX; 2];
        for _ in 0..5 {
            for (i, pool) in [&plain, &shared].into_iter().enumerate() {
                let t = Instant::now();
                for r in 0..reps {
                    pool.get(name.as_bytes(), 1 + r as u64 % 3, &mut dst).unwrap();
                }
                best[i] = best[i].min(t.elapsed().as_secs_f64() / reps as f64);
            }
        }
        println!(
            "get {:>6} KiB: plain {:6.2} GB/s, shared {:6.2} GB/s, shared/plain {:.2}",
            size >> 10,
            size as f64 / best[0] / 1e9,
            size as f64 / best[1] / 1e9,
            best[0] / best[1]
        );
    }
}
