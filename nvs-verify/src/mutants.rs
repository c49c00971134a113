//! The mutant matrix: each seeded protocol bug of `nvs_core::internals::mutant` made live in turn,
//! the crash check run until it finds a violation (killed) or passes everything
//! (survived — unless the mutant is documented as equivalent, with the reason).
//!
//! The commit-sequence mutants ([`COMMIT_SEQUENCE`]) must also be killed by the
//! `markers` family alone (end-of-stream units and no puts): marker units are sealed by
//! the same function as a put's unit, so a bug in that sequence must show there too.

use crate::check::{check_families, check_family, live_mutant, Failure};
use crate::checkpoint::check_checkpoints;
use crate::damage::{check_damage, check_payload_damage};
use crate::reuse::check_sealed_reuse;
use crate::workload::{families, Family};
use nvs_core::internals::mutant::{self, Mutant, MUTANTS};
use std::time::Instant;

/// The live mutant (for repro lines): [`live_mutant`].
pub fn selected() -> Option<Mutant> {
    live_mutant()
}

/// Make `m` live. Panics in a build without the mutant hooks.
pub fn select(m: Option<Mutant>) {
    assert!(mutant::select(m), "mutant {m:?}: this build lacks --cfg nvs_mutant");
}

/// The mutants named `names` (each looked up with [`Mutant::from_name`]); the first
/// unknown name is the error.
pub fn parse(names: &[String]) -> Result<Vec<Mutant>, String> {
    names
        .iter()
        .map(|n| {
            Mutant::from_name(n).ok_or_else(|| {
                let known: Vec<&str> = MUTANTS.iter().map(|(_, n, _)| *n).collect();
                format!("no mutant {n} (known: {})", known.join(", "))
            })
        })
        .collect()
}

/// Mutants that no crash can distinguish from the correct protocol, and why.
pub const EQUIVALENT: &[(Mutant, &str)] = &[
    (
        Mutant::StraddlingCommit,
        "a commit word torn into halves never equals the expected 64-bit value, so a torn commit reads as \
         'uncommitted'; and the halves are flushed and fenced before the put returns",
    ),
    (
        Mutant::CommitWithoutChecksum,
        "the header is fenced before the commit word is stored, so a matching commit word always sits on a \
         complete header; the checksum binding only matters for damaged media",
    ),
];

/// The payload damage check ([`check_payload_damage`]), as [`KILLED_IN`] names it.
pub const PAYLOAD_DAMAGE: &str = "payload damage";

/// The metadata damage check ([`check_damage`]), as [`KILLED_IN`] names it.
pub const DAMAGE: &str = "damage";

/// The check of a torn sealed unit's place reused ([`check_sealed_reuse`]), as
/// [`KILLED_IN`] names it.
pub const SEALED_REUSE: &str = "sealed reuse";

/// The check of index checkpoints against recovery ([`check_checkpoints`]), as
/// [`KILLED_IN`] names it.
pub const CHECKPOINTS: &str = "checkpoints";

/// Mutants of code only the later checks reach, with the family (or check) that kills them, run
/// first for them (the matrix goes on through every family if it does not): a verdict
/// still comes from the check itself, only sooner.
pub const KILLED_IN: &[(Mutant, &str)] = &[
    (Mutant::PayloadSumUnchecked, PAYLOAD_DAMAGE),
    (Mutant::EndNotProbed, DAMAGE),
    (Mutant::RescanSkipped, "two-writers"),
    (Mutant::ClaimUnfenced, "two-writers"),
    (Mutant::OthersTailSkipped, "two-writers"),
    (Mutant::SpanHeaderOfOne, "span"),
    (Mutant::CoveredDataStartKept, "forged"),
    (Mutant::SumMissesLastWord, "delta-checksum"),
    (Mutant::TruncateReopens, "stream"),
    (Mutant::DetachReadAsClose, "stream"),
    (Mutant::MetaLenDropped, "stream"),
    (Mutant::CatchUpPastTruncate, "cross-reads"),
    (Mutant::ReuseReadAsOthers, "cross-reads"),
    (Mutant::SpanHeadReleasedFirst, "forged"),
    (Mutant::SealedTailTrusted, "checksum"),
    (Mutant::SealWithoutPlace, "sealed-forged"),
    (Mutant::SealedTailKept, SEALED_REUSE),
    (Mutant::CheckpointNotCaughtUp, CHECKPOINTS),
];

/// The mutants of the commit sequence (the one sealing function of every unit, puts
/// and markers alike): each must be killed by the `markers` family alone as well.
pub const COMMIT_SEQUENCE: &[Mutant] =
    &[Mutant::NoFenceBeforeCommit, Mutant::CommitBeforePayload, Mutant::NoFinalFence, Mutant::CachedCommit];

/// The family of marker units only.
pub const MARKERS: &str = "markers";

/// One mutant's outcome.
pub struct MutantResult {
    pub mutant: Mutant,
    pub name: &'static str,
    pub killed_by: Option<String>,
    /// For a [`COMMIT_SEQUENCE`] mutant: `Some(evidence)` when the `markers` family
    /// alone kills it too, `Some(None)` when it does not; `None` for the others.
    pub markers: Option<Option<String>>,
    pub equivalent: Option<&'static str>,
    pub seconds: f64,
}

impl MutantResult {
    /// Killed, and for a commit-sequence mutant killed through a marker unit as well.
    pub fn killed(&self) -> bool {
        self.killed_by.is_some() && !matches!(self.markers, Some(None))
    }
}

fn evidence(fam: &Family, f: &Failure) -> String {
    format!("{}: {} at point {} — {}\n{:>46}repro: {}", fam.name, f.workload, f.point, f.message, "", f.repro())
}

/// Run the matrix; `only` restricts it (empty: all).
pub fn run_matrix(only: &[Mutant], threads: usize) -> Vec<MutantResult> {
    let fams = families();
    let markers = fams.iter().find(|f| f.name == MARKERS).expect("the markers family");
    let damage_set: Vec<_> = fams[0].workloads.iter().filter(|w| w.ops.len() <= 2).cloned().collect();
    let mut out = Vec::new();
    for &(m, name, _) in MUTANTS {
        if !only.is_empty() && !only.contains(&m) {
            continue;
        }
        let t = Instant::now();
        select(Some(m));
        // The check named to kill it first; then the first family (in order, all of them
        // through one queue over the threads) with a violation; then the damage checks.
        let first = KILLED_IN.iter().find(|(k, _)| *k == m).map(|(_, f)| *f);
        let family = |fam: &Family| {
            let r = check_family(fam, threads, true);
            r.failures.first().map(|f| evidence(fam, f))
        };
        // (The named family again among them, when it did not kill it: rare, and simpler.)
        let families = || {
            let reports = check_families(&fams, threads, true);
            fams.iter().zip(&reports).find_map(|(fam, r)| r.failures.first().map(|f| evidence(fam, f)))
        };
        let damage = || {
            let r = check_damage(&damage_set, &[], true);
            r.failures.first().map(|f| format!("damage: {} — {}", f.workload, f.message))
        };
        let payloads = || {
            let r = check_payload_damage(&damage_set, true);
            r.failures.first().map(|f| format!("{PAYLOAD_DAMAGE}: {} — {}", f.workload, f.message))
        };
        let reuse = || check_sealed_reuse().err().map(|e| format!("{SEALED_REUSE}: {e}"));
        let checkpoints = || check_checkpoints().err().map(|e| format!("{CHECKPOINTS}: {e}"));
        let killed_by = match first {
            Some(PAYLOAD_DAMAGE) => payloads(),
            Some(DAMAGE) => damage(),
            Some(SEALED_REUSE) => reuse(),
            Some(CHECKPOINTS) => checkpoints(),
            Some(name) => fams.iter().find(|f| f.name == name).and_then(family),
            None => None,
        }
        .or_else(families)
        .or_else(damage)
        .or_else(|| if first == Some(PAYLOAD_DAMAGE) { None } else { payloads() })
        .or_else(|| if first == Some(SEALED_REUSE) { None } else { reuse() })
        .or_else(|| if first == Some(CHECKPOINTS) { None } else { checkpoints() });
        let markers = COMMIT_SEQUENCE.contains(&m).then(|| {
            let r = check_family(markers, threads, true);
            r.failures.first().map(|f| evidence(markers, f))
        });
        select(None);
        let equivalent = EQUIVALENT.iter().find(|(e, _)| *e == m).map(|(_, why)| *why);
        out.push(MutantResult { mutant: m, name, killed_by, markers, equivalent, seconds: t.elapsed().as_secs_f64() });
    }
    out
}
