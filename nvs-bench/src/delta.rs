//! `nvs bench-delta`: delta puts against full puts on a miniAMR-like workload, per
//! change detector, side by side in one run.
//!
//! The object is a grid of n³ f32 cells. `sparse`: two spheres move one cell per step
//! through it (the cells they leave are reset, the cells they enter set), as in
//! miniAMR's moving objects: a fraction of a percent of the pages change per step.
//! `dense`: every cell changes every step. Each detector runs the same steps on its
//! own pool; a step is timed from the start of the grid update to the end of the put
//! (so an OS tracker's page faults during the update are counted), and the bytes are
//! what the put stored; at the end, a get of the last version (the whole run's chain)
//! is timed. Detectors:
//! - `full`: no detection, every step a full put (the baseline of the ratios);
//! - `ranges`: the simulation passes the byte ranges it wrote (free detection);
//! - `hashes`: nvs-core's `ChunkHashes` hashes every chunk and compares;
//! - `uffd-wp`, `mprotect`: nvs-std's `TrackedBuf` (the OS reports written pages).

use crate::{default_dir, Cleanup, Error, Result};
use nvs_core::{ChunkHashes, DeltaOptions, Object};
use nvs_std::dirty::{TrackedBuf, TrackerKind};
use nvs_std::{CreateOptions, FilePool};
use std::fmt::Write;
use std::path::PathBuf;
use std::time::Instant;

const NAME: &[u8] = b"grid";
const DETECTORS: [&str; 5] = ["full", "ranges", "hashes", "uffd-wp", "mprotect"];
/// Deltas per full version (the deepest chain the format allows).
const FULL_EVERY: u32 = 255;

/// The grid's memory: a plain vector or a tracked buffer.
enum Grid {
    Plain(Vec<f32>),
    Tracked(TrackedBuf),
}

impl Grid {
    fn cells(&mut self) -> &mut [f32] {
        match self {
            Grid::Plain(v) => v,
            Grid::Tracked(t) => bytemuck::cast_slice_mut(&mut t[..]),
        }
    }
    fn bytes(&self) -> &[u8] {
        match self {
            Grid::Plain(v) => bytemuck::cast_slice(v),
            Grid::Tracked(t) => t,
        }
    }
}

/// One step of the workload on `g` (n³ cells); pushes the byte ranges it wrote.
fn step(g: &mut [f32], n: usize, t: usize, dense: bool, wrote: &mut Vec<(u64, u64)>) {
    wrote.clear();
    if dense {
        for c in g.iter_mut() {
            *c = *c * 0.5 + t as f32;
        }
        wrote.push((0, (g.len() * 4) as u64));
        return;
    }
    let r = (n / 40).max(2) as i64;
    // Two spheres crossing the grid on different paths, one cell per step.
    let center = |k: usize, t: usize| -> [i64; 3] {
        let n = n as i64;
        let (t, m) = (t as i64, n - 2 * r - 2);
        let p = |a: i64| r + 1 + (a % m);
        if k == 0 {
            [p(t), n / 3, n / 2]
        } else {
            [n / 2, p(t + m / 2), p(2 * t + 7)]
        }
    };
    for k in 0..2 {
        for (c, value) in [(center(k, t.saturating_sub(1)), 0.0f32), (center(k, t), 1.0 + t as f32)] {
            for z in c[2] - r..=c[2] + r {
                for y in c[1] - r..=c[1] + r {
                    let (dz, dy) = (z - c[2], y - c[1]);
                    let left = r * r - dz * dz - dy * dy;
                    if left < 0 {
                        continue;
                    }
                    let dx = (left as f64).sqrt() as i64;
                    let row = (z as usize * n + y as usize) * n;
                    let (x0, x1) = ((c[0] - dx) as usize, (c[0] + dx) as usize);
                    g[row + x0..=row + x1].fill(value);
                    wrote.push((((row + x0) * 4) as u64, ((x1 - x0 + 1) * 4) as u64));
                }
            }
        }
    }
    wrote.sort_unstable();
}

/// Per detector and workload: stored bytes and seconds of each step after the first.
struct Row {
    workload: &'static str,
    detector: &'static str,
    bytes: Vec<u64>,
    secs: Vec<f64>,
    deltas: usize,
    /// Seconds to get the last version (median of 5): a chain of all the run's deltas.
    get_secs: f64,
}

/// Options of [`run`] (the command line of `nvs bench-delta`).
#[derive(Clone, Debug, Default)]
pub struct DeltaBenchOptions {
    /// Directory for the pools (default: /dev/shm if writable, else the temp dir).
    pub dir: Option<PathBuf>,
    /// A small grid and few steps (seconds).
    pub quick: bool,
}

/// Run every detector on both workloads, each on its own pool (removed afterwards, on an
/// error too, and on SIGINT, SIGTERM or SIGHUP, which then end the process), check every
/// version read back, and return the report for the caller to print.
pub fn run(opts: &DeltaBenchOptions) -> Result<String> {
    let (n, steps) = if opts.quick { (96usize, 8usize) } else { (256, 24) };
    let grid_bytes = (n * n * n * 4) as u64;
    let dir = opts.dir.clone().unwrap_or_else(default_dir);
    crate::signals::install();
    let mut cleanup = Cleanup::new();
    let mut rows = Vec::new();
    // Interleave detectors within a workload so drift hits all alike.
    for dense in [false, true] {
        for detector in DETECTORS {
            let path = dir.join(format!("nvs-bench-delta-{}-{detector}.pool", std::process::id()));
            cleanup.push(path.clone());
            let segment = (grid_bytes + (1 << 20)).next_power_of_two();
            let size = 4096 + segment * (steps as u64 + 2);
            let opts =
                CreateOptions { segment_len: Some(segment), lanes_max: 1, populate: true, ..CreateOptions::default() };
            let mut pool = FilePool::create(&path, size, &opts)?;
            pool.set_delta_options(DeltaOptions { full_every: FULL_EVERY, ..DeltaOptions::default() })?;
            rows.push(run_one(&mut pool, detector, dense, n, steps)?);
            // Every version reads back as the plain simulation computed it.
            check(&pool, n, steps, dense, detector)?;
            drop(pool);
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok(report(&rows, grid_bytes, n, steps))
}

fn run_one(pool: &mut FilePool, detector: &'static str, dense: bool, n: usize, steps: usize) -> Result<Row> {
    let cells = n * n * n;
    let tracked = |kind| -> Result<Grid> {
        let t = TrackedBuf::new(cells * 4, kind).map_err(|e| Error::io(format!("{detector} tracking"), e))?;
        Ok(Grid::Tracked(t))
    };
    let mut grid = match detector {
        "uffd-wp" => tracked(TrackerKind::UffdWpAsync)?,
        "mprotect" => tracked(TrackerKind::Mprotect)?,
        _ => Grid::Plain(vec![0.0; cells]),
    };
    let mut hashes = ChunkHashes::new(vec![0u64; ChunkHashes::<Vec<u64>>::words_for(cells as u64 * 4, 4096)], 4096)
        .map_err(|e| Error::Usage(e.to_string()))?;
    let (mut wrote, mut dirty) = (Vec::new(), Vec::new());
    let mut row = Row {
        workload: if dense { "dense" } else { "sparse" },
        detector,
        bytes: vec![],
        secs: vec![],
        deltas: 0,
        get_secs: 0.0,
    };
    let mut parent = 0;
    for t in 0..steps {
        let start = Instant::now();
        step(grid.cells(), n, t, dense, &mut wrote);
        let put = match detector {
            "full" => pool.put(0, Object::new(NAME, grid.bytes()))?,
            "ranges" => pool.put(0, Object::new(NAME, grid.bytes()).delta(parent, &wrote))?,
            "hashes" => {
                let p = hashes.scan(grid.bytes()).map_err(|e| Error::Usage(e.to_string()))?;
                let put = pool.put(0, Object::new(NAME, grid.bytes()).delta(p.unwrap_or(0), &hashes))?;
                hashes.committed(put.version);
                put
            }
            _ => {
                if let Grid::Tracked(tb) = &mut grid {
                    tb.take_dirty(&mut dirty);
                }
                pool.put(0, Object::new(NAME, grid.bytes()).delta(parent, &dirty))?
            }
        };
        let secs = start.elapsed().as_secs_f64();
        parent = put.version;
        if t > 0 {
            row.bytes.push(put.stored_bytes);
            row.secs.push(secs);
            row.deltas += put.delta as usize;
        }
    }
    let mut buf = vec![0u8; cells * 4];
    let mut gets = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        pool.get(NAME, parent, &mut buf)?;
        gets.push(start.elapsed().as_secs_f64());
    }
    row.get_secs = median(&gets);
    Ok(row)
}

/// Replay the workload on a plain grid and compare every version.
fn check(pool: &FilePool, n: usize, steps: usize, dense: bool, detector: &str) -> Result<()> {
    let mut g = vec![0.0f32; n * n * n];
    let mut wrote = Vec::new();
    for t in 0..steps {
        step(&mut g, n, t, dense, &mut wrote);
        let got = pool.get_vec(NAME, t as u64 + 1)?;
        if got != bytemuck::cast_slice::<f32, u8>(&g) {
            return Err(Error::Mismatch(format!("{detector}: version {} differs from the simulation", t + 1)));
        }
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn report(rows: &[Row], grid_bytes: u64, n: usize, steps: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "grid {n}^3 f32 = {:.1} MiB, {steps} steps (the first, a full put, not counted); every version checked\n\
         amortised: bytes per step over a whole chain (a full version, then {FULL_EVERY} steps like these)",
        grid_bytes as f64 / (1 << 20) as f64
    );
    let _ = writeln!(
        out,
        "{:<8} {:<9} {:>7} {:>14} {:>10} {:>10} {:>12} {:>9} {:>10} {:>9}",
        "workload",
        "detector",
        "deltas",
        "bytes/step",
        "vs full",
        "amortised",
        "ms/step",
        "vs full",
        "get ms",
        "vs full"
    );
    for r in rows {
        let full = rows.iter().find(|f| f.workload == r.workload && f.detector == "full").unwrap_or(r);
        let mean = |b: &[u64]| b.iter().sum::<u64>() as f64 / b.len().max(1) as f64;
        let (bytes, ms) = (mean(&r.bytes), median(&r.secs) * 1e3);
        // Over a whole chain: one full version, then FULL_EVERY steps like these.
        let k = FULL_EVERY as f64;
        let amortised = (grid_bytes as f64 + k * bytes) / (k + 1.0);
        let _ = writeln!(
            out,
            "{:<8} {:<9} {:>7} {:>14.0} {:>10.5} {:>10.5} {:>12.3} {:>9.3} {:>10.3} {:>9.3}",
            r.workload,
            r.detector,
            format!("{}/{}", r.deltas, r.bytes.len()),
            bytes,
            bytes / mean(&full.bytes),
            amortised / mean(&full.bytes),
            ms,
            ms / (median(&full.secs) * 1e3),
            r.get_secs * 1e3,
            r.get_secs / full.get_secs
        );
    }
    out
}
