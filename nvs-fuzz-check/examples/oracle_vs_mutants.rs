//! Do the fuzz oracles bite? Runs each seeded protocol mutant of nvs-core against the
//! three fuzz checks on deterministic inputs (pseudo-random bytes for `ops_crash`; the
//! checked-in corpora with single bit flips for `recover_image` and `decode`) and
//! reports, per target, the first input that catches the mutant. Needs a mutant build:
//!
//! ```sh
//! RUSTFLAGS='--cfg nvs_mutant' CARGO_TARGET_DIR=target/mutants \
//!     cargo run --release -p nvs-fuzz-check --example oracle_vs_mutants [TRIES]
//! ```
use nvs_core::internals::mutant;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

/// Inputs for `target`: `tries` of them, deterministic.
fn inputs(target: &str, tries: usize) -> Vec<Vec<u8>> {
    if target == "ops_crash" {
        return (0..tries as u64).map(|i| nvs_fuzz_check::fill(i, 64 + (i as usize * 37) % 1500)).collect();
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("corpus")
        .map(|e| std::fs::read(e.expect("entry").path()).expect("read"))
        .filter(|d| !d.is_empty())
        .collect();
    seeds.sort();
    let mut out = seeds.clone();
    let mut i = 0u64;
    while out.len() < tries {
        let mut d = seeds[i as usize % seeds.len()].clone();
        let r = u64::from_le_bytes(nvs_fuzz_check::fill(i, 8).try_into().expect("8 bytes"));
        let at = (r >> 8) as usize % d.len();
        d[at] ^= 1 << (r % 8);
        out.push(d);
        i += 1;
    }
    out
}

fn main() {
    assert!(mutant::compiled_in(), "build with RUSTFLAGS='--cfg nvs_mutant'");
    std::panic::set_hook(Box::new(|_| {}));
    let tries: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(300);
    let sets: Vec<(&str, Vec<Vec<u8>>)> = nvs_fuzz_check::TARGETS.iter().map(|t| (*t, inputs(t, tries))).collect();
    let first_failure = |target: &str, set: &[Vec<u8>]| {
        set.iter().position(|d| catch_unwind(AssertUnwindSafe(|| nvs_fuzz_check::run(target, d))).is_err())
    };
    mutant::select(None);
    for (t, set) in &sets {
        assert_eq!(first_failure(t, set), None, "{t} fails without a mutant");
    }
    println!("{:28} {:>14} {:>14} {:>14}", "mutant", "recover_image", "decode", "ops_crash");
    for &(m, name, _) in mutant::MUTANTS {
        mutant::select(Some(m));
        let cells: Vec<String> = sets
            .iter()
            .map(|(t, set)| first_failure(t, set).map_or_else(|| "-".to_string(), |i| format!("input {i}")))
            .collect();
        println!("{name:28} {:>14} {:>14} {:>14}", cells[0], cells[1], cells[2]);
    }
    mutant::select(None);
}
