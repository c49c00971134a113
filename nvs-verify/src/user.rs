//! Crash-check your own code on top of nvs.
//!
//! A runtime that embeds nvs has promises of its own ("step k committed implies step
//! k − 1 committed across all my names", "my restart code finds the last complete
//! checkpoint"). [`check`] runs your workload once on a simulated persistent memory
//! that records every store, flush and fence ([`nvs_sim::SimMedia`]), then crashes it at
//! every crash point and explores every image an x86 machine could leave there (the
//! same persistency model, explorer, budget and oracle as nvs's own families). At each
//! image it:
//!
//! 1. opens the pool read-only (nvs's recovery) and holds what comes back to nvs's own
//!    contract (every acknowledged put byte-exact, no phantoms, puts whole, a prefix
//!    per lane, no store while recovering);
//! 2. runs your restart code on the recovered pool;
//! 3. checks your predicate on what your restart code returned and on what your
//!    workload had acknowledged (said to be durable, [`Run::ack`]) before the crash.
//!
//! The first violation stops the check; its [`Failure::repro`] is one line
//! (`NVS_CHECK_REPRO=point:choices`) that, set in the environment of the same program,
//! makes [`check`] run that one image only. Such a check never passes
//! ([`Report::passed`] is false, and the report says that only the one image was
//! checked): a leftover `NVS_CHECK_REPRO` cannot turn a test suite green.
//!
//! ```no_run
//! use nvs_verify::user::{check, Setup};
//! let report = check(
//!     &Setup::new(64 << 10),
//!     |run| {
//!         for step in 1..=3u64 {
//!             run.put(0, b"temperature", &step.to_le_bytes()).map_err(|e| e.to_string())?;
//!             run.ack(step); // the simulation moves on: step is durable
//!         }
//!         Ok(())
//!     },
//!     |pool| Ok(pool.latest("temperature").unwrap_or(0)),
//!     |&restart_at, acked| match acked.last() {
//!         Some(&step) if restart_at < step => Err(format!("restarts at {restart_at}, but {step} was durable")),
//!         _ => Ok(()),
//!     },
//! );
//! assert!(report.failure.is_none());
//! ```

use crate::check::{oracle, panic_message, read_all, Recovered, BUDGET};
use crate::workload::{present, Issued};
use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Put};
use nvs_sim::{explore, fence_points, replay, Chooser, CrashView, SimMedia, Verdict};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

/// The pool a workload writes: on the recording media.
pub type SimPool<'m> = Pool<&'m SimMedia, HeapMemory>;
/// The pool restart code reads: recovered from one crash image.
pub type CrashPool<'v> = Pool<&'v CrashView, HeapMemory>;

/// The environment variable that runs one image only (see [`Failure::repro`]).
pub const REPRO_VAR: &str = "NVS_CHECK_REPRO";

/// What to check on.
#[derive(Clone, Debug)]
pub struct Setup {
    /// Bytes of simulated persistent memory, a multiple of 8 (the simulator's word;
    /// another length is an error in the report); keep it small: every crash point
    /// copies its state.
    pub media_len: usize,
    /// How the pool is formatted.
    pub options: FormatOptions,
    /// Runs (images) allowed per crash point; a point that needs more is incomplete.
    pub budget: u64,
    /// Check this one image only: `(crash point, choices)`, as a [`Failure`] gives them.
    /// `None`: every image, unless [`REPRO_VAR`] names one. Either way the check does not
    /// pass (see [`Report::only`]).
    pub only: Option<(usize, Vec<usize>)>,
    /// The most trace events (word stores, flushes, fences) and operations (puts, closes,
    /// reclaims) the workload may make together: every crash point of the trace is
    /// explored and the trace is held in memory, so a longer workload (a put loop that
    /// never ends, objects of many MiB: each word stored is an event) stops with an error
    /// in the report instead of running out of memory.
    pub max_events: usize,
}

/// The default [`Setup::max_events`]: about a 16 MiB object, or tens of thousands of
/// small puts (already minutes of checking).
pub const MAX_EVENTS: usize = 2_000_000;

/// The unwinding payload that stops a workload past [`Setup::max_events`].
struct TooLong(usize);

impl Setup {
    /// `media_len` bytes, nvs's default format options (4 KiB segments, 4 lanes), the
    /// budget nvs's own families use.
    pub fn new(media_len: usize) -> Setup {
        let mut options = FormatOptions::new(0x5EED_C4EC);
        options.segment_len = Some(4096);
        options.lanes_max = 4;
        Setup { media_len, options, budget: BUDGET, only: None, max_events: MAX_EVENTS }
    }
}

/// A workload's handle on its pool: puts through it are recorded for nvs's oracle, and
/// [`Run::ack`] records what the workload promised its own caller.
pub struct Run<'m, A> {
    pool: SimPool<'m>,
    media: &'m SimMedia,
    issued: Vec<Issued>,
    acks: Vec<(usize, A)>,
    max_events: usize,
}

impl<'m, A> Run<'m, A> {
    /// Put `bytes` as the next version of `name` on `lane`.
    pub fn put(&mut self, lane: u32, name: &[u8], bytes: &[u8]) -> nvs_core::Result<Put> {
        let start = self.media.point();
        let r = self.pool.put(lane, Object::new(name, bytes));
        let objects = match &r {
            Ok(put) => vec![(name.to_vec(), put.version, bytes.to_vec())],
            Err(_) => Vec::new(),
        };
        self.record(lane, start, r.is_ok(), objects);
        r
    }

    /// Put every `(name, bytes)` in one commit on `lane`; their versions, in order.
    pub fn put_batch(&mut self, lane: u32, objects: &[(&[u8], &[u8])]) -> nvs_core::Result<Vec<u64>> {
        let start = self.media.point();
        let objs: Vec<Object<'_>> = objects.iter().map(|(n, b)| Object::new(n, b)).collect();
        let r = self.pool.put_batch(lane, &objs).map(|v| v.iter().copied().collect::<Vec<u64>>());
        let recorded = match &r {
            Ok(versions) => objects.iter().zip(versions).map(|((n, b), v)| (n.to_vec(), *v, b.to_vec())).collect(),
            Err(_) => Vec::new(),
        };
        self.record(lane, start, r.is_ok(), recorded);
        r
    }

    /// Close `lane`'s stream (an end-of-stream marker).
    pub fn close_lane(&mut self, lane: u32) -> nvs_core::Result<()> {
        let start = self.media.point();
        let r = self.pool.close_lane(lane);
        self.issued.push(Issued {
            op: self.issued.len(),
            lane,
            start,
            ack: r.is_ok().then(|| self.media.point()),
            close: true,
            ..Issued::default()
        });
        r
    }

    /// Release all but the newest `keep` versions of every name (nvs's retention); the
    /// number of segments released.
    pub fn reclaim(&mut self, keep: u32) -> nvs_core::Result<u32> {
        let start = self.media.point();
        let before = present(&self.pool);
        let r = self.pool.reclaim(keep);
        let after = present(&self.pool);
        let released = before.into_iter().filter(|o| !after.contains(o)).collect();
        self.issued.push(Issued {
            op: self.issued.len(),
            lane: u32::MAX,
            start,
            ack: r.is_ok().then(|| self.media.point()),
            released,
            ..Issued::default()
        });
        r
    }

    /// The pool, to read (its reads store nothing).
    pub fn pool(&self) -> &SimPool<'m> {
        &self.pool
    }

    /// Record that the workload has now told its own caller that `what` is durable: a
    /// crash from here on must not lose it (your predicate sees it).
    pub fn ack(&mut self, what: A) {
        self.acks.push((self.media.point(), what));
    }

    fn record(&mut self, lane: u32, start: usize, ok: bool, objects: Vec<(Vec<u8>, u64, Vec<u8>)>) {
        // Each operation counts too: a put refused before any store (a full pool) makes
        // no event, but is recorded.
        let events = self.media.point() + self.issued.len();
        if events > self.max_events {
            // Out of the workload, past its own code (no panic message: `check` reports it).
            std::panic::resume_unwind(Box::new(TooLong(events)));
        }
        let ack = ok.then(|| self.media.point());
        self.issued.push(Issued { op: self.issued.len(), lane, start, ack, objects, ..Issued::default() });
    }
}

/// The first violation a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The crash point (a position in the workload's trace of stores and fences).
    pub point: usize,
    /// The choices (what each undecided word held) that make the image.
    pub choices: Vec<usize>,
    /// What went wrong: nvs's contract, your restart code, or your predicate.
    pub message: String,
}

impl Failure {
    /// One line that reproduces this image alone: set it in the environment of the same
    /// program.
    pub fn repro(&self) -> String {
        format!("{REPRO_VAR}={}", Failure::spec(self.point, &self.choices))
    }

    /// `point:choice,choice,...`, as [`REPRO_VAR`] takes it.
    fn spec(point: usize, choices: &[usize]) -> String {
        let c: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
        format!("{point}:{}", c.join(","))
    }
}

/// What a check did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Trace events the workload made (stores, flushes, fences).
    pub events: usize,
    /// Crash points checked.
    pub points: usize,
    /// Crash images checked (recovery, restart and predicate run once each).
    pub states: u64,
    /// Crash points whose images exceeded the budget (never counted as passing).
    pub incomplete: usize,
    /// The first violation, if any (the check stops there).
    pub failure: Option<Failure>,
    /// Why no crash image could be checked: the media length, the format, the workload
    /// itself (an error or a panic before any crash), or a repro that does not fit this
    /// program's trace.
    pub error: Option<String>,
    /// Only one image was checked: what named it (`NVS_CHECK_REPRO=point:choices` or
    /// `Setup::only = point:choices`). Such a check does not pass: every other image
    /// went unchecked.
    pub only: Option<String>,
}

impl Report {
    /// Every image of every crash point passed. False when only one image was checked
    /// ([`Report::only`]: [`REPRO_VAR`] or [`Setup::only`]), even if that image passed.
    pub fn passed(&self) -> bool {
        self.failure.is_none() && self.error.is_none() && self.incomplete == 0 && self.only.is_none()
    }
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} events, {} crash points, {} crash images", self.events, self.points, self.states)?;
        if self.incomplete > 0 {
            write!(
                f,
                ", {} points incomplete (budget: raise Setup::budget, or use fewer words per unit)",
                self.incomplete
            )?;
        }
        match (&self.error, &self.failure) {
            (Some(e), _) => write!(f, ": ERROR: {e}")?,
            (None, None) if self.only.is_some() => write!(f, ": no violation in this one image")?,
            (None, None) => write!(f, ": no violation")?,
            (None, Some(x)) => {
                write!(f, ": VIOLATION at crash point {}: {}\n  repro: {}", x.point, x.message, x.repro())?
            }
        }
        if let Some(only) = &self.only {
            let how =
                if only.starts_with(REPRO_VAR) { format!("unset {REPRO_VAR}") } else { "Setup::only = None".into() };
            let what = if self.error.is_some() { "was to be checked" } else { "was checked" };
            write!(
                f,
                "\n  NOT A PASS: only the one crash image named by {only} {what}; {how} to check every crash image"
            )?;
        }
        Ok(())
    }
}

/// Run `workload` once, crash it at every crash point, and at every image recover,
/// check nvs's contract, run `restart` on the recovered pool and `predicate` on its
/// result and on the acknowledgements made before the crash (module docs).
///
/// With [`Setup::only`], or else [`REPRO_VAR`] set (`point:choices`), only that image is
/// checked, and the report does not pass whatever that image does ([`Report::only`]);
/// choices that do not fit the image (too many, too few, out of range) are an error.
pub fn check<A, R>(
    setup: &Setup,
    workload: impl FnOnce(&mut Run<'_, A>) -> Result<(), String>,
    restart: impl Fn(&CrashPool<'_>) -> Result<R, String>,
    predicate: impl Fn(&R, &[A]) -> Result<(), String>,
) -> Report {
    let mut report = Report::default();
    if !setup.media_len.is_multiple_of(8) {
        return fail(
            report,
            format!("media length {} is not a multiple of 8 bytes (the simulator's word)", setup.media_len),
        );
    }
    let media = SimMedia::from_bytes(&vec![0u8; setup.media_len]);
    let pool = match Pool::format(&media, setup.options, HeapMemory::new()) {
        Ok(p) => p,
        Err(e) => return fail(report, format!("format: {e}")),
    };
    let format_end = media.point();
    let mut run = Run { pool, media: &media, issued: Vec::new(), acks: Vec::new(), max_events: setup.max_events };
    match catch_unwind(AssertUnwindSafe(|| workload(&mut run))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return fail(report, format!("the workload failed: {e}")),
        Err(p) => match p.downcast_ref::<TooLong>() {
            Some(TooLong(n)) => {
                let message = format!(
                    "the workload made more than {} trace events and operations (word stores, \
                     flushes, fences, puts; {n} when it was stopped): every crash point of the \
                     trace is explored and the trace is held in memory; shorten the workload, use \
                     smaller objects, or raise Setup::max_events",
                    setup.max_events
                );
                return fail(report, message);
            }
            None => return fail(report, format!("the workload panicked: {}", panic_message(&p))),
        },
    }
    let Run { issued, acks, .. } = run;
    let (ack_points, acks): (Vec<usize>, Vec<A>) = acks.into_iter().unzip();
    let events = media.events();
    report.events = events.len();
    // The image after any crash point: nvs's contract, the user's restart, the user's
    // predicate on the acknowledgements made before the crash.
    let one = |point: usize, state: &Arc<nvs_sim::State>, ch: &Chooser| -> Result<(), String> {
        let view = CrashView::new(state.clone(), ch.clone());
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            let pool = Pool::open_read_only(&view, HeapMemory::new()).map_err(|e| format!("recovery failed: {e}"))?;
            let rec: Recovered = read_all(&pool)?;
            if view.stores() != 0 {
                return Err(format!("recovery stored {} times (opening must not write)", view.stores()));
            }
            oracle(&issued, point, &Recovered::default(), &rec).map_err(|e| format!("nvs's contract: {e}"))?;
            let restarted = match catch_unwind(AssertUnwindSafe(|| restart(&pool))) {
                Ok(r) => r.map_err(|e| format!("the restart code failed: {e}"))?,
                Err(p) => return Err(format!("the restart code panicked: {}", panic_message(&p))),
            };
            // Acknowledgements are recorded in trace order: those made before the crash
            // are a prefix.
            let owed = ack_points.partition_point(|&at| at <= point);
            predicate(&restarted, &acks[..owed])
        }));
        match r {
            Ok(r) => r,
            Err(p) => Err(format!("panicked: {}", panic_message(&p))),
        }
    };
    let only = match (&setup.only, std::env::var(REPRO_VAR)) {
        (Some((point, choices)), _) => {
            report.only = Some(format!("Setup::only = {}", Failure::spec(*point, choices)));
            Some((*point, choices.clone()))
        }
        (None, Ok(spec)) => {
            report.only = Some(format!("{REPRO_VAR}={spec}"));
            match parse_repro(&spec) {
                Some(only) => Some(only),
                None => return fail(report, format!("{REPRO_VAR}={spec}: expected POINT:CHOICE,CHOICE,...")),
            }
        }
        (None, Err(_)) => None,
    };
    let points: Vec<usize> = fence_points(&events).into_iter().filter(|&p| p >= format_end).collect();
    if let Some((point, choices)) = only {
        if point > events.len() {
            return fail(report, format!("crash point {point} is past the trace's end ({})", events.len()));
        }
        if !points.contains(&point) {
            return fail(
                report,
                format!("crash point {point} is not one this check crashes at (a fence after the format)"),
            );
        }
        let state = Arc::new(media.crash_state(point));
        let mut made = None;
        let r = replay(choices.clone(), |ch| {
            let r = one(point, &state, ch);
            // (A choice out of range panicked with the chooser's lock held: no count.)
            if !r.as_ref().is_err_and(|m| m.contains(NONDETERMINISTIC)) {
                made = Some(ch.made());
            }
            r
        });
        match r {
            // The explorer's own complaint: a choice out of range, the image does not
            // exist in this run.
            Err(m) if m.contains(NONDETERMINISTIC) => {
                return fail(report, format!("the repro's choices do not fit this program's run ({m})"))
            }
            // Every choice the image made must be one the repro gave, and no more: the
            // image named is the one checked.
            _ if made.as_ref().is_some_and(|m| m.len() != choices.len()) => {
                let n = made.map_or(0, |m| m.len());
                return fail(
                    report,
                    format!(
                        "the repro's choices do not fit this program's run: {} given, the image at crash point \
                         {point} makes {n}",
                        choices.len()
                    ),
                );
            }
            Ok(()) => {}
            Err(message) => report.failure = Some(Failure { point, choices, message }),
        }
        report.points = 1;
        report.states = 1;
        return report;
    }
    let recording = media.recording();
    for point in points {
        report.points += 1;
        let state = Arc::new(recording.crash_state(point));
        match explore(setup.budget, |ch| one(point, &state, ch)) {
            Verdict::Pass { runs } => report.states += runs,
            Verdict::Incomplete { runs } => {
                report.states += runs;
                report.incomplete += 1;
            }
            Verdict::Fail { runs, choices, message } => {
                report.states += runs;
                report.failure = Some(Failure { point, choices, message });
                return report;
            }
        }
    }
    report
}

/// What the explorer says of a choice the run cannot make (a repro of another run).
const NONDETERMINISTIC: &str = "nondeterministic run";

fn fail(mut report: Report, message: String) -> Report {
    report.error = Some(message);
    report
}

/// `POINT:CHOICE,CHOICE,...` (no choices: `POINT:`).
fn parse_repro(spec: &str) -> Option<(usize, Vec<usize>)> {
    let (point, choices) = spec.trim().split_once(':')?;
    let choices = choices.split(',').filter(|c| !c.is_empty()).map(|c| c.trim().parse().ok()).collect::<Option<_>>()?;
    Some((point.trim().parse().ok()?, choices))
}
