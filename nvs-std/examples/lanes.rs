//! Put throughput at 1 MiB with 1 and 2 writer lanes of one pool (threads with their own
//! `LaneWriter`), next to a raw NT copy (+ fence, commit line, fence) by 1 and 2
//! threads into the same mapping, in one run, trials interleaved, median of 5.
//!
//! `cargo run --release -p nvs-std --example lanes [DIR]` (default /dev/shm)

use nvs_core::{FormatOptions, HeapMemory, Media, Object, Pool};
use nvs_std::{Access, MappedMedia};
use std::fs::OpenOptions;
use std::time::{Duration, Instant};

const OBJ: usize = 1 << 20;
const REGION: u64 = 3 << 30;
const TRIAL: Duration = Duration::from_millis(400);

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "/dev/shm".into());
    let path = std::path::Path::new(&dir).join(format!("nvs-lanes-{}.pool", std::process::id()));
    let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).unwrap();
    file.set_len(REGION).unwrap();
    let media = MappedMedia::map(&file, &path, Access::ReadWrite, None, true).unwrap();
    let src: Vec<u8> = (0..OBJ).map(|i| (i * 7) as u8).collect();
    let mut rows: Vec<(&str, Vec<f64>)> = vec![
        ("raw NT copy, 1 thread", vec![]),
        ("nvs put, 1 lane", vec![]),
        ("raw NT copy, 2 threads", vec![]),
        ("nvs put, 2 lanes of one pool", vec![]),
    ];
    for _ in 0..5 {
        rows[0].1.push(raw(&media, &src, 1));
        rows[1].1.push(put(&media, &src, 1));
        rows[2].1.push(raw(&media, &src, 2));
        rows[3].1.push(put(&media, &src, 2));
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        v[v.len() / 2]
    };
    let m: Vec<f64> = rows.iter_mut().map(|(_, v)| med(v)).collect();
    println!("1 MiB objects, {dir}, median of 5 interleaved trials (aggregate GB/s, wall time)");
    for ((name, _), g) in rows.iter().zip(&m) {
        println!("  {name:<32} {g:6.2} GB/s");
    }
    println!("  1 lane / raw 1 thread   {:.2}", m[1] / m[0]);
    println!("  2 lanes / raw 2 threads {:.2}", m[3] / m[2]);
    drop(media);
    let _ = std::fs::remove_file(&path);
}

/// `threads` threads each NT-copy `src` into their half of the region, each copy
/// followed by a fence, a commit line (8-byte flag, 56 zero bytes) and a fence (the
/// protocol without nvs).
fn raw(media: &MappedMedia, src: &[u8], threads: usize) -> f64 {
    let t = Instant::now();
    let per = (REGION as usize - 4096) / threads;
    let bytes: usize = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|k| {
                s.spawn(move || {
                    let (base, mut off, mut n) = (4096 + k * per, 0, 0);
                    let start = Instant::now();
                    while start.elapsed() < TRIAL {
                        if off + src.len() + 64 > per {
                            off = 0;
                        }
                        media.store_nt(base + off + 64, src);
                        media.fence();
                        let mut line = [0u8; 64];
                        line[0] = 1;
                        media.store_commit_line(base + off, &line);
                        media.fence();
                        off += src.len() + 64;
                        n += src.len();
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    bytes as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// `threads` threads each put `src` on their own lane of one pool (reformatted when full).
fn put(media: &MappedMedia, src: &[u8], threads: usize) -> f64 {
    let mut bytes = 0usize;
    let mut spent = Duration::ZERO;
    while spent < TRIAL {
        let mut o = FormatOptions::new(rand_id());
        o.segment_len = Some(64 << 20);
        o.lanes_max = 2;
        let pool = Pool::format(media, o, HeapMemory::new()).unwrap();
        let t = Instant::now();
        bytes += std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads as u32)
                .map(|lane| {
                    let pool = &pool;
                    s.spawn(move || {
                        let mut w = pool.lane(lane).unwrap();
                        let mut n = 0;
                        while w.put(Object::new(b"array", src)).is_ok() {
                            n += src.len();
                        }
                        n
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        });
        spent += t.elapsed();
    }
    bytes as f64 / spent.as_secs_f64() / 1e9
}

fn rand_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(Instant::now().elapsed().as_nanos() as u64);
    h.finish()
}
