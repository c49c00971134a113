//! Readers beside a writer that reclaims all the time: a read-only pool refreshing in a
//! loop, a follower polling, and read-only opens must never call the healthy pool
//! corrupted (recovery on a live mapping is not a snapshot; a refresh that sees the
//! writer's moving state looks again). Runs `NVS_STRESS_SECS` seconds (default 60).

use nvs_core::Object;
use nvs_std::{Access, CreateOptions, FilePool, Follower};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[test]
fn readers_beside_a_reclaiming_writer_never_report_corruption() {
    let secs: u64 = std::env::var("NVS_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    // tmpfs when there is one: a file on disk would make every fence an msync.
    let dir = match tempfile::Builder::new().prefix("nvs-live").tempdir_in("/dev/shm") {
        Ok(d) => d,
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let path = dir.path().join("live.pool");
    let opts = CreateOptions { segment_len: Some(16 << 10), lanes_max: 2, ..CreateOptions::default() };
    let mut w = FilePool::create(&path, 1 << 20, &opts).unwrap();
    let stop = AtomicBool::new(false);
    let (puts, reclaims, freed) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let (refreshes, polls, opens) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let errors = Mutex::new(Vec::<String>::new());
    let report = |who: &str, e: nvs_std::Error| {
        let mut errs = errors.lock().unwrap();
        if errs.len() < 10 {
            errs.push(format!("{who}: {e}"));
        }
    };
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut x = 0x9E37_79B9_7F4A_7C15u64;
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let name = format!("n{}", x % 5);
                let data = vec![i as u8; 1 + (x >> 20) as usize % 3000];
                match w.put((i % 2) as u32, Object::vectored(name.as_bytes(), &[&data])) {
                    Ok(_) => {
                        puts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) if e.to_string().contains("full") => {}
                    Err(e) => panic!("writer: {e}"),
                }
                if i % 3 == 2 {
                    let n = w.reclaim(1 + (i % 2) as u32).expect("reclaim");
                    reclaims.fetch_add(1, Ordering::Relaxed);
                    freed.fetch_add(n as u64, Ordering::Relaxed);
                }
                i += 1;
            }
        });
        s.spawn(|| {
            let mut r = FilePool::open(&path, Access::ReadOnly).unwrap();
            while !stop.load(Ordering::Relaxed) {
                match r.refresh() {
                    Ok(()) => refreshes.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        report("refresh", e);
                        0
                    }
                };
                // Now and then a fresh read-only open (recovery on a new mapping).
                if refreshes.load(Ordering::Relaxed) % 64 == 0 {
                    match FilePool::open(&path, Access::ReadOnly) {
                        Ok(_) => opens.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            report("open", e);
                            0
                        }
                    };
                }
            }
        });
        s.spawn(|| {
            let mut f = Follower::open(&path, None).unwrap();
            while !stop.load(Ordering::Relaxed) {
                match f.poll() {
                    Ok(_) => polls.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        report("follower", e);
                        0
                    }
                };
            }
        });
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(secs) && errors.lock().unwrap().is_empty() {
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
    });
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "{secs} s: {} puts, {} reclaims ({} segments freed); {} refreshes, {} read-only opens, {} follower polls; \
         errors: {:?}",
        n(&puts),
        n(&reclaims),
        n(&freed),
        n(&refreshes),
        n(&opens),
        n(&polls),
        errors.lock().unwrap()
    );
    assert!(errors.lock().unwrap().is_empty(), "a reader called the healthy pool corrupted");
    assert!(n(&freed) > 10 && n(&refreshes) > 100 && n(&polls) > 100, "the stress did not stress");
}
