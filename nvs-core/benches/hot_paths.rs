//! Micro-benchmarks of nvs-core's hot paths, on heap memory standing in for persistent
//! memory: put (1 KiB, 32 KiB), a batch of 64 × 1 KiB (and of 64 empty objects), get, `latest`, the raw NT copy,
//! what the format and the index alone cost (`floor`) and recovery. `cargo bench -p nvs-core` (not part of CI; `nvs bench` is the
//! side-by-side comparison with the ceiling and the peers).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use nvs_core::{FormatOptions, HeapMemory, Media, Object, Pool, Region};
use std::hint::black_box;

#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

const REGION: usize = 256 << 20;

/// Heap memory a [`Region`] covers; kept alive for the whole run.
struct Mem(Vec<Line>);

impl Mem {
    fn new() -> Mem {
        Mem(vec![Line([1; 64]); REGION / 64])
    }
    fn region(&mut self) -> Region {
        // SAFETY: the buffer is 64-aligned, REGION bytes long, and outlives every region
        // and pool made from it in this file (each is dropped before the next is made).
        unsafe { Region::new(self.0.as_mut_ptr().cast(), REGION) }
    }
}

/// A new pool on `mem`: every format gets a new pool id (stale segments of an earlier
/// pool must never carry the id of the new one).
fn fresh(mem: &mut Mem, index: HeapMemory) -> Pool<Region, HeapMemory> {
    fresh_with(mem, index, true)
}

/// [`fresh`], with payload checksums or without.
fn fresh_with(mem: &mut Mem, index: HeapMemory, sums: bool) -> Pool<Region, HeapMemory> {
    static ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0xbe_4c4);
    let mut o = FormatOptions::new(ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    o.payload_checksum = sums;
    o.segment_len = Some(16 << 20);
    o.lanes_max = 1;
    Pool::format(mem.region(), o, index).expect("format")
}

/// Puts until the pool is full, then reformats it (keeping the index memory) outside
/// the measured part.
fn bench_puts(c: &mut Criterion) {
    let mut mem = Mem::new();
    let mut g = c.benchmark_group("put");
    for (size, sums) in [(1usize << 10, true), (1 << 10, false), (32 << 10, true)] {
        let src = vec![7u8; size];
        let mut pool = Some(fresh_with(&mut mem, HeapMemory::new(), sums));
        g.throughput(Throughput::Bytes(size as u64));
        let what = if sums { "" } else { "_nosum" };
        g.bench_function(format!("put_{}k{what}", size >> 10), |b| {
            b.iter(|| {
                let p = pool.as_mut().expect("pool");
                if p.put(0, Object::new(b"temperature", black_box(&src))).is_err() {
                    let (_, idx) = pool.take().expect("pool").close();
                    let mut p = fresh_with(&mut mem, idx, sums);
                    p.put(0, Object::new(b"temperature", &src)).expect("put");
                    pool = Some(p);
                }
            })
        });
        drop(pool);
    }
    let src = vec![7u8; 1 << 10];
    let names: Vec<Vec<u8>> = (0..64).map(|i| format!("array{i:02}").into_bytes()).collect();
    // 64 x 1 KiB, and 64 empty objects: what a batch costs besides its payloads' bytes.
    for (size, sums, what) in [(1 << 10, true, "1k"), (1 << 10, false, "1k_nosum"), (0, false, "0_nosum")] {
        let objects: Vec<Object<'_>> = names.iter().map(|n| Object::new(n, &src[..size])).collect();
        g.throughput(Throughput::Elements(64));
        // Filled once first: the index memory then has grown to what a full pool needs,
        // and the rows measure puts, not its first growth (page faults).
        let mut full = fresh_with(&mut mem, HeapMemory::new(), sums);
        while full.put_batch(0, &objects).is_ok() {}
        let mut pool = Some(fresh_with(&mut mem, full.close().1, sums));
        g.bench_function(format!("put_batch_64x{what}"), |b| {
            b.iter(|| {
                let p = pool.as_mut().expect("pool");
                if p.put_batch(0, black_box(&objects)).is_err() {
                    let (_, idx) = pool.take().expect("pool").close();
                    let mut p = fresh_with(&mut mem, idx, sums);
                    p.put_batch(0, &objects).expect("batch");
                    pool = Some(p);
                }
            })
        });
        drop(pool);
    }
    g.finish();
}

/// Lookups and reads on a pool of 100,000 1 KiB objects under 64 names.
fn bench_reads(c: &mut Criterion) {
    let mut mem = Mem::new();
    let mut pool = fresh(&mut mem, HeapMemory::new());
    let names: Vec<Vec<u8>> = (0..64).map(|i| format!("array{i:02}").into_bytes()).collect();
    let src = vec![3u8; 1 << 10];
    for i in 0..100_000usize {
        pool.put(0, Object::new(&names[i % 64], &src)).expect("fill");
    }
    let mut buf = vec![0u8; 1 << 10];
    let mut g = c.benchmark_group("read");
    g.throughput(Throughput::Bytes(1 << 10));
    let mut k = 0u64;
    g.bench_function("get_1k_sequential_versions", |b| {
        b.iter(|| {
            k = k % 1562 + 1;
            black_box(pool.get(&names[7], k, &mut buf).expect("get"))
        })
    });
    let mut r = 0x1234_5678u64;
    g.bench_function("get_1k_random", |b| {
        b.iter(|| {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            let name = &names[(r % 64) as usize];
            black_box(pool.get(name, (r >> 8) % 1562 + 1, &mut buf).expect("get"))
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("latest", |b| b.iter(|| black_box(pool.latest(black_box(&names[9])).expect("latest"))));
    g.finish();
}

/// The raw NT copy behind every put: 1 KiB and 32 KiB through `Media::store_nt`, a fence.
fn bench_store_nt(c: &mut Criterion) {
    let mut mem = Mem::new();
    let region = mem.region();
    let mut g = c.benchmark_group("store_nt");
    for size in [1usize << 10, 32 << 10, 1 << 20] {
        let src = vec![5u8; size];
        let mut off = 4096usize;
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(format!("copy_fence_{}k", size >> 10), |b| {
            b.iter(|| {
                if off + size > REGION {
                    off = 4096;
                }
                region.store_nt(off, black_box(&src));
                region.fence();
                off += size;
            })
        });
        // The protocol without nvs: that copy, a fence, a commit line, a fence.
        g.bench_function(format!("copy_fence_commit_fence_{}k", size >> 10), |b| {
            b.iter(|| {
                if off + size + 64 > REGION {
                    off = 4096;
                }
                region.store_nt(off + 64, black_box(&src));
                region.fence();
                let mut line = [0u8; 64];
                line[0] = 1;
                region.store_commit_line(off, &line);
                region.fence();
                off += size + 64;
            })
        });
        // The same copy summed as a put sums its payload (nvs-sum, fused into the copy).
        g.bench_function(format!("copy_summed_fence_{}k", size >> 10), |b| {
            b.iter(|| {
                if off + size > REGION {
                    off = 4096;
                }
                let mut sum = nvs_core::Sum::new(7);
                region.store_nt_summed(off, black_box(&src), &mut sum);
                region.fence();
                off += size;
                black_box(sum.finish(size as u64))
            })
        });
    }
    // 64 payloads of 1 KiB, each copied (and summed, with its sum finished) on its own,
    // then one fence: what a batch's payloads cost, without headers. Beside the summed
    // 1 MiB copy, whose sum costs nothing over the plain copy, this shows the fixed cost
    // of summing each payload.
    let src = vec![5u8; 64 << 10];
    let mut off = 4096usize;
    g.throughput(Throughput::Bytes(64 << 10));
    for summed in [false, true] {
        let what = if summed { "copy_summed_fence_64x1k" } else { "copy_fence_64x1k" };
        g.bench_function(what, |b| {
            b.iter(|| {
                if off + 64 * (1024 + 64) > REGION {
                    off = 4096;
                }
                let mut sums = 0;
                for (k, p) in src.chunks_exact(1024).enumerate() {
                    let at = off + k * (1024 + 64);
                    if summed {
                        let mut sum = nvs_core::Sum::new(7);
                        region.store_nt_summed(at, p, &mut sum);
                        sums ^= sum.finish(1024);
                    } else {
                        region.store_nt(at, p);
                    }
                }
                region.fence();
                off += 64 * (1024 + 64);
                black_box(sums)
            })
        });
    }
    g.finish();
}

/// Recovery of 100,000 1 KiB records (64 names): the whole open, index rebuilt.
fn bench_recovery(c: &mut Criterion) {
    let mut mem = Mem::new();
    let mut pool = fresh(&mut mem, HeapMemory::new());
    let names: Vec<Vec<u8>> = (0..64).map(|i| format!("array{i:02}").into_bytes()).collect();
    let src = vec![3u8; 1 << 10];
    for i in 0..100_000usize {
        pool.put(0, Object::new(&names[i % 64], &src)).expect("fill");
    }
    let (_, idx) = pool.close();
    let idx = std::cell::RefCell::new(Some(idx));
    let mut g = c.benchmark_group("recovery");
    g.sample_size(20);
    g.throughput(Throughput::Elements(100_000));
    g.bench_function("open_100k_records", |b| {
        b.iter_batched(
            || idx.borrow_mut().take().unwrap_or_default(),
            |x| {
                let p = Pool::open_read_only(mem.region(), x).expect("open");
                let (_, x) = p.close();
                *idx.borrow_mut() = Some(x);
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

/// What format 2 itself asks of a unit, with nothing of nvs's bookkeeping (no plan, no
/// index, no lane): each payload NT-stored (and summed, if `summed`: a pool with payload
/// checksums), each object header hashed and stored as its line (names of up to 16
/// bytes), the unit header hashed and stored, a fence, the commit line, a fence.
/// Returns the unit's length.
fn format_floor(region: &Region, off: usize, seq: u64, objects: &[(&[u8], &[u8])], summed: bool) -> usize {
    use nvs_core::internals::format::{commit_word, line_up, ObjectHeader, UnitHeader};
    const POOL: u64 = 0x5eed;
    let mut at = off + 64;
    for (name, payload) in objects {
        let payload_sum = if summed {
            let mut sum = nvs_core::Sum::new(POOL);
            region.store_nt_summed(at + 64, payload, &mut sum);
            sum.finish(payload.len() as u64)
        } else {
            region.store_nt(at + 64, payload);
            0
        };
        let mut oh: ObjectHeader = bytemuck::Zeroable::zeroed();
        oh.version = seq + 1;
        oh.payload_len = payload.len() as u64;
        oh.name_len = name.len() as u16;
        oh.payload_sum = payload_sum;
        oh.checksum = oh.compute_checksum(POOL, name, &[]);
        // Header and name (up to 16 bytes) as one line, from registers.
        let head = oh.words();
        let word = |k: usize| nvs_core::internals::hash::word_le(name.get(8 * k..).unwrap_or(&[]));
        region.store_line_nt(at, [head[0], head[1], head[2], head[3], head[4], head[5], word(0), word(1)]);
        at += 64 + line_up(payload.len() as u64) as usize;
    }
    let mut uh: UnitHeader = bytemuck::Zeroable::zeroed();
    uh.seq = seq;
    uh.unit_len = (at - off) as u64;
    uh.object_count = objects.len() as u32;
    uh.checksum = uh.compute_checksum(POOL);
    let commit = commit_word(POOL, 0, seq, uh.checksum);
    uh.commit = !commit;
    region.store_line_nt(off, uh.words());
    region.fence();
    uh.commit = commit;
    region.store_commit_line(off, bytemuck::cast_ref(&uh));
    region.fence();
    at - off
}

/// Whether a put's cost above the bare protocol is the format's or nvs's: the protocol
/// (copies, fence, commit line, fence), the format's floor ([`format_floor`]), with and
/// without payload checksums, beside `put/put_32k` and `put/put_batch_64x1k` (run them
/// together: `--bench 'floor|put_32k|put_batch'`).
fn bench_floor(c: &mut Criterion) {
    let mut mem = Mem::new();
    let region = mem.region();
    let names: Vec<Vec<u8>> = (0..64).map(|i| format!("array{i:02}").into_bytes()).collect();
    let mut g = c.benchmark_group("floor");
    for (count, size) in [(1usize, 1usize << 10), (1, 32 << 10), (64, 1 << 10), (64, 0)] {
        let src = vec![5u8; size];
        let objects: Vec<(&[u8], &[u8])> = names[..count].iter().map(|n| (&n[..], &src[..])).collect();
        let unit = 64 + count * (64 + size);
        let mut off = 4096usize;
        let mut seq = 0u64;
        g.throughput(Throughput::Bytes((count * size) as u64));
        g.bench_function(format!("protocol_{count}x{}k", size >> 10), |b| {
            b.iter(|| {
                if off + unit > REGION {
                    off = 4096;
                }
                for k in 0..count {
                    region.store_nt(off + 128 + k * (64 + size), black_box(&src));
                }
                region.fence();
                let mut line = [0u8; 64];
                line[0] = 1;
                region.store_commit_line(off, &line);
                region.fence();
                off += unit;
            })
        });
        if count == 64 && size == 0 {
            bench_index_floor(&mut g, &region, &names);
        }
        for (summed, what) in [(true, ""), (false, "_nosum")] {
            g.bench_function(format!("format_floor{what}_{count}x{}k", size >> 10), |b| {
                b.iter(|| {
                    if off + unit > REGION {
                        off = 4096;
                    }
                    seq += 1;
                    off += format_floor(&region, off, seq, black_box(&objects), summed);
                })
            });
        }
    }
    g.finish();
}

/// The index's own part of a batch of 64 (`floor/index_64`): what planning and publishing
/// must do in the index per object whatever else they do — check the name hint against
/// the name on the media, read the name's latest version, ask the caches for the new
/// entries' lines, make room, append the 64 entries — with nothing stored to the media.
/// Next to `format_floor_nosum_64x0k` and `put/put_batch_64x0_nosum`: what is left of the
/// batch's time is planning's own work (validation, versions, the unit's layout).
fn bench_index_floor(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    region: &Region,
    names: &[Vec<u8>],
) {
    use nvs_core::internals::index::{name_key, Entry, Index, NONE};
    // As many entries as put_batch_64x1k's pool holds before it is formatted again.
    const ENTRIES: usize = 230_000;
    let entry = |name: u32, version: u64| Entry {
        version,
        payload_off: 4096,
        len_bytes: 1024,
        stored_bytes: 1024,
        seq: version,
        name,
        next: NONE,
        lane: 0,
        depth: 0,
        meta_len: 0,
        payload_sum: 0,
    };
    // The names on the media where the index says they are, as in a pool.
    let name_off = |i: usize| (8 << 20) + 64 * i as u64 + 48;
    for (i, n) in names.iter().enumerate() {
        region.store_nt(name_off(i) as usize, n);
    }
    let mut index = Index::new(HeapMemory::new());
    let fill = |index: &mut Index<HeapMemory>| {
        index.clear();
        for (i, n) in names.iter().enumerate() {
            index.insert(region, name_key(n, 0), n, name_off(i), entry(i as u32, 1)).expect("name");
        }
    };
    fill(&mut index);
    let mut version = 1u64;
    g.bench_function("index_64", |b| {
        b.iter(|| {
            if index.len() + names.len() > ENTRIES {
                fill(&mut index);
                version = 1;
            }
            version += 1;
            let mut latest = 0;
            for (i, n) in names.iter().enumerate() {
                let hash = index.name_is(region, i as u32, black_box(n)).expect("hint");
                let last = index.name(i as u32).last;
                latest |= index.entry(last).version ^ hash;
            }
            black_box(latest);
            index.prefetch_for((0..names.len() as u32).map(|i| (i, version)));
            index.reserve(names.len(), 0).expect("room");
            index.append_all((0..names.len() as u32).map(|i| (i, entry(i, version)))).expect("append");
        })
    });
}

criterion_group!(benches, bench_puts, bench_reads, bench_store_nt, bench_floor, bench_recovery);
criterion_main!(benches);
