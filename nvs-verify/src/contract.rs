//! The contract (README, "What nvs promises") and what it judges: what each operation
//! of a workload issued ([`Issued`]), what a recovery returns ([`Recovered`], read back
//! through every read call by [`recover_all`]), and the verdicts: [`oracle`] on a
//! recovery after a crash, [`check_reads`] on a read's answers.

use nvs_core::Key;
use nvs_core::{HeapMemory, Media, Pool, NAME_MAX};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What one operation issued.
#[derive(Clone, Debug, Default, Hash)]
pub struct Issued {
    pub op: usize,
    pub lane: u32,
    /// Trace position when the operation started (its first store is at or after it).
    pub start: usize,
    /// Trace position when it returned `Ok` (acknowledged); `None` if refused.
    pub ack: Option<usize>,
    /// (name, version, bytes) of each object.
    pub objects: Vec<(Vec<u8>, u64, Vec<u8>)>,
    /// A reclaim: the (lane, name, version) it released (must be gone once acknowledged).
    pub released: Vec<(u32, Vec<u8>, u64)>,
    /// An end-of-stream marker on `lane` (once acknowledged, the lane is closed until a
    /// later unit of the lane commits).
    pub close: bool,
    /// A detach marker on `lane` (once acknowledged, the lane is detached, not closed,
    /// until a later unit of the lane commits).
    pub detach: bool,
    /// Taking `lane` for writing (once acknowledged, the lane holds a segment for good).
    pub join: bool,
    /// A read ([`Op::Read`](crate::workload::Op::Read)): each (lane, name, version) read
    /// and what it gave. Issues nothing to the media.
    pub reads: Vec<(u32, Vec<u8>, u64, ReadResult)>,
}

/// What a read gave: the bytes (payload, then metadata), `None` for `NotFound`, or
/// another error.
pub type ReadResult = Result<Option<Vec<u8>>, String>;

/// One recovered object: (name, version, lane, bytes).
pub type Rec = (Vec<u8>, u64, u32, Vec<u8>);

/// What a recovery returned: every object (sorted) and the lanes that are closed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Recovered {
    pub objects: Vec<Rec>,
    /// Lanes whose stream is closed (their last unit is an end-of-stream marker), sorted.
    pub closed: Vec<u32>,
    /// Lanes that hold a segment (joined the stream), sorted.
    pub joined: Vec<u32>,
    /// Lanes whose writer detached (their last unit is a detach marker), sorted.
    pub detached: Vec<u32>,
}

impl Recovered {
    pub fn of(objects: Vec<Rec>) -> Recovered {
        Recovered { objects, ..Recovered::default() }
    }
}

/// Open (recover) a pool on `media` and read back everything it holds, through every
/// read call: `names`, `versions`, `latest`, `stat`, `get`, `lane_info`, which must
/// agree with each other. A panic, an error, or a store during recovery is a violation.
///
/// The index memory of this thread's last recovery is reused (a recovery clears the
/// index first and relies on nothing it held), so a recovery allocates only as its pool
/// outgrows the last one.
pub fn recover_all<M: Media>(media: M) -> Result<Recovered, String> {
    thread_local! {
        static INDEX_MEMORY: std::cell::Cell<Option<HeapMemory>> = const { std::cell::Cell::new(None) };
    }
    let r = catch_unwind(AssertUnwindSafe(|| -> Result<Recovered, String> {
        let mem = INDEX_MEMORY.take().unwrap_or_default();
        let pool = match Pool::open_read_only(media, mem) {
            Ok(pool) => pool,
            Err(e) => return Err(format!("recovery failed: {e}")),
        };
        let r = read_all(&pool);
        INDEX_MEMORY.set(Some(pool.close().1));
        r
    }));
    match r {
        Ok(r) => r,
        Err(p) => Err(format!("recovery panicked: {}", panic_message(&p))),
    }
}

/// Everything `pool` holds, read back through every read call, which must agree with
/// each other (see [`recover_all`]). In a pool with lane names, every (lane, name) is
/// read through reads of `Key::on(lane, ..)`, and a read by name alone must answer for a
/// name one lane holds and be refused (`AmbiguousName`) for one several lanes hold.
pub fn read_all<M: Media>(pool: &Pool<M, HeapMemory>) -> Result<Recovered, String> {
    use nvs_core::Error;
    let media_len = pool.media().len() as u64;
    let lane_names = pool.layout().lane_names;
    let lanes = pool.superblock().lanes_max;
    let mut out = Vec::new();
    let names: Vec<_> = pool.names().collect();
    // (its lane in a pool with lane names, name) -> its newest version.
    let mut listed: BTreeMap<(Option<u32>, Vec<u8>), u64> = BTreeMap::new();
    for n in names {
        let mut nb = [0u8; NAME_MAX];
        let name = pool.name_bytes(n.id, &mut nb).to_vec();
        let shown = match n.lane {
            Some(l) => format!("{} (lane {l})", String::from_utf8_lossy(&name)),
            None => String::from_utf8_lossy(&name).into_owned(),
        };
        if n.lane.is_some() != lane_names {
            let has = if lane_names { "has" } else { "has no" };
            return Err(format!("names() lists {shown} with lane {:?}, but the pool {has} lane names", n.lane));
        }
        if listed.contains_key(&(n.lane, name.clone())) {
            return Err(format!("names() lists {shown} twice"));
        }
        let infos = pool.versions(Key::new(n.lane, &name));
        let infos: Vec<_> = infos.map_err(|e| format!("versions({shown}): {e}"))?.collect();
        let Some(newest) = infos.last() else {
            return Err(format!("names() lists {shown}, which has no versions"));
        };
        if !infos.windows(2).all(|w| w[0].version < w[1].version) {
            return Err(format!("versions({shown}) is not increasing"));
        }
        if !pool.versions_of(n.id).eq(infos.iter().copied()) {
            return Err(format!("versions_of({shown}'s id) disagrees with versions()"));
        }
        if n.latest != newest.version || n.versions as usize != infos.len() {
            return Err(format!(
                "names() says {shown} has {} versions up to {}, versions() gives {} up to {}",
                n.versions,
                n.latest,
                infos.len(),
                newest.version
            ));
        }
        let latest = pool.latest(Key::new(n.lane, &name));
        match latest {
            Ok(v) if v == newest.version => {}
            Ok(v) => return Err(format!("latest({shown}) = {v}, but its newest version is {}", newest.version)),
            Err(e) => return Err(format!("latest({shown}): {e}")),
        }
        listed.insert((n.lane, name.clone()), newest.version);
        for info in infos {
            if info.len_bytes > media_len {
                return Err(format!("recovered an object of {} bytes on {media_len} bytes of media", info.len_bytes));
            }
            if n.lane.is_some_and(|l| l != info.lane) {
                return Err(format!("versions({shown}) gives v{} of lane {}", info.version, info.lane));
            }
            let stat = pool.stat(Key::new(n.lane, &name), info.version);
            if stat != Ok(info) {
                return Err(format!("stat({shown}, {}) disagrees with versions()", info.version));
            }
            let mut buf = vec![0u8; info.len_bytes as usize];
            let got = pool.get(Key::new(n.lane, &name), info.version, &mut buf);
            match got {
                Ok(len) if len as u64 == info.len_bytes => {}
                Ok(len) => {
                    return Err(format!("get({shown}, {}) = {len} bytes, stat says {}", info.version, info.len_bytes))
                }
                Err(e) => return Err(format!("get({shown}, {}): {e}", info.version)),
            }
            // Its metadata after its payload (as the workload's ops record it).
            if info.meta_len > 0 {
                let mut meta = vec![0u8; info.meta_len as usize];
                let got = pool.meta(Key::new(n.lane, &name), info.version, &mut meta);
                if got != Ok(meta.len()) {
                    return Err(format!("meta({shown}, {}) = {got:?}, stat says {} bytes", info.version, meta.len()));
                }
                buf.extend(meta);
            }
            out.push((name.clone(), info.version, info.lane, buf));
        }
    }
    if lane_names {
        cross_lane_reads(pool, &listed, &out)?;
    }
    if pool.latest(b"never written") != Err(Error::NotFound) {
        return Err("latest of a name never written is not NotFound".into());
    }
    if (0..lanes).any(|l| pool.latest(Key::on(l, b"never written")) != Err(Error::NotFound)) {
        return Err("latest(Key::on(..)) of a name never written is not NotFound".into());
    }
    out.sort();
    let closed = (0..lanes).filter(|&l| pool.lane_info(l).is_some_and(|i| i.closed)).collect();
    let joined = (0..lanes).filter(|&l| pool.lane_info(l).is_some()).collect();
    let detached = (0..lanes).filter(|&l| pool.lane_info(l).is_some_and(|i| i.detached)).collect();
    Ok(Recovered { objects: out, closed, joined, detached })
}

/// In a pool with lane names, the reads across lanes: a lane that does not hold a name
/// finds nothing of it; a read by name alone answers as the `Key::on` read of the one lane
/// that holds the name, and is refused with `AmbiguousName` when several lanes do.
/// `listed`: (lane, name) -> newest version, as `names()` listed them; `objects`: what
/// the `Key::on` reads returned.
fn cross_lane_reads<M: Media>(
    pool: &Pool<M, HeapMemory>,
    listed: &BTreeMap<(Option<u32>, Vec<u8>), u64>,
    objects: &[Rec],
) -> Result<(), String> {
    use nvs_core::Error;
    let mut holders: BTreeMap<&[u8], Vec<(u32, u64)>> = BTreeMap::new();
    for ((lane, name), latest) in listed {
        holders.entry(name).or_default().push((lane.unwrap_or(u32::MAX), *latest));
    }
    for (name, held) in holders {
        let shown = String::from_utf8_lossy(name);
        for l in (0..pool.superblock().lanes_max).filter(|l| !held.iter().any(|h| h.0 == *l)) {
            if pool.latest(Key::on(l, name)) != Err(Error::NotFound)
                || pool.stat(Key::on(l, name), 1) != Err(Error::NotFound)
            {
                return Err(format!("lane {l} holds no {shown}, but a read on it finds one"));
            }
        }
        let mut buf = vec![0u8; pool.media().len()];
        if let [(lane, latest)] = held[..] {
            // One lane holds it: a read by name alone is that lane's.
            // (The recorded bytes end with the metadata, which a get does not return.)
            let want = objects.iter().find(|o| o.0 == name && o.1 == latest && o.2 == lane).map(|o| &o.3[..]);
            let got = pool.get(name, latest, &mut buf).map(|len| &buf[..len]);
            let len = pool.stat(Key::on(lane, name), latest).map_or(usize::MAX, |i| i.len_bytes as usize);
            let want = want.map(|w| &w[..len.min(w.len())]);
            let count = pool.versions(name).map(|vs| vs.count());
            let on = pool.versions(Key::on(lane, name)).map(|vs| vs.count());
            if pool.latest(name) != Ok(latest)
                || pool.stat(name, latest) != pool.stat(Key::on(lane, name), latest)
                || got.ok() != want
                || count.ok() != on.ok()
            {
                return Err(format!("only lane {lane} holds {shown}, but a read by name alone disagrees with it"));
            }
            continue;
        }
        // Several lanes hold it: a read by name alone must name the lane.
        let ambiguous = Err(Error::AmbiguousName { lanes: held.len() as u32 });
        let latest = held[0].1;
        if pool.latest(name).map(|_| ()) != ambiguous
            || pool.stat(name, latest).map(|_| ()) != ambiguous
            || pool.get(name, latest, &mut buf).map(|_| ()) != ambiguous
            || pool.versions(name).map(|_| ()) != ambiguous
        {
            return Err(format!("{} lanes hold {shown}, but a read by name alone is not AmbiguousName", held.len()));
        }
    }
    Ok(())
}

/// A read's answers ([`Op::Read`](crate::workload::Op::Read)) against what the
/// workload issued: each object read is the bytes an op put under that lane, name and
/// version; `NotFound` only for one a reclaim released; no other error.
pub fn check_reads(issued: &[Issued], read: &Issued) -> Result<(), String> {
    for (lane, name, v, got) in &read.reads {
        let shown = format!("{} v{v} (lane {lane})", String::from_utf8_lossy(name));
        let put =
            issued.iter().filter(|op| op.lane == *lane).flat_map(|op| &op.objects).find(|o| o.0 == *name && o.1 == *v);
        match got {
            Err(e) => return Err(format!("op {}: a read of {shown}: {e}", read.op)),
            Ok(Some(bytes)) => match put {
                Some(o) if o.2 == *bytes => {}
                Some(o) => {
                    let at = o.2.iter().zip(bytes).position(|(a, b)| a != b).unwrap_or(o.2.len().min(bytes.len()));
                    return Err(format!(
                        "op {}: a read of {shown} gave other bytes ({} read, {} put, first difference at {at})",
                        read.op,
                        bytes.len(),
                        o.2.len()
                    ));
                }
                None => return Err(format!("op {}: a read of {shown} gave bytes, but no op put it", read.op)),
            },
            Ok(None) => {
                if !issued.iter().any(|op| op.released.iter().any(|r| r.0 == *lane && r.1 == *name && r.2 == *v)) {
                    return Err(format!("op {}: a read of {shown}: not found, but no reclaim released it", read.op));
                }
            }
        }
    }
    Ok(())
}

pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// The contract, for a crash at trace position `point`:
/// - every object of `durable` (recovered before an earlier crash) is recovered, intact,
///   unless a reclaim since released it;
/// - every acknowledged operation is recovered, byte-exact (durable when acknowledged);
/// - nothing is recovered that no started operation wrote (no phantoms);
/// - an operation is recovered whole or not at all (atomic);
/// - per lane, the recovered operations are a prefix of the lane's operations;
/// - a lane is closed (or detached) exactly when the last unit of its recovered prefix
///   may be an end-of-stream (or detach) marker: the markers after its last recovered
///   put are recovered in order, the acknowledged ones at least, and a reclaim's
///   truncate units change nothing;
/// - a lane whose join was acknowledged holds a segment, and no lane holds one that no
///   started operation (or `durable`) gave it.
pub fn oracle(issued: &[Issued], point: usize, durable: &Recovered, rec: &Recovered) -> Result<(), String> {
    // (lane, name, version) -> (issuing op, or None for `durable`; bytes). Keyed by lane
    // too: in a pool with lane names, two lanes hold the same (name, version); in one
    // name space (name, version) alone is unique, and the lane is the one that wrote it.
    type Key<'a> = (u32, &'a [u8], u64);
    type Expect<'a> = BTreeMap<Key<'a>, (Option<usize>, &'a [u8])>;
    let acked = |op: &Issued| matches!(op.ack, Some(a) if a <= point);
    let mut expect: Expect = BTreeMap::new();
    for (n, v, lane, b) in &durable.objects {
        expect.insert((*lane, n, *v), (None, b));
    }
    for (i, op) in issued.iter().enumerate() {
        if op.start < point {
            for (n, v, b) in &op.objects {
                expect.insert((op.lane, n, *v), (Some(i), b));
            }
        }
    }
    // Objects a reclaim released: gone for good once it was acknowledged, either way
    // while it ran.
    let mut gone: BTreeMap<Key, bool> = BTreeMap::new();
    for op in issued.iter().filter(|op| op.start < point) {
        for (lane, n, v) in &op.released {
            gone.insert((*lane, n, *v), acked(op));
        }
    }
    let mut got: BTreeMap<usize, usize> = BTreeMap::new();
    let mut durable_seen = 0;
    for (n, v, lane, b) in &rec.objects {
        let name = String::from_utf8_lossy(n);
        let key = (*lane, &n[..], *v);
        if gone.get(&key) == Some(&true) {
            return Err(format!("{name} v{v} (lane {lane}) came back after a reclaim released it"));
        }
        let Some((op, want)) = expect.get(&key) else {
            let elsewhere: Vec<u32> =
                expect.keys().filter(|(l, en, ev)| *en == &n[..] && ev == v && l != lane).map(|k| k.0).collect();
            return Err(match elsewhere.first() {
                Some(other) => format!("phantom: {name} v{v} recovered on lane {lane}, but written on lane {other}"),
                None => format!("phantom: {name} v{v} (lane {lane}) was never written"),
            });
        };
        if b[..] != want[..] {
            return Err(format!(
                "{name} v{v} (lane {lane}): wrong bytes ({} recovered, {} written)",
                b.len(),
                want.len()
            ));
        }
        match op {
            Some(i) => *got.entry(*i).or_default() += 1,
            None if !gone.contains_key(&key) => durable_seen += 1,
            None => {}
        }
    }
    let durable_owed = durable.objects.iter().filter(|(n, v, l, _)| !gone.contains_key(&(*l, &n[..], *v))).count();
    if durable_seen != durable_owed {
        return Err(format!(
            "{} of {} objects recovered before the crash are lost",
            durable_owed - durable_seen,
            durable_owed
        ));
    }
    // A put whose objects a reclaim released (a unit's objects share a segment, so all
    // or none) was committed, but is no longer owed.
    let released = |op: &Issued| op.objects.iter().any(|(n, v, _)| gone.contains_key(&(op.lane, &n[..], *v)));
    let mut lane_gap: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, op) in issued.iter().enumerate() {
        // Reclaims and closes write no objects.
        if op.objects.is_empty() || released(op) {
            continue;
        }
        let seen = got.get(&i).copied().unwrap_or(0);
        if seen != 0 && seen != op.objects.len() {
            return Err(format!("op {}: torn: {seen} of {} objects recovered", op.op, op.objects.len()));
        }
        if seen == 0 {
            if acked(op) {
                return Err(format!("op {}: acknowledged (at {}) but lost (crash at {point})", op.op, op.ack.unwrap()));
            }
            lane_gap.entry(op.lane).or_insert(op.op);
        } else if let Some(gap) = lane_gap.get(&op.lane) {
            return Err(format!("lane {}: op {} recovered after op {gap} was lost (not a prefix)", op.lane, op.op));
        }
    }
    // End of stream and detach, per lane: its started puts and markers in order. The
    // markers after its last recovered put (released by a reclaim counts) up to the next
    // put, which is lost and so is all after it, are recovered as a prefix at least as
    // long as the acknowledged ones; the last of that prefix is the lane's state (none:
    // open, or `durable`'s state if no put of the lane is recovered). A reclaim's
    // truncate units change nothing.
    let lanes: BTreeSet<u32> = issued
        .iter()
        .filter(|op| op.close || op.detach)
        .map(|op| op.lane)
        .chain(durable.closed.iter().chain(&durable.detached).copied())
        .chain(rec.closed.iter().chain(&rec.detached).copied())
        .collect();
    let state_name = |(closed, detached): (bool, bool)| match (closed, detached) {
        (true, false) => "closed",
        (false, true) => "detached",
        (false, false) => "open",
        (true, true) => "closed and detached",
    };
    for lane in lanes {
        let marker = |op: &Issued| op.close || op.detach;
        let ops: Vec<(usize, &Issued)> = issued
            .iter()
            .enumerate()
            .filter(|(_, op)| op.lane == lane && op.start < point && (marker(op) || !op.objects.is_empty()))
            .collect();
        let last_put = ops.iter().rposition(|(i, op)| !marker(op) && (got.contains_key(i) || released(op)));
        let after = &ops[last_put.map_or(0, |p| p + 1)..];
        let after = &after[..after.iter().position(|(_, op)| !marker(op)).unwrap_or(after.len())];
        let before = match last_put {
            None => (durable.closed.contains(&lane), durable.detached.contains(&lane)),
            Some(_) => (false, false),
        };
        let state = |k: usize| if k == 0 { before } else { (after[k - 1].1.close, after[k - 1].1.detach) };
        let owed = after.iter().rposition(|(_, op)| acked(op)).map_or(0, |k| k + 1);
        let now = (rec.closed.contains(&lane), rec.detached.contains(&lane));
        let allowed = (owed..=after.len()).any(|k| state(k) == now);
        if !allowed && (0..owed).any(|k| state(k) == now) {
            let what = if after[owed - 1].1.close { "close" } else { "detach" };
            return Err(format!(
                "lane {lane}: its acknowledged {what} is lost: recovered {} (crash at {point})",
                state_name(now)
            ));
        }
        if !allowed {
            let may: Vec<&str> = (owed..=after.len()).map(|k| state_name(state(k))).collect();
            return Err(format!(
                "lane {lane}: recovered {}, but after its last recovered put and {owed} acknowledged markers it may \
                 only be {} (crash at {point})",
                state_name(now),
                may.join(" or ")
            ));
        }
    }
    // Joins: durable once acknowledged; and no lane joined out of nothing.
    for op in issued.iter().filter(|op| op.join && acked(op)) {
        if !rec.joined.contains(&op.lane) {
            return Err(format!("lane {}: taken for writing (acknowledged), but it holds no segment", op.lane));
        }
    }
    for lane in &rec.joined {
        let before = durable.joined.contains(lane) || durable.objects.iter().any(|o| o.2 == *lane);
        if !before && !issued.iter().any(|op| op.lane == *lane && op.start < point) {
            return Err(format!("lane {lane} holds a segment, but no operation on it had started"));
        }
    }
    Ok(())
}
