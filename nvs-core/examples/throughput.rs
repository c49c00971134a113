//! Put throughput next to memcpy of the same bytes into the same memory, in one run,
//! and the open (recovery) time of a pool holding 100,000 records.
//!
//! `cargo run --release -p nvs-core --example throughput`
//! Heap memory stands in for persistent memory (as /dev/shm does for the paper).

use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Region};
use std::time::{Duration, Instant};

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

const REGION: usize = 1 << 30;

fn main() {
    let mut mem = vec![Line([0; 64]); REGION / 64];
    let base: *mut u8 = mem.as_mut_ptr().cast();
    println!("wide NT stores: {}", if nvs_core::nt_store_width() >= 32 { "AVX2 32 B" } else { "16 B" });
    for size in [1usize << 10, 32 << 10, 1 << 20] {
        let src: Vec<u8> = (0..size).map(|i| (i * 31) as u8).collect();
        let (mut put, mut sum, mut cpy) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..5 {
            put.push(trial_put(base, &src, false));
            sum.push(trial_put(base, &src, true));
            cpy.push(trial_memcpy(base, &src));
        }
        let (p, k, c) = (median(&mut put), median(&mut sum), median(&mut cpy));
        println!(
            "{:>5} KiB  put {p:6.2} GB/s  memcpy {c:6.2} GB/s  put/memcpy {:.2}  | with payload checksum {k:6.2} GB/s ({:.2}x)",
            size >> 10,
            p / c,
            k / p
        );
    }
    // Open time of 100,000 records.
    // SAFETY: `mem` is 64-aligned, REGION bytes long, and outlives every region built here.
    let region = unsafe { Region::new(base, REGION) };
    let mut o = FormatOptions::new(42);
    o.segment_len = Some(32 << 20);
    let mut pool = Pool::format(region, o, HeapMemory::new()).unwrap();
    let data = [7u8; 1024];
    for i in 0..100_000u32 {
        pool.put(i % 4, Object::vectored(format!("array{}", i % 100).as_bytes(), &[&data])).unwrap();
    }
    let (region, _) = pool.close();
    let mut times = Vec::new();
    let mut region = Some(region);
    for _ in 0..5 {
        let t = Instant::now();
        let pool = Pool::open_read_only(region.take().unwrap(), HeapMemory::new()).unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(pool.stats().objects, 100_000);
        region = Some(pool.close().0);
    }
    println!("open of 100,000 records (1 KiB, 100 names, 4 lanes): {:.2} ms (median of 5)", median(&mut times));
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// GB/s of back-to-back puts of `src` for ~0.3 s (reformatting when full, untimed).
fn trial_put(base: *mut u8, src: &[u8], payload_checksum: bool) -> f64 {
    let (mut bytes, mut spent) = (0u64, Duration::ZERO);
    while spent < Duration::from_millis(300) {
        // SAFETY: as in main.
        let region = unsafe { Region::new(base, REGION) };
        let mut o = FormatOptions::new(7);
        o.segment_len = Some(64 << 20);
        o.payload_checksum = payload_checksum;
        let mut pool = Pool::format(region, o, HeapMemory::new()).unwrap();
        let t = Instant::now();
        while pool.put(0, Object::new(b"x", src)).is_ok() {
            bytes += src.len() as u64;
        }
        spent += t.elapsed();
    }
    bytes as f64 / spent.as_secs_f64() / 1e9
}

/// GB/s of memcpy of `src` into the same memory, same sweep.
fn trial_memcpy(base: *mut u8, src: &[u8]) -> f64 {
    let (mut bytes, mut spent) = (0u64, Duration::ZERO);
    while spent < Duration::from_millis(300) {
        let t = Instant::now();
        let mut off = 4096;
        while off + src.len() <= REGION {
            // SAFETY: in bounds of `mem`; `src` is a distinct allocation.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), base.add(off), src.len()) };
            off += src.len().next_multiple_of(64) + 128;
            bytes += src.len() as u64;
        }
        std::hint::black_box(base);
        spent += t.elapsed();
    }
    bytes as f64 / spent.as_secs_f64() / 1e9
}
