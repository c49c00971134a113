//! `user::check` on small protocols of a user's own: what it passes, what it catches,
//! and that a failure's repro reproduces it alone.

use nvs_core::Key;
use nvs_verify::user::{check, CrashPool, Report, Run, Setup};

/// Step `k` writes `a` then `b` (each its own put, version k), then `done` = k, and is
/// acknowledged; `done_first` seeds the ordering bug (the commit before the data).
fn steps(run: &mut Run<'_, u64>, done_first: bool, ack_early: bool) -> Result<(), String> {
    for k in 1..=2u64 {
        if ack_early {
            run.ack(k); // a bug of its own: promised before anything was written
        }
        let done = |run: &mut Run<'_, u64>| run.put(1, b"done", &k.to_le_bytes()).map(|_| ());
        if done_first {
            done(run).map_err(|e| e.to_string())?;
        }
        for name in [&b"a"[..], b"b"] {
            run.put(1, name, &vec![k as u8; 70 * k as usize]).map_err(|e| e.to_string())?;
        }
        if !done_first {
            done(run).map_err(|e| e.to_string())?;
        }
        if !ack_early {
            run.ack(k);
        }
    }
    Ok(())
}

/// The step to resume from, loading `a` and `b` of it.
fn restart(pool: &CrashPool<'_>) -> Result<u64, String> {
    let Ok(v) = pool.latest("done") else { return Ok(0) };
    let mut w = [0u8; 8];
    pool.get("done", v, &mut w).map_err(|e| e.to_string())?;
    let k = u64::from_le_bytes(w);
    for name in ["a", "b"] {
        let mut buf = vec![0u8; 70 * k as usize];
        pool.get(name, k, &mut buf).map_err(|e| format!("{name} v{k}: {e}"))?;
        if buf.iter().any(|&x| x != k as u8) {
            return Err(format!("{name} v{k}: other bytes"));
        }
    }
    Ok(k)
}

fn promise(k: &u64, acked: &[u64]) -> Result<(), String> {
    match acked.last() {
        Some(&safe) if *k < safe => Err(format!("resumes at {k}, but {safe} was acknowledged")),
        _ => Ok(()),
    }
}

fn run(setup: &Setup, done_first: bool, ack_early: bool) -> Report {
    check(setup, |r| steps(r, done_first, ack_early), restart, promise)
}

#[test]
fn a_correct_protocol_passes_every_crash_image() {
    let r = run(&Setup::new(32 << 10), false, false);
    assert!(r.passed(), "{r}");
    // A crash point before every fence: one per put (sealed units), one per claim.
    assert!(r.points >= 8, "{r}");
    assert!(r.states > r.points as u64, "some crash point has more than one image: {r}");
}

#[test]
fn an_ordering_bug_is_caught_and_its_repro_reproduces_it() {
    let setup = Setup::new(32 << 10);
    let r = run(&setup, true, false);
    let f = r.failure.clone().unwrap_or_else(|| panic!("the seeded bug was not caught: {r}"));
    assert!(f.message.contains("the restart code failed"), "{r}");
    assert!(f.repro().starts_with(&format!("NVS_CHECK_REPRO=check@{}:", f.point)), "{}", f.repro());
    // Told in the workload's words: its operations, the one in flight, what was owed and
    // what the restart code returned, then the repro.
    assert!(f.story.contains("operation 0: put(lane 1, \"done\") -> v1") && f.story.contains("IN FLIGHT"), "{r}");
    assert!(f.story.contains("your restart code returned: failed: a v1"), "{r}");
    let shown = r.to_string();
    assert!(shown.contains(&f.story) && shown.contains(&f.repro()), "{shown}");
    // The repro alone: the same failure, one image.
    let alone = run(&Setup { only: Some((f.point, f.choices.clone())), ..setup.clone() }, true, false);
    assert_eq!((alone.points, alone.states), (1, 1));
    assert_eq!(alone.failure.as_ref().map(|g| &g.message), Some(&f.message), "{alone}");
    // One image checked is never a pass of the whole check, even where that image passes
    // (an image of the correct protocol: the first one a predicate that always fails sees).
    let never = |_: &u64, _: &[u64]| Err("never".to_string());
    let g = check(&setup, |r| steps(r, false, false), restart, never).failure;
    let g = g.unwrap_or_else(|| panic!("a predicate that always fails passed"));
    let fixed = run(&Setup { only: Some((g.point, g.choices)), ..setup.clone() }, false, false);
    assert!(fixed.failure.is_none() && fixed.error.is_none() && !fixed.passed(), "{fixed}");
}

#[test]
fn a_promise_made_too_early_is_caught_by_the_predicate() {
    let r = run(&Setup::new(32 << 10), false, true);
    let f = r.failure.unwrap_or_else(|| panic!("an early acknowledgement went unnoticed"));
    assert!(f.message.contains("was acknowledged"), "{}", f.message);
}

#[test]
fn a_failing_workload_or_a_bad_repro_is_an_error_not_a_violation() {
    let setup = Setup::new(32 << 10);
    let r = check(&setup, |_run: &mut Run<'_, u64>| Err("no".to_string()), restart, promise);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("the workload failed: no")), "{r}");
    assert!(r.failure.is_none() && !r.passed());
    let r = check(&setup, |_run: &mut Run<'_, u64>| panic!("boom"), restart, promise);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("panicked: boom")), "{r}");
    let r = run(&Setup { only: Some((1 << 30, Vec::new())), ..setup.clone() }, false, false);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("past the trace's end")), "{r}");
    // A pool too small to format.
    let r = run(&Setup::new(4096), false, false);
    assert!(r.error.as_deref().is_some_and(|e| e.starts_with("format")), "{r}");
    // A media length the simulator cannot have (its word is 8 bytes): an error, not a
    // panic.
    for len in [1, 4097, 8191, (32 << 10) + 4] {
        let r = run(&Setup::new(len), false, false);
        assert!(r.error.as_deref().is_some_and(|e| e.contains("not a multiple of 8")), "{len}: {r}");
        assert!(!r.passed());
    }
}

/// A workload too long to check (a put loop that never stops once the pool is full, an
/// object of many MiB: every word stored is a trace event) stops at `max_events` with an
/// error that says so, instead of growing without bound (it reached 2.5 GB in 10 s).
#[test]
fn a_workload_past_its_event_bound_stops_with_an_error() {
    let mut setup = Setup::new(64 << 10);
    setup.max_events = 30_000;
    let forever = check(
        &setup,
        |run: &mut Run<'_, u64>| loop {
            let _ = run.put(0, b"log", &[7u8; 1000]); // Full after a while, and on it goes
        },
        |_pool: &CrashPool<'_>| Ok(0u64),
        |_: &u64, _: &[u64]| Ok(()),
    );
    let e = forever.error.clone().unwrap_or_default();
    assert!(e.contains("more than 30000 trace events and operations") && e.contains("max_events"), "{forever}");
    assert!(!forever.passed());
    let mut setup = Setup::new(4 << 20);
    setup.max_events = 100_000;
    let big = check(
        &setup,
        |run: &mut Run<'_, u64>| run.put(0, b"big", &vec![1u8; 2 << 20]).map(|_| ()).map_err(|e| e.to_string()),
        |_pool: &CrashPool<'_>| Ok(0u64),
        |_: &u64, _: &[u64]| Ok(()),
    );
    assert!(big.error.as_deref().unwrap_or_default().contains("smaller objects"), "{big}");
}

/// A workload whose runs store other bytes (here: its puts' order flips between runs, as
/// a HashMap's iteration order may) is refused, naming the operation where the runs part;
/// it used to pass or fail by chance, and its repros named images of another run.
#[test]
fn a_nondeterministic_workload_is_refused_naming_where_its_runs_part() {
    let mut runs = 0;
    let r = check(
        &Setup::new(32 << 10),
        |run: &mut Run<'_, u64>| {
            runs += 1;
            let order: [&[u8]; 2] = if runs == 1 { [b"x", b"y"] } else { [b"y", b"x"] };
            for name in order {
                run.put(0, name, b"12345678").map_err(|e| e.to_string())?;
            }
            Ok(())
        },
        |_pool| Ok(()),
        |_: &(), _: &[u64]| Ok(()),
    );
    let e = r.error.clone().unwrap_or_else(|| panic!("a nondeterministic workload was checked: {r}"));
    assert!(e.contains("not deterministic") && e.contains("operation 0, put(lane 0, \"x\")"), "{e}");
    assert!(!r.passed() && runs == 2);
}

/// A check whose crash points ran out of budget is not a pass, and says so in capitals
/// (it used to end with "no violation", which reads as one).
#[test]
fn an_incomplete_check_says_not_a_pass() {
    let setup = Setup { budget: 1, ..Setup::new(32 << 10) };
    let r = run(&setup, false, false);
    assert!(r.incomplete > 0 && r.failure.is_none() && !r.passed(), "{r}");
    assert!(r.to_string().contains(&format!("NOT A PASS: {} crash points not explored", r.incomplete)), "{r}");
}

/// Metadata and delta puts are checked too (`Run::put_object`): a restart that reads a
/// step's metadata and a delta version's whole bytes passes every image.
#[test]
fn metadata_and_deltas_are_checked() {
    let mut setup = Setup::new(1 << 20);
    setup.options.segment_len = Some(256 << 10); // a delta's parent lies in its segment
    let r = check(
        &setup,
        |run: &mut Run<'_, u64>| {
            let mut grid = vec![0u8; 64 << 10];
            let v =
                run.put_object(0, nvs_core::Object::new("grid", &grid).meta(b"step=1\n")).map_err(|e| e.to_string())?;
            run.ack(v.version);
            grid[100] = 7;
            let d = nvs_core::Object::new("grid", &grid).delta(v.version, &[(100u64, 1u64)]).meta(b"step=2\n");
            let w = run.put_object(0, d).map_err(|e| e.to_string())?;
            if !w.delta {
                return Err("the second put was not stored as a delta".into());
            }
            run.ack(w.version);
            Ok(())
        },
        |pool| {
            let Ok(v) = pool.latest("grid") else { return Ok(0) };
            let mut meta = [0u8; 16];
            let n = pool.meta("grid", v, &mut meta).map_err(|e| e.to_string())?;
            if meta[..n] != *format!("step={v}\n").as_bytes() {
                return Err(format!("v{v}'s metadata is {:?}", &meta[..n]));
            }
            let mut grid = vec![0u8; 64 << 10];
            pool.get("grid", v, &mut grid).map_err(|e| e.to_string())?;
            if grid[100] != if v == 2 { 7 } else { 0 } {
                return Err(format!("v{v}'s bytes are not the ones put"));
            }
            Ok(v)
        },
        |&v, acked| match acked.last() {
            Some(&a) if v < a => Err(format!("restart found v{v}, v{a} was acknowledged")),
            _ => Ok(()),
        },
    );
    assert!(r.passed() && r.points > 2, "{r}");
}

/// Two writer threads, each on its own lane (`Run::lane`), and a manifest on lane 2 that
/// names the last step both lanes hold. `manifest_early`: thread A writes the manifest of
/// step k before thread B has written its part of k (a barrier orders them, so every
/// interleaving has the crash point between).
fn two_threads(run: &mut Run<'_, u64>, manifest_early: bool) -> Result<(), String> {
    let barrier = std::sync::Barrier::new(2);
    let (a, b) = (run.lane(0).map_err(|e| e.to_string())?, run.lane(1).map_err(|e| e.to_string())?);
    let mut manifest = run.lane(2).map_err(|e| e.to_string())?;
    let err = |e: nvs_core::Error| e.to_string();
    std::thread::scope(|s| {
        let ta = s.spawn(|| -> Result<(), String> {
            let mut a = a;
            for k in 1..=2u64 {
                a.put(b"part", &[k as u8; 100]).map_err(err)?;
                if manifest_early {
                    manifest.put(b"manifest", &k.to_le_bytes()).map_err(err)?;
                    manifest.ack(k);
                }
                barrier.wait();
                barrier.wait();
                if !manifest_early {
                    manifest.put(b"manifest", &k.to_le_bytes()).map_err(err)?;
                    manifest.ack(k);
                }
                barrier.wait();
            }
            Ok(())
        });
        let tb = s.spawn(|| -> Result<(), String> {
            let mut b = b;
            for k in 1..=2u64 {
                barrier.wait();
                b.put(b"part", &[k as u8; 100]).map_err(err)?;
                barrier.wait();
                barrier.wait();
            }
            Ok(())
        });
        ta.join().map_err(|_| "thread A panicked".to_string())??;
        tb.join().map_err(|_| "thread B panicked".to_string())?
    })
}

/// The step the manifest names, with both lanes' parts of it checked.
fn two_restart(pool: &CrashPool<'_>) -> Result<u64, String> {
    let Ok(v) = pool.latest(Key::on(2, "manifest")) else { return Ok(0) };
    let mut w = [0u8; 8];
    pool.get(Key::on(2, "manifest"), v, &mut w).map_err(|e| e.to_string())?;
    let k = u64::from_le_bytes(w);
    for lane in [0, 1] {
        let mut part = [0u8; 100];
        pool.get(Key::on(lane, "part"), k, &mut part).map_err(|e| format!("lane {lane}'s part {k}: {e}"))?;
    }
    Ok(k)
}

/// Issue 56, item 3: writer threads used to write through `run.pool().lane(..)`, and the
/// check blamed nvs for the writes it had not recorded. Lanes from `Run::lane` are
/// recorded: the correct two-thread protocol passes every crash image, the one whose
/// manifest runs ahead of the other thread's data is caught, in the workload's words.
#[test]
fn a_two_thread_protocol_checks() {
    let mut setup = Setup::new(64 << 10);
    setup.options.lane_names = true;
    let good = check(&setup, |r| two_threads(r, false), two_restart, promise);
    assert!(good.passed() && good.points >= 10, "{good}");
    let bad = check(&setup, |r| two_threads(r, true), two_restart, promise);
    let f = bad.failure.clone().unwrap_or_else(|| panic!("the early manifest was not caught: {bad}"));
    assert!(f.message.contains("the restart code failed: lane 1's part 1"), "{bad}");
    assert!(f.story.contains("put(lane 2, \"manifest\") -> v1") && f.story.contains("operation 1: lane(1)"), "{bad}");
}

/// A store the check did not record (a writer thread's lane taken from `run.pool()`) is
/// refused, saying what to use instead; it used to be reported as nvs breaking its
/// contract.
#[test]
fn a_write_the_check_cannot_see_is_refused_naming_the_way_to_write() {
    let r = check(
        &Setup::new(32 << 10),
        |run: &mut Run<'_, u64>| {
            run.put(0, b"seen", b"12345678").map_err(|e| e.to_string())?;
            let mut unseen = run.pool().lane(1).map_err(|e| e.to_string())?;
            unseen.put(nvs_core::Object::new("unseen", b"abcdefgh")).map_err(|e| e.to_string())?;
            Ok(())
        },
        |_pool| Ok(()),
        |_: &(), _: &[u64]| Ok(()),
    );
    let e = r.error.clone().unwrap_or_else(|| panic!("an unrecorded write was checked: {r}"));
    assert!(e.contains("outside the operations the check records") && e.contains("Run::lane"), "{e}");
    assert!(e.contains("after operation 0, put(lane 0, \"seen\")"), "{e}");
    assert!(!r.passed());
}

/// Issue 56, item 6: a long workload's images start from their crash point's base (what
/// the point before recovered, caught up) instead of a recovery from nothing each, and
/// nvs's contract is held on what each image adds. Forced here on small protocols
/// (`full_check_ops: 0`): every verdict is the whole check's, the bugs are caught at the
/// same crash point with the same message, and their repros reproduce them.
#[test]
fn the_incremental_check_gives_the_whole_checks_verdicts() {
    let whole = Setup::new(32 << 10);
    let fast = Setup { full_check_ops: 0, ..whole.clone() };
    for (done_first, ack_early) in [(false, false), (true, false), (false, true)] {
        let (a, b) = (run(&whole, done_first, ack_early), run(&fast, done_first, ack_early));
        assert_eq!(a.passed(), b.passed(), "whole: {a}\nincremental: {b}");
        assert_eq!(a.points, b.points);
        match (&a.failure, &b.failure) {
            (None, None) => assert!(b.states >= b.points as u64, "{b}"),
            (Some(x), Some(y)) => {
                assert_eq!((x.point, &x.message), (y.point, &y.message), "whole: {a}\nincremental: {b}");
                let alone =
                    run(&Setup { only: Some((y.point, y.choices.clone())), ..fast.clone() }, done_first, ack_early);
                assert_eq!(alone.failure.as_ref().map(|f| &f.message), Some(&y.message), "{alone}");
            }
            _ => panic!("whole: {a}\nincremental: {b}"),
        }
    }
    // Writer threads and lane names, and metadata and deltas, through the same path.
    let mut setup = Setup { full_check_ops: 0, ..Setup::new(64 << 10) };
    setup.options.lane_names = true;
    assert!(check(&setup, |r| two_threads(r, false), two_restart, promise).passed());
    let bad = check(&setup, |r| two_threads(r, true), two_restart, promise);
    assert!(bad.failure.is_some_and(|f| f.message.contains("lane 1's part 1")));
}

/// The incremental path through retention, closes and batches: a writer that keeps the
/// newest two versions of three names (a reclaim every 20 steps, in 4 KiB segments that
/// it cycles through), closes its lane and reopens it, checked both ways: the same
/// verdict, crash points and images — and a restart that trusts a released version is
/// caught both ways at the same point.
#[test]
fn retention_and_markers_check_the_same_incrementally() {
    let steps = |run: &mut Run<'_, u64>| -> Result<(), String> {
        for k in 1..=120u64 {
            let bytes = [k as u8; 40];
            run.put_batch(0, &[(b"p", &bytes), (b"q", &bytes)]).map_err(|e| e.to_string())?;
            run.put(0, b"step", &k.to_le_bytes()).map_err(|e| e.to_string())?;
            run.ack(k);
            if k % 20 == 0 {
                run.reclaim(2).map_err(|e| e.to_string())?;
            }
            if k % 50 == 0 {
                run.close_lane(0).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    };
    let restart = |back: u64| {
        move |pool: &CrashPool<'_>| -> Result<u64, String> {
            let Ok(v) = pool.latest("step") else { return Ok(0) };
            let mut w = [0u8; 8];
            pool.get("step", v, &mut w).map_err(|e| e.to_string())?;
            let k = u64::from_le_bytes(w);
            // `back` > 0: a restart that reads a version retention may have released.
            let want = k.saturating_sub(back).max(1);
            let mut p = [0u8; 40];
            pool.get("p", want, &mut p).map_err(|e| format!("p v{want}: {e}"))?;
            Ok(k)
        }
    };
    let whole = Setup::new(24 << 10);
    let fast = Setup { full_check_ops: 0, ..whole.clone() };
    let (a, b) = (check(&whole, steps, restart(0), promise), check(&fast, steps, restart(0), promise));
    assert!(a.passed() && b.passed(), "whole: {a}\nincremental: {b}");
    assert_eq!(a.points, b.points);
    let (a, b) = (check(&whole, steps, restart(5), promise), check(&fast, steps, restart(5), promise));
    let (x, y) = (a.failure.expect("caught whole"), b.failure.expect("caught incrementally"));
    assert_eq!((x.point, &x.message), (y.point, &y.message));
    assert!(y.message.contains("no such object"), "{}", y.message);
}
