//! One thread's side of the benchmark: its files, its mappings, and one timed trial of
//! any method on them.
//!
//! Every thread has its own files in the bench directory: one region file that nvs
//! (through `MappedMedia`) and the raw methods (through a second mapping of the same
//! file, and `pwrite`) all use — the same physical memory for every row, because on a
//! VM two files of the same kind can differ by 10–20% in copy speed — a pmemlog pool
//! (PMDK makes its own file), and a file on the root file system for `pwrite` +
//! `fdatasync`. Writes walk through the whole file and wrap (or reformat the pool when
//! it is full); that bookkeeping is paused out of the timed part.
//!
//! The raw methods never run while nvs uses the region: trials run one after another,
//! and after a raw method wrote the region the pool is formatted anew (or refilled for
//! get) before nvs touches it again, so nvs never reads bytes it did not write.

use super::nt;
use super::pmdk::{Log, Pmdk};
use memmap2::{MmapOptions, MmapRaw};
use nvs_core::internals::format::{line_up, object_len, DATA_OFF, LINE};
use nvs_core::{FormatOptions, HeapMemory, Object, Pool};
use nvs_std::{Access, MappedMedia};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Objects per commit of the batched rows.
pub const BATCH: usize = 64;

/// Every row of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Ceiling,
    CeilingWide,
    CeilingBatch,
    CeilingBatchWide,
    Put,
    /// nvs put from 2 processes, each on its own lane of one pool (`procs`).
    Put2Proc,
    PutNoSum,
    Batch,
    BatchNoSum,
    Memcpy,
    /// The ceiling without its commit: what `pmem_memcpy_persist` does, by the bench's copy.
    CeilingNoCommit,
    /// The ceiling with one fence: the copy and the header line, then one fence — what a
    /// commit needs whose checksums stand for the fence between the unit and its commit
    /// word. Its ratio to the ceiling is the headroom of such a commit.
    CeilingOneFence,
    PmemMemcpy,
    /// PMDK's copy in the ceiling's protocol: what the ceiling does, by PMDK's copy.
    PmemCommit,
    PmemLog,
    PwriteTmpfs,
    PwriteSync,
    Get,
    GetNoSum,
    MemcpyOut,
}

impl Method {
    pub const ALL: [Method; 20] = [
        Method::Ceiling,
        Method::CeilingWide,
        Method::Put,
        Method::Put2Proc,
        Method::PutNoSum,
        Method::CeilingBatch,
        Method::CeilingBatchWide,
        Method::Batch,
        Method::BatchNoSum,
        Method::Memcpy,
        Method::CeilingNoCommit,
        Method::CeilingOneFence,
        Method::PmemMemcpy,
        Method::PmemCommit,
        Method::PmemLog,
        Method::PwriteTmpfs,
        Method::PwriteSync,
        Method::MemcpyOut,
        Method::Get,
        Method::GetNoSum,
    ];

    /// Short name (the JSON `method` field and the plot legend).
    pub fn name(self) -> &'static str {
        match self {
            Method::Ceiling => "ceiling",
            Method::CeilingWide => "ceiling_avx512",
            Method::CeilingBatch => "ceiling_batch64",
            Method::CeilingBatchWide => "ceiling_batch64_avx512",
            Method::Put => "nvs_put",
            Method::Put2Proc => "nvs_put_2proc",
            Method::PutNoSum => "nvs_put_nosum",
            Method::Batch => "nvs_put_batch64",
            Method::BatchNoSum => "nvs_put_batch64_nosum",
            Method::Memcpy => "memcpy_into_mapping",
            Method::CeilingNoCommit => "ceiling_no_commit",
            Method::CeilingOneFence => "ceiling_one_fence",
            Method::PmemMemcpy => "pmem_memcpy_persist",
            Method::PmemCommit => "pmem_memcpy_commit",
            Method::PmemLog => "pmemlog_append",
            Method::PwriteTmpfs => "pwrite_tmpfs",
            Method::PwriteSync => "pwrite_fdatasync_rootfs",
            Method::Get => "nvs_get",
            Method::GetNoSum => "nvs_get_nosum",
            Method::MemcpyOut => "memcpy_out_of_mapping",
        }
    }

    /// What the row measures, for the table.
    pub fn describe(self) -> &'static str {
        match self {
            Method::Ceiling => "ceiling: NT copy + fence + commit line + fence",
            Method::CeilingWide => "ceiling, AVX-512: NT copy + fence, line, fence",
            Method::CeilingBatch => "ceiling: 64 NT copies + 2 fences",
            Method::CeilingBatchWide => "ceiling, AVX-512: 64 NT copies + 2 fences",
            Method::Put => "nvs put (1 object per commit)",
            Method::Put2Proc => "nvs put, 2 processes on one pool (a lane each)",
            Method::PutNoSum => "nvs put, payload checksums off",
            Method::Batch => "nvs put_batch (64 per commit)",
            Method::BatchNoSum => "nvs put_batch, payload checksums off",
            Method::Memcpy => "memcpy into the mapping",
            Method::CeilingNoCommit => "ceiling without commit: NT copy + fence",
            Method::CeilingOneFence => "one-fence ceiling: NT copy + header + fence",
            Method::PmemMemcpy => "PMDK pmem_memcpy_persist",
            Method::PmemCommit => "PMDK copy + fence + commit line + fence",
            Method::PmemLog => "PMDK pmemlog_append",
            Method::PwriteTmpfs => "pwrite to tmpfs",
            Method::PwriteSync => "pwrite + fdatasync, root fs",
            Method::Get => "nvs get (payload checksum verified)",
            Method::GetNoSum => "nvs get, payload checksums off",
            Method::MemcpyOut => "memcpy out of the mapping",
        }
    }

    /// The ceiling rows a row's ratio may refer to (it refers to the faster).
    pub fn ceilings(self) -> [Method; 2] {
        match self.per_op() {
            1 => [Method::Ceiling, Method::CeilingWide],
            _ => [Method::CeilingBatch, Method::CeilingBatchWide],
        }
    }

    pub fn is_ceiling(self) -> bool {
        matches!(self, Method::Ceiling | Method::CeilingWide | Method::CeilingBatch | Method::CeilingBatchWide)
    }

    /// Writer processes: 2 for the two-process row (which runs at 2 threads only, one
    /// per process), else 1 (this process, with as many threads as the row says).
    pub fn processes(self) -> usize {
        match self {
            Method::Put2Proc => 2,
            _ => 1,
        }
    }

    /// Objects per operation.
    pub fn per_op(self) -> usize {
        match self {
            Method::Batch | Method::BatchNoSum | Method::CeilingBatch | Method::CeilingBatchWide => BATCH,
            _ => 1,
        }
    }
}

/// What one thread measured in one trial.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measured {
    pub objects: u64,
    pub bytes: u64,
    /// The time the rates are computed from: thread CPU time, or wall time (see
    /// [`Clock`]).
    pub time: Duration,
}

/// Which clock a trial's rate is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// Wall time for every row.
    Wall,
    /// The thread's CPU time for rows that never block (every row but `pwrite` +
    /// `fdatasync`, which waits for the disk and keeps wall time): on a machine shared
    /// with other work, time the thread spent descheduled is not counted.
    Cpu,
}

/// This thread's CPU time so far.
pub(crate) fn cpu_now() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is a constant.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Name of the single-put object.
pub(crate) const NAME: &[u8] = b"temperature";

/// One thread's files and buffers.
pub struct Slot {
    /// The nvs pool (file `nvs-bench-<pid>-<k>.pool`), reformatted as needed.
    pool: Option<Pool<MappedMedia, HeapMemory>>,
    pool_file: File,
    pool_path: PathBuf,
    /// The durability the pool is mapped with (`None`: the file's default).
    durability: Option<nvs_std::Durability>,
    /// Segment size the pool is formatted with now.
    pool_seg: u64,
    /// Whether the pool is formatted with payload checksums (the default) now.
    pool_sum: bool,
    pool_id: u64,
    /// Objects of the get trial's size the pool holds (0: not filled for get).
    filled: (usize, u64),
    /// A raw method wrote the region since the pool was formatted.
    clobbered: bool,
    /// The second mapping of the region file, for the raw methods.
    raw: MmapRaw,
    raw_len: usize,
    /// pmemlog pool, or why not.
    log: Result<Log, String>,
    /// File on the root file system for pwrite + fdatasync, or why not.
    sync: Result<(File, usize), String>,
    src: Vec<u8>,
    dst: Vec<u8>,
    names: Vec<Vec<u8>>,
    off: usize,
}

/// Where and how large a thread's files are.
pub struct SlotConfig<'a> {
    pub dir: &'a Path,
    pub sync_dir: &'a Path,
    /// Bytes of the pool, the raw file and the pmemlog pool.
    pub region: usize,
    /// Bytes of the fdatasync file.
    pub sync_len: usize,
    /// Largest object.
    pub max_size: usize,
    /// The pool's durability (`None`: the default for the file).
    pub durability: Option<nvs_std::Durability>,
}

/// Segment size for units of `unit` bytes in a pool of `region` bytes: a power of two,
/// at least 4 MiB, holding one.
pub fn segment_for(unit: u64, region: usize) -> Result<u64, String> {
    let seg = (unit + LINE).next_power_of_two().max(4 << 20);
    if DATA_OFF + seg > region as u64 {
        return Err(format!("a {unit}-byte unit does not fit this region"));
    }
    Ok(seg)
}

/// Create a file of `len` bytes with its blocks reserved (tmpfs: pages allocated). A file
/// it created and could not size or allocate is removed again.
pub fn make_file(path: &Path, len: usize) -> Result<File, String> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    let sized = f.set_len(len as u64).map_err(|e| format!("cannot size {}: {e}", path.display())).and_then(|()| {
        // SAFETY: plain system call on a descriptor `f` keeps open.
        let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len as libc::off_t) };
        if rc != 0 && rc != libc::EOPNOTSUPP {
            return Err(format!("cannot allocate {}: {}", path.display(), std::io::Error::from_raw_os_error(rc)));
        }
        Ok(())
    });
    if let Err(e) = sized {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    Ok(f)
}

/// Write zeros over the first `len` bytes of `f` and make them durable.
fn write_zeros(f: &File, path: &Path, len: usize) -> Result<(), String> {
    let zeros = vec![0u8; 1 << 20];
    let mut o = 0;
    while o < len {
        let n = zeros.len().min(len - o);
        f.write_all_at(&zeros[..n], o as u64).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        o += n;
    }
    f.sync_all().map_err(|e| format!("cannot sync {}: {e}", path.display()))
}

impl Slot {
    /// Make thread `k`'s files (their paths go to `files`, for removal, before each is
    /// made).
    pub fn new(k: usize, cfg: &SlotConfig<'_>, pmdk: &Pmdk, files: &mut crate::Cleanup) -> Result<Slot, String> {
        let SlotConfig { dir, sync_dir, region, sync_len, max_size, durability } = *cfg;
        let pid = std::process::id();
        let pool_path = dir.join(format!("nvs-bench-{pid}-{k}.pool"));
        files.push(pool_path.clone());
        let pool_file = make_file(&pool_path, region)?;
        // Written once: on a DAX file system an allocated block is still unwritten, and
        // the first store into each page would convert it inside the timed put.
        write_zeros(&pool_file, &pool_path, region)?;
        // The raw methods' mapping of the same file, pre-faulted like the pool's.
        let raw = MmapOptions::new()
            .len(region)
            .populate()
            .map_raw(&pool_file)
            .map_err(|e| format!("cannot map {}: {e}", pool_path.display()))?;
        let log = match &pmdk.log {
            Ok(lib) => {
                let p = dir.join(format!("nvs-bench-{pid}-{k}.pmemlog"));
                files.push(p.clone());
                // Touch every page of the log once (append until full, rewind), as
                // the other regions are pre-faulted: page faults are not the subject.
                Log::create(*lib, &p, region).map(|mut log| {
                    let chunk = vec![0u8; 1 << 20];
                    while log.append(&chunk) {}
                    log.rewind();
                    log
                })
            }
            Err(e) => Err(e.clone()),
        };
        let sync_path = sync_dir.join(format!("nvs-bench-{pid}-{k}.fsync"));
        files.push(sync_path.clone());
        let sync = make_file(&sync_path, sync_len).and_then(|f| {
            // Write it once, so timed writes overwrite allocated blocks in place.
            write_zeros(&f, &sync_path, sync_len)?;
            Ok((f, sync_len))
        });
        let src: Vec<u8> = (0..max_size).map(|i| (i as u64).wrapping_mul(0x9E37_79B9) as u8 ^ k as u8).collect();
        Ok(Slot {
            pool: None,
            pool_file,
            pool_path,
            durability,
            pool_seg: 0,
            pool_sum: true,
            pool_id: 0x6e76_7362_656e_6368 ^ ((k as u64) << 48),
            filled: (0, 0),
            clobbered: false,
            raw,
            raw_len: region,
            log,
            sync,
            src,
            dst: vec![0u8; max_size],
            names: (0..BATCH).map(|i| format!("array{i:02}").into_bytes()).collect(),
            off: DATA_OFF as usize,
        })
    }

    /// Whether `method` can run here at all (`Err`: the "not available" reason).
    pub fn available(&self, method: Method, pmdk: &Pmdk) -> Result<(), String> {
        if matches!(
            method,
            Method::Ceiling
                | Method::CeilingBatch
                | Method::CeilingNoCommit
                | Method::CeilingOneFence
                | Method::PmemCommit
        ) && nt::width() == 0
        {
            return Err("needs x86_64 non-temporal stores".into());
        }
        if matches!(method, Method::CeilingWide | Method::CeilingBatchWide) && nt::wide_width() == 0 {
            return Err("needs AVX-512".into());
        }
        match method {
            Method::PmemMemcpy | Method::PmemCommit => pmdk.pmem.as_ref().map(|_| ()).map_err(Clone::clone),
            Method::PmemLog => self.log.as_ref().map(|_| ()).map_err(Clone::clone),
            Method::PwriteSync => self.sync.as_ref().map(|_| ()).map_err(Clone::clone),
            _ => Ok(()),
        }
    }

    /// (Re)format the pool with segments of `seg` bytes, payload checksums on (`sum`, the
    /// default) or off, keeping its index memory.
    fn format(&mut self, seg: u64, sum: bool) -> Result<(), String> {
        let (media, mem) = match self.pool.take() {
            Some(p) => p.close(),
            None => (
                MappedMedia::map(&self.pool_file, &self.pool_path, Access::ReadWrite, self.durability, true)
                    .map_err(|e| e.to_string())?,
                HeapMemory::new(),
            ),
        };
        self.pool_id = self.pool_id.wrapping_add(1);
        let mut o = FormatOptions::new(self.pool_id);
        o.segment_len = Some(seg);
        o.lanes_max = 1;
        o.payload_checksum = sum;
        let pool = Pool::format(media, o, mem).map_err(|e| format!("format: {e}"))?;
        self.pool = Some(pool);
        self.pool_seg = seg;
        self.pool_sum = sum;
        self.filled = (0, 0);
        self.clobbered = false;
        Ok(())
    }

    /// Segment size for units of `unit` bytes ([`segment_for`]).
    fn segment_for(&self, unit: u64) -> Result<u64, String> {
        segment_for(unit, self.raw_len)
    }

    fn ensure_pool(&mut self, unit: u64, sum: bool) -> Result<(), String> {
        let seg = self.segment_for(unit)?;
        if self.pool.is_none() || self.pool_seg != seg || self.pool_sum != sum || self.clobbered {
            self.format(seg, sum)?;
        }
        Ok(())
    }

    /// Fill the pool with objects of `size` bytes (for the get trial) unless it already is.
    fn fill_for_get(&mut self, size: usize, sum: bool) -> Result<u64, String> {
        if self.filled.0 == size && self.filled.1 > 0 && self.pool_sum == sum && !self.clobbered {
            return Ok(self.filled.1);
        }
        let seg = self.segment_for(object_len(NAME.len(), size as u64) + LINE)?;
        self.format(seg, sum)?;
        let Some(pool) = self.pool.as_mut() else { return Err("no pool".into()) };
        let mut n = 0u64;
        loop {
            match pool.put(0, Object::new(NAME, &self.src[..size])) {
                Ok(_) => n += 1,
                Err(nvs_core::Error::Full) => break,
                Err(e) => return Err(format!("put: {e}")),
            }
        }
        self.filled = (size, n);
        Ok(n)
    }

    /// Run `method` on objects of `size` bytes for about `budget`; `Err` on failure.
    pub fn trial(
        &mut self,
        method: Method,
        size: usize,
        budget: Duration,
        clock: Clock,
        pmdk: &Pmdk,
    ) -> Result<Measured, String> {
        // Operations between clock reads: about 256 KiB of objects.
        let chunk = ((256usize << 10) / (size * method.per_op())).max(1);
        let mut paused = Duration::ZERO;
        let mut paused_cpu = Duration::ZERO;
        let mut ops = 0u64;
        let base = self.raw.as_mut_ptr();
        let len = self.raw_len;
        let step = line_up(size as u64) as usize + 2 * LINE as usize;
        let width = if matches!(method, Method::CeilingWide | Method::CeilingBatchWide)
            || (matches!(method, Method::CeilingNoCommit | Method::CeilingOneFence) && nvs_core::nt_store_width() == 64)
        {
            nt::wide_width()
        } else {
            nt::width()
        };
        match method {
            Method::Put | Method::PutNoSum | Method::Batch | Method::BatchNoSum => {
                let unit = if method.per_op() == 1 {
                    object_len(NAME.len(), size as u64) + LINE
                } else {
                    self.names.iter().map(|n| object_len(n.len(), size as u64)).sum::<u64>() + LINE
                };
                self.ensure_pool(unit, !matches!(method, Method::PutNoSum | Method::BatchNoSum))?;
            }
            Method::Get | Method::GetNoSum => {
                self.fill_for_get(size, method == Method::Get)?;
            }
            _ => {}
        }
        // Nothing of the pool's state is shared with the raw methods: they use `raw`.
        let mut version = 0u64;
        let t0 = Instant::now();
        let c0 = cpu_now();
        'outer: loop {
            for _ in 0..chunk {
                match method {
                    Method::Ceiling | Method::CeilingWide | Method::CeilingBatch | Method::CeilingBatchWide => {
                        let n = method.per_op();
                        if self.off + n * step + LINE as usize > len {
                            self.off = DATA_OFF as usize;
                        }
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: every destination is inside the mapping (checked just
                        // above), 64-byte aligned (`off` and `step` are multiples of 64),
                        // and the mapping is a distinct range from `src`; nvs is not using
                        // the region during this trial (module docs).
                        unsafe {
                            let flag = base.add(self.off);
                            for k in 0..n {
                                nt::copy(base.add(self.off + LINE as usize + k * step), &self.src[..size], width);
                            }
                            nt::fence();
                            nt::flag(flag, ops);
                            nt::fence();
                        }
                        self.off += n * step + LINE as usize;
                    }
                    // The ceiling's layout and protocol, by the bench's copy without the
                    // commit or with one fence, or by PMDK's copy with it.
                    Method::CeilingNoCommit | Method::CeilingOneFence | Method::PmemCommit => {
                        if self.off + step > len {
                            self.off = DATA_OFF as usize;
                        }
                        #[cfg(target_arch = "x86_64")]
                        // SAFETY: as for the ceiling rows: inside the mapping, 64-byte
                        // aligned, distinct from `src`, not used by nvs during this trial.
                        unsafe {
                            let dst = base.add(self.off + LINE as usize);
                            if method == Method::CeilingNoCommit {
                                nt::copy(dst, &self.src[..size], width);
                                nt::fence();
                            } else if method == Method::CeilingOneFence {
                                nt::copy(dst, &self.src[..size], width);
                                nt::flag(base.add(self.off), ops);
                                nt::fence();
                            } else {
                                let pm = pmdk.pmem.as_ref().map_err(|e| e.clone())?;
                                pm.memcpy_nodrain(dst, &self.src[..size]);
                                nt::fence();
                                nt::flag(base.add(self.off), ops);
                                nt::fence();
                            }
                        }
                        self.off += step;
                    }
                    // Not on a thread of this process: `procs` runs it in two others.
                    Method::Put2Proc => return Err("runs in worker processes".into()),
                    Method::Put | Method::PutNoSum => {
                        let pool = self.pool.as_mut().ok_or("no pool")?;
                        match pool.put(0, Object::new(NAME, &self.src[..size])) {
                            Ok(_) => {}
                            Err(nvs_core::Error::Full) => {
                                let (p, pc) = (Instant::now(), cpu_now());
                                self.format(self.pool_seg, self.pool_sum)?;
                                paused += p.elapsed();
                                paused_cpu += cpu_now().saturating_sub(pc);
                                continue;
                            }
                            Err(e) => return Err(format!("put: {e}")),
                        }
                    }
                    Method::Batch | Method::BatchNoSum => {
                        let pool = self.pool.as_mut().ok_or("no pool")?;
                        let src = &self.src[..size];
                        let objects: [Object<'_>; BATCH] = core::array::from_fn(|i| Object::new(&self.names[i], src));
                        match pool.put_batch(0, &objects) {
                            Ok(_) => {}
                            Err(nvs_core::BatchError { error: nvs_core::Error::Full, .. }) => {
                                let (p, pc) = (Instant::now(), cpu_now());
                                self.format(self.pool_seg, self.pool_sum)?;
                                paused += p.elapsed();
                                paused_cpu += cpu_now().saturating_sub(pc);
                                continue;
                            }
                            Err(e) => return Err(format!("put_batch: {e}")),
                        }
                    }
                    Method::Get | Method::GetNoSum => {
                        let pool = self.pool.as_ref().ok_or("no pool")?;
                        // Versions 1, 2, ..., n, 1, ... (a reader walking the time steps).
                        version = if version >= self.filled.1 { 1 } else { version + 1 };
                        let n = pool.get(NAME, version, &mut self.dst[..size]).map_err(|e| format!("get: {e}"))?;
                        debug_assert_eq!(n, size);
                    }
                    Method::Memcpy | Method::MemcpyOut | Method::PmemMemcpy => {
                        if self.off + step > len {
                            self.off = DATA_OFF as usize;
                        }
                        // SAFETY: `off + LINE + size <= len`: inside the mapping, which no
                        // Rust reference covers, which does not overlap `src`/`dst`, and
                        // which nvs is not using during this trial (module docs).
                        unsafe {
                            let p = base.add(self.off + LINE as usize);
                            match method {
                                Method::Memcpy => std::ptr::copy_nonoverlapping(self.src.as_ptr(), p, size),
                                Method::MemcpyOut => std::ptr::copy_nonoverlapping(p, self.dst.as_mut_ptr(), size),
                                _ => {
                                    if let Ok(pm) = &pmdk.pmem {
                                        pm.memcpy_persist(p, &self.src[..size]);
                                    }
                                }
                            }
                        }
                        self.off += step;
                    }
                    Method::PmemLog => {
                        let log = self.log.as_mut().map_err(|e| e.clone())?;
                        if !log.append(&self.src[..size]) {
                            let (p, pc) = (Instant::now(), cpu_now());
                            log.rewind();
                            paused += p.elapsed();
                            paused_cpu += cpu_now().saturating_sub(pc);
                            if !log.append(&self.src[..size]) {
                                return Err("pmemlog_append failed on an empty log".into());
                            }
                        }
                    }
                    Method::PwriteTmpfs => {
                        if self.off + step > len {
                            self.off = DATA_OFF as usize;
                        }
                        self.pool_file
                            .write_all_at(&self.src[..size], self.off as u64)
                            .map_err(|e| format!("pwrite: {e}"))?;
                        self.off += step;
                    }
                    Method::PwriteSync => {
                        let (f, flen) = self.sync.as_ref().map_err(|e| e.clone())?;
                        if self.off + size > *flen {
                            self.off = 0;
                        }
                        f.write_all_at(&self.src[..size], self.off as u64).map_err(|e| format!("pwrite: {e}"))?;
                        f.sync_data().map_err(|e| format!("fdatasync: {e}"))?;
                        self.off += line_up(size as u64) as usize;
                    }
                }
                ops += 1;
            }
            if t0.elapsed() >= budget + paused {
                break 'outer;
            }
        }
        if matches!(
            method,
            Method::Ceiling
                | Method::CeilingWide
                | Method::CeilingBatch
                | Method::CeilingBatchWide
                | Method::CeilingNoCommit
                | Method::CeilingOneFence
                | Method::Memcpy
                | Method::PmemMemcpy
                | Method::PmemCommit
                | Method::PwriteTmpfs
        ) {
            self.clobbered = true;
        }
        let wall = t0.elapsed().saturating_sub(paused);
        let cpu = cpu_now().saturating_sub(c0).saturating_sub(paused_cpu);
        let time = if clock == Clock::Cpu && method != Method::PwriteSync && !cpu.is_zero() { cpu } else { wall };
        let objects = ops * method.per_op() as u64;
        Ok(Measured { objects, bytes: objects * size as u64, time })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The pool's mapping goes before its file is removed (by the caller's cleanup).
        self.pool = None;
    }
}
