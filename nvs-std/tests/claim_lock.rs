//! A writer process stopped while it holds the pool's claim lock (SIGSTOP, a debugger)
//! used to freeze every other writer at its next segment claim, and every open and
//! refresh, with no message. Now they wait `NVS_CLAIM_WAIT_MS` (here 300 ms), then fail
//! with `ClaimLockTimeout` naming the holder's pid, having changed nothing; once the lock
//! goes, they go on. An open (a whole recovery) takes no lock at all: it reads the
//! segment headers before and after, and recovers again if they changed. The holder
//! here is this process itself, through a file description of its own (as another
//! process's would be). Its own test binary: it sets the wait.
#![cfg(not(miri))]

use nvs_core::Key;
use nvs_core::Object;
use nvs_std::{CreateOptions, FilePool};
use std::os::fd::AsRawFd;

/// Take (`true`) or drop an OFD write lock on byte 1 (the claim lock) through `f`.
fn claim_lock(f: &std::fs::File, take: bool) {
    // SAFETY: a zeroed `flock`, completed below, passed to fcntl on an open descriptor.
    let rc = unsafe {
        let mut fl: libc::flock = std::mem::zeroed();
        fl.l_type = if take { libc::F_WRLCK } else { libc::F_UNLCK } as libc::c_short;
        fl.l_whence = libc::SEEK_SET as libc::c_short;
        fl.l_start = 1;
        fl.l_len = 1;
        libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &mut fl)
    };
    assert_eq!(rc, 0, "fcntl: {}", std::io::Error::last_os_error());
}

#[test]
fn a_stopped_claim_lock_holder_is_a_clear_error_not_a_freeze() {
    std::env::set_var("NVS_CLAIM_WAIT_MS", "300");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.pool");
    let opts = CreateOptions::new().segment_len(4096).lanes_max(2).lane_names(true);
    FilePool::create(&path, 1 << 20, &opts).unwrap().close().unwrap();
    let holder = std::fs::OpenOptions::new().read(true).write(true).open(&path).unwrap();

    // Lane 1 holds objects in several segments.
    let mut other = FilePool::open_lanes(&path, Some(&[1])).unwrap();
    for i in 0..20u8 {
        other.put(1, Object::new("y", &[i; 1000])).unwrap();
    }
    other.close().unwrap();

    // An open recovers without the lock (it used to wait for it, then fail): at once.
    claim_lock(&holder, true);
    let t = std::time::Instant::now();
    let mut w = FilePool::open_lanes(&path, Some(&[0])).unwrap();
    assert!(t.elapsed() < std::time::Duration::from_millis(250), "waited {:?} for the lock", t.elapsed());
    assert_eq!(w.latest(Key::on(1, "y")).unwrap(), 20);
    let mut b = [0u8; 1000];
    assert_eq!(w.get(Key::on(1, "y"), 7, &mut b).unwrap(), 1000);
    assert_eq!(b, [6u8; 1000]);

    // A put that needs a new segment waits, then fails having committed nothing.
    let mut v = 0;
    let e = loop {
        match w.put(0, Object::new("x", &[7u8; 1000])) {
            Ok(p) => v = p.version,
            Err(e) => break e,
        }
        assert!(v < 100, "puts went on without a claim");
    };
    assert!(matches!(e.core(), Some(nvs_core::Error::ClaimLockTimeout { .. })), "{e}");
    assert!(e.to_string().contains(&format!("process {}", std::process::id())), "names the holder: {e}");
    claim_lock(&holder, false);
    assert_eq!(w.put(0, Object::new("x", &[8u8; 1000])).unwrap().version, v + 1, "nothing was committed");
    assert_eq!(w.latest("x").unwrap(), v + 1);
    w.close().unwrap();
}
