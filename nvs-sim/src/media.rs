//! The simulator's media: [`SimMedia`] records every store, flush and fence per thread
//! over a (possibly undecided) base state and keeps the volatile view the running code
//! reads; [`SimMedia::crash_state`] gives the crash state at any point of its trace.

use crate::explore::Chooser;
use crate::state::{crash_state, Cell, Event, Recording, State};
use nvs_core::Media;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

#[cfg(not(loom))]
static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);
#[cfg(not(loom))]
thread_local! {
    static THREAD: u32 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
}

/// A small id of the calling thread (fences are per thread).
///
/// Normally the OS thread's. Under `--cfg loom` it is the loom model thread's: loom runs
/// all of an execution's threads on one OS thread, so an OS thread-local would give
/// them one id and one thread's fence would make another's stores durable. A
/// `SimMedia` is then used only inside `loom::model` (as nvs-core's pool is).
pub fn thread_id() -> u32 {
    #[cfg(not(loom))]
    return THREAD.with(|t| *t);
    #[cfg(loom)]
    return loom_thread_id();
}

/// The loom model thread's index in its execution (0 for the model's main thread),
/// read once per thread from its `ThreadId` (whose `Debug` is `ThreadId(n)`; loom has
/// no other accessor). Unlike a counter in a `loom::lazy_static`, this adds no
/// synchronization to the model.
#[cfg(loom)]
fn loom_thread_id() -> u32 {
    fn parse() -> u32 {
        let id = format!("{:?}", loom::thread::current().id());
        let n = id.strip_prefix("ThreadId(").and_then(|s| s.strip_suffix(')')).and_then(|s| s.parse().ok());
        n.unwrap_or_else(|| panic!("nvs-sim: unexpected loom thread id {id:?}"))
    }
    loom::thread_local! {
        static THREAD: u32 = parse();
    }
    THREAD.with(|t| *t)
}

/// A lazily resolved view of a [`State`]: reading an undecided word asks the chooser
/// once, and the answer sticks for the rest of the run. The state is shared (one crash
/// state serves every run at its point); a view owns only its answers.
#[derive(Debug)]
pub struct View {
    state: Arc<State>,
    /// The answer for each undecided word (by its index among the undecided words).
    memo: Vec<Option<u64>>,
    group_memo: Vec<Option<usize>>,
    chooser: Chooser,
}

impl View {
    pub fn new(state: impl Into<Arc<State>>, chooser: Chooser) -> View {
        let state = state.into();
        let (undecided, groups) = (state.undecided(), state.groups_len());
        View { state, memo: vec![None; undecided], group_memo: vec![None; groups], chooser }
    }

    pub fn words(&self) -> usize {
        self.state.words()
    }

    /// Words of the state that were undecided when the view was made.
    pub fn undecided(&self) -> usize {
        self.state.undecided()
    }

    /// The value of word `w`, choosing it now if undecided.
    pub fn word(&mut self, w: usize) -> u64 {
        match self.state.undecided_index(w) {
            Some(k) => self.undecided_word(k),
            None => u64::from_le_bytes(self.state.fixed_bytes()[w * 8..w * 8 + 8].try_into().unwrap()),
        }
    }

    /// The value of the `k`th undecided word, choosing it now if not yet chosen.
    fn undecided_word(&mut self, k: usize) -> u64 {
        if let Some(v) = self.memo[k] {
            return v;
        }
        let v = match &self.state.undecided_cells()[k].1 {
            Cell::Fixed(v) => *v,
            Cell::Open(vs) => vs[self.chooser.choose(vs.len())],
            Cell::Grouped { group, slot, nt } => {
                let (g, slot) = (*group as usize, *slot);
                let grp = self.state.group(*group);
                let prefix = match self.group_memo[g] {
                    Some(p) => p,
                    None => {
                        let p = self.chooser.choose(grp.cached.len() + 1);
                        self.group_memo[g] = Some(p);
                        p
                    }
                };
                let from_cache = grp.cached[..prefix].iter().rev().find(|(s, _)| *s == slot).map(|(_, v)| *v);
                let base = match from_cache {
                    Some(v) => v,
                    None => match &grp.durable[slot as usize] {
                        Cell::Fixed(v) => *v,
                        Cell::Open(vs) => vs[self.chooser.choose(vs.len())],
                        Cell::Grouped { .. } => unreachable!(),
                    },
                };
                let mut options = vec![base];
                options.extend(nt.iter().copied());
                let options = crate::state::dedup(options);
                options[self.chooser.choose(options.len())]
            }
        };
        self.memo[k] = Some(v);
        v
    }

    /// Decide the words `ws` that are still open as one (a sealed unit's checksummed
    /// range, [`Media::sealed_range`]): one choice of two, all their newest values or
    /// all their oldest (the abstraction DESIGN.md states: a range covered by checksums
    /// verifies only with every word new, and a torn range fails whichever words are old,
    /// so one torn image stands for all). Words already decided, fixed, or in a line
    /// with pending cached stores are left as they are.
    pub fn decide_as_one(&mut self, ws: impl Iterator<Item = usize>) {
        let open: Vec<(usize, Arc<[u64]>)> = ws
            .filter_map(|w| self.state.undecided_index(w))
            .filter(|&k| self.memo[k].is_none())
            .filter_map(|k| match &self.state.undecided_cells()[k].1 {
                Cell::Open(vs) => Some((k, vs.clone())),
                _ => None,
            })
            .collect();
        if open.is_empty() {
            return;
        }
        let newest = self.chooser.choose(2) == 0;
        for (k, vs) in open {
            // Candidates are in store order (the durable value first).
            self.memo[k] = Some(if newest { vs[vs.len() - 1] } else { vs[0] });
        }
    }

    /// The state with every word observed so far fixed to what was observed.
    pub fn effective_state(&self) -> State {
        self.state.with_fixed(self.memo.iter().enumerate().filter_map(|(k, m)| m.map(|v| (k, v))))
    }

    /// Choose every undecided word now, in order (the eager explorer).
    pub fn resolve_all(&mut self) {
        for k in 0..self.memo.len() {
            self.undecided_word(k);
        }
    }

    /// Choose every word now, in order (the eager explorer), and return the bytes.
    pub fn materialize(&mut self) -> Vec<u8> {
        self.resolve_all();
        let mut out = vec![0u8; self.words() * 8];
        self.read_bytes(0, &mut out);
        out
    }

    /// Copy `dst.len()` bytes at `off`: the fixed bytes, then each undecided word in
    /// the range (in order, choosing those not chosen yet).
    fn read_bytes(&mut self, off: usize, dst: &mut [u8]) {
        let end = off.checked_add(dst.len()).filter(|&e| e <= self.words() * 8);
        assert!(end.is_some(), "nvs bug: media read {off}+{} outside {}", dst.len(), self.words() * 8);
        if dst.is_empty() {
            return;
        }
        dst.copy_from_slice(&self.state.fixed_bytes()[off..off + dst.len()]);
        for k in self.state.undecided_between(off / 8, (off + dst.len() - 1) / 8) {
            let w = self.state.undecided_cells()[k].0 as usize;
            let v = self.undecided_word(k);
            patch(dst, off, w, v);
        }
    }
}

/// Write word `w`'s value `v` into `dst` (which holds the bytes at `off`), where they
/// overlap.
fn patch(dst: &mut [u8], off: usize, w: usize, v: u64) {
    for (k, b) in v.to_le_bytes().iter().enumerate() {
        if let Some(d) = (w * 8 + k).checked_sub(off).and_then(|i| dst.get_mut(i)) {
            *d = *b;
        }
    }
}

#[derive(Debug)]
struct Inner {
    base: View,
    /// The volatile view: the latest value written in this trace per word, over the
    /// base (a base word not yet decided is zero here and listed in `unsettled`).
    bytes: Vec<u8>,
    /// Words undecided in the base that were neither read nor written yet, ascending.
    unsettled: Vec<u32>,
    events: Vec<Event>,
    /// Stores are refused (recorded as a fault) while frozen: a read-only phase.
    frozen: bool,
    stores_while_frozen: u64,
}

/// A media that records every store, flush and fence (per thread) on top of a base
/// state. Reads see the volatile view: this trace's latest writes over the base.
#[derive(Debug)]
pub struct SimMedia {
    inner: Mutex<Inner>,
    len: usize,
    /// Under loom, every fence is also a scheduling point (a Relaxed read-modify-write
    /// of this counter, which adds no synchronization): loom then interleaves the
    /// threads' units at their fences, and crash points see several threads mid-unit.
    #[cfg(loom)]
    fences: loom::sync::atomic::AtomicUsize,
}

impl SimMedia {
    /// The recorder's lock. It is held only inside one media call, which makes no
    /// loom operation, so under loom (all model threads on one OS thread, switching only
    /// at loom operations) it is never contended: blocking on it there would hang the
    /// model, so a contended lock panics instead.
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        #[cfg(loom)]
        return self.inner.try_lock().expect("nvs-sim: media lock held across a loom thread switch");
        #[cfg(not(loom))]
        return self.inner.lock().unwrap();
    }

    /// A media of these bytes (length a multiple of 8), nothing recorded yet.
    pub fn from_bytes(bytes: &[u8]) -> SimMedia {
        SimMedia::on(View::new(State::from_bytes(bytes), Chooser::default()))
    }

    /// A media over an undecided base (a crash state being recovered and written on).
    pub fn on(base: View) -> SimMedia {
        let words = base.words();
        let mut bytes = base.state.fixed_bytes().to_vec();
        let mut unsettled = Vec::new();
        for (k, (w, _)) in base.state.undecided_cells().iter().enumerate() {
            match base.memo[k] {
                Some(v) => patch(&mut bytes, 0, *w as usize, v),
                None => unsettled.push(*w),
            }
        }
        SimMedia {
            inner: Mutex::new(Inner {
                base,
                bytes,
                unsettled,
                events: Vec::new(),
                frozen: false,
                stores_while_frozen: 0,
            }),
            len: words * 8,
            #[cfg(loom)]
            fences: loom::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Number of events recorded so far (a crash point).
    pub fn point(&self) -> usize {
        self.lock().events.len()
    }

    pub fn events(&self) -> Vec<Event> {
        self.lock().events.clone()
    }

    /// The crash state if the machine had crashed after the first `point` events.
    pub fn crash_state(&self, point: usize) -> State {
        let g = self.lock();
        crash_state(&g.base.effective_state(), &g.events, point)
    }

    /// The trace so far and its base, to make the crash states of many points.
    pub fn recording(&self) -> Recording {
        let g = self.lock();
        Recording::new(g.base.effective_state(), g.events.clone())
    }

    /// Refuse stores from now on (counting them) until `thaw`: recovery must not write.
    pub fn freeze(&self) {
        self.lock().frozen = true;
    }

    /// Allow stores again; returns how many were attempted while frozen.
    pub fn thaw(&self) -> u64 {
        let mut g = self.lock();
        g.frozen = false;
        std::mem::take(&mut g.stores_while_frozen)
    }

    /// The volatile bytes (resolving undecided base words through the chooser).
    pub fn volatile_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        self.read(0, &mut out);
        out
    }

    fn store_word(g: &mut Inner, word: usize, value: u64, nt: bool) {
        if g.frozen {
            g.stores_while_frozen += 1;
            return;
        }
        g.set(word, value);
        g.events.push(Event::Store { thread: thread_id(), word: word as u32, value, nt });
    }

    fn check(&self, off: usize, len: usize) {
        let ok = matches!(off.checked_add(len), Some(e) if e <= self.len);
        assert!(ok, "nvs bug: media access {off}+{len} outside {}", self.len);
    }
}

impl Inner {
    /// Word `w` of the volatile view (a base word not yet decided is chosen now).
    fn word(&mut self, w: usize) -> u64 {
        if let Ok(i) = self.unsettled.binary_search(&(w as u32)) {
            self.unsettled.remove(i);
            let v = self.base.word(w);
            self.bytes[w * 8..w * 8 + 8].copy_from_slice(&v.to_le_bytes());
            return v;
        }
        u64::from_le_bytes(self.bytes[w * 8..w * 8 + 8].try_into().unwrap())
    }

    /// Word `w` now holds `v` in the volatile view.
    fn set(&mut self, w: usize, v: u64) {
        if let Ok(i) = self.unsettled.binary_search(&(w as u32)) {
            self.unsettled.remove(i);
        }
        self.bytes[w * 8..w * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// [`View::decide_as_one`] of the base words of `first..=last` not yet decided.
    fn settle_as_one(&mut self, first: usize, last: usize) {
        let lo = self.unsettled.partition_point(|&w| (w as usize) < first);
        let hi = self.unsettled.partition_point(|&w| (w as usize) <= last);
        if lo < hi {
            let ws: Vec<usize> = self.unsettled[lo..hi].iter().map(|&w| w as usize).collect();
            self.base.decide_as_one(ws.into_iter());
            self.settle(first, last);
        }
    }

    /// Decide, in order, the base words of `first..=last` not yet decided.
    fn settle(&mut self, first: usize, last: usize) {
        let lo = self.unsettled.partition_point(|&w| (w as usize) < first);
        let hi = self.unsettled.partition_point(|&w| (w as usize) <= last);
        if lo == hi {
            return;
        }
        for w in self.unsettled.drain(lo..hi).collect::<Vec<_>>() {
            let v = self.base.word(w as usize);
            self.bytes[w as usize * 8..w as usize * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
}

impl Media for SimMedia {
    fn len(&self) -> usize {
        self.len
    }

    fn sealed_range(&self, off: usize, len: usize) {
        self.check(off, len);
        if len > 0 {
            self.lock().settle_as_one(off / 8, (off + len - 1) / 8);
        }
    }

    fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        let mut g = self.lock();
        if dst.is_empty() {
            return;
        }
        g.settle(off / 8, (off + dst.len() - 1) / 8);
        dst.copy_from_slice(&g.bytes[off..off + dst.len()]);
    }

    fn load_word(&self, off: usize) -> u64 {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "nvs bug: unaligned word load at {off}");
        self.lock().word(off / 8)
    }

    fn store_nt(&self, off: usize, src: &[u8]) {
        let padded = src.len().next_multiple_of(8);
        self.check(off, padded);
        assert!(off.is_multiple_of(8), "nvs bug: unaligned NT store at {off}");
        let mut g = self.lock();
        for (k, chunk) in src.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            Self::store_word(&mut g, off / 8 + k, u64::from_le_bytes(w), true);
        }
    }

    fn store_word_nt(&self, off: usize, word: u64) {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "nvs bug: unaligned word store at {off}");
        let mut g = self.lock();
        Self::store_word(&mut g, off / 8, word, true);
    }

    /// One NT word store of the commit word, after checking the contract: the line's
    /// other words already hold what `line` says (so re-storing them changes nothing a
    /// crash could show). A caller that breaks it is an nvs bug, reported as a panic.
    fn store_commit_line(&self, off: usize, line: &[u8; 64]) {
        self.check(off, 64);
        assert!(off.is_multiple_of(64), "nvs bug: unaligned commit line at {off}");
        let mut g = self.lock();
        for k in 1..8 {
            let want = u64::from_le_bytes(line[k * 8..k * 8 + 8].try_into().unwrap());
            let have = g.word(off / 8 + k);
            assert_eq!(have, want, "nvs bug: the commit line at {off} changes its word {k}");
        }
        let word = u64::from_le_bytes(line[..8].try_into().unwrap());
        Self::store_word(&mut g, off / 8, word, true);
    }

    fn store(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        if src.is_empty() {
            return;
        }
        let mut g = self.lock();
        let (first, last) = (off / 8, (off + src.len() - 1) / 8);
        for w in first..=last {
            let mut bytes = g.word(w).to_le_bytes();
            for (k, b) in bytes.iter_mut().enumerate() {
                let a = w * 8 + k;
                if a >= off && a < off + src.len() {
                    *b = src[a - off];
                }
            }
            Self::store_word(&mut g, w, u64::from_le_bytes(bytes), false);
        }
    }

    fn flush(&self, off: usize, len: usize) {
        self.check(off, len);
        let mut g = self.lock();
        if g.frozen || len == 0 {
            return;
        }
        for line in off / 64..=(off + len - 1) / 64 {
            g.events.push(Event::Flush { thread: thread_id(), line: line as u32 });
        }
    }

    fn fence(&self) {
        // Before the lock: another model thread may run here.
        #[cfg(loom)]
        self.fences.fetch_add(1, loom::sync::atomic::Ordering::Relaxed);
        let mut g = self.lock();
        if g.frozen {
            return;
        }
        g.events.push(Event::Fence { thread: thread_id() });
    }
}

/// A read-only media over a crash state, resolved lazily through a chooser: what
/// recovery sees after a crash. Stores are counted (recovery must make none) and
/// otherwise ignored.
#[derive(Debug)]
pub struct CrashView {
    view: RefCell<View>,
    len: usize,
    stores: AtomicU32,
}

impl CrashView {
    pub fn new(state: impl Into<Arc<State>>, chooser: Chooser) -> CrashView {
        let state = state.into();
        let len = state.words() * 8;
        CrashView { view: RefCell::new(View::new(state, chooser)), len, stores: AtomicU32::new(0) }
    }

    /// Stores attempted on this view (recovery must make none).
    pub fn stores(&self) -> u32 {
        self.stores.load(Ordering::Relaxed)
    }

    /// Resolve every word now, in order (the eager explorer: one run per whole image).
    pub fn resolve_all(&self) {
        self.view.borrow_mut().resolve_all();
    }

    /// Undecided words of the underlying state.
    pub fn undecided(&self) -> usize {
        self.view.borrow().undecided()
    }

    /// Give back the view (its observations become the base of a continuation).
    pub fn into_view(self) -> View {
        self.view.into_inner()
    }
}

impl Media for CrashView {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, off: usize, dst: &mut [u8]) {
        self.view.borrow_mut().read_bytes(off, dst)
    }
    fn load_word(&self, off: usize) -> u64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len, "nvs bug: bad word load at {off}");
        self.view.borrow_mut().word(off / 8)
    }
    fn sealed_range(&self, off: usize, len: usize) {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len), "nvs bug: sealed range {off}+{len} outside");
        if len > 0 {
            self.view.borrow_mut().decide_as_one(off / 8..=(off + len - 1) / 8);
        }
    }
    fn store_nt(&self, _off: usize, _src: &[u8]) {
        self.stores.fetch_add(1, Ordering::Relaxed);
    }
    fn store_word_nt(&self, _off: usize, _word: u64) {
        self.stores.fetch_add(1, Ordering::Relaxed);
    }
    fn store(&self, _off: usize, _src: &[u8]) {
        self.stores.fetch_add(1, Ordering::Relaxed);
    }
    fn flush(&self, _off: usize, _len: usize) {}
    fn fence(&self) {}
}
