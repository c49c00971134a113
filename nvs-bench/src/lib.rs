//! # nvs-bench
//!
//! The benchmarks of nvs, as a library: the `nvs` tool (crate `nvs-cli`) parses the
//! `bench` and `bench-delta` arguments into [`BenchOptions`] and
//! [`delta::DeltaBenchOptions`], calls [`run`] or [`delta::run`], and prints the report
//! they return.
//!
//! [`run`] (`nvs bench`): nvs next to its peers, side by side in one process, on the same
//! kind of region (files in `dir`, /dev/shm by default), as ratios to the hardware
//! ceiling.
//!
//! Rows: the ceiling (a raw NT copy + the same fences as a put, no nvs code; with AVX2
//! and, where the CPU has it, AVX-512 stores: ratios are over the faster), nvs put, the
//! batched ceilings and nvs put_batch (64 objects per commit),
//! memcpy into the mapping, PMDK `pmem_memcpy_persist` and `pmemlog_append` (loaded at
//! run time; "not available" without them), `pwrite` to tmpfs, `pwrite` + `fdatasync`
//! on the root file system, memcpy out of the mapping and nvs get; and nvs put and get on a
//! pool without payload checksums (which are on by default), for the checksums' cost. Sizes 1 KiB, 32 KiB,
//! 1 MiB, 20 MiB; 1 and 2 threads (2: each thread its own files, aggregate throughput).
//! Beside the 2-thread rows, nvs put from 2 writer processes on one pool (a lane each,
//! aggregate throughput): the tool's own `bench-worker` subcommand, running [`worker`]
//! (see `procs.rs`).
//!
//! Trials are interleaved — round r runs every (size, threads, method) once — so drift
//! and other load hit every row alike; each row is the median of the rounds. Then the
//! recovery figures: open time of a 1 GiB pool of 32 KiB and of 1 KiB records.
//!
//! [`delta::run`] (`nvs bench-delta`): delta puts against full puts on a miniAMR-like
//! workload, per change detector.

#![deny(missing_docs)]

pub mod delta;
mod error;
mod nt;
mod plot;
mod pmdk;
mod procs;
mod recovery;
mod report;
mod run;
mod signals;

pub use error::{Error, Result};
pub use procs::worker;
pub use run::Clock;
use run::{Measured, Method, Slot};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// Object sizes of the table.
pub(crate) const SIZES: [usize; 4] = [1 << 10, 32 << 10, 1 << 20, 20 << 20];
/// Thread counts of the table.
pub(crate) const THREADS: [usize; 2] = [1, 2];

/// Options of [`run`] (the command line of `nvs bench`).
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// Directory for the regions (default: /dev/shm if writable, else the temp dir).
    pub dir: Option<PathBuf>,
    /// Directory for the pwrite + fdatasync rows (default: /var/tmp).
    pub sync_dir: Option<PathBuf>,
    /// Short trials and small regions: ends within a minute.
    pub quick: bool,
    /// Trials per row (the median is reported); default 5, at least 1.
    pub trials: Option<usize>,
    /// Write every row as JSON to this file.
    pub json: Option<PathBuf>,
    /// Draw throughput against object size as an SVG file.
    pub plot: Option<PathBuf>,
    /// Only these methods (by JSON name) and/or `recovery`; empty: everything.
    pub only: Vec<String>,
    /// The clock the rates are computed from.
    pub clock: Clock,
    /// The durability of the nvs rows' pools (`None`: the default for the file, as
    /// `nvs` picks it: `dax` on a DAX file system, `process` on tmpfs, `msync` on a disk).
    pub durability: Option<nvs_std::Durability>,
    /// The command (program and leading arguments) that runs [`worker`] in another
    /// process, for the two-process row: `nvs` passes itself, `/proc/self/exe
    /// bench-worker`. `None`: that row is "not available".
    pub worker: Option<Vec<OsString>>,
}

/// One row: a method at a size and thread count, measured or not available.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub method: Method,
    pub size: usize,
    pub threads: usize,
    pub result: Result<Rate, String>,
    /// This row's GB/s over its ceiling row's (same size and threads).
    pub ratio: Option<f64>,
    /// That ceiling row: the faster of the row's two ceilings (store widths).
    pub ceiling: Option<Method>,
}

/// Median throughput of a row.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate {
    pub gbps: f64,
    pub ns_per_op: f64,
    pub trials: usize,
    /// The slowest and the fastest trial's GB/s (the spread around the median).
    pub gbps_min: f64,
    pub gbps_max: f64,
}

/// Setup facts printed above the table.
pub(crate) struct Setup {
    pub date: String,
    pub cpu: String,
    pub cpus: usize,
    pub kernel: String,
    pub dir: PathBuf,
    pub sync_dir: PathBuf,
    pub region: usize,
    /// Bytes of the two-process row's pool (0: not run).
    pub shared_pool: usize,
    pub trials: usize,
    pub budget: Duration,
    pub load_start: String,
    pub load_end: String,
    pub nvs_nt: usize,
    pub ceiling_nt: usize,
    pub ceiling_wide_nt: usize,
    pub elapsed: Duration,
    pub clock: Clock,
}

/// Run the benchmark: every row, then the recovery figures (as `opts` selects). Writes
/// the JSON rows and the SVG plot if asked, removes every file it made, and returns the
/// report (the table, then the targets) for the caller to print. The files are removed
/// on an error too, and on SIGINT, SIGTERM or SIGHUP (which also kill the two-process
/// row's workers, then end the process by that signal).
pub fn run(opts: &BenchOptions) -> Result<String> {
    let started = Instant::now();
    signals::install();
    // Every timed thread of the rows on a CPU of its own (the 1-thread rows on the
    // first, a 2-thread row's second thread on the next): a thread the scheduler moves
    // mid-trial starts over with cold caches, one source of the spread between trials.
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let pinned = Pinned::to(0);
    // Before any thread: the PMDK libraries read PMEM_IS_PMEM_FORCE as they load.
    let pmdk = pmdk::load();
    let dir = opts.dir.clone().unwrap_or_else(default_dir);
    let sync_dir = opts.sync_dir.clone().unwrap_or_else(|| PathBuf::from("/var/tmp"));
    let (region, sync_len, budget, trials) = if opts.quick {
        (160usize << 20, 48usize << 20, Duration::from_millis(12), opts.trials.unwrap_or(5))
    } else {
        (768 << 20, 256 << 20, Duration::from_millis(150), opts.trials.unwrap_or(5))
    };
    if trials == 0 {
        return Err(Error::Usage("--trials must be at least 1".into()));
    }
    let load_start = loadavg();
    for o in &opts.only {
        if o != "recovery" && !Method::ALL.iter().any(|m| m.name() == o) {
            let names: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
            return Err(Error::Usage(format!(
                "unknown row '{o}' for --only (expected recovery or one of {})",
                names.join(", ")
            )));
        }
    }
    let wanted = |m: Method| opts.only.is_empty() || m.is_ceiling() || opts.only.iter().any(|o| o == m.name());
    let mut cleanup = Cleanup::new();
    let max_threads = *THREADS.iter().max().unwrap_or(&1);
    let mut slots = Vec::new();
    for k in 0..max_threads {
        let cfg = run::SlotConfig {
            dir: &dir,
            sync_dir: &sync_dir,
            region,
            sync_len,
            max_size: SIZES[3],
            durability: opts.durability,
        };
        let slot = Slot::new(k, &cfg, &pmdk, &mut cleanup).map_err(Error::Usage)?;
        slots.push(slot);
    }

    // Every (size, threads, method) cell collects one sample per round; a row of several
    // processes runs at as many threads, one per process.
    let cells: Vec<(usize, usize, Method)> = SIZES
        .iter()
        .flat_map(|&s| THREADS.iter().flat_map(move |&t| Method::ALL.iter().map(move |&m| (s, t, m))))
        .filter(|c| wanted(c.2) && (c.2.processes() == 1 || c.2.processes() == c.1))
        .collect();
    // The two-process row's pool: as much room as the 2-thread rows' two files.
    let mut shared = None;
    let mut shared_err = String::from("not available: no worker command (the nvs tool has one)");
    if let (Some(cmd), true) = (&opts.worker, cells.iter().any(|c| c.2 == Method::Put2Proc)) {
        match procs::Shared::new(&dir, 2 * region, cmd.clone(), &mut cleanup) {
            Ok(s) => shared = Some(s),
            Err(e) => shared_err = format!("not available: {e}"),
        }
    }
    let mut samples: Vec<Vec<Measured>> = vec![Vec::new(); cells.len()];
    let mut failed: Vec<Option<String>> = vec![None; cells.len()];
    for (i, &(size, _, method)) in cells.iter().enumerate() {
        if let Err(e) = slots[0].available(method, &pmdk) {
            failed[i] = Some(format!("not available: {e}"));
        } else if method == Method::Put2Proc && shared.is_none() {
            failed[i] = Some(shared_err.clone());
        } else if !fits(method, size, region) {
            failed[i] = Some(format!("not run: {} objects of this size do not fit the region", method.per_op()));
        }
    }
    for _round in 0..trials {
        for (i, &(size, threads, method)) in cells.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            let r = match shared.as_mut() {
                Some(sh) if method == Method::Put2Proc => sh.trial(size, budget, opts.clock),
                _ => trial(&mut slots[..threads], method, size, budget, opts.clock, &pmdk),
            };
            match r {
                Ok(m) => samples[i].push(m),
                Err(e) => failed[i] = Some(format!("failed: {e}")),
            }
        }
    }
    drop(slots);
    let shared_pool = if shared.is_some() { 2 * region } else { 0 };
    drop(shared);
    // The opens below run as a user's would: on any CPU, beside their prefault helper.
    drop(pinned);

    let mut rows: Vec<Row> = cells
        .iter()
        .zip(samples.iter_mut().zip(failed))
        .map(|(&(size, threads, method), (s, f))| Row {
            method,
            size,
            threads,
            result: match f {
                Some(e) => Err(e),
                None => Ok(median(s)),
            },
            ratio: None,
            ceiling: None,
        })
        .collect();
    let ceilings: Vec<(Method, usize, usize, f64)> = rows
        .iter()
        .filter_map(|r| r.result.as_ref().ok().map(|x| (r.method, r.size, r.threads, x.gbps)))
        .filter(|c| c.0.is_ceiling())
        .collect();
    for r in rows.iter_mut() {
        // The faster of the row's ceilings (the two store widths) at its size and threads.
        let best = ceilings
            .iter()
            .filter(|c| r.method.ceilings().contains(&c.0) && c.1 == r.size && c.2 == r.threads)
            .max_by(|a, b| a.3.total_cmp(&b.3));
        if let (Ok(x), Some(c)) = (&r.result, best) {
            r.ratio = Some(x.gbps / c.3);
            r.ceiling = Some(c.0);
        }
    }

    let rec = if opts.only.is_empty() || opts.only.iter().any(|o| o == "recovery") {
        recovery::run(&dir, if opts.quick { 3 } else { 5 }, &mut cleanup)
    } else {
        Vec::new()
    };
    drop(cleanup);
    let setup = Setup {
        date: date_utc(),
        cpu: cpu_model(),
        cpus,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string(),
        dir,
        sync_dir,
        region,
        shared_pool,
        trials,
        budget,
        load_start,
        load_end: loadavg(),
        nvs_nt: nvs_core::nt_store_width(),
        ceiling_nt: nt::width(),
        ceiling_wide_nt: nt::wide_width(),
        elapsed: started.elapsed(),
        clock: opts.clock,
    };
    let text = report::table(&setup, &rows, &rec);
    if let Some(p) = &opts.json {
        std::fs::write(p, report::json(&setup, &rows, &rec))
            .map_err(|e| Error::io(format!("cannot write {}", p.display()), e))?;
    }
    if let Some(p) = &opts.plot {
        std::fs::write(p, plot::svg(&setup, &rows))
            .map_err(|e| Error::io(format!("cannot write {}", p.display()), e))?;
    }
    Ok(text)
}

/// Whether `method` at `size` fits a region of `region` bytes with room to spare.
fn fits(method: Method, size: usize, region: usize) -> bool {
    method.per_op() * (size + 256) * 4 <= region
}

/// One trial of `method` on every slot at once (one thread each), started together.
fn trial(
    slots: &mut [Slot],
    method: Method,
    size: usize,
    budget: Duration,
    clock: Clock,
    pmdk: &pmdk::Pmdk,
) -> Result<Measured, String> {
    if slots.len() == 1 {
        return slots[0].trial(method, size, budget, clock, pmdk);
    }
    let barrier = Barrier::new(slots.len());
    let results: Vec<Result<Measured, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = slots
            .iter_mut()
            .enumerate()
            .map(|(k, slot)| {
                let b = &barrier;
                s.spawn(move || {
                    let _pinned = Pinned::to(k);
                    b.wait();
                    slot.trial(method, size, budget, clock, pmdk)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into()))).collect()
    });
    Ok(aggregate(&results.into_iter().collect::<Result<Vec<_>, String>>()?))
}

/// The calling thread pinned to CPU `k` (modulo the CPUs online: threads and worker
/// processes inherit the pinned mask of whoever started them, so it is not the guide)
/// until dropped, when it may run anywhere it could before. Best effort: where the
/// affinity cannot be read or set (a cpuset without that CPU), nothing changes.
pub(crate) struct Pinned(Option<libc::cpu_set_t>);

impl Pinned {
    pub(crate) fn to(k: usize) -> Pinned {
        // SAFETY: sysconf reads a number; cpu_set_t is a plain bit array, for which all
        // zeroes is a value; sched_getaffinity and sched_setaffinity (of this thread:
        // pid 0) read and write only the set they are given, of the size given.
        unsafe {
            let online = libc::sysconf(libc::_SC_NPROCESSORS_ONLN).max(1) as usize;
            let mut was: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut was) != 0 {
                return Pinned(None);
            }
            let cpu = k % online.min(libc::CPU_SETSIZE as usize);
            let mut one: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut one);
            let ok = libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &one) == 0;
            Pinned(ok.then_some(was))
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(was) = &self.0 {
            // SAFETY: as in `to`.
            unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), was) };
        }
    }
}

/// The aggregate of measurements made at the same time (threads, processes): the sum of
/// their rates, as objects and bytes over one second.
pub(crate) fn aggregate(parts: &[Measured]) -> Measured {
    let (mut obj_rate, mut byte_rate) = (0.0, 0.0);
    for m in parts {
        let s = m.time.as_secs_f64().max(1e-9);
        obj_rate += m.objects as f64 / s;
        byte_rate += m.bytes as f64 / s;
    }
    Measured { objects: obj_rate.round() as u64, bytes: byte_rate.round() as u64, time: Duration::from_secs(1) }
}

/// Median GB/s of the samples and the ns per object of that same sample, with the
/// slowest and fastest sample's GB/s.
fn median(s: &mut [Measured]) -> Rate {
    let gbps = |m: &Measured| m.bytes as f64 / m.time.as_secs_f64().max(1e-12) / 1e9;
    s.sort_by(|a, b| gbps(a).total_cmp(&gbps(b)));
    let m = s[s.len() / 2];
    Rate {
        gbps: gbps(&m),
        ns_per_op: m.time.as_secs_f64() * 1e9 / m.objects.max(1) as f64,
        trials: s.len(),
        gbps_min: s.first().map_or(0.0, gbps),
        gbps_max: s.last().map_or(0.0, gbps),
    }
}

/// /dev/shm if writable, else the temporary directory.
pub(crate) fn default_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let probe = shm.join(format!("nvs-bench-{}.probe", std::process::id()));
    if std::fs::OpenOptions::new().write(true).create_new(true).open(&probe).is_ok() {
        let _ = std::fs::remove_file(&probe);
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// Now, as `YYYY-MM-DD HH:MM UTC` (civil-from-days, no time crate).
fn date_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, rem % 3600 / 60)
}

/// Files the bench creates, removed however it ends: when this is dropped (every return,
/// errors included) or by SIGINT, SIGTERM or SIGHUP (`signals`).
pub(crate) struct Cleanup(Vec<(PathBuf, signals::File)>);

impl Cleanup {
    /// Nothing to remove yet.
    pub(crate) fn new() -> Cleanup {
        Cleanup(Vec::new())
    }

    /// `path` is about to be created (call before creating it, so that no moment is left
    /// where it exists unregistered; names are the bench's own, with its process id).
    pub(crate) fn push(&mut self, path: PathBuf) {
        let registered = signals::File::new(&path);
        self.0.push((path, registered));
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        // Removed, then unregistered: a signal in between unlinks a name already gone.
        for (p, registered) in self.0.drain(..) {
            let _ = std::fs::remove_file(p);
            drop(registered);
        }
    }
}

/// `n` bytes for people: `256 KiB`, `1.5 GiB`, or `100 B` (the `nvs` tool prints its
/// sizes with it too).
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_sizes() {
        assert_eq!(human(100), "100 B");
        assert_eq!(human(256 << 10), "256 KiB");
        assert_eq!(human(3 << 29), "1.5 GiB");
        assert_eq!(human(20 << 20), "20 MiB");
    }
}
