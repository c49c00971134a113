//! The crash check: run a workload, crash it at every crash point, explore every image
//! recovery can observe there, and hold what it recovers to the contract (README, "What nvs promises").

use crate::workload::{continue_with, run, Family, Issued, Op, Workload};
use nvs_core::Key;
use nvs_core::{HeapMemory, Media, Pool, NAME_MAX};
use nvs_sim::{all_points, explore, fence_points, Chooser, CrashView, SimMedia, Verdict};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Runs allowed per crash point before the verdict is "incomplete".
pub const BUDGET: u64 = 20_000;
/// The eager explorer also runs where at most this many words are undecided.
pub const EAGER_MAX_UNDECIDED: usize = 10;

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

/// Digest of a recovered state (to compare the explorers' outcome sets).
fn digest(rec: &Recovered) -> u64 {
    digest_of(rec)
}

/// A 64-bit digest of `value`: xxHash64's round per 8-byte word (a field, or a word of
/// a byte string: 32-byte blocks on four independent lanes, the last word padded and
/// marked with its length) and nvs-hash64's final avalanche. std's SipHash, a byte
/// string at a time, was 3% of the crash check's CPU.
fn digest_of<T: std::hash::Hash + ?Sized>(value: &T) -> u64 {
    const P1: u64 = 0x9E37_79B1_85EB_CA87;
    const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
    fn round(acc: u64, w: u64) -> u64 {
        (acc ^ w.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
    }
    fn word(b: &[u8]) -> u64 {
        u64::from_le_bytes(b.try_into().expect("8 bytes"))
    }
    struct Words(u64);
    impl std::hash::Hasher for Words {
        fn write(&mut self, bytes: &[u8]) {
            let mut blocks = bytes.chunks_exact(32);
            if bytes.len() >= 32 {
                let mut lanes = [self.0, self.0 ^ P1, self.0 ^ P2, self.0.rotate_left(32)];
                for b in &mut blocks {
                    for (k, lane) in lanes.iter_mut().enumerate() {
                        *lane = round(*lane, word(&b[k * 8..k * 8 + 8]));
                    }
                }
                self.0 = lanes.iter().fold(self.0, |acc, &l| round(acc, l));
            }
            let mut words = blocks.remainder().chunks_exact(8);
            for w in &mut words {
                self.0 = round(self.0, word(w));
            }
            let rest = words.remainder();
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            last[7] = rest.len() as u8 | 0x80;
            self.0 = round(self.0, u64::from_le_bytes(last));
        }
        fn write_u8(&mut self, v: u8) {
            self.0 = round(self.0, v as u64);
        }
        fn write_u32(&mut self, v: u32) {
            self.0 = round(self.0, v as u64);
        }
        fn write_u64(&mut self, v: u64) {
            self.0 = round(self.0, v);
        }
        fn write_usize(&mut self, v: usize) {
            self.0 = round(self.0, v as u64);
        }
        fn finish(&self) -> u64 {
            nvs_core::internals::hash::finish(self.0)
        }
    }
    let mut h = Words(0x6e76_735f_7665_7269);
    value.hash(&mut h);
    std::hash::Hasher::finish(&h)
}

/// Verdicts already reached below the first crash in one trace's check, by (crash
/// state's digest, the recovery before it's result's digest, crash point, digest of
/// what the continuation issued, crashes still to come): the same state, result, point,
/// issued operations and depth give the same exploration, so it runs once. Many crash
/// images differ only in words the continuation overwrites and fences, so their later
/// crash states coincide.
pub type Memo = Mutex<HashSet<(u128, u64, usize, u64, usize)>>;

/// One check at one crash point, with the given choices: recover and apply the oracle;
/// deeper (`then` holds one operation list per further crash), also recover the same
/// image again as a writer, run `then[0]`, and crash that at every point (each explored
/// on its own, nested), and so on. Returns the recovered state's digest and the number
/// of nested runs.
pub fn check_once(
    issued: &[Issued],
    point: usize,
    state: &Arc<nvs_sim::State>,
    ch: &Chooser,
    eager: bool,
    then: &[Vec<Op>],
    memo: &Memo,
) -> Result<(u64, u64), String> {
    let view = CrashView::new(state.clone(), ch.clone());
    if eager {
        view.resolve_all();
    }
    let rec = recover_all(&view)?;
    if view.stores() != 0 {
        return Err(format!("recovery stored {} times (opening must not write)", view.stores()));
    }
    oracle(issued, point, &Recovered::default(), &rec)?;
    let d = digest(&rec);
    Ok((d, crash_again(view, &rec, d, then, memo, 2)?))
}

/// After a crash whose image `view` recovered as `rec` (digest `d`): while `then` has
/// operations, the same image is recovered again by a writer that runs `then[0]`, and
/// that is crashed at every point; each of those images must recover keeping all of
/// `rec` and what `then[0]` acknowledged, and is crashed again with `then[1..]`.
/// `nth` counts the crash this makes (2: the second). Returns the number of runs made
/// below the crash before it.
fn crash_again(
    view: CrashView,
    rec: &Recovered,
    d: u64,
    then: &[Vec<Op>],
    memo: &Memo,
    nth: usize,
) -> Result<u64, String> {
    let Some((ops, rest)) = then.split_first() else { return Ok(0) };
    // Words recovery observed keep their values; the rest stay undecided (a read by the
    // writer decides them, as a choice of this run).
    let m2 = SimMedia::on(view.into_view());
    let again = recover_all(&m2)?;
    if again != *rec {
        return Err("a second recovery of the same image gave another result".into());
    }
    // A follower that opened the recovered image read-only refreshes once the writer has
    // run on: its refresh (a catch-up where it can be sure of one) must give what a
    // recovery of the same media gives, and store nothing.
    let mut follower = Pool::open_read_only(&m2, HeapMemory::new()).map_err(|e| format!("read-only open: {e}"))?;
    let issued2 = match catch_unwind(AssertUnwindSafe(|| continue_with(&m2, ops))) {
        Ok(r) => r?,
        Err(p) => return Err(format!("the writer after the crash panicked: {}", panic_message(&p))),
    };
    m2.freeze();
    let refreshed = catch_unwind(AssertUnwindSafe(|| {
        follower.refresh().map_err(|e| format!("refresh after the writer ran on: {e}"))?;
        read_all(&follower)
    }));
    if m2.thaw() != 0 {
        return Err("a read-only refresh stored to the media".into());
    }
    let refreshed = refreshed.map_err(|p| format!("refresh panicked: {}", panic_message(&p)))??;
    if refreshed != recover_all(&m2)? {
        return Err("a read-only pool refreshed after the writer ran on differs from a recovery".into());
    }
    let recording = m2.recording();
    let mut points = vec![0];
    points.extend(fence_points(&recording.events));
    points.dedup();
    let mut nested = 0;
    let issued2_digest = digest_of(&issued2);
    let depth = then.len();
    for p2 in points {
        // The state's digest first: most later crash states were explored already.
        let key = (recording.crash_digest(p2), d, p2, issued2_digest, depth);
        if memo.lock().unwrap().contains(&key) {
            continue;
        }
        let state2 = Arc::new(recording.crash_state(p2));
        let mut below = 0;
        let v = explore(BUDGET, |ch2| {
            let view2 = CrashView::new(state2.clone(), ch2.clone());
            let rec2 = recover_all(&view2)?;
            oracle(&issued2, p2, rec, &rec2)?;
            below += crash_again(view2, &rec2, digest(&rec2), rest, memo, nth + 1)?;
            Ok(())
        });
        nested += v.runs() + below;
        let which =
            ["", "", "second", "third"].get(nth).map_or_else(|| format!("crash {nth}"), |w| format!("{w} crash"));
        match v {
            Verdict::Pass { .. } => {
                memo.lock().unwrap().insert(key);
            }
            Verdict::Fail { choices, message, .. } => {
                return Err(format!("{which} at {p2} (choices {choices:?}): {message}"))
            }
            Verdict::Incomplete { .. } => return Err(format!("{which} at {p2}: budget exhausted (incomplete)")),
        }
    }
    Ok(nested)
}

/// A violation, with what reproduces it alone.
#[derive(Clone, Debug)]
pub struct Failure {
    pub workload: String,
    pub point: usize,
    pub choices: Vec<usize>,
    pub message: String,
}

impl Failure {
    pub fn repro(&self) -> String {
        let choices: Vec<String> = self.choices.iter().map(|c| c.to_string()).collect();
        let choices = if choices.is_empty() { "-".to_string() } else { choices.join(",") };
        let (env, mutant) = match crate::mutants::selected() {
            Some(m) => {
                ("RUSTFLAGS='--cfg nvs_mutant' CARGO_TARGET_DIR=target/mutants ", format!(" --mutant {}", m.name()))
            }
            None => ("", String::new()),
        };
        format!("{env}cargo run --release -p nvs-verify -- repro {} {} {choices}{mutant}", self.workload, self.point)
    }
}

/// What a crash check counted: of one trace, or summed over a family.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    /// Crash points checked.
    pub points: u64,
    /// Lazy runs (each a recovery on one crash view), nested runs of deeper crashes included.
    pub states: u64,
    pub eager_points: u64,
    pub eager_runs: u64,
    /// Lazy runs at the points where the eager explorer also ran.
    pub lazy_runs_where_eager: u64,
    /// (lazy runs, eager runs) at the single largest point where both ran.
    pub largest_both: (u64, u64),
    /// Points whose exploration ran out of budget.
    pub incomplete: u64,
}

impl Counts {
    /// Add `o` (the largest point: the larger of the two).
    pub fn add(&mut self, o: &Counts) {
        self.points += o.points;
        self.states += o.states;
        self.eager_points += o.eager_points;
        self.eager_runs += o.eager_runs;
        self.lazy_runs_where_eager += o.lazy_runs_where_eager;
        self.incomplete += o.incomplete;
        if o.largest_both.1 > self.largest_both.1 {
            self.largest_both = o.largest_both;
        }
    }
}

/// What one family's check found.
#[derive(Debug, Default)]
pub struct FamilyReport {
    pub name: String,
    pub workloads: usize,
    pub counts: Counts,
    pub failures: Vec<Failure>,
    /// Wall time of the family's check (of [`check_families`]: from its first workload's
    /// start to its last one's end, other families' workloads running beside them).
    pub time: Duration,
    /// CPU time of the threads while they checked the family's workloads (where the
    /// platform tells it; else their wall time).
    pub cpu: Duration,
}

/// CPU time of the calling thread so far: Linux's `/proc/thread-self/schedstat` (time on
/// a CPU, in nanoseconds); `None` where there is no such file.
pub fn thread_cpu_time() -> Option<Duration> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    Some(Duration::from_nanos(s.split_whitespace().next()?.parse().ok()?))
}

/// What the crash check of one trace found (one workload's run, or one loom execution).
#[derive(Debug, Default)]
pub struct TraceReport {
    pub counts: Counts,
    /// (point, choices, message) of each violation.
    pub failures: Vec<(usize, Vec<usize>, String)>,
}

/// One recovery check at one crash point (with its choices), owning what it needs:
/// the recovered state's digest and the number of nested runs, or a violation.
pub type Job = Box<dyn FnOnce() -> Result<(u64, u64), String> + Send>;

/// Check a recorded trace at each of `points`: `state_at(p)` is the crash state after
/// the trace's first `p` events and `issued` what its operations issued and when they
/// were acknowledged. Every image recovery can observe is explored lazily (and eagerly
/// too where at most [`EAGER_MAX_UNDECIDED`] words are undecided, the outcome sets
/// compared), and what recovery returns is held to the [`oracle`]. Stops at the first
/// failure if `stop_early`.
pub fn check_trace(
    state_at: impl Fn(usize) -> nvs_sim::State,
    points: &[usize],
    issued: &[Issued],
    then: &[Vec<Op>],
    stop_early: bool,
) -> TraceReport {
    check_trace_with(&|job: Job| job(), state_at, points, issued, then, stop_early)
}

/// [`check_trace`], every recovery check run by `runner` (which runs the job and
/// returns its result). The loom × crash test (tests/loom_crash.rs) runs each in a
/// fresh loom execution: nvs-core built for loom needs one, and a loom thread counts
/// only 65,535 synchronizing operations, which a few hundred recoveries exceed.
pub fn check_trace_with(
    runner: &dyn Fn(Job) -> Result<(u64, u64), String>,
    state_at: impl Fn(usize) -> nvs_sim::State,
    points: &[usize],
    issued: &[Issued],
    then: &[Vec<Op>],
    stop_early: bool,
) -> TraceReport {
    let issued: Arc<[Issued]> = issued.into();
    let then: Arc<[Vec<Op>]> = then.into();
    let memo: Arc<Memo> = Arc::default();
    let depth2 = !then.is_empty();
    let job = |point: usize, state: &Arc<nvs_sim::State>, ch: &Chooser, eager: bool, depth2: bool| -> Job {
        let (issued, state, ch, memo) = (issued.clone(), state.clone(), ch.clone(), memo.clone());
        let then = if depth2 { then.clone() } else { Arc::from([]) };
        Box::new(move || check_once(&issued, point, &state, &ch, eager, &then, &memo))
    };
    let mut r = TraceReport::default();
    for &point in points {
        r.counts.points += 1;
        let state = Arc::new(state_at(point));
        let mut lazy_out = BTreeSet::new();
        let mut nested = 0;
        let verdict = explore(BUDGET, |ch| {
            let (d, n) = runner(job(point, &state, ch, false, depth2))?;
            lazy_out.insert(d);
            nested += n;
            Ok(())
        });
        let lazy_runs = verdict.runs();
        r.counts.states += lazy_runs + nested;
        match verdict {
            Verdict::Pass { .. } => {}
            Verdict::Incomplete { .. } => r.counts.incomplete += 1,
            Verdict::Fail { choices, message, .. } => {
                r.failures.push((point, choices, message));
                if stop_early {
                    break;
                }
                continue;
            }
        }
        if !depth2 && state.undecided() <= EAGER_MAX_UNDECIDED {
            let mut eager_out = BTreeSet::new();
            let v = explore(BUDGET, |ch| {
                eager_out.insert(runner(job(point, &state, ch, true, false))?.0);
                Ok(())
            });
            r.counts.eager_points += 1;
            r.counts.eager_runs += v.runs();
            r.counts.lazy_runs_where_eager += lazy_runs;
            if v.runs() > r.counts.largest_both.1 {
                r.counts.largest_both = (lazy_runs, v.runs());
            }
            if let Verdict::Fail { choices, message, .. } = v {
                r.failures.push((point, choices, format!("eager: {message}")));
            } else if eager_out != lazy_out {
                let message = format!("lazy found {} outcomes, eager {}", lazy_out.len(), eager_out.len());
                r.failures.push((point, vec![], message));
            }
        }
    }
    r
}

/// A crash inside `format` at each of `points` of `media`'s trace: every image must
/// recover as the pool that was on the media before (the state at point 0), as no pool
/// (`NotFormatted`), or as an empty pool — never as an error or anything else.
fn check_format(media: &SimMedia, points: &[usize]) -> TraceReport {
    let recording = media.recording();
    let before = recover_all(CrashView::new(recording.crash_state(0), Chooser::default()));
    let mut r = TraceReport::default();
    for &point in points {
        let state = Arc::new(recording.crash_state(point));
        let v = explore(BUDGET, |ch| format_once(&before, &state, ch));
        r.counts.points += 1;
        r.counts.states += v.runs();
        match v {
            Verdict::Pass { .. } => {}
            Verdict::Incomplete { .. } => r.counts.incomplete += 1,
            Verdict::Fail { choices, message, .. } => r.failures.push((point, choices, message)),
        }
    }
    r
}

/// One image of a crash inside format (see [`check_format`]); `before` is what the
/// media held before format began.
fn format_once(before: &Result<Recovered, String>, state: &Arc<nvs_sim::State>, ch: &Chooser) -> Result<(), String> {
    let not_formatted = format!("recovery failed: {}", nvs_core::Error::NotFormatted);
    match recover_all(CrashView::new(state.clone(), ch.clone())) {
        Err(e) if e == not_formatted => Ok(()),
        Ok(rec) if rec == Recovered::default() || Ok(&rec) == before.as_ref() => Ok(()),
        Ok(rec) => Err(format!("a crash inside format left a pool of {} objects", rec.objects.len())),
        Err(e) => Err(format!("a crash inside format: {e}")),
    }
}

/// Check every crash point of one workload into `report`. Stops at the first failure
/// if `stop_early`.
fn check_workload(w: &Workload, fam: &Family, stop_early: bool, report: &Mutex<FamilyReport>) {
    let fail = |point, choices, message| {
        report.lock().unwrap().failures.push(Failure { workload: w.id.clone(), point, choices, message })
    };
    let trace = match catch_unwind(AssertUnwindSafe(|| run(w))) {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return fail(0, vec![], format!("workload failed: {e}")),
        Err(p) => return fail(0, vec![], format!("workload panicked: {}", panic_message(&p))),
    };
    let events = trace.media.events();
    if fam.in_format {
        let mut points = vec![0];
        points.extend(fence_points(&events).into_iter().filter(|&p| p < trace.format_end));
        points.dedup();
        let t = check_format(&trace.media, &points);
        for (point, choices, message) in t.failures {
            fail(point, choices, message);
        }
        return report.lock().unwrap().counts.add(&t.counts);
    }
    let points: Vec<usize> = if fam.all_points { all_points(&events) } else { fence_points(&events) };
    let points: Vec<usize> = points.into_iter().filter(|&p| p >= trace.check_from).collect();
    let recording = trace.media.recording();
    let t = check_trace(|p| recording.crash_state(p), &points, &trace.issued, &fam.then, stop_early);
    for (point, choices, message) in t.failures {
        fail(point, choices, message);
    }
    report.lock().unwrap().counts.add(&t.counts);
}

/// Check several families on `threads` threads: their workloads in one queue, in
/// order, each taken by the next free thread (so a family of a few long workloads does
/// not leave a thread idle). Every workload is checked as [`check_family`] checks it.
/// With `stop_early`, once a family has a failure no workload of it or of a later
/// family is started (earlier families still finish): the first family in order with
/// a failure is the one a family-by-family check would stop at.
pub fn check_families(fams: &[Family], threads: usize, stop_early: bool) -> Vec<FamilyReport> {
    let reports: Vec<Mutex<FamilyReport>> = fams
        .iter()
        .map(|f| Mutex::new(FamilyReport { name: f.name.into(), workloads: f.workloads.len(), ..Default::default() }))
        .collect();
    let jobs: Vec<(usize, &Workload)> =
        fams.iter().enumerate().flat_map(|(i, f)| f.workloads.iter().map(move |w| (i, w))).collect();
    // Per family: when its first workload started and its last one ended.
    let spans: Vec<Mutex<Option<(Instant, Instant)>>> = fams.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    // The first family with a failure (with `stop_early`).
    let failed = AtomicUsize::new(usize::MAX);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(&(f, w)) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if f >= failed.load(Ordering::Relaxed) {
                        continue;
                    }
                    let (start, cpu) = (Instant::now(), thread_cpu_time());
                    check_workload(w, &fams[f], stop_early, &reports[f]);
                    if stop_early && !reports[f].lock().unwrap().failures.is_empty() {
                        failed.fetch_min(f, Ordering::Relaxed);
                    }
                    let end = Instant::now();
                    let cpu = match (cpu, thread_cpu_time()) {
                        (Some(a), Some(b)) => b.saturating_sub(a),
                        _ => end - start,
                    };
                    reports[f].lock().unwrap().cpu += cpu;
                    let mut span = spans[f].lock().unwrap();
                    *span = Some(span.map_or((start, end), |(a, b)| (a.min(start), b.max(end))));
                }
            });
        }
    });
    let spans = spans.into_iter().map(|s| s.into_inner().unwrap());
    reports
        .into_iter()
        .zip(spans)
        .map(|(r, span)| FamilyReport { time: span.map_or(Duration::ZERO, |(a, b)| b - a), ..r.into_inner().unwrap() })
        .collect()
}

/// Check a whole family on `threads` threads.
pub fn check_family(fam: &Family, threads: usize, stop_early: bool) -> FamilyReport {
    let t = Instant::now();
    let report =
        Mutex::new(FamilyReport { name: fam.name.into(), workloads: fam.workloads.len(), ..Default::default() });
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                if stop_early && !report.lock().unwrap().failures.is_empty() {
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(w) = fam.workloads.get(i) else { return };
                let (start, cpu) = (Instant::now(), thread_cpu_time());
                check_workload(w, fam, stop_early, &report);
                let cpu = match (cpu, thread_cpu_time()) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => start.elapsed(),
                };
                report.lock().unwrap().cpu += cpu;
            });
        }
    });
    let mut r = report.into_inner().unwrap();
    r.time = t.elapsed();
    r
}

/// Re-run one check alone with a given choice vector.
pub fn repro(w: &Workload, fam: &Family, point: usize, choices: Vec<usize>) -> Result<(), String> {
    let trace = run(w)?;
    let state = Arc::new(trace.media.crash_state(point));
    if fam.in_format {
        let before = recover_all(CrashView::new(trace.media.crash_state(0), Chooser::default()));
        return nvs_sim::replay(choices, |ch| format_once(&before, &state, ch));
    }
    let memo = Memo::default();
    nvs_sim::replay(choices, |ch| check_once(&trace.issued, point, &state, ch, false, &fam.then, &memo).map(|_| ()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `stream` family's ops do what they say: the batch of 70 and the tagged puts
    /// are acknowledged (not refused as full), at the versions asked, and recovered with
    /// their metadata; a detach leaves the lane detached and a close after it closed.
    #[test]
    fn stream_ops_are_acknowledged_as_asked() {
        use crate::workload::{run, Op, Setup, Workload};
        let ops = vec![
            Op::Batch { lane: 1, sizes: (0..70).map(|k| k % 64).collect() },
            Op::Tagged { lane: 0, size: 130, meta: 40, gap: 1 },
            Op::Tagged { lane: 0, size: 9, meta: 3, gap: 5 },
            Op::Detach { lane: 1 },
            Op::Detach { lane: 0 },
            Op::Close { lane: 0 },
        ];
        let t = run(&Workload { id: "t".into(), setup: Setup::small(), ops }).unwrap();
        assert!(t.issued.iter().all(|is| is.ack.is_some()));
        assert_eq!(t.issued[0].objects.len(), 70);
        let tagged: Vec<(u64, usize)> =
            t.issued[1..3].iter().map(|is| (is.objects[0].1, is.objects[0].2.len())).collect();
        // The batch put n0 24 times, n1 and n2 23 times: n1 v24, then n2 v28 (a gap of 5).
        assert_eq!(tagged, [(24, 170), (28, 12)]);
        let rec = recover_all(&t.media).unwrap();
        assert_eq!(rec.objects.len(), 72);
        assert!(rec.objects.iter().any(|o| o.1 == 28 && o.3 == t.issued[2].objects[0].2));
        assert_eq!((rec.closed, rec.detached), (vec![0], vec![1]));
    }

    /// The digest tells apart recovered states that differ in one byte of a payload at
    /// any position (in a 32-byte block or after), in a payload's length, in a version,
    /// in which object a byte belongs to, or in a closed lane: it keys the depth-2 memo,
    /// where two states with one digest would share one exploration.
    #[test]
    fn digest_tells_recovered_states_apart() {
        let obj = |name: &[u8], v: u64, bytes: Vec<u8>| (name.to_vec(), v, 0u32, bytes);
        let base: Vec<u8> = (0..100u8).collect();
        let mut seen = HashSet::new();
        let mut add = |r: Recovered| assert!(seen.insert(digest(&r)), "two states share a digest: {r:?}");
        add(Recovered::default());
        add(Recovered::of(vec![obj(b"a", 1, base.clone())]));
        add(Recovered::of(vec![obj(b"a", 2, base.clone())]));
        add(Recovered::of(vec![obj(b"b", 1, base.clone())]));
        add(Recovered { closed: vec![0], ..Recovered::of(vec![obj(b"a", 1, base.clone())]) });
        add(Recovered { detached: vec![0], ..Recovered::of(vec![obj(b"a", 1, base.clone())]) });
        for len in 0..base.len() {
            add(Recovered::of(vec![obj(b"a", 1, base[..len].to_vec())]));
        }
        for at in 0..base.len() {
            let mut b = base.clone();
            b[at] ^= 1;
            add(Recovered::of(vec![obj(b"a", 1, b)]));
        }
        // The same bytes split between two objects at another place.
        for at in 0..40 {
            add(Recovered::of(vec![obj(b"a", 1, base[..at].to_vec()), obj(b"a", 2, base[at..40].to_vec())]));
        }
    }
}
