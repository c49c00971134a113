//! Writes the seed corpora of the fuzz targets into `fuzz/corpus/<target>/seed-*`
//! (deterministic: rerunning it rewrites the same files).
//!
//! ```sh
//! cargo run -p nvs-fuzz-check --example make_seeds
//! ```
//!
//! - `recover_image`: real pools written through `nvs_core::Pool` (empty, several lanes
//!   and segments, payload checksums, over an earlier pool's stale bytes, a torn last
//!   unit, truncated, a newer format version, a full pool);
//! - `decode`: a case byte and parameters (layout in `nvs_fuzz_check::decode`), with
//!   superblocks, segment headers and units cut from those pools;
//! - `ops_crash`: deterministic pseudo-random bytes (any bytes decode as an `Input`);
//! - `checkpoint`: each stage untouched and a few patches (layout in
//!   `nvs_fuzz_check::checkpoint`).

use nvs_core::internals::format::{Superblock, FORMAT_VERSION};
use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Region};
use nvs_fuzz_check::{fill, Image};
use std::path::{Path, PathBuf};

fn opts(id: u64, segment_len: u64, lanes: u32, sums: bool) -> FormatOptions {
    let mut o = FormatOptions::new(id);
    o.segment_len = Some(segment_len);
    o.lanes_max = lanes;
    o.payload_checksum = sums;
    o
}

/// A pool of `segments` 4 KiB segments after `write`, as bytes.
fn pool(
    segments: usize,
    background: Option<Vec<u8>>,
    o: FormatOptions,
    write: impl FnOnce(&mut Pool<Region, HeapMemory>),
) -> Vec<u8> {
    let len = 4096 + segments * o.segment_len.unwrap_or(4096) as usize;
    let mut img = Image::from_bytes(&background.unwrap_or_else(|| vec![0; len]));
    {
        let mut p = Pool::format(img.region(), o, HeapMemory::new()).expect("format");
        write(&mut p);
    }
    img.bytes()
}

fn busy(p: &mut Pool<Region, HeapMemory>) {
    for i in 0..24u64 {
        let name = format!("field{}", i % 5);
        let data = fill(i, (i as usize * 97) % 900);
        match i % 4 {
            0 => {
                p.put(0, Object::new(name.as_bytes(), &data)).expect("put");
            }
            1 => {
                let (a, b) = data.split_at(data.len() / 3);
                p.put((i % 3) as u32, Object::vectored(name.as_bytes(), &[a, b, &[7; 13]])).expect("vectored");
            }
            2 => {
                let (whole, half): ([&[u8]; 1], [&[u8]; 1]) = ([&data], [&data[..data.len() / 2]]);
                let objs = [Object::vectored(b"step/pressure", &whole), Object::vectored(b"step/velocity", &half)];
                p.put_batch(1, &objs).expect("batch");
            }
            _ => {
                p.put(2, Object::new(b"explicit", &data).version(10 * i)).expect("put with a version");
            }
        }
    }
}

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

/// The `checkpoint` target's seeds (layout in `nvs_fuzz_check::checkpoint`): each
/// stage untouched, and a few patches, with and without the sum fixed up.
fn checkpoint_seeds(dir: &Path) {
    let seeds: &[(&str, &[u8])] = &[
        ("untouched", &[0, 0]),
        ("after-puts", &[0, 1]),
        ("new-lane", &[0, 2]),
        ("retention", &[0, 3]),
        ("flip-head", &[0, 0, 0x10, 0, 0, 0, 1]),
        ("forged-lane", &[1, 0, 0xa0, 0, 0, 0, 1]),
        ("forged-entry", &[1, 1, 0, 3, 0, 0, 0x40]),
    ];
    std::fs::create_dir_all(dir).expect("corpus dir");
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
    }
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    checkpoint_seeds(&root.join("checkpoint"));
    let dirs: Vec<PathBuf> = ["recover_image", "decode", "ops_crash"].iter().map(|t| root.join(t)).collect();
    for d in &dirs {
        std::fs::create_dir_all(d).expect("corpus dir");
    }
    let (ri, de, oc) = (&dirs[0], &dirs[1], &dirs[2]);

    // recover_image
    let empty = pool(1, None, opts(0x11, 4096, 4, false), |_| {});
    let busy_img = pool(6, None, opts(0x22, 4096, 4, false), busy);
    let sums = pool(4, None, opts(0x33, 4096, 4, true), |p| {
        p.put(0, Object::new(b"checked", &fill(3, 1000))).unwrap();
        p.put(0, Object::new(b"checked", &fill(4, 10))).unwrap();
    });
    let stale_bg = pool(7, None, opts(0x44, 4096, 3, false), busy);
    let over_stale = pool(7, Some(stale_bg), opts(0x45, 4096, 3, false), |p| {
        p.put(0, Object::new(b"new", b"fresh bytes over a stale pool")).unwrap();
    });
    let mut torn = busy_img.clone();
    {
        // Tear the last unit of lane 2: zero its commit word.
        let mut img = Image::from_bytes(&busy_img);
        let p = Pool::open_read_only(img.region(), HeapMemory::new()).unwrap();
        let last = p.versions(b"explicit").unwrap().last().unwrap();
        let unit = last.offset - nvs_core::internals::format::object_head_len(8) - 64;
        drop(p);
        torn[unit as usize..unit as usize + 8].fill(0);
    }
    let truncated = busy_img[..busy_img.len() - 4096].to_vec();
    let mut newer = empty.clone();
    let mut sb: Superblock = bytemuck::pod_read_unaligned(&newer[..64]);
    sb.format_version = FORMAT_VERSION + 1;
    sb.checksum = sb.compute_checksum();
    newer[..64].copy_from_slice(bytemuck::bytes_of(&sb));
    let full =
        pool(2, None, opts(0x55, 4096, 1, false), |p| while p.put(0, Object::new(b"fill", &[1; 1000])).is_ok() {});
    let eight_k = pool(3, None, opts(0x66, 8192, 256, false), |p| {
        for lane in [0u32, 17, 255] {
            p.put(lane, Object::vectored(b"lane", &[&fill(lane as u64, 5000)])).unwrap();
        }
    });
    let closed = pool(3, None, opts(0x77, 4096, 4, false), |p| {
        p.put(0, Object::new(b"before", b"closing")).unwrap();
        p.close_lane(0).unwrap();
        p.close_lane(2).unwrap();
        p.put(2, Object::vectored(b"reopened", &[b"after a close"])).unwrap();
        p.close_lane(3).unwrap();
    });
    for (n, b) in [
        ("seed-closed-lanes", &closed),
        ("seed-empty", &empty),
        ("seed-busy", &busy_img),
        ("seed-payload-checksums", &sums),
        ("seed-over-stale-pool", &over_stale),
        ("seed-torn-last-unit", &torn),
        ("seed-truncated", &truncated),
        ("seed-newer-version", &newer),
        ("seed-full", &full),
        ("seed-8k-segments-256-lanes", &eight_k),
    ] {
        write(ri, n, b);
    }

    // decode: case 0 (raw superblock + segments)
    write(de, "seed-0-empty-pool", &[&[0u8][..], &empty].concat());
    write(de, "seed-0-busy-pool", &[&[0u8][..], &sums].concat());
    // case 1: pool_id, sel, segment_len selector, media_len, lanes, flags, flip
    let mut c1 = vec![1u8];
    c1.extend(0x1234u64.to_le_bytes());
    c1.push(1); // sel: small segment, valid lanes/flags/version
    c1.push(2); // segment 16 KiB
    c1.extend((1u64 << 20).to_le_bytes());
    c1.push(63); // lanes 64
    c1.extend(1u32.to_le_bytes()); // payload checksums
    c1.extend([0u8, 0, 0]); // no flip
    write(de, "seed-1-superblock", &c1);
    let mut c1f = c1.clone();
    let n = c1f.len();
    c1f[n - 3..].copy_from_slice(&[21, 0, 3]); // flip bit 3 of byte 20
    write(de, "seed-1-superblock-flipped", &c1f);
    // case 2: pool_id, lanes, count, i, sel, lane, chain_seq, first_seq, reserved x2, checksum, flip
    let mut c2 = vec![2u8];
    c2.extend(0x22u64.to_le_bytes());
    c2.extend([3, 3, 1, 0, 2]);
    c2.extend(1u64.to_le_bytes());
    c2.extend(7u64.to_le_bytes());
    c2.extend([0u8; 24]);
    c2.extend([0u8, 0, 0]);
    write(de, "seed-2-segment", &c2);
    // case 3: pool_id, fix, lane, seq, slot, count_fix, then the unit bytes from a real pool
    let unit_of = |img: &[u8], name: &[u8], v: u64| {
        let mut im = Image::from_bytes(img);
        let p = Pool::open_read_only(im.region(), HeapMemory::new()).unwrap();
        let st = p.stat(name, v).unwrap();
        let id = p.superblock().pool_id;
        let unit = (st.offset - nvs_core::internals::format::object_head_len(name.len()) - 64) as usize;
        let mut bh = [0u8; 64];
        bh.copy_from_slice(&img[unit..unit + 64]);
        let h: nvs_core::internals::format::UnitHeader = bytemuck::pod_read_unaligned(&bh);
        (id, st.lane as u8, st.seq as u8, img[unit..unit + h.unit_len as usize].to_vec())
    };
    for (tag, fix, (id, lane, seq, unit)) in [
        ("batch", 0u8, unit_of(&busy_img, b"step/pressure", 1)),
        ("vectored", 0, unit_of(&busy_img, b"field1", 1)),
        ("batch-fixed", 0x1f, unit_of(&busy_img, b"step/pressure", 2)),
    ] {
        let mut c3 = vec![3u8];
        c3.extend(id.to_le_bytes());
        c3.extend([fix, lane, seq % 4, 0, 2]);
        c3.extend(&unit);
        write(de, &format!("seed-3-{tag}"), &c3);
    }
    // case 4: pool_id, sel, lane, pre, n, per object (name_len, len u16, bump), flip u16 + bit
    let mut c4 = vec![4u8];
    c4.extend(0x44u64.to_le_bytes());
    c4.extend([1, 2, 1, 2]);
    c4.extend([10, 0x90, 0x01, 0, 200, 0x10, 0x00, 5]);
    c4.extend([70, 0, 2]);
    write(de, "seed-4-round-trip", &c4);
    let mut c5 = vec![5u8];
    c5.extend(9u64.to_le_bytes());
    c5.extend([17, 100, 201]);
    c5.extend(fill(5, 300));
    write(de, "seed-5-hash", &c5);

    // ops_crash: any bytes decode as an Input.
    for (i, len) in [64usize, 200, 512, 1024, 2048].iter().enumerate() {
        write(oc, &format!("seed-random-{i}"), &fill(0x0C0C + i as u64, *len));
    }
}
