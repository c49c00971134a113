//! Seeded protocol bugs for the verifier (nvs-verify kills them to show it would catch
//! real ones). Compiled in only with `--cfg nvs_mutant` (`RUSTFLAGS='--cfg nvs_mutant'`;
//! `nvs-verify mutants` builds that in target/mutants); in normal builds [`on`] is a
//! constant `false` and every hook folds away. In a mutant build, [`select`] picks at run
//! time which one bug is live (none by default), so one build serves the whole matrix.
//!
//! Mutants are an enum, so a hook naming a mutant that does not exist does not compile;
//! names (for the command line) are looked up in [`MUTANTS`], and an unknown one is
//! refused.

/// Declares the enum and its table from one list, so that every mutant is in the table.
macro_rules! mutants {
    ($($variant:ident => $name:literal, $what:literal;)*) => {
        /// A seeded bug.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Mutant {
            $(#[doc = $what] $variant,)*
        }

        /// Every mutant: (mutant, its name, what it breaks).
        pub const MUTANTS: &[(Mutant, &str, &str)] = &[$((Mutant::$variant, $name, $what),)*];
    };
}

mutants! {
    NoFenceBeforeCommit => "no_fence_before_commit", "no fence between the unit's stores and its commit word";
    CommitBeforePayload => "commit_before_payload", "commit word stored before the payload and headers";
    NoFinalFence => "no_final_fence", "no fence after the commit word before acknowledging";
    CachedCommit => "cached_commit", "commit word by a cached store, never flushed";
    StraddlingCommit => "straddling_commit", "commit word written as two 4-byte cached halves (flushed, fenced)";
    PayloadAfterFirstFence => "payload_after_first_fence", "payload stored after the first fence, beside the commit word";
    SegmentHeaderUnfenced => "segment_header_unfenced", "segment header by cached stores, never flushed: used before durable";
    NoPoolIdCheck => "no_pool_id_check", "pool id left out of commit words and segment checks (stale pools match)";
    NoSeqCheck => "no_seq_check", "recovery accepts a unit's own seq instead of the expected one";
    CommitWithoutChecksum => "commit_without_checksum", "commit word not bound to the header checksum";
    RecoveryIgnoresChecksum => "recovery_ignores_checksum", "recovery skips header and name checksums";
    RecoveryTrustsLength => "recovery_trusts_length", "recovery trusts lengths and counts without bounds checks";
    RecoveryWrites => "recovery_writes", "recovery 'repairs' each lane tail by zeroing its slot (not read-only)";
    ResumeAtSegmentStart => "resume_at_segment_start", "after recovery a lane writes from its segment's start";
    SeqRestartsAfterOpen => "seq_restarts_after_open", "after recovery a lane's sequence restarts at 0";
    EndNotProbed => "end_not_probed", "recovery does not look past a lane's end for a later committed unit (a damaged commit word hides the units after it silently)";
    FreeSegmentsUnchecked => "free_segments_unchecked", "recovery does not look for committed units in free segments (a damaged header loses its segment silently)";
    AllocIgnoresOwner => "alloc_ignores_owner", "segment allocation ignores ownership (takes the next slot)";
    FirstSeqOffByOne => "first_seq_off_by_one", "a claimed segment records the wrong first sequence number";
    TornClaimKept => "torn_claim_kept", "a claim over a non-zero (torn, stale) segment header does not zero it first";
    CoveredDataStartKept => "covered_data_start_kept", "a span's release zeroes only each covered segment's first line, leaving payload at its data start";
    RepairNewestFirst => "repair_newest_first", "the writer's open-time repair invalidates released segments newest first";
    LatestIsOldest => "latest_is_oldest", "latest(name) returns the oldest version";
    DeltaIgnoresParentLen => "delta_ignores_parent_len", "a delta is planned against a parent of another length";
    FormatInOneStore => "format_in_one_store", "format stores the whole superblock at once (a crash can tear it)";
    RetentionDropsDeltaBases => "retention_drops_delta_bases", "retention keeps kept versions' segments but not their delta ancestors'";
    RescanSkipped => "rescan_skipped", "a claim beside writers in other processes does not re-read their segment headers first";
    ClaimUnfenced => "claim_unfenced", "a segment claim is not fenced (before its first unit's stores, nor before the claim lock goes)";
    SpanHeaderOfOne => "span_header_of_one", "a claim of several segments records a span of 1 (the segments it covers look free)";
    SumMissesLastWord => "sum_misses_last_word", "the payload checksum fused into the copy leaves out a partial last word";
    PayloadSumUnchecked => "payload_sum_unchecked", "a get does not verify the payload checksum";
    TruncateReopens => "truncate_reopens", "recovery reads a truncate unit as reopening its lane (a reclaim after an end-of-stream or detach marker)";
    DetachReadAsClose => "detach_read_as_close", "recovery reads a detach marker as an end-of-stream marker";
    MetaLenDropped => "meta_len_dropped", "recovery indexes an object without its metadata length";
    CatchUpPastTruncate => "catch_up_past_truncate", "a refresh's catch-up walks on past a truncate unit (the segments it released stay in the index)";
    CheckpointNotCaughtUp => "checkpoint_not_caught_up", "an open from an index checkpoint takes its state as the pool's without catching up with the media";
    SpanHeadReleasedFirst => "span_head_released_first", "retention invalidates a span's head header before its covered segments";
    ReuseReadAsOthers => "reuse_read_as_others", "a writer process reads another lane's object in a segment it now holds itself (claimed after the other released it)";
    OthersTailSkipped => "others_tail_skipped", "a writer process's refresh does not walk the other processes' lanes on from their tails (only into their new segments)";
    SealWithoutPlace => "seal_without_place", "a sealed unit's commit word is not bound to its offset (a unit copied elsewhere verifies there)";
    SealedTailTrusted => "sealed_tail_trusted", "recovery accepts a lane's newest sealed unit without verifying its object headers and payloads (a torn unit counts)";
    SealedTailKept => "sealed_tail_kept", "a writer's open leaves a lane's torn sealed unit in place (a later crash can bring it back)";
}

impl Mutant {
    /// The mutant called `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Mutant> {
        MUTANTS.iter().find(|(_, n, _)| *n == name).map(|(m, _, _)| *m)
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        MUTANTS.iter().find(|(m, _, _)| *m == self).map_or("?", |(_, n, _)| n)
    }
}

#[cfg(nvs_mutant)]
static SELECTED: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(usize::MAX);

/// Make mutant `m` live (or none with `None`). Returns false in a build without
/// `--cfg nvs_mutant`.
pub fn select(m: Option<Mutant>) -> bool {
    #[cfg(nvs_mutant)]
    {
        SELECTED.store(m.map_or(usize::MAX, |m| m as usize), core::sync::atomic::Ordering::SeqCst);
        true
    }
    #[cfg(not(nvs_mutant))]
    {
        let _ = m;
        false
    }
}

/// Whether this build has the mutant hooks.
pub const fn compiled_in() -> bool {
    cfg!(nvs_mutant)
}

/// Is mutant `m` live?
#[inline(always)]
pub fn on(m: Mutant) -> bool {
    #[cfg(nvs_mutant)]
    {
        SELECTED.load(core::sync::atomic::Ordering::Relaxed) == m as usize
    }
    #[cfg(not(nvs_mutant))]
    {
        let _ = m;
        false
    }
}
