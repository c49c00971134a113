//! Writer processes reading each other's lanes, live: four writer processes on one pool
//! with lane names (the MPI-rank pattern), each putting small objects and spans over
//! several segments, reclaiming its lane all the time (segments are released and reused),
//! and every few puts reading the newest versions of the other lanes' names, after a
//! refresh or as its index stands (its own claims since may have reused their segments);
//! beside them a read-only follower reading every lane. Every read must return the bytes
//! of that name and version, or NotFound (released): never other bytes, never a false
//! `Corrupted`. Runs `NVS_STRESS_SECS` seconds (default 60). The processes are this test
//! binary again, told their part by `NVS_LANE_STRESS`.
#![cfg(not(miri))]

use nvs_core::Key;
use nvs_core::Object;
use nvs_std::{Access, CreateOptions, FilePool};
use std::process::Command;
use std::time::{Duration, Instant};

const WRITERS: u32 = 4;
const NAMES: u64 = 3;
const SEGMENT: u64 = 16 << 10;

/// The bytes of `name` version `v` on `lane`: which is which can be told from them. Every
/// 40th version is a span (larger than a segment).
fn content(lane: u32, name: u64, v: u64) -> Vec<u8> {
    let len =
        if v.is_multiple_of(40) { 2 * SEGMENT as usize + 1000 } else { 16 + ((v * 131 + name * 71) % 900) as usize };
    (0..len).map(|i| (i as u64 * 7 + name * 101 + v * 13 + lane as u64 * 29) as u8).collect()
}

/// What one process saw.
#[derive(Default, Debug)]
struct Seen {
    puts: u64,
    reclaims: u64,
    reads: u64,
    released: u64,
    wrong: Vec<String>,
}

impl Seen {
    /// Read `name` version `v` of `lane` from `p` and judge it.
    fn read(&mut self, p: &FilePool, lane: u32, name: u64, v: u64) {
        let n = format!("n{name}");
        match p.get_vec(Key::on(lane, &n), v) {
            Ok(b) if b == content(lane, name, v) => self.reads += 1,
            Ok(b) => self.wrong.push(format!("lane {lane} {n} v{v}: {} bytes of something else", b.len())),
            Err(e) if e.core() == Some(nvs_core::Error::NotFound) => self.released += 1,
            Err(e) => self.wrong.push(format!("lane {lane} {n} v{v}: {e}")),
        }
    }

    /// Read the newest few versions this view knows of every name of the lanes `lanes`.
    fn read_lanes(&mut self, p: &FilePool, lanes: impl Iterator<Item = u32>) {
        for lane in lanes {
            for name in 0..NAMES {
                let Ok(latest) = p.latest(Key::on(lane, &format!("n{name}"))) else { continue };
                for v in latest.saturating_sub(3).max(1)..=latest {
                    self.read(p, lane, name, v);
                }
            }
        }
    }

    fn report(&self) -> String {
        format!(
            "puts {} reclaims {} reads {} released {} wrong {}{}",
            self.puts,
            self.reclaims,
            self.reads,
            self.released,
            self.wrong.len(),
            self.wrong.first().map(|w| format!(" (first: {w})")).unwrap_or_default()
        )
    }
}

fn writer(path: &str, lane: u32, until: Instant) -> Seen {
    let mut p = FilePool::open_lanes(path, Some(&[lane])).expect("open a lane");
    let mut seen = Seen::default();
    let mut next = [0u64; NAMES as usize];
    let mut k = 0u64;
    while Instant::now() < until {
        let name = k % NAMES;
        let v = next[name as usize] + 1;
        let (n, bytes) = (format!("n{name}"), content(lane, name, v));
        let put = |p: &mut FilePool| p.put(lane, Object::new(&n, &bytes));
        match put(&mut p) {
            Ok(put) => assert_eq!(put.version, v),
            Err(e)
                if e.core()
                    .is_some_and(|c| matches!(c, nvs_core::Error::Full | nvs_core::Error::Fragmented { .. })) =>
            {
                p.reclaim(1).expect("reclaim");
                seen.reclaims += 1;
                match put(&mut p) {
                    Ok(put) => assert_eq!(put.version, v),
                    // The others hold the rest of the pool for now: skip this one.
                    Err(e)
                        if e.core().is_some_and(|c| {
                            matches!(c, nvs_core::Error::Full | nvs_core::Error::Fragmented { .. })
                        }) =>
                    {
                        k += 1;
                        continue;
                    }
                    Err(e) => panic!("lane {lane}: put after reclaim: {e}"),
                }
            }
            Err(e) => panic!("lane {lane}: put: {e}"),
        }
        next[name as usize] = v;
        seen.puts += 1;
        k += 1;
        if k.is_multiple_of(7) {
            p.reclaim(1).expect("reclaim");
            seen.reclaims += 1;
        }
        if k.is_multiple_of(5) {
            p.refresh().expect("refresh");
            seen.read_lanes(&p, (0..WRITERS).filter(|&l| l != lane));
        } else if k.is_multiple_of(3) {
            // As the index stands since the last refresh: its own claims since may have
            // taken segments the others released.
            seen.read_lanes(&p, (0..WRITERS).filter(|&l| l != lane));
        }
    }
    p.close().expect("close");
    seen
}

fn follower(path: &str, until: Instant) -> Seen {
    let mut p = FilePool::open(path, Access::ReadOnly).expect("open read-only");
    let mut seen = Seen::default();
    while Instant::now() < until {
        p.refresh().expect("refresh");
        seen.read_lanes(&p, 0..WRITERS);
    }
    seen
}

#[test]
fn writer_processes_reading_each_others_lanes_get_true_bytes() {
    let secs: u64 = std::env::var("NVS_STRESS_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60);
    if let Ok(part) = std::env::var("NVS_LANE_STRESS") {
        // A child: its part, then its report on stdout.
        let (who, path) = part.split_once(':').expect("PART:PATH");
        let until = Instant::now() + Duration::from_secs(secs);
        let seen = match who {
            "follower" => follower(path, until),
            lane => writer(path, lane.parse().expect("a lane"), until),
        };
        println!("REPORT {who}: {}", seen.report());
        assert!(seen.wrong.is_empty(), "{who}: {}", seen.report());
        return;
    }
    let dir = match tempfile::Builder::new().prefix("nvs-lane-stress").tempdir_in("/dev/shm") {
        Ok(d) => d,
        Err(_) => tempfile::tempdir().unwrap(),
    };
    let path = dir.path().join("lanes.pool");
    let opts = CreateOptions::new().segment_len(SEGMENT).lanes_max(WRITERS).lane_names(true);
    FilePool::create(&path, 2 << 20, &opts).unwrap().close().unwrap();
    let me = std::env::current_exe().unwrap();
    let parts: Vec<String> = (0..WRITERS).map(|l| l.to_string()).chain(["follower".to_string()]).collect();
    let children: Vec<_> = parts
        .iter()
        .map(|part| {
            Command::new(&me)
                .args(["--exact", "writer_processes_reading_each_others_lanes_get_true_bytes", "--nocapture"])
                .env("NVS_LANE_STRESS", format!("{part}:{}", path.display()))
                .env("NVS_STRESS_SECS", secs.to_string())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut totals = Seen::default();
    for (part, child) in parts.iter().zip(children) {
        let o = child.wait_with_output().unwrap();
        let out = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{part} failed:\n{out}");
        let line = out.lines().find(|l| l.starts_with("REPORT")).unwrap_or_else(|| panic!("{part}: no report:\n{out}"));
        println!("{line}");
        let field = |key: &str| -> u64 {
            line.split_whitespace().skip_while(|w| *w != key).nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
        };
        totals.puts += field("puts");
        totals.reclaims += field("reclaims");
        totals.reads += field("reads");
        totals.released += field("released");
    }
    println!(
        "{secs} s, {WRITERS} writer processes and a follower: {} puts, {} reclaims, {} reads true, {} released (NotFound), 0 wrong, 0 false corruption",
        totals.puts, totals.reclaims, totals.reads, totals.released
    );
    assert!(totals.reads > 1000 && totals.released > 0 && totals.reclaims > 0, "{totals:?}");
}
