//! Stateless depth-first exploration of choices (the approach of Jaaru, ASPLOS'21).
//!
//! A *run* executes a closure from scratch; whenever it reads a word whose value is
//! still undecided, it asks the [`Chooser`] for one of the word's candidates. The
//! explorer replays the choices of the previous run up to its last choice point that
//! has an untried option, takes that option, and lets later choice points start at
//! their first option again — so every combination of choices *that the closure can
//! observe* is run exactly once. Words nobody reads are never branched on.
//!
//! A budget bounds the runs of one exploration; an exploration that hits it is
//! `Incomplete`, never `Pass`.

use std::sync::{Arc, Mutex};

/// Where the current run is in the choice tree.
#[derive(Debug, Default)]
struct Choices {
    /// Choices to replay (from the previous run's backtrack).
    replay: Vec<usize>,
    /// (chosen, options) of every choice point of this run, in order.
    made: Vec<(usize, usize)>,
}

/// Hands out choices to a run; shared by every view of that run.
#[derive(Clone, Debug, Default)]
pub struct Chooser {
    inner: Arc<Mutex<Choices>>,
}

impl Chooser {
    /// A chooser that replays `choices`, then takes the first option of new points.
    pub fn replaying(choices: Vec<usize>) -> Chooser {
        Chooser { inner: Arc::new(Mutex::new(Choices { replay: choices, made: Vec::new() })) }
    }

    /// Pick one of `options` (≥ 1) alternatives.
    pub fn choose(&self, options: usize) -> usize {
        assert!(options >= 1);
        let mut c = self.inner.lock().unwrap();
        if options == 1 {
            return 0;
        }
        let at = c.made.len();
        let pick = c.replay.get(at).copied().unwrap_or(0);
        assert!(pick < options, "nondeterministic run: choice {at} had {options} options, replay says {pick}");
        c.made.push((pick, options));
        pick
    }

    /// The choices this run made (a repro vector).
    pub fn made(&self) -> Vec<usize> {
        self.inner.lock().unwrap().made.iter().map(|m| m.0).collect()
    }

    /// The replay vector of the next run in depth-first order, if any is left.
    fn next(&self) -> Option<Vec<usize>> {
        let c = self.inner.lock().unwrap();
        let mut made = c.made.clone();
        while let Some((pick, options)) = made.pop() {
            if pick + 1 < options {
                let mut v: Vec<usize> = made.iter().map(|m| m.0).collect();
                v.push(pick + 1);
                return Some(v);
            }
        }
        None
    }
}

/// The result of exploring one crash point (or any closure).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every run passed.
    Pass { runs: u64 },
    /// A run failed: its choices reproduce it alone.
    Fail { runs: u64, choices: Vec<usize>, message: String },
    /// The budget ran out before every choice was explored.
    Incomplete { runs: u64 },
}

impl Verdict {
    pub fn runs(&self) -> u64 {
        match self {
            Verdict::Pass { runs } | Verdict::Fail { runs, .. } | Verdict::Incomplete { runs } => *runs,
        }
    }
}

/// Run `run` once per reachable combination of choices, stopping at the first failure
/// or when `budget` runs were made.
pub fn explore(budget: u64, mut run: impl FnMut(&Chooser) -> Result<(), String>) -> Verdict {
    let mut replay = Vec::new();
    let mut runs = 0;
    loop {
        let chooser = Chooser::replaying(replay);
        let result = run(&chooser);
        runs += 1;
        if let Err(message) = result {
            return Verdict::Fail { runs, choices: chooser.made(), message };
        }
        match chooser.next() {
            None => return Verdict::Pass { runs },
            Some(_) if runs >= budget => return Verdict::Incomplete { runs },
            Some(next) => replay = next,
        }
    }
}

/// Run `run` once with exactly `choices` (a repro).
pub fn replay(choices: Vec<usize>, run: impl FnOnce(&Chooser) -> Result<(), String>) -> Result<(), String> {
    run(&Chooser::replaying(choices))
}
