//! Crash images checked from what the crash point before them recovered: how
//! [`crate::user::check`] stays near-linear in a long workload.
//!
//! Recovering every image from nothing and reading every object back costs the whole
//! pool per image, and a workload of n puts has about 2n crash points: n² in all (3,000
//! small puts took minutes). The images of successive points share everything committed
//! before them, so each point has a *base*: its image with every pending word at its old
//! value (the first image the explorer visits), recovered by catching up from the base
//! before it ([`nvs_core::Pool::fork_read_only`] and a refresh: it reads the segment
//! headers and the units committed since; where it cannot be sure to give what a
//! recovery would — a header changed or went, a truncate unit, anything unexpected — it
//! recovers from nothing instead). Every image of the point starts from its base the
//! same way. The first base is a recovery, read whole and held to the full contract
//! ([`crate::check::oracle`]); so is every base or image whose refresh had to recover,
//! or that a reclaim may have changed since its base.
//!
//! nvs's contract is then held incrementally: the objects an image indexed beyond its
//! base ([`nvs_core::Pool::objects_after`]) must be, lane by lane and in order, whole
//! operations that had started, the next ones after the base's prefix, byte-exact; each
//! lane's prefix must hold its acknowledged operations; each lane's end-of-stream and
//! detach state must be one the markers after its last recovered put allow; and a lane
//! holds a segment exactly when a join or a put on it had started (one acknowledged:
//! must). With the base's objects verified before, that is the whole contract, by
//! induction over the points — except the read API's own cross-checks (names, versions,
//! stat, latest agree), which nvs's own families check on every image they explore.

use crate::contract::{oracle, read_all, Issued, Recovered};
use nvs_core::Key;
use nvs_core::{HeapMemory, IndexMark, Media, Pool};
use nvs_sim::{Chooser, CrashView, State};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Per lane, how many of its puts a recovered state holds (a prefix of them, released
/// ones counted).
pub(crate) type Done = BTreeMap<u32, usize>;

/// The operations of each lane, in order.
pub(crate) struct Lanes {
    /// Operations that put objects (index into the issued list).
    puts: BTreeMap<u32, Vec<usize>>,
    /// Puts and end-of-stream and detach markers.
    ops: BTreeMap<u32, Vec<usize>>,
    /// Where in `ops` each put of `puts` is.
    put_at: BTreeMap<u32, Vec<usize>>,
    /// When the first operation on each lane started (a lane holds a segment only after).
    first_start: BTreeMap<u32, usize>,
    /// The joins (`Run::lane`).
    joins: Vec<usize>,
    /// The reclaims.
    reclaims: Vec<usize>,
}

impl Lanes {
    pub(crate) fn new(issued: &[Issued]) -> Lanes {
        let mut l = Lanes {
            puts: BTreeMap::new(),
            ops: BTreeMap::new(),
            put_at: BTreeMap::new(),
            first_start: BTreeMap::new(),
            joins: Vec::new(),
            reclaims: issued.iter().enumerate().filter(|(_, op)| op.lane == u32::MAX).map(|(i, _)| i).collect(),
        };
        for (i, op) in issued.iter().enumerate().filter(|(_, op)| op.lane != u32::MAX) {
            l.first_start.entry(op.lane).or_insert(op.start);
            if op.join {
                l.joins.push(i);
            }
            let ops = l.ops.entry(op.lane).or_default();
            if !op.objects.is_empty() {
                l.puts.entry(op.lane).or_default().push(i);
                l.put_at.entry(op.lane).or_default().push(ops.len());
            }
            if !op.objects.is_empty() || op.close || op.detach {
                ops.push(i);
            }
        }
        l
    }
}

/// A crash point's base: its image with every pending word at its old value, recovered
/// (caught up) and verified.
pub(crate) struct Base {
    pool: Pool<CrashView, HeapMemory>,
    mark: IndexMark,
    done: Done,
    /// Its crash point.
    point: usize,
    /// Its index checkpoint ([`Pool::write_checkpoint`]), once an image needed it.
    checkpoint: Option<Vec<u8>>,
    /// Images made from it so far.
    images: usize,
}

/// Every this many images of a base, one is opened from the base's index checkpoint as
/// well, and must agree with the catch-up ([`Base::image`]).
const CHECKPOINT_EVERY: usize = 4;

/// The pool a check recovers from one crash image.
pub(crate) type ImagePool<'v> = Pool<&'v CrashView, HeapMemory>;

impl Base {
    /// The base of the crash point `point` (state `state`), caught up from `prev`, the
    /// base of an earlier point; `None` where it cannot be had (a recovery that fails, a
    /// contract broken: the point's images are then recovered whole, and report it).
    pub(crate) fn at(
        prev: Option<Base>,
        state: &Arc<State>,
        point: usize,
        issued: &[Issued],
        lanes: &Lanes,
    ) -> Option<Base> {
        let view = CrashView::new(state.clone(), Chooser::default());
        let (pool, before) = match prev {
            Some(mut prev) => {
                let mut pool = prev.pool.fork_read_only(view);
                pool.refresh().ok()?;
                (pool, Some((prev.mark, prev.done, prev.point)))
            }
            None => (Pool::open_read_only(view, HeapMemory::new()).ok()?, None),
        };
        if pool.media().stores() != 0 {
            return None;
        }
        let done = match before {
            Some((mark, done, since)) => match verify_new(&pool, (mark, since), &done, point, issued, lanes) {
                Ok(Some(done)) => done,
                Ok(None) => verify_whole(&pool, point, issued, lanes).ok()?,
                Err(_) => return None,
            },
            None => verify_whole(&pool, point, issued, lanes).ok()?,
        };
        let mark = pool.index_mark();
        Some(Base { pool, mark, done, point, checkpoint: None, images: 0 })
    }

    /// A pool over `view` (an image of this base's point) starting from this base, and
    /// refreshed: what a recovery of the image gives.
    ///
    /// Every [`CHECKPOINT_EVERY`]th image is also opened from the base's index checkpoint
    /// ([`Pool::open_read_only_from_checkpoint`]: restored, then caught up with the
    /// image, or recovered): both must give the same state ([`Pool::state_digest`]).
    pub(crate) fn image<'v>(&mut self, view: &'v CrashView) -> Result<ImagePool<'v>, String> {
        let recovered = |e| format!("recovery failed: {e}");
        let mut pool = self.pool.fork_read_only(view);
        pool.refresh().map_err(recovered)?;
        self.images += 1;
        if self.images % CHECKPOINT_EVERY == 1 {
            let base = &mut self.pool;
            let bytes = self.checkpoint.get_or_insert_with(|| {
                let mut bytes = Vec::new();
                base.write_checkpoint(&mut |b| {
                    bytes.extend_from_slice(b);
                    true
                });
                bytes
            });
            let mem = nvs_core::checkpoint_memory(bytes);
            let (mut from, used) = Pool::open_read_only_from_checkpoint(view, mem, bytes).map_err(recovered)?;
            if let nvs_core::CheckpointUse::Invalid(why) = used {
                return Err(format!("the base's index checkpoint was refused: {why}"));
            }
            if from.state_digest() != pool.state_digest() {
                return Err(format!("an open from the base's index checkpoint ({used:?}) differs from the catch-up"));
            }
        }
        Ok(pool)
    }

    /// Hold `pool` (from [`Base::image`]) to nvs's contract for a crash at `point`.
    pub(crate) fn verify(
        &self,
        pool: &ImagePool<'_>,
        point: usize,
        issued: &[Issued],
        lanes: &Lanes,
    ) -> Result<(), String> {
        match verify_new(pool, (self.mark, self.point), &self.done, point, issued, lanes)? {
            Some(_) => Ok(()),
            None => verify_whole(pool, point, issued, lanes).map(|_| ()),
        }
    }
}

/// Every object of `pool` read back and held to the whole contract; its [`Done`].
fn verify_whole<M: Media>(
    pool: &Pool<M, HeapMemory>,
    point: usize,
    issued: &[Issued],
    lanes: &Lanes,
) -> Result<Done, String> {
    let rec: Recovered = read_all(pool)?;
    oracle(issued, point, &Recovered::default(), &rec)?;
    let recovered: std::collections::BTreeSet<(u32, &[u8], u64)> =
        rec.objects.iter().map(|(n, v, l, _)| (*l, &n[..], *v)).collect();
    let released = released_by_started(issued, point);
    let mut done = Done::new();
    for (&lane, puts) in &lanes.puts {
        // The oracle found them a prefix: its length is one past the last one held.
        let held = |i: &usize| {
            let op = &issued[*i];
            op.objects
                .iter()
                .any(|(n, v, _)| recovered.contains(&(lane, &n[..], *v)) || released.contains(&(lane, &n[..], *v)))
        };
        done.insert(lane, puts.iter().rposition(held).map_or(0, |k| k + 1));
    }
    Ok(done)
}

/// Objects a reclaim that had started before `point` released.
fn released_by_started(issued: &[Issued], point: usize) -> std::collections::BTreeSet<(u32, &[u8], u64)> {
    issued
        .iter()
        .filter(|op| op.start < point)
        .flat_map(|op| op.released.iter().map(|(l, n, v)| (*l, &n[..], *v)))
        .collect()
}

/// The contract on what `pool` indexed after `mark` (a base whose puts `done` held):
/// the next puts of each lane, whole, started, byte-exact; acknowledged ones all there;
/// markers and joins as the oracle has them. `None` if the pool recovered since the mark
/// (taken at crash point `since`), or a reclaim may have released objects since (what a
/// reclaim releases must be gone, and only a whole reading sees that): then it must be
/// verified whole.
fn verify_new<M: Media>(
    pool: &Pool<M, HeapMemory>,
    (mark, since): (IndexMark, usize),
    done: &Done,
    point: usize,
    issued: &[Issued],
    lanes: &Lanes,
) -> Result<Option<Done>, String> {
    let releasing = |op: &Issued| op.start < point && op.ack.is_none_or(|a| a > since);
    if lanes.reclaims.iter().any(|&i| releasing(&issued[i])) {
        return Ok(None);
    }
    let Some(new) = pool.objects_after(mark) else { return Ok(None) };
    let lane_names = pool.layout().lane_names;
    let show = |n: &[u8]| String::from_utf8_lossy(n).into_owned();
    // Per lane: (puts held, objects of the next put met so far).
    let mut at: BTreeMap<u32, (usize, usize)> = BTreeMap::new();
    let mut name = [0u8; nvs_core::NAME_MAX];
    for (id, info) in new {
        let lane = info.lane;
        let n = pool.name_bytes(id, &mut name).to_vec();
        let v = info.version;
        let cursor = at.entry(lane).or_insert((done.get(&lane).copied().unwrap_or(0), 0));
        let next = lanes.puts.get(&lane).and_then(|p| p.get(cursor.0)).map(|&i| (i, &issued[i]));
        let Some((i, op)) = next.filter(|(_, op)| op.start < point) else {
            return Err(format!(
                "phantom: {} v{v} (lane {lane}) recovered, but no started operation of the lane was next",
                show(&n)
            ));
        };
        let (want_name, want_version, want) = &op.objects[cursor.1];
        if want_name[..] != n[..] || *want_version != v {
            return Err(format!(
                "lane {lane}: recovered {} v{v} where op {} put {} v{want_version} next (not a prefix, or a phantom)",
                show(&n),
                issued[i].op,
                show(want_name)
            ));
        }
        let got = read_one(pool, lane_names, lane, &n, &info)?;
        if got != *want {
            return Err(format!(
                "{} v{v} (lane {lane}): wrong bytes ({} recovered, {} written)",
                show(&n),
                got.len(),
                want.len()
            ));
        }
        cursor.1 += 1;
        if cursor.1 == op.objects.len() {
            *cursor = (cursor.0 + 1, 0);
        }
    }
    let mut now = done.clone();
    for (lane, (held, part)) in at {
        if part != 0 {
            let op = &issued[lanes.puts[&lane][held]];
            return Err(format!("op {}: torn: {part} of {} objects recovered", op.op, op.objects.len()));
        }
        now.insert(lane, held);
    }
    let acked = |op: &Issued| matches!(op.ack, Some(a) if a <= point);
    for (lane, puts) in &lanes.puts {
        let held = now.get(lane).copied().unwrap_or(0);
        // A lane's puts are acknowledged in order: the first one not held is enough.
        if let Some(&lost) = puts.get(held).filter(|&&i| acked(&issued[i])) {
            let op = &issued[lost];
            return Err(format!("op {}: acknowledged (at {}) but lost (crash at {point})", op.op, op.ack.unwrap_or(0)));
        }
    }
    markers(pool, &now, point, issued, lanes)?;
    joins(pool, point, issued, lanes)?;
    Ok(Some(now))
}

/// An object's payload, then its metadata (as the workload's operations record it).
fn read_one<M: Media>(
    pool: &Pool<M, HeapMemory>,
    lane_names: bool,
    lane: u32,
    name: &[u8],
    info: &nvs_core::ObjectInfo,
) -> Result<Vec<u8>, String> {
    let show = String::from_utf8_lossy(name);
    let v = info.version;
    let mut buf = vec![0u8; info.len_bytes as usize];
    let got = if lane_names { pool.get(Key::on(lane, name), v, &mut buf) } else { pool.get(name, v, &mut buf) };
    match got {
        Ok(len) if len == buf.len() => {}
        other => return Err(format!("get({show}, {v}) = {other:?}, the index says {} bytes", buf.len())),
    }
    if info.meta_len > 0 {
        let mut meta = vec![0u8; info.meta_len as usize];
        let got = if lane_names { pool.meta(Key::on(lane, name), v, &mut meta) } else { pool.meta(name, v, &mut meta) };
        if got != Ok(meta.len()) {
            return Err(format!("meta({show}, {v}) = {got:?}, the index says {} bytes", meta.len()));
        }
        buf.extend(meta);
    }
    Ok(buf)
}

/// End of stream and detach, per lane, as [`oracle`] has them: the markers after the
/// lane's last recovered put, up to its next put, recovered as a prefix at least as long
/// as the acknowledged ones; the last of that prefix is the lane's state.
fn markers<M: Media>(
    pool: &Pool<M, HeapMemory>,
    done: &Done,
    point: usize,
    issued: &[Issued],
    lanes: &Lanes,
) -> Result<(), String> {
    let acked = |op: &Issued| matches!(op.ack, Some(a) if a <= point);
    for (&lane, ops) in &lanes.ops {
        let held = done.get(&lane).copied().unwrap_or(0);
        // The markers after the last recovered put (the `held`-th), up to the next put,
        // that had started.
        let from = match held {
            0 => 0,
            k => lanes.put_at[&lane][k - 1] + 1,
        };
        let after: Vec<&Issued> = ops[from..]
            .iter()
            .map(|&i| &issued[i])
            .take_while(|op| op.objects.is_empty() && op.start < point)
            .collect();
        let state = |k: usize| if k == 0 { (false, false) } else { (after[k - 1].close, after[k - 1].detach) };
        let owed = after.iter().rposition(|op| acked(op)).map_or(0, |k| k + 1);
        let info = pool.lane_info(lane);
        let now = (info.is_some_and(|i| i.closed), info.is_some_and(|i| i.detached));
        if !(owed..=after.len()).any(|k| state(k) == now) {
            return Err(format!(
                "lane {lane}: recovered closed={} detached={}, which no prefix of its markers after its last \
                 recovered put (at least the {owed} acknowledged) gives (crash at {point})",
                now.0, now.1
            ));
        }
    }
    // A lane with no markers is open.
    for lane in (0..pool.layout().lanes_max).filter(|l| !lanes.ops.contains_key(l)) {
        if pool.lane_info(lane).is_some_and(|i| i.closed || i.detached) {
            return Err(format!("lane {lane}: recovered closed or detached, but it was never closed or detached"));
        }
    }
    Ok(())
}

/// Joins: a lane whose join (or any operation) was acknowledged holds a segment; no
/// lane holds one that no started operation gave it.
fn joins<M: Media>(pool: &Pool<M, HeapMemory>, point: usize, issued: &[Issued], lanes: &Lanes) -> Result<(), String> {
    for op in lanes.joins.iter().map(|&i| &issued[i]).filter(|op| matches!(op.ack, Some(a) if a <= point)) {
        if pool.lane_info(op.lane).is_none() {
            return Err(format!("lane {}: taken for writing (acknowledged), but it holds no segment", op.lane));
        }
    }
    for lane in (0..pool.layout().lanes_max).filter(|&l| pool.lane_info(l).is_some()) {
        if lanes.first_start.get(&lane).is_none_or(|&s| s >= point) {
            return Err(format!("lane {lane} holds a segment, but no operation on it had started"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvs_core::{FormatOptions, Object};
    use nvs_sim::SimMedia;

    /// Puts a v1 (lane 0), then a v2, b v1 (lane 0) and c v1 (lane 1): the media and
    /// what each put issued.
    fn traced() -> (SimMedia, Vec<Issued>) {
        let media = SimMedia::from_bytes(&vec![0u8; 64 << 10]);
        let mut o = FormatOptions::new(0xC47C);
        o.segment_len = Some(4096);
        o.lanes_max = 2;
        let mut pool = Pool::format(&media, o, HeapMemory::new()).unwrap();
        let mut issued = Vec::new();
        for (lane, name, bytes) in [(0, "a", &b"one"[..]), (0, "a", b"two"), (0, "b", b"three"), (1, "c", b"four")] {
            let start = media.point();
            let put = pool.put(lane, Object::new(name, bytes)).unwrap();
            let objects = vec![(name.as_bytes().to_vec(), put.version, bytes.to_vec())];
            issued.push(Issued {
                op: issued.len(),
                lane,
                start,
                ack: Some(media.point()),
                objects,
                ..Issued::default()
            });
        }
        drop(pool);
        (media, issued)
    }

    /// The image at the trace's end, caught up from the base after the first put and held
    /// to the contract as `issued` tells it.
    fn verify_end(media: &SimMedia, issued: &[Issued]) -> Result<(), String> {
        let lanes = Lanes::new(issued);
        let rec = media.recording();
        let mid = issued[0].ack.unwrap();
        let mut base = Base::at(None, &Arc::new(rec.crash_state(mid)), mid, issued, &lanes).expect("the base");
        let end = media.point();
        let view = CrashView::new(rec.crash_state(end), Chooser::default());
        let pool = base.image(&view).unwrap();
        assert!(pool.objects_after(base.mark).is_some(), "caught up, not recovered");
        base.verify(&pool, end, issued, &lanes)
    }

    #[test]
    fn what_an_image_adds_is_held_to_the_contract() {
        let (media, issued) = traced();
        assert_eq!(verify_end(&media, &issued), Ok(()));
        let fails = |issued: Vec<Issued>, want: &str| {
            let e = verify_end(&media, &issued).expect_err(want);
            assert!(e.contains(want), "{e}");
        };
        // Other bytes than were put.
        let mut bad = issued.clone();
        bad[2].objects[0].2[0] ^= 1;
        fails(bad, "b v1 (lane 0): wrong bytes");
        // An acknowledged put that recovery does not have.
        let mut bad = issued.clone();
        let end = media.point();
        let lost = Issued {
            op: 4,
            lane: 1,
            start: end - 1,
            ack: Some(end - 1),
            objects: vec![(b"d".to_vec(), 1, b"x".to_vec())],
            ..Issued::default()
        };
        bad.push(lost);
        fails(bad, "op 4: acknowledged");
        // An object no operation put (its put left out of the record).
        let mut bad = issued.clone();
        bad.remove(2);
        fails(bad, "phantom: b v1 (lane 0)");
        // Objects in another order than their lane put them.
        let mut bad = issued.clone();
        bad.swap(1, 2);
        fails(bad, "lane 0: recovered a v2 where op 2 put b v1 next");
        // One object of a batch recovered alone (the record says the put had two).
        let mut bad = issued.clone();
        bad[3].objects.push((b"e".to_vec(), 1, b"y".to_vec()));
        fails(bad, "torn: 1 of 2 objects");
        // An acknowledged close the lane does not show.
        let mut bad = issued.clone();
        bad.push(Issued { op: 4, lane: 1, start: end - 1, ack: Some(end - 1), close: true, ..Issued::default() });
        fails(bad, "lane 1: recovered closed=false");
    }
}
