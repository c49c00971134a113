//! A checkpoint/restart protocol written on top of nvs, crash-checked with
//! `nvs_verify::user::check` — once as written, and once with a seeded ordering bug.
//!
//! The protocol: at every step a simulation puts its three arrays (`rho`, `u`, `e`), each
//! its own put, then commits the step by putting `step` (its number). Once that put
//! returns, the step is a safe checkpoint: the simulation says so to its caller (it may
//! delete an older checkpoint elsewhere), which is the acknowledgement the predicate
//! holds the restart code to. The restart code reads the newest `step` and loads the
//! three arrays of that step.
//!
//! The seeded bug puts `step` *first* (to let a monitor see progress early): a crash
//! between that put and the arrays' leaves a step that claims to be complete without
//! them, and the check finds the crash image where restart loads a missing array.
//!
//! `cargo run --release -p nvs-verify --example restart_protocol` — exits 0 when the
//! protocol passes and the seeded bug is caught. `-- --seeded-bug` checks only the buggy
//! protocol (exits 1 on its violation); with the printed `NVS_CHECK_REPRO=...` in the
//! environment it checks that one crash image alone (and exits 1 either way: one image
//! checked is not a pass).

use nvs_verify::user::{check, CrashPool, Report, Run, Setup};

const ARRAYS: [&str; 3] = ["rho", "u", "e"];
const STEPS: u64 = 3;

/// What array `name` holds at `step` (sizes vary across cache lines).
fn array(name: &str, step: u64) -> Vec<u8> {
    let len = 40 + 70 * name.len() + 13 * step as usize;
    (0..len).map(|i| (i as u64 * 31 + step * 7 + name.len() as u64) as u8).collect()
}

/// The simulation: every step's arrays, then its commit (or, seeded bug, the commit
/// first). Each step acknowledged once its commit and arrays have all returned.
fn simulate(run: &mut Run<'_, u64>, seeded_bug: bool) -> Result<(), String> {
    for step in 1..=STEPS {
        let commit = |run: &mut Run<'_, u64>| run.put(0, b"step", &step.to_le_bytes()).map(|_| ());
        if seeded_bug {
            commit(run).map_err(|e| e.to_string())?;
        }
        for name in ARRAYS {
            run.put(0, name.as_bytes(), &array(name, step)).map_err(|e| e.to_string())?;
        }
        if !seeded_bug {
            commit(run).map_err(|e| e.to_string())?;
        }
        run.ack(step);
    }
    Ok(())
}

/// The restart code: the newest committed step and its arrays (step 0: start over).
fn restart(pool: &CrashPool<'_>) -> Result<(u64, Vec<Vec<u8>>), String> {
    let Ok(v) = pool.latest("step") else { return Ok((0, Vec::new())) };
    let mut word = [0u8; 8];
    pool.get("step", v, &mut word).map_err(|e| format!("step v{v}: {e}"))?;
    let step = u64::from_le_bytes(word);
    let mut arrays = Vec::new();
    for name in ARRAYS {
        // Each array is put once per step: step k is version k.
        let info = pool.stat(name, step).map_err(|e| format!("step {step} is committed, but {name}: {e}"))?;
        let mut buf = vec![0u8; info.len_bytes as usize];
        pool.get(name, step, &mut buf).map_err(|e| format!("{name} v{step}: {e}"))?;
        arrays.push(buf);
    }
    Ok((step, arrays))
}

/// The protocol's promise: restart resumes at or after the last acknowledged step, with
/// exactly that step's arrays.
fn promise(restarted: &(u64, Vec<Vec<u8>>), acked: &[u64]) -> Result<(), String> {
    let (step, arrays) = restarted;
    if let Some(&safe) = acked.last() {
        if *step < safe {
            return Err(format!("restart resumes at step {step}, but step {safe} was acknowledged"));
        }
    }
    for (name, got) in ARRAYS.iter().zip(arrays) {
        if *got != array(name, *step) {
            return Err(format!("{name} of step {step} has other bytes"));
        }
    }
    Ok(())
}

fn run(seeded_bug: bool) -> Report {
    check(&Setup::new(64 << 10), |run| simulate(run, seeded_bug), restart, promise)
}

fn main() {
    let only_bug = std::env::args().any(|a| a == "--seeded-bug");
    let mut ok = true;
    if !only_bug {
        let r = run(false);
        println!("protocol as written: {r}");
        ok &= r.passed();
    }
    let r = run(true);
    println!("seeded bug (commit before the arrays): {r}");
    ok &= if only_bug { r.passed() } else { r.failure.is_some() };
    std::process::exit(if ok { 0 } else { 1 });
}
