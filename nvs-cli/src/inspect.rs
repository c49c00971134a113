//! The commands that read a pool's bytes as they lie, through nvs-core's read-only
//! [`Walker`] (no recovery, so a damaged pool is read as far as it decodes): `dump` (every
//! segment, unit and object; or a hex dump of a byte range), `info --stats` (space per
//! lane and segment) and `salvage` (every object that still verifies, into a new pool).
//! None of them ever writes the pool it reads: it is mapped read-only.

use super::commands::{same_file, stdout};
use super::json::Obj;
use super::progress;
use super::CliError;
use nvs_core::internals::format::LINE;
use nvs_core::walk::{Damage, Item, SegmentState, WalkedObject, Walker};
use nvs_core::{CorruptKind, Object};
use nvs_std::{show_name, Access, CreateOptions, Durability, FilePool, MappedMedia};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Map `pool` read-only (no recovery) and decode its superblock.
fn open_raw(pool: &Path) -> Result<MappedMedia, CliError> {
    Ok(MappedMedia::open_read_only(pool)?)
}

fn walker<'m>(pool: &Path, media: &'m MappedMedia) -> Result<Walker<'m, MappedMedia>, CliError> {
    Walker::new_truncated(media)
        .map_err(|source| CliError::Pool(nvs_std::Error::Core { path: pool.to_path_buf(), source }))
}

/// Damage a recovery that succeeded cannot see, found by the raw walk: lines of units
/// zeroed or torn before later committed units of their lane (recovery ends the lane
/// there), one line each. `nvs check` runs it after a clean recovery.
pub fn walk_damage(pool: &Path) -> Result<Vec<String>, CliError> {
    let media = open_raw(pool)?;
    let w = walker(pool, &media)?;
    let mut out = Vec::new();
    let line =
        |d: &Damage| format!("damaged: {:#x} (lane {} seq {}): {}: {}", d.offset, d.lane, d.seq, d.kind, lost_by(d));
    w.walk(&mut |item| match item {
        Item::Damage(d) => out.push(line(&d)),
        Item::Segment(s) if matches!(s.state, SegmentState::Damaged { .. }) => {
            out.push(format!("damaged: segment {} header at {:#x}", s.index, s.offset))
        }
        _ => {}
    });
    out.extend(chain_gaps(&w).iter().map(|(_, d)| line(d)));
    Ok(out)
}

/// Units lost at the end of a lane's segment, before its next one in the lane's chain
/// (lines zeroed or torn up to the segment's end): the next segment's first seq is past
/// where this one's units reach. The walk reads each segment alone; this ties each to
/// the next of its chain. One per such place: the segment's index and the damage, at
/// the end of its units, resumed at the next segment's first unit.
fn chain_gaps(w: &Walker<'_, MappedMedia>) -> Vec<(u32, Damage)> {
    // (lane, chain_seq, first_seq, seq its units reach, index, where they end, data start)
    let mut segs: Vec<(u32, u64, u64, u64, u32, u64, u64)> = Vec::new();
    let mut current = false;
    w.walk(&mut |item| match item {
        Item::Segment(s) => {
            current = false;
            if let SegmentState::Owned { lane, chain_seq, first_seq, .. } = s.state {
                segs.push((lane, chain_seq, first_seq, first_seq, s.index, s.offset, s.offset + LINE));
                current = true;
            }
        }
        Item::Unit(u) if current => {
            if let Some(last) = segs.last_mut().filter(|l| l.0 == u.lane) {
                last.3 = last.3.max(u.seq + 1);
            }
        }
        Item::SegmentEnd(e) if current => {
            if let Some(last) = segs.last_mut() {
                last.5 = e.units_end;
            }
        }
        _ => {}
    });
    segs.sort_unstable_by_key(|s| (s.0, s.1));
    segs.windows(2)
        .filter_map(|p| {
            let (a, b) = (p[0], p[1]);
            (a.0 == b.0 && b.1 == a.1 + 1 && b.2 > a.3).then(|| {
                (
                    a.4,
                    Damage {
                        offset: a.5,
                        kind: CorruptKind::SequenceGap,
                        lane: a.0,
                        seq: a.3,
                        resumed_at: Some(b.6),
                        units_lost: b.2 - a.3,
                        objects_lost: 0,
                    },
                )
            })
        })
        .collect()
}

fn unit_kind(flags: u64) -> &'static str {
    match flags {
        0 => "objects",
        1 => "end-of-stream",
        2 => "truncate",
        4 => "detach",
        _ => "?",
    }
}

/// `nvs dump POOL`: every segment, unit and object, then a summary; exit 1 if anything
/// is damaged (after printing all that decodes).
pub fn dump(pool: &Path) -> Result<(), CliError> {
    let media = open_raw(pool)?;
    let w = walker(pool, &media)?;
    let sb = w.layout();
    let mut o = String::new();
    let _ = writeln!(
        o,
        "pool {}: format {}, pool id {:#018x}, {} bytes in {} segments of {} at {:#x}, {} lanes, payload checksum {}, deltas {}",
        pool.display(),
        sb.format_version,
        sb.pool_id,
        sb.pool_len,
        sb.segment_count,
        sb.segment_len,
        w.segment_offset(0),
        sb.lanes_max,
        if sb.payload_checksum { "on" } else { "off" },
        if sb.deltas { "allowed" } else { "no" },
    );
    if w.segments_present() < sb.segment_count {
        let _ = writeln!(
            o,
            "TRUNCATED: the file ({} bytes) holds {} of the {} segments whole: the rest is not walked",
            nvs_core::Media::len(&media),
            w.segments_present(),
            sb.segment_count
        );
    }
    // Recovery's verdict (what every other command sees), then the bytes as they lie.
    match FilePool::open_with(pool, Access::ReadOnly, None) {
        Ok(p) => {
            let st = p.stats();
            let _ = writeln!(
                o,
                "recovery: ok: {} units, {} objects, {} segments used",
                st.units, st.objects, st.segments_used
            );
        }
        Err(e) => {
            let _ = writeln!(o, "recovery: FAILED: {e}");
        }
    }
    // Units lost at a segment's end, shown after its end of units.
    let gaps = chain_gaps(&w);
    let (mut units, mut objects, mut payload, mut damaged, mut bad_payloads) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut free_run: Option<(u32, u32)> = None;
    let flush_free = |o: &mut String, run: &mut Option<(u32, u32)>| {
        if let Some((a, b)) = run.take() {
            match a == b {
                true => {
                    let _ = writeln!(o, "segment {a}: free");
                }
                false => {
                    let _ = writeln!(o, "segments {a}..={b}: free");
                }
            }
        }
    };
    w.walk(&mut |item| match item {
        Item::Segment(s) => {
            if s.state == SegmentState::Free {
                free_run = match free_run {
                    Some((a, b)) if b + 1 == s.index => Some((a, s.index)),
                    run => {
                        let mut run = run;
                        flush_free(&mut o, &mut run);
                        Some((s.index, s.index))
                    }
                };
                return;
            }
            flush_free(&mut o, &mut free_run);
            match s.state {
                SegmentState::Owned { lane, chain_seq, first_seq, span } => {
                    let _ = writeln!(
                        o,
                        "segment {} @{:#x}: lane {lane} chain {chain_seq} first_seq {first_seq} span {span} checksum {:#018x}",
                        s.index, s.offset, s.checksum
                    );
                }
                SegmentState::Damaged { unit } => {
                    damaged += 1;
                    let found = match unit {
                        Some((lane, seq)) => format!("its first unit is lane {lane} seq {seq}: walked from there"),
                        None => "no committed unit at its data start".into(),
                    };
                    let _ = writeln!(o, "segment {} @{:#x}: DAMAGED header; {found}", s.index, s.offset);
                }
                SegmentState::Free => {}
            }
        }
        Item::Unit(u) => {
            units += 1;
            let _ = writeln!(
                o,
                "  unit @{:#x}: lane {} seq {} len {} {}{} checksum {:#018x} commit {:#018x}",
                u.offset,
                u.lane,
                u.seq,
                u.unit_len,
                match u.flags {
                    0 => format!("objects {}", u.object_count),
                    f => format!("marker {}", unit_kind(f)),
                },
                if u.flags == 2 { format!(" base {}", u.base) } else { String::new() },
                u.checksum,
                u.commit
            );
        }
        Item::Object(ob) => {
            objects += 1;
            payload += ob.payload_len;
            let verdict = match w.payload_ok(&ob) {
                Some(true) => "ok",
                Some(false) => {
                    bad_payloads += 1;
                    "BAD"
                }
                None => "-",
            };
            let kind = match ob.depth {
                0 => "full".to_string(),
                d => format!("delta depth {d} of v{}", w.delta_parent(&ob).unwrap_or(0)),
            };
            let _ = writeln!(
                o,
                "    object @{:#x}: {} v{} {kind} len {} stored {} meta {} payload @{:#x} sum {:#018x} {verdict} checksum {:#018x}",
                ob.offset,
                show_name(ob.name),
                ob.version,
                ob.len_bytes,
                ob.payload_len,
                ob.meta.len(),
                ob.payload_off,
                ob.payload_sum,
                ob.checksum
            );
        }
        Item::Damage(d) => {
            damaged += 1;
            let then = match d.resumed_at {
                Some(at) => format!("; resumed at {at:#x}"),
                None => "; the rest of the segment is unread".into(),
            };
            let _ =
                writeln!(o, "  DAMAGE @{:#x} (lane {} seq {}): {}; {}{then}", d.offset, d.lane, d.seq, d.kind, lost_by(&d));
        }
        Item::SegmentEnd(e) => {
            let _ = writeln!(o, "  end of units @{:#x}: {} bytes after them", e.units_end, e.end - e.units_end);
            for (_, d) in gaps.iter().filter(|(i, _)| *i == e.index) {
                damaged += 1;
                let at = d.resumed_at.unwrap_or(0);
                let _ = writeln!(
                    o,
                    "  DAMAGE @{:#x} (lane {} seq {}): {}: the lane's next segment starts at seq {}; {} (resumed at {at:#x})",
                    d.offset,
                    d.lane,
                    d.seq,
                    d.kind,
                    d.seq + d.units_lost,
                    lost_by(d)
                );
            }
        }
    });
    flush_free(&mut o, &mut free_run);
    let _ = writeln!(
        o,
        "summary: {units} units, {objects} objects, {payload} payload bytes, {bad_payloads} bad payloads, {damaged} damaged headers"
    );
    stdout(&o)?;
    let truncated = u64::from(w.segments_present() < sb.segment_count);
    if damaged + bad_payloads + truncated > 0 {
        return Err(CliError::Mismatch(format!(
            "{}: damage found: {damaged} damaged headers, {bad_payloads} bad payloads{} (listed above)",
            pool.display(),
            if truncated > 0 { ", truncated" } else { "" }
        )));
    }
    Ok(())
}

/// `nvs dump POOL --range OFF:LEN`: a hex dump of the file's bytes (any file: it need
/// not be a pool), clipped at the end of the file.
pub fn dump_range(pool: &Path, range: (u64, u64)) -> Result<(), CliError> {
    let io = |e| CliError::io(format!("cannot read {}", pool.display()), e);
    // O_NONBLOCK: a FIFO is refused below, not waited on.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(pool)
        .map_err(io)?;
    let meta = f.metadata().map_err(io)?;
    if !meta.is_file() {
        return Err(CliError::Usage(format!("{}: --range reads a regular file", pool.display())));
    }
    let (off, len) = range;
    if off >= meta.len() && len > 0 {
        return Err(CliError::Usage(format!(
            "{}: offset {off:#x} is past its end ({:#x})",
            pool.display(),
            meta.len()
        )));
    }
    let len = len.min(meta.len() - off);
    f.seek(std::io::SeekFrom::Start(off)).map_err(io)?;
    let mut r = f.take(len);
    let mut buf = vec![0u8; 1 << 16];
    let mut at = off;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    loop {
        let mut n = 0;
        // Whole 16-byte lines but at the end.
        while n < buf.len() {
            let k = r.read(&mut buf[n..]).map_err(io)?;
            if k == 0 {
                break;
            }
            n += k;
        }
        if n == 0 {
            break;
        }
        let mut text = String::with_capacity(n * 5);
        for line in buf[..n].chunks(16) {
            let _ = write!(text, "{at:08x} ");
            for (i, b) in line.iter().enumerate() {
                let _ = write!(text, "{}{b:02x}", if i == 8 { "  " } else { " " });
            }
            let pad = 16 - line.len();
            text.extend(std::iter::repeat_n(' ', pad * 3 + usize::from(line.len() <= 8)));
            text.push_str("  |");
            text.extend(line.iter().map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' }));
            text.push_str("|\n");
            at += line.len() as u64;
        }
        if let Err(e) = out.write_all(text.as_bytes()) {
            return quiet_pipe(e);
        }
    }
    out.flush().or_else(quiet_pipe)
}

fn quiet_pipe(e: std::io::Error) -> Result<(), CliError> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    Err(CliError::io("cannot write stdout", e))
}

/// `OFF:LEN` (each a number of bytes, decimal, `0x` hex, or with a K/M/G/T suffix).
pub fn parse_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s.split_once(':').ok_or_else(|| format!("bad range '{s}': expected OFF:LEN, e.g. 0x1000:256"))?;
    let num = |t: &str| match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).map_err(|_| format!("bad range '{s}': bad hex '{t}'")),
        _ => super::size::parse_size(t).map_err(|e| format!("bad range '{s}': {e}")),
    };
    let (off, len) = (num(a)?, num(b)?);
    off.checked_add(len).ok_or_else(|| format!("bad range '{s}': past 2^64"))?;
    Ok((off, len))
}

/// One owned segment's (or span's) space, for `info --stats`.
#[derive(Default, Clone)]
struct SegStats {
    index: u32,
    lane: Option<u32>,
    chain_seq: u64,
    span: u64,
    units: u64,
    objects: u64,
    deltas: u64,
    payload: u64,
    /// Bytes holding units (headers, names, metadata, payloads, padding).
    unit_bytes: u64,
    bytes: u64,
    /// Space after the last unit, in the lane's newest segment (puts still use it).
    free: u64,
}

impl SegStats {
    /// Space holding no unit that no put will use: the segment header, and the tail of
    /// a segment its lane has moved past.
    fn wasted(&self) -> u64 {
        self.bytes - self.unit_bytes - self.free
    }
}

/// Per-segment space, walked from the media of an open pool.
fn seg_stats(w: &Walker<'_, MappedMedia>) -> Vec<SegStats> {
    let mut segs: Vec<SegStats> = Vec::new();
    w.walk(&mut |item| match item {
        Item::Segment(s) => {
            let (lane, chain_seq, span) = match s.state {
                SegmentState::Owned { lane, chain_seq, span, .. } => (Some(lane), chain_seq, span),
                SegmentState::Damaged { unit } => (unit.map(|u| u.0), u64::MAX, 1),
                SegmentState::Free => (None, 0, 1),
            };
            segs.push(SegStats { index: s.index, lane, chain_seq, span, ..SegStats::default() });
        }
        Item::Unit(u) => {
            if let Some(s) = segs.last_mut() {
                s.units += 1;
                s.unit_bytes += u.unit_len;
            }
        }
        Item::Object(ob) => {
            if let Some(s) = segs.last_mut() {
                s.objects += 1;
                s.payload += ob.payload_len;
                s.deltas += u64::from(ob.depth > 0);
            }
        }
        Item::Damage(_) => {}
        Item::SegmentEnd(e) => {
            if let Some(s) = segs.last_mut() {
                s.bytes = e.end - w.segment_offset(e.index);
                s.free = e.end - e.units_end; // kept only for the lane's newest segment, below
            }
        }
    });
    let seg_len = w.layout().segment_len;
    let mut newest: HashMap<u32, u64> = HashMap::new();
    for s in &segs {
        if let Some(l) = s.lane.filter(|_| s.chain_seq != u64::MAX) {
            let e = newest.entry(l).or_insert(s.chain_seq);
            *e = (*e).max(s.chain_seq);
        }
    }
    for s in &mut segs {
        match s.lane {
            Some(l) if newest.get(&l) == Some(&s.chain_seq) => {}
            Some(_) => s.free = 0,
            None => {
                s.bytes = seg_len;
                s.free = seg_len; // a free segment
                s.unit_bytes = 0;
            }
        }
    }
    segs
}

/// `info --stats`: per lane and per segment (after `info`'s own lines or JSON line).
pub fn stats(p: &FilePool, json: bool) -> Result<String, CliError> {
    let w = walker(p.path(), p.media())?;
    let segs = seg_stats(&w);
    let mut o = String::new();
    let mut lanes: std::collections::BTreeMap<u32, SegStats> = Default::default();
    let mut free = SegStats::default();
    for s in &segs {
        let t = match s.lane {
            Some(l) => lanes.entry(l).or_default(),
            None => &mut free,
        };
        t.span += s.span;
        t.units += s.units;
        t.objects += s.objects;
        t.deltas += s.deltas;
        t.payload += s.payload;
        t.unit_bytes += s.unit_bytes;
        t.bytes += s.bytes;
        t.free += s.free;
    }
    if json {
        for (l, t) in &lanes {
            let closed = p.lane_info(*l).is_some_and(|i| i.closed);
            o += &Obj::new()
                .str("kind", "lane")
                .num("lane", *l as u64)
                .num("segments", t.span)
                .num("units", t.units)
                .num("objects", t.objects)
                .num("deltas", t.deltas)
                .num("payload_bytes", t.payload)
                .num("unit_bytes", t.unit_bytes)
                .num("wasted_bytes", t.wasted())
                .num("free_bytes", t.free)
                .bool("closed", closed)
                .line();
        }
        for s in segs.iter().filter(|s| s.lane.is_some()) {
            o += &Obj::new()
                .str("kind", "segment")
                .num("segment", s.index as u64)
                .num("lane", s.lane.unwrap_or(0) as u64)
                .num("chain_seq", if s.chain_seq == u64::MAX { 0 } else { s.chain_seq })
                .bool("damaged", s.chain_seq == u64::MAX)
                .num("span", s.span)
                .num("units", s.units)
                .num("objects", s.objects)
                .num("deltas", s.deltas)
                .num("payload_bytes", s.payload)
                .num("unit_bytes", s.unit_bytes)
                .num("wasted_bytes", s.wasted())
                .num("free_bytes", s.free)
                .line();
        }
        o += &Obj::new().str("kind", "free").num("segments", free.span).num("free_bytes", free.free).line();
        return Ok(o);
    }
    let _ = writeln!(o, "\nper lane (bytes; wasted: segment space holding no unit that no put will use):");
    let _ = writeln!(
        o,
        "{:>6} {:>8} {:>8} {:>9} {:>7} {:>14} {:>14} {:>12} {:>14}",
        "lane", "segments", "units", "objects", "deltas", "payload", "in units", "wasted", "free"
    );
    for (l, t) in &lanes {
        let _ = writeln!(
            o,
            "{l:>6} {:>8} {:>8} {:>9} {:>7} {:>14} {:>14} {:>12} {:>14}",
            t.span,
            t.units,
            t.objects,
            t.deltas,
            t.payload,
            t.unit_bytes,
            t.wasted(),
            t.free
        );
    }
    let _ = writeln!(o, "free segments: {} ({} bytes)", free.span, free.free);
    let _ = writeln!(o, "\nper segment (used ones; a span is one row):");
    let _ = writeln!(
        o,
        "{:>8} {:>6} {:>6} {:>5} {:>7} {:>8} {:>7} {:>14} {:>14} {:>12} {:>14}",
        "segment", "lane", "chain", "span", "units", "objects", "deltas", "payload", "in units", "wasted", "free"
    );
    for s in segs.iter().filter(|s| s.lane.is_some()) {
        let chain = if s.chain_seq == u64::MAX { "dmg".to_string() } else { s.chain_seq.to_string() };
        let _ = writeln!(
            o,
            "{:>8} {:>6} {chain:>6} {:>5} {:>7} {:>8} {:>7} {:>14} {:>14} {:>12} {:>14}",
            s.index,
            s.lane.unwrap_or(0),
            s.span,
            s.units,
            s.objects,
            s.deltas,
            s.payload,
            s.unit_bytes,
            s.wasted(),
            s.free
        );
    }
    Ok(o)
}

/// An object salvage will copy, and where its bytes come from.
struct Found {
    name: Vec<u8>,
    version: u64,
    lane: u32,
    seq: u64,
    meta: Vec<u8>,
    /// For the raw walk: the object as walked (its name and meta borrowed from above).
    at: Option<Walked>,
}

/// A [`WalkedObject`]'s own fields (the name and meta live in [`Found`]).
#[derive(Clone, Copy)]
struct Walked {
    offset: u64,
    unit_offset: u64,
    flags: u16,
    depth: u16,
    payload_off: u64,
    payload_len: u64,
    len_bytes: u64,
    payload_sum: u64,
    checksum: u64,
}

impl Found {
    fn walked(&self) -> Option<WalkedObject<'_>> {
        let a = self.at?;
        Some(WalkedObject {
            offset: a.offset,
            unit_offset: a.unit_offset,
            lane: self.lane,
            seq: self.seq,
            version: self.version,
            name: &self.name,
            meta: &self.meta,
            flags: a.flags,
            depth: a.depth,
            payload_off: a.payload_off,
            payload_len: a.payload_len,
            len_bytes: a.len_bytes,
            payload_sum: a.payload_sum,
            checksum: a.checksum,
        })
    }
}

/// Where salvage reads from: recovery's index, or (recovery failed) the raw walk.
enum Source<'m> {
    Index(Box<FilePool>),
    Walk { walker: Walker<'m, MappedMedia>, by_key: HashMap<Key, usize> },
}

/// `nvs salvage BAD NEW`: exit 0 if every object was copied and nothing was damaged,
/// 1 if something was lost (listed on stdout), 2 for a refusal (NEW exists, is BAD...).
pub fn salvage(bad: &Path, new: &Path, size: Option<u64>, durability: Option<Durability>) -> Result<(), CliError> {
    // NEW may be BAD under another name (a link, /proc/self/fd/N): refused by identity.
    if same_file(bad, new) {
        return Err(CliError::Usage(format!(
            "{}: {} is the pool being salvaged; refusing to write onto it",
            bad.display(),
            new.display()
        )));
    }
    if std::fs::symlink_metadata(new).is_ok() {
        return Err(CliError::Usage(format!("{}: exists; salvage writes only a new file", new.display())));
    }
    let media = open_raw(bad)?;
    let walker = walker(bad, &media)?;
    let layout = walker.layout();
    let mut lost: Vec<String> = Vec::new();
    // Lost to damage beyond the objects named: objects counted by their unit's header,
    // whole units (their objects unknown), and whether some damage left the rest of a
    // segment unread (or the file is truncated): more may be lost than counted.
    let (mut counted, mut units_lost, mut unread) = (0u64, 0u64, false);
    // Why recovery failed, if it did (then every segment is read as it lies).
    let mut recovery = None;
    let mut found: Vec<Found> = Vec::new();
    let mut closed: Vec<u32>;
    // A recovery that succeeds beside damage it steps past (units lost before later ones
    // of their lane) would leave those later ones out: read as it lies then too.
    let hidden = walk_damage(bad)?;
    let opened = match FilePool::open_with(bad, Access::ReadOnly, None) {
        Ok(_) if !hidden.is_empty() => Err(format!("recovery steps past {} damaged regions", hidden.len())),
        Ok(p) => Ok(p),
        Err(e) if e.is_corruption() => Err(e.to_string()),
        Err(e) => return Err(e.into()),
    };
    let (source, how) = match opened {
        Ok(p) => {
            let mut buf = [0u8; nvs_core::NAME_MAX];
            for n in p.names().collect::<Vec<_>>() {
                let name = p.name_bytes(n.id, &mut buf).to_vec();
                if name.is_empty() {
                    continue;
                }
                for v in p.versions_of(n.id) {
                    let meta = if v.meta_len > 0 {
                        p.meta(nvs_core::Key::on(v.lane, &name), v.version).unwrap_or_default()
                    } else {
                        vec![]
                    };
                    found.push(Found {
                        name: name.clone(),
                        version: v.version,
                        lane: v.lane,
                        seq: v.seq,
                        meta,
                        at: None,
                    });
                }
            }
            closed = (0..layout.lanes_max).filter(|&l| p.lane_info(l).is_some_and(|i| i.closed)).collect();
            (Source::Index(Box::new(p)), "recovery's index")
        }
        Err(why) => {
            recovery = Some(why);
            if walker.segments_present() < layout.segment_count {
                unread = true;
                lost.push(format!(
                    "damaged: truncated: the file holds {} of the {} segments whole; what the rest held is lost",
                    walker.segments_present(),
                    layout.segment_count
                ));
            }
            let mut last: HashMap<u32, (u64, u64)> = HashMap::new();
            let mut damage = Vec::new();
            walker.walk(&mut |item| match item {
                Item::Object(o) => found.push(Found {
                    name: o.name.to_vec(),
                    version: o.version,
                    lane: o.lane,
                    seq: o.seq,
                    meta: o.meta.to_vec(),
                    at: Some(Walked {
                        offset: o.offset,
                        unit_offset: o.unit_offset,
                        flags: o.flags,
                        depth: o.depth,
                        payload_off: o.payload_off,
                        payload_len: o.payload_len,
                        len_bytes: o.len_bytes,
                        payload_sum: o.payload_sum,
                        checksum: o.checksum,
                    }),
                }),
                Item::Damage(d) => damage.push(d),
                Item::Segment(s) => {
                    if let SegmentState::Damaged { .. } = s.state {
                        lost.push(format!(
                            "damaged: segment {} header at {:#x}: its units walked as found",
                            s.index, s.offset
                        ));
                    }
                }
                Item::Unit(u) => {
                    let e = last.entry(u.lane).or_insert((u.seq, u.flags));
                    if u.seq >= e.0 {
                        *e = (u.seq, u.flags);
                    }
                }
                _ => {}
            });
            // Units lost at a segment's end, before the next of its lane's chain.
            damage.extend(chain_gaps(&walker).into_iter().map(|(_, d)| d));
            for d in damage {
                let what = match d.resumed_at {
                    Some(at) => format!("resumed at {at:#x}"),
                    None => "the rest of its segment is unread".into(),
                };
                lost.push(format!(
                    "damaged: {:#x} (lane {} seq {}): {}: {}; {what}",
                    d.offset,
                    d.lane,
                    d.seq,
                    d.kind,
                    lost_by(&d)
                ));
                counted += d.objects_lost;
                units_lost += d.units_lost;
                unread |= d.resumed_at.is_none();
            }
            closed = last.iter().filter(|(_, &(_, f))| f == 1).map(|(&l, _)| l).collect();
            closed.sort_unstable();
            // A (name, version) met twice (a released segment not yet invalidated):
            // the first one met is kept.
            let mut seen = std::collections::HashSet::new();
            found.retain(|f| seen.insert(key(layout.lane_names, f.lane, &f.name, f.version)));
            let by_key = found
                .iter()
                .enumerate()
                .map(|(i, f)| (key(layout.lane_names, f.lane, &f.name, f.version), i))
                .collect();
            (Source::Walk { walker, by_key }, "a raw walk")
        }
    };
    // Versions of a name in order; across names, by version, then commit order.
    let mut order: Vec<usize> = (0..found.len()).collect();
    order.sort_by_key(|&i| (found[i].version, found[i].lane, found[i].seq));
    let mut opts = CreateOptions::new()
        .segment_len(layout.segment_len)
        .lanes_max(layout.lanes_max)
        .payload_checksum(layout.payload_checksum)
        .lane_names(layout.lane_names);
    opts.durability = durability;
    let mut dst = FilePool::create(new, size.unwrap_or(layout.pool_len), &opts)?;
    // A SIGBUS (BAD shrinking under the copy) removes NEW too.
    let sigbus = super::sigbus::output_created(new);
    let bar = progress::bar(order.len() as u64, "salvage");
    let (mut copied, mut names) = (0u64, std::collections::HashSet::new());
    // Versions recovery's index held that a live writer's retention released since: not
    // lost to damage, listed apart.
    let mut released = Vec::new();
    for &i in &order {
        bar.inc(1);
        let f = &found[i];
        let bytes = match &source {
            Source::Index(p) => match p.get_vec(nvs_core::Key::on(f.lane, &f.name), f.version) {
                Err(e) if e.core() == Some(nvs_core::Error::NotFound) => {
                    released.push(format!(
                        "released meanwhile: {} v{} (lane {})",
                        show_name(&f.name),
                        f.version,
                        f.lane
                    ));
                    continue;
                }
                got => got.map_err(|e| e.to_string()),
            },
            Source::Walk { walker, by_key } => rebuild(walker, &found, by_key, layout.lane_names, i),
        };
        let bytes = match bytes {
            Ok(b) => b,
            Err(why) => {
                lost.push(format!(
                    "lost: {} v{} (lane {} seq {}): {why}",
                    show_name(&f.name),
                    f.version,
                    f.lane,
                    f.seq
                ));
                continue;
            }
        };
        match dst.put(f.lane, Object::new(&f.name, &bytes).version(f.version).meta(&f.meta)) {
            // NEW too small (deltas are stored full): not damage of BAD; no half copy left.
            Err(e) if e.core() == Some(nvs_core::Error::Full) => {
                bar.finish_and_clear();
                drop(dst);
                let _ = std::fs::remove_file(new);
                return Err(CliError::Usage(format!(
                    "{}: full after {copied} of {} objects; nothing kept (give a larger --size): {e}",
                    new.display(),
                    order.len()
                )));
            }
            Err(e) => {
                let (name, v) = (show_name(&f.name), f.version);
                lost.push(format!(
                    "lost: {name} v{v} (lane {} seq {}): cannot put it into {}: {e}",
                    f.lane,
                    f.seq,
                    new.display()
                ));
                continue;
            }
            Ok(_) => {}
        }
        copied += 1;
        names.insert(f.name.clone());
    }
    bar.finish_and_clear();
    let finished = closed.into_iter().try_for_each(|lane| dst.close_lane(lane)).and_then(|()| dst.close());
    if let Err(e) = finished {
        let _ = std::fs::remove_file(new);
        return Err(e.into());
    }
    drop(sigbus);
    let lost_objects = lost.iter().filter(|l| l.starts_with("lost:")).count();
    let damaged = lost.iter().filter(|l| l.starts_with("damaged:")).count();
    // Everything lost, as far as the bytes tell.
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut lost_all = format!("{} lost", plural(lost_objects as u64 + counted, "object"));
    if units_lost > 0 {
        let _ = write!(lost_all, " and {} of unknown objects", plural(units_lost, "unit"));
    }
    if unread {
        lost_all.push_str(" and what unread damaged space held");
    }
    let mut o = String::new();
    if let Some(why) = &recovery {
        let _ = writeln!(o, "note: not read through recovery ({why}): every segment read as it lies");
    }
    for l in lost.iter().chain(&released) {
        let _ = writeln!(o, "{l}");
    }
    let _ = writeln!(
        o,
        "{}: salvaged {copied} objects of {} names from {} (read through {how}); {lost_all}, {damaged} damaged regions{}",
        new.display(),
        names.len(),
        bad.display(),
        match released.len() {
            0 => String::new(),
            n => format!("; {n} released meanwhile by a writer's retention"),
        }
    );
    stdout(&o)?;
    if lost_objects + damaged > 0 || recovery.is_some() {
        return Err(CliError::Mismatch(format!(
            "{}: damaged: {lost_all}, {damaged} damaged regions (listed on stdout)",
            bad.display()
        )));
    }
    Ok(())
}

/// Object `i`'s bytes from the raw walk: a full version's payload (verified), or a
/// delta rebuilt over its parent's (each link verified).
/// What identifies a version found by a walk: (name space, name, version) — the lane in a
/// pool with lane names, one space otherwise (where a delta's parent may be another
/// lane's).
type Key = (Option<u32>, Vec<u8>, u64);

fn key(lane_names: bool, lane: u32, name: &[u8], version: u64) -> Key {
    (lane_names.then_some(lane), name.to_vec(), version)
}

fn rebuild(
    w: &Walker<'_, MappedMedia>,
    found: &[Found],
    by_key: &HashMap<Key, usize>,
    lane_names: bool,
    i: usize,
) -> Result<Vec<u8>, String> {
    let f = &found[i];
    let o = f.walked().ok_or("not walked")?;
    let len = usize::try_from(o.len_bytes).map_err(|_| "larger than this address space".to_string())?;
    if o.depth == 0 {
        let mut buf = vec![0u8; len];
        w.payload(&o, &mut buf).map_err(|e| e.to_string())?;
        return Ok(buf);
    }
    let parent = w.delta_parent(&o).unwrap_or(0);
    let &pi = by_key
        .get(&key(lane_names, f.lane, &f.name, parent))
        .ok_or_else(|| format!("its delta parent v{parent} is lost"))?;
    let p = found[pi].walked().ok_or("not walked")?;
    if p.depth + 1 != o.depth || p.len_bytes != o.len_bytes || parent >= f.version {
        return Err(format!("its delta parent v{parent} does not fit it (depth or length)"));
    }
    let mut buf = rebuild(w, found, by_key, lane_names, pi).map_err(|e| format!("its delta parent v{parent}: {e}"))?;
    w.rebuild(&o, &mut buf).map_err(|e| e.to_string())?;
    Ok(buf)
}

/// What a damage the walk stepped over lost: the objects its unit's header counts, or
/// whole units of the lane (their objects unknown), by their seqs.
fn lost_by(d: &nvs_core::walk::Damage) -> String {
    match (d.units_lost, d.objects_lost) {
        (0, n) => format!("{n} objects of its unit lost"),
        (1, _) => "1 unit lost (its objects unknown)".into(),
        (n, _) => format!("{n} units lost (seqs {}..={}, their objects unknown)", d.seq, d.seq + n - 1),
    }
}
