//! Writer processes: two pools over one media, each writing its own lane beside the
//! other (`Pool::open_lanes`), as two processes of one pool do ([`Writers::Processes`]).
//!
//! Each process is a thread of its own (a fence is its own thread's: a process's
//! fences persist its own stores only) that owns its pool; the workload's operations
//! run in turn, each in the process of its lane, so their stores make one trace of one
//! [`SimMedia`], crashed (a power loss) at every fence point like any other.
//!
//! A process can be paused inside an operation while the other runs whole ones
//! ([`Op::Paused`]): then the paused one's NT stores that its thread has not fenced are
//! not yet visible to the other (they may sit in its write-combining buffers: on x86 an
//! NT store becomes visible to other CPUs at some moment before its thread's fence
//! completes — here, the latest). Cached stores are visible at once (coherent caches).
//! It is never paused holding the claim lock (the other would wait for it).
//!
//! A process can also die ([`Op::Crash`], a process crash: the machine goes on): its
//! media is a `Tap` that lets a given number of events through and then stops the
//! process where it is, mid-operation (an unwind that runs no more of its code; a wide
//! store is cut at a word). Its stores stay in the media; the other process goes on
//! (claims included), and a new process takes the lane over ([`Op::Takeover`]): its
//! recovery is held to the contract at once, and decides the cut operation — whole
//! (it happened) or absent (it never will); torn is a violation.

use crate::contract::{check_reads, oracle, panic_message, read_all, recover_all, Issued, Recovered};
use crate::runner::{every_sequence, options, run_one, Family, Op, Runner, Setup, Trace, Workload, Writers};
use nvs_core::{Error, HeapMemory, Media, Object, Pool};
use nvs_sim::{Event, SimMedia};
use std::cell::Cell;
use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::{Scope, ScopedJoinHandle};

/// Writer processes: A writes lane 0, B lane 1.
const PROCESSES: u32 = 2;
/// Payload seed of every process (payloads differ by op index).
const SEED: u64 = 0x5EED;

/// The unwind that stops a killed process (no panic hook sees it).
struct Killed;

/// Per process (by lane), its NT stores not yet fenced: word -> the value it held before
/// the first of them (what the other processes still read).
type Unfenced = Vec<HashMap<usize, u64>>;

/// A process's media: the recording media, as the process sees it (the others'
/// unfenced NT stores not yet visible), until the process is killed at `stop_at` (a
/// trace position): the event that would pass it is not made, and the process stops.
/// At `pause_at` it pauses (its first event from there outside the claim lock): it
/// says so on `replies` and waits for `resume`.
struct Tap<'m> {
    media: &'m SimMedia,
    /// This process's lane: its slot in `unfenced`.
    me: usize,
    unfenced: &'m Mutex<Unfenced>,
    stop_at: Cell<usize>,
    pause_at: Cell<usize>,
    /// Holds the claim lock.
    locked: Cell<bool>,
    replies: Sender<Result<Reply, String>>,
    resume: Receiver<()>,
}

impl<'m> Tap<'m> {
    fn new(
        media: &'m SimMedia,
        me: usize,
        unfenced: &'m Mutex<Unfenced>,
        replies: Sender<Result<Reply, String>>,
        resume: Receiver<()>,
    ) -> Tap<'m> {
        let never = || Cell::new(usize::MAX);
        Tap { media, me, unfenced, stop_at: never(), pause_at: never(), locked: Cell::new(false), replies, resume }
    }

    /// The media as process `me` sees it, to read (never paused nor killed).
    fn viewer(media: &'m SimMedia, me: usize, unfenced: &'m Mutex<Unfenced>) -> Tap<'m> {
        Tap::new(media, me, unfenced, channel().0, channel().1)
    }

    /// Before each store, flush or fence: pause here if due; the events this process
    /// may still make.
    fn room(&self) -> usize {
        if !self.locked.get() && self.media.point() >= self.pause_at.get() {
            self.pause_at.set(usize::MAX);
            // The workload gone (an error elsewhere): this process ends here.
            if self.replies.send(Ok(Reply::Paused)).is_err() || self.resume.recv().is_err() {
                die()
            }
        }
        self.stop_at.get().saturating_sub(self.media.point())
    }

    /// NT stores to words `first..first + n` are about to be made.
    fn unfenced(&self, first: usize, n: usize) {
        let mut u = self.unfenced.lock().unwrap();
        for w in first..first + n {
            if !u[self.me].contains_key(&w) {
                let old = self.media.load_word(w * 8);
                u[self.me].insert(w, old);
            }
        }
    }

    /// `dst` (read at `off`) as this process sees it: the others' unfenced NT stores
    /// not yet there.
    fn hide_others(&self, off: usize, dst: &mut [u8]) {
        let u = self.unfenced.lock().unwrap();
        for (p, words) in u.iter().enumerate().filter(|(p, words)| *p != self.me && !words.is_empty()) {
            let _ = p;
            for w in off / 8..(off + dst.len()).div_ceil(8) {
                if let Some(old) = words.get(&w) {
                    for (k, b) in old.to_le_bytes().iter().enumerate() {
                        if let Some(d) = (w * 8 + k).checked_sub(off).and_then(|i| dst.get_mut(i)) {
                            *d = *b;
                        }
                    }
                }
            }
        }
    }
}

fn die() -> ! {
    resume_unwind(Box::new(Killed))
}

impl Media for Tap<'_> {
    fn len(&self) -> usize {
        self.media.len()
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.media.read(off, dst);
        self.hide_others(off, dst);
    }
    fn load_word(&self, off: usize) -> u64 {
        let mut w = self.media.load_word(off).to_le_bytes();
        self.hide_others(off, &mut w);
        u64::from_le_bytes(w)
    }
    fn store_nt(&self, off: usize, src: &[u8]) {
        let room = self.room();
        let words = src.len().div_ceil(8);
        self.unfenced(off / 8, words.min(room));
        if words <= room {
            return self.media.store_nt(off, src);
        }
        // Cut at a word: the first `room` words are stored.
        self.media.store_nt(off, &src[..room * 8]);
        die()
    }
    fn store_word_nt(&self, off: usize, word: u64) {
        if self.room() == 0 {
            die()
        }
        self.unfenced(off / 8, 1);
        self.media.store_word_nt(off, word)
    }
    fn store(&self, off: usize, src: &[u8]) {
        let room = self.room();
        let words = if src.is_empty() { 0 } else { (off + src.len() - 1) / 8 - off / 8 + 1 };
        if words <= room {
            return self.media.store(off, src);
        }
        let end = (off / 8 + room) * 8;
        self.media.store(off, &src[..end.saturating_sub(off)]);
        die()
    }
    fn flush(&self, off: usize, len: usize) {
        let room = self.room();
        let lines = if len == 0 { 0 } else { (off + len - 1) / 64 - off / 64 + 1 };
        if lines <= room {
            return self.media.flush(off, len);
        }
        let end = (off / 64 + room) * 64;
        self.media.flush(off, end.saturating_sub(off));
        die()
    }
    fn fence(&self) {
        if self.room() == 0 {
            die()
        }
        self.media.fence();
        self.unfenced.lock().unwrap()[self.me].clear();
    }
    fn lock_claims(&self) -> nvs_core::Result<()> {
        self.locked.set(true);
        Ok(())
    }
    fn unlock_claims(&self) {
        self.locked.set(false)
    }
}

/// An op for a process to run.
struct Cmd(usize, Op);

/// What a process answers.
enum Reply {
    /// It opened: what its recovery holds.
    Opened(Recovered),
    /// It paused inside the op ([`Op::Paused`]).
    Paused,
    /// It ran an op: what the op issued; `died`: the trace position where it was killed
    /// (a cut op issued its intent, unacknowledged).
    Ran { issued: Vec<Issued>, died: Option<usize> },
}

/// A writer process (its thread) as the workload drives it.
struct Process<'scope> {
    lane: u32,
    cmds: Sender<Cmd>,
    replies: Receiver<Result<Reply, String>>,
    resume: Sender<()>,
    thread: ScopedJoinHandle<'scope, ()>,
}

impl<'scope> Process<'scope> {
    /// Start the writer process of `lane` (it opens the pool for its lane); what its
    /// recovery holds.
    fn start<'env>(
        s: &'scope Scope<'scope, 'env>,
        media: &'env SimMedia,
        unfenced: &'env Mutex<Unfenced>,
        lane: u32,
        cross_chains: bool,
        drain: bool,
    ) -> Result<(Process<'scope>, Recovered), String> {
        let (cmds, cmd_rx) = channel();
        let (replies_tx, replies) = channel();
        let (resume, resume_rx) = channel();
        let tap = Tap::new(media, lane as usize, unfenced, replies_tx, resume_rx);
        let thread = s.spawn(move || process(tap, cross_chains, drain, cmd_rx));
        let p = Process { lane, cmds, replies, resume, thread };
        match p.replies.recv() {
            Ok(Ok(Reply::Opened(rec))) => Ok((p, rec)),
            Ok(Err(e)) => Err(e),
            _ => Err(format!("the writer process of lane {lane} did not open")),
        }
    }

    /// Run op `i`: what it issued, and where the process died if it did.
    fn run(&self, i: usize, op: &Op) -> Result<(Vec<Issued>, Option<usize>), String> {
        self.send(i, op)?;
        match self.reply(i)? {
            Reply::Ran { issued, died } => Ok((issued, died)),
            _ => Err(format!("op {i}: the writer process of lane {} paused unasked", self.lane)),
        }
    }

    /// Have op `i` run (the answer is [`Process::reply`]).
    fn send(&self, i: usize, op: &Op) -> Result<(), String> {
        self.cmds
            .send(Cmd(i, op.clone()))
            .map_err(|_| format!("op {i}: the writer process of lane {} is gone", self.lane))
    }

    /// The process's answer about op `i`.
    fn reply(&self, i: usize) -> Result<Reply, String> {
        match self.replies.recv() {
            Ok(r) => r,
            Err(_) => Err(format!("op {i}: the writer process of lane {} is gone", self.lane)),
        }
    }

    /// End the process (a clean exit: its pool is dropped) and wait for it.
    fn stop(self) {
        drop(self.cmds);
        // A panic there was answered already, as an error.
        let _ = self.thread.join();
    }
}

/// The body of the writer process of `lane`: open, then run each op sent, answering
/// each; ends when the workload drops it, or when it dies.
fn process(tap: Tap<'_>, cross_chains: bool, drain: bool, cmds: Receiver<Cmd>) {
    let (media, lane, replies) = (tap.media, tap.me as u32, tap.replies.clone());
    let opened = catch_unwind(AssertUnwindSafe(|| {
        let mut pool =
            Pool::open_lanes(&tap, HeapMemory::new(), &[lane]).map_err(|e| format!("open_lanes([{lane}]): {e}"))?;
        let rec = read_all(&pool)?;
        // The other process's lane is not this one's to write: refused, nothing stored.
        let (start, other) = (media.point(), (lane + 1) % PROCESSES);
        let refused = pool.put(other, Object::new("x", b"x")).map(|_| ());
        if refused != Err(Error::LaneNotOwned { lane: other }) || media.point() != start {
            return Err(format!("the writer of lane {lane} put on lane {other}: {refused:?}"));
        }
        Ok((Runner::new(media, pool, SEED, cross_chains, Some(lane))?, rec))
    }));
    let mut runner = match opened {
        Ok(Ok((runner, rec))) => {
            let _ = replies.send(Ok(Reply::Opened(rec)));
            runner
        }
        Ok(Err(e)) => return drop(replies.send(Err(e))),
        Err(p) => return drop(replies.send(Err(format!("open_lanes([{lane}]) panicked: {}", panic_message(&p))))),
    };
    for Cmd(i, op) in cmds {
        let (op, cut, pause) = match op {
            Op::Crash { events, op } => (*op, Some(events), None),
            Op::Paused { events, op, .. } => (*op, None, Some(events)),
            op => (op, None, None),
        };
        let start = media.point();
        if let Some(k) = pause {
            tap.pause_at.set(start.saturating_add(k));
        }
        // What the op will issue, in case it is cut (a cut op issues nothing else).
        let intent = match cut.map(|_| catch_unwind(AssertUnwindSafe(|| runner.intent(i, &op)))) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(is))) => Some(Issued { start, ..is }),
            Some(Err(p)) => return drop(replies.send(Err(format!("op {i} panicked: {}", panic_message(&p))))),
        };
        if let Some(k) = cut {
            tap.stop_at.set(start.saturating_add(k));
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut issued = Vec::new();
            runner.step(i, &op, &mut issued).map(|()| issued)
        }));
        let died = media.point();
        tap.pause_at.set(usize::MAX);
        // The kernel's entry on the dying process's CPU drains its write-combining
        // buffers: its pending NT stores reach the persistence domain (and are visible
        // to all: a dead process's stores are in memory, drained or not).
        let drain_pending = || {
            if drain {
                media.fence()
            }
            tap.unfenced.lock().unwrap()[tap.me].clear();
        };
        let reply = match r {
            Ok(Ok(issued)) if cut.is_none() => Ok(Reply::Ran { issued, died: None }),
            // The op ended before the cut: the process dies right after it.
            Ok(Ok(issued)) => {
                drain_pending();
                Ok(Reply::Ran { issued, died: Some(died) })
            }
            Ok(Err(e)) => Err(e),
            Err(p) if p.is::<Killed>() => {
                drain_pending();
                Ok(Reply::Ran { issued: intent.into_iter().collect(), died: Some(died) })
            }
            Err(p) => Err(format!("op {i} panicked: {}", panic_message(&p))),
        };
        let dead = !matches!(reply, Ok(Reply::Ran { died: None, .. }));
        let _ = replies.send(reply);
        if dead {
            // A dead process runs no more of its code (not even its pool's drop).
            std::mem::forget(runner);
            return;
        }
    }
}

/// A dead writer's cut op, decided by what the next writer of its lane recovered
/// (`rec`): whole, it happened (acknowledged when it was drained: `durable_at`, if it
/// was), absent, it never will (its objects, close or join dropped; a reclaim released
/// what the recovery no longer holds). Torn is a violation.
fn decide(is: &mut Issued, rec: &Recovered, durable_at: Option<usize>) -> Result<(), String> {
    let reclaim = is.objects.is_empty() && !is.close && !is.detach && !is.join;
    let holds = |lane: u32, n: &[u8], v: u64| rec.objects.iter().find(|o| o.2 == lane && o.0 == n && o.1 == v);
    if !is.objects.is_empty() {
        let whole = is.objects.iter().filter(|(n, v, b)| holds(is.lane, n, *v).is_some_and(|o| o.3 == *b)).count();
        match whole {
            0 => is.objects.clear(),
            n if n == is.objects.len() => is.ack = durable_at,
            n => {
                return Err(format!(
                    "the dead writer's op {} is torn: the next writer of lane {} recovered {n} of its {} objects",
                    is.op,
                    is.lane,
                    is.objects.len()
                ))
            }
        }
    }
    if is.close {
        match rec.closed.contains(&is.lane) {
            true => is.ack = durable_at,
            false => is.close = false,
        }
    }
    if is.detach {
        match rec.detached.contains(&is.lane) {
            true => is.ack = durable_at,
            false => is.detach = false,
        }
    }
    if is.join {
        match rec.joined.contains(&is.lane) {
            true => is.ack = durable_at,
            false => is.join = false,
        }
    }
    if reclaim {
        // A reclaim: what the next writer no longer holds was released.
        is.released.retain(|(l, n, v)| holds(*l, n, *v).is_none());
        is.ack = durable_at;
    }
    Ok(())
}

/// An oracle's verdict on a recovery made with no crash: the point it names is where
/// the recovery ran, not a crash.
fn no_crash(e: &str) -> String {
    e.replace("(crash at ", "(recovered at ")
}

/// Run a workload of writer processes ([`Writers::Processes`]) on a fresh recording
/// media.
pub(crate) fn run(w: &Workload, drain: bool) -> Result<Trace, String> {
    if !w.setup.lane_names || w.setup.stale {
        return Err("writer processes need a fresh pool with lane names".into());
    }
    let media = SimMedia::from_bytes(&vec![0u8; w.setup.media_len()]);
    drop(Pool::format(&media, options(&w.setup, 0x600D), HeapMemory::new()).map_err(|e| e.to_string())?);
    let format_end = media.point();
    let (mut issued, mut spans, mut check_from) = (Vec::new(), Vec::new(), None);
    let cross = w.setup.cross_chains;
    let unfenced: Mutex<Unfenced> = Mutex::new(vec![HashMap::new(); PROCESSES as usize]);
    std::thread::scope(|s| -> Result<(), String> {
        let spawn = |lane| Process::start(s, &media, &unfenced, lane, cross, drain);
        let mut procs = Vec::new();
        for lane in 0..PROCESSES {
            procs.push(Some(spawn(lane)?.0));
        }
        // Per lane, after its writer died: its cut op (in `issued`), if it issued one,
        // and the trace position after the death (its pending stores drained).
        let mut dead: Vec<Option<(Option<usize>, usize)>> = vec![None; PROCESSES as usize];
        for (i, op) in w.ops.iter().enumerate() {
            let start = media.point();
            let lane = op.lane().filter(|&l| l < PROCESSES).ok_or_else(|| format!("op {i}: {op:?} is no process's"))?;
            let l = lane as usize;
            if let Op::Takeover { .. } = op {
                if let Some(p) = procs[l].take() {
                    p.stop();
                }
                // A recovery of the media as the new process will see it.
                let before = recover_all(Tap::viewer(&media, l, &unfenced))
                    .map_err(|e| format!("op {i}: before the takeover: {e}"))?;
                let (p, rec) = spawn(lane).map_err(|e| format!("op {i}: takeover: {e}"))?;
                if rec != before {
                    return Err(format!("op {i}: the new writer of lane {lane} recovered other than a recovery"));
                }
                // A process crash, no power loss: the contract holds at once.
                oracle(&issued, start, &Recovered::default(), &rec)
                    .map_err(|e| format!("op {i}: the new writer of lane {lane} recovered: {}", no_crash(&e)))?;
                if let Some((Some(cut), drained)) = dead[l].take() {
                    decide(&mut issued[cut], &rec, drain.then_some(drained))?;
                }
                procs[l] = Some(p);
            } else {
                let p = procs[l].as_ref().ok_or_else(|| format!("op {i}: the writer of lane {lane} is dead"))?;
                let (out, died) = match op {
                    Op::Paused { meanwhile, .. } => {
                        p.send(i, op)?;
                        let first = p.reply(i)?;
                        // Meanwhile (or after, if the op ended first), the others run.
                        for (j, m) in meanwhile.iter().enumerate() {
                            let other = m.lane().filter(|&o| o < PROCESSES && o != lane);
                            let q = match (m, other) {
                                (Op::Takeover { .. } | Op::Crash { .. } | Op::Paused { .. }, _) | (_, None) => None,
                                (_, Some(o)) => procs[o as usize].as_ref(),
                            };
                            let q = q.ok_or_else(|| format!("op {i}: {m:?} cannot run meanwhile"))?;
                            // Its own op number (payloads differ by it).
                            let (out, _) = q.run(1000 * (i + 1) + j, m)?;
                            for read in out.iter().filter(|is| !is.reads.is_empty()) {
                                check_reads(&issued, read)?;
                            }
                            issued.extend(out);
                        }
                        let last = match first {
                            Reply::Paused => {
                                p.resume.send(()).map_err(|_| format!("op {i}: the paused process is gone"))?;
                                p.reply(i)?
                            }
                            r => r,
                        };
                        match last {
                            Reply::Ran { issued, died } => (issued, died),
                            _ => return Err(format!("op {i}: paused twice")),
                        }
                    }
                    op => p.run(i, op)?,
                };
                if let Some(at) = died {
                    let cut = out.iter().position(|is| is.ack.is_none()).map(|k| issued.len() + k);
                    dead[l] = Some((cut, media.point()));
                    check_from = Some(check_from.unwrap_or(at).min(at));
                    if let Some(p) = procs[l].take() {
                        p.stop();
                    }
                }
                for read in out.iter().filter(|is| !is.reads.is_empty()) {
                    check_reads(&issued, read)?;
                }
                issued.extend(out);
            }
            spans.push((start, media.point()));
            // No crash: a recovery now holds every acknowledged op (between ops nothing
            // is left unfenced, or hidden from anyone).
            let now = recover_all(&media).map_err(|e| format!("after op {i}, no crash: {e}"))?;
            oracle(&issued, media.point(), &Recovered::default(), &now)
                .map_err(|e| format!("after op {i}, no crash: {}", no_crash(&e)))?;
        }
        Ok(())
    })?;
    let check_from = check_from.unwrap_or(format_end);
    Ok(Trace { media, format_end, check_from, issued, setup: w.setup.clone(), spans })
}

/// Where to kill (or pause) the process running op `at` of `ops` (run on `setup` up to
/// it): as it starts (between operations), and at each of its fences, halfway through
/// the stores before it (a torn write) and just before it (every store issued, none
/// fenced). Counted in the op's events.
fn cut_points(setup: &Setup, ops: &[Op], at: usize) -> Vec<usize> {
    let w = Workload { id: "cut points".into(), setup: setup.clone(), ops: ops[..=at].to_vec() };
    let t = match setup.writers {
        Writers::One => run_one(&w),
        Writers::Processes { drain } => run(&w, drain),
    };
    let Ok(t) = t else { return vec![0] };
    let (start, end) = t.spans[at];
    let mut out = vec![0];
    let mut after_fence = 0;
    for (k, e) in t.media.events()[start..end].iter().enumerate() {
        if let Event::Fence { .. } = e {
            out.extend([after_fence + (k - after_fence) / 2, k]);
            after_fence = k + 1;
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn put(lane: u32, size: usize) -> Op {
    Op::Put { lane, size }
}

/// The setup of both families: lane names, 4 KiB segments (a 1,500-byte put fills
/// half of one, 2,500 most of one: both writers claim often, in turn), 16 of them.
fn setup() -> Setup {
    Setup { lane_names: true, writers: Writers::Processes { drain: true }, segments: 16, ..Setup::small() }
}

/// The `two-writers` family: two writer processes (A: lane 0, B: lane 1) in turn, their
/// stores one trace, crashed by a power loss at every fence point; recovery of the
/// whole pool must keep both writers' acknowledged operations.
fn two_writers(sealed: bool, name: &'static str, what: &'static str) -> Family {
    // Sealed units (payload checksums on: one fence each, the newest verified whole by
    // readers and refreshes) or two-fence units.
    let setup = || Setup { payload_checksum: sealed, ..setup() };
    let a = |k: usize| match k % 8 {
        0 => put(0, 1500),
        1 => Op::Batch { lane: 0, sizes: vec![1200, 900, 64] },
        2 => put(0, 5000), // a span of 2 segments
        3 => Op::ReclaimBy { lane: 0, keep: 1 },
        4 => Op::Close { lane: 0 },
        5 => Op::Refresh { lane: 0 },
        6 => Op::Delta { lane: 0, size: 1000, changes: vec![(10, 5)] },
        _ => Op::Takeover { lane: 0 }, // a clean restart of A
    };
    let b = |k: usize| match k % 8 {
        0 => put(1, 2500),
        1 => Op::Vectored { lane: 1, sizes: vec![1500, 7, 900] },
        2 => put(1, 9000), // a span of 3 segments
        3 => Op::ReclaimBy { lane: 1, keep: 1 },
        4 => Op::Join { lane: 1 },
        5 => Op::Refresh { lane: 1 },
        6 => Op::Batch { lane: 1, sizes: vec![300, 2000] },
        _ => Op::Takeover { lane: 1 },
    };
    let mut seqs = Vec::new();
    for ka in 0..8 {
        for kb in 0..8 {
            seqs.push(vec![a(0), b(0), a(ka), b(kb), a(0), b(0), a(ka + 3), b(kb + 5), a(0), b(0)]);
        }
    }
    let mut ws: Vec<(Setup, Vec<Op>)> = seqs.into_iter().map(|ops| (setup(), ops)).collect();
    // A full pool: a writer goes on only into segments the other's reclaim released.
    let small = Setup { segments: 6, ..setup() };
    let r = |lane| Op::ReclaimBy { lane, keep: 1 };
    for first in [0, 1] {
        let (x, y) = (first, 1 - first);
        ws.push((
            small.clone(),
            vec![put(x, 2500), put(y, 2500), put(x, 2500), put(y, 2500), put(x, 2500), put(y, 2500), put(x, 2500)],
        ));
        ws.push((
            small.clone(),
            vec![
                put(x, 2500),
                put(y, 2500),
                put(x, 2500),
                put(y, 2500),
                put(x, 2500),
                r(x),
                put(y, 2500),
                put(y, 2500),
            ],
        ));
        ws.push((
            small.clone(),
            vec![put(x, 2500), put(x, 2500), put(y, 5000), put(x, 2500), r(x), put(y, 5000), r(y), put(x, 5000)],
        ));
    }
    // A writer refreshing again after the other appended to its current segment (a
    // catch-up walks on from that lane's tail), then into its next one.
    let refresh = |lane| Op::Refresh { lane };
    ws.push((
        setup(),
        vec![put(0, 1500), refresh(1), put(0, 1500), refresh(1), put(1, 2500), put(0, 1500), refresh(1), put(0, 300)],
    ));
    ws.push((
        setup(),
        vec![
            put(1, 2500),
            put(0, 300),
            refresh(0),
            Op::Batch { lane: 1, sizes: vec![300, 200] },
            refresh(0),
            Op::Close { lane: 1 },
            refresh(0),
            put(0, 300),
        ],
    ));
    // One writer paused inside an op (at each of its fences; never holding the claim
    // lock) while the other claims, refreshes, reclaims: the paused one's unfenced
    // stores are not yet visible to it.
    let paused: Vec<(Vec<Op>, usize, Vec<Op>)> = vec![
        // A's claim (its third put) and B's, in the middle of each other.
        (
            vec![put(0, 1500), put(1, 2500), put(0, 1500), put(0, 1500), put(1, 2500), put(0, 1500)],
            3,
            vec![put(1, 2500), refresh(1)],
        ),
        // A's span of 2 segments, B's span of 3 meanwhile.
        (vec![put(0, 100), put(1, 2500), put(0, 5000), put(0, 1500), put(1, 1500)], 2, vec![put(1, 9000), refresh(1)]),
        // B's claiming batch; A claims, closes and refreshes meanwhile.
        (
            vec![put(1, 2500), put(0, 1500), Op::Batch { lane: 1, sizes: vec![2000, 1500] }, put(0, 1500), put(1, 300)],
            2,
            vec![put(0, 1500), put(0, 1500), Op::Close { lane: 0 }, refresh(0)],
        ),
        // A's reclaim; B claims (maybe a segment A released) meanwhile.
        (
            vec![
                put(0, 1500),
                put(0, 1500),
                put(1, 2500),
                put(0, 1500),
                put(0, 1500),
                r(0),
                put(0, 1500),
                put(1, 2500),
            ],
            5,
            vec![put(1, 2500), put(1, 2500), refresh(1)],
        ),
        // A takes its lane (a claim, no unit); B's first claim meanwhile.
        (vec![Op::Join { lane: 0 }, put(0, 1500), put(1, 2500)], 0, vec![put(1, 2500), refresh(1)]),
        // A's put into its current segment, unfenced while B refreshes: B's next refresh
        // walks on from A's tail, where the unit is committed only now.
        (
            vec![put(0, 1500), put(1, 2500), refresh(1), put(0, 1500), put(0, 300), refresh(1)],
            3,
            vec![refresh(1), put(1, 2500)],
        ),
    ];
    for (ops, at, meanwhile) in paused {
        for events in cut_points(&setup(), &ops, at) {
            let mut ops = ops.clone();
            ops[at] = Op::Paused { events, op: Box::new(ops[at].clone()), meanwhile: meanwhile.clone() };
            ws.push((setup(), ops));
        }
    }
    let workloads =
        ws.into_iter().enumerate().map(|(i, (setup, ops))| Workload { id: format!("{name}/{i}"), setup, ops });
    Family { name, what, workloads: workloads.collect(), all_points: false, then: vec![], in_format: false }
}

/// The `process-crash` family: a writer process dies (between operations, or inside
/// one at each of its fences), the other goes on (claiming segments), a new process
/// takes the dead one's lane over and goes on too; a power loss at every fence point
/// from the death on. The takeover's recovery is held to the contract at once (no power
/// loss), decides the cut op (whole or absent, never torn), and continues the lane's
/// versions; every acknowledged op survives every later crash.
fn process_crash(sealed: bool, name: &'static str, what: &'static str) -> Family {
    let setup = || Setup { payload_checksum: sealed, ..setup() };
    let t = |lane| Op::Takeover { lane };
    let r = |lane| Op::ReclaimBy { lane, keep: 1 };
    // (ops, the index of the op that is cut)
    let scenarios: Vec<(Vec<Op>, usize)> = vec![
        // A dies in a put that claims a segment; B claims twice before A' takes over.
        (
            vec![
                put(0, 1500),
                put(1, 2500),
                put(0, 1500),
                put(0, 1500),
                put(1, 2500),
                put(1, 2500),
                t(0),
                put(0, 1500),
                put(1, 2500),
                put(0, 1500),
                Op::Refresh { lane: 1 },
            ],
            3,
        ),
        // A dies in a put into its current segment.
        (vec![put(0, 1500), put(1, 2500), put(0, 1500), put(1, 1500), t(0), put(0, 1500), put(1, 2500)], 2),
        // A dies in a batch (a name twice in it).
        (
            vec![
                put(0, 1500),
                put(1, 2500),
                Op::Batch { lane: 0, sizes: vec![1200, 900, 64] },
                put(1, 9000),
                t(0),
                put(0, 1500),
                Op::Batch { lane: 0, sizes: vec![300, 9] },
                put(1, 2500),
            ],
            2,
        ),
        // A dies in a span of 2 segments; B claims 2 and 3.
        (
            vec![put(0, 100), put(1, 2500), put(0, 5000), put(1, 2500), put(1, 5000), t(0), put(0, 5000), put(1, 2500)],
            2,
        ),
        // A dies in a reclaim while B has data; B claims what it may have released.
        (
            vec![
                put(0, 1500),
                put(0, 1500),
                put(1, 2500),
                put(0, 1500),
                put(0, 1500),
                r(0),
                put(1, 2500),
                put(1, 2500),
                t(0),
                put(0, 1500),
                put(0, 1500),
                r(0),
                put(1, 2500),
            ],
            5,
        ),
        // A dies in a close.
        (vec![put(0, 1500), put(1, 2500), Op::Close { lane: 0 }, put(1, 2500), t(0), put(0, 1500), put(1, 2500)], 2),
        // A dies in a delta put.
        (
            vec![
                Op::Delta { lane: 0, size: 1000, changes: vec![(10, 5)] },
                put(1, 2500),
                Op::Delta { lane: 0, size: 1000, changes: vec![(100, 1), (700, 130)] },
                put(1, 2500),
                t(0),
                Op::Delta { lane: 0, size: 1000, changes: vec![(0, 8)] },
                put(0, 1500),
            ],
            2,
        ),
        // A dies taking its lane (a claim, no unit): its first op.
        (vec![put(1, 2500), Op::Join { lane: 0 }, put(1, 2500), t(0), put(0, 1500), put(1, 2500)], 1),
        // B dies in a put that claims; A goes on into a span; B' takes over.
        (
            vec![
                put(0, 1500),
                put(1, 2500),
                put(0, 1500),
                put(1, 2500),
                put(0, 1500),
                put(0, 5000),
                t(1),
                put(1, 2500),
                put(0, 1500),
                Op::Refresh { lane: 0 },
            ],
            3,
        ),
        // B dies in a vectored span of 2 segments, after A's reclaim.
        (
            vec![
                put(0, 1500),
                put(0, 1500),
                put(0, 1500),
                put(1, 2500),
                r(0),
                Op::Vectored { lane: 1, sizes: vec![4000, 7, 1500] },
                put(0, 2500),
                put(0, 2500),
                t(1),
                put(1, 1500),
                put(0, 1500),
            ],
            5,
        ),
    ];
    let mut workloads = Vec::new();
    for (ops, at) in scenarios {
        let setup = setup();
        for events in cut_points(&setup, &ops, at) {
            let mut ops = ops.clone();
            ops[at] = Op::Crash { events, op: Box::new(ops[at].clone()) };
            workloads.push(Workload { id: format!("{name}/{}", workloads.len()), setup: setup.clone(), ops });
        }
    }
    // Both writers die in turn, between operations, and are taken over in turn.
    let dies = |op: Op| Op::Crash { events: usize::MAX, op: Box::new(op) };
    let ops = vec![
        put(0, 1500),
        dies(put(1, 2500)),
        put(0, 1500),
        put(0, 1500),
        t(1),
        dies(put(0, 1500)),
        put(1, 2500),
        t(0),
        put(0, 1500),
        put(1, 2500),
    ];
    workloads.push(Workload { id: format!("{name}/{}", workloads.len()), setup: setup(), ops });
    Family { name, what, workloads, all_points: false, then: vec![], in_format: false }
}

/// The families of writer processes.
pub(crate) fn families() -> Vec<Family> {
    let two = two_writers(
        false,
        "two-writers",
        "two writer processes, in turn and paused inside an op (claims, spans, batches, reclaims, closes, refreshes, restarts)",
    );
    let sealed = two_writers(true, "sealed-processes", "the same with sealed units (a refresh meets units in flight)");
    let two2 = depth2(
        &two,
        "two-writers2",
        "two writer processes, crash, then the pool's one writer puts on both lanes and reclaims",
    );
    let crash = process_crash(
        false,
        "process-crash",
        "a writer process dies (inside an op at each fence), the other goes on, a new one takes over",
    );
    let sealed_crash = process_crash(true, "sealed-process-crash", "the same with sealed units");
    vec![two, two2, sealed, procs4(), crash, sealed_crash, cross_reads()]
}

/// Depth 2 of writer processes: every eighth workload of `of`, crashed at every point,
/// each image recovered by the pool's one writer (`Pool::open`: both lanes, the open's
/// repair of what either process released) which puts on both lanes, reclaims and puts
/// again, crashed at every point again.
fn depth2(of: &Family, name: &'static str, what: &'static str) -> Family {
    let workloads = of.workloads.iter().step_by(8).enumerate();
    Family {
        name,
        what,
        workloads: workloads.map(|(i, w)| Workload { id: format!("{name}/{i}"), ..w.clone() }).collect(),
        all_points: false,
        then: vec![vec![put(0, 77), put(1, 1500), Op::Reclaim { keep: 1 }, put(0, 2500)]],
        in_format: false,
    }
}

/// The `cross-reads` family: writer A reads what it knows of B's lane (and B its own)
/// after B's reclaim released those segments and a put (B's or A's) reused them, with
/// no refresh between, and while B's put into a reused segment is paused at each of its
/// fences: every read gives the bytes put under that name and version, or `NotFound`.
fn cross_reads() -> Family {
    let (read, refresh, r) =
        (|lane| Op::Read { lane }, |lane| Op::Refresh { lane }, |lane| Op::ReclaimBy { lane, keep: 1 });
    let tagged = |lane, size| Op::Tagged { lane, size, meta: 40, gap: 3 };
    let small = Setup { segments: 8, ..setup() };
    let mut ws: Vec<Vec<Op>> = Vec::new();
    let mut paused = Vec::new();
    // One segment per put, spans of 2 and of 3 segments, and puts with metadata at
    // explicit versions.
    for b in [put(1, 2500), put(1, 5000), put(1, 9000), tagged(1, 2500)] {
        let learn = vec![b.clone(), b.clone(), refresh(0), read(0)];
        // B reuses: A reads at each step, then refreshes and reads again.
        let mut ops = learn.clone();
        ops.extend([r(1), read(0), read(1), b.clone(), read(0), b.clone(), read(0), refresh(0), read(0)]);
        ws.push(ops);
        // A reuses what B released.
        let mut ops = learn.clone();
        ops.extend([r(1), put(0, 2500), read(0), put(0, 5000), read(0), read(1), refresh(0), read(0)]);
        ws.push(ops);
        // B's put into a segment it released, paused while A reads.
        let mut ops = learn;
        ops.extend([r(1), b.clone(), read(0), refresh(0), read(0)]);
        paused.push(ops);
    }
    for ops in paused {
        let at = 5;
        for events in cut_points(&small, &ops, at) {
            let mut ops = ops.clone();
            ops[at] = Op::Paused { events, op: Box::new(ops[at].clone()), meanwhile: vec![read(0)] };
            ws.push(ops);
        }
    }
    let workloads = ws.into_iter().enumerate().map(|(i, ops)| Workload {
        id: format!("cross-reads/{i}"),
        setup: small.clone(),
        ops,
    });
    Family {
        name: "cross-reads",
        what:
            "a writer process reads the other's lane after its segments were released and reused (and while they are)",
        workloads: workloads.collect(),
        all_points: false,
        then: vec![],
        in_format: false,
    }
}

/// The `procs4` family: every sequence of 1-4 operations of two writer processes, drawn
/// from puts, spans of 2 and 3 segments, reclaims, a refresh and a clean restart.
fn procs4() -> Family {
    let kind = |k: usize, _pos: usize| match k {
        0 => put(0, 1500),
        1 => put(1, 2500),
        2 => put(0, 5000),
        3 => put(1, 9000),
        4 => Op::ReclaimBy { lane: 0, keep: 1 },
        5 => Op::ReclaimBy { lane: 1, keep: 1 },
        6 => Op::Refresh { lane: 0 },
        _ => Op::Takeover { lane: 1 },
    };
    let workloads = every_sequence(8, 4, kind).into_iter().enumerate().map(|(i, ops)| Workload {
        id: format!("procs4/{i}"),
        setup: setup(),
        ops,
    });
    Family {
        name: "procs4",
        what: "every sequence of 1-4 ops of two writer processes (puts, spans, reclaims, a refresh, a restart)",
        workloads: workloads.collect(),
        all_points: false,
        then: vec![],
        in_format: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unfenced_nt_store_is_hidden_from_the_other_process_until_its_fence() {
        let media = SimMedia::from_bytes(&[0u8; 128]);
        let unfenced = Mutex::new(vec![HashMap::new(); 2]);
        let (a, b) = (Tap::viewer(&media, 0, &unfenced), Tap::viewer(&media, 1, &unfenced));
        a.store_nt(8, &[7u8; 16]);
        let mut seen = [0u8; 24];
        b.read(0, &mut seen);
        assert_eq!(seen, [0u8; 24], "B sees A's unfenced stores");
        assert_eq!(b.load_word(16), 0);
        a.read(0, &mut seen);
        assert_eq!(&seen[8..], &[7u8; 16], "A sees its own stores");
        // Cached stores are visible at once; A's fence makes its NT stores visible.
        a.store(40, &[1, 2]);
        assert_eq!(b.load_word(40), 0x0201);
        a.fence();
        assert_eq!(b.load_word(16), u64::from_le_bytes([7; 8]));
    }

    #[test]
    fn a_killed_process_stops_inside_a_wide_store_at_a_word() {
        let media = SimMedia::from_bytes(&[0u8; 128]);
        let unfenced = Mutex::new(vec![HashMap::new(); 2]);
        let a = Tap::viewer(&media, 0, &unfenced);
        a.stop_at.set(3);
        let r = catch_unwind(AssertUnwindSafe(|| a.store_nt(0, &[9u8; 40])));
        assert!(r.is_err_and(|p| p.is::<Killed>()));
        assert_eq!(media.point(), 3);
        assert_eq!(media.volatile_bytes()[..32], [[9u8; 24], [0u8; 24]].concat()[..32]);
        assert!(catch_unwind(AssertUnwindSafe(|| a.fence())).is_err(), "a dead process fences no more");
        assert_eq!(media.point(), 3);
    }

    #[test]
    fn a_cut_op_is_whole_or_absent_never_torn() {
        let objects = vec![(b"n0".to_vec(), 2, vec![1u8]), (b"n1".to_vec(), 1, vec![2u8])];
        let cut = Issued { op: 3, lane: 0, start: 10, objects, ..Default::default() };
        let rec = |objs: &[(&[u8], u64, u8)]| {
            Recovered::of(objs.iter().map(|(n, v, b)| (n.to_vec(), *v, 0, vec![*b])).collect())
        };
        let mut is = cut.clone();
        decide(&mut is, &rec(&[(b"n0", 1, 0), (b"n0", 2, 1), (b"n1", 1, 2)]), Some(50)).unwrap();
        assert_eq!((is.ack, is.objects.len()), (Some(50), 2));
        let mut is = cut.clone();
        decide(&mut is, &rec(&[(b"n0", 1, 0)]), Some(50)).unwrap();
        assert_eq!((is.ack, is.objects.len()), (None, 0));
        let mut is = cut.clone();
        assert!(decide(&mut is, &rec(&[(b"n0", 2, 1)]), Some(50)).unwrap_err().contains("torn"));
        // Without a drain the dead writer's stores never become durable: never owed.
        let mut is = cut;
        decide(&mut is, &rec(&[(b"n0", 2, 1), (b"n1", 1, 2)]), None).unwrap();
        assert_eq!((is.ack, is.objects.len()), (None, 2));
    }
}
