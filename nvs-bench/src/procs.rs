//! The two-process row (`nvs_put_2proc`): nvs put from two writer processes at once,
//! each on its own lane of one pool file made with lane names
//! (`FilePool::open_lanes`), next to the 2-thread rows of one process.
//!
//! This process (the parent) owns the pool file; before every trial it formats it anew
//! (lane names, 2 lanes, the segment size the 1-process put rows use for the object
//! size), then starts two workers — the `worker` command [`crate::BenchOptions`] names,
//! `nvs bench-worker`, running [`worker`] — one per lane. Each opens its lane, reserves
//! room in its index for as many objects as the pool holds (`FilePool::reserve`: the
//! 1-process rows' pools hand their index memory on from trial to trial, so their puts
//! do not grow an index either; a new process's would, at 1 KiB ~9,000 page faults in a
//! trial), touches every page of the mapping (page faults are not the subject: the
//! 1-process rows' mappings are pre-faulted too), says `ready` on stdout and waits for a `go` line on
//! stdin; the parent sends both their `go` once both are ready. Each then runs the put loop of the
//! 1-process put row for the trial's budget — when the pool is full, it releases its own
//! lane's older segments (`reclaim`, keeping the latest version; paused out of the
//! timed part, as the 1-process rows pause out their reformat) — and answers `done
//! OBJECTS BYTES NANOSECONDS` (the time by the bench's clock), then exits. The row is
//! the aggregate of the two, as the 2-thread rows aggregate their threads.
//!
//! Nothing waits without a bound: the parent reads each worker's stdout on a thread and
//! waits for each line with a timeout, and kills (and reaps) a worker that is late,
//! fails or outlives its trial; a worker whose parent is gone sees its stdin end, and a
//! worker's put loop ends by a hard deadline even if its lane could not get space.

use crate::run::{cpu_now, make_file, segment_for, Clock, Measured, NAME};
use crate::{Error, Result};
use memmap2::MmapOptions;
use nvs_core::internals::format::{object_len, LINE};
use nvs_core::{FormatOptions, HeapMemory, Media, Object, Pool};
use nvs_std::{Access, FilePool, MappedMedia};
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Writer processes (and lanes) of the row.
pub const PROCESSES: u32 = 2;
/// How long a worker may take to open its lane and touch its mapping.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a worker may take to exit after its answer.
const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// The latest a worker's put loop ends, whatever it measured: its lane may find no
/// space for a while (the other lane holds it until that one's next reclaim).
fn hard_deadline(budget: Duration) -> Duration {
    budget * 4 + Duration::from_secs(5)
}

/// The pool file both workers write, and how to start them.
pub struct Shared {
    path: PathBuf,
    file: File,
    len: usize,
    pool_id: u64,
    /// Program and leading arguments of a worker (`nvs bench-worker`).
    worker: Vec<OsString>,
}

impl Shared {
    /// Make the pool file, `len` bytes in `dir` (its path goes to `files`, for removal).
    pub fn new(dir: &Path, len: usize, worker: Vec<OsString>, files: &mut crate::Cleanup) -> Result<Shared, String> {
        if worker.is_empty() {
            return Err("no worker command".into());
        }
        let path = dir.join(format!("nvs-bench-{}-2proc.pool", std::process::id()));
        files.push(path.clone());
        let file = make_file(&path, len)?;
        // Have the pages made (zeroed) once, here, not by the workers' first trial.
        MmapOptions::new()
            .len(len)
            .populate()
            .map_raw(&file)
            .map_err(|e| format!("cannot map {}: {e}", path.display()))?;
        Ok(Shared { path, file, len, pool_id: 0x6e76_7332_7072_6f63, worker })
    }

    /// Format the file as a fresh pool with lane names, one lane per worker, segments of
    /// `seg` bytes (no worker is running).
    fn format(&mut self, seg: u64) -> Result<(), String> {
        let media = MappedMedia::map(&self.file, &self.path, Access::ReadWrite, None, false)
            .map_err(|e| format!("map {}: {e}", self.path.display()))?;
        self.pool_id = self.pool_id.wrapping_add(1);
        let mut o = FormatOptions::new(self.pool_id);
        o.segment_len = Some(seg);
        o.lanes_max = PROCESSES;
        o.lane_names = true;
        Pool::format(media, o, HeapMemory::new()).map_err(|e| format!("format: {e}"))?;
        Ok(())
    }

    /// One trial: both workers put objects of `size` bytes for about `budget`, started
    /// together; their aggregate rate, as one measurement over one second.
    pub fn trial(&mut self, size: usize, budget: Duration, clock: Clock) -> Result<Measured, String> {
        self.format(segment_for(object_len(NAME.len(), size as u64) + LINE, self.len)?)?;
        let mut workers = Vec::new();
        for lane in 0..PROCESSES {
            workers.push(Worker::spawn(&self.worker, &self.path, lane, size, budget, clock)?);
        }
        for w in &mut workers {
            w.expect("ready", READY_TIMEOUT)?;
        }
        for w in &mut workers {
            w.send("go")?;
        }
        let mut parts = Vec::new();
        for w in &mut workers {
            let done = hard_deadline(budget) + Duration::from_secs(30);
            let line = w.line(done)?;
            parts.push(parse_done(&line).ok_or_else(|| w.fail(format!("answered {line:?}")))?);
        }
        for w in workers {
            w.finish()?;
        }
        Ok(crate::aggregate(&parts))
    }
}

/// `done OBJECTS BYTES NANOSECONDS`.
fn parse_done(line: &str) -> Option<Measured> {
    let mut f = line.strip_prefix("done ")?.split(' ').map(|x| x.parse::<u64>());
    let (objects, bytes, ns) = (f.next()?.ok()?, f.next()?.ok()?, f.next()?.ok()?);
    Some(Measured { objects, bytes, time: Duration::from_nanos(ns) })
}

/// A running worker: its stdin (for `go`), its stdout lines and its stderr (read by a
/// thread each, so every wait for them has a timeout: stderr, for errors, whole when it
/// ends). Dropped, it is killed and reaped.
struct Worker {
    lane: u32,
    child: Child,
    /// Killed by a signal that ends the bench, until it is waited for.
    registered: crate::signals::Worker,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
}

impl Worker {
    fn spawn(
        cmd: &[OsString],
        pool: &Path,
        lane: u32,
        size: usize,
        budget: Duration,
        clock: Clock,
    ) -> Result<Worker, String> {
        let clock = match clock {
            Clock::Cpu => "cpu",
            Clock::Wall => "wall",
        };
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .arg(pool)
            .args([lane.to_string(), size.to_string(), budget.as_nanos().to_string(), clock.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start a worker ({}): {e}", cmd[0].to_string_lossy()))?;
        let (tx, lines) = mpsc::channel();
        let (etx, stderr) = mpsc::channel();
        // The readers end when the worker's pipes close (when it ends).
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(std::result::Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        if let Some(mut err) = child.stderr.take() {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = err.read_to_string(&mut s);
                let _ = etx.send(s);
            });
        }
        let stdin = child.stdin.take();
        let registered = crate::signals::Worker::new(child.id());
        Ok(Worker { lane, child, registered, stdin, lines, stderr })
    }

    /// Its next stdout line, within `timeout`.
    fn line(&mut self, timeout: Duration) -> Result<String, String> {
        match self.lines.recv_timeout(timeout) {
            Ok(l) => Ok(l),
            Err(RecvTimeoutError::Timeout) => {
                Err(self.fail(format!("no answer within {:.1} s", timeout.as_secs_f64())))
            }
            Err(RecvTimeoutError::Disconnected) => Err(self.fail("ended without an answer".into())),
        }
    }

    /// Its next stdout line, which must be `what`.
    fn expect(&mut self, what: &str, timeout: Duration) -> Result<(), String> {
        let line = self.line(timeout)?;
        if line != what {
            return Err(self.fail(format!("answered {line:?}, not {what:?}")));
        }
        Ok(())
    }

    fn send(&mut self, line: &str) -> Result<(), String> {
        let r = match self.stdin.as_mut() {
            Some(i) => i.write_all(format!("{line}\n").as_bytes()),
            None => Ok(()),
        };
        r.map_err(|e| self.fail(format!("cannot write to it: {e}")))
    }

    /// Kill it (if it still runs), reap it, and say why it failed: `what`, its exit
    /// status, the last line of its stderr.
    fn fail(&mut self, what: String) -> String {
        let _ = self.child.kill();
        self.registered.forget();
        let status = self.child.wait().map(|s| format!(" ({s})")).unwrap_or_default();
        // Whole once the pipe closes (a process the worker started may still hold it).
        let err = self.stderr.recv_timeout(Duration::from_secs(1)).unwrap_or_default();
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).map(|l| format!(": {}", l.trim()));
        format!("worker on lane {}: {what}{status}{}", self.lane, last.unwrap_or_default())
    }

    /// Let it exit (it does after its answer): `Err` if it fails or takes too long.
    fn finish(mut self) -> Result<(), String> {
        self.stdin = None;
        // It has answered and its stdin is closed: it ends on its own, signal or not.
        self.registered.forget();
        let t0 = Instant::now();
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(_)) => return Err(self.fail("failed".into())),
                Ok(None) if t0.elapsed() < EXIT_TIMEOUT => std::thread::sleep(Duration::from_millis(1)),
                Ok(None) => return Err(self.fail("did not exit".into())),
                Err(e) => return Err(self.fail(format!("cannot wait for it: {e}"))),
            }
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Already reaped: kill and wait do nothing.
        let _ = self.child.kill();
        self.registered.forget();
        let _ = self.child.wait();
    }
}

/// What the parent passes a worker: `POOL LANE SIZE BUDGET_NS CLOCK`.
struct WorkerArgs {
    pool: PathBuf,
    lane: u32,
    size: usize,
    budget: Duration,
    clock: Clock,
}

impl WorkerArgs {
    fn parse(args: &[OsString]) -> Result<WorkerArgs> {
        let usage =
            || Error::Usage("bench-worker: expected POOL LANE SIZE BUDGET_NS cpu|wall (nvs bench starts it)".into());
        let [pool, lane, size, budget, clock] = args else { return Err(usage()) };
        let num = |s: &OsString| s.to_str().and_then(|s| s.parse::<u64>().ok()).ok_or_else(usage);
        Ok(WorkerArgs {
            pool: PathBuf::from(pool),
            lane: u32::try_from(num(lane)?).map_err(|_| usage())?,
            size: usize::try_from(num(size)?).ok().filter(|&s| s > 0).ok_or_else(usage)?,
            budget: Duration::from_nanos(num(budget)?),
            clock: match clock.to_str() {
                Some("cpu") => Clock::Cpu,
                Some("wall") => Clock::Wall,
                _ => return Err(usage()),
            },
        })
    }
}

/// A worker of the two-process row (`nvs bench-worker`, started by [`crate::run`]; `args`
/// are its arguments after the subcommand): open lane LANE of the pool POOL, touch every
/// page of the mapping, write `ready` to `output`, wait for a `go` line on `input`, put
/// objects of SIZE bytes for BUDGET_NS nanoseconds (by the CPU or the wall clock), then
/// write `done OBJECTS BYTES NANOSECONDS`.
pub fn worker(args: &[OsString], input: &mut dyn BufRead, output: &mut dyn Write) -> Result<()> {
    let a = WorkerArgs::parse(args)?;
    // A CPU of its own, as the threads of the 2-thread rows have.
    let _pinned = crate::Pinned::to(a.lane as usize);
    let mut pool = FilePool::open_lanes(&a.pool, Some(&[a.lane]))?;
    pool.set_delta_check(false);
    let unit = object_len(NAME.len(), a.size as u64) + LINE;
    pool.reserve(usize::try_from(pool.media().len() as u64 / unit).unwrap_or(usize::MAX), 1)?;
    touch_every_page(pool.media());
    let src: Vec<u8> = (0..a.size).map(|i| (i as u64).wrapping_mul(0x9E37_79B9) as u8 ^ a.lane as u8).collect();
    let io = |what: &str| {
        let what = format!("bench-worker: cannot {what}");
        move |e| Error::io(what, e)
    };
    output.write_all(b"ready\n").and_then(|()| output.flush()).map_err(io("write stdout"))?;
    let mut line = String::new();
    input.read_line(&mut line).map_err(io("read stdin"))?;
    if line.trim_end() != "go" {
        return Err(Error::Usage(format!("bench-worker: expected go on stdin, read {line:?}")));
    }
    let m = put_loop(&mut pool, a.lane, &src, a.budget, a.clock)?;
    let done = format!("done {} {} {}\n", m.objects, m.bytes, m.time.as_nanos());
    output.write_all(done.as_bytes()).and_then(|()| output.flush()).map_err(io("write stdout"))?;
    Ok(())
}

/// Read a word of every page, so the put loop pays no page faults (on tmpfs a read
/// fault maps the page writable, and its neighbours with it).
fn touch_every_page(media: &MappedMedia) {
    let mut word = [0u8; 8];
    for off in (0..media.len()).step_by(4096) {
        media.read(off, &mut word);
    }
}

/// The 1-process put row's loop, through the pool a worker opened: puts of `src` on
/// `lane` until `budget` of the clock's time has passed; when the pool is full, release
/// this lane's older segments (paused out of the measurement).
fn put_loop(pool: &mut FilePool, lane: u32, src: &[u8], budget: Duration, clock: Clock) -> Result<Measured> {
    // Puts between clock reads: about 256 KiB of objects.
    let chunk = ((256usize << 10) / src.len()).max(1);
    let (mut paused, mut paused_cpu) = (Duration::ZERO, Duration::ZERO);
    let mut objects = 0u64;
    let deadline = hard_deadline(budget);
    let t0 = Instant::now();
    let c0 = cpu_now();
    while t0.elapsed() < budget + paused && t0.elapsed() < deadline {
        for _ in 0..chunk {
            match pool.put(lane, Object::new(NAME, src)) {
                Ok(_) => objects += 1,
                Err(e) if e.core() == Some(nvs_core::Error::Full) => {
                    let (p, pc) = (Instant::now(), cpu_now());
                    if pool.reclaim(1)? == 0 {
                        // Every segment but this lane's latest is the other lane's: wait
                        // for that one to release its own.
                        std::thread::sleep(Duration::from_micros(100));
                    }
                    paused += p.elapsed();
                    paused_cpu += cpu_now().saturating_sub(pc);
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    let wall = t0.elapsed().saturating_sub(paused);
    let cpu = cpu_now().saturating_sub(c0).saturating_sub(paused_cpu);
    let time = if clock == Clock::Cpu && !cpu.is_zero() { cpu } else { wall };
    Ok(Measured { objects, bytes: objects * src.len() as u64, time })
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvs_std::CreateOptions;
    use std::io::Cursor;

    /// A scratch file path in the bench's default directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(what: &str) -> Scratch {
            Scratch(crate::default_dir().join(format!("nvs-bench-test-{}-{what}", std::process::id())))
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    /// A worker on lane 1 of a small pool of lane names: `ready`, then on `go` it puts
    /// past the pool's size (reclaiming its own lane) and answers what it did; the
    /// objects are on its lane.
    #[test]
    fn worker_answers_and_reclaims_when_full() {
        let pool = Scratch::new("worker.pool");
        let opts = CreateOptions::new().lane_names(true).lanes_max(2).segment_len(4 << 20);
        drop(FilePool::create(&pool.0, 16 << 20, &opts).unwrap());
        let size = 1usize << 20;
        let args = [pool.0.clone().into_os_string()]
            .into_iter()
            .chain(os(&["1", &size.to_string(), "300000000", "wall"]))
            .collect::<Vec<_>>();
        let mut out = Vec::new();
        worker(&args, &mut Cursor::new("go\n"), &mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        let done = out.strip_prefix("ready\n").and_then(|d| parse_done(d.trim_end())).expect(&out);
        assert!(done.objects > 16, "more than the pool holds at once: {out}");
        assert_eq!(done.bytes, done.objects * size as u64);
        assert!(done.time >= Duration::from_millis(300) && done.time < Duration::from_secs(5), "{out}");
        let p = FilePool::open(&pool.0, Access::ReadOnly).unwrap();
        assert_eq!(p.latest(nvs_core::Key::on(1, NAME)).unwrap(), done.objects);
    }

    #[test]
    fn worker_refuses_bad_arguments_and_no_go() {
        let mut out = Vec::new();
        for bad in
            [&["p"][..], &["p", "x", "1", "1", "cpu"], &["p", "0", "0", "1", "cpu"], &["p", "0", "1", "1", "sun"]]
        {
            let e = worker(&os(bad), &mut Cursor::new("go\n"), &mut out).unwrap_err();
            assert!(e.to_string().starts_with("bench-worker: expected POOL"), "{e}");
        }
        let pool = Scratch::new("nogo.pool");
        drop(FilePool::create(&pool.0, 16 << 20, &CreateOptions::new().lane_names(true)).unwrap());
        let args =
            [pool.0.clone().into_os_string()].into_iter().chain(os(&["0", "1024", "1000", "cpu"])).collect::<Vec<_>>();
        let e = worker(&args, &mut Cursor::new(""), &mut out).unwrap_err();
        assert!(e.to_string().contains("expected go"), "{e}");
        assert_eq!(out, b"ready\n");
    }

    /// The parent's side with stand-in workers (shell scripts speaking the protocol): the
    /// aggregate of their answers; a worker that fails is reported with its stderr.
    #[test]
    fn trial_aggregates_workers_and_reports_failures() {
        let mut files = crate::Cleanup::new();
        let dir = crate::default_dir();
        let good = os(&["sh", "-c", "echo ready; read go; echo done 10 10240 1000000000", "sh"]);
        let mut s = Shared::new(&dir, 32 << 20, good, &mut files).unwrap();
        let m = s.trial(1024, Duration::from_millis(1), Clock::Cpu).unwrap();
        assert_eq!((m.objects, m.bytes, m.time), (20, 20480, Duration::from_secs(1)));
        s.worker = os(&["sh", "-c", "echo ready; read go; echo 'nvs: no lane' >&2; exit 3", "sh"]);
        let e = s.trial(1024, Duration::from_millis(1), Clock::Cpu).unwrap_err();
        assert!(e.contains("worker on lane 0: ended without an answer") && e.ends_with(": nvs: no lane"), "{e}");
        s.worker = os(&["sh", "-c", "echo ready; read go; echo done x", "sh"]);
        let e = s.trial(1024, Duration::from_millis(1), Clock::Cpu).unwrap_err();
        assert!(e.contains("answered \"done x\""), "{e}");
        s.worker = os(&["/nonexistent/nvs"]);
        assert!(s.trial(1024, Duration::from_millis(1), Clock::Cpu).unwrap_err().starts_with("cannot start a worker"));
    }

    /// A worker that does not answer in time is killed and reaped, and the wait ends.
    #[test]
    fn silent_worker_is_killed() {
        let t0 = Instant::now();
        let cmd = os(&["sh", "-c", "echo ready; exec sleep 30", "sh"]);
        let mut w = Worker::spawn(&cmd, Path::new("p"), 0, 1, Duration::ZERO, Clock::Cpu).unwrap();
        w.expect("ready", Duration::from_secs(10)).unwrap();
        let e = w.line(Duration::from_millis(200)).unwrap_err();
        assert!(e.starts_with("worker on lane 0: no answer within 0.2 s (signal: 9"), "{e}");
        assert!(w.child.try_wait().unwrap().is_some(), "reaped");
        assert!(t0.elapsed() < Duration::from_secs(10));
    }
}
