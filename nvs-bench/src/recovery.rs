//! Recovery figures: how long opening a 1 GiB pool takes (as `FilePool::open` does it,
//! read-only) after its writer's clean close (from the index checkpoint the close left)
//! and after a crash (no checkpoint: mapping + recovery), how fast recovery scans the
//! log, and how much index memory a record costs.

use nvs_core::internals::format::{object_len, LINE};
use nvs_core::Object;
use nvs_core::{CheckpointUse, HeapMemory, IndexMemory, Pool};
use nvs_std::{Access, CreateOptions, FilePool, MappedMedia};
use std::path::Path;
use std::time::{Duration, Instant};

/// Pool size of the recovery figures.
pub const POOL: u64 = 1 << 30;
/// Names the records cycle through (arrays of a simulation).
const NAMES: usize = 64;

/// What opening a full pool of one record size costs.
#[derive(Clone, Debug)]
pub struct Recovery {
    pub record: usize,
    pub result: Result<Figures, String>,
}

#[derive(Clone, Copy, Debug)]
pub struct Figures {
    pub records: u64,
    /// Bytes of committed units recovery walked.
    pub log_bytes: u64,
    /// Median open time after a clean close (from the index checkpoint).
    pub open: Duration,
    /// Median open time after a crash (no checkpoint: a recovery).
    pub scan: Duration,
    pub opens: usize,
    /// Index memory held after the open (heap capacity, growth slack included).
    pub index_bytes: usize,
}

impl Figures {
    /// Records a recovery indexes per second.
    pub fn records_per_s(&self) -> f64 {
        self.records as f64 / self.scan.as_secs_f64().max(1e-12)
    }
    /// Log a recovery walks per second.
    pub fn scan_gbps(&self) -> f64 {
        self.log_bytes as f64 / self.scan.as_secs_f64().max(1e-12) / 1e9
    }
    pub fn index_bytes_per_record(&self) -> f64 {
        self.index_bytes as f64 / self.records.max(1) as f64
    }
}

pub fn run(dir: &Path, opens: usize, files: &mut crate::Cleanup) -> Vec<Recovery> {
    [32usize << 10, 1 << 10]
        .into_iter()
        .map(|record| Recovery { record, result: one(dir, record, opens, files) })
        .collect()
}

fn one(dir: &Path, record: usize, opens: usize, files: &mut crate::Cleanup) -> Result<Figures, String> {
    let path = dir.join(format!("nvs-bench-{}-recovery-{record}.pool", std::process::id()));
    let opts = CreateOptions { lanes_max: 1, populate: true, ..CreateOptions::default() };
    files.push(path.clone());
    let mut p = FilePool::create(&path, POOL, &opts).map_err(|e| e.to_string())?;
    let names: Vec<Vec<u8>> = (0..NAMES).map(|i| format!("array{i:02}").into_bytes()).collect();
    let data: Vec<u8> = (0..record).map(|i| (i * 13) as u8).collect();
    let mut records = 0u64;
    let mut log_bytes = 0u64;
    loop {
        let name = &names[records as usize % NAMES];
        match p.put(0, Object::new(name, &data)) {
            Ok(_) => {
                records += 1;
                log_bytes += LINE + object_len(name.len(), record as u64);
            }
            Err(nvs_std::Error::Core { source: nvs_core::Error::Full, .. }) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    drop(p);
    let checkpoint = nvs_std::checkpoint_path(&path);
    files.push(checkpoint.clone());
    let median = |want: Option<CheckpointUse>| -> Result<Duration, String> {
        let mut times = Vec::new();
        for _ in 0..opens.max(1) {
            let t = Instant::now();
            let r = FilePool::open(&path, Access::ReadOnly).map_err(|e| e.to_string())?;
            times.push(t.elapsed());
            if r.stats().objects != records {
                return Err(format!("recovered {} records of {records}", r.stats().objects));
            }
            if r.checkpoint_use() != want {
                return Err(format!("index checkpoint {:?}, not {want:?}", r.checkpoint_use()));
            }
        }
        times.sort();
        Ok(times[times.len() / 2])
    };
    // Interleaved, so that drift reaches both alike: after a clean close, after a crash.
    let aside = checkpoint.with_extension("aside");
    let (mut open, mut scan) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        open.push(median(Some(CheckpointUse::Used))?);
        std::fs::rename(&checkpoint, &aside).map_err(|e| e.to_string())?;
        let s = median(None);
        std::fs::rename(&aside, &checkpoint).map_err(|e| e.to_string())?;
        scan.push(s?);
    }
    let (open, scan) = (open.into_iter().min().unwrap_or_default(), scan.into_iter().min().unwrap_or_default());
    // Index memory: the same open at the nvs-core level, to see the index it built.
    let file = std::fs::File::open(&path).map_err(|e| e.to_string())?;
    let media = MappedMedia::map(&file, &path, Access::ReadOnly, None, false).map_err(|e| e.to_string())?;
    let pool = Pool::open_read_only(media, HeapMemory::new()).map_err(|e| e.to_string())?;
    let (_, mem) = pool.close();
    Ok(Figures { records, log_bytes, open, scan, opens: opens.max(1), index_bytes: mem.bytes() })
}
