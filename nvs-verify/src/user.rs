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
//! would not: the check refuses it, naming where the runs part). Writer threads take
//! their lanes from [`Run::lane`] (recorded as `Run`'s own puts are); each thread must
//! store the same bytes in the same order in both runs, and the crash points explored
//! are those of the interleaving the first run made. Every store must go through `Run`
//! or a [`RunLane`]: one the check did not record (a lane taken from `run.pool()`) is
//! an error, not a violation of nvs's contract. A pool with lane names:
//! `setup.options.lane_names = true`. A violation is told in
//! the workload's words: its operations that had returned, the one in flight, those not
//! started, the acknowledgements owed and what the restart code returned, then the
//! repro line. Restart code can be shared between production and the check by writing it
//! over `nvs_core::Pool<M, X>` for any media `M` (your production pool is a
//! `Pool<MappedMedia, HeapMemory>`, the check's a [`CrashPool`]).

use crate::catchup::{Base, Lanes};
use crate::check::BUDGET;
use crate::contract::{oracle, panic_message, read_all, Issued, Recovered};
use crate::runner::present;
use nvs_core::{FormatOptions, HeapMemory, LaneWriter, Object, Pool, Put};
use nvs_sim::{explore, fence_points, replay, Chooser, CrashView, SimMedia, Verdict};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

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
    /// A workload of at most this many operations has every crash image recovered from
    /// nothing and every object read back ([`FULL_CHECK_OPS`] by default). A longer one
    /// stays near-linear: each crash point's images start from what the point before
    /// recovered (a refresh that catches up, or recovers where it cannot be sure), and
    /// nvs's contract is held on what each image adds (module docs).
    pub full_check_ops: usize,
}

/// The default [`Setup::max_events`]: about a 16 MiB object, or some 70,000 small puts.
pub const MAX_EVENTS: usize = 2_000_000;

/// The default [`Setup::full_check_ops`].
pub const FULL_CHECK_OPS: usize = 200;

/// The unwinding payload that stops a workload past [`Setup::max_events`].
struct TooLong;

impl Setup {
    /// `media_len` bytes, nvs's default format options (4 KiB segments, 4 lanes), the
    /// budget nvs's own families use.
    pub fn new(media_len: usize) -> Setup {
        let mut options = FormatOptions::new(0x5EED_C4EC);
        options.segment_len = Some(4096);
        options.lanes_max = 4;
        Setup {
            media_len,
            options,
            budget: BUDGET,
            only: None,
            max_events: MAX_EVENTS,
            name: "check".into(),
            full_check_ops: FULL_CHECK_OPS,
        }
    }

    /// [`Setup::new`], named `name` (its repros name it: see [`Setup::name`]).
    pub fn named(media_len: usize, name: &str) -> Setup {
        Setup { name: name.into(), ..Setup::new(media_len) }
    }
}

/// A workload's handle on its pool: puts through it are recorded for nvs's oracle, and
/// [`Run::ack`] records what the workload promised its own caller. Writer threads take
/// their lanes with [`Run::lane`]; every store must come through `Run` or a
/// [`RunLane`] (the check refuses a workload that stores otherwise, e.g. through
/// `run.pool().lane(..)`).
pub struct Run<'m, A> {
    pool: SimPool<'m>,
    rec: Recorder<'m, A>,
}

/// What a run recorded, shared by the workload's threads.
struct Recorder<'m, A> {
    media: &'m SimMedia,
    log: Mutex<Log<A>>,
    max_events: usize,
    /// Set when the workload went past `max_events` (whatever its threads' panics say).
    too_long: AtomicUsize,
}

struct Log<A> {
    issued: Vec<Issued>,
    acks: Vec<(usize, A)>,
    /// Each operation's thread and trace window (`start..end`): every store of the trace
    /// must fall in a window of its own thread.
    windows: Vec<(u32, usize, usize)>,
}

impl<A> Default for Log<A> {
    fn default() -> Self {
        Log { issued: Vec::new(), acks: Vec::new(), windows: Vec::new() }
    }
}

impl<'m, A> Recorder<'m, A> {
    fn log(&self) -> std::sync::MutexGuard<'_, Log<A>> {
        self.log.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `op` (a write on `lane`) and record it: `objects` are what an `Ok` put
    /// stored, `what` marks a close or a join.
    fn op<T>(
        &self,
        lane: u32,
        op: impl FnOnce() -> nvs_core::Result<T>,
        objects: impl FnOnce(&T) -> Stored,
        what: Issued,
    ) -> nvs_core::Result<T> {
        let (thread, start) = (nvs_sim::thread_id(), self.media.point());
        let r = op();
        let end = self.media.point();
        let mut log = self.log();
        // Each operation counts too: a put refused before any store (a full pool) makes
        // no event, but is recorded.
        let events = end + log.issued.len();
        if events > self.max_events {
            self.too_long.store(events, Ordering::Relaxed);
            drop(log);
            // Out of the workload, past its own code (no panic message: `check` reports it).
            std::panic::resume_unwind(Box::new(TooLong));
        }
        let objects = r.as_ref().map(objects).unwrap_or_default();
        let op = log.issued.len();
        log.issued.push(Issued { op, lane, start, ack: r.is_ok().then_some(end), objects, ..what });
        log.windows.push((thread, start, end));
        r
    }

    fn ack(&self, what: A) {
        let at = self.media.point();
        self.log().acks.push((at, what));
    }
}

/// What an operation stored: each object's name, version and bytes.
type Stored = Vec<(Vec<u8>, u64, Vec<u8>)>;

/// A put's record: its object's name, version and bytes.
fn one(name: Vec<u8>, bytes: Vec<u8>) -> impl FnOnce(&Put) -> Stored {
    move |put| vec![(name, put.version, bytes)]
}

/// A batch's record.
fn batch(objects: &[(&[u8], &[u8])]) -> impl FnOnce(&Vec<u64>) -> Stored {
    let objects: Vec<(Vec<u8>, Vec<u8>)> = objects.iter().map(|(n, b)| (n.to_vec(), b.to_vec())).collect();
    move |versions| objects.into_iter().zip(versions).map(|((n, b), v)| (n, *v, b)).collect()
}

/// An object as the checker reads it back: its name, and its payload then metadata.
fn whole(object: &Object<'_>) -> (Vec<u8>, Vec<u8>) {
    (object.name().to_vec(), [object.parts().concat(), object.meta_bytes().to_vec()].concat())
}

fn nothing<T>(_: &T) -> Stored {
    Vec::new()
}

impl<'m, A> Run<'m, A> {
    /// Put `bytes` as the next version of `name` on `lane`.
    pub fn put(&mut self, lane: u32, name: &[u8], bytes: &[u8]) -> nvs_core::Result<Put> {
        let pool = &mut self.pool;
        let record = one(name.to_vec(), bytes.to_vec());
        self.rec.op(lane, || pool.put(lane, Object::new(name, bytes)), record, Issued::default())
    }

    /// Put one object as nvs-core describes it — with metadata ([`Object::meta`]), an
    /// explicit version, parts, or as a delta against an earlier version
    /// ([`Object::delta`]) — recorded with its whole bytes (what a get must return) and
    /// its metadata (what `meta` must return).
    pub fn put_object(&mut self, lane: u32, object: Object<'_>) -> nvs_core::Result<Put> {
        let (name, bytes) = whole(&object);
        let pool = &mut self.pool;
        self.rec.op(lane, || pool.put(lane, object), one(name, bytes), Issued::default())
    }

    /// Put every `(name, bytes)` in one commit on `lane`; their versions, in order.
    pub fn put_batch(&mut self, lane: u32, objects: &[(&[u8], &[u8])]) -> nvs_core::Result<Vec<u64>> {
        let pool = &mut self.pool;
        let put = || {
            let objs: Vec<Object<'_>> = objects.iter().map(|(n, b)| Object::new(n, b)).collect();
            // (The recorder keeps the error alone: a batch error's object index dropped.)
            pool.put_batch(lane, &objs).map(|v| v.iter().copied().collect::<Vec<u64>>()).map_err(nvs_core::Error::from)
        };
        self.rec.op(lane, put, batch(objects), Issued::default())
    }

    /// Close `lane`'s stream (an end-of-stream marker).
    pub fn close_lane(&mut self, lane: u32) -> nvs_core::Result<()> {
        let pool = &mut self.pool;
        self.rec.op(lane, || pool.close_lane(lane), nothing, Issued { close: true, ..Issued::default() })
    }

    /// Release all but the newest `keep` versions of every name (nvs's retention); the
    /// number of segments released.
    pub fn reclaim(&mut self, keep: u32) -> nvs_core::Result<u32> {
        let pool = &mut self.pool;
        let mut released = Vec::new();
        let reclaim = || {
            let before = present(pool);
            let r = pool.reclaim(keep);
            let after = present(pool);
            released = before.into_iter().filter(|o| !after.contains(o)).collect();
            r
        };
        let r = self.rec.op(u32::MAX, reclaim, nothing, Issued::default());
        if let Some(op) = self.rec.log().issued.last_mut() {
            op.released = released;
        }
        r
    }

    /// Take `lane` for a writer thread: its puts and close are recorded as [`Run`]'s
    /// are, and several threads, each with its own lane, write at once
    /// (`std::thread::scope`). Taking a lane joins it to the stream ([`Pool::lane`]).
    /// The check explores every crash point of the interleaving the first run made (not
    /// every interleaving: nvs's own loom tests do that for its code); the second run may
    /// interleave otherwise, but each thread must store the same bytes in the same order.
    pub fn lane(&self, lane: u32) -> nvs_core::Result<RunLane<'_, 'm, A>> {
        let mut writer = None;
        let join = || self.pool.lane(lane).map(|w| writer = Some(w));
        self.rec.op(lane, join, nothing, Issued { join: true, ..Issued::default() })?;
        let writer = writer.ok_or(nvs_core::Error::LaneBusy { lane })?;
        Ok(RunLane { writer, rec: &self.rec })
    }

    /// The pool, to read (its reads store nothing). Write through `Run`'s methods and
    /// [`Run::lane`]: a store the check did not record is refused.
    pub fn pool(&self) -> &SimPool<'m> {
        &self.pool
    }

    /// Record that the workload has now told its own caller that `what` is durable: a
    /// crash from here on must not lose it (your predicate sees it).
    pub fn ack(&self, what: A) {
        self.rec.ack(what);
    }
}

/// A writer thread's lane in a checked workload ([`Run::lane`]): puts and a close,
/// recorded as [`Run`]'s are. Dropping it gives the lane back (it stays open).
pub struct RunLane<'r, 'm, A> {
    writer: LaneWriter<'r, &'m SimMedia, HeapMemory>,
    rec: &'r Recorder<'m, A>,
}

impl<A> RunLane<'_, '_, A> {
    /// The lane this writer holds.
    pub fn lane(&self) -> u32 {
        self.writer.lane()
    }

    /// Put `bytes` as the next version of `name` on this lane.
    pub fn put(&mut self, name: &[u8], bytes: &[u8]) -> nvs_core::Result<Put> {
        let (lane, w) = (self.writer.lane(), &mut self.writer);
        self.rec.op(lane, || w.put(Object::new(name, bytes)), one(name.to_vec(), bytes.to_vec()), Issued::default())
    }

    /// Put one object with metadata, an explicit version, parts or as a delta
    /// ([`Run::put_object`]).
    pub fn put_object(&mut self, object: Object<'_>) -> nvs_core::Result<Put> {
        let (name, bytes) = whole(&object);
        let (lane, w) = (self.writer.lane(), &mut self.writer);
        self.rec.op(lane, || w.put(object), one(name, bytes), Issued::default())
    }

    /// Put every `(name, bytes)` in one commit on this lane; their versions, in order.
    pub fn put_batch(&mut self, objects: &[(&[u8], &[u8])]) -> nvs_core::Result<Vec<u64>> {
        let (lane, w) = (self.writer.lane(), &mut self.writer);
        let put = || {
            let objs: Vec<Object<'_>> = objects.iter().map(|(n, b)| Object::new(n, b)).collect();
            w.put_batch(&objs).map(|v| v.iter().copied().collect::<Vec<u64>>()).map_err(nvs_core::Error::from)
        };
        self.rec.op(lane, put, batch(objects), Issued::default())
    }

    /// Close this lane's stream (an end-of-stream marker).
    pub fn close(&mut self) -> nvs_core::Result<()> {
        let (lane, w) = (self.writer.lane(), &mut self.writer);
        self.rec.op(lane, || w.close(), nothing, Issued { close: true, ..Issued::default() })
    }

    /// [`Run::ack`], from this thread.
    pub fn ack(&self, what: A) {
        self.rec.ack(what);
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
        normalized(&events).hash(&mut h);
        h.finish()
    };
    let (ack_points, acks): (Vec<usize>, Vec<A>) = acks.into_iter().unzip();
    report.events = events.len();
    // What the restart code returned in the image being checked (for a failure's story).
    let restarted_last = std::sync::Mutex::new(String::new());
    // The image after any crash point: nvs's contract, the user's restart, the user's
    // predicate on the acknowledgements made before the crash.
    // A long workload's images start from their crash point's base (module `catchup`).
    let lanes = Lanes::new(&issued);
    let incremental = issued.len() > setup.full_check_ops;
    let one = |point: usize, state: &Arc<nvs_sim::State>, ch: &Chooser, base: Option<&mut Base>| {
        let view = CrashView::new(state.clone(), ch.clone());
        let said = |what: String| *restarted_last.lock().unwrap_or_else(|e| e.into_inner()) = what;
        said("(the crash image was refused before it ran)".into());
        let r = catch_unwind(AssertUnwindSafe(|| -> Result<(), String> {
            let recovered = |e| format!("recovery failed: {e}");
            let pool = match base {
                Some(base) => {
                    let pool = base.image(&view)?;
                    base.verify(&pool, point, &issued, &lanes).map_err(|e| format!("nvs's contract: {e}"))?;
                    pool
                }
                None => {
                    let pool = Pool::open_read_only(&view, HeapMemory::new()).map_err(recovered)?;
                    let rec: Recovered = read_all(&pool)?;
                    oracle(&issued, point, &Recovered::default(), &rec).map_err(|e| format!("nvs's contract: {e}"))?;
                    pool
                }
            };
            if view.stores() != 0 {
                return Err(format!("recovery stored {} times (opening must not write)", view.stores()));
            }
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
        // The image as the whole check would have made it: from the bases of every
        // crash point up to it, in a long workload.
        let recording = media.recording();
        let mut states = recording.stepper();
        let mut base = None;
        for &p in points.iter().filter(|&&p| incremental && p < point) {
            base = Base::at(base, &Arc::new(states.crash_state(p)), p, &issued, &lanes);
        }
        let state = Arc::new(states.crash_state(point));
        if incremental {
            base = Base::at(base, &state, point, &issued, &lanes);
        }
        let mut made = None;
        let r = replay(choices.clone(), |ch| {
            let r = one(point, &state, ch, base.as_mut());
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
    let mut states = recording.stepper();
    let mut base = None;
    for point in points {
        report.points += 1;
        let state = Arc::new(states.crash_state(point));
        if incremental {
            base = Base::at(base, &state, point, &issued, &lanes);
        }
        match explore(setup.budget, |ch| one(point, &state, ch, base.as_mut())) {
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
    let rec = Recorder { media: &media, log: Mutex::default(), max_events: setup.max_events, too_long: 0.into() };
    let mut run = Run { pool, rec };
    let r = catch_unwind(AssertUnwindSafe(|| workload(&mut run)));
    let Run { pool, rec } = run;
    drop(pool);
    // A writer thread that went past the bound panics its own way (`scope` and `join`
    // give other payloads): the flag says so whatever the workload's panic says.
    let too_long = rec.too_long.load(Ordering::Relaxed);
    match r {
        _ if too_long > 0 => {
            return Err(format!(
                "the workload made more than {} trace events and operations (word stores, \
                 flushes, fences, puts; {too_long} when it was stopped): every crash point of the \
                 trace is explored and the trace is held in memory; shorten the workload, use \
                 smaller objects, or raise Setup::max_events",
                setup.max_events
            ))
        }
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(format!("the workload failed: {e}")),
        Err(p) => return Err(format!("the workload panicked: {}", panic_message(&p))),
    }
    let Log { issued, acks, windows } = rec.log.into_inner().unwrap_or_else(|e| e.into_inner());
    unrecorded(&media.events(), format_end, windows, &issued)?;
    Ok(Recorded { media, format_end, issued, acks })
}

/// Refuse a trace with a store, flush or fence outside every recorded operation of its
/// thread (a write through `run.pool().lane(..)`, say): nvs's contract could not be held
/// against writes the check did not see, and it would blame nvs.
fn unrecorded(
    events: &[nvs_sim::Event],
    format_end: usize,
    mut windows: Vec<(u32, usize, usize)>,
    issued: &[Issued],
) -> Result<(), String> {
    use nvs_sim::Event;
    windows.sort_unstable();
    for (i, e) in events.iter().enumerate().skip(format_end) {
        let (Event::Store { thread, .. } | Event::Flush { thread, .. } | Event::Fence { thread }) = *e;
        // The last window of this thread starting at or before `i`.
        let at = windows.partition_point(|&(t, s, _)| (t, s) <= (thread, i));
        let inside = at > 0 && matches!(windows[at - 1], (t, _, end) if t == thread && i < end);
        if !inside {
            let after = match issued.iter().rposition(|o| o.start <= i) {
                Some(k) => format!("after operation {k}, {}", describe(&issued[k])),
                None => "before its first operation".into(),
            };
            return Err(format!(
                "the workload stored to the pool outside the operations the check records (trace event {i}, \
                 {after}): write only through Run's methods and the lanes of Run::lane, not through \
                 run.pool() (its lane() writes unseen: nvs's contract cannot be held against them)"
            ));
        }
    }
    Ok(())
}

/// `events` with each thread named by the order of its first event (0, 1, ...): two
/// runs of a workload run their threads under other ids.
fn normalized(events: &[nvs_sim::Event]) -> Vec<nvs_sim::Event> {
    use nvs_sim::Event;
    let mut ids: Vec<u32> = Vec::new();
    let mut id = |t: u32| match ids.iter().position(|&x| x == t) {
        Some(i) => i as u32,
        None => {
            ids.push(t);
            ids.len() as u32 - 1
        }
    };
    events
        .iter()
        .map(|e| match *e {
            Event::Store { thread, word, value, nt } => Event::Store { thread: id(thread), word, value, nt },
            Event::Flush { thread, line } => Event::Flush { thread: id(thread), line },
            Event::Fence { thread } => Event::Fence { thread: id(thread) },
        })
        .collect()
}

/// Each thread's events, without its id, and the trace index of each.
fn threads(events: &[nvs_sim::Event]) -> Vec<Vec<(nvs_sim::Event, usize)>> {
    use nvs_sim::Event;
    let mut by: std::collections::BTreeMap<u32, Vec<(Event, usize)>> = std::collections::BTreeMap::new();
    for (i, e) in events.iter().enumerate() {
        let (thread, bare) = match *e {
            Event::Store { thread, word, value, nt } => (thread, Event::Store { thread: 0, word, value, nt }),
            Event::Flush { thread, line } => (thread, Event::Flush { thread: 0, line }),
            Event::Fence { thread } => (thread, Event::Fence { thread: 0 }),
        };
        by.entry(thread).or_default().push((bare, i));
    }
    let mut all: Vec<_> = by.into_values().collect();
    let key = |e: &(Event, usize)| match e.0 {
        Event::Store { word, value, nt, .. } => (0u8, word, value, nt),
        Event::Flush { line, .. } => (1, line, 0, false),
        Event::Fence { .. } => (2, 0, 0, false),
    };
    all.sort_by(|a, b| a.iter().map(key).cmp(b.iter().map(key)));
    all
}

/// Where two runs of a workload part, in its words (`None`: they are alike). Writer
/// threads may interleave otherwise in the second run; each must store the same.
fn parted(a: &[nvs_sim::Event], b: &[nvs_sim::Event], issued: &[Issued]) -> Option<String> {
    let (na, nb) = (normalized(a), normalized(b));
    let at = match na.iter().zip(&nb).position(|(x, y)| x != y) {
        Some(i) => i,
        None if a.len() == b.len() => return None,
        None => a.len().min(b.len()),
    };
    let (ta, tb) = (threads(a), threads(b));
    let at = if ta.len() > 1 || tb.len() > 1 {
        // Threads: alike if each thread's events are (a multiset of sequences).
        let differs = ta.iter().zip(&tb).find_map(|(x, y)| {
            let k = x.iter().zip(y).position(|(p, q)| p.0 != q.0).unwrap_or(x.len().min(y.len()));
            (x.len() != y.len() || k < x.len()).then(|| x.get(k).or(x.last()).map_or(at, |e| e.1))
        });
        match differs {
            None if ta.len() == tb.len() => return None,
            None => at,
            Some(i) => i,
        }
    } else {
        at
    };
    let op = issued.iter().rposition(|o| o.start <= at);
    let what = match op {
        Some(i) => format!("in operation {i}, {}", describe(&issued[i])),
        None => "before its first operation".into(),
    };
    Some(format!(
        "the workload is not deterministic: its second run stored other bytes than its first (trace event {at}, \
         {what}). A check explores the crash images of one run, so every run must make the same puts in the same \
         order with the same bytes (each writer thread its own, in its own order): iterate a BTreeMap or a sorted \
         list, not a HashMap; seed any randomness; keep the clock out"
    ))
}

/// An operation, as the workload wrote it.
fn describe(o: &Issued) -> String {
    let show = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    if o.close {
        return format!("close_lane({})", o.lane);
    }
    if o.join {
        return format!("lane({}) (a writer thread's lane taken)", o.lane);
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
            None => "returned an error",
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
