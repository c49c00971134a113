//! Writing a delta: its record planned from the caller's [`Changes`], and stored.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

use super::{Changes, Delta, DeltaOptions};
use crate::error::{Error, Result};
use crate::format::hash::Hasher;
use crate::format::sum::{Sum, SumKind};
use crate::format::{delta_data_off, seed, DeltaRecord, Extent, Superblock, LINE};
use crate::index::Entry;
use crate::media::Media;
use crate::mutant::{self, Mutant};
use crate::stream::{for_each_part_slice, NtStream};
use core::mem::size_of;
use core::ops::Range;

/// A delta as planned: its record's fields and where it sits in its chain.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DeltaPlan {
    pub record: DeltaRecord,
    pub depth: u32,
}

impl DeltaPlan {
    pub fn stored_bytes(&self) -> u64 {
        delta_data_off(self.record.extent_count) + self.record.data_len
    }
}

/// Call `f(offset, len)` for every run of `changes` widened to whole `chunk`s and merged,
/// in order. Checks every range: sorted by offset and inside `object_len`.
pub(crate) fn for_each_run(
    changes: &dyn Changes,
    chunk: u64,
    object_len: u64,
    f: &mut dyn FnMut(u64, u64),
) -> Result<()> {
    let mut run: Option<(u64, u64)> = None;
    let mut last = 0u64;
    let mut bad: Option<u64> = None;
    changes.for_each_range(&mut |off, len| {
        if bad.is_some() || len == 0 {
            return;
        }
        let end = off.checked_add(len).filter(|&e| e <= object_len);
        let Some(end) = end.filter(|_| off >= last) else {
            bad = Some(off);
            return;
        };
        last = off;
        let (start, end) = (off & !(chunk - 1), end.div_ceil(chunk).saturating_mul(chunk).min(object_len));
        run = match run {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                f(s, e - s);
                Some((start, end))
            }
            None => Some((start, end)),
        };
    });
    if let Some(offset) = bad {
        return Err(Error::DeltaRanges { offset });
    }
    if let Some((s, e)) = run {
        f(s, e - s);
    }
    Ok(())
}

/// The record of a delta of `changes` against `parent` (pool `pool_id`): extent count,
/// data length and the table checksum.
pub(crate) fn plan_record(
    pool_id: u64,
    parent: u64,
    changes: &dyn Changes,
    chunk: u64,
    object_len: u64,
) -> Result<DeltaRecord> {
    let mut h = table_hasher(pool_id);
    let (mut count, mut data_len) = (0u64, 0u64);
    for_each_run(changes, chunk, object_len, &mut |off, len| {
        h.write(bytemuck::bytes_of(&Extent { off, len }));
        count += 1;
        data_len += len;
    })?;
    let mut record = DeltaRecord { parent, extent_count: count, data_len, table_sum: 0 };
    record.table_sum = table_sum(h, &record);
    Ok(record)
}

/// A hasher for a delta's extent table (feed it the extents, then [`table_sum`]).
pub(crate) fn table_hasher(pool_id: u64) -> Hasher {
    Hasher::new(seed(pool_id))
}

/// The table checksum of `record` from a [`table_hasher`] fed its extents.
pub(crate) fn table_sum(mut h: Hasher, record: &DeltaRecord) -> u64 {
    h.write(covered(record));
    h.finish()
}

/// The bytes of a record the table checksum covers besides the extents (0..24).
fn covered(r: &DeltaRecord) -> &[u8] {
    bytemuck::bytes_of(r).get(..24).unwrap_or(&[])
}

/// A delta of `len` bytes against `d.parent` (the index's entry for it, if any), if the
/// options allow: `None` means a full version. Refuses bad ranges even when the answer
/// is `None`. `segment` is the writing lane's current segment, if it has one.
///
/// A chain never leaves its segment (unless `chains_cross_segments`): the parent must
/// be in the lane's current segment (and planning makes the delta a full version if the
/// unit then needs a new one). So every delta's ancestors share its segment, and
/// retention, which keeps what a staying delta is rebuilt from, never has to keep an
/// older segment for it — with chains across segments, every boundary may be straddled
/// by one, and then a lane's oldest segment can never be released: a stream of deltas
/// with retention ends `Full`.
pub(crate) fn plan(
    sb: &Superblock,
    opts: &DeltaOptions,
    parent: Option<Entry>,
    segment: Option<Range<u64>>,
    d: Delta<'_>,
    len: u64,
    version: u64,
) -> Result<Option<DeltaPlan>> {
    let record = plan_record(sb.pool_id, d.parent, d.changes, opts.chunk_bytes, len)?;
    // The parent: committed (in the index), of the same length, not too deep, in the
    // lane's current segment (by the byte before its payload: its own header or name).
    let same_len = |p: &Entry| p.len_bytes == len || mutant::on(Mutant::DeltaIgnoresParentLen);
    let here =
        |p: &Entry| opts.chains_cross_segments || segment.as_ref().is_some_and(|s| s.contains(&(p.payload_off - 1)));
    let Some(parent) = parent.filter(|p| same_len(p) && here(p) && p.version < version) else { return Ok(None) };
    let plan = DeltaPlan { record, depth: parent.depth as u32 + 1 };
    let small = plan.stored_bytes().saturating_mul(100) <= len.saturating_mul(opts.max_percent as u64);
    let ok = sb.has_deltas() && plan.depth <= opts.full_every && small;
    Ok(ok.then_some(plan))
}

/// NT-store a delta payload at `payload_off`: its record and extent table, zeros to
/// the next line, and the changed runs of the object (`parts`). Returns its payload
/// checksum (0 without payload checksums): nvs-sum computed by the stores themselves
/// (the table's, then the data's, in payload order), or in a format-1 pool nvs-hash64
/// from the stored table and the caller's buffers after them.
///
/// `changes` is asked twice more here (once for the table, once for the data: the sum
/// takes the payload in order), and it is caller code that may answer differently than
/// when the delta was planned: what it gives is clipped to the planned table and data,
/// so nothing outside this payload is ever written, and each answer is re-hashed as
/// planning hashed it; any difference is `ChangesInconsistent`, and the caller does not
/// commit the unit.
#[allow(clippy::too_many_arguments)]
pub(crate) fn store<M: Media>(
    media: &M,
    sb: &Superblock,
    opts: &DeltaOptions,
    parts: &[&[u8]],
    changes: &dyn Changes,
    plan: DeltaPlan,
    payload_off: u64,
) -> Result<u64> {
    let chunk = opts.chunk_bytes;
    let record = plan.record;
    let object_len = parts.iter().map(|p| p.len() as u64).sum();
    let data_off = crate::format::delta_data_off(record.extent_count);
    let kind = sb.sum_kind();
    // Whether an answer of `changes` (its runs hashed into `h`) is the planned table.
    let planned = |ranges: &Result<()>, over: bool, extents: u64, stored: u64, h: Hasher| {
        ranges.is_ok()
            && !over
            && extents == record.extent_count
            && stored == record.data_len
            && table_sum(h, &record) == record.table_sum
    };
    // The record, the extent table and its zero pad.
    let mut table = NtStream::new(media, payload_off);
    if kind == SumKind::Sum {
        table = table.summed(Sum::new(sb.pool_id));
    }
    table.write(bytemuck::bytes_of(&record));
    let mut h = table_hasher(sb.pool_id);
    let (mut extents, mut stored, mut over) = (0u64, 0u64, false);
    let ranges = for_each_run(changes, chunk, object_len, &mut |off, n| {
        if over || extents == record.extent_count || n > record.data_len - stored {
            over = true;
            return;
        }
        let x = crate::format::Extent { off, len: n };
        h.write(bytemuck::bytes_of(&x));
        table.write(bytemuck::bytes_of(&x));
        extents += 1;
        stored += n;
    });
    let pad = data_off - size_of::<crate::format::DeltaRecord>() as u64 - extents * 16;
    table.write([0u8; LINE as usize].get(..pad.min(LINE) as usize).unwrap_or(&[]));
    let sum = table.finish();
    if !planned(&ranges, over, extents, stored, h) {
        return Err(Error::ChangesInconsistent);
    }
    // The data: the object's bytes at each run, asked for again, clipped to the table.
    let mut data = NtStream::new(media, payload_off + data_off);
    if let Some(s) = sum {
        data = data.summed(s);
    }
    let mut h = table_hasher(sb.pool_id);
    let (mut extents, mut stored, mut over) = (0u64, 0u64, false);
    let ranges = for_each_run(changes, chunk, object_len, &mut |off, n| {
        if over || extents == record.extent_count || n > record.data_len - stored {
            over = true;
            return;
        }
        h.write(bytemuck::bytes_of(&crate::format::Extent { off, len: n }));
        for_each_part_slice(parts, off, n, &mut |b| data.write(b));
        extents += 1;
        stored += n;
    });
    let sum = data.finish();
    if !planned(&ranges, over, extents, stored, h) {
        return Err(Error::ChangesInconsistent);
    }
    match kind {
        SumKind::None => Ok(0),
        SumKind::Sum => Ok(sum.map_or(0, |s| s.finish(data_off + stored))),
        SumKind::Hash64 => Ok(hash64_after(media, sb, parts, payload_off, data_off, extents)),
    }
}

/// A format-1 delta payload's nvs-hash64: the record, the table and its zero pad as
/// stored (read back, line by line), then the object's bytes at each stored extent.
fn hash64_after<M: Media>(
    media: &M,
    sb: &Superblock,
    parts: &[&[u8]],
    payload_off: u64,
    data_off: u64,
    extents: u64,
) -> u64 {
    let mut h = Hasher::new(sb.pool_id);
    let mut line = [0u8; LINE as usize];
    for at in (payload_off..payload_off + data_off).step_by(LINE as usize) {
        media.read(at as usize, &mut line);
        h.write(&line);
    }
    let mut at = payload_off + size_of::<crate::format::DeltaRecord>() as u64;
    for _ in 0..extents {
        let x: crate::format::Extent = crate::format::read_pod(media, at);
        for_each_part_slice(parts, x.off, x.len, &mut |b| h.write(b));
        at += size_of::<crate::format::Extent>() as u64;
    }
    h.finish()
}
