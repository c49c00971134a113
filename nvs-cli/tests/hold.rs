//! `nvs hold POOL -- COMMAND`: the pool's writer locks held for a writer nvs cannot see
//! (a VM's guest writing the pool through an emulated NVDIMM). While it runs, host
//! writers are refused and change nothing, and followers see a live writer; it exits
//! with the command's status; the command inherits the locks, so they outlive a killed
//! `nvs hold`. (The unikernel test holds a real guest's pool this way.)

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const NVS: &str = env!("CARGO_BIN_EXE_nvs");

fn nvs(args: &[&str]) -> Output {
    Command::new(NVS).args(args).stdin(Stdio::null()).output().expect("run nvs")
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// A pool with one object on lane 0 (the lane not closed), and a file to put.
fn pool(dir: &Path) -> (String, String) {
    let pool = dir.join("guest.pool").display().to_string();
    let input = dir.join("input").display().to_string();
    std::fs::write(&input, b"host bytes").unwrap();
    assert!(nvs(&["create", &pool, "--size", "4M"]).status.success());
    assert!(nvs(&["put", &pool, "a", &input]).status.success());
    (pool, input)
}

#[test]
fn host_writers_are_refused_while_a_hold_runs_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, input) = pool(dir.path());
    let before = std::fs::read(&pool).unwrap();
    // The held command runs the host's writers and reports how each exited.
    let script = format!(
        "{NVS} put {pool} a {input}; echo put $?; {NVS} reclaim {pool} --keep 1; echo reclaim $?; \
         {NVS} close {pool}; echo close $?; exit 7"
    );
    let o = nvs(&["hold", &pool, "--", "sh", "-c", &script]);
    assert_eq!(o.status.code(), Some(7), "hold exits with the command's status: {}", text(&o));
    let out = text(&o);
    for cmd in ["put", "reclaim", "close"] {
        assert!(out.contains(&format!("{cmd} 2")), "{cmd} refused with exit 2: {out}");
    }
    assert_eq!(out.matches("is locked by another writer").count(), 3, "{out}");
    assert!(std::fs::read(&pool).unwrap() == before, "a refused writer changed the pool");
    // After the hold, the host writes again.
    assert!(nvs(&["put", &pool, "a", &input]).status.success());
    // A signal's death: 128 + N.
    let o = nvs(&["hold", &pool, "--", "sh", "-c", "kill -9 $$"]);
    assert_eq!(o.status.code(), Some(137));
}

#[test]
fn a_follower_sees_a_live_writer_while_the_hold_runs() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = pool(dir.path());
    // A writer killed after a put (as a guest looks to the host: its lane neither closed
    // nor detached, and no lock): its writer is gone.
    let mut w = Command::new(NVS).args(["stress-writer", &pool]).stdout(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    std::io::BufReader::new(w.stdout.take().unwrap()).read_line(&mut first).unwrap();
    w.kill().unwrap();
    w.wait().unwrap();
    assert!(!first.is_empty(), "the writer put nothing");
    let o = nvs(&["follow", &pool, "--timeout", "5"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("writer gone"), "{}", text(&o));
    // Held: the writer lives; the follower prints what is there and waits (timeout: 2).
    let follow = format!("{NVS} follow {pool} --timeout 0.5");
    let o = nvs(&["hold", &pool, "--", "sh", "-c", &follow]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("timed out waiting for the writer"), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).lines().count() >= 2, "{}", text(&o));
}

#[test]
fn the_locks_outlive_a_killed_hold_while_its_command_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, input) = pool(dir.path());
    let mut hold = Command::new(NVS).args(["hold", &pool, "--", "sleep", "3"]).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    hold.kill().unwrap(); // SIGKILL: `sleep` still holds the inherited description
    hold.wait().unwrap();
    let o = nvs(&["put", &pool, "a", &input]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("locked by another writer"));
}

#[test]
fn hold_refuses_what_it_cannot_hold_or_run() {
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = pool(dir.path());
    let missing: PathBuf = dir.path().join("missing.pool");
    let o = nvs(&["hold", missing.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("No such file"), "{}", text(&o));
    let o = nvs(&["hold", &pool]);
    assert_eq!(o.status.code(), Some(2), "no command: a usage error");
    let o = nvs(&["hold", &pool, "--", "/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("run /nonexistent/command"), "{}", text(&o));
    // Already held by a writer: refused at once, the command not run.
    let marker = dir.path().join("ran");
    let inner = format!("{NVS} hold {pool} -- touch {}", marker.display());
    let o = nvs(&["hold", &pool, "--", "sh", "-c", &inner]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(!marker.exists(), "the command ran without the locks");
}
