//! `nvs demo`: the NVStream workflow in one process, in seconds.
//!
//! A "simulation" writer puts K arrays per time step as one batch (one commit per step)
//! into a fresh pool; a reader opens the pool read-only alongside the live writer
//! half-way, then catches up once the writer closes and checks every byte of every
//! version. Put throughput is measured next to a plain `memcpy` of the same bytes into
//! a same-sized mapping on the same file system, in the same run (compared
//! side by side, as ratios). Contents are a pure function of (step, array), so
//! the reader can check them without keeping a copy.
//!
//! Invariant: every file the demo creates is removed when it ends, on success or error;
//! a file it did not create is never touched.

use super::output::stdout;
use super::size::human;
use super::CliError;
use memmap2::MmapOptions;
use nvs_core::internals::format::{line_up, object_len, DATA_OFF, LINE, SEGMENT_MIN};
use nvs_core::Object;
use nvs_std::{Access, CreateOptions, Durability, FilePool};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Array names of the simulation (more arrays are called `array4`, `array5`, ...).
const NAMES: [&str; 4] = ["temperature", "pressure", "velocity", "density"];
/// Segments are sized to hold about this many bytes of batches.
const SEGMENT_TARGET: u64 = 16 << 20;

pub fn run(
    dir: Option<PathBuf>,
    steps: u64,
    arrays: usize,
    size: u64,
    durability: Option<Durability>,
) -> Result<(), CliError> {
    let too_large = || CliError::Usage("demo too large for this machine".into());
    let size_us = usize::try_from(size).map_err(|_| too_large())?;
    let names: Vec<Vec<u8>> = (0..arrays)
        .map(|k| match NAMES.get(k) {
            Some(n) => n.as_bytes().to_vec(),
            None => format!("array{k}").into_bytes(),
        })
        .collect();
    // Geometry: whole batches per segment, segments of about SEGMENT_TARGET bytes.
    let unit_len =
        names.iter().try_fold(LINE, |acc, n| acc.checked_add(object_len(n.len(), size))).ok_or_else(too_large)?;
    let per_seg = (SEGMENT_TARGET / unit_len).max(1);
    let seg = per_seg
        .checked_mul(unit_len)
        .and_then(|b| b.checked_add(LINE))
        .map(|b| b.next_multiple_of(SEGMENT_MIN))
        .ok_or_else(too_large)?;
    let per_seg = (seg - LINE) / unit_len;
    let pool_len =
        steps.div_ceil(per_seg).checked_mul(seg).and_then(|b| b.checked_add(DATA_OFF)).ok_or_else(too_large)?;
    let total = steps.checked_mul(arrays as u64).and_then(|n| n.checked_mul(size)).ok_or_else(too_large)?;

    let dir = match dir {
        Some(d) => d,
        None => default_dir(),
    };
    let pid = std::process::id();
    let pool_path = dir.join(format!("nvs-demo-{pid}.pool"));
    let scratch_path = dir.join(format!("nvs-demo-{pid}.memcpy"));
    let mut cleanup = Cleanup(Vec::new());

    let opts = CreateOptions {
        segment_len: Some(seg),
        lanes_max: 1,
        payload_checksum: true, // the default: every payload checksummed by its own copy
        durability,
        // Page faults would dominate both sides of the comparison; pay them up front.
        populate: true,
        ..CreateOptions::default()
    };
    let mut writer = FilePool::create(&pool_path, pool_len, &opts)?;
    cleanup.0.push(pool_path.clone());
    let sb = writer.layout();
    let mode = writer.media().durability();
    let mut out = format!(
        "nvs demo: pool {} ({} in {} segments of {}), {}\n",
        pool_path.display(),
        human(sb.pool_len),
        sb.segment_count,
        human(sb.segment_len),
        mode.describe_on(writer.media().backing())
    );
    out += &format!(
        "writer:  {steps} steps x {arrays} arrays ({}) x {}, one batch (one commit) per step\n",
        names.iter().map(|n| String::from_utf8_lossy(n)).collect::<Vec<_>>().join(", "),
        human(size)
    );

    // The writer, with a reader joining half-way.
    let mut bufs = vec![vec![0u8; size_us]; arrays];
    let reader_at = steps.div_ceil(2);
    let mut reader = None;
    let mut put_time = Duration::ZERO;
    for step in 1..=steps {
        for (k, b) in bufs.iter_mut().enumerate() {
            fill(step, k as u64, b);
        }
        let objects: Vec<Object<'_>> = names.iter().zip(&bufs).map(|(n, b)| Object::new(n, b)).collect();
        let t = Instant::now();
        let versions = writer.put_batch(0, &objects)?;
        put_time += t.elapsed();
        if versions.iter().any(|&v| v != step) {
            return Err(CliError::Mismatch(format!("step {step} committed versions {versions:?}")));
        }
        if step == reader_at {
            let r = FilePool::open(&pool_path, Access::ReadOnly)?;
            let seen = r.latest(&names[0]).unwrap_or(0);
            if seen != step {
                return Err(CliError::Mismatch(format!("reader opened after step {step} saw latest version {seen}")));
            }
            out += &format!(
                "reader:  opened read-only alongside the live writer after step {step}: \
                 sees versions 1..={seen} of every array\n"
            );
            reader = Some(r);
        }
    }
    drop(writer);

    let memcpy_time = memcpy_baseline(&scratch_path, pool_len, steps, &mut bufs, &mut cleanup)?;
    out += &rate("put:    ", total, put_time, "");
    out += &rate("memcpy: ", total, memcpy_time, "  (the same bytes into a same-sized mapping; both pre-faulted)");
    if !put_time.is_zero() && !memcpy_time.is_zero() {
        out += &format!("ratio:   put/memcpy throughput = {:.2}\n", memcpy_time.as_secs_f64() / put_time.as_secs_f64());
    }

    // The reader catches up with everything the writer committed and checks every byte.
    let mut r = match reader {
        Some(r) => r,
        None => FilePool::open(&pool_path, Access::ReadOnly)?,
    };
    r.refresh()?;
    let mut got = vec![0u8; size_us];
    let mut get_time = Duration::ZERO;
    for step in 1..=steps {
        for (k, (name, want)) in names.iter().zip(bufs.iter_mut()).enumerate() {
            fill(step, k as u64, want);
            let t = Instant::now();
            let n = r.get(name, step, &mut got)?;
            get_time += t.elapsed();
            if n != size_us || got != *want {
                return Err(CliError::Mismatch(format!(
                    "{} version {step} read back differs from what was written",
                    String::from_utf8_lossy(name)
                )));
            }
        }
    }
    out += &rate(
        "get:    ",
        total,
        get_time,
        &format!("  (reader, after the writer closed: {} objects, every byte checked: ok)", steps * arrays as u64),
    );
    drop(r);
    drop(cleanup);
    out += &format!("removed {}\n", pool_path.display());
    stdout(&out)
}

/// Time a plain memcpy of every step's arrays into a fresh mapping of `len` bytes, made
/// the same way as the pool file (same directory, space reserved the same way).
fn memcpy_baseline(
    path: &Path,
    len: u64,
    steps: u64,
    bufs: &mut [Vec<u8>],
    cleanup: &mut Cleanup,
) -> Result<Duration, CliError> {
    let io = |what: &str, e| CliError::io(format!("cannot {what} {}", path.display()), e);
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(path).map_err(|e| io("create", e))?;
    cleanup.0.push(path.to_path_buf());
    file.set_len(len).map_err(|e| io("size", e))?;
    let off_len = libc::off_t::try_from(len).map_err(|_| io("size", std::io::ErrorKind::InvalidInput.into()))?;
    // SAFETY: plain system call on a descriptor `file` keeps open during the call.
    let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off_len) };
    if rc != 0 && rc != libc::EOPNOTSUPP {
        return Err(io("allocate", std::io::Error::from_raw_os_error(rc)));
    }
    // SAFETY: this process just created the file under a private, pid-named path
    // (create_new), so nothing else maps, truncates or writes it while we hold the map.
    let mut map = unsafe { MmapOptions::new().populate().map_mut(&file) }.map_err(|e| io("map", e))?;
    let mut off = DATA_OFF as usize;
    let mut spent = Duration::ZERO;
    for step in 1..=steps {
        for (k, b) in bufs.iter_mut().enumerate() {
            fill(step, k as u64, b);
        }
        for b in bufs.iter() {
            let end = off + b.len();
            let Some(dst) = map.get_mut(off..end) else {
                break;
            };
            let t = Instant::now();
            dst.copy_from_slice(b);
            spent += t.elapsed();
            // Same spacing as the pool's records: each array starts on a cache line.
            off += line_up(b.len() as u64) as usize;
        }
    }
    Ok(spent)
}

/// `label  <size> in <s> = <GB/s>` on one line (GB = 1e9 bytes).
fn rate(label: &str, bytes: u64, t: Duration, note: &str) -> String {
    let s = t.as_secs_f64();
    let gbs = if s > 0.0 { bytes as f64 / s / 1e9 } else { 0.0 };
    format!("{label}{} in {s:.4} s = {gbs:.2} GB/s{note}\n", human(bytes))
}

/// The contents of `array` at `step`: distinct for every (step, array, word).
fn fill(step: u64, array: u64, buf: &mut [u8]) {
    let seed = ((step << 16) ^ array).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let w = (seed ^ i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
    }
}

/// `/dev/shm` (memory, as the NVStream paper emulated persistent memory) if this process
/// can write there, else the system's temporary directory.
pub(super) fn default_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    let probe = shm.join(format!("nvs-demo-{}.probe", std::process::id()));
    let writable = OpenOptions::new().write(true).create_new(true).open(&probe).is_ok();
    if writable {
        let _ = std::fs::remove_file(&probe);
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Files the demo created, removed when it ends however it ends.
pub(super) struct Cleanup(pub(super) Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in self.0.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}
