//! The crash state maker against the first one (kept here as the reference): a crash
//! state of words and groups, built word by word. On random traces of NT and cached
//! stores, flushes and fences of two threads, over fixed and undecided bases (a crash
//! state, some of its words observed), both must give the same state at every point.

use nvs_sim::state::{dedup, Group};
use nvs_sim::{crash_state, Cell, Event, Recording, State};
use std::collections::HashMap;

/// The reference's state: one cell per word.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RefState {
    cells: Vec<Cell>,
    groups: Vec<Group>,
}

impl RefState {
    fn of(s: &State) -> RefState {
        RefState {
            cells: (0..s.words()).map(|w| s.cell(w)).collect(),
            groups: (0..s.groups_len() as u32).map(|g| s.group(g).clone()).collect(),
        }
    }

    fn candidates(&self, w: usize) -> Vec<u64> {
        match &self.cells[w] {
            Cell::Fixed(v) => vec![*v],
            Cell::Open(vs) => vs.to_vec(),
            Cell::Grouped { group, slot, nt } => {
                let g = &self.groups[*group as usize];
                let mut out = match &g.durable[*slot as usize] {
                    Cell::Fixed(v) => vec![*v],
                    Cell::Open(vs) => vs.to_vec(),
                    Cell::Grouped { .. } => unreachable!(),
                };
                out.extend(g.cached.iter().filter(|(s, _)| s == slot).map(|(_, v)| *v));
                out.extend(nt.iter().copied());
                dedup(out)
            }
        }
    }

    fn flat(&self, w: usize) -> Cell {
        cell_of(self.candidates(w))
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

fn reference(base: &RefState, events: &[Event], crash: usize) -> RefState {
    let events = &events[..crash.min(events.len())];
    let words = base.cells.len();
    // Last fence of each thread, and how far each line's flushes reach durably.
    let mut last_fence: Vec<Option<usize>> = Vec::new();
    for (i, e) in events.iter().enumerate() {
        if let Event::Fence { thread } = *e {
            let t = thread as usize;
            if last_fence.len() <= t {
                last_fence.resize(t + 1, None);
            }
            last_fence[t] = Some(i);
        }
    }
    let fenced_after = |thread: u32, i: usize| matches!(last_fence.get(thread as usize), Some(Some(f)) if *f > i);
    let mut flushed_upto: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
    for (i, e) in events.iter().enumerate() {
        if let Event::Flush { thread, line } = *e {
            if fenced_after(thread, i) {
                flushed_upto.insert(line, i);
            }
        }
    }
    // Writes per word, in order.
    let mut writes: std::collections::BTreeMap<u32, Vec<(usize, u64, bool, u32)>> = Default::default();
    for (i, e) in events.iter().enumerate() {
        if let Event::Store { thread, word, value, nt } = *e {
            assert!((word as usize) < words, "store outside the media");
            writes.entry(word).or_default().push((i, value, nt, thread));
        }
    }
    let mut out = RefState { cells: Vec::with_capacity(words), groups: Vec::new() };
    let touched_lines: std::collections::BTreeSet<u32> = writes.keys().map(|w| w / 8).collect();
    // Start from the base; base groups survive only on lines this trace did not touch.
    let mut group_map = std::collections::HashMap::new();
    for w in 0..words {
        let cell = match &base.cells[w] {
            Cell::Grouped { group, slot, nt } if !touched_lines.contains(&((w / 8) as u32)) => {
                let next = out.groups.len() as u32;
                let g = *group_map.entry(*group).or_insert_with(|| {
                    out.groups.push(base.groups[*group as usize].clone());
                    next
                });
                Cell::Grouped { group: g, slot: *slot, nt: nt.clone() }
            }
            Cell::Grouped { .. } => base.flat(w),
            c => c.clone(),
        };
        out.cells.push(cell);
    }
    // Each written word: durable value, pending NT values, pending cached stores by line.
    let mut line_cached: std::collections::BTreeMap<u32, Vec<(usize, u8, u64)>> = Default::default();
    let mut pending_nt: std::collections::HashMap<u32, Vec<u64>> = Default::default();
    for (&w, ws) in &writes {
        let line = w / 8;
        let durable_at = ws.iter().rposition(|&(i, _, nt, thread)| {
            if nt {
                fenced_after(thread, i)
            } else {
                matches!(flushed_upto.get(&line), Some(&f) if f > i)
            }
        });
        let durable = match durable_at {
            Some(d) => Cell::Fixed(ws[d].1),
            None => out.cells[w as usize].clone(),
        };
        let after = &ws[durable_at.map_or(0, |d| d + 1)..];
        let nts: Vec<u64> = after.iter().filter(|x| x.2).map(|x| x.1).collect();
        for &(i, v, nt, _) in after {
            if !nt {
                line_cached.entry(line).or_default().push((i, (w % 8) as u8, v));
            }
        }
        out.cells[w as usize] = durable;
        if !nts.is_empty() {
            pending_nt.insert(w, nts);
        }
    }
    // Lines with pending cached stores become groups; other words merge their NT values.
    for (&w, nts) in &pending_nt {
        if line_cached.contains_key(&(w / 8)) {
            continue;
        }
        let mut vs = match &out.cells[w as usize] {
            Cell::Fixed(v) => vec![*v],
            Cell::Open(vs) => vs.to_vec(),
            Cell::Grouped { .. } => unreachable!("touched lines hold no base groups"),
        };
        vs.extend(nts.iter().copied());
        out.cells[w as usize] = cell_of(vs);
    }
    for (line, mut cached) in line_cached {
        cached.sort_by_key(|x| x.0);
        let first = line as usize * 8;
        let durable: [Cell; 8] = std::array::from_fn(|k| match out.cells.get(first + k) {
            Some(c @ (Cell::Fixed(_) | Cell::Open(_))) => c.clone(),
            Some(Cell::Grouped { .. }) => unreachable!("touched lines hold no base groups"),
            None => Cell::Fixed(0),
        });
        let g = out.groups.len() as u32;
        out.groups.push(Group { durable, cached: cached.iter().map(|&(_, s, v)| (s, v)).collect() });
        for k in 0..8 {
            let w = first + k;
            if w < words {
                let nt = pending_nt.get(&(w as u32)).cloned().unwrap_or_default();
                out.cells[w] = Cell::Grouped { group: g, slot: k as u8, nt };
            }
        }
    }
    out
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A random trace on `words` words: stores of a few values (so candidates repeat),
/// flushes and fences, of two threads.
fn trace(rng: &mut Rng, words: u64, cached: bool) -> Vec<Event> {
    let n = rng.below(40);
    (0..n)
        .map(|_| {
            let thread = rng.below(2) as u32;
            match rng.below(10) {
                0..=3 => Event::Store { thread, word: rng.below(words) as u32, value: rng.below(4), nt: true },
                4..=5 => Event::Store { thread, word: rng.below(words) as u32, value: rng.below(4), nt: !cached },
                6..=7 => Event::Flush { thread, line: rng.below(words.div_ceil(8)) as u32 },
                _ => Event::Fence { thread },
            }
        })
        .collect()
}

#[test]
fn crash_states_match_the_reference() {
    let mut rng = Rng(0x5EED_1234_5678_9ABC);
    // States compared with groups, and with base groups carried over.
    let (mut grouped, mut carried) = (0, 0);
    // Every state seen, by digest: different states must not share one.
    let mut by_digest: HashMap<u128, State> = HashMap::new();
    for round in 0..3000 {
        let words = [8u64, 16, 20, 32][round % 4];
        let bytes: Vec<u8> = (0..words * 8).map(|_| rng.below(3) as u8).collect();
        let mut base = State::from_bytes(&bytes);
        // Stack up to two traces, each over the previous one's crash state with some
        // of its undecided words observed.
        for _ in 0..1 + rng.below(2) {
            // Some traces of NT stores only (the digest's fast path).
            let events = trace(&mut rng, words, round % 3 != 0);
            let recording = Recording::new(base.clone(), events.clone());
            let mut stepper = recording.stepper();
            for point in 0..=events.len() {
                let got = crash_state(&base, &events, point);
                assert_eq!(recording.crash_state(point), got);
                assert_eq!(stepper.crash_state(point), got, "stepped: round {round}, point {point}, {events:?}");
                assert_eq!(recording.crash_digest(point), got.digest(), "round {round}, point {point}");
                let seen = by_digest.entry(got.digest()).or_insert_with(|| got.clone());
                assert_eq!(*seen, got, "two states with one digest");
                let want = reference(&RefState::of(&base), &events, point);
                assert_eq!(RefState::of(&got), want, "round {round}, point {point}, events {events:?}");
                grouped += usize::from(got.groups_len() > 0);
                carried += usize::from(base.groups_len() > 0 && got.groups_len() > 0);
            }
            let next = crash_state(&base, &events, rng.below(events.len() as u64 + 1) as usize);
            let observed: Vec<(usize, u64)> = next
                .undecided_cells()
                .iter()
                .enumerate()
                .filter(|_| rng.below(2) == 0)
                .map(|(k, (w, _))| (k, next.candidates(*w as usize)[0]))
                .collect();
            base = next.with_fixed(observed);
            // Its digest (worked out from `next`'s) is that of the same state made anew
            // (with groups, a state made anew drops the groups no word names any more).
            if base.groups_len() == 0 {
                let anew = crash_state(&base, &[], 0);
                assert_eq!((&anew, anew.digest()), (&base, base.digest()));
            }
        }
    }
    assert!(grouped > 1000 && carried > 100, "{grouped} states with groups, {carried} over a base with groups");
    assert!(by_digest.len() > 10_000, "{} distinct states", by_digest.len());
}
