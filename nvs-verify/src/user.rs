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
//! (`NVS_CHECK_REPRO=NAME@POINT:CHOICES#FINGERPRINT`) that, set in the environment of the
//! same program, makes the check named NAME ([`Setup::name`]) run that one image only
//! (other checks run whole; a repro of another trace is an error). Such a check never passes
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
//! // The one green: a check that could not run, ran incomplete or checked one image is
//! // not a pass (`report.failure.is_none()` would be true of those too).
//! assert!(report.passed(), "{report}");
//! ```
//!
//! The workload runs twice and must store the same bytes both times (a `HashMap`'s order
//! would not: the check refuses it, naming where the runs part). A violation is told in
//! the workload's words: its operations that had returned, the one in flight, those not
//! started, the acknowledgements owed and what the restart code returned, then the
//! repro line. Restart code can be shared between production and the check by writing it
//! over `nvs_core::Pool<M, X>` for any media `M` (your production pool is a
//! `Pool<MappedMedia, HeapMemory>`, the check's a [`CrashPool`]).

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
    /// The check's name, which its repros carry: [`REPRO_VAR`] set to a repro of another
    /// check leaves this one whole (one that names none narrows every check).
    pub name: String,
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
        Setup { media_len, options, budget: BUDGET, only: None, max_events: MAX_EVENTS, name: "check".into() }
    }

    /// [`Setup::new`], named `name` (its repros name it: see [`Setup::name`]).
    pub fn named(media_len: usize, name: &str) -> Setup {
        Setup { name: name.into(), ..Setup::new(media_len) }
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

    /// Put one object as nvs-core describes it — with metadata ([`Object::meta`]), an
    /// explicit version, parts, or as a delta against an earlier version
    /// ([`Object::delta`]) — recorded with its whole bytes (what a get must return) and
    /// its metadata (what `meta` must return).
    pub fn put_object(&mut self, lane: u32, object: Object<'_>) -> nvs_core::Result<Put> {
        let start = self.media.point();
        // As the checker reads an object back: its payload, then its metadata.
        let (name, bytes) = (object.name().to_vec(), [object.parts().concat(), object.meta_bytes().to_vec()].concat());
        let r = self.pool.put(lane, object);
        let objects = match &r {
            Ok(put) => vec![(name, put.version, bytes)],
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
    /// The crash in your workload's words: each of its operations returned, in flight or
    /// not started when the power went, the acknowledgements owed, and what your restart
    /// code returned (see [`Report`]'s Display).
    pub story: String,
    /// The check's name ([`Setup::name`]) and the fingerprint of the workload's trace:
    /// a repro runs only in that check, and only against that trace.
    pub check: String,
    /// See [`Failure::check`].
    pub fingerprint: u64,
}

impl Failure {
    /// One line that reproduces this image alone: set it in the environment of the same
    /// program (`NVS_CHECK_REPRO=NAME@POINT:CHOICES#FINGERPRINT`).
    pub fn repro(&self) -> String {
        format!("{REPRO_VAR}={}@{}#{:016x}", self.check, Failure::spec(self.point, &self.choices), self.fingerprint)
    }

    /// `point:choice,choice,...`, as [`REPRO_VAR`] takes it.
    fn spec(point: usize, choices: &[usize]) -> String {
        let c: Vec<String> = choices.iter().map(|c| c.to_string()).collect();
        format!("{point}:{}", c.join(","))
    }
}

/// What a check did. Its one green is [`Report::passed`]: `failure.is_none()` is also
/// true of a check that could not run (an error), was incomplete, or checked one image.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use = "a check passed only if Report::passed() says so: assert!(report.passed(), \"{report}\")"]
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
        match (&self.error, &self.failure) {
            (Some(e), _) => write!(f, ": ERROR: {e}")?,
            (None, None) if self.only.is_some() => write!(f, ": no violation in this one image")?,
            (None, None) if self.incomplete > 0 => write!(f, ": no violation in the images explored")?,
            (None, None) => write!(f, ": no violation")?,
            (None, Some(x)) => {
                write!(f, ": VIOLATION at crash point {}: {}\n{}  repro: {}", x.point, x.message, x.story, x.repro())?
            }
        }
        if self.incomplete > 0 {
            write!(
                f,
                "\n  NOT A PASS: {} crash points not explored whole (budget: raise Setup::budget, or use fewer \
                 words per unit)",
                self.incomplete
            )?;
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

/// Run `workload`, crash it at every crash point, and at every image recover, check
/// nvs's contract, run `restart` on the recovered pool and `predicate` on its result and
/// on the acknowledgements made before the crash (module docs).
///
/// The workload runs twice, on two fresh pools, and must make the same stores both times:
/// a check explores the crash images of one run, so a workload whose stores depend on
/// anything but its code (a `HashMap`'s order, the clock, unseeded randomness) would pass
/// or fail by chance, and its repros would name images of another run. Runs that differ
/// are an error naming the first operation where they part.
///
/// With [`Setup::only`], or else [`REPRO_VAR`] set to a repro of this check
/// (`NAME@POINT:CHOICES#FINGERPRINT`), only that image is checked, and the report does not
/// pass whatever that image does ([`Report::only`]); choices that do not fit the image, or
/// a fingerprint of another trace, are an error.
pub fn check<A: std::fmt::Debug, R: std::fmt::Debug>(
    setup: &Setup,
    mut workload: impl FnMut(&mut Run<'_, A>) -> Result<(), String>,
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
    let first = match record(setup, &mut workload) {
        Ok(r) => r,
        Err(e) => return fail(report, e),
    };
    let events = first.media.events();
    match record(setup, &mut workload) {
        Ok(second) => {
            if let Some(why) = parted(&events, &second.media.events(), &first.issued) {
                return fail(report, why);
            }
        }
        Err(e) => return fail(report, format!("the workload's second run (runs must be alike): {e}")),
    }
    let Recorded { media, format_end, issued, acks } = first;
    let fingerprint = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        events.hash(&mut h);
        h.finish()
    };
    let (ack_points, acks): (Vec<usize>, Vec<A>) = acks.into_iter().unzip();
    report.events = events.len();
    // What the restart code returned in the image being checked (for a failure's story).
    let restarted_last = std::sync::Mutex::new(String::new());
    // The image after any crash point: nvs's contract, the user's restart, the user's
    // predicate on the acknowledgements made before the crash.
    let one = |point: usize, state: &Arc<nvs_sim::State>, ch: &Chooser| -> Result<(), String> {
        let view = CrashView::new(state.clone(), ch.clone());
        let said = |what: String| *restarted_last.lock().unwrap_or_else(|e| e.into_inner()) = what;
        said("(the crash image was refused before it ran)".into());
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            let pool = Pool::open_read_only(&view, HeapMemory::new()).map_err(|e| format!("recovery failed: {e}"))?;
            let rec: Recovered = read_all(&pool)?;
            if view.stores() != 0 {
                return Err(format!("recovery stored {} times (opening must not write)", view.stores()));
            }
            oracle(&issued, point, &Recovered::default(), &rec).map_err(|e| format!("nvs's contract: {e}"))?;
            let restarted = match catch_unwind(AssertUnwindSafe(|| restart(&pool))) {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => {
                    said(format!("failed: {e}"));
                    return Err(format!("the restart code failed: {e}"));
                }
                Err(p) => {
                    said("panicked".into());
                    return Err(format!("the restart code panicked: {}", panic_message(&p)));
                }
            };
            said(format!("{restarted:?}"));
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
    let failure = |point: usize, choices: Vec<usize>, message: String| {
        let restarted = restarted_last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let owed = ack_points.partition_point(|&at| at <= point);
        let story = story(&issued, point, &acks[..owed], &restarted);
        Failure { point, choices, message, story, check: setup.name.clone(), fingerprint }
    };
    let only = match (&setup.only, std::env::var(REPRO_VAR)) {
        (Some((point, choices)), _) => {
            report.only = Some(format!("Setup::only = {}", Failure::spec(*point, choices)));
            Some((*point, choices.clone()))
        }
        (None, Ok(spec)) => match parse_repro(&spec) {
            // Another check's repro: this one runs whole.
            Some(r) if r.check.as_deref().is_some_and(|c| c != setup.name) => None,
            Some(r) => {
                report.only = Some(format!("{REPRO_VAR}={spec}"));
                if r.fingerprint.is_some_and(|f| f != fingerprint) {
                    return fail(
                        report,
                        format!(
                            "the repro was made from another run of the workload (trace {:016x}, this run's \
                             {fingerprint:016x}): the code changed since, or it does not store the same bytes \
                             each time",
                            r.fingerprint.unwrap_or(0)
                        ),
                    );
                }
                Some((r.point, r.choices))
            }
            None => {
                report.only = Some(format!("{REPRO_VAR}={spec}"));
                return fail(
                    report,
                    format!("{REPRO_VAR}={spec}: expected [NAME@]POINT:CHOICE,CHOICE,...[#FINGERPRINT]"),
                );
            }
        },
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
            Err(message) => report.failure = Some(failure(point, choices, message)),
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
                report.failure = Some(failure(point, choices, message));
                return report;
            }
        }
    }
    report
}

/// One run of a workload, on a fresh pool.
struct Recorded<A> {
    media: SimMedia,
    format_end: usize,
    issued: Vec<Issued>,
    acks: Vec<(usize, A)>,
}

/// Run `workload` on a fresh pool, recording it; an error says why no image can be checked.
fn record<A>(
    setup: &Setup,
    workload: &mut impl FnMut(&mut Run<'_, A>) -> Result<(), String>,
) -> Result<Recorded<A>, String> {
    let media = SimMedia::from_bytes(&vec![0u8; setup.media_len]);
    let pool = Pool::format(&media, setup.options, HeapMemory::new()).map_err(|e| format!("format: {e}"))?;
    let format_end = media.point();
    let mut run = Run { pool, media: &media, issued: Vec::new(), acks: Vec::new(), max_events: setup.max_events };
    match catch_unwind(AssertUnwindSafe(|| workload(&mut run))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("the workload failed: {e}")),
        Err(p) => match p.downcast_ref::<TooLong>() {
            Some(TooLong(n)) => {
                return Err(format!(
                    "the workload made more than {} trace events and operations (word stores, \
                     flushes, fences, puts; {n} when it was stopped): every crash point of the \
                     trace is explored and the trace is held in memory; shorten the workload, use \
                     smaller objects, or raise Setup::max_events",
                    setup.max_events
                ))
            }
            None => return Err(format!("the workload panicked: {}", panic_message(&p))),
        },
    }
    let Run { pool, issued, acks, .. } = run;
    drop(pool);
    Ok(Recorded { media, format_end, issued, acks })
}

/// Where two runs of a workload part, in its words (`None`: they are alike).
fn parted(a: &[nvs_sim::Event], b: &[nvs_sim::Event], issued: &[Issued]) -> Option<String> {
    let at = match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => i,
        None if a.len() == b.len() => return None,
        None => a.len().min(b.len()),
    };
    let op = issued.iter().rposition(|o| o.start <= at);
    let what = match op {
        Some(i) => format!("in operation {i}, {}", describe(&issued[i])),
        None => "before its first operation".into(),
    };
    Some(format!(
        "the workload is not deterministic: its second run stored other bytes than its first (trace event {at}, \
         {what}). A check explores the crash images of one run, so every run must make the same puts in the same \
         order with the same bytes: iterate a BTreeMap or a sorted list, not a HashMap; seed any randomness; \
         keep the clock out"
    ))
}

/// An operation, as the workload wrote it.
fn describe(o: &Issued) -> String {
    let show = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    if o.close {
        return format!("close_lane({})", o.lane);
    }
    if o.lane == u32::MAX {
        return format!("reclaim (released {} versions)", o.released.len());
    }
    match o.objects.as_slice() {
        [] => format!("a put on lane {} that was refused", o.lane),
        [(n, v, b)] => format!("put(lane {}, \"{}\") -> v{v}, {} bytes", o.lane, show(n), b.len()),
        many => {
            let names: Vec<String> = many.iter().take(4).map(|(n, v, _)| format!("\"{}\" v{v}", show(n))).collect();
            let more = if many.len() > 4 { format!(", ... {} in all", many.len()) } else { String::new() };
            format!("put_batch(lane {}, {}{more})", o.lane, names.join(", "))
        }
    }
}

/// A crash at `point` told in the workload's words: which operations had returned, which
/// was in flight, how many had not started, the acknowledgements owed, what the restart
/// code returned.
fn story<A: std::fmt::Debug>(issued: &[Issued], point: usize, owed: &[A], restarted: &str) -> String {
    const SHOWN: usize = 8;
    let mut s = String::from("  your workload when the power went:\n");
    let started: Vec<&Issued> = issued.iter().filter(|o| o.start < point).collect();
    let skip = started.len().saturating_sub(SHOWN);
    if skip > 0 {
        s += &format!("    operations 0..{skip}: returned\n");
    }
    for o in &started[skip..] {
        let state = match o.ack {
            Some(a) if a <= point => "returned",
            None if o.objects.is_empty() && !o.close && o.lane != u32::MAX => "returned an error",
            _ => "IN FLIGHT (the crash fell inside it)",
        };
        s += &format!("    operation {}: {} — {state}\n", o.op, describe(o));
    }
    let later = issued.len() - started.len();
    if later > 0 {
        s += &format!("    {later} operations not started\n");
    }
    match owed.last() {
        None => s += "  acknowledged before the crash (run.ack): nothing\n",
        Some(last) => {
            s += &format!("  acknowledged before the crash (run.ack): {} times, the last {last:?}\n", owed.len())
        }
    }
    s += &format!("  your restart code returned: {restarted}\n");
    s
}

/// What the explorer says of a choice the run cannot make (a repro of another run).
const NONDETERMINISTIC: &str = "nondeterministic run";

fn fail(mut report: Report, message: String) -> Report {
    report.error = Some(message);
    report
}

/// A repro, as [`REPRO_VAR`] holds it.
struct Repro {
    check: Option<String>,
    point: usize,
    choices: Vec<usize>,
    fingerprint: Option<u64>,
}

/// `[NAME@]POINT:CHOICE,CHOICE,...[#FINGERPRINT]` (no choices: `POINT:`).
fn parse_repro(spec: &str) -> Option<Repro> {
    let spec = spec.trim();
    let (check, rest) = match spec.rsplit_once('@') {
        Some((c, r)) => (Some(c.to_string()), r),
        None => (None, spec),
    };
    let (rest, fingerprint) = match rest.split_once('#') {
        Some((r, f)) => (r, Some(u64::from_str_radix(f.trim(), 16).ok()?)),
        None => (rest, None),
    };
    let (point, choices) = rest.split_once(':')?;
    let choices = choices.split(',').filter(|c| !c.is_empty()).map(|c| c.trim().parse().ok()).collect::<Option<_>>()?;
    Some(Repro { check, point: point.trim().parse().ok()?, choices, fingerprint })
}
