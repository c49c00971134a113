//! `nvs-verify`: the crash-consistency verdict table.
//!
//! ```text
//! nvs-verify all                 crash check + damage + lazy/eager cross-check + mutants
//! nvs-verify crash [FAMILY...]   the crash check only
//! nvs-verify damage [WORKLOAD]   bad media only
//! nvs-verify crosscheck [N]      lazy vs eager on N random small traces (default 10000)
//! nvs-verify mutants [NAME...]   the mutant matrix alone
//! nvs-verify repro WORKLOAD POINT CHOICES [--mutant NAME]   one failing case alone
//! ```
//! Exit status: 0 when everything passed, 1 on any violation, incomplete point or
//! surviving mutant, 2 on a usage error.

use nvs_core::internals::mutant::Mutant;
use nvs_verify::check::{check_families, repro, FamilyReport};
use nvs_verify::crosscheck::crosscheck;
use nvs_verify::damage::{check_damage, check_payload_damage};
use nvs_verify::mutants::{parse, run_matrix, select};
use nvs_verify::workload::{families, Family, Workload};
use std::process::{Command, ExitCode};
use std::time::Instant;

const THREADS: usize = 2;
const CROSSCHECK_TRACES: u64 = 10_000;

fn main() -> ExitCode {
    // Panics inside checked code are caught and reported as violations: keep the
    // default hook from printing each one.
    std::panic::set_hook(Box::new(|_| {}));
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rest = args.get(1..).unwrap_or(&[]).to_vec();
    match args.first().map(String::as_str) {
        Some("all") => all(),
        Some("crash") => {
            let (ok, _) = crash(&rest);
            code(ok)
        }
        Some("damage") => code(damage(rest.first().map(String::as_str))),
        Some("crosscheck") => code(cross(rest.first().and_then(|n| n.parse().ok()).unwrap_or(CROSSCHECK_TRACES))),
        Some(cmd @ ("mutants" | "mutants-inner")) => match parse(&rest) {
            Ok(only) if cmd == "mutants" => code(mutants(&only)),
            Ok(only) => code(mutants_inner(&only)),
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(2)
            }
        },
        Some("repro") => repro_cmd(&rest),
        _ => {
            eprintln!("usage: nvs-verify all | crash [FAMILY...] | damage [WORKLOAD] | crosscheck [N] | mutants [NAME...] | repro WORKLOAD POINT CHOICES [--mutant NAME]");
            ExitCode::from(2)
        }
    }
}

fn code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

struct Totals {
    workloads: usize,
    points: u64,
    states: u64,
    violations: usize,
    incomplete: u64,
}

/// States per second of `d` (0 for no time).
fn rate(states: u64, d: std::time::Duration) -> f64 {
    if d.is_zero() {
        0.0
    } else {
        states as f64 / d.as_secs_f64()
    }
}

fn row(r: &FamilyReport, what: &str) {
    let eager = if r.counts.eager_points > 0 {
        format!("{} / {}", r.counts.lazy_runs_where_eager, r.counts.eager_runs)
    } else {
        "-".into()
    };
    println!(
        "{:<14} {:>9} {:>8} {:>9} {:>17} {:>10} {:>10} {:>7.2}s {:>7.2}s {:>10.0}  {what}",
        r.name,
        r.workloads,
        r.counts.points,
        r.counts.states,
        eager,
        r.failures.len(),
        r.counts.incomplete,
        r.time.as_secs_f64(),
        r.cpu.as_secs_f64(),
        rate(r.counts.states, r.cpu),
    );
    for f in r.failures.iter().take(3) {
        println!("  VIOLATION {} at point {}: {}\n    repro: {}", f.workload, f.point, f.message, f.repro());
    }
}

/// CPU time of this process so far (user and system, from Linux's `/proc/self/stat`).
fn process_cpu_time() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces), from field 3 on.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // The kernel counts these in USER_HZ, which is 100 on Linux.
    Some(std::time::Duration::from_millis(ticks * 10))
}

/// The crash check over the named families (all when empty), their workloads spread
/// over both threads.
fn crash(names: &[String]) -> (bool, Totals) {
    println!(
        "{:<14} {:>9} {:>8} {:>9} {:>17} {:>10} {:>10} {:>8} {:>8} {:>10}",
        "family",
        "workloads",
        "points",
        "states",
        "lazy/eager runs",
        "violations",
        "incomplete",
        "wall",
        "cpu",
        "states/cpu-s"
    );
    let mut t = Totals { workloads: 0, points: 0, states: 0, violations: 0, incomplete: 0 };
    let mut largest = (0, 0, String::new());
    let fams: Vec<Family> =
        families().into_iter().filter(|f| names.is_empty() || names.iter().any(|n| n == f.name)).collect();
    let (wall, cpu) = (Instant::now(), process_cpu_time());
    let reports = check_families(&fams, THREADS, false);
    let (wall, cpu) = (wall.elapsed(), process_cpu_time().zip(cpu).map(|(b, a)| b.saturating_sub(a)));
    for (fam, r) in fams.iter().zip(&reports) {
        row(r, fam.what);
        if r.counts.largest_both.1 > largest.1 {
            largest = (r.counts.largest_both.0, r.counts.largest_both.1, fam.name.to_string());
        }
        t.workloads += r.workloads;
        t.points += r.counts.points;
        t.states += r.counts.states;
        t.violations += r.failures.len();
        t.incomplete += r.counts.incomplete;
    }
    if largest.1 > 0 {
        println!(
            "largest point where both explorers ran ({}): lazy {} runs, eager {} runs",
            largest.2, largest.0, largest.1
        );
    }
    let cpu_line = match cpu {
        Some(cpu) => format!(", {:.1}s of CPU: {:.0} states/s per core", cpu.as_secs_f64(), rate(t.states, cpu)),
        None => String::new(),
    };
    println!(
        "crash check: {} states in {:.1}s on {THREADS} threads: {:.0} states/s{cpu_line}",
        t.states,
        wall.as_secs_f64(),
        rate(t.states, wall)
    );
    (t.violations == 0 && t.incomplete == 0, t)
}

/// The short `ops` and `stream` workloads (one segment per lane: markers, metadata,
/// explicit versions, a batch of 70) and some short `span` ones, every metadata byte
/// flipped; and the families whose final pools have chains of several segments, released
/// segments and empty joined ones, every segment header byte flipped.
fn damage_workloads() -> (Vec<Workload>, Vec<Workload>) {
    let fams = families();
    let of = |name: &str| fams.iter().find(|f| f.name == name).expect("family").workloads.iter();
    let short = of("ops").filter(|w| w.ops.len() <= 2).cloned();
    let stream = of("stream").filter(|w| w.ops.len() <= 2).cloned();
    let span = of("span").filter(|w| w.ops.len() <= 2).step_by(4).cloned();
    let short = short.chain(stream).chain(span).collect();
    let chains = fams.iter().filter(|f| ["segment", "retention", "join", "close", "forged"].contains(&f.name));
    (short, chains.flat_map(|f| f.workloads.iter()).cloned().collect())
}

/// The workloads whose final pools get payload bytes flipped (run with payload
/// checksums): the short ones, and the `delta-checksum` family's (delta records).
fn payload_workloads() -> Vec<Workload> {
    let fams = families();
    let short = fams[0].workloads.iter().filter(|w| w.ops.len() <= 2).cloned();
    let deltas = fams.iter().filter(|f| f.name == "delta-checksum").flat_map(|f| f.workloads.iter()).cloned();
    short.chain(deltas).collect()
}

fn damage(only: Option<&str>) -> bool {
    let (full, headers) = damage_workloads();
    let pick =
        |ws: Vec<Workload>| -> Vec<Workload> { ws.into_iter().filter(|w| only.is_none_or(|o| o == w.id)).collect() };
    let r = check_damage(&pick(full), &pick(headers), false);
    println!(
        "damage: {} workloads, {} damaged images (flipped metadata bytes, forged lengths; {} in segment headers, {} in headers of units before their lane's newest), {} violations, {:.1}s",
        r.workloads,
        r.images,
        r.header_images,
        r.unit_images,
        r.failures.len(),
        r.time.as_secs_f64()
    );
    let p = check_payload_damage(&pick(payload_workloads()), false);
    println!(
        "payload damage: {} workloads with payload checksums, {} flipped payload bytes, {} reads refused as corrupted, {} violations, {:.1}s",
        p.workloads,
        p.images,
        p.refused,
        p.failures.len(),
        p.time.as_secs_f64()
    );
    let reuse = nvs_verify::reuse::check_sealed_reuse();
    match &reuse {
        Ok(()) => {
            println!("sealed reuse: a torn sealed unit stays dropped when its place is reused (crash_cut's case)")
        }
        Err(e) => println!("sealed reuse: VIOLATION {e}"),
    }
    let checkpoints = nvs_verify::checkpoint::check_checkpoints();
    match &checkpoints {
        Ok(()) => println!(
            "checkpoints: an index checkpoint of each of 8 stages, opened over every later one, gives what recovery gives"
        ),
        Err(e) => println!("checkpoints: VIOLATION {e}"),
    }
    for f in r.failures.iter().chain(&p.failures).take(3) {
        println!(
            "  VIOLATION {}: {}\n    repro: cargo run --release -p nvs-verify -- damage {}",
            f.workload, f.message, f.workload
        );
    }
    r.failures.is_empty() && p.failures.is_empty() && reuse.is_ok() && checkpoints.is_ok()
}

fn cross(n: u64) -> bool {
    let t = Instant::now();
    match crosscheck(n, 0x5EED) {
        Ok((traces, lazy, eager)) => {
            println!(
                "crosscheck: {traces} random small traces, lazy and eager agree ({lazy} lazy runs, {eager} eager runs), {:.1}s",
                t.elapsed().as_secs_f64()
            );
            true
        }
        Err(e) => {
            println!("crosscheck: VIOLATION {e}");
            false
        }
    }
}

fn all() -> ExitCode {
    let t = Instant::now();
    let (ok, totals) = crash(&[]);
    let dmg = damage(None);
    let crs = cross(CROSSCHECK_TRACES);
    let mut_ok = mutants(&[]);
    println!("total time {:.1}s", t.elapsed().as_secs_f64());
    let violations = totals.violations + usize::from(!dmg) + usize::from(!crs);
    println!(
        "crash-check: {} workloads, {} crash points, {} states, {} violations, {} incomplete",
        totals.workloads, totals.points, totals.states, violations, totals.incomplete
    );
    match MUTANT_LINE.lock().unwrap().as_ref() {
        Some(line) => println!("{line}"),
        None => println!("mutants: 0/0 killed, 0 equivalent (the mutant run failed)"),
    }
    code(ok && dmg && crs && mut_ok)
}

static MUTANT_LINE: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// The mutant matrix. Mutants live only in a build with `--cfg nvs_mutant`: when this
/// build lacks it, build one (in target/mutants) and run the matrix there.
fn mutants(only: &[Mutant]) -> bool {
    if nvs_core::internals::mutant::compiled_in() {
        return mutants_inner(only);
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let flags = format!("{} --cfg nvs_mutant", std::env::var("RUSTFLAGS").unwrap_or_default());
    println!("mutants: building nvs with --cfg nvs_mutant (target/mutants) ...");
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(&root)
        .env("RUSTFLAGS", flags.trim())
        .env("CARGO_TARGET_DIR", root.join("target/mutants"))
        .args(["run", "--quiet", "--release", "-p", "nvs-verify", "--", "mutants-inner"])
        .args(only.iter().map(|m| m.name()))
        .output();
    let out = match out {
        Ok(o) => o,
        Err(e) => {
            println!("mutants: could not run cargo: {e}");
            return false;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    if !out.status.success() {
        eprint!("{}", String::from_utf8_lossy(&out.stderr));
    }
    *MUTANT_LINE.lock().unwrap() = text.lines().rev().find(|l| l.starts_with("mutants: ")).map(str::to_string);
    out.status.success()
}

fn mutants_inner(only: &[Mutant]) -> bool {
    if !nvs_core::internals::mutant::compiled_in() {
        println!("mutants: this build lacks --cfg nvs_mutant");
        return false;
    }
    println!("{:<28} {:>8} {:>7}  evidence", "mutant", "verdict", "time");
    let results = run_matrix(only, THREADS);
    let (mut killed, mut equivalent, mut survived) = (0, 0, 0);
    for r in &results {
        let (verdict, evidence) = match (&r.killed_by, r.equivalent) {
            (Some(k), _) if r.killed() => {
                killed += 1;
                let also = match &r.markers {
                    Some(Some(e)) => format!("\n{:>46}also killed through a marker unit: {e}", ""),
                    _ => String::new(),
                };
                ("killed", format!("{k}{also}"))
            }
            (Some(k), _) => {
                survived += 1;
                (
                    "SURVIVED",
                    format!("not killed through a marker unit: the markers family passes (killed only by {k})"),
                )
            }
            (None, Some(why)) => {
                equivalent += 1;
                ("equiv.", why.to_string())
            }
            (None, None) => {
                survived += 1;
                ("SURVIVED", "no violation found".to_string())
            }
        };
        println!("{:<28} {:>8} {:>6.1}s  {}", r.name, verdict, r.seconds, evidence);
    }
    let line = format!("mutants: {killed}/{} killed, {equivalent} equivalent", results.len());
    println!("{line}");
    *MUTANT_LINE.lock().unwrap() = Some(line);
    survived == 0
}

fn repro_cmd(args: &[String]) -> ExitCode {
    let (Some(id), Some(point), Some(choices)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("usage: nvs-verify repro WORKLOAD POINT CHOICES [--mutant NAME]");
        return ExitCode::from(2);
    };
    if let Some(i) = args.iter().position(|a| a == "--mutant") {
        let Some(name) = args.get(i + 1) else { return ExitCode::from(2) };
        let Some(m) = Mutant::from_name(name) else {
            eprintln!("no mutant {name}");
            return ExitCode::from(2);
        };
        if !nvs_core::internals::mutant::compiled_in() {
            eprintln!("run with RUSTFLAGS='--cfg nvs_mutant' CARGO_TARGET_DIR=target/mutants");
            return ExitCode::from(2);
        }
        select(Some(m));
    }
    let Ok(point) = point.parse::<usize>() else { return ExitCode::from(2) };
    let choices: Vec<usize> =
        if choices == "-" { vec![] } else { choices.split(',').filter_map(|c| c.parse().ok()).collect() };
    let fams: Vec<Family> = families();
    let Some((fam, w)) = fams.iter().find_map(|f| f.workloads.iter().find(|w| &w.id == id).map(|w| (f, w))) else {
        eprintln!("no workload {id}");
        return ExitCode::from(2);
    };
    println!("workload {id}: {:?}", w.ops);
    match repro(w, fam, point, choices) {
        Ok(()) => {
            println!("passes");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("VIOLATION: {e}");
            ExitCode::from(1)
        }
    }
}
