//! `nvs salvage BAD NEW`: every object of a pool that still verifies, copied into a new
//! pool. Read through recovery's index when recovery succeeds and steps past no damage
//! (the raw walk of `inspect.rs` finds none); else through nvs-core's [`Walker`] (the
//! pool's bytes as they lie, deltas rebuilt over their parents). BAD is never written:
//! it is opened and mapped read-only.

use super::inspect::{chain_gaps, lost_by, open_raw, walk_damage, walker};
use super::output::{same_file, stdout};
use super::progress;
use super::CliError;
use nvs_core::walk::{Item, SegmentState, WalkedObject, Walker};
use nvs_core::Object;
use nvs_std::{show_name, CreateOptions, Durability, FilePool, MappedMedia};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

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
    let opened = match FilePool::open_recovering(bad, None) {
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

/// What identifies a version found by a walk: (name space, name, version) — the lane in a
/// pool with lane names, one space otherwise (where a delta's parent may be another
/// lane's).
type Key = (Option<u32>, Vec<u8>, u64);

fn key(lane_names: bool, lane: u32, name: &[u8], version: u64) -> Key {
    (lane_names.then_some(lane), name.to_vec(), version)
}

/// Object `i`'s bytes from the raw walk: a full version's payload (verified), or a
/// delta rebuilt over its parent's (each link verified).
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
