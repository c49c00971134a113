//! Crash states: what each 8-byte word of the media may hold after a crash.
//!
//! The model (Px86 with non-temporal stores, per thread):
//! - an NT store is durable once *its own thread* has fenced after it; until then the
//!   word may hold its last durable value or any value written to it since;
//! - a cached store is durable once a flush of its line, by some thread, is followed by
//!   that thread's fence; until then the stores to one line persist in order (a prefix
//!   of the line's pending cached stores, chosen once per line);
//! - aligned 8-byte stores are atomic; wider stores were split into words by the
//!   recorder, so they tear at word boundaries.
//!
//! A [`State`] holds one [`Cell`] per word. Words nobody could observe differently are
//! `Fixed`; the rest stay undecided until someone reads them (lazy exploration), and a
//! write of a word's existing value adds no choice (candidates are deduplicated).
//!
//! Known over-approximation: when a word has both pending NT and pending cached stores,
//! or when a crash state is built on top of an earlier crash state whose cache line was
//! undecided and is written again, the candidates are the union of everything the word
//! may hold, losing the line-order correlation. nvs's own protocol uses NT stores only,
//! so this can only make checks of cached-store mutants stricter.

use std::collections::HashMap;
use std::sync::Arc;

/// A word of a crash state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Cell {
    /// Holds this value in every crash image.
    Fixed(u64),
    /// Holds one of these (at least two, distinct) values; not yet observed. Shared:
    /// the crash states of one trace copy their undecided words often.
    Open(Arc<[u64]>),
    /// In a cache line with pending cached stores: resolved by choosing the line's
    /// persisted prefix (group `group`), then among `nt`, its pending NT values.
    Grouped { group: u32, slot: u8, nt: Vec<u64> },
}

/// A cache line with pending cached stores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Group {
    /// The line's last durable value per word (`Fixed` or `Open`).
    pub durable: [Cell; 8],
    /// Pending cached stores to the line in program order: (word in line, value).
    pub cached: Vec<(u8, u64)>,
}

/// What every word of the media may hold.
///
/// Kept as the bytes of an image plus the few undecided words: most words of a crash
/// state hold one value, so a state is one copy of the media's bytes (cheap to make,
/// compare and hash) and reading a run of fixed words is a copy of them.
#[derive(Clone, Debug, Default)]
pub struct State {
    /// Every word's value, little-endian; an undecided word's is zero here.
    bytes: Vec<u8>,
    /// The undecided words (`Open` or `Grouped`, never `Fixed`), by word, ascending.
    open: Vec<(u32, Cell)>,
    /// One bit per word, set for the undecided ones (a read of fixed words skips the
    /// search of `open`).
    mask: Vec<u64>,
    /// The groups `Grouped` cells name.
    groups: Vec<Group>,
    /// [`State::digest`], once asked (a state is shared by every run at its point).
    digest: std::sync::OnceLock<u128>,
}

impl PartialEq for State {
    fn eq(&self, other: &State) -> bool {
        (&self.bytes, &self.open, &self.groups) == (&other.bytes, &other.open, &other.groups)
    }
}

impl Eq for State {}

impl std::hash::Hash for State {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (&self.bytes, &self.open, &self.groups).hash(h)
    }
}

/// One recorded event of a trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A store of one whole word (index `word`): `nt` for non-temporal.
    Store { thread: u32, word: u32, value: u64, nt: bool },
    /// A cache-line write-back (`clwb`) of line `line`.
    Flush { thread: u32, line: u32 },
    /// `sfence`.
    Fence { thread: u32 },
}

impl State {
    /// Every word fixed to the given bytes (length a multiple of 8).
    pub fn from_bytes(bytes: &[u8]) -> State {
        assert!(bytes.len().is_multiple_of(8), "media length must be a multiple of 8");
        let mask = vec![0; (bytes.len() / 8).div_ceil(64)];
        State { bytes: bytes.to_vec(), mask, ..State::default() }
    }

    /// Number of words.
    pub fn words(&self) -> usize {
        self.bytes.len() / 8
    }

    /// Number of undecided words.
    pub fn undecided(&self) -> usize {
        self.open.len()
    }

    /// The undecided words, ascending, with what each may hold.
    pub fn undecided_cells(&self) -> &[(u32, Cell)] {
        &self.open
    }

    /// The bytes of every fixed word (undecided words read as zero here).
    pub fn fixed_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Number of groups.
    pub fn groups_len(&self) -> usize {
        self.groups.len()
    }

    /// Group `g` (of a `Grouped` cell).
    pub fn group(&self, g: u32) -> &Group {
        &self.groups[g as usize]
    }

    /// Where word `w` is among the undecided words, if it is one.
    pub fn undecided_index(&self, w: usize) -> Option<usize> {
        if self.mask[w / 64] & (1 << (w % 64)) == 0 {
            return None;
        }
        self.open.binary_search_by_key(&(w as u32), |c| c.0).ok()
    }

    /// Whether any of `first..=last` is undecided.
    fn any_undecided(&self, first: usize, last: usize) -> bool {
        (first / 64..=last / 64).any(|m| {
            let lo = if m == first / 64 { first % 64 } else { 0 };
            let hi = if m == last / 64 { last % 64 } else { 63 };
            let bits = (u64::MAX >> (63 - hi)) & (u64::MAX << lo);
            self.mask[m] & bits != 0
        })
    }

    /// The state with `mask` set from `open` (once `open` is complete).
    fn masked(mut self) -> State {
        self.mask = vec![0; self.words().div_ceil(64)];
        for (w, _) in &self.open {
            self.mask[*w as usize / 64] |= 1 << (*w % 64);
        }
        self
    }

    /// The undecided words among `first..=last`: a range of indices into
    /// [`State::undecided_cells`].
    pub fn undecided_between(&self, first: usize, last: usize) -> std::ops::Range<usize> {
        if !self.any_undecided(first, last) {
            return 0..0;
        }
        let lo = self.open.partition_point(|c| (c.0 as usize) < first);
        let hi = self.open.partition_point(|c| (c.0 as usize) <= last);
        lo..hi
    }

    /// Word `w`'s value as stored in the fixed bytes.
    fn fixed_value(&self, w: usize) -> u64 {
        u64::from_le_bytes(self.bytes[w * 8..w * 8 + 8].try_into().unwrap())
    }

    /// Word `w` as a cell.
    pub fn cell(&self, w: usize) -> Cell {
        match self.undecided_index(w) {
            Some(k) => self.open[k].1.clone(),
            None => Cell::Fixed(self.fixed_value(w)),
        }
    }

    /// The state with the given undecided words (indices into
    /// [`State::undecided_cells`]) fixed to the given values.
    pub fn with_fixed(&self, values: impl IntoIterator<Item = (usize, u64)>) -> State {
        let mut out = State { bytes: self.bytes.clone(), groups: self.groups.clone(), ..State::default() };
        let mut fixed = vec![None; self.open.len()];
        for (k, v) in values {
            fixed[k] = Some(v);
        }
        // The digest changes by the words fixed alone.
        let mut digest = self.digest();
        for ((w, c), f) in self.open.iter().zip(fixed) {
            match f {
                Some(v) => {
                    out.bytes[*w as usize * 8..*w as usize * 8 + 8].copy_from_slice(&v.to_le_bytes());
                    digest = digest.wrapping_sub(cell_digest(*w, c)).wrapping_add(fixed_digest(*w, v));
                }
                None => out.open.push((*w, c.clone())),
            }
        }
        out.digest = digest.into();
        out.masked()
    }

    /// Every value word `w` may hold (for flattening and for the eager explorer).
    pub fn candidates(&self, w: usize) -> Vec<u64> {
        match self.cell(w) {
            Cell::Fixed(v) => vec![v],
            Cell::Open(vs) => vs.to_vec(),
            Cell::Grouped { group, slot, nt } => {
                let g = &self.groups[group as usize];
                let mut out = match &g.durable[slot as usize] {
                    Cell::Fixed(v) => vec![*v],
                    Cell::Open(vs) => vs.to_vec(),
                    Cell::Grouped { .. } => unreachable!("group durable cells are never grouped"),
                };
                out.extend(g.cached.iter().filter(|(s, _)| *s == slot).map(|(_, v)| *v));
                out.extend(nt.iter().copied());
                dedup(out)
            }
        }
    }

    /// The word as an ungrouped cell (line correlation dropped).
    fn flat(&self, w: usize) -> Cell {
        cell_of(self.candidates(w))
    }
}

/// Distinct values, first occurrence first.
pub fn dedup(values: Vec<u64>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(values.len());
    for v in values {
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out
}

/// [`cell_of`] of `values`, gathered in `buf` (so only an `Open` cell allocates).
fn cell_of_distinct(buf: &mut Vec<u64>, values: impl IntoIterator<Item = u64>) -> Cell {
    buf.clear();
    for v in values {
        if !buf.contains(&v) {
            buf.push(v);
        }
    }
    match buf[..] {
        [v] => Cell::Fixed(v),
        _ => Cell::Open(buf[..].into()),
    }
}

fn cell_of(values: Vec<u64>) -> Cell {
    let vs = dedup(values);
    if vs.len() == 1 {
        Cell::Fixed(vs[0])
    } else {
        Cell::Open(vs.into())
    }
}

/// A store of a trace: (word, position in the trace, value, nt, thread).
type Write = (u32, usize, u64, bool, u32);

/// The stores of `events`, by word and then in order.
fn sorted_writes(events: &[Event]) -> Vec<Write> {
    let mut writes: Vec<Write> = events
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match *e {
            Event::Store { thread, word, value, nt } => Some((word, i, value, nt, thread)),
            _ => None,
        })
        .collect();
    writes.sort_unstable_by_key(|x| (x.0, x.1));
    writes
}

/// The crash state after `events[..crash]` ran on top of `base`.
pub fn crash_state(base: &State, events: &[Event], crash: usize) -> State {
    let crash = crash.min(events.len());
    crash_state_of(base, events, &sorted_writes(&events[..crash]), crash)
}

/// The index of each thread's last fence in `events` (by thread id).
fn last_fences(events: &[Event]) -> Vec<Option<usize>> {
    let mut last: Vec<Option<usize>> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let Event::Fence { thread } = *e {
            let t = thread as usize;
            if last.len() <= t {
                last.resize(t + 1, None);
            }
            last[t] = Some(i);
        }
    }
    last
}

/// [`crash_state`], given the trace's stores (any beyond `crash` are left out) by word
/// and then in order.
fn crash_state_of(base: &State, events: &[Event], all_writes: &[Write], crash: usize) -> State {
    let events = &events[..crash.min(events.len())];
    let words = base.words();
    // Last fence of each thread, and how far each line's flushes reach durably.
    let last_fence = last_fences(events);
    let fenced_after = |thread: u32, i: usize| matches!(last_fence.get(thread as usize), Some(Some(f)) if *f > i);
    let mut flushed_upto: HashMap<u32, usize> = HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let Event::Flush { thread, line } = *e {
            if fenced_after(thread, i) {
                flushed_upto.insert(line, i);
            }
        }
    }
    let writes: std::borrow::Cow<[Write]> = match all_writes.iter().all(|x| x.1 < events.len()) {
        true => all_writes.into(),
        false => all_writes.iter().filter(|x| x.1 < events.len()).copied().collect(),
    };
    if let Some(last) = writes.last() {
        assert!((last.0 as usize) < words, "store outside the media");
    }
    let touched = |w: u32| {
        let at = writes.partition_point(|x| x.0 < w / 8 * 8);
        writes.get(at).is_some_and(|x| x.0 / 8 == w / 8)
    };
    // A word before this trace: the base's, a group on a line this trace touched
    // flattened (base groups survive only on lines it did not touch).
    let before = |w: u32| match base.undecided_index(w as usize).map(|k| &base.open[k].1) {
        Some(Cell::Grouped { .. }) => base.flat(w as usize),
        Some(c) => c.clone(),
        None => Cell::Fixed(base.fixed_value(w as usize)),
    };
    // Base groups keep their order (by first word), ahead of this trace's lines.
    let mut out = State { bytes: base.bytes.clone(), open: Vec::with_capacity(base.open.len()), ..State::default() };
    let mut group_map = HashMap::new();
    for (w, cell) in &base.open {
        if let Cell::Grouped { group, .. } = cell {
            if !touched(*w) {
                group_map.entry(*group).or_insert_with(|| {
                    out.groups.push(base.groups[*group as usize].clone());
                    out.groups.len() as u32 - 1
                });
            }
        }
    }
    // The written words' cells, line by line: each word's durable value and pending NT
    // values; a line with pending cached stores becomes a group.
    let mut changed: Vec<(u32, Cell)> = Vec::new();
    // Per line: (word, durable, pending NT values), and the line's pending cached stores.
    let mut cells: Vec<(u32, Cell, &[Write])> = Vec::new();
    let mut cached: Vec<(usize, u8, u64)> = Vec::new();
    let mut values: Vec<u64> = Vec::new();
    for line_writes in writes.chunk_by(|a, b| a.0 / 8 == b.0 / 8) {
        let line = line_writes[0].0 / 8;
        cells.clear();
        cached.clear();
        for ws in line_writes.chunk_by(|a, b| a.0 == b.0) {
            let w = ws[0].0;
            let durable_at = ws.iter().rposition(|&(_, i, _, nt, thread)| {
                if nt {
                    fenced_after(thread, i)
                } else {
                    matches!(flushed_upto.get(&line), Some(&f) if f > i)
                }
            });
            let durable = match durable_at {
                Some(d) => Cell::Fixed(ws[d].2),
                None => before(w),
            };
            let after = &ws[durable_at.map_or(0, |d| d + 1)..];
            cached.extend(after.iter().filter(|x| !x.3).map(|&(_, i, v, _, _)| (i, (w % 8) as u8, v)));
            cells.push((w, durable, after));
        }
        if cached.is_empty() {
            // Here every pending store is an NT one.
            for (w, durable, after) in cells.drain(..) {
                let nts = after.iter().map(|x| x.2);
                let cell = match (durable, after.is_empty()) {
                    (durable, true) => durable,
                    (Cell::Fixed(v), false) => cell_of_distinct(&mut values, [v].into_iter().chain(nts)),
                    (Cell::Open(vs), false) => cell_of_distinct(&mut values, vs.iter().copied().chain(nts)),
                    (Cell::Grouped { .. }, false) => unreachable!("touched lines hold no base groups"),
                };
                changed.push((w, cell));
            }
            continue;
        }
        cached.sort_by_key(|x| x.0);
        let first = line * 8;
        let durable: [Cell; 8] = std::array::from_fn(|k| {
            let w = first + k as u32;
            if w as usize >= words {
                return Cell::Fixed(0);
            }
            match cells.iter().find(|c| c.0 == w).map_or_else(|| before(w), |c| c.1.clone()) {
                c @ (Cell::Fixed(_) | Cell::Open(_)) => c,
                Cell::Grouped { .. } => unreachable!("touched lines hold no base groups"),
            }
        });
        let g = out.groups.len() as u32;
        out.groups.push(Group { durable, cached: cached.iter().map(|&(_, s, v)| (s, v)).collect() });
        for k in 0..8 {
            let w = first + k;
            if (w as usize) < words {
                let nt = cells
                    .iter()
                    .find(|c| c.0 == w)
                    .map(|c| c.2.iter().filter(|x| x.3).map(|x| x.2).collect())
                    .unwrap_or_default();
                changed.push((w, Cell::Grouped { group: g, slot: k as u8, nt }));
            }
        }
    }
    // The base's undecided words and the changed ones, merged in word order.
    let put = |out: &mut State, w: u32, cell: Cell| match cell {
        Cell::Fixed(v) => out.bytes[w as usize * 8..w as usize * 8 + 8].copy_from_slice(&v.to_le_bytes()),
        c => {
            out.bytes[w as usize * 8..w as usize * 8 + 8].fill(0);
            out.open.push((w, c));
        }
    };
    let mut changed = changed.into_iter().peekable();
    for (w, cell) in &base.open {
        while let Some((cw, c)) = changed.next_if(|(cw, _)| cw < w) {
            put(&mut out, cw, c);
        }
        if let Some((cw, c)) = changed.next_if(|(cw, _)| cw == w) {
            put(&mut out, cw, c);
            continue;
        }
        let cell = match cell {
            Cell::Grouped { group, slot, nt } if !touched(*w) => {
                Cell::Grouped { group: group_map[group], slot: *slot, nt: nt.clone() }
            }
            Cell::Grouped { .. } => base.flat(*w as usize),
            c => c.clone(),
        };
        put(&mut out, *w, cell);
    }
    for (cw, c) in changed {
        put(&mut out, cw, c);
    }
    out.masked()
}

/// A trace and the base it ran on, from which the crash states of many points are made
/// (see `SimMedia::recording`).
#[derive(Debug)]
pub struct Recording {
    /// The base, every word observed so far fixed.
    pub base: State,
    pub events: Vec<Event>,
    /// The trace's stores, by word and then in order.
    writes: Vec<Write>,
    /// Per written word: its stores in `writes`, its cell in the base (`None`: fixed)
    /// and what that cell adds to the base's digest.
    words: Vec<(std::ops::Range<usize>, Option<usize>, u128)>,
    /// Position of the first cached store, if any.
    first_cached: Option<usize>,
    base_digest: u128,
}

impl Recording {
    pub fn new(base: State, events: Vec<Event>) -> Recording {
        let writes = sorted_writes(&events);
        let mut words = Vec::new();
        let mut at = 0;
        for ws in writes.chunk_by(|a, b| a.0 == b.0) {
            let w = ws[0].0;
            let k = base.undecided_index(w as usize);
            let term = match k {
                Some(k) => cell_digest(w, &base.open[k].1),
                None => fixed_digest(w, base.fixed_value(w as usize)),
            };
            words.push((at..at + ws.len(), k, term));
            at += ws.len();
        }
        let first_cached = writes.iter().filter(|x| !x.3).map(|x| x.1).min();
        let base_digest = base.digest();
        Recording { base, events, writes, words, first_cached, base_digest }
    }

    /// The crash state if the machine had crashed after the first `point` events.
    pub fn crash_state(&self, point: usize) -> State {
        crash_state_of(&self.base, &self.events, &self.writes, point)
    }

    /// `self.crash_state(point).digest()`, without making the state when the trace up to
    /// `point` has NT stores only and the base no groups (nvs's own protocol): then the
    /// state is the base with each written word's cell changed, and the digest (a sum
    /// over words) changes by those words alone.
    pub fn crash_digest(&self, point: usize) -> u128 {
        let point = point.min(self.events.len());
        if !self.base.groups.is_empty() || self.first_cached.is_some_and(|c| c < point) {
            return self.crash_state(point).digest();
        }
        let last_fence = last_fences(&self.events[..point]);
        let fenced_after = |thread: u32, i: usize| matches!(last_fence.get(thread as usize), Some(Some(f)) if *f > i);
        let mut d = self.base_digest;
        // What each written word may hold: its durable value (or the base's values) and
        // its pending ones, deduplicated.
        let mut vs: Vec<u64> = Vec::new();
        for (range, k, base_term) in &self.words {
            let ws = &self.writes[range.clone()];
            // A word's stores are in order: those before the point are a prefix.
            let ws = &ws[..ws.partition_point(|x| x.1 < point)];
            let Some(&(w, ..)) = ws.first() else { continue };
            let durable_at = ws.iter().rposition(|&(_, i, _, _, thread)| fenced_after(thread, i));
            vs.clear();
            match (durable_at, k.map(|k| &self.base.open[k].1)) {
                (Some(k), _) => vs.push(ws[k].2),
                (None, None) => vs.push(self.base.fixed_value(w as usize)),
                (None, Some(Cell::Open(base))) => vs.extend_from_slice(base),
                (None, Some(_)) => unreachable!("the base has no groups"),
            }
            for x in &ws[durable_at.map_or(0, |k| k + 1)..] {
                if !vs.contains(&x.2) {
                    vs.push(x.2);
                }
            }
            d = d.wrapping_sub(*base_term).wrapping_add(values_digest(w, &vs));
        }
        d
    }
}

/// The crash states of one recording at increasing points, each made from the one
/// before: [`Recording::crash_state`] reads the trace up to its point, so the states of
/// every point of a long trace cost its length squared. Stepping keeps each word's
/// durable value and its pending NT stores; past a cached store, or over a base with
/// undecided words, it makes each state whole (the same state either way).
#[derive(Debug)]
pub struct Stepper<'r> {
    rec: &'r Recording,
    /// The events applied: `events[..at]`.
    at: usize,
    /// Every word's durable value (stepping only).
    bytes: Vec<u8>,
    /// The words with stores after their durable one: those stores, in trace order, as
    /// (thread, value).
    pending: std::collections::BTreeMap<u32, Vec<(u32, u64)>>,
    /// Per thread, the words it stored since its last fence.
    touched: Vec<Vec<u32>>,
}

impl Recording {
    /// A [`Stepper`] from the start of the trace.
    pub fn stepper(&self) -> Stepper<'_> {
        Stepper {
            rec: self,
            at: 0,
            bytes: self.base.bytes.clone(),
            pending: std::collections::BTreeMap::new(),
            touched: Vec::new(),
        }
    }
}

impl Stepper<'_> {
    /// `Recording::crash_state(point)`; cheapest for points in increasing order.
    pub fn crash_state(&mut self, point: usize) -> State {
        let rec = self.rec;
        let point = point.min(rec.events.len());
        let steps = rec.base.open.is_empty() && rec.first_cached.is_none_or(|c| c >= point);
        if !steps || point < self.at {
            return rec.crash_state(point);
        }
        for e in &rec.events[self.at..point] {
            match *e {
                Event::Store { thread, word, value, .. } => {
                    self.pending.entry(word).or_default().push((thread, value));
                    let t = thread as usize;
                    if self.touched.len() <= t {
                        self.touched.resize(t + 1, Vec::new());
                    }
                    self.touched[t].push(word);
                }
                Event::Fence { thread } => {
                    let Some(words) = self.touched.get_mut(thread as usize) else { continue };
                    for w in words.drain(..) {
                        let Some(stores) = self.pending.get_mut(&w) else { continue };
                        // This thread's last store to the word is durable now, and what
                        // was stored before it is overwritten.
                        let Some(k) = stores.iter().rposition(|s| s.0 == thread) else { continue };
                        self.bytes[w as usize * 8..w as usize * 8 + 8].copy_from_slice(&stores[k].1.to_le_bytes());
                        stores.drain(..=k);
                        if stores.is_empty() {
                            self.pending.remove(&w);
                        }
                    }
                }
                Event::Flush { .. } => {}
            }
        }
        self.at = point;
        let mut out = State { bytes: self.bytes.clone(), ..State::default() };
        let mut values = Vec::new();
        for (&w, stores) in &self.pending {
            let at = w as usize * 8..w as usize * 8 + 8;
            let durable = u64::from_le_bytes(out.bytes[at.clone()].try_into().unwrap());
            if let c @ Cell::Open(_) =
                cell_of_distinct(&mut values, std::iter::once(durable).chain(stores.iter().map(|s| s.1)))
            {
                out.bytes[at].fill(0);
                out.open.push((w, c));
            }
        }
        out.masked()
    }
}

/// The splitmix64 finalizer: a bijection that mixes every input bit into every output bit.
fn mix64(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A 128-bit digest of a sequence of words: two lanes, seeded apart, each mixing every
/// word in.
fn seq_digest(seed: u64, xs: impl IntoIterator<Item = u64>) -> u128 {
    let (mut lo, mut hi) = (mix64(seed), mix64(!seed));
    for x in xs {
        lo = mix64(lo ^ x);
        hi = mix64(hi.rotate_left(23) ^ x);
    }
    ((hi as u128) << 64) | lo as u128
}

/// What one word adds to its state's digest.
fn cell_digest(w: u32, cell: &Cell) -> u128 {
    match cell {
        Cell::Fixed(v) => fixed_digest(w, *v),
        Cell::Open(vs) => open_digest(w, vs),
        Cell::Grouped { group, slot, nt } => seq_digest(
            3,
            [w as u64, *group as u64, *slot as u64, nt.len() as u64].into_iter().chain(nt.iter().copied()),
        ),
    }
}

fn fixed_digest(w: u32, v: u64) -> u128 {
    seq_digest(1, [w as u64, v])
}

fn open_digest(w: u32, vs: &[u64]) -> u128 {
    seq_digest(2, [w as u64, vs.len() as u64].into_iter().chain(vs.iter().copied()))
}

/// [`cell_digest`] of the cell that holds one of `vs` (distinct values): `Fixed` if one.
fn values_digest(w: u32, vs: &[u64]) -> u128 {
    match vs {
        [v] => fixed_digest(w, *v),
        vs => open_digest(w, vs),
    }
}

impl State {
    /// A 128-bit digest of the state: the same for equal states; for different states,
    /// different but by a chance of about 2^-128 per pair. The sum over words of a mix
    /// of (word, cell), plus the groups' (so a state that differs from another in a few
    /// words has a digest that differs by those words' terms: see
    /// [`Recording::crash_digest`]).
    pub fn digest(&self) -> u128 {
        *self.digest.get_or_init(|| self.compute_digest())
    }

    fn compute_digest(&self) -> u128 {
        let groups = self.groups.iter().flat_map(|g| {
            let durable = g.durable.iter().flat_map(|c| match c {
                Cell::Fixed(v) => vec![1, 1, *v],
                Cell::Open(vs) => [2, vs.len() as u64].into_iter().chain(vs.iter().copied()).collect(),
                Cell::Grouped { .. } => unreachable!("group durable cells are never grouped"),
            });
            let cached = g.cached.iter().flat_map(|&(s, v)| [s as u64, v]);
            [g.cached.len() as u64].into_iter().chain(durable).chain(cached).collect::<Vec<u64>>()
        });
        let mut d = seq_digest(4, [self.groups.len() as u64].into_iter().chain(groups));
        let mut open = self.open.iter().peekable();
        for w in 0..self.words() {
            let term = match open.next_if(|(ow, _)| *ow as usize == w) {
                Some((_, c)) => cell_digest(w as u32, c),
                None => fixed_digest(w as u32, self.fixed_value(w)),
            };
            d = d.wrapping_add(term);
        }
        d
    }
}

/// Crash points where a crash can leave a new set of images: just before every fence
/// and at the end (for this model, complete: between fences only pending sets grow).
pub fn fence_points(events: &[Event]) -> Vec<usize> {
    let mut pts: Vec<usize> =
        events.iter().enumerate().filter(|(_, e)| matches!(e, Event::Fence { .. })).map(|(i, _)| i).collect();
    pts.push(events.len());
    pts.dedup();
    pts
}

/// A crash after every single event (cross-checks the fence-point reduction).
pub fn all_points(events: &[Event]) -> Vec<usize> {
    (0..=events.len()).collect()
}
