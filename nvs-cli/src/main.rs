//! `nvs`: the command-line tool for nvs pools (create, put, get, ls, info, check, dump,
//! salvage, follow, hold, demo, bench, bench-delta): argument parsing, error reporting and exit codes. The
//! benchmarks themselves live in the `nvs-bench` library; this crate parses their
//! options and prints their reports.
//!
//! Every failure prints exactly one line, `nvs: <message>`, on stderr, and exits with:
//! - 0: success;
//! - 1: the pool's bytes are bad (corrupted, or not a pool at all), or a verification
//!   found a mismatch, or `dump` found damage, or `salvage` could not copy everything;
//! - 2: a usage error (bad arguments), an I/O or lock error, or any other refusal
//!   (no such object, pool full, unsupported format version, ...);
//! - 3: `follow`: the writer died without closing its lanes;
//! - 4: `put`: committed, but the version could not be printed (stderr names it);
//! - `hold`: its command's status; 125, 126, 127 for its own failures (the pool not held,
//!   the command not runnable, not found).
//!
//! Nothing here panics on user input: arguments are parsed by clap into typed values
//! (sizes by [`size::parse_size`]), and every fallible step returns a [`CliError`].

mod commands;
mod demo;
mod follow;
mod inspect;
mod json;
mod migrate;
mod output;
mod progress;
mod salvage;
mod sigbus;
mod size;
mod stress;

use clap::{Parser, Subcommand};
use nvs_std::Durability;
use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;

const AFTER_HELP: &str = "\
Exit codes: 0 ok; 1 corruption found (or not a pool, or a verification mismatch; dump: \
damage found; salvage: something lost or the pool damaged); \
2 usage, I/O, lock or other error; 3 (follow) the writer died without closing; \
hold: the command's status, 125-127 its own failures.
Durability (--durability): dax on /dev/dax devices, msync by default on a disk file \
(power-loss durable), process by default on tmpfs such as /dev/shm (survives a \
process crash only; choose it on a disk file for speed without power-loss durability).";

/// nvs: versioned, immutable objects in a persistent-memory log (NVStream).
#[derive(Parser, Debug)]
#[command(name = "nvs", version, after_help = AFTER_HELP)]
struct Cli {
    /// How writes are made durable: dax, msync or process (default: chosen from the file).
    #[arg(long, global = true, value_parser = parse_durability)]
    durability: Option<Durability>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create and format a new pool file (never overwrites), or format a /dev/dax device
    /// in place.
    Create {
        pool: PathBuf,
        /// Pool size: bytes, or with a suffix K, M, G, T (powers of 1024). Needed for a
        /// file; a /dev/dax device's pool spans the device (a size says the least it
        /// must hold).
        #[arg(long, value_parser = size::parse_size)]
        size: Option<u64>,
        /// Segment size (default: about 1/16 of the pool, 4 KiB to 64 MiB).
        #[arg(long, value_parser = size::parse_size)]
        segment_size: Option<u64>,
        /// Number of writer lanes.
        #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=256))]
        lanes: u32,
        /// Do not checksum payloads (by default every payload is, and get and check
        /// verify it).
        #[arg(long)]
        no_payload_checksum: bool,
        /// Checksum every payload: the default, accepted for older scripts.
        #[arg(long, hide = true, conflicts_with = "no_payload_checksum")]
        payload_checksum: bool,
        /// Give every lane names of its own: ranks putting the same name each get their
        /// own versions 1, 2, 3...; `get --lane` reads one lane's.
        #[arg(long)]
        lane_names: bool,
        /// Format a /dev/dax device that holds a pool already (its objects are lost).
        /// Never overwrites a file.
        #[arg(long)]
        replace: bool,
        /// A sparse pool: the file gets its blocks as segments fill, not all now (a
        /// file system that fills refuses the put needing a new segment).
        #[arg(long)]
        sparse: bool,
    },
    /// Put FILE (or stdin) as the next version of NAME; prints the committed version
    /// (exit 4 if it was committed but stdout cannot take the version: stderr names it).
    Put {
        pool: PathBuf,
        name: OsString,
        /// Input file; `-` or nothing reads stdin.
        file: Option<PathBuf>,
        /// Writer lane (default 0; in a pool with lane names, the lane that holds NAME
        /// already, waited for while another process writes it, lane 0 for a new NAME;
        /// a NAME several lanes hold needs --lane).
        #[arg(long)]
        lane: Option<u32>,
        /// Explicit version (must exceed the latest).
        #[arg(long)]
        version: Option<u64>,
        /// Put on a lane whose stream was ended (`nvs close`, a writer's close): its
        /// followers saw the end, and this starts it again. Without it such a put is refused.
        #[arg(long)]
        reopen: bool,
        /// Store only the 4 KiB chunks that differ from the latest version (a delta),
        /// when that saves enough; prints the version and what was stored.
        #[arg(long, conflicts_with = "version")]
        delta: bool,
        /// Metadata stored with the object, under its commit: KEY=VALUE, repeatable
        /// (e.g. --meta dtype=<f8 --meta shape=100,200); shown by `ls -l`.
        #[arg(long, value_name = "KEY=VALUE", conflicts_with = "delta")]
        meta: Vec<String>,
    },
    /// Write a version of NAME (default: the latest) to stdout or a file.
    Get {
        pool: PathBuf,
        name: OsString,
        #[arg(long)]
        version: Option<u64>,
        /// The lane whose NAME to read (needed in a pool with lane names when several
        /// lanes hold NAME; elsewhere only a version that lane wrote is read).
        #[arg(long)]
        lane: Option<u32>,
        /// Output file instead of stdout.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// List names with their versions and sizes.
    Ls {
        pool: PathBuf,
        /// One line per version.
        #[arg(short, long)]
        long: bool,
        /// One JSON object per version per line (name, name_hex, version, len_bytes,
        /// stored_bytes, delta_depth, lane, seq, meta).
        #[arg(long, conflicts_with = "long")]
        json: bool,
    },
    /// Show the pool's format, geometry, durability and recovery statistics.
    Info {
        pool: PathBuf,
        /// Also per lane and per segment: segments, units, objects, deltas, payload bytes,
        /// bytes in units, wasted bytes (segment space holding no unit that no put will
        /// use) and free bytes.
        #[arg(long)]
        stats: bool,
        /// One JSON object per line: the pool (kind "pool": pool, format_version,
        /// pool_id, pool_len, file_len, backing, segment_len, segment_count,
        /// segments_used, segments_free, lanes_max, lanes_in_use, payload_checksum,
        /// deltas, durability, units, objects, payload_bytes, index_bytes, open_us);
        /// with --stats also kind "lane", "segment" and "free" lines (see the README).
        #[arg(long)]
        json: bool,
    },
    /// Open read-only, recover, verify every payload checksum; exit 1 on corruption.
    Check {
        pool: PathBuf,
        /// The verdict as one JSON object (pool, clean, objects, units, lanes,
        /// segments_used, segment_count, payload_bytes, payload_checksum).
        #[arg(long)]
        json: bool,
    },
    /// Show every segment, unit and object as the bytes lie (exit 1 if damaged).
    ///
    /// No recovery: a damaged pool is read as far as it decodes, the damage reported.
    /// Offsets, lanes, sequences, flags, lengths, checksums, each payload verified.
    /// Read-only; exit 1 (after printing it all) if damage was found.
    Dump {
        pool: PathBuf,
        /// Instead: a hex dump of the file's bytes OFF..OFF+LEN (any file; decimal, 0x
        /// hex, or K/M/G/T suffixes; clipped at the end of the file), e.g. 0x1000:256.
        #[arg(long, value_name = "OFF:LEN", value_parser = inspect::parse_range)]
        range: Option<(u64, u64)>,
    },
    /// Copy every object of BAD that still verifies into a new pool NEW; list what is lost.
    ///
    /// Names, versions and metadata are kept; deltas are stored full; NEW has BAD's
    /// geometry. BAD is only read; when its recovery fails, every segment is read as it
    /// lies.
    /// Exit 0: BAD was clean and everything was copied; 1: something was lost or BAD is
    /// damaged (listed on stdout); 2: refused (NEW exists or is BAD, ...).
    Salvage {
        bad: PathBuf,
        new: PathBuf,
        /// Size of the new pool (default: BAD's; deltas are stored full, so more may be
        /// needed).
        #[arg(long, value_parser = size::parse_size)]
        size: Option<u64>,
    },
    /// End a lane's stream (an end-of-stream marker): followers see its end.
    Close {
        pool: PathBuf,
        /// The lane to close.
        #[arg(long, default_value_t = 0)]
        lane: u32,
    },
    /// Retention: release the oldest segments whose objects all have at least KEEP newer
    /// versions (never what a kept delta is rebuilt from); prints the segments freed.
    Reclaim {
        pool: PathBuf,
        /// Versions of every name to keep.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        keep: u32,
        /// Only this lane's segments (in a pool with lane names: beside writer processes
        /// of the other lanes).
        #[arg(long)]
        lane: Option<u32>,
    },
    /// Copy every object of OLD (any format this build reads, e.g. a read-only format 1
    /// pool) into a new pool NEW of this build's format, same geometry and lanes.
    Migrate {
        old: PathBuf,
        new: PathBuf,
        /// Size of the new pool (default: OLD's).
        #[arg(long, value_parser = size::parse_size)]
        size: Option<u64>,
    },
    /// Simulation -> analytics demo: batched puts, a reader checking every byte, GB/s.
    Demo {
        /// Directory for the temporary pool (default: /dev/shm, else the temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Time steps.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        steps: u64,
        /// Arrays per step, committed as one batch.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=nvs_core::BATCH_MAX as u64))]
        arrays: u64,
        /// Bytes per array (suffixes K, M, G allowed).
        #[arg(long, default_value = "256K", value_parser = size::parse_size)]
        size: u64,
    },
    /// Hold POOL's writer locks while COMMAND runs (a VM whose guest writes the pool
    /// through an emulated NVDIMM): host writers are refused, followers see a live
    /// writer. COMMAND inherits the locks: they last while it, or any descendant that
    /// kept the descriptor, lives. SIGTERM and SIGHUP are passed on to COMMAND. Exits
    /// with COMMAND's status (128 + N if a signal N ended it); 125 if POOL could not be
    /// held, 126 if COMMAND could not run, 127 if it was not found.
    Hold {
        /// The pool file (a regular file, which need not be formatted yet, or a
        /// device-DAX device).
        pool: PathBuf,
        /// The command and its arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<OsString>,
    },
    /// Print every object as it is committed (lane, name, version, size) until the
    /// writers close their lanes (exit 0) or the writer dies (exit 3).
    Follow {
        pool: PathBuf,
        /// Only this name.
        name: Option<OsString>,
        /// Give up after this many seconds without news (exit 2).
        #[arg(long, value_parser = seconds)]
        timeout: Option<f64>,
        /// Check every object against the stress writer's pattern (exit 1 on a mismatch).
        #[arg(long, hide = true)]
        verify_stress: bool,
        /// One JSON object per committed object per line (lane, name, name_hex, version,
        /// len_bytes).
        #[arg(long)]
        json: bool,
    },
    /// Put test objects continuously, printing each acknowledged (name, version).
    #[command(hide = true)]
    StressWriter {
        pool: PathBuf,
        #[arg(long, default_value_t = 0)]
        lane: u32,
        /// Stop after this many puts and close the lane (default: until killed).
        #[arg(long)]
        count: Option<u64>,
        #[arg(long, default_value = "16K", value_parser = size::parse_size)]
        max_size: u64,
        /// Pause between puts, in microseconds.
        #[arg(long, default_value_t = 0)]
        pause_us: u64,
        /// When the pool is full, reclaim (keep this many versions per name) and go on.
        #[arg(long)]
        keep: Option<u32>,
    },
    /// Delta puts vs full puts on a miniAMR-like grid (sparse and dense changes), for
    /// every change detector: bytes stored and time per step.
    BenchDelta {
        /// Directory for the pools (default: /dev/shm, else the temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// A small grid and few steps (seconds).
        #[arg(long)]
        quick: bool,
    },
    /// Benchmark nvs next to the hardware ceiling, memcpy, PMDK, tmpfs and fsync.
    Bench {
        /// Directory for the regions (default: /dev/shm, else the temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Directory on the root file system for the pwrite + fdatasync rows.
        #[arg(long, default_value = "/var/tmp")]
        sync_dir: PathBuf,
        /// Short trials and small regions: ends within a minute.
        #[arg(long)]
        quick: bool,
        /// Trials per row (the median is reported); default 5.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1000))]
        trials: Option<u64>,
        /// Write every row as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw throughput against object size as an SVG file.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// Run only these rows (comma-separated method names as in the JSON, or
        /// `recovery`); ceilings are always run.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Rates from each thread's CPU time (`cpu`: robust when other work shares the
        /// machine; pwrite + fdatasync keeps wall time) or from wall time (`wall`).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "wall"])]
        clock: String,
    },
    /// A writer process of `nvs bench`'s two-process row (started by `nvs bench`, which
    /// passes the arguments: POOL LANE SIZE BUDGET_NS cpu|wall).
    #[command(hide = true)]
    BenchWorker {
        #[arg(allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
}

fn parse_durability(s: &str) -> Result<Durability, String> {
    s.parse()
}

/// Why a command failed; [`CliError::exit_code`] maps it to the documented codes.
#[derive(Debug)]
pub enum CliError {
    /// From the library (I/O, lock, nvs-core, ...).
    Pool(nvs_std::Error),
    /// An I/O error outside a pool (input, output, scratch files).
    Io { what: String, source: std::io::Error },
    /// Anything else the user asked that cannot be done.
    Usage(String),
    /// A verification found bytes that differ from what was written.
    Mismatch(String),
    /// `follow`: the writer died without closing its lanes.
    /// The lanes whose writer is gone.
    WriterGone(Vec<u32>),
    /// `put`: committed (durable) as this version, but stdout could not take the version.
    CommittedUnreported { what: String, version: u64, source: std::io::Error },
}

impl CliError {
    fn exit_code(&self) -> u8 {
        match self {
            CliError::Pool(e) if e.is_corruption() => 1,
            CliError::Mismatch(_) => 1,
            CliError::WriterGone(_) => 3,
            CliError::CommittedUnreported { .. } => 4,
            _ => 2,
        }
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io { what: what.into(), source }
    }
}

impl From<nvs_std::Error> for CliError {
    fn from(e: nvs_std::Error) -> Self {
        CliError::Pool(e)
    }
}

impl From<nvs_bench::Error> for CliError {
    fn from(e: nvs_bench::Error) -> Self {
        match e {
            nvs_bench::Error::Pool(e) => CliError::Pool(e),
            nvs_bench::Error::Io { what, source } => CliError::Io { what, source },
            nvs_bench::Error::Usage(m) => CliError::Usage(m),
            nvs_bench::Error::Mismatch(m) => CliError::Mismatch(m),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Pool(e) => {
                e.fmt(f)?;
                if matches!(e.core(), Some(nvs_core::Error::OldFormat { .. })) {
                    f.write_str(" (`nvs migrate OLD NEW` copies it)")?;
                }
                Ok(())
            }
            CliError::Io { what, source } => write!(f, "{what}: {source}"),
            CliError::Usage(m) | CliError::Mismatch(m) => f.write_str(m),
            CliError::WriterGone(lanes) => {
                let lanes: Vec<String> = lanes.iter().map(|l| l.to_string()).collect();
                write!(f, "writer gone: no writer holds lane {} and it was never closed", lanes.join(", "))
            }
            CliError::CommittedUnreported { what, version, source } => {
                write!(f, "{what}: committed as version {version}, but cannot write stdout: {source}")
            }
        }
    }
}

impl Command {
    /// The pool a command maps, if it maps one.
    fn pool(&self) -> Option<&std::path::Path> {
        match self {
            Command::Create { pool, .. }
            | Command::Put { pool, .. }
            | Command::Get { pool, .. }
            | Command::Ls { pool, .. }
            | Command::Info { pool, .. }
            | Command::Dump { pool, .. }
            | Command::Salvage { bad: pool, .. }
            | Command::Check { pool, .. }
            | Command::Close { pool, .. }
            | Command::Reclaim { pool, .. }
            | Command::Migrate { old: pool, .. }
            | Command::Follow { pool, .. }
            | Command::StressWriter { pool, .. } => Some(pool),
            _ => None,
        }
    }
}

/// Parse the arguments, run the command, report; the exit code is the documented one.
fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return clap_exit(e),
    };
    let d = cli.durability;
    // Past a file size limit (`ulimit -f`) a write fails with EFBIG, reported (and a
    // partial output removed) as any failed write is, instead of the kernel's SIGXFSZ
    // ending the process with nothing said.
    // SAFETY: setting a signal's disposition to ignored, before any thread starts.
    unsafe { libc::signal(libc::SIGXFSZ, libc::SIG_IGN) };
    if let Some(pool) = cli.command.pool() {
        sigbus::guard(pool);
    }
    if let Command::Hold { pool, command } = &cli.command {
        return match commands::hold(pool, command) {
            Ok(code) => code,
            Err((code, e)) => {
                output::eprintln_note(&e.to_string());
                ExitCode::from(code)
            }
        };
    }
    let r = match cli.command {
        Command::Create {
            pool,
            size,
            segment_size,
            lanes,
            no_payload_checksum,
            payload_checksum: _,
            lane_names,
            replace,
            sparse,
        } => {
            let opts = nvs_std::CreateOptions::new()
                .lanes_max(lanes)
                .payload_checksum(!no_payload_checksum)
                .lane_names(lane_names)
                .replace_device_pool(replace)
                .sparse(sparse);
            commands::create(&pool, size, nvs_std::CreateOptions { segment_len: segment_size, durability: d, ..opts })
        }
        Command::Put { pool, name, file, lane, version, reopen, delta, meta } => {
            commands::put(&pool, &name, file.as_deref(), lane, version, reopen, delta, &meta, d)
        }
        Command::Get { pool, name, version, lane, output } => {
            commands::get(&pool, &name, version, lane, output.as_deref(), d)
        }
        Command::Ls { pool, long, json } => commands::ls(&pool, long, json, d),
        Command::BenchDelta { dir, quick } => bench_delta(&nvs_bench::delta::DeltaBenchOptions { dir, quick }),
        Command::Info { pool, stats, json } => commands::info(&pool, stats, json, d),
        Command::Dump { pool, range: Some(r) } => inspect::dump_range(&pool, r),
        Command::Dump { pool, range: None } => inspect::dump(&pool),
        Command::Salvage { bad, new, size } => salvage::salvage(&bad, &new, size, d),
        Command::Check { pool, json } => commands::check(&pool, json, d),
        Command::Close { pool, lane } => commands::close(&pool, lane, d),
        Command::Reclaim { pool, keep, lane } => commands::reclaim(&pool, keep, lane, d),
        Command::Migrate { old, new, size } => migrate::migrate(&old, &new, size, d),
        Command::Follow { pool, name, timeout, verify_stress, json } => follow::follow(
            &pool,
            name.as_ref().map(|n| std::os::unix::ffi::OsStrExt::as_bytes(n.as_os_str())),
            timeout,
            verify_stress,
            json,
        ),
        Command::StressWriter { pool, lane, count, max_size, pause_us, keep } => {
            follow::stress_writer(&pool, lane, count, max_size, pause_us, keep, d)
        }
        Command::Demo { dir, steps, arrays, size } => demo::run(dir, steps, arrays as usize, size, d),
        Command::Bench { dir, sync_dir, quick, trials, json, plot, only, clock } => bench(&nvs_bench::BenchOptions {
            dir,
            sync_dir: Some(sync_dir),
            quick,
            trials: trials.map(|t| t as usize),
            json,
            plot,
            only,
            clock: if clock == "wall" { nvs_bench::Clock::Wall } else { nvs_bench::Clock::Cpu },
            durability: d,
            // This very program (even if its file was replaced since it started).
            worker: Some(vec!["/proc/self/exe".into(), "bench-worker".into()]),
        }),
        Command::Hold { .. } => unreachable!("handled above"),
        Command::BenchWorker { args } => {
            nvs_bench::worker(&args, &mut std::io::stdin().lock(), &mut std::io::stdout().lock()).map_err(Into::into)
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            output::eprintln_note(&e.to_string());
            ExitCode::from(e.exit_code())
        }
    }
}

/// `nvs bench`: run it (nvs-bench), print its report.
fn bench(opts: &nvs_bench::BenchOptions) -> Result<(), CliError> {
    output::stdout(&nvs_bench::run(opts)?)
}

/// `nvs bench-delta`: run it (nvs-bench), print its report.
fn bench_delta(opts: &nvs_bench::delta::DeltaBenchOptions) -> Result<(), CliError> {
    output::stdout(&nvs_bench::delta::run(opts)?)
}

/// Help and version go to stdout with exit 0 (clap's way); a usage error becomes one
/// line on stderr and exit 2 (clap's usage exit code).
fn clap_exit(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // Prints to stdout; if even that fails there is nowhere left to report it.
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(2);
    }
    // clap renders "error: <message>\n\n<details>\n\nUsage: ...\n\nFor more ...": keep
    // the message and its details, on one line.
    let text = e.render().to_string();
    let msg: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect();
    let msg = msg.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    output::eprintln_note(&format!("{msg} (see 'nvs --help')"));
    ExitCode::from(2)
}

/// A number of seconds that a `Duration` can hold: finite, not negative (`--timeout`).
fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number of seconds"))?;
    match std::time::Duration::try_from_secs_f64(v) {
        Ok(_) => Ok(v),
        Err(_) => Err(format!("{s} is not a number of seconds from 0 to {:e}", u64::MAX as f64)),
    }
}
