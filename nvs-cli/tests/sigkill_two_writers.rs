//! Two writer processes on one pool (lane names; lanes 0 and 1, the same names on both),
//! killed with SIGKILL at random moments, one at a time, 50 kills in all, while a
//! follower process checks every object it sees. Each round: both writers run (claiming
//! segments beside each other: the pool's segments are small), one is killed, the
//! follower reports that lane's writer gone (exit 3, naming the lane) while the other
//! writer goes on; then the other is killed too. Every version either writer
//! acknowledged is there afterwards, byte-exact, on its own lane; the next round's
//! writers take the dead writers' lanes over.

#[allow(dead_code)]
#[path = "../src/stress.rs"]
mod stress;

use nvs_core::Key;
use nvs_std::{Access, CreateOptions, FilePool};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use stress::stress_payload;

const ROUNDS: usize = 25; // two kills each
/// A writer that finds the pool full reclaims its own lane's segments, keeping this many
/// versions of each name (so the writers go on past the pool's size).
const KEEP: u32 = 20;

struct Writer {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    first: String,
}

fn start(nvs: &str, pool: &str, lane: u32) -> Writer {
    let mut child = Command::new(nvs)
        .args(["stress-writer", pool, "--lane", &lane.to_string(), "--max-size", "24K", "--pause-us", "20"])
        .args(["--keep", &KEEP.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // It holds its lane once it printed its first acknowledgement.
    let first = lines.next().expect("writer printed nothing").unwrap();
    Writer { child, lines, first }
}

/// Kill `w` and return what it acknowledged (whole lines only: a line cut by the kill
/// was never fully printed, so never acknowledged).
fn kill(mut w: Writer) -> Vec<(String, u64)> {
    w.child.kill().unwrap(); // SIGKILL
    w.child.wait().unwrap();
    let mut acked = Vec::new();
    for l in std::iter::once(Ok(w.first)).chain(w.lines) {
        let Ok(l) = l else { break };
        let Some((name, v)) = l.split_once('\t') else { continue };
        let Ok(v) = v.parse() else { continue };
        acked.push((name.to_string(), v));
    }
    acked
}

#[test]
fn two_writer_processes_killed_fifty_times() {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm".into() } else { std::env::temp_dir() };
    let path = dir.join(format!("nvs-sigkill2-{}.pool", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let opts = CreateOptions::new().lanes_max(2).lane_names(true).segment_len(256 << 10);
    FilePool::create(&path, 256 << 20, &opts).unwrap().close().unwrap();
    let p = path.to_str().unwrap();
    let nvs = env!("CARGO_BIN_EXE_nvs");
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut kills, mut acked_total, mut released) = (0, 0, 0);
    for round in 0..ROUNDS {
        let mut writers = [Some(start(nvs, p, 0)), Some(start(nvs, p, 1))];
        let follower = Command::new(nvs)
            .args(["follow", p, "--verify-stress", "--timeout", "20"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_micros(2_000 + next() % 30_000));
        let first = (next() % 2) as usize;
        let mut acked: Vec<(u32, String, u64)> = Vec::new();
        let w = writers[first].take().unwrap();
        acked.extend(kill(w).into_iter().map(|(n, v)| (first as u32, n, v)));
        kills += 1;
        // The follower learns that lane's writer is gone while the other still writes.
        let out = follower.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "round {round}: follower: {err}");
        assert!(err.contains(&format!("no writer holds lane {first} and")), "round {round}: only lane {first}: {err}");
        assert!(!err.contains("BAD"), "round {round}: the follower saw wrong or uncommitted data: {err}");
        std::thread::sleep(Duration::from_micros(1_000 + next() % 10_000));
        let other = 1 - first;
        let w = writers[other].take().unwrap();
        acked.extend(kill(w).into_iter().map(|(n, v)| (other as u32, n, v)));
        kills += 1;
        let pool = FilePool::open(&path, Access::ReadOnly).unwrap();
        for (lane, name, v) in &acked {
            let bytes = match pool.get_vec(Key::on(*lane, name.as_bytes()), *v) {
                Ok(b) => b,
                // Released by the writer's own retention: allowed only for a version with
                // at least KEEP newer ones.
                Err(e) if e.core() == Some(nvs_core::Error::NotFound) => {
                    let latest = pool.latest(Key::on(*lane, name.as_bytes())).unwrap();
                    assert!(latest >= v + KEEP as u64, "round {round}: lane {lane} {name} v{v} lost (latest {latest})");
                    released += 1;
                    continue;
                }
                Err(e) => panic!("round {round}: lane {lane} {name} v{v}: {e}"),
            };
            assert_eq!(bytes, stress_payload(*lane, name.as_bytes(), *v, bytes.len()), "round {round}: {name} v{v}");
        }
        acked_total += acked.len();
    }
    let pool = FilePool::open(&path, Access::ReadOnly).unwrap();
    let verified = pool.verify().unwrap();
    eprintln!(
        "{kills} kills of two writer processes survived, {acked_total} acknowledged puts checked \
         ({released} released by retention, each with {KEEP} newer versions), {verified} objects verified, \
         {} segments used",
        pool.stats().segments_used
    );
    let _ = std::fs::remove_file(&path);
    assert!(kills >= 50 && acked_total > kills);
}
