//! `NVS_CHECK_REPRO` in the environment: the check runs the one image it names, and
//! never passes (a leftover export must not turn a test suite green); choices that do not
//! fit that image are an error. Its own test binary: the variable is set for the whole
//! process, so no other check may run beside this one.

use nvs_verify::user::{check, CrashPool, Report, Run, Setup, REPRO_VAR};

/// Step `k` puts `a` (version k), then `done` = k, and is acknowledged; `done_first`
/// seeds the ordering bug (the commit before the data).
fn steps(run: &mut Run<'_, u64>, done_first: bool) -> Result<(), String> {
    for k in 1..=2u64 {
        let done = |run: &mut Run<'_, u64>| run.put(1, b"done", &k.to_le_bytes()).map(|_| ());
        if done_first {
            done(run).map_err(|e| e.to_string())?;
        }
        run.put(1, b"a", &vec![k as u8; 70 * k as usize]).map_err(|e| e.to_string())?;
        if !done_first {
            done(run).map_err(|e| e.to_string())?;
        }
        run.ack(k);
    }
    Ok(())
}

/// The step to resume from, loading `a` of it.
fn restart(pool: &CrashPool<'_>) -> Result<u64, String> {
    let Ok(v) = pool.latest("done") else { return Ok(0) };
    let mut w = [0u8; 8];
    pool.get("done", v, &mut w).map_err(|e| e.to_string())?;
    let k = u64::from_le_bytes(w);
    let mut buf = vec![0u8; 70 * k as usize];
    pool.get("a", k, &mut buf).map_err(|e| format!("a v{k}: {e}"))?;
    Ok(k)
}

fn promise(k: &u64, acked: &[u64]) -> Result<(), String> {
    match acked.last() {
        Some(&safe) if *k < safe => Err(format!("resumes at {k}, but {safe} was acknowledged")),
        _ => Ok(()),
    }
}

fn run(done_first: bool) -> Report {
    check(&Setup::new(32 << 10), |r| steps(r, done_first), restart, promise)
}

/// Run with `NVS_CHECK_REPRO=spec`.
fn with_repro(spec: &str, done_first: bool) -> Report {
    std::env::set_var(REPRO_VAR, spec);
    let r = run(done_first);
    std::env::remove_var(REPRO_VAR);
    r
}

#[test]
fn a_repro_in_the_environment_checks_one_image_and_never_passes() {
    assert!(std::env::var_os(REPRO_VAR).is_none(), "run this test without {REPRO_VAR} set");
    let whole = run(false);
    assert!(whole.passed(), "{whole}");
    let bug = run(true);
    let f = bug.failure.clone().unwrap_or_else(|| panic!("the seeded bug was not caught: {bug}"));
    assert!(!f.choices.is_empty(), "the test needs an image with choices: {bug}");
    let spec = f.repro().trim_start_matches(&format!("{REPRO_VAR}=")).to_string();

    // The repro reproduces the violation, one image, and says it was one image only.
    let alone = with_repro(&spec, true);
    assert_eq!((alone.points, alone.states), (1, 1), "{alone}");
    assert_eq!(alone.failure.as_ref().map(|g| &g.message), Some(&f.message), "{alone}");
    assert!(!alone.passed());

    // A correct protocol's image (the first one a predicate that always fails sees)
    // passes, yet the check does not: only one image was checked, and the report says so
    // (and how to check them all).
    let never = |_: &u64, _: &[u64]| Err("never".to_string());
    let g = check(&Setup::new(32 << 10), |r| steps(r, false), restart, never).failure;
    let g = g.unwrap_or_else(|| panic!("a predicate that always fails passed"));
    let good = g.repro().trim_start_matches(&format!("{REPRO_VAR}=")).to_string();
    let one = with_repro(&good, false);
    assert!(one.failure.is_none() && one.error.is_none(), "{one}");
    assert!(!one.passed(), "a check of one image passed as the whole check: {one}");
    let shown = one.to_string();
    assert!(shown.contains("NOT A PASS") && shown.contains(&format!("unset {REPRO_VAR}")), "{shown}");
    assert!(one.only.as_deref().is_some_and(|o| o.contains(&good)), "{one:?}");

    // Choices that do not fit the image are an error: one too many, one too few, out of
    // range; so is a point that is not a crash point of this check.
    let mut extra = f.choices.clone();
    extra.push(0);
    let mut short = f.choices.clone();
    short.pop();
    let mut wide = f.choices.clone();
    wide[0] = 1000;
    for choices in [extra, short, wide] {
        let c: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
        let bad = format!("{}:{}", f.point, c.join(","));
        let r = with_repro(&bad, true);
        assert!(r.error.as_deref().is_some_and(|e| e.contains("do not fit")), "{bad}: {r}");
        assert!(r.failure.is_none() && !r.passed(), "{bad}: {r}");
    }
    let r = with_repro("1:", false);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("not one this check crashes at")), "{r}");
    let r = with_repro("10:0,x", false);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("expected [NAME@]POINT:CHOICE")), "{r}");
    assert!(!r.passed());

    // A repro names its check: another check runs whole (and passes on its own merits).
    let other = with_repro(&format!("another {good}"), false);
    assert!(other.passed() && other.only.is_none(), "{other}");
    // And its trace: a repro of another run (here a fingerprint changed) is an error.
    let (at, _) = good.rsplit_once('#').unwrap_or_else(|| panic!("no fingerprint in {good}"));
    let r = with_repro(&format!("{at}#0123456789abcdef"), false);
    assert!(r.error.as_deref().is_some_and(|e| e.contains("another run of the workload")), "{r}");
    assert!(!r.passed());
}
