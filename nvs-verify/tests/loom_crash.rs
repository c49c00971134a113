//! loom × crash: for every loom interleaving of two lane writers doing two puts each on
//! one pool over a recording [`SimMedia`], every crash image of that interleaving's trace
//! (at every fence and at the end, with per-thread fences) is recovered by nvs-core and
//! held to the crash contract by nvs-verify's own check
//! ([`nvs_verify::check::check_trace_with`]: the oracle, lazy and eager exploration).
//!
//! Run with `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release -p
//! nvs-verify --test loom_crash -- --nocapture` (ci.sh). The preemption bound is
//! `LOOM_MAX_PREEMPTIONS`, else [`PREEMPTIONS`].
//!
//! How it fits together:
//! - under `--cfg loom`, nvs-sim takes thread ids from loom's model threads (loom runs
//!   them all on one OS thread), so each thread's fence persists only its own stores;
//!   and each fence is a loom scheduling point, so loom interleaves the two writers'
//!   units at their fences and crash points fall where both are mid-unit;
//! - each execution records its trace and, per put, the trace positions at its call
//!   and at its return (acknowledged); identical traces are kept once, with a count;
//! - after the exploration every distinct trace is checked, each recovery in a fresh
//!   one-thread loom execution (nvs-core built for loom must run inside one, and a loom
//!   thread's 16-bit causality counter overflows after a few hundred recoveries).
//!
//! Lives in nvs-verify, not beside nvs-core's loom models: the check is nvs-verify's, and
//! nvs-verify already depends on nvs-core and nvs-sim.
//!
//! `NVS_LOOM_MUTANT=NAME` (in a build with `--cfg nvs_mutant` too) makes a seeded
//! protocol bug live and turns the test around: it passes only if the crash check of
//! some trace finds a violation.
#![cfg(loom)]

use nvs_core::internals::mutant::{self, Mutant};
use nvs_core::{FormatOptions, HeapMemory, Media, Object, Pool};
use nvs_sim::{crash_state, fence_points, Event, SimMedia, State};
use nvs_verify::check::{check_trace_with, Job};
use nvs_verify::workload::{Issued, Op};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;

/// Preemption bound of the model unless `LOOM_MAX_PREEMPTIONS` gives one (the whole
/// space, bound 20 and up, is 27,846 executions and 2,068 distinct traces).
const PREEMPTIONS: usize = 3;
const SEGMENT_LEN: u64 = 4096;
const SEGMENTS: u64 = 3;
/// Stack for the model threads: pools (256 lanes of state) and recovery live there.
const STACK: usize = 8 << 20;

/// The recording media, shared by the model's threads.
#[derive(Clone)]
struct Shared(std::sync::Arc<SimMedia>);

impl Media for Shared {
    fn len(&self) -> usize {
        self.0.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.0.read(off, dst)
    }
    fn load_word(&self, off: usize) -> u64 {
        self.0.load_word(off)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        self.0.store_nt(off, src)
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        self.0.store_word_nt(off, word)
    }
    fn store(&self, off: usize, src: &[u8]) {
        self.0.store(off, src)
    }
    fn flush(&self, off: usize, len: usize) {
        self.0.flush(off, len)
    }
    fn fence(&self) {
        self.0.fence()
    }
}

type SimPool = Pool<Shared, HeapMemory>;

fn media_len() -> usize {
    (4096 + SEGMENT_LEN * SEGMENTS) as usize
}

/// Distinct bytes per (lane, put), of sizes crossing word boundaries.
fn payload(lane: u32, k: usize) -> Vec<u8> {
    let len = [9, 24, 17, 40][(lane as usize * 2 + k) % 4];
    (0..len).map(|i| (i as u32 * 7 + lane * 31 + k as u32 * 101 + 1) as u8).collect()
}

/// Each thread's two puts: the shared name `s` (it exists before the threads start, so
/// both plan it without holding the lock and take reserved versions) and a name of its
/// own (new, so its unit holds the lock from planning to publishing); lane 1 also claims
/// its first segment. The orders differ so one thread's unlocked put can meet the
/// other's locked one.
fn script(lane: u32) -> [&'static [u8]; 2] {
    match lane {
        0 => [b"s", b"a"],
        _ => [b"b", b"s"],
    }
}

/// One put, recorded the way nvs-verify's workloads record theirs: trace position
/// before the call, position after it returned (acknowledged), what it wrote.
fn put(media: &SimMedia, op: usize, lane: u32, name: &[u8], bytes: Vec<u8>, f: impl FnOnce() -> u64) -> Issued {
    let start = media.point();
    let version = f();
    let ack = Some(media.point());
    Issued { op, lane, start, ack, objects: vec![(name.to_vec(), version, bytes)], ..Default::default() }
}

/// A recorded execution, as an exact key: its events and what its puts issued.
type EventKey = (u8, u32, u32, u64, bool);
type IssuedKey = (usize, u32, usize, Option<usize>, Vec<(Vec<u8>, u64, Vec<u8>)>, bool);
type TraceKey = (Vec<EventKey>, Vec<IssuedKey>);

/// Every execution's trace: distinct traces (exact), each with how many executions
/// recorded it, and where format ended (crash points start there).
static RECORDED: Mutex<BTreeMap<TraceKey, (u64, usize)>> = Mutex::new(BTreeMap::new());

fn event_key(e: &Event) -> EventKey {
    match *e {
        Event::Store { thread, word, value, nt } => (0, thread, word, value, nt),
        Event::Flush { thread, line } => (1, thread, line, 0, false),
        Event::Fence { thread } => (2, thread, 0, 0, false),
    }
}

fn event_of(k: &EventKey) -> Event {
    match *k {
        (0, thread, word, value, nt) => Event::Store { thread, word, value, nt },
        (1, thread, line, _, _) => Event::Flush { thread, line },
        (_, thread, _, _, _) => Event::Fence { thread },
    }
}

fn issued_key(i: &Issued) -> IssuedKey {
    (i.op, i.lane, i.start, i.ack, i.objects.clone(), i.join)
}

fn issued_of(k: &IssuedKey) -> Issued {
    let (op, lane, start, ack, objects, join) = k.clone();
    Issued { op, lane, start, ack, objects, join, ..Default::default() }
}

/// One loom execution: format, one put of `s` on lane 0, then two threads with their
/// own lane writers, two puts each. Records the trace; the crash check runs after the
/// exploration (see [`check_recorded`]).
fn execution() {
    let media = Shared(std::sync::Arc::new(SimMedia::from_bytes(&vec![0u8; media_len()])));
    let mut o = FormatOptions::new(0x600D);
    o.segment_len = Some(SEGMENT_LEN);
    o.lanes_max = 2;
    let mut pool: SimPool = Pool::format(media.clone(), o, HeapMemory::new()).unwrap();
    let format_end = media.0.point();
    let first = payload(0, 9);
    let mut issued =
        vec![put(&media.0, 0, 0, b"s", first.clone(), || pool.put(0, Object::new(b"s", &first)).unwrap().version)];
    let pool = loom::sync::Arc::new(pool);
    let threads: Vec<_> = (0..2u32)
        .map(|lane| {
            let (pool, media) = (pool.clone(), media.clone());
            spawn(move || {
                // Taking the lane joins it (a claimed, fenced segment): an operation too.
                let start = media.0.point();
                let mut w = pool.lane(lane).unwrap();
                let join = Issued {
                    op: 5 + lane as usize,
                    lane,
                    start,
                    ack: Some(media.0.point()),
                    join: true,
                    ..Default::default()
                };
                let mut out = vec![join];
                for (k, name) in script(lane).into_iter().enumerate() {
                    let bytes = payload(lane, k);
                    let op = 1 + lane as usize * 2 + k;
                    out.push(put(&media.0, op, lane, name, bytes.clone(), || {
                        w.put(Object::new(name, &bytes)).unwrap().version
                    }));
                }
                out
            })
        })
        .collect();
    for t in threads {
        issued.extend(t.join().unwrap());
    }
    drop(pool);
    let events = media.0.events();
    let mut fencing: Vec<u32> =
        events.iter().filter_map(|e| if let Event::Fence { thread } = e { Some(*thread) } else { None }).collect();
    fencing.sort();
    fencing.dedup();
    assert_eq!(fencing.len(), 3, "fences of the body and both writer threads under distinct thread ids: {fencing:?}");
    let key = (events.iter().map(event_key).collect(), issued.iter().map(issued_key).collect());
    RECORDED.lock().unwrap().entry(key).or_insert((0, format_end)).0 += 1;
}

/// Run `job` alone in a fresh loom execution (nvs-core built for loom needs one; see
/// `nvs_verify::check::check_trace_with`), on a thread with a big enough stack.
fn in_loom(job: Job) -> Result<(u64, u64), String> {
    let slot = std::sync::Arc::new(Mutex::new(Some(job)));
    let out = std::sync::Arc::new(Mutex::new(None));
    let (s, o) = (slot.clone(), out.clone());
    let mut b = loom::model::Builder::new();
    // A job's recoveries (one per crash image it explores) add up; a sealed unit's
    // recovery verifies the lane's newest unit whole, more work per image than two fences.
    b.max_branches = 200_000;
    b.check(move || {
        let job = s.lock().unwrap().take().expect("one loom execution per job");
        *o.lock().unwrap() = Some(spawn(job).join().unwrap());
    });
    let r = out.lock().unwrap().take().expect("the job ran");
    r
}

/// What the writer runs after a first crash, at depth 2: lane 0's put does not fit its
/// segment and claims one (lane 1's first segment, if the crash tore that claim).
fn then() -> Vec<Op> {
    vec![Op::Put { lane: 0, size: 3800 }, Op::Put { lane: 1, size: 9 }]
}

/// What the crash check of all recorded traces found.
#[derive(Default, Debug)]
struct Totals {
    traces: u64,
    executions: u64,
    points: u64,
    /// Lazy runs: each one recovery of a crash image (words it did not read left open).
    images: u64,
    eager_points: u64,
    eager_runs: u64,
    violations: Vec<String>,
    incomplete: u64,
    negatives_caught: u64,
    /// Crash points where two threads both had unfenced stores (both mid-unit).
    both_pending: u64,
    /// Of those, checked again at depth 2 (points and lazy runs, nested ones included).
    depth2_points: u64,
    depth2_images: u64,
}

/// Threads with a store after their last fence among the first `point` events.
fn threads_pending(events: &[Event], point: usize) -> usize {
    let mut pending = BTreeMap::new();
    for e in &events[..point] {
        match *e {
            Event::Store { thread, .. } => pending.insert(thread, true),
            Event::Fence { thread } => pending.insert(thread, false),
            Event::Flush { .. } => None,
        };
    }
    pending.values().filter(|&&p| p).count()
}

/// The crash check of every recorded trace: every fence and the end (after format);
/// and the same trace with its last fence dropped must fail.
fn check_recorded(negative: bool) -> Totals {
    let recorded = std::mem::take(&mut *RECORDED.lock().unwrap());
    let base = State::from_bytes(&vec![0u8; media_len()]);
    let mut t = Totals::default();
    for ((ev, is), (executions, format_end)) in &recorded {
        let events: Vec<Event> = ev.iter().map(event_of).collect();
        let issued: Vec<Issued> = is.iter().map(issued_of).collect();
        t.traces += 1;
        t.executions += executions;
        let points: Vec<usize> = fence_points(&events).into_iter().filter(|&p| p >= *format_end).collect();
        let r = check_trace_with(&in_loom, |p| crash_state(&base, &events, p), &points, &issued, &[], true);
        let checked = &points[..r.counts.points as usize];
        let both: Vec<usize> = checked.iter().copied().filter(|&p| threads_pending(&events, p) >= 2).collect();
        t.both_pending += both.len() as u64;
        // Depth 2 where both writers were mid-unit: a writer opens the image, puts on
        // both lanes ([`then`]), and that is crashed again at every point.
        let r2 = check_trace_with(&in_loom, |p| crash_state(&base, &events, p), &both, &issued, &[then()], true);
        t.depth2_points += r2.counts.points;
        t.depth2_images += r2.counts.states;
        for r in [&r, &r2] {
            t.points += r.counts.points;
            t.images += r.counts.states;
            t.eager_points += r.counts.eager_points;
            t.eager_runs += r.counts.eager_runs;
            t.incomplete += r.counts.incomplete;
            if let Some((point, choices, message)) = r.failures.first() {
                t.violations.push(format!(
                    "point {point} of {} (choices {choices:?}): {message}\n  issued: {issued:?}",
                    events.len()
                ));
            }
        }
        if negative {
            // The check can fail: without its last fence (the final fence of the last
            // put to return), the trace must lose an acknowledged put at the end.
            let (events, issued) = drop_last_fence(&events, &issued);
            let end = [events.len()];
            let r = check_trace_with(&in_loom, |p| crash_state(&base, &events, p), &end, &issued, &[], true);
            match r.failures.first() {
                Some((_, _, m)) if m.contains("acknowledged") => t.negatives_caught += 1,
                other => t.violations.push(format!("with the last fence dropped, the check found {other:?}")),
            }
        }
    }
    t
}

/// The trace without its last fence, trace positions after it moved down by one.
fn drop_last_fence(events: &[Event], issued: &[Issued]) -> (Vec<Event>, Vec<Issued>) {
    let f = events.iter().rposition(|e| matches!(e, Event::Fence { .. })).expect("a fence");
    let mut ev = events.to_vec();
    ev.remove(f);
    let shift = |p: usize| if p > f { p - 1 } else { p };
    let is = issued.iter().map(|i| Issued { start: shift(i.start), ack: i.ack.map(shift), ..i.clone() }).collect();
    (ev, is)
}

fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> loom::thread::JoinHandle<T> {
    loom::thread::Builder::new().stack_size(STACK).spawn(f).unwrap()
}

#[test]
fn loom_crash_two_lanes_two_puts() {
    let mutant = std::env::var("NVS_LOOM_MUTANT").ok().filter(|m| !m.is_empty()).map(|name| {
        let m = Mutant::from_name(&name).unwrap_or_else(|| panic!("NVS_LOOM_MUTANT: no mutant {name}"));
        assert!(mutant::select(Some(m)), "mutant {name}: this build lacks --cfg nvs_mutant");
        m.name()
    });
    let t = Instant::now();
    let mut b = loom::model::Builder::new();
    b.max_branches = 1_000_000;
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(PREEMPTIONS);
    }
    b.check(|| spawn(execution).join().unwrap());
    let explored = t.elapsed();
    let r = check_recorded(mutant.is_none());
    println!(
        "loom × crash, preemption bound {}: {} executions ({:.1} s), {} distinct traces, {} crash points \
         ({} with both writers mid-unit, checked again at depth 2: {} points, {} images), {} crash images \
         recovered (lazy runs), eager cross-check at {} points ({} runs), {} violations, {} incomplete; {} of \
         {} traces with their last fence dropped caught; {:.1} s in all",
        b.preemption_bound.unwrap(),
        r.executions,
        explored.as_secs_f64(),
        r.traces,
        r.points,
        r.both_pending,
        r.depth2_points,
        r.depth2_images,
        r.images,
        r.eager_points,
        r.eager_runs,
        r.violations.len(),
        r.incomplete,
        r.negatives_caught,
        r.traces,
        t.elapsed().as_secs_f64()
    );
    for v in r.violations.iter().take(3) {
        println!("  VIOLATION {v}");
    }
    if let Some(m) = mutant {
        assert!(!r.violations.is_empty(), "mutant {m} survived loom × crash");
        println!("mutant {m}: killed ({} of {} traces violate the contract)", r.violations.len(), r.traces);
        return;
    }
    assert!(r.violations.is_empty(), "loom × crash found violations");
    assert_eq!(r.incomplete, 0, "a crash point ran out of budget");
    assert!(r.executions > 1, "loom explored only {} execution", r.executions);
    assert!(r.points > 0 && r.images > 0, "no crash image was checked");
    assert!(r.depth2_points > 0 && r.depth2_images > r.depth2_points, "depth 2 checked nothing");
    assert_eq!(r.negatives_caught, r.traces, "a dropped final fence went unnoticed");
}
