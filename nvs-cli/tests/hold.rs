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
    // Its own failures are 125 (not held), 126 (cannot run), 127 (not found), apart
    // from the command's statuses.
    let missing: PathBuf = dir.path().join("missing.pool");
    let o = nvs(&["hold", missing.to_str().unwrap(), "--", "true"]);
    assert_eq!(o.status.code(), Some(125));
    assert!(text(&o).contains("No such file"), "{}", text(&o));
    let o = nvs(&["hold", &pool]);
    assert_eq!(o.status.code(), Some(2), "no command: a usage error");
    let o = nvs(&["hold", &pool, "--", ""]);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    let o = nvs(&["hold", &pool, "--", "/nonexistent/command"]);
    assert_eq!(o.status.code(), Some(127));
    assert!(text(&o).contains("run /nonexistent/command"), "{}", text(&o));
    let o = nvs(&["hold", &pool, "--", dir.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126), "{}", text(&o));
    // Nothing that can be a pool: refused, unopened.
    for what in ["/dev/null", dir.path().to_str().unwrap()] {
        let o = nvs(&["hold", what, "--", "true"]);
        assert_eq!(o.status.code(), Some(125), "{what}: {}", text(&o));
    }
    // Already held by a writer: refused at once, the command not run.
    let marker = dir.path().join("ran");
    let inner = format!("{NVS} hold {pool} -- touch {}", marker.display());
    let o = nvs(&["hold", &pool, "--", "sh", "-c", &inner]);
    assert_eq!(o.status.code(), Some(125), "{}", text(&o));
    assert!(text(&o).contains("locked by another writer"), "{}", text(&o));
    assert!(!marker.exists(), "the command ran without the locks");
}

/// A terminal's Ctrl-C (SIGINT to the process group) reaches the command, which may
/// take its time; hold waits for it and exits with its status. A SIGTERM to hold alone
/// is passed on. The command starts with SIGINT and SIGXFSZ at their defaults.
#[test]
fn signals_reach_the_command_and_hold_exits_with_its_status() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let (pool, _) = pool(dir.path());
    let trapped =
        |sig: &str, code: u8| format!("trap 'sleep 0.3; exit {code}' {sig}; echo ready; while :; do sleep 0.05; done");
    for (sig, to_group, code) in [(libc::SIGINT, true, 5), (libc::SIGTERM, false, 6), (libc::SIGHUP, false, 7)] {
        let name = match sig {
            libc::SIGINT => "INT",
            libc::SIGTERM => "TERM",
            _ => "HUP",
        };
        let mut hold = Command::new(NVS)
            .args(["hold", &pool, "--", "sh", "-c", &trapped(name, code)])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(hold.stdout.take().unwrap()), &mut line).unwrap();
        let pid = hold.id() as i32;
        // SAFETY: signalling our own child (or its process group).
        unsafe { libc::kill(if to_group { -pid } else { pid }, sig) };
        let status = hold.wait().unwrap();
        assert_eq!(status.code(), Some(code as i32), "SIG{name}: hold passes the command's status on");
    }
    // The command's dispositions are the defaults: SIGXFSZ kills it (153 = 128 + 25).
    let o = nvs(&["hold", &pool, "--", "sh", "-c", "ulimit -f 1; head -c 100000 /dev/zero > big"]);
    assert_eq!(o.status.code(), Some(153), "{}", text(&o));
}

/// A guest formats its pool after it boots: a follower of a held file that is not yet
/// a pool waits for it (here, to its timeout) instead of calling it "not a pool".
#[test]
fn a_follower_of_a_held_unformatted_file_waits() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("blank.pool");
    std::fs::write(&file, vec![0u8; 1 << 20]).unwrap();
    let file = file.to_str().unwrap();
    let o = nvs(&["follow", file, "--timeout", "0.2"]);
    assert_eq!(o.status.code(), Some(1), "not held: not a pool: {}", text(&o));
    let follow = format!("{NVS} follow {file} --timeout 0.3");
    let o = nvs(&["hold", file, "--", "sh", "-c", &follow]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("waiting for the writer to format the pool"), "{}", text(&o));
}
