//! `nvs migrate OLD NEW`: copy every object of a pool of any format this build reads
//! (format 1 pools open read-only) into a new pool of this build's format.

use super::output::stdout;
use super::CliError;
use nvs_core::Key;
use nvs_core::Object;
use nvs_std::{Access, CreateOptions, Durability, FilePool};
use std::path::Path;

/// Create `new` (never over an existing file) with `old`'s geometry and lanes — or
/// `size` bytes — and put every version of every name on the lane, in the order, and
/// grouped in the units (batches) that committed it in `old`, with its version number.
/// Deltas are stored as full versions (they are rebuilt to be read); metadata is
/// copied. Lanes closed in `old` are closed in `new`. `old` is only read; if the copy
/// fails, `new` is removed.
pub fn migrate(old: &Path, new: &Path, size: Option<u64>, d: Option<Durability>) -> Result<(), CliError> {
    let src = FilePool::open_with(old, Access::ReadOnly, d)?;
    let layout = src.layout();
    let size = size.unwrap_or(layout.pool_len);
    // Every (lane, seq, name, version, has metadata) — the name as its place in `names`
    // (the index's order): units in commit order, lane by lane.
    let mut all = Vec::new();
    let mut name_buf = [0u8; nvs_core::NAME_MAX];
    let names: Vec<_> = src.names().collect();
    for (at, n) in names.iter().enumerate() {
        let name = src.name_bytes(n.id, &mut name_buf).to_vec();
        if name.is_empty() {
            continue; // released by a writer's retention since the pool was opened
        }
        for o in src.versions_of(n.id) {
            all.push((o.lane, o.seq, at, o.version, o.meta_len > 0));
        }
    }
    all.sort_unstable();
    let mut opts =
        CreateOptions::new().segment_len(layout.segment_len).lanes_max(layout.lanes_max).lane_names(layout.lane_names);
    opts.durability = d;
    let mut dst = FilePool::create(new, size, &opts)?;
    // A SIGBUS (OLD shrinking under the copy) removes NEW too.
    let sigbus = super::sigbus::output_created(new);
    let copied = (|| -> Result<(), CliError> {
        let mut i = 0;
        while i < all.len() {
            let (lane, seq) = (all[i].0, all[i].1);
            let unit: Vec<_> = all[i..].iter().take_while(|o| (o.0, o.1) == (lane, seq)).collect();
            let mut data = Vec::with_capacity(unit.len());
            for &&(_, _, at, version, has_meta) in &unit {
                let name = src.name_bytes(names[at].id, &mut name_buf).to_vec();
                let bytes = src.get_vec(Key::on(lane, &name), version)?;
                let meta = if has_meta { src.meta(Key::on(lane, &name), version)? } else { Vec::new() };
                data.push((name, version, bytes, meta));
            }
            let objects: Vec<Object> = data.iter().map(|(n, v, b, m)| Object::new(n, b).version(*v).meta(m)).collect();
            dst.put_batch(lane, &objects)?;
            i += unit.len();
        }
        for lane in 0..layout.lanes_max {
            if src.lane_info(lane).is_some_and(|l| l.closed) {
                dst.close_lane(lane)?;
            }
        }
        Ok(())
    })();
    if let Err(e) = copied {
        // NEW is ours (create never opens an existing file): a half copy is not left.
        drop(dst);
        let _ = std::fs::remove_file(new);
        return Err(e);
    }
    if let Err(e) = dst.close() {
        let _ = std::fs::remove_file(new);
        return Err(e.into());
    }
    drop(sigbus);
    stdout(&format!(
        "{}: {} objects of {} names copied from {} (format {}) into a format {} pool\n",
        new.display(),
        all.len(),
        names.len(),
        old.display(),
        layout.format_version,
        nvs_core::FORMAT_VERSION
    ))
}
