//! The mutant matrix: each seeded protocol bug of `nvs_core::mutant` made live in turn,
//! the crash check run until it finds a violation (killed) or passes everything
//! (survived — unless the mutant is documented as equivalent, with the reason).

use crate::check::check_family;
use crate::damage::check_damage;
use crate::workload::families;
use nvs_core::mutant::{self, MUTANTS};
use std::sync::Mutex;
use std::time::Instant;

static SELECTED: Mutex<Option<&'static str>> = Mutex::new(None);

/// The live mutant (for repro lines).
pub fn selected() -> Option<&'static str> {
    *SELECTED.lock().unwrap()
}

/// Make `name` live. Panics in a build without the mutant hooks.
pub fn select(name: Option<&'static str>) {
    assert!(mutant::select(name), "mutant {name:?} unknown or this build lacks --cfg nvs_mutant");
    *SELECTED.lock().unwrap() = name;
}

/// Mutants that no crash can distinguish from the correct protocol, and why.
pub const EQUIVALENT: &[(&str, &str)] = &[
    (
        "straddling_commit",
        "a commit word torn into halves never equals the expected 64-bit value, so a torn commit reads as \
         'uncommitted'; and the halves are flushed and fenced before the put returns",
    ),
    (
        "commit_without_checksum",
        "the header is fenced before the commit word is stored, so a matching commit word always sits on a \
         complete header; the checksum binding only matters for damaged media",
    ),
];

/// One mutant's outcome.
pub struct MutantResult {
    pub name: &'static str,
    pub killed_by: Option<String>,
    pub equivalent: Option<&'static str>,
    pub seconds: f64,
}

/// Run the matrix; `names` restricts it (empty: all).
pub fn run_matrix(names: &[String], threads: usize) -> Vec<MutantResult> {
    let fams = families();
    let damage_set: Vec<_> = fams[0].workloads.iter().filter(|w| w.ops.len() <= 2).cloned().collect();
    let mut out = Vec::new();
    for (name, _) in MUTANTS {
        if !names.is_empty() && !names.iter().any(|n| n == name) {
            continue;
        }
        let t = Instant::now();
        select(Some(name));
        let mut killed_by = None;
        for fam in &fams {
            let r = check_family(fam, threads, true);
            if let Some(f) = r.failures.first() {
                killed_by = Some(format!(
                    "{}: {} at point {} — {}\n{:>46}repro: {}",
                    fam.name,
                    f.workload,
                    f.point,
                    f.message,
                    "",
                    f.repro()
                ));
                break;
            }
        }
        if killed_by.is_none() {
            let r = check_damage(&damage_set, true);
            if let Some(f) = r.failures.first() {
                killed_by = Some(format!("damage: {} — {}", f.workload, f.message));
            }
        }
        select(None);
        let equivalent = EQUIVALENT.iter().find(|(n, _)| n == name).map(|(_, why)| *why);
        out.push(MutantResult { name, killed_by, equivalent, seconds: t.elapsed().as_secs_f64() });
    }
    out
}
