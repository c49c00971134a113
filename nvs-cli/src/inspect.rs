//! The commands that read a pool's bytes as they lie, through nvs-core's read-only
//! [`Walker`] (no recovery, so a damaged pool is read as far as it decodes): `dump` (every
//! segment, unit and object; or a hex dump of a byte range), `info --stats` (space per
//! lane and segment), and the damage a recovery steps past (`check`); `salvage.rs` reads
//! through the same walker. None of them ever writes the pool it reads: it is mapped
//! read-only.

use super::json::Obj;
use super::output::stdout;
use super::CliError;
use nvs_core::internals::format::LINE;
use nvs_core::walk::{Damage, Item, SegmentState, Walker};
use nvs_core::CorruptKind;
use nvs_std::{show_name, FilePool, MappedMedia};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Map `pool` read-only (no recovery) and decode its superblock.
pub fn open_raw(pool: &Path) -> Result<MappedMedia, CliError> {
    Ok(MappedMedia::open_read_only(pool)?)
}

pub fn walker<'m>(pool: &Path, media: &'m MappedMedia) -> Result<Walker<'m, MappedMedia>, CliError> {
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
pub fn chain_gaps(w: &Walker<'_, MappedMedia>) -> Vec<(u32, Damage)> {
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
    match FilePool::open_recovering(pool, None) {
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

/// What a damage the walk stepped over lost: the objects its unit's header counts, or
/// whole units of the lane (their objects unknown), by their seqs.
pub fn lost_by(d: &nvs_core::walk::Damage) -> String {
    match (d.units_lost, d.objects_lost) {
        (0, n) => format!("{n} objects of its unit lost"),
        (1, _) => "1 unit lost (its objects unknown)".into(),
        (n, _) => format!("{n} units lost (seqs {}..={}, their objects unknown)", d.seq, d.seq + n - 1),
    }
}
