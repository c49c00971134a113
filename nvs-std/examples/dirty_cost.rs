//! What dirty-page tracking costs per step, for a 64 MiB object (16384 pages of 4 KiB):
//! the time of a step's writes (the first write to each page after re-arming takes a
//! fault) plus `take_dirty`, for each tracker kind, against the same writes into an
//! untracked `Vec<u8>` (baseline) and against finding the changed pages by software
//! (compare each page with a shadow copy and refresh the changed ones: what a delta put
//! costs without OS help).
//!
//! Patterns per step:
//! - sparse: one byte in 0.5% of the pages (82 random distinct pages, new ones each step);
//! - dense: one byte in every page;
//! - dense-fill: every byte (memset of the whole object).
//!
//! `cargo run --release -p nvs-std --example dirty_cost [STEPS]` (default 15). Medians
//! over the steps, after two warm-up steps.

use nvs_std::dirty::{uffd_wp_async_available, TrackedBuf, TrackerKind};
use std::hint::black_box;
use std::time::{Duration, Instant};

const LEN: usize = 64 << 20;
const PAGE: usize = 4096;
const PAGES: usize = LEN / PAGE;

#[derive(Clone, Copy, PartialEq)]
enum Pattern {
    Sparse,
    Dense,
    DenseFill,
}

impl Pattern {
    fn name(self) -> &'static str {
        match self {
            Pattern::Sparse => "sparse 0.5%",
            Pattern::Dense => "dense 1 B/page",
            Pattern::DenseFill => "dense-fill",
        }
    }
}

/// xorshift64*, seeded: every tracker sees the same pages.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// The pages each step writes.
fn plan(p: Pattern, steps: usize) -> Vec<Vec<usize>> {
    let mut rng = Rng(0x5eed);
    (0..steps)
        .map(|_| match p {
            Pattern::Sparse => {
                let n = PAGES * 5 / 1000 + 1; // 82
                let mut seen = vec![false; PAGES];
                let mut v = Vec::with_capacity(n);
                while v.len() < n {
                    let pg = (rng.next() % PAGES as u64) as usize;
                    if !seen[pg] {
                        seen[pg] = true;
                        v.push(pg);
                    }
                }
                v
            }
            Pattern::Dense | Pattern::DenseFill => (0..PAGES).collect(),
        })
        .collect()
}

fn write(buf: &mut [u8], p: Pattern, pages: &[usize], step: usize) {
    let v = 2 + (step % 200) as u8; // never the initial 1, never the previous step's value
    match p {
        Pattern::DenseFill => buf.fill(v),
        _ => {
            for &pg in pages {
                // SAFETY: `pg * PAGE + 1 < LEN`; a volatile store so the write is not elided.
                unsafe { std::ptr::write_volatile(buf.as_mut_ptr().add(pg * PAGE + (pg & 0x7ff)), v) };
            }
        }
    }
    black_box(&*buf);
}

#[derive(Clone, Copy)]
enum Tracker {
    Baseline,
    SoftwareDiff,
    Os(TrackerKind),
}

impl Tracker {
    fn name(self) -> String {
        match self {
            Tracker::Baseline => "untracked Vec (baseline)".into(),
            Tracker::SoftwareDiff => "Vec + compare with shadow copy".into(),
            Tracker::Os(k) => format!("TrackedBuf {k}"),
        }
    }
}

struct Row {
    writes: Duration,
    take: Duration,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run(t: Tracker, p: Pattern, steps: usize) -> Row {
    let plan = plan(p, steps + 2);
    let (mut ws, mut ts) = (Vec::new(), Vec::new());
    let mut out = Vec::new();
    let mut found = Vec::new();
    match t {
        Tracker::Baseline | Tracker::SoftwareDiff => {
            let mut buf = vec![0u8; LEN];
            buf.fill(1); // resident, like the tracked buffers after their first step
            let mut shadow = buf.clone();
            for (i, pages) in plan.iter().enumerate() {
                let t0 = Instant::now();
                write(&mut buf, p, pages, i);
                let t1 = Instant::now();
                if let Tracker::SoftwareDiff = t {
                    found.clear();
                    for (pg, (a, b)) in buf.chunks_exact(PAGE).zip(shadow.chunks_exact_mut(PAGE)).enumerate() {
                        if a != b {
                            b.copy_from_slice(a);
                            found.push(pg);
                        }
                    }
                    black_box(&found);
                    // Each step writes a new value, so every written page differs.
                    assert_eq!(found.len(), pages.len(), "software diff found the pages written");
                }
                let t2 = Instant::now();
                if i >= 2 {
                    ws.push(t1 - t0);
                    ts.push(t2 - t1);
                }
            }
        }
        Tracker::Os(k) => {
            let mut buf = TrackedBuf::new(LEN, k).unwrap();
            buf.fill(1);
            buf.take_dirty(&mut out); // arm
            for (i, pages) in plan.iter().enumerate() {
                let t0 = Instant::now();
                write(&mut buf, p, pages, i);
                let t1 = Instant::now();
                buf.take_dirty(&mut out);
                let t2 = Instant::now();
                let n: u64 = out.iter().map(|r| r.1 / PAGE as u64).sum();
                assert_eq!(n as usize, pages.len(), "{k}: dirty pages reported");
                if i >= 2 {
                    ws.push(t1 - t0);
                    ts.push(t2 - t1);
                }
            }
        }
    }
    Row { writes: median(ws), take: median(ts) }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let steps: usize = std::env::args().nth(1).map(|s| s.parse().unwrap()).unwrap_or(15);
    let mut trackers = vec![Tracker::Baseline, Tracker::SoftwareDiff];
    match uffd_wp_async_available() {
        Ok(()) => trackers.push(Tracker::Os(TrackerKind::UffdWpAsync)),
        Err(e) => println!("uffd-wp: not measured: {e}"),
    }
    trackers.push(Tracker::Os(TrackerKind::Mprotect));
    println!("object {} MiB = {PAGES} pages; median of {steps} steps after 2 warm-up steps", LEN >> 20);
    for p in [Pattern::Sparse, Pattern::Dense, Pattern::DenseFill] {
        let dirtied = plan(p, 1)[0].len();
        println!("\n{} ({dirtied} pages dirtied per step)", p.name());
        println!(
            "  {:<32} {:>10} {:>10} {:>10} {:>12} {:>9}",
            "tracker", "writes ms", "take ms", "total ms", "ns/dirty pg", "x base"
        );
        let mut base = 0.0;
        for &t in &trackers {
            let r = run(t, p, steps);
            let total = r.writes + r.take;
            if let Tracker::Baseline = t {
                base = total.as_secs_f64();
            }
            println!(
                "  {:<32} {:>10.3} {:>10.3} {:>10.3} {:>12.0} {:>9.1}",
                t.name(),
                ms(r.writes),
                ms(r.take),
                ms(total),
                total.as_secs_f64() * 1e9 / dirtied as f64,
                total.as_secs_f64() / base
            );
        }
    }
}
