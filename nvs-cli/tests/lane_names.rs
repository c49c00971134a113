//! `nvs` on a pool with lane names: ranks put the same name on their own lanes and each
//! gets versions 1, 2, ...; `get --lane`, `ls`, `info`, `check`, `migrate` and `follow`
//! know the lanes; a read by a name several lanes hold is a clear refusal.

mod common;
use common::*;

#[test]
fn ranks_put_one_name_each_with_their_own_versions() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p");
    let p = pool.to_str().unwrap();
    let o = nvs(&["create", p, "--size", "1M", "--segment-size", "16K", "--lanes", "4", "--lane-names"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("with names of their own"), "{}", stdout(&o));
    for step in 1..=2 {
        for lane in 0..3 {
            let o = nvs_stdin(
                &["put", p, "temperature", "--lane", &lane.to_string()],
                format!("r{lane}s{step}").as_bytes(),
            );
            assert_eq!((code(&o), stdout(&o)), (0, format!("{step}\n")), "{}", stderr(&o));
        }
    }
    let o = nvs_stdin(&["put", p, "pressure", "--lane", "1"], b"solo");
    assert_eq!(stdout(&o), "1\n");
    for lane in 0..3 {
        let o = nvs(&["get", p, "temperature", "--lane", &lane.to_string(), "--version", "1"]);
        assert_eq!((code(&o), stdout(&o)), (0, format!("r{lane}s1")), "{}", stderr(&o));
        let o = nvs(&["get", p, "temperature", "--lane", &lane.to_string()]);
        assert_eq!(stdout(&o), format!("r{lane}s2"), "the latest of lane {lane}");
    }
    let o = nvs(&["get", p, "temperature"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("3 lanes hold temperature") && stderr(&o).contains("--lane"), "{}", stderr(&o));
    let o = nvs(&["get", p, "pressure"]);
    assert_eq!((code(&o), stdout(&o)), (0, "solo".to_string()), "a name one lane holds reads by name alone");
    let o = nvs(&["get", p, "temperature", "--lane", "3"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("no object named temperature"), "{}", stderr(&o));
    let o = nvs(&["get", p, "temperature", "--lane", "9"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("lane 9 does not exist"), "{}", stderr(&o));
    let ls = stdout(&nvs(&["ls", p]));
    for lane in 0..3 {
        assert!(ls.contains(&format!("temperature  lane={lane}  versions=2 latest=2")), "{ls}");
    }
    assert!(ls.contains("pressure  lane=1  versions=1"), "{ls}");
    assert!(stdout(&nvs(&["info", p])).contains("every lane its own"));
    let o = nvs(&["check", p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    // A copy keeps the lane names and every lane's versions.
    let copy = dir.path().join("copy");
    let o = nvs(&["migrate", p, copy.to_str().unwrap()]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let o = nvs(&["get", copy.to_str().unwrap(), "temperature", "--lane", "2", "--version", "2"]);
    assert_eq!(stdout(&o), "r2s2", "{}", stderr(&o));
    // A follower reports every lane's versions.
    let o = nvs(&["follow", p, "--timeout", "0.2"]);
    let seen = stdout(&o);
    for lane in 0..3 {
        for step in 1..=2 {
            assert!(seen.contains(&format!("{lane}\ttemperature\t{step}\t4\n")), "{seen}");
        }
    }
}

/// Ten `nvs put` of one name started at once on a pool with lane names all succeed, one
/// series on one lane: each waits for the name's lane while another writes it (they used
/// to take the lowest free lanes, one series split over ten lanes with the same version
/// numbers), prints nothing on stderr, and its bytes are there at the version it printed.
#[test]
fn ten_puts_at_once_all_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p");
    let p = pool.to_str().unwrap();
    let o = nvs(&["create", p, "--size", "4M", "--segment-size", "16K", "--lanes", "16", "--lane-names"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let nvs_bin = env!("CARGO_BIN_EXE_nvs");
    let children: Vec<_> = (0..10)
        .map(|i| {
            let mut c = std::process::Command::new(nvs_bin)
                .args(["put", p, "x"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            c.stdin.take().unwrap().write_all(format!("put number {i}").as_bytes()).unwrap();
            (i, c)
        })
        .collect();
    let mut placed = std::collections::BTreeSet::new();
    for (i, c) in children {
        let o = c.wait_with_output().unwrap();
        assert_eq!(code(&o), 0, "put {i}: {}", stderr(&o));
        let version: u64 = stdout(&o).trim().parse().expect("a version");
        assert_eq!(stderr(&o), "", "put {i}");
        assert!(placed.insert(version), "two puts at v{version}");
        let got = nvs(&["get", p, "x", "--lane", "0", "--version", &version.to_string()]);
        assert_eq!(stdout(&got), format!("put number {i}"));
    }
    assert_eq!(placed, (1..=10).collect(), "one series, versions 1 to 10");
    assert_eq!(code(&nvs(&["check", p])), 0);
}

/// Retention and closing of one lane beside a live writer process of another: `reclaim
/// --lane 1` and `close --lane 1` run while an `nvs put --lane 0` holds lane 0 (waiting
/// for its input); the live writer's lane, and the whole pool, are refused with the lock
/// named; the writer then commits, and every lane's kept versions are there.
#[test]
fn reclaim_and_close_one_lane_beside_a_live_writer() {
    let dir = tempfile::tempdir().unwrap();
    let pool = dir.path().join("p");
    let p = pool.to_str().unwrap();
    let o = nvs(&["create", p, "--size", "1M", "--segment-size", "16K", "--lanes", "4", "--lane-names"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for v in 1..=12 {
        for lane in ["0", "1"] {
            let o = nvs_stdin(&["put", p, "t", "--lane", lane], &vec![v as u8; 9000]);
            assert_eq!(stdout(&o), format!("{v}\n"), "{}", stderr(&o));
        }
    }
    // A writer of lane 0 that has opened the pool and waits for its input.
    let mut writer = std::process::Command::new(env!("CARGO_BIN_EXE_nvs"))
        .args(["put", p, "t", "--lane", "0"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Asked of the kernel without taking the lock (a probe that took it could make the
    // writer find its lane busy).
    let reader = nvs_std::FilePool::open(&pool, nvs_std::Access::ReadOnly).unwrap();
    let t = std::time::Instant::now();
    while !reader.lane_writer_alive(0) {
        assert!(t.elapsed().as_secs() < 10, "the writer never took lane 0");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let o = nvs(&["close", p, "--lane", "0"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("lock"), "{}", stderr(&o));
    let o = nvs(&["reclaim", p, "--keep", "2"]);
    assert_eq!(code(&o), 2, "the whole pool's retention waits for its lane writers");
    for lane in ["300", "70000"] {
        let o = nvs(&["reclaim", p, "--keep", "2", "--lane", lane]);
        assert_eq!(code(&o), 2, "lane {lane}: {}", stdout(&o));
        assert!(stderr(&o).contains(&format!("lane {lane} does not exist")), "{}", stderr(&o));
    }
    let o = nvs(&["reclaim", p, "--keep", "2", "--lane", "1"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(!stdout(&o).contains(": 0 segments freed"), "{}", stdout(&o));
    let o = nvs(&["close", p, "--lane", "1"]);
    assert_eq!((code(&o), stdout(&o)), (0, format!("{p}: lane 1 closed\n")), "{}", stderr(&o));
    use std::io::Write;
    writer.stdin.take().unwrap().write_all(b"thirteen").unwrap();
    let o = writer.wait_with_output().unwrap();
    assert_eq!((code(&o), stdout(&o)), (0, "13\n".to_string()), "{}", stderr(&o));
    let o = nvs(&["get", p, "t", "--lane", "1", "--version", "1"]);
    assert_eq!(code(&o), 2, "lane 1's oldest versions were released");
    let o = nvs(&["get", p, "t", "--lane", "1", "--version", "12"]);
    assert_eq!(stdout(&o).as_bytes(), vec![12u8; 9000]);
    let o = nvs(&["get", p, "t", "--lane", "0", "--version", "1"]);
    assert_eq!(stdout(&o).as_bytes(), vec![1u8; 9000], "lane 0 kept everything");
    assert_eq!(stdout(&nvs(&["get", p, "t", "--lane", "0"])), "thirteen");
    assert_eq!(code(&nvs(&["check", p])), 0);
}
