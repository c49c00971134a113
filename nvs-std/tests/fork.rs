//! A child that `fork` made of a writer shares the writer's mapping and locks but not its
//! state: its writes are refused (they interleaved with the parent's and made the log
//! unreadable: "gap in a lane's unit sequence"), and its close writes nothing. The
//! parent goes on, and every version it committed reads back.
#![cfg(not(miri))]

use nvs_core::Object;
use nvs_std::{Access, CreateOptions, Error, FilePool};

#[test]
fn a_forked_child_cannot_write_its_parents_pool() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f.pool");
    let mut pool = FilePool::create(&path, 8 << 20, &CreateOptions::default()).expect("create");
    for v in 1..=5u8 {
        pool.put(0, Object::new("a", &[v; 3000])).expect("put");
    }
    let lane = pool.lane(1).expect("lane 1");
    drop(lane);
    // SAFETY: the child only runs nvs calls and then `_exit`s, never returning into the
    // test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // What the child may not do, each refused with nothing written; then the close an
        // inherited atexit handler would run.
        let put = pool.put(0, Object::new("a", &[99; 3000]));
        let batch = pool.put_batch(0, &[Object::new("b", b"x")]);
        let lane = pool.lane(1).map(|_| ());
        let close_lane = pool.close_lane(0);
        let refused = |e: Option<&Error>| matches!(e, Some(Error::Forked { .. }));
        let all = refused(put.as_ref().err())
            && refused(batch.as_ref().err())
            && refused(lane.as_ref().err())
            && refused(close_lane.as_ref().err());
        let message = put.err().map(|e| e.to_string()).unwrap_or_default();
        let closed = pool.close().is_ok();
        let code = if all && closed && message.contains("fork") { 0 } else { 1 };
        // SAFETY: ends the child without running the parent's destructors or harness.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just made.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child was not refused (status {status})");
    for v in 6..=10u8 {
        pool.put(0, Object::new("a", &[v; 3000])).expect("put after the fork");
    }
    pool.close().expect("close");
    let pool = FilePool::open(&path, Access::ReadOnly).expect("reopen: the pool is whole");
    for v in 1..=10u8 {
        assert_eq!(pool.get_vec("a", u64::from(v)).expect("get"), vec![v; 3000], "version {v}");
    }
    assert!(pool.latest("b").is_err(), "the child's batch was written");
}
