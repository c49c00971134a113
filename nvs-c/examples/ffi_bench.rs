//! A put through the C ABI next to the same put in Rust, side by side in one run.
//!
//! Both write the same pool file (so the same physical memory: two files of a tmpfs can
//! differ by 10-20% on a VM): trials alternate between `FilePool::put` and `nvs_put` (the
//! exported C function, the code a C caller runs), reopening the pool between them, and
//! each trial first writes the whole pool once untimed (page faults of the fresh
//! mapping), retention emptying it outside the timed part. Prints the median GB/s of each and their
//! ratio per size (1 KiB, 32 KiB, 1 MiB).
//!
//! `cargo run --release -p nvs-c --example ffi_bench [trials] [dir]`

use nvs::{nvs_pool, nvs_pool_close, nvs_pool_open, nvs_put, nvs_reclaim, NVS_OK, NVS_OPEN_READ_WRITE};
use nvs_core::Object;
use nvs_std::{Access, CreateOptions, FilePool};
use std::ffi::CString;
use std::time::{Duration, Instant};

const POOL: u64 = 320 << 20;
const BUDGET: usize = 128 << 20; // timed bytes per trial

/// One trial on an open pool: first write the whole pool once (retention emptying it as
/// it goes), so every page of the mapping is faulted in — a fresh mapping's page faults
/// would cost more than the puts — then time `BUDGET` bytes of puts.
fn trial(size: usize, put: &mut dyn FnMut(), reclaim: &mut dyn FnMut()) -> Duration {
    let per_64m = ((64 << 20) / size).max(1);
    for i in 0..(POOL as usize / size) {
        put();
        if i % per_64m == per_64m - 1 {
            reclaim();
        }
    }
    reclaim();
    let start = Instant::now();
    for _ in 0..(BUDGET / size).max(16) {
        put();
    }
    let t = start.elapsed();
    reclaim();
    t
}

fn rust_trial(path: &std::path::Path, src: &[u8]) -> Duration {
    let p = std::cell::RefCell::new(FilePool::open(path, Access::ReadWrite).expect("open"));
    let t = trial(
        src.len(),
        &mut || {
            p.borrow_mut().put(0, Object::new("x", src)).expect("put");
        },
        &mut || {
            p.borrow_mut().reclaim(1).expect("reclaim");
        },
    );
    p.into_inner().close().expect("close");
    t
}

fn c_trial(path: &CString, src: &[u8]) -> Duration {
    let name = c"x";
    let mut p: *mut nvs_pool = std::ptr::null_mut();
    // SAFETY: valid C strings, buffers and out-pointers for every call; `p` stays open
    // until the close.
    unsafe {
        assert_eq!(nvs_pool_open(path.as_ptr(), NVS_OPEN_READ_WRITE, &mut p), NVS_OK);
        let mut v = 0u64;
        let t = trial(
            src.len(),
            &mut || assert_eq!(nvs_put(p, 0, name.as_ptr(), src.as_ptr().cast(), src.len(), &mut v), NVS_OK),
            &mut || assert_eq!(nvs_reclaim(p, 1, std::ptr::null_mut()), NVS_OK),
        );
        assert_eq!(nvs_pool_close(p), NVS_OK);
        t
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let trials: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(16);
    let dir = args.next().unwrap_or_else(|| "/dev/shm".into());
    let path = std::path::PathBuf::from(dir).join(format!("nvs-ffi-bench-{}.pool", std::process::id()));
    let cpath = CString::new(path.to_str().expect("utf-8 path")).expect("no NUL");
    println!("put through the C ABI vs the Rust put, {} trials each, alternating, one pool file", trials);
    println!("{:>8} {:>12} {:>12} {:>10}", "size", "Rust GB/s", "C GB/s", "C/Rust");
    for size in [1usize << 10, 32 << 10, 1 << 20] {
        let _ = std::fs::remove_file(&path);
        FilePool::create(&path, POOL, &CreateOptions::new()).expect("create").close().expect("close");
        let src: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
        let n = (BUDGET / size).max(16);
        let (mut rust, mut c) = (Vec::new(), Vec::new());
        // Pairs in ABBA order (Rust, C, C, Rust, ...): neither goes first more often.
        for t in 0..trials * 2 {
            let gbps = |d: Duration| (n * size) as f64 / d.as_secs_f64() / 1e9;
            if (t % 2 == 0) == (t / 2 % 2 == 0) {
                rust.push(gbps(rust_trial(&path, &src)));
            } else {
                c.push(gbps(c_trial(&cpath, &src)));
            }
        }
        let (r, cc) = (median(rust), median(c));
        let label = if size >= 1 << 20 { format!("{} MiB", size >> 20) } else { format!("{} KiB", size >> 10) };
        println!("{label:>8} {r:>12.2} {cc:>12.2} {:>10.3}", cc / r);
    }
    let _ = std::fs::remove_file(&path);
}
