//! Lazy against eager on random small traces: random programs of NT and cached stores,
//! flushes and fences on a few words and threads, a random crash point, and a random
//! data-dependent reader. The set of values the reader can observe must be the same
//! whether words are chosen when read (lazy) or all up front (eager).

use nvs_core::Media;
use nvs_sim::{crash_state, explore, CrashView, Event, State, Verdict};
use std::collections::BTreeSet;
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// (traces, lazy runs, eager runs) — or the first disagreement.
pub fn crosscheck(traces: u64, seed: u64) -> Result<(u64, u64, u64), String> {
    let mut rng = Rng(seed | 1);
    let (mut lazy_total, mut eager_total) = (0, 0);
    for t in 0..traces {
        let words = 2 + rng.below(6) as usize;
        let mut events = Vec::new();
        for _ in 0..1 + rng.below(9) {
            let thread = rng.below(2) as u32;
            events.push(match rng.below(10) {
                0..=4 => {
                    Event::Store { thread, word: rng.below(words as u64) as u32, value: 1 + rng.below(3), nt: true }
                }
                5..=6 => {
                    Event::Store { thread, word: rng.below(words as u64) as u32, value: 1 + rng.below(3), nt: false }
                }
                7 => Event::Flush { thread, line: 0 },
                _ => Event::Fence { thread },
            });
        }
        let crash = rng.below(events.len() as u64 + 1) as usize;
        let state = Arc::new(crash_state(&State::from_bytes(&vec![0u8; words * 8]), &events, crash));
        let reader_seed = rng.next();
        let read = |view: &CrashView| -> Vec<u64> {
            // A data-dependent walk: which word is read next depends on what was read.
            let mut r = Rng(reader_seed | 1);
            let mut at = r.below(words as u64) as usize;
            let mut seen = Vec::new();
            for _ in 0..1 + r.below(words as u64) {
                let v = view.load_word(at * 8);
                seen.push(at as u64 * 100 + v);
                at = ((at as u64 + v + r.below(2)) % words as u64) as usize;
            }
            seen
        };
        let mut lazy = BTreeSet::new();
        let lv = explore(1 << 20, |ch| {
            lazy.insert(read(&CrashView::new(state.clone(), ch.clone())));
            Ok(())
        });
        let mut eager = BTreeSet::new();
        let ev = explore(1 << 20, |ch| {
            let v = CrashView::new(state.clone(), ch.clone());
            v.resolve_all();
            eager.insert(read(&v));
            Ok(())
        });
        if !matches!(lv, Verdict::Pass { .. }) || !matches!(ev, Verdict::Pass { .. }) {
            return Err(format!("trace {t}: exploration incomplete"));
        }
        if lazy != eager {
            return Err(format!(
                "trace {t} (seed {seed}): lazy saw {lazy:?}, eager {eager:?}; events {events:?} crash {crash}"
            ));
        }
        lazy_total += lv.runs();
        eager_total += ev.runs();
    }
    Ok((traces, lazy_total, eager_total))
}
