//! Reading a delta: its record checked and walked, and its chain of parents down to the
//! full version it is rebuilt from.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::panic)]

use super::write::{table_hasher, table_sum};
use crate::error::{CorruptKind, Error, Result};
use crate::format::{delta_data_off, DeltaRecord, Extent, DELTA_DEPTH_MAX};
use crate::index::{Entry, Index, IndexMemory};
use crate::media::Media;
use core::mem::size_of;

/// A delta's entry and its ancestors down to the full version, as entry ids, newest
/// first (ids stay valid while the pool is borrowed: only `&mut` methods remove entries;
/// the entries themselves are read under the lock).
pub(crate) type Chain = heapless::Vec<u32, { DELTA_DEPTH_MAX as usize + 1 }>;

/// Entry `id` and, if it is a delta, its ancestors down to its full version, newest
/// first, into `chain`. Each parent must be in the index, one level shallower, of the
/// same length; on error `chain` holds the links found so far.
pub(crate) fn chain_of<M: Media, X: IndexMemory>(
    media: &M,
    index: &Index<X>,
    id: u32,
    chain: &mut Chain,
) -> Result<()> {
    chain.clear();
    let mut id = id;
    loop {
        let at = *index.entry(id);
        let bad = Error::Corrupted { offset: at.payload_off, kind: CorruptKind::DeltaChain };
        chain.push(id).map_err(|_| bad)?;
        if at.depth == 0 {
            return Ok(());
        }
        let parent = parent_of(media, &at);
        let ok = |p: &u32| {
            let p = index.entry(*p);
            p.depth + 1 == at.depth && p.len_bytes == at.len_bytes && p.version < at.version
        };
        id = index.find_version(at.name, parent).filter(ok).ok_or(bad)?;
    }
}

/// The parent version a delta entry names (its record's first word).
pub(crate) fn parent_of<M: Media + ?Sized>(media: &M, e: &Entry) -> u64 {
    media.load_word(e.payload_off as usize)
}

/// Walk delta entry `e`'s record: check it (lengths against `e.stored_bytes`, every extent
/// sorted and inside the object, the table checksum) and call `apply(obj_off, media_off,
/// len)` for each extent, in order. `apply` may run before a later check fails; the
/// caller discards its output on error.
pub(crate) fn walk_record<M: Media + ?Sized>(
    media: &M,
    pool_id: u64,
    e: &Entry,
    apply: &mut dyn FnMut(u64, u64, u64),
) -> Result<()> {
    let bad = Err(Error::Corrupted { offset: e.payload_off, kind: CorruptKind::DeltaRecord });
    let rec: DeltaRecord = crate::format::read_pod(media, e.payload_off);
    let table_room = e.stored_bytes.saturating_sub(size_of::<DeltaRecord>() as u64) / size_of::<Extent>() as u64;
    if rec.extent_count > table_room
        || delta_data_off(rec.extent_count).checked_add(rec.data_len) != Some(e.stored_bytes)
        || rec.parent >= e.version
    {
        return bad;
    }
    let mut h = table_hasher(pool_id);
    let mut data = e.payload_off + delta_data_off(rec.extent_count);
    let (mut end, mut total) = (0u64, 0u64);
    let mut block = [Extent::default(); 32];
    let mut at = 0u64;
    while at < rec.extent_count {
        let n = (rec.extent_count - at).min(block.len() as u64) as usize;
        let Some(block) = block.get_mut(..n) else { return bad };
        let table_off = e.payload_off + size_of::<DeltaRecord>() as u64 + at * size_of::<Extent>() as u64;
        media.read(table_off as usize, bytemuck::cast_slice_mut(block));
        h.write(bytemuck::cast_slice(block));
        for x in block.iter() {
            let fits = x.len > 0 && x.off >= end && x.off.checked_add(x.len).is_some_and(|e2| e2 <= e.len_bytes);
            if !fits || total + x.len > rec.data_len {
                return bad;
            }
            apply(x.off, data, x.len);
            data += x.len;
            total += x.len;
            end = x.off + x.len;
        }
        at += n as u64;
    }
    if total != rec.data_len || table_sum(h, &rec) != rec.table_sum {
        return bad;
    }
    Ok(())
}
