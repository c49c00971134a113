//! A simulation and its analytics, as two programs would be written against nvs-std:
//!
//! - `simulate`: two ranks (threads), each on its own lane, put three `f64` arrays per
//!   time step as one batch (one commit); rank 1 starts 300 ms late; each closes its
//!   lane at the end. Both lanes are taken before either rank starts, which joins them
//!   to the stream.
//! - `analyse`: a follower (in another process in real life) reads every object as it
//!   commits, checks its values, and stops at the end of the stream.
//!
//! ```sh
//! cargo run --release -p nvs-std --example simulation              # both, on a temp pool
//! cargo run --release -p nvs-std --example simulation -- write P   # the simulation alone
//! cargo run --release -p nvs-std --example simulation -- follow P  # the analytics alone
//! ```
//! (`tests/workflow.rs` runs the same two programs and checks every object.)

use nvs_core::Object;
use nvs_std::{CreateOptions, FilePool, Followed, Follower};
use std::path::Path;
use std::time::Duration;

/// Ranks, steps per rank, arrays per step, values per array.
pub const RANKS: u32 = 2;
pub const STEPS: u64 = 50;
pub const ARRAYS: [&str; 3] = ["temperature", "pressure", "velocity"];
pub const CELLS: usize = 4096;

/// The value of cell `i` of `array` of `rank` at `step`.
pub fn value(rank: u32, step: u64, array: usize, i: usize) -> f64 {
    rank as f64 * 1e6 + step as f64 * 1e3 + array as f64 * 100.0 + i as f64 * 1e-3
}

/// The name rank `rank` writes `array` under.
pub fn name(rank: u32, array: usize) -> String {
    format!("rank{rank}/{}", ARRAYS[array])
}

/// The simulation: creates the pool at `path`, writes `STEPS` steps per rank (rank 1
/// starting `late` after rank 0), closes every lane.
pub fn simulate(path: &Path, late: Duration) -> Result<(), nvs_std::Error> {
    let opts = CreateOptions { lanes_max: RANKS, ..CreateOptions::default() };
    let pool = FilePool::create(path, 64 << 20, &opts)?;
    // Take every rank's lane first: each joins the stream now, so a follower waits for
    // its end of stream however late its first put comes.
    let lanes = (0..RANKS).map(|r| pool.lane(r)).collect::<Result<Vec<_>, _>>()?;
    std::thread::scope(|s| {
        let ranks: Vec<_> = lanes
            .into_iter()
            .map(|mut lane| {
                s.spawn(move || -> Result<(), nvs_std::Error> {
                    let rank = lane.lane();
                    if rank == 1 {
                        std::thread::sleep(late);
                    }
                    let mut arrays = vec![vec![0f64; CELLS]; ARRAYS.len()];
                    let names: Vec<String> = (0..ARRAYS.len()).map(|a| name(rank, a)).collect();
                    for step in 1..=STEPS {
                        for (a, array) in arrays.iter_mut().enumerate() {
                            array.iter_mut().enumerate().for_each(|(i, v)| *v = value(rank, step, a, i));
                        }
                        let batch: Vec<Object<'_>> =
                            names.iter().zip(&arrays).map(|(n, a)| Object::pod(n, a)).collect();
                        lane.put_batch(&batch)?;
                    }
                    lane.close()
                })
            })
            .collect();
        ranks.into_iter().try_for_each(|r| r.join().expect("a rank panicked"))
    })
}

/// What the analytics saw.
#[derive(Debug, Default)]
pub struct Report {
    pub objects: usize,
    pub bad: usize,
    pub ended: bool,
}

/// The analytics: follows the pool at `path` (waiting for it to exist) until the end of
/// the stream (or `timeout` of silence), checking every object's values.
pub fn analyse(path: &Path, timeout: Duration) -> Result<Report, nvs_std::Error> {
    let start = std::time::Instant::now();
    let mut follower = loop {
        match Follower::open(path, None) {
            Ok(f) => break f,
            Err(_) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(e),
        }
    };
    let mut report = Report::default();
    loop {
        match follower.wait(Some(timeout), Duration::from_millis(2))? {
            Followed::Objects(objects) => {
                for o in objects {
                    let values: Vec<f64> = follower.pool().get_pod(&o.name, o.version)?;
                    let (rank, array) = (o.lane, ARRAYS.iter().position(|a| o.name.ends_with(a.as_bytes())));
                    let ok = array.is_some_and(|a| {
                        values.len() == CELLS
                            && values.iter().enumerate().all(|(i, v)| *v == value(rank, o.version, a, i))
                    });
                    report.objects += 1;
                    report.bad += !ok as usize;
                }
            }
            Followed::EndOfStream => {
                report.ended = true;
                return Ok(report);
            }
            Followed::WriterGone | Followed::Timeout => return Ok(report),
        }
    }
}

#[allow(dead_code)] // the test includes this file for its two programs
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let late = Duration::from_millis(300);
    let show = |r: &Report| {
        println!(
            "analytics: {} objects ({} expected), {} with wrong values, end of stream: {}",
            r.objects,
            RANKS as u64 * STEPS * ARRAYS.len() as u64,
            r.bad,
            r.ended
        )
    };
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["write", p] => simulate(Path::new(p), late)?,
        ["follow", p] => show(&analyse(Path::new(p), Duration::from_secs(10))?),
        [] => {
            let dir = std::env::temp_dir().join(format!("nvs-simulation-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let path = dir.join("sim.pool");
            let report = std::thread::scope(|s| {
                let analytics = s.spawn(|| analyse(&path, Duration::from_secs(10)));
                simulate(&path, late)?;
                analytics.join().expect("analytics panicked")
            });
            std::fs::remove_dir_all(&dir)?;
            show(&report?);
        }
        _ => return Err("usage: simulation [write POOL | follow POOL]".into()),
    }
    Ok(())
}
