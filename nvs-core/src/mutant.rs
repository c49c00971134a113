//! Seeded protocol bugs for the verifier (nvs-verify kills them to show it would catch
//! real ones). Compiled in only with `--cfg nvs_mutant` (`RUSTFLAGS='--cfg nvs_mutant'`;
//! `nvs-verify mutants` builds that in target/mutants); in normal builds [`on`] is a constant `false`
//! and every hook folds away. In a mutant build, [`select`] picks at run time which one
//! bug is live (none by default), so one build serves the whole mutant matrix.

/// Every mutant: (name, what it breaks).
pub const MUTANTS: &[(&str, &str)] = &[
    ("no_fence_before_commit", "no fence between the unit's stores and its commit word"),
    ("commit_before_payload", "commit word stored before the payload and headers"),
    ("no_final_fence", "no fence after the commit word before acknowledging"),
    ("cached_commit", "commit word by a cached store, never flushed"),
    ("straddling_commit", "commit word written as two 4-byte cached halves (flushed, fenced)"),
    ("payload_after_first_fence", "payload stored after the first fence, beside the commit word"),
    ("segment_header_unfenced", "segment header by cached stores, never flushed: used before durable"),
    ("no_pool_id_check", "pool id left out of commit words and segment checks (stale pools match)"),
    ("no_seq_check", "recovery accepts a unit's own seq instead of the expected one"),
    ("commit_without_checksum", "commit word not bound to the header checksum"),
    ("recovery_ignores_checksum", "recovery skips header and name checksums"),
    ("recovery_trusts_length", "recovery trusts lengths and counts without bounds checks"),
    ("recovery_writes", "recovery 'repairs' each lane tail by zeroing its slot (not read-only)"),
    ("resume_at_segment_start", "after recovery a lane writes from its segment's start"),
    ("seq_restarts_after_open", "after recovery a lane's sequence restarts at 0"),
    ("alloc_ignores_owner", "segment allocation ignores ownership (takes the next slot)"),
    ("first_seq_off_by_one", "a claimed segment records the wrong first sequence number"),
    ("torn_claim_kept", "a claim over a non-zero (torn, stale) segment header does not zero it first"),
    ("no_final_fence_marker", "no fence after an end-of-stream or truncate unit's commit word"),
    ("repair_newest_first", "the writer's open-time repair invalidates released segments newest first"),
    ("latest_is_oldest", "latest(name) returns the oldest version"),
    ("delta_ignores_parent_len", "a delta is planned against a parent of another length"),
    ("format_in_one_store", "format stores the whole superblock at once (a crash can tear it)"),
    ("retention_drops_delta_bases", "retention keeps kept versions' segments but not their delta ancestors'"),
];

#[cfg(nvs_mutant)]
static SELECTED: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(usize::MAX);

/// Make mutant `name` live (or none with `None`). Returns false for an unknown name or
/// in a build without `--cfg nvs_mutant`.
pub fn select(name: Option<&str>) -> bool {
    #[cfg(nvs_mutant)]
    {
        let idx = match name {
            None => usize::MAX,
            Some(n) => match MUTANTS.iter().position(|(m, _)| *m == n) {
                Some(i) => i,
                None => return false,
            },
        };
        SELECTED.store(idx, core::sync::atomic::Ordering::SeqCst);
        true
    }
    #[cfg(not(nvs_mutant))]
    {
        let _ = name;
        false
    }
}

/// Whether this build has the mutant hooks.
pub const fn compiled_in() -> bool {
    cfg!(nvs_mutant)
}

/// Is mutant `name` live? (`name` must be in [`MUTANTS`].)
#[inline(always)]
pub fn on(name: &str) -> bool {
    #[cfg(nvs_mutant)]
    {
        let i = SELECTED.load(core::sync::atomic::Ordering::Relaxed);
        matches!(MUTANTS.get(i), Some((m, _)) if *m == name)
    }
    #[cfg(not(nvs_mutant))]
    {
        let _ = name;
        false
    }
}
