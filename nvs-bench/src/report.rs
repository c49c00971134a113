//! The table, the targets of the benchmarks issue, and the JSON file.

use super::recovery::Recovery;
use super::run::Method;
use super::{Row, Setup};
use crate::human;
use std::fmt::Write as _;

/// One target of the benchmarks issue, checked on the 1-thread rows of this run.
pub struct Target {
    pub what: String,
    pub value: Option<f64>,
    pub goal: f64,
    /// `true`: the value must be at least the goal; `false`: below it.
    pub at_least: bool,
    /// The widest spread of the rows it was computed from: how far their slowest or
    /// fastest trial lay from the median, as a fraction of it.
    pub spread: Option<f64>,
}

/// A spread beyond which a target's verdict is not to be trusted.
const UNSTABLE: f64 = 0.15;

/// The rows, and which of them the target being computed has read.
struct Rows<'a> {
    all: &'a [Row],
    used: std::cell::RefCell<Vec<usize>>,
}

impl<'a> Rows<'a> {
    fn find(&self, m: Method, size: usize, threads: usize) -> Option<&'a Row> {
        let i = self.all.iter().position(|r| r.method == m && r.size == size && r.threads == threads)?;
        self.used.borrow_mut().push(i);
        self.all.get(i)
    }

    /// The widest spread of the rows read since the last call.
    fn take_spread(&self) -> Option<f64> {
        let used = std::mem::take(&mut *self.used.borrow_mut());
        used.iter()
            .filter_map(|&i| self.all.get(i)?.result.as_ref().ok())
            .map(|x| {
                let m = x.gbps.max(1e-12);
                ((m - x.gbps_min) / m).max((x.gbps_max - m) / m)
            })
            .reduce(f64::max)
    }
}

impl Target {
    fn met(&self) -> Option<bool> {
        self.value.map(|v| if self.at_least { v >= self.goal } else { v < self.goal })
    }
}

fn gbps(rows: &Rows, m: Method, size: usize, threads: usize) -> Option<f64> {
    rows.find(m, size, threads).and_then(|r| r.result.as_ref().ok()).map(|x| x.gbps)
}

fn ratio(rows: &Rows, a: Method, b: Method, size: usize) -> Option<f64> {
    ratio_at(rows, a, b, size, 1)
}

fn ratio_at(rows: &Rows, a: Method, b: Method, size: usize, threads: usize) -> Option<f64> {
    Some(gbps(rows, a, size, threads)? / gbps(rows, b, size, threads)?)
}

/// Row `a`'s ratio to the faster of PMDK's two rows, `threads` threads.
fn to_pmdk(rows: &Rows, a: Method, size: usize, threads: usize) -> Option<f64> {
    let best = gbps(rows, Method::PmemMemcpy, size, threads)?.max(gbps(rows, Method::PmemLog, size, threads)?);
    Some(gbps(rows, a, size, threads)? / best)
}

/// Row `a`'s ratio to its (faster) ceiling, 1 thread.
fn to_ceiling(rows: &Rows, a: Method, size: usize) -> Option<f64> {
    to_ceiling_at(rows, a, size, 1)
}

/// Row `a`'s ratio to its (faster) ceiling, `threads` threads.
fn to_ceiling_at(rows: &Rows, a: Method, size: usize, threads: usize) -> Option<f64> {
    let r = rows.find(a, size, threads)?;
    rows.find(r.ceiling?, size, threads);
    r.ratio
}

/// The performance targets (1 thread unless a line says 2).
pub fn targets(rows: &[Row], rec: &[Recovery]) -> Vec<Target> {
    let (k1, k32, m1, m20) = (1usize << 10, 32usize << 10, 1usize << 20, 20usize << 20);
    let rows = &Rows { all: rows, used: Default::default() };
    let mut t = Vec::new();
    let mut add = |what: String, value: Option<f64>, goal: f64, at_least: bool| {
        t.push(Target { what, value, goal, at_least, spread: rows.take_spread() });
    };
    // The ceiling is the fastest copy here: at every size faster than PMDK's copy in the
    // same protocol (copy, fence, commit line, fence), and, without its commit, faster
    // than `pmem_memcpy_persist` (copy, fence), which does no more than that.
    for threads in [1, 2] {
        for s in super::SIZES {
            let h = human(s as u64);
            let what = format!("ceiling {h} / PMDK copy + commit, {threads} thr");
            add(what, to_ceiling_at(rows, Method::PmemCommit, s, threads).map(|r| 1.0 / r), 1.0, true);
            let what = format!("ceiling w/o commit {h} / pmem_memcpy_persist, {threads} thr");
            add(what, ratio_at(rows, Method::CeilingNoCommit, Method::PmemMemcpy, s, threads), 1.0, true);
        }
    }
    // Each put goal twice: unchecksummed, and with payload checksums (the default) within
    // 5% of it (what checksums may cost).
    const SUMMED: f64 = 0.95;
    for s in [k32, m1] {
        let h = human(s as u64);
        add(format!("put {h} / ceiling, checksums off"), to_ceiling(rows, Method::PutNoSum, s), 0.95, true);
        add(format!("put {h} / ceiling, checksums on"), to_ceiling(rows, Method::Put, s), 0.95 * SUMMED, true);
    }
    for threads in [1, 2] {
        for s in [k32, m1, m20] {
            let h = human(s as u64);
            let what = format!("put {h} / better PMDK row, {threads} thr, checksums off");
            add(what, to_pmdk(rows, Method::PutNoSum, s, threads), 1.0, true);
            let what = format!("put {h} / better PMDK row, {threads} thr, checksums on");
            add(what, to_pmdk(rows, Method::Put, s, threads), SUMMED, true);
        }
    }
    // Two writer processes on one pool, a lane each, against one process's two threads
    // (the raw NT copy, and nvs put with a pool per thread).
    for s in [k32, m1, m20] {
        let what = format!("put {} 2 processes / 2-thr ceiling", human(s as u64));
        add(what, to_ceiling_at(rows, Method::Put2Proc, s, 2), 0.9, true);
    }
    for s in [k32, m1, m20] {
        let what = format!("put {} 2 processes / put 2 threads", human(s as u64));
        add(what, ratio_at(rows, Method::Put2Proc, Method::Put, s, 2), 0.9, true);
    }
    let what = "put 1 KiB / pmemlog_append, checksums off".into();
    add(what, ratio(rows, Method::PutNoSum, Method::PmemLog, k1), 1.2, true);
    let what = "put 1 KiB / pmemlog_append, checksums on".into();
    add(what, ratio(rows, Method::Put, Method::PmemLog, k1), 1.2 * SUMMED, true);
    let what = "put_batch 64 x 1 KiB / its ceiling, checksums off".into();
    add(what, to_ceiling(rows, Method::BatchNoSum, k1), 0.6, true);
    add("put 32 KiB / pwrite tmpfs".into(), ratio(rows, Method::Put, Method::PwriteTmpfs, k32), 3.0, true);
    add("put 32 KiB / pwrite + fdatasync".into(), ratio(rows, Method::Put, Method::PwriteSync, k32), 100.0, true);
    for s in super::SIZES {
        add(format!("get {} / memcpy out", human(s as u64)), ratio(rows, Method::Get, Method::MemcpyOut, s), 0.9, true);
    }
    // Payload checksums (on by default) against none: the put's copy computes nvs-sum.
    for s in [k32, m1, 20 << 20] {
        let what = format!("put {} checksummed / unchecksummed", human(s as u64));
        add(what, ratio(rows, Method::Put, Method::PutNoSum, s), 0.95, true);
    }
    // Small objects at the hardware's limit: what a default (checksummed) pool must reach.
    add("put 1 KiB / two-fence ceiling, checksums on".into(), to_ceiling(rows, Method::Put, k1), 0.9, true);
    let what = "put 1 KiB / pmemlog_append, checksums on (one-fence goal)".into();
    add(what, ratio(rows, Method::Put, Method::PmemLog, k1), 1.5, true);
    add("put_batch 64 x 1 KiB / its ceiling, checksums on".into(), to_ceiling(rows, Method::Batch, k1), 0.8, true);
    for s in [k1, k32] {
        let what = format!("put {} 2 processes / put 2 threads (small objects)", human(s as u64));
        add(what, ratio_at(rows, Method::Put2Proc, Method::Put, s, 2), 0.95, true);
    }
    for threads in [1, 2] {
        for s in super::SIZES {
            let what = format!("put {} / PMDK copy + commit, {threads} thr, checksums on", human(s as u64));
            add(what, ratio_at(rows, Method::Put, Method::PmemCommit, s, threads), 1.0, true);
        }
    }
    for s in super::SIZES {
        let what = format!("get {} verified / unverified", human(s as u64));
        add(what, ratio(rows, Method::Get, Method::GetNoSum, s), 0.95, true);
    }
    let open32 = rec.iter().find(|r| r.record == k32).and_then(|r| r.result.as_ref().ok());
    add("open 1 GiB of 32 KiB records, ms".into(), open32.map(|f| f.open.as_secs_f64() * 1e3), 50.0, false);
    let open1 = rec.iter().find(|r| r.record == k1).and_then(|r| r.result.as_ref().ok());
    add("recovery of 1 KiB records, GB/s of log".into(), open1.map(|f| f.scan_gbps()), 4.0, true);
    add("open 1 GiB of 1 KiB records, ms".into(), open1.map(|f| f.open.as_secs_f64() * 1e3), 50.0, false);
    // After a crash (no checkpoint): a recovery, within 1.2x the 168 ms this machine's
    // recovery took on 2026-12-06, before checkpoints.
    let what = "open 1 GiB of 1 KiB records after a crash (no checkpoint), ms";
    add(what.into(), open1.map(|f| f.scan.as_secs_f64() * 1e3), 1.2 * 168.0, false);
    t
}

pub fn table(setup: &Setup, rows: &[Row], rec: &[Recovery]) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "nvs bench · {} · {} ({} CPUs) · Linux {}", setup.date, setup.cpu, setup.cpus, setup.kernel);
    let _ = writeln!(
        o,
        "region: files in {} ({} per thread: one region file shared by nvs and the raw rows, one pmemlog pool); fdatasync file in {}",
        setup.dir.display(),
        human(setup.region as u64),
        setup.sync_dir.display()
    );
    let _ = writeln!(
        o,
        "median of {} interleaved trials of {} ms each; load average {} at start, {} at end; took {:.0} s",
        setup.trials,
        setup.budget.as_millis(),
        setup.load_start,
        setup.load_end,
        setup.elapsed.as_secs_f64()
    );
    let _ = writeln!(
        o,
        "NT stores: nvs {} B; ceilings {} B{}. 2 threads: each its own files, aggregate GB/s, ns = 1/aggregate rate",
        setup.nvs_nt,
        setup.ceiling_nt,
        match setup.ceiling_wide_nt {
            0 => " (no AVX-512 here)".to_string(),
            w => format!(" and {w} B (AVX-512)"),
        }
    );
    if setup.shared_pool > 0 {
        let _ = writeln!(
            o,
            "2 processes: two `nvs bench-worker` processes, each one lane of one lane-names pool file of {} \
             (reformatted before each trial; each worker reserves index room for what the pool holds before it \
             starts; when full, each reclaims its own lane), aggregate GB/s",
            human(setup.shared_pool as u64)
        );
    }
    let _ = writeln!(
        o,
        "clock: {}",
        match setup.clock {
            super::Clock::Cpu => {
                "each thread's CPU time (time descheduled by other load is not counted); wall time for pwrite + fdatasync"
            }
            super::Clock::Wall => "wall time",
        }
    );
    let _ = writeln!(
        o,
        "×ceiling: GB/s over the faster ceiling row (of the two store widths) of the same size and threads (batched rows: the batched ceilings)\n\
         spread: the slowest and the fastest trial's GB/s, in % of the median\n"
    );
    let _ = writeln!(
        o,
        "{:<8} {:>3}  {:<46} {:>8} {:>11} {:>9}  spread",
        "size", "thr", "method", "GB/s", "ns/object", "×ceiling"
    );
    let mut last = (0, 0);
    for r in rows {
        if (r.size, r.threads) != last && last != (0, 0) {
            o.push('\n');
        }
        last = (r.size, r.threads);
        let head = format!("{:<8} {:>3}  {:<46}", human(r.size as u64), r.threads, r.method.describe());
        match &r.result {
            Ok(x) => {
                let ratio = r.ratio.map_or("-".to_string(), |v| format!("{v:.2}"));
                let pct = |v: f64| (v / x.gbps.max(1e-12) - 1.0) * 100.0;
                let spread = format!("{:+.0}%/{:+.0}%", pct(x.gbps_min), pct(x.gbps_max));
                let _ = writeln!(o, "{head} {:>8.3} {:>11.1} {:>9}  {spread}", x.gbps, x.ns_per_op, ratio);
            }
            Err(e) => {
                let _ = writeln!(o, "{head} {e}");
            }
        }
    }
    let _ = writeln!(
        o,
        "\nrecovery (FilePool::open read-only, the best of two medians of {} opens each: after the writer's clean close, from its index checkpoint; after a crash, no checkpoint: map + recover):",
        rec.iter().find_map(|r| r.result.as_ref().ok().map(|f| f.opens)).unwrap_or(0)
    );
    for r in rec {
        match &r.result {
            Ok(f) => {
                let _ = writeln!(
                    o,
                    "  1 GiB pool of {} records: {} records, open {:.2} ms (after a crash {:.2} ms: scan {:.1} M records/s = {:.1} GB/s of log), index {:.1} B/record",
                    human(r.record as u64),
                    f.records,
                    f.open.as_secs_f64() * 1e3,
                    f.scan.as_secs_f64() * 1e3,
                    f.records_per_s() / 1e6,
                    f.scan_gbps(),
                    f.index_bytes_per_record()
                );
            }
            Err(e) => {
                let _ = writeln!(o, "  1 GiB pool of {} records: failed: {e}", human(r.record as u64));
            }
        }
    }
    let _ = writeln!(o, "\ntargets (this run; 1 thread unless a line says 2):");
    for t in targets(rows, rec) {
        let verdict = match t.met() {
            Some(true) => "met",
            Some(false) => "MISSED",
            None => "not measured",
        };
        let value = t.value.map_or("-".to_string(), |v| format!("{v:.3}"));
        let op = if t.at_least { ">=" } else { "<" };
        let unstable = match t.spread {
            Some(s) if t.value.is_some() && s > UNSTABLE => {
                format!(" (unstable: a row's trials lie {:.0}% from its median)", s * 100.0)
            }
            _ => String::new(),
        };
        let _ = writeln!(o, "  {:<56} {:>9} (goal {op} {}) {verdict}{unstable}", t.what, value, t.goal);
    }
    o
}

fn num(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.6}"),
        _ => "null".into(),
    }
}

fn string(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// Every row as a JSON object (a JSON array), then the recovery figures as objects with
/// the same fields (`kind` tells them apart).
pub fn json(setup: &Setup, rows: &[Row], rec: &[Recovery]) -> String {
    let mut items = Vec::new();
    let clock = match setup.clock {
        super::Clock::Cpu => "thread_cpu",
        super::Clock::Wall => "wall",
    };
    let common = format!("\"date\": {}, \"cpu\": {}, \"clock\": \"{clock}\"", string(&setup.date), string(&setup.cpu));
    for r in rows {
        let (g, n, t, note, lo, hi) = match &r.result {
            Ok(x) => (Some(x.gbps), Some(x.ns_per_op), x.trials, String::new(), Some(x.gbps_min), Some(x.gbps_max)),
            Err(e) => (None, None, 0, e.clone(), None, None),
        };
        items.push(format!(
            "{{\"kind\": \"throughput\", \"method\": {}, \"description\": {}, \"size_bytes\": {}, \"threads\": {}, \
             \"processes\": {}, \"gbps\": {}, \"ns_per_op\": {}, \"ratio_to_ceiling\": {}, \"ceiling_method\": {}, \"trials\": {t}, \
             \"gbps_min\": {}, \"gbps_max\": {}, \"available\": {}, \"note\": {}, {common}}}",
            string(r.method.name()),
            string(r.method.describe()),
            r.size,
            r.threads,
            r.method.processes(),
            num(g),
            num(n),
            num(r.ratio),
            r.ceiling.map_or("null".to_string(), |c| string(c.name())),
            num(lo),
            num(hi),
            r.result.is_ok(),
            string(&note),
        ));
    }
    for r in rec {
        let f = r.result.as_ref().ok();
        items.push(format!(
            "{{\"kind\": \"recovery\", \"method\": \"open_1gib_pool\", \"size_bytes\": {}, \"threads\": 1, \
             \"gbps\": {}, \"ns_per_op\": {}, \"ratio_to_ceiling\": null, \"records\": {}, \"open_ms\": {}, \
             \"open_after_crash_ms\": {}, \"records_per_s\": {}, \"index_bytes_per_record\": {}, \"available\": {}, \
             \"note\": {}, {common}}}",
            r.record,
            num(f.map(|f| f.scan_gbps())),
            num(f.map(|f| f.scan.as_secs_f64() * 1e9 / f.records.max(1) as f64)),
            f.map_or(0, |f| f.records),
            num(f.map(|f| f.open.as_secs_f64() * 1e3)),
            num(f.map(|f| f.scan.as_secs_f64() * 1e3)),
            num(f.map(|f| f.records_per_s())),
            num(f.map(|f| f.index_bytes_per_record())),
            f.is_some(),
            string(r.result.as_ref().err().map_or("", |e| e.as_str())),
        ));
    }
    format!("[\n  {}\n]\n", items.join(",\n  "))
}
