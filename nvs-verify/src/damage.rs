//! Bad media (promise 6 of the README): committed pools with one metadata byte flipped, and
//! forged pools whose lengths were changed with every checksum and commit word
//! recomputed (as a buggy or hostile writer could leave). Recovery must return `Ok` or
//! a clear error, never panic or read out of bounds; and after a flip, whatever it does
//! return was really written (a flip may lose data, it may not invent any).
//!
//! A flip in a segment header is held to more, "never silent": recovery reports
//! corruption, or it returns every acknowledged object byte-exact with no committed
//! version missing (the full crash oracle at the end of the trace). Ownership is proven
//! by the header and again by the segment's committed units, so losing a header may not
//! lose its units unnoticed (DESIGN.md, R3c). So is a flip in the header of a unit that
//! is not its lane's newest: the later units prove it was committed (R5, R6b). Only the
//! newest unit's commit and checksum words may lose it silently (a torn commit looks
//! the same).

use crate::check::Failure;
use crate::contract::{oracle, recover_all, Recovered};
use crate::workload::{run, Workload};
use nvs_core::internals::format::{
    commit_word, decode_segment, decode_superblock, head_len, line_up, read_pod, ObjectHeader, UnitHeader, LINE,
    NAME_MAX,
};
use nvs_core::Key;
use nvs_core::{HeapMemory, Media, Pool};
use nvs_sim::SimMedia;
use std::time::{Duration, Instant};

/// What a metadata range is, for the oracle a flip in it is held to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Meta {
    /// Superblock, object headers and names, the newest unit header of a lane.
    Other,
    /// A segment header: never silent.
    Segment,
    /// The header of a unit that is not its lane's newest: never silent.
    Unit,
}

/// Byte ranges of the metadata of a pool image: segment headers, unit headers, object
/// headers and names (payloads are not checksummed unless the pool asks for it), each
/// with what it is.
fn metadata(media: &SimMedia) -> Vec<(usize, usize, Meta)> {
    let Ok(sb) = decode_superblock(media) else { return vec![] };
    let mut out = vec![(0, 64, Meta::Other)];
    // (index in `out`, lane, seq) of each unit header; the newest of each lane stays Other.
    let mut units = Vec::new();
    let mut covered_to = 0;
    for i in 0..sb.segment_count {
        // A span's covered segments begin with payload bytes (a forged payload's may
        // decode as a header): not metadata.
        if i < covered_to {
            continue;
        }
        let Some(h) = decode_segment(media, &sb, i) else { continue };
        covered_to = i + h.span.max(1) as u32;
        let seg = sb.segment_off(i);
        out.push((seg as usize, 64, Meta::Segment));
        let (mut off, end) = (seg + LINE, seg + sb.segment_len);
        while off + LINE <= end {
            let h: UnitHeader = read_pod(media, off);
            if h.unit_len == 0 || !h.unit_len.is_multiple_of(LINE) || off + h.unit_len > end || h.commit == 0 {
                break;
            }
            units.push((out.len(), h.lane, h.seq));
            out.push((off as usize, 64, Meta::Other));
            let mut obj = off + LINE;
            for _ in 0..h.object_count {
                let oh: ObjectHeader = read_pod(media, obj);
                out.push((obj as usize, 48 + oh.name_len as usize, Meta::Other));
                obj += nvs_core::internals::format::object_len(oh.name_len as usize, oh.payload_len);
            }
            off += h.unit_len;
        }
    }
    for &(k, lane, seq) in &units {
        if units.iter().any(|&(_, l, s)| l == lane && s > seq) {
            out[k].2 = Meta::Unit;
        }
    }
    out
}

/// The committed payloads of a pool image with payload checksums: (offset, length) of
/// each object's stored bytes (a delta's record), and, if its unit is its lane's newest
/// in a pool of sealed units (where damage reads as a torn unit: dropped), the unit's
/// object count (else 0).
fn payloads(media: &SimMedia) -> Vec<(usize, usize, usize)> {
    let Ok(sb) = decode_superblock(media) else { return vec![] };
    let mut out = Vec::new();
    let mut newest = std::collections::BTreeMap::new();
    let mut units = Vec::new();
    for i in 0..sb.segment_count {
        let Some(h) = decode_segment(media, &sb, i) else { continue };
        let seg = sb.segment_off(i);
        let (mut off, end) = (seg + LINE, seg + (h.span.max(1)) * sb.segment_len);
        while off + LINE <= end {
            let u: UnitHeader = read_pod(media, off);
            if u.unit_len == 0 || !u.unit_len.is_multiple_of(LINE) || off + u.unit_len > end || u.commit == 0 {
                break;
            }
            let mut obj = off + LINE;
            for _ in 0..u.object_count {
                let oh: ObjectHeader = read_pod(media, obj);
                let payload = obj + head_len(oh.name_len as usize, oh.meta_len as usize);
                if payload + oh.payload_len > off + u.unit_len {
                    break;
                }
                out.push((payload as usize, oh.payload_len as usize));
                units.push((u.lane, u.seq, u.object_count as usize));
                obj = payload + line_up(oh.payload_len);
            }
            let last = newest.entry(u.lane).or_insert(u.seq);
            *last = (*last).max(u.seq);
            off += u.unit_len;
        }
    }
    let sealed = sb.one_fence();
    let vanish = |lane, seq, count| if sealed && newest.get(&lane) == Some(&seq) { count } else { 0 };
    out.into_iter().zip(units).map(|((at, len), (lane, seq, count))| (at, len, vanish(lane, seq, count))).collect()
}

/// Payload damage in pools with payload checksums ("never silent" for bytes): each of
/// `workloads` runs with checksums on, then in its final pool every payload byte is
/// flipped, one at a time; every object the undamaged pool holds must then read back
/// byte-exact or be refused as corrupted — never other bytes — and at least one read
/// must be refused (the flipped object's). In a lane's newest sealed unit a flip reads as
/// a torn unit instead: recovery drops it, and its objects are not found (FORMAT.md).
pub fn check_payload_damage(workloads: &[Workload], stop_early: bool) -> DamageReport {
    let t = Instant::now();
    let mut r = DamageReport { workloads: workloads.len(), ..Default::default() };
    let fail = |r: &mut DamageReport, w: &Workload, point: usize, message: String| {
        r.failures.push(Failure { workload: w.id.clone(), point, choices: vec![], message });
        stop_early
    };
    'outer: for w in workloads {
        let mut w = w.clone();
        w.setup.payload_checksum = true;
        let trace = match run(&w) {
            Ok(t) => t,
            Err(e) => match fail(&mut r, &w, 0, e) {
                true => break,
                false => continue,
            },
        };
        let bytes = trace.media.volatile_bytes();
        let whole = match recover_bytes(&bytes) {
            Ok(rec) => rec,
            Err(e) => match fail(&mut r, &w, 0, format!("undamaged pool: {e}")) {
                true => break,
                false => continue,
            },
        };
        for (start, len, may_vanish) in payloads(&trace.media) {
            for at in start..start + len {
                let mut img = bytes.clone();
                img[at] ^= 0x10;
                r.images += 1;
                let verdict = match reads_of(SimMedia::from_bytes(&img), &whole, may_vanish) {
                    Ok(0) => Some(format!("payload flip at byte {at}: every read succeeded, byte-exact")),
                    Ok(refused) => {
                        r.refused += refused;
                        None
                    }
                    Err(e) => Some(format!("payload flip at byte {at}: {e}")),
                };
                if let Some(message) = verdict {
                    if fail(&mut r, &w, at, message) {
                        break 'outer;
                    }
                }
            }
        }
    }
    r.time = t.elapsed();
    r
}

/// Open `media` and read every object of `whole` (what the undamaged pool holds): each
/// must come back byte-exact or be refused as corrupted (or, up to `may_vanish` of them,
/// not be found: a newest sealed unit dropped as torn). Returns how many were refused or
/// gone.
fn reads_of(media: SimMedia, whole: &Recovered, may_vanish: usize) -> Result<u64, String> {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> Result<u64, String> {
        let pool = Pool::open_read_only(media, HeapMemory::new()).map_err(|e| format!("recovery failed: {e}"))?;
        let lane_names = pool.layout().lane_names;
        let (mut refused, mut gone) = (0, 0);
        for (name, version, lane, want) in &whole.objects {
            let mut buf = vec![0u8; want.len()];
            let got = pool.get(Key::new(lane_names.then_some(*lane), name), *version, &mut buf);
            let shown = String::from_utf8_lossy(name);
            match got {
                Ok(n) if n == want.len() && buf == *want => {}
                Ok(_) => return Err(format!("get({shown}, {version}) returned other bytes, without a word")),
                Err(nvs_core::Error::Corrupted { .. }) => refused += 1,
                Err(nvs_core::Error::NotFound) if gone < may_vanish => {
                    gone += 1;
                    refused += 1;
                }
                Err(e) => return Err(format!("get({shown}, {version}): {e} (not Corrupted)")),
            }
        }
        Ok(refused)
    }));
    r.unwrap_or_else(|_| Err("panicked".into()))
}

/// Open a copy of `bytes`, catching panics.
fn recover_bytes(bytes: &[u8]) -> Result<Recovered, String> {
    recover_all(SimMedia::from_bytes(bytes))
}

/// What a flip may cost without being reported: in a unit or object header, anything but
/// a phantom or wrong bytes (lost objects, a shorter prefix, a lost end-of-stream
/// marker); in a segment header only a join that committed no unit (its empty segment
/// is free again).
fn allowed_loss(oracle_error: &str, never_silent: bool) -> bool {
    let lost = ["lost", "prefix"].iter().any(|m| oracle_error.contains(m));
    oracle_error.contains("but it holds no segment") || (lost && !never_silent)
}

fn clear_error(msg: &str) -> bool {
    msg.starts_with("recovery failed:") && !msg.contains("panicked")
}

/// Forge lengths in every unit and object of `bytes`, recomputing checksums and commit
/// words so that only the bounds checks stand between them and recovery.
fn forgeries(bytes: &[u8]) -> Vec<Vec<u8>> {
    let media = SimMedia::from_bytes(bytes);
    let Ok(sb) = decode_superblock(&media) else { return vec![] };
    let mut out = Vec::new();
    for i in 0..sb.segment_count {
        let Some(seg_h) = decode_segment(&media, &sb, i) else { continue };
        let seg = sb.segment_off(i);
        let (off, end) = (seg + LINE, seg + sb.segment_len);
        let h: UnitHeader = read_pod(&media, off);
        if h.unit_len == 0 || off + h.unit_len > end {
            continue;
        }
        let put = |img: &mut Vec<u8>, at: u64, b: &[u8]| img[at as usize..at as usize + b.len()].copy_from_slice(b);
        for unit_len in [end - off + LINE, 1 << 40, u64::MAX - 63] {
            let mut f = h;
            f.unit_len = unit_len;
            f.checksum = f.compute_checksum(sb.pool_id);
            f.commit = commit_word(sb.pool_id, seg_h.lane, f.seq, f.checksum);
            let mut img = bytes.to_vec();
            put(&mut img, off, bytemuck::bytes_of(&f));
            out.push(img);
        }
        for count in [h.object_count + 1, 256] {
            let mut f = h;
            f.object_count = count;
            f.checksum = f.compute_checksum(sb.pool_id);
            f.commit = commit_word(sb.pool_id, seg_h.lane, f.seq, f.checksum);
            let mut img = bytes.to_vec();
            put(&mut img, off, bytemuck::bytes_of(&f));
            out.push(img);
        }
        let obj = off + LINE;
        let oh: ObjectHeader = read_pod(&media, obj);
        let mut name = vec![0u8; (oh.name_len as usize).min(NAME_MAX)];
        media.read(obj as usize + 48, &mut name);
        for (payload_len, name_len) in [(h.unit_len, oh.name_len), (1 << 40, oh.name_len), (oh.payload_len, 300)] {
            let mut f = oh;
            f.payload_len = payload_len;
            f.name_len = name_len;
            f.checksum = f.compute_checksum(sb.pool_id, &name, &[]);
            let mut img = bytes.to_vec();
            put(&mut img, obj, bytemuck::bytes_of(&f));
            out.push(img);
        }
    }
    out
}

/// Damage to more than one byte of the segment header at `start` of `bytes`, as the
/// changed bytes of each image: two bytes flipped (magic and pool id; two of the
/// magic), the checksum word zeroed, the whole line zeroed, and the line overwritten
/// with garbage. The header is lost in each: its segment's committed units must still
/// be reported, or lose nothing.
fn segment_damage(bytes: &[u8], start: usize) -> Vec<Vec<(usize, u8)>> {
    let flip = |at: usize| (at, bytes[at] ^ 0x10);
    let line = |f: fn(usize) -> u8| (start..start + 64).map(|at| (at, f(at))).collect::<Vec<_>>();
    vec![
        vec![flip(start), flip(start + 8)],
        vec![flip(start), flip(start + 1)],
        (start + 56..start + 64).map(|at| (at, 0)).collect(),
        line(|_| 0),
        line(|at| (at as u8).wrapping_mul(37) ^ 0xA5),
    ]
}

/// What the damage check found.
#[derive(Debug, Default)]
pub struct DamageReport {
    pub workloads: usize,
    pub images: u64,
    /// Of them, flips in a valid segment header (the "never silent" oracle).
    pub header_images: u64,
    /// Of those, flips in the header of a unit before its lane's newest (never silent).
    pub unit_images: u64,
    /// Payload flips: reads refused as corrupted (`check_payload_damage`).
    pub refused: u64,
    pub failures: Vec<Failure>,
    pub time: Duration,
}

/// Flip every metadata byte and forge every length of each of `workloads`' final pool;
/// of `headers_only`'s, flip every byte of every valid segment header.
pub fn check_damage(workloads: &[Workload], headers_only: &[Workload], stop_early: bool) -> DamageReport {
    let t = Instant::now();
    let mut r = DamageReport { workloads: workloads.len() + headers_only.len(), ..Default::default() };
    let all = workloads.iter().map(|w| (w, false)).chain(headers_only.iter().map(|w| (w, true)));
    'outer: for (w, only_headers) in all {
        let trace = match run(w) {
            Ok(t) => t,
            Err(e) => {
                r.failures.push(Failure { workload: w.id.clone(), point: 0, choices: vec![], message: e });
                if stop_early {
                    break;
                }
                continue;
            }
        };
        let bytes = trace.media.volatile_bytes();
        let end = trace.media.point();
        for (start, len, meta) in metadata(&trace.media).into_iter().filter(|m| m.2 == Meta::Segment || !only_headers) {
            // Every byte flipped alone; a segment header also loses more at once.
            let flips = (start..start + len).map(|at| vec![(at, bytes[at] ^ 0x10)]);
            let wider = match meta {
                Meta::Segment => segment_damage(&bytes, start),
                _ => vec![],
            };
            for changes in flips.chain(wider) {
                let at = changes[0].0;
                let mut img = bytes.clone();
                for &(b, v) in &changes {
                    img[b] = v;
                }
                r.images += 1;
                r.header_images += u64::from(meta == Meta::Segment);
                r.unit_images += u64::from(meta == Meta::Unit);
                let what = match meta {
                    Meta::Segment => " (segment header)",
                    Meta::Unit => " (header of a unit before its lane's newest)",
                    Meta::Other => "",
                };
                let verdict = match recover_bytes(&img) {
                    Ok(rec) => oracle(&trace.issued, end, &Recovered::default(), &rec)
                        .err()
                        .filter(|e| !allowed_loss(e, meta != Meta::Other))
                        .map(|e| format!("{} at byte {at}{what}: {e}", damage_name(changes.len()))),
                    Err(e) if clear_error(&e) => None,
                    Err(e) => Some(format!("{} at byte {at}: {e}", damage_name(changes.len()))),
                };
                if let Some(message) = verdict {
                    r.failures.push(Failure { workload: w.id.clone(), point: at, choices: vec![], message });
                    if stop_early {
                        break 'outer;
                    }
                }
            }
        }
        if only_headers {
            continue;
        }
        for (k, img) in forgeries(&bytes).into_iter().enumerate() {
            r.images += 1;
            if let Err(e) = recover_bytes(&img) {
                if !clear_error(&e) {
                    r.failures.push(Failure {
                        workload: w.id.clone(),
                        point: k,
                        choices: vec![],
                        message: format!("forgery {k}: {e}"),
                    });
                    if stop_early {
                        break 'outer;
                    }
                }
            }
        }
    }
    r.time = t.elapsed();
    r
}

/// How a damaged image is named in a failure: by the bytes it changed.
fn damage_name(bytes: usize) -> String {
    match bytes {
        1 => "flip".to_string(),
        n => format!("{n} bytes damaged"),
    }
}
