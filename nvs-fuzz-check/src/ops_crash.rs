//! `ops_crash`: an arbitrary workload, a crash after an arbitrary store with an
//! arbitrary choice of which pending words persisted, recovery, and a comparison with a
//! plain model of the crash contract (README, "What nvs promises").
//!
//! 1. The media ([`SimMedia`], which records every store and fence) first holds the
//!    stale bytes of an earlier pool (another pool id, maybe another segment size), so
//!    nothing relies on zeroed media (promise 4).
//! 2. A pool is formatted over it and the ops run: puts (auto, explicit or maximal
//!    versions), vectored puts (slices of any length, so words straddle slices),
//!    batches, end-of-stream markers (`close_lane`), reclaims (retention: released
//!    segments are reused by later puts, so same-pool stale units exist), reopens and
//!    refreshes. The model predicts each op: its versions, or the errors it may fail
//!    with (any order of checks is allowed; `Full` only when nothing else applies). An
//!    op that fails must store nothing. A reclaim may release only objects with at
//!    least `keep` newer versions, changes nothing else and leaves closed lanes closed.
//!    A reopen or a refresh must recover exactly the model, per-lane unit counts and
//!    closed flags included, and store nothing (promise 5).
//! 3. The crash: `SimMedia::crash_state(point)` for a point after the format (any
//!    event, or just before a fence), and a [`CrashView`] whose undecided words are
//!    resolved by the input's choice bits (one bit per undecided word, in the order
//!    recovery reads them; then none, all, or a pseudo-random share of the rest).
//! 4. Recovery must succeed, store nothing, and give exactly the units of every
//!    acknowledged op and a prefix of the interrupted op's units (a put or batch has
//!    one: whole or nothing; a reclaim one truncate unit per trimmed lane, committed in
//!    order): every object byte-exact on its lane and sequence number, nothing else,
//!    each lane's unit count and closed flag (promises 1–4).
//! 5. A put on the recovered pool (it must resume on the right tail and sequence), a
//!    reopen: exactly the recovered objects plus that put. When the put's length asks
//!    for it, a second crash inside the writer's open and that put (at one of its fence
//!    points, all pending words persisted or none): nothing the first recovery returned
//!    may be lost, and the put is whole or absent (present once it returned).

use crate::fill;
use arbitrary::{Arbitrary, Unstructured};
use nvs_core::internals::format::{decode_segment, object_head_len, object_len};
use nvs_core::{Error, FormatOptions, HeapMemory, Media, Object, Pool, NAME_MAX};
use nvs_sim::{fence_points, Chooser, CrashView, SimMedia};
use std::collections::BTreeMap;
use std::mem::discriminant;

/// The fuzz input, as the fuzzer writes it (see [`Raw::parse`]): fixed-size fields,
/// then six bytes per op to the end of the data, so any bytes make a workload and a
/// mutation of one op's bytes changes that op alone.
#[derive(Arbitrary, Debug)]
pub struct Raw {
    pub geometry: u8,
    pub pool_id: u64,
    pub crash: u32,
    /// One bit per undecided word, in the order recovery reads them.
    pub persist_bits: [u8; 16],
    pub persist_rest: u8,
    pub after: Option<(u8, u16)>,
    /// How many of the ops (mod 7) belong to the stale pool.
    pub stale: u8,
}

impl Raw {
    /// The header, then `RawOp`s while at least one op's bytes are left (`arbitrary`'s
    /// own collections would spend a continuation byte per element).
    pub fn parse(data: &[u8]) -> Option<(Raw, Vec<RawOp>, Vec<RawOp>)> {
        let mut u = Unstructured::new(data);
        let raw = Raw::arbitrary(&mut u).ok()?;
        let mut ops = Vec::new();
        while u.len() >= 6 && ops.len() < MAX_STALE + MAX_OPS {
            ops.push(RawOp::arbitrary(&mut u).ok()?);
        }
        let stale = ops.drain(..(raw.stale as usize % (MAX_STALE + 1)).min(ops.len())).collect();
        Some((raw, stale, ops))
    }
}

/// One op in six bytes; see [`RawOp::op`] for the mapping.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub struct RawOp {
    pub kind: u8,
    pub lane: u8,
    pub name: u8,
    pub len: u16,
    pub extra: u8,
}

impl RawOp {
    /// 40% puts, 20% vectored puts, 20% batches, 5% end-of-stream markers, 5%
    /// reclaims, 5% reopens, 5% refreshes; mostly automatic versions.
    pub fn op(&self) -> Op {
        let RawOp { kind, lane, name, len, extra } = *self;
        let ver = |x: u8| match x % 16 {
            0..=11 => Ver::Auto,
            15 => Ver::Max,
            _ => Ver::Bump(x >> 4),
        };
        let derived = |j: u64, m: u64| u64::from_le_bytes(fill((len as u64) << 8 | j, 8).try_into().unwrap()) % m;
        match kind % 20 {
            0..=5 => Op::Put { lane, name, len, version: ver(extra) },
            6..=7 => {
                let changes = (0..1 + extra % 4)
                    .map(|j| (derived(j as u64 + 30, 4200) as u16, derived(j as u64 + 40, 300) as u16));
                Op::Delta { lane, name, len, changes: changes.collect() }
            }
            8..=11 => {
                let parts = (0..extra % 7).map(|j| derived(j as u64, 700) as u16).collect();
                Op::Vectored { lane, name, parts }
            }
            12..=15 => {
                let objects = (0..extra % 9)
                    .map(|j| Obj {
                        name: name.wrapping_add(j * 5),
                        len: derived(j as u64 + 10, 4000) as u16,
                        version: ver(derived(j as u64 + 20, 256) as u8),
                    })
                    .collect();
                // Extra bit 7: objects of up to 4000 bytes (a batch spanning segments).
                Op::Batch { lane, objects, big: extra & 0x80 != 0 }
            }
            16 => Op::Reclaim { keep: extra % 4 },
            17 => Op::Close { lane },
            18 => Op::Reopen,
            _ => Op::Refresh,
        }
    }
}

/// Where the machine crashes.
#[derive(Clone, Copy, Debug)]
pub enum Crash {
    /// After this many events since the format (modulo the events, plus one: the end).
    AtEvent(u32),
    /// Just before the k-th fence since the format (modulo the fences, plus the end):
    /// the points with the most pending words.
    BeforeFence(u32),
}

/// The workload and the crash, as the check sees them.
#[derive(Clone, Debug)]
pub struct Input {
    /// Bits 0–2: segments (2..=7); bit 3: 8 KiB segments; bits 4–5: lanes − 1;
    /// bit 6: payload checksums; bit 7: the stale pool used the other segment size.
    pub geometry: u8,
    pub pool_id: u64,
    /// Ops of an earlier pool on the same media (its bytes are the stale background).
    pub stale: Vec<Op>,
    pub ops: Vec<Op>,
    pub crash: Crash,
    /// One bit per undecided word (1: its newest pending value persisted).
    pub persist_bits: Vec<u8>,
    /// Undecided words past `persist_bits`: 0 none persist, 255 all, else each with
    /// probability about `persist_rest / 256` (a fixed pseudo-random pattern).
    pub persist_rest: u8,
    /// A put after recovery: (lane, length).
    pub after: Option<(u8, u16)>,
}

impl Input {
    pub fn from_raw(r: &Raw, stale: &[RawOp], ops: &[RawOp]) -> Input {
        Input {
            geometry: r.geometry,
            pool_id: r.pool_id,
            stale: stale.iter().map(RawOp::op).collect(),
            ops: ops.iter().map(RawOp::op).collect(),
            crash: if r.crash & 1 == 0 { Crash::AtEvent(r.crash >> 1) } else { Crash::BeforeFence(r.crash >> 1) },
            persist_bits: r.persist_bits.to_vec(),
            persist_rest: r.persist_rest,
            after: r.after,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Op {
    Put {
        lane: u8,
        name: u8,
        len: u16,
        version: Ver,
    },
    Vectored {
        lane: u8,
        name: u8,
        parts: Vec<u16>,
    },
    Batch {
        lane: u8,
        objects: Vec<Obj>,
        /// Objects of up to 4000 bytes (else 1500).
        big: bool,
    },
    /// `Pool::close_lane`: an end-of-stream unit (no objects) on the lane.
    Close {
        lane: u8,
    },
    /// `Pool::reclaim(keep)`: retention releases each lane's oldest segments whose
    /// objects all have `keep` newer versions (a truncate unit per lane trimmed).
    Reclaim {
        keep: u8,
    },
    /// Close the pool and open it again (recovery from the media).
    Reopen,
    /// `Pool::refresh`: recovery again into the open pool (its caches and hints stay).
    Refresh,
    /// A delta put (`Object::delta`) of the name's latest version with `changes` (offset, len)
    /// rewritten; a full put of `len` bytes when the name has no version.
    Delta {
        lane: u8,
        name: u8,
        len: u16,
        changes: Vec<(u16, u16)>,
    },
}

#[derive(Debug, Clone)]
pub struct Obj {
    pub name: u8,
    pub len: u16,
    pub version: Ver,
}

#[derive(Debug, Clone, Copy)]
pub enum Ver {
    /// The name's latest + 1.
    Auto,
    /// Explicit: the latest + this (0: not increasing, refused).
    Bump(u8),
    /// Explicit `u64::MAX` (the next auto version overflows: refused).
    Max,
}

const MAX_OPS: usize = 20;
const MAX_STALE: usize = 6;
const MAX_PARTS: usize = 6;
const MAX_BATCH: usize = 8;

pub fn run(data: &[u8]) {
    if let Some((raw, stale, ops)) = Raw::parse(data) {
        check(&Input::from_raw(&raw, &stale, &ops));
    }
}

/// Object names: short, long (past one cache line), the longest, and two invalid ones.
fn name_of(i: u8) -> Vec<u8> {
    match i % 16 {
        6 => Vec::new(),
        7 => vec![b'y'; NAME_MAX + 1],
        k => match k % 6 {
            0 => b"a".to_vec(),
            1 => b"b".to_vec(),
            2 => b"temperature".to_vec(),
            3 => b"seventeen-bytes!!".to_vec(),
            4 => vec![b'z'; NAME_MAX],
            _ => b"a\0b".to_vec(),
        },
    }
}

/// One object of a request: name, payload slices, explicit version or none.
#[derive(Clone, Debug)]
struct ReqObj {
    name: Vec<u8>,
    parts: Vec<Vec<u8>>,
    version: Option<u64>,
    /// A delta put: the parent version and the changed ranges, sorted.
    delta: Option<(u64, Vec<(u64, u64)>)>,
}

impl ReqObj {
    fn bytes(&self) -> Vec<u8> {
        self.parts.concat()
    }
}

/// How a request is issued (each API entry point once in a while).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Call {
    Put,
    Delta,
    Vectored,
    Batch,
    Close,
}

#[derive(Clone, Debug)]
struct Req {
    call: Call,
    lane: u32,
    objs: Vec<ReqObj>,
}

/// An object the model holds.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stored {
    bytes: Vec<u8>,
    lane: u32,
    seq: u64,
}

type Objects = BTreeMap<(Vec<u8>, u64), Stored>;

/// One committed unit, as the model sees it.
#[derive(Clone, Debug)]
struct Unit {
    lane: u32,
    kind: UnitKind,
}

#[derive(Clone, Debug)]
enum UnitKind {
    /// A put or batch: these objects appear.
    Data(Objects),
    /// An end-of-stream marker: the lane is closed.
    Close,
    /// A truncate unit of retention: these objects (of this lane) are released. It
    /// neither closes nor reopens the lane.
    Truncate(Objects),
}

/// A committed op: its event span and its units, in commit order (one per lane at
/// most; after a crash inside the op, a prefix of them is durable).
struct Done {
    start: usize,
    end: usize,
    units: Vec<Unit>,
}

/// Objects and per-lane (units, closed) after applying `units` in order.
fn apply<'a>(lanes: u32, units: impl Iterator<Item = &'a Unit>) -> (Objects, Vec<(u64, bool)>) {
    let mut objects = Objects::new();
    let mut infos = vec![(0u64, false); lanes as usize];
    for u in units {
        let l = &mut infos[u.lane as usize];
        l.0 += 1;
        match &u.kind {
            UnitKind::Data(o) => {
                objects.extend(o.clone());
                l.1 = false;
            }
            UnitKind::Close => l.1 = true,
            UnitKind::Truncate(o) => o.keys().for_each(|k| {
                objects.remove(k);
            }),
        }
    }
    (objects, infos)
}

/// What the pool says of each lane (a lane without a segment: no units, open).
fn pool_lane_infos<M: Media>(pool: &Pool<M, HeapMemory>, lanes: u32) -> Vec<(u64, bool)> {
    (0..lanes).map(|l| pool.lane_info(l).map_or((0, false), |i| (i.units, i.closed))).collect()
}

/// The plain model: acknowledged objects, and each lane's room left in its segment (or
/// span), which says whether its next unit claims new segments.
struct Model {
    segment_len: u64,
    segment_count: u64,
    lanes: u32,
    objects: Objects,
    /// Per lane: bytes left between its tail and its segment's (span's) end; 0 for a lane
    /// without a segment (any unit claims). `None` once unknown (not in this checker).
    room: Vec<Option<u64>>,
}

impl Model {
    fn new(segment_len: u64, segment_count: u64, lanes: u32) -> Model {
        Model { segment_len, segment_count, lanes, objects: Objects::new(), room: vec![Some(0); lanes as usize] }
    }

    /// Format 2: the largest unit is the data of a span over the whole pool.
    fn max_unit(&self) -> u64 {
        self.segment_count * self.segment_len - 64
    }

    /// Segments a unit of `unit` bytes claims: its span's header line comes first.
    fn span_for(&self, unit: u64) -> u64 {
        (unit + 64).div_ceil(self.segment_len)
    }

    /// The unit `req` writes, with every object stored in full (a marker: one line).
    fn unit_len(&self, req: &Req) -> u64 {
        64 + req.objs.iter().map(|o| object_len(o.name.len().min(NAME_MAX), o.bytes().len() as u64)).sum::<u64>()
    }

    /// A lane's room after a unit of `unit` bytes: in its segment, or in a new span.
    fn advance(&mut self, lane: u32, unit: u64, claimed: bool) {
        let span = self.span_for(unit);
        let seg = self.segment_len;
        if let Some(room) = self.room.get_mut(lane as usize) {
            *room = match (claimed, *room) {
                (true, _) => Some(span * seg - 64 - unit),
                (false, Some(r)) => Some(r.checked_sub(unit).expect("a unit past its segment's end")),
                (false, None) => None,
            };
        }
    }

    /// The name's latest version held (retention may have released older ones, or all).
    fn latest(&self, name: &[u8]) -> Option<u64> {
        self.objects.range((name.to_vec(), 0)..=(name.to_vec(), u64::MAX)).next_back().map(|((_, v), _)| *v)
    }

    /// The versions `req` gets, or every error it may legitimately fail with.
    fn plan(&self, req: &Req) -> Result<Vec<u64>, Vec<Error>> {
        let mut errs = Vec::new();
        if req.lane >= self.lanes {
            errs.push(Error::NoSuchLane { lane: req.lane, lanes_max: self.lanes });
        }
        if req.call == Call::Close {
            return if errs.is_empty() { Ok(Vec::new()) } else { Err(errs) };
        }
        if req.objs.is_empty() || req.objs.len() > nvs_core::BATCH_MAX {
            errs.push(Error::BatchSize { count: req.objs.len() });
        }
        let mut versions: Vec<u64> = Vec::new();
        let mut unit = 64u64;
        for (i, o) in req.objs.iter().enumerate() {
            if o.name.is_empty() {
                errs.push(Error::NameEmpty);
            }
            if o.name.len() > NAME_MAX {
                errs.push(Error::NameTooLong { len_bytes: o.name.len() });
            }
            let in_batch = req.objs[..i].iter().zip(&versions).filter(|(e, _)| e.name == o.name).map(|(_, v)| *v).max();
            let latest = in_batch.max(self.latest(&o.name));
            let v = match (o.version, latest) {
                // Versions start at 1.
                (Some(0), l) => {
                    errs.push(Error::VersionNotIncreasing { latest: l.unwrap_or(0), given: 0 });
                    0
                }
                (Some(v), Some(l)) if v <= l => {
                    errs.push(Error::VersionNotIncreasing { latest: l, given: v });
                    v
                }
                (Some(v), _) => v,
                (None, Some(l)) => l.checked_add(1).unwrap_or_else(|| {
                    errs.push(Error::VersionNotIncreasing { latest: l, given: l });
                    l
                }),
                (None, None) => 1,
            };
            versions.push(v);
            let len = o.bytes().len() as u64;
            // Format 2: a span's header, the unit header, object header + name, payload,
            // in a span over the whole pool; rounded down to a line.
            let max = (self.max_unit() - 64).saturating_sub(object_head_len(o.name.len().min(NAME_MAX))) & !63;
            if len > max {
                errs.push(Error::TooLarge { len_bytes: len, max_bytes: max });
            }
            unit += object_len(o.name.len().min(NAME_MAX), len);
        }
        if unit > self.max_unit() {
            errs.push(Error::TooLarge { len_bytes: unit, max_bytes: self.max_unit() - 64 });
        }
        if errs.is_empty() {
            Ok(versions)
        } else {
            Err(errs)
        }
    }
}

/// Turn an [`Op`] into a request (payload bytes from `seed`); `None` for a reopen.
fn request(op: &Op, model: &Model, seed: u64) -> Option<Req> {
    let explicit = |name: &[u8], v: Ver| match v {
        Ver::Auto => None,
        Ver::Bump(k) => Some(model.latest(name).unwrap_or(0).wrapping_add(k as u64)),
        Ver::Max => Some(u64::MAX),
    };
    Some(match op {
        Op::Put { lane, name, len, version } => {
            let name = name_of(*name);
            let version = explicit(&name, *version);
            // Length bit 15: half a segment to three (spans of 1 to 3 segments).
            let seg = model.segment_len as usize;
            let n = match *len & 0x8000 {
                0 => *len as usize % 4200,
                _ => seg / 2 + (*len as usize & 0x7fff) % (2 * seg + seg / 2),
            };
            let parts = vec![fill(seed, n)];
            Req {
                call: Call::Put,
                lane: *lane as u32 % (model.lanes + 1),
                objs: vec![ReqObj { name, parts, version, delta: None }],
            }
        }
        Op::Delta { lane, name, len, changes } => {
            let name = name_of(*name);
            let lane = *lane as u32 % (model.lanes + 1);
            let base =
                model.latest(&name).and_then(|v| Some((v, model.objects.get(&(name.clone(), v))?.bytes.clone())));
            let Some((parent, mut bytes)) = base else {
                let parts = vec![fill(seed, *len as usize % 4200)];
                let o = ReqObj { name, parts, version: None, delta: Some((0, vec![])) };
                return Some(Req { call: Call::Delta, lane, objs: vec![o] });
            };
            let mut ranges = Vec::new();
            for (k, &(off, n)) in changes.iter().enumerate() {
                let (off, end) = ((off as usize).min(bytes.len()), (off as usize + n as usize).min(bytes.len()));
                bytes[off..end].copy_from_slice(&fill(seed ^ (k as u64 + 1) << 32, end - off));
                ranges.push((off as u64, (end - off) as u64));
            }
            ranges.sort_unstable();
            let o = ReqObj { name, parts: vec![bytes], version: None, delta: Some((parent, ranges)) };
            Req { call: Call::Delta, lane, objs: vec![o] }
        }
        Op::Vectored { lane, name, parts } => {
            // Name bit 7 (unused by `name_of`): slices of up to 3000 bytes, spanning.
            let most = if name & 0x80 != 0 { 3000 } else { 700 };
            let lens: Vec<usize> = parts.iter().take(MAX_PARTS).map(|&l| l as usize % most).collect();
            let all = fill(seed, lens.iter().sum());
            let mut at = 0;
            let parts = lens
                .iter()
                .map(|&l| {
                    at += l;
                    all[at - l..at].to_vec()
                })
                .collect();
            let o = ReqObj { name: name_of(*name), parts, version: None, delta: None };
            Req { call: Call::Vectored, lane: *lane as u32 % (model.lanes + 1), objs: vec![o] }
        }
        Op::Batch { lane, objects, big } => {
            let most = if *big { 4000 } else { 1500 };
            let objs = objects
                .iter()
                .take(MAX_BATCH)
                .enumerate()
                .map(|(k, o)| {
                    let name = name_of(o.name);
                    let version = explicit(&name, o.version);
                    let parts = vec![fill(seed ^ ((k as u64 + 1) << 40), o.len as usize % most)];
                    ReqObj { name, parts, version, delta: None }
                })
                .collect();
            Req { call: Call::Batch, lane: *lane as u32 % (model.lanes + 1), objs }
        }
        Op::Close { lane } => Req { call: Call::Close, lane: *lane as u32 % (model.lanes + 1), objs: Vec::new() },
        Op::Reopen | Op::Refresh | Op::Reclaim { .. } => return None,
    })
}

/// Issue `req` through the API entry point it names.
/// What a refused op may have stored: nothing, except a lone put or a batch (automatic
/// versions, no deltas) refused in planning (a name's versions exhausted, or index
/// memory full): a lone put may have NT-stored exactly its payload's lines, one run, no
/// fence (`store_payload_ahead` in nvs-core); a batch the payloads of its first objects,
/// each where its unit puts it (`plan_unit`'s `interleave`). They lie past the lane's
/// log end; every crash image checked after this op includes them, so damage to
/// anything committed would show there.
fn stored_ahead(events: &[nvs_sim::Event], req: &Req, e: &Error) -> bool {
    let planning =
        matches!(e, Error::IndexFull { .. }) || matches!(e, Error::VersionNotIncreasing { latest: u64::MAX, .. });
    let full = req.objs.iter().all(|o| o.version.is_none() && o.delta.is_none());
    if !planning || !full || req.call == Call::Delta {
        return false;
    }
    let words: Option<Vec<u32>> = events
        .iter()
        .map(|ev| match ev {
            nvs_sim::Event::Store { word, nt: true, .. } => Some(*word),
            _ => None,
        })
        .collect();
    let Some(words) = words else { return false };
    // A lone put: its payload and zero padding to the end of its line. A batch (stored
    // while planned): the payloads of its first objects, in order, each padded to its
    // line, with the gap of the next object's header and name between them.
    let lines = |o: &ReqObj| (o.bytes().len().next_multiple_of(64) / 8, (48 + o.name.len()).next_multiple_of(64) / 8);
    let mut rest = &words[..];
    let mut at: Option<u32> = None;
    for (i, o) in req.objs.iter().enumerate() {
        if rest.is_empty() {
            // Planning stopped at object i (a lone put stores its whole payload first).
            return i > 0 && req.objs.len() > 1;
        }
        let (pw, hw) = lines(o);
        let start = at.map_or(rest[0], |a| a + hw as u32);
        let Some(run) = rest.get(..pw) else { return false };
        if run.iter().enumerate().any(|(k, w)| *w != start + k as u32) {
            return false;
        }
        rest = &rest[pw..];
        at = Some(start + pw as u32).filter(|_| pw > 0 || at.is_some());
    }
    rest.is_empty()
}

fn issue<M: Media>(pool: &mut Pool<M, HeapMemory>, req: &Req) -> nvs_core::Result<Vec<u64>> {
    match (req.call, &req.objs[..]) {
        (Call::Close, _) => pool.close_lane(req.lane).map(|()| Vec::new()),
        (Call::Delta, [o]) => {
            let (parent, ranges) = o.delta.clone().unwrap_or_default();
            let bytes = o.bytes();
            pool.put(req.lane, Object::new(o.name.as_slice(), &bytes).delta(parent, &ranges)).map(|p| vec![p.version])
        }
        (Call::Put, [o]) => {
            let b = o.bytes();
            match o.version {
                Some(v) => pool.put(req.lane, Object::new(o.name.as_slice(), &b).version(v)).map(|p| vec![p.version]),
                None if req.lane == 0 => pool.put(0, Object::new(o.name.as_slice(), &b)).map(|p| vec![p.version]),
                None => pool.put(req.lane, Object::vectored(o.name.as_slice(), &[&b])).map(|p| vec![p.version]),
            }
        }
        (Call::Vectored, [o]) => {
            let parts: Vec<&[u8]> = o.parts.iter().map(|p| &p[..]).collect();
            pool.put(req.lane, Object::vectored(o.name.as_slice(), &parts)).map(|p| vec![p.version])
        }
        _ => {
            let parts: Vec<Vec<&[u8]>> = req.objs.iter().map(|o| o.parts.iter().map(|p| &p[..]).collect()).collect();
            let objects: Vec<Object> = req
                .objs
                .iter()
                .zip(&parts)
                .map(|(o, p)| {
                    let obj = Object::vectored(o.name.as_slice(), p);
                    match o.version {
                        Some(v) => obj.version(v),
                        None => obj,
                    }
                })
                .collect();
            pool.put_batch(req.lane, &objects).map(|v| v.to_vec()).map_err(nvs_core::Error::from)
        }
    }
}

/// The pool's segments as its media says, in index order (true: free): a valid header
/// of this pool owns its span. Between ops nothing else is in use (a released segment's
/// header is invalidated before the reclaim returns); checked against `free_segments`.
fn free_map<M: Media>(pool: &Pool<M, HeapMemory>) -> Vec<bool> {
    let sb = *pool.superblock();
    let mut free = vec![true; sb.segment_count as usize];
    let mut i = 0u32;
    while i < sb.segment_count {
        match decode_segment(pool.media(), &sb, i) {
            Some(h) => {
                free[i as usize..(i as u64 + h.span) as usize].fill(false);
                i += h.span as u32;
            }
            None => i += 1,
        }
    }
    let n = free.iter().filter(|&&f| f).count() as u32;
    assert_eq!(pool.free_segments(), n, "free segments: the pool's count against its headers {free:?}");
    free
}

/// Everything a pool holds.
fn contents<M: Media>(pool: &Pool<M, HeapMemory>) -> Objects {
    let mut out = Objects::new();
    let mut buf = Vec::new();
    let names: Vec<_> = pool.names().collect();
    for n in names {
        let mut nb = [0u8; NAME_MAX];
        let name = pool.name_bytes(n.id, &mut nb).to_vec();
        for v in pool.versions(&name).expect("listed name").collect::<Vec<_>>() {
            buf.resize(v.len_bytes as usize, 0);
            let got = pool.get(&name, v.version, &mut buf).expect("get a listed version");
            out.insert((name.clone(), v.version), Stored { bytes: buf[..got].to_vec(), lane: v.lane, seq: v.seq });
        }
    }
    out
}

fn options(pool_id: u64, segment_len: u64, lanes: u32, payload_checksum: bool) -> FormatOptions {
    let mut o = FormatOptions::new(pool_id);
    o.segment_len = Some(segment_len);
    o.lanes_max = lanes;
    o.payload_checksum = payload_checksum;
    o
}

/// The stale background: an earlier pool's bytes (another id) after `ops`, written
/// through a plain [`Region`](nvs_core::Region) (nothing to record there).
fn stale_bytes(input: &Input, len: usize, segment_len: u64, lanes: u32) -> Vec<u8> {
    let mut img = crate::Image::from_bytes(&fill(input.pool_id ^ 0x5157_4c45, len));
    {
        let opts = options(input.pool_id ^ 1, segment_len, lanes, false);
        let mut pool = Pool::format(img.region(), opts, HeapMemory::new()).expect("format the stale pool");
        small_deltas(&mut pool);
        let segments = (len as u64 - 4096) / segment_len;
        let model = Model::new(segment_len, segments, lanes);
        for (i, op) in input.stale.iter().take(MAX_STALE).enumerate() {
            if let Some(req) = request(op, &model, 0xBAD0_0000 + i as u64) {
                let _ = issue(&mut pool, &req);
            }
        }
    }
    img.bytes()
}

/// `Pool::reclaim(keep)` on the live pool, checked against the model: only objects with
/// at least `keep` newer versions of their name are released, nothing else changes, at
/// most one truncate unit per lane; and recorded as units for the crash check.
/// Delta options for objects of a few KiB: 64-byte chunks, chains of at most 3.
fn small_deltas<M: Media>(pool: &mut Pool<M, HeapMemory>) {
    let opts = nvs_core::DeltaOptions { chunk_bytes: 64, full_every: 3, max_percent: 50, ..Default::default() };
    pool.set_delta_options(opts).expect("valid delta options");
}

fn reclaim(sim: &SimMedia, pool: &mut Pool<&SimMedia, HeapMemory>, model: &mut Model, done: &mut Vec<Done>, keep: u32) {
    let lanes = model.lanes;
    let before = pool_lane_infos(pool, lanes);
    let start = sim.point();
    let r = pool.reclaim(keep);
    let end = sim.point();
    free_map(pool);
    let after_infos = pool_lane_infos(pool, lanes);
    let after = contents(pool);
    match r {
        Ok(_) => {}
        // Out of space for a truncate unit: nothing may have happened.
        Err(Error::Full) => assert_eq!(
            (start, &after_infos, &after),
            (end, &before, &model.objects),
            "a refused reclaim changed the pool"
        ),
        Err(e) => panic!("reclaim({keep}): {e:?}"),
    }
    for (key, v) in &after {
        assert_eq!(model.objects.get(key), Some(v), "reclaim changed or invented {key:?}");
    }
    let released: Objects = model
        .objects
        .iter()
        .filter(|(key, _)| !after.contains_key(*key))
        .map(|(key, v)| (key.clone(), v.clone()))
        .collect();
    for (name, v) in released.keys() {
        use std::ops::Bound::{Excluded, Included};
        let newer = model.objects.range((Excluded((name.clone(), *v)), Included((name.clone(), u64::MAX)))).count();
        assert!(newer >= keep as usize, "reclaim({keep}) released {name:?} v{v} with only {newer} newer versions");
    }
    let mut units = Vec::new();
    for l in 0..lanes {
        let (b, a) = (before[l as usize], after_infos[l as usize]);
        let mine: Objects =
            released.iter().filter(|(_, s)| s.lane == l).map(|(key, v)| (key.clone(), v.clone())).collect();
        match a.0 - b.0 {
            0 => assert!(mine.is_empty(), "lane {l}: objects released without a truncate unit"),
            1 => {
                assert_eq!(a.1, b.1, "lane {l}: a truncate unit changed whether the lane is closed");
                units.push(Unit { lane: l, kind: UnitKind::Truncate(mine) });
                // One line, in the lane's segment or in a new one.
                let claims = model.room[l as usize].map(|r| r < 64);
                model.advance(l, 64, claims.unwrap_or(false));
                if claims.is_none() {
                    model.room[l as usize] = None;
                }
            }
            n => panic!("lane {l}: {n} units from one reclaim"),
        }
    }
    for key in released.keys() {
        model.objects.remove(key);
    }
    if !units.is_empty() {
        done.push(Done { start, end, units });
    } else {
        assert_eq!(start, end, "a reclaim that released nothing stored");
    }
}

/// Run the whole check on one input.
pub fn check(input: &Input) {
    let g = input.geometry;
    let segments = 2 + (g & 7) as u64 % 6;
    let segment_len: u64 = if g & 8 != 0 { 8192 } else { 4096 };
    let lanes = 1 + ((g >> 4) & 3) as u32;
    let len = (4096 + segments * segment_len) as usize;
    let stale_segment = if g & 0x80 != 0 { 12288 - segment_len } else { segment_len };
    let base = stale_bytes(input, len, stale_segment, lanes);

    let sim = SimMedia::from_bytes(&base);
    let opts = options(input.pool_id, segment_len, lanes, g & 0x40 != 0);
    let mut pool = Pool::format(&sim, opts, HeapMemory::new()).expect("format");
    small_deltas(&mut pool);
    let formatted = sim.point();
    let mut model = Model::new(segment_len, segments, lanes);
    let mut done: Vec<Done> = Vec::new();
    let committed = |done: &[Done]| apply(lanes, done.iter().flat_map(|d| d.units.iter()));
    for (i, op) in input.ops.iter().take(MAX_OPS).enumerate() {
        if let Op::Reclaim { keep } = op {
            reclaim(&sim, &mut pool, &mut model, &mut done, *keep as u32);
            continue;
        }
        let Some(req) = request(op, &model, (i as u64) << 48 | 0x1000) else {
            // Reopen or refresh: recovery stores nothing and finds exactly the model.
            sim.freeze();
            if let Op::Refresh = op {
                pool.refresh().unwrap_or_else(|e| panic!("refresh without a crash failed: {e}"));
            } else {
                let (media, _) = pool.close();
                pool = Pool::open(media, HeapMemory::new())
                    .unwrap_or_else(|e| panic!("reopen without a crash failed: {e}"));
                small_deltas(&mut pool);
            }
            assert_eq!(sim.thaw(), 0, "recovery stored");
            let (objects, infos) = committed(&done);
            assert_eq!(objects, model.objects);
            assert_eq!(contents(&pool), objects, "{op:?} (no crash) recovered something else");
            assert_eq!(pool_lane_infos(&pool, lanes), infos, "{op:?}: lane infos");
            continue;
        };
        let plan = model.plan(&req);
        // Space: whether the unit claims (it does not fit the lane's room), and what a
        // claim of its span finds (the media's segment headers say which are free).
        let unit = model.unit_len(&req);
        let needed = model.span_for(unit);
        let free = free_map(&pool);
        let free_before = free.iter().filter(|&&f| f).count() as u64;
        let claim_err = if free_before < needed {
            Some(Error::Full)
        } else if !free.windows(needed as usize).any(|w| w.iter().all(|&f| f)) {
            Some(Error::Fragmented { needed: needed as u32, free: free_before as u32 })
        } else {
            None
        };
        // Some(true): it claims; Some(false): it does not; None: unknown (a delta's
        // stored size is the planner's; when it claims, it is stored in full).
        let room = model.room.get(req.lane as usize).copied().flatten();
        let claims = match (room, req.call) {
            // A unit appended to a segment leaves its last line to a truncate unit.
            (Some(r), _) if unit + 64 <= r => Some(false),
            (Some(_), Call::Delta) => None,
            (Some(_), _) => Some(true),
            (None, _) => None,
        };
        let start = sim.point();
        let got = issue(&mut pool, &req);
        let end = sim.point();
        let free_after = free_map(&pool).iter().filter(|&&f| f).count() as u64;
        match (got, plan) {
            (Ok(vs), Ok(want)) => {
                assert_eq!(vs, want, "versions of {req:?}");
                let seq = pool.lane_info(req.lane).map_or(0, |l| l.units) - 1;
                // What the unit took: its length as stored (a delta's from its stat).
                let stored = match (req.call, &req.objs[..]) {
                    (Call::Delta, [o]) => {
                        let st = pool.stat(&o.name, vs[0]).expect("stat of a delta put");
                        64 + object_len(o.name.len(), st.stored_bytes)
                    }
                    _ => unit,
                };
                let claimed = free_after != free_before;
                assert!(
                    claims.is_none_or(|c| c == claimed),
                    "{req:?}: claimed {claimed}, room {room:?}, unit {stored}"
                );
                if claimed {
                    assert_eq!(stored, unit, "{req:?}: a unit that claims stores its deltas in full");
                    assert_eq!(claim_err, None, "{req:?} claimed {needed} segments, free map {free:?}");
                    assert_eq!(free_before - free_after, needed, "{req:?}: segments claimed for {unit} bytes");
                }
                model.advance(req.lane, stored, claimed);
                let kind = if req.call == Call::Close {
                    UnitKind::Close
                } else {
                    let mut objects = Objects::new();
                    for (o, v) in req.objs.iter().zip(vs) {
                        objects.insert((o.name.clone(), v), Stored { bytes: o.bytes(), lane: req.lane, seq });
                    }
                    model.objects.extend(objects.clone());
                    UnitKind::Data(objects)
                };
                done.push(Done { start, end, units: vec![Unit { lane: req.lane, kind }] });
                assert_eq!(pool_lane_infos(&pool, lanes), committed(&done).1, "lane infos after {req:?}");
            }
            (Ok(vs), Err(errs)) => panic!("{req:?} succeeded with {vs:?}, expected one of {errs:?}"),
            (Err(e), plan) => {
                let allowed = match &plan {
                    // Out of space: only where the unit claims, and exactly what its claim
                    // finds (Full: fewer free segments than its span; Fragmented: enough,
                    // but no run that long).
                    Ok(_) => claims != Some(false) && claim_err == Some(e),
                    Err(errs) => errs.iter().any(|x| match x {
                        Error::TooLarge { .. } => *x == e,
                        _ => discriminant(x) == discriminant(&e),
                    }),
                };
                assert!(
                    allowed,
                    "{req:?} failed with {e:?}, expected {plan:?} (claims {claims:?}, room {room:?}, unit {unit}, \
                     span {needed}, free map {free:?})"
                );
                assert_eq!(free_after, free_before, "a refused op ({e}) claimed segments");
                let stores = &sim.events()[start..end];
                assert!(start == end || stored_ahead(stores, &req, &e), "a refused op ({e}) stored: {stores:?}");
            }
        }
    }
    drop(pool);

    // The crash.
    let total = sim.point();
    let point = match input.crash {
        Crash::AtEvent(k) => formatted + k as usize % (total - formatted + 1),
        Crash::BeforeFence(k) => {
            let events = sim.events();
            let points: Vec<usize> = fence_points(&events).into_iter().filter(|&p| p >= formatted).collect();
            points[k as usize % points.len()]
        }
    };
    let state = sim.crash_state(point);
    let undecided = state.undecided();
    let choices: Vec<usize> = (0..undecided)
        .map(|i| match (input.persist_bits.get(i / 8), input.persist_rest) {
            (Some(b), _) => (*b as usize >> (i % 8)) & 1,
            (None, 0) => 0,
            (None, 255) => 1,
            (None, d) => (fill(input.pool_id ^ i as u64, 1)[0] < d) as usize,
        })
        .collect();
    let view = CrashView::new(state, Chooser::replaying(choices));
    let recovered = {
        let pool = Pool::open_read_only(&view, HeapMemory::new())
            .unwrap_or_else(|e| panic!("recovery failed on the crash image at event {point} of {total}: {e}"));
        let c = contents(&pool);
        // Units committed (retention's released segments take theirs out of the walk,
        // not out of the lanes' sequence numbers).
        let units: u64 = pool_lane_infos(&pool, lanes).iter().map(|l| l.0).sum();
        // What the contract allows: every acknowledged op's units, and a prefix of the
        // interrupted op's units (a put or batch has one: whole or nothing; a reclaim
        // has one per lane, committed in order).
        let acked: Vec<&Unit> = done.iter().filter(|d| d.end <= point).flat_map(|d| d.units.iter()).collect();
        let interrupted: &[Unit] = done.iter().find(|d| d.start < point && point < d.end).map_or(&[], |d| &d.units[..]);
        let acked_units = acked.len() as u64;
        let k = units.checked_sub(acked_units).filter(|&k| k <= interrupted.len() as u64);
        let Some(k) = k else {
            panic!(
                "recovered {units} units; acknowledged {acked_units}, interrupted op {} (crash at {point} of {total})",
                interrupted.len()
            )
        };
        let (want, infos) = apply(lanes, acked.into_iter().chain(&interrupted[..k as usize]));
        for (key, v) in &want {
            assert_eq!(
                c.get(key),
                Some(v),
                "{key:?} not recovered intact (crash at {point} of {total}, {k} units of the interrupted op)"
            );
        }
        let extra: Objects =
            c.iter().filter(|(key, _)| !want.contains_key(*key)).map(|(key, v)| (key.clone(), v.clone())).collect();
        assert!(
            extra.is_empty(),
            "recovered what was not committed (or was released): {extra:?} (crash at {point} of {total})"
        );
        assert_eq!(pool_lane_infos(&pool, lanes), infos, "lane infos (crash at {point} of {total})");
        c
    };
    assert_eq!(view.stores(), 0, "recovery stored to the crash image");

    // Resume after the crash: a put on the recovered pool, then a reopen.
    let Some((lane, len)) = input.after else { return };
    let sim2 = SimMedia::on(view.into_view());
    let mut pool = Pool::open(&sim2, HeapMemory::new()).expect("open the crash image for writing");
    assert_eq!(contents(&pool), recovered, "a writable open recovered something else");
    let lane = lane as u32 % lanes;
    // Length bit 10: a segment more (a span of 2).
    let more = if len & 0x400 != 0 { segment_len as usize } else { 0 };
    let bytes = fill(0xAF7E_0000 ^ len as u64, len as usize % 2000 + more);
    let free = free_map(&pool);
    let lane_seq = pool.lane_info(lane).map_or(0, |i| i.units);
    let last = recovered.values().filter(|s| s.lane == lane).map(|s| s.seq + 1).max().unwrap_or(0);
    assert!(last <= lane_seq, "lane {lane}: objects of unit {last} but {lane_seq} units");
    let mut want = recovered.clone();
    let acked = match pool.put(lane, Object::vectored(b"after", &[&bytes])).map(|p| p.version) {
        Ok(v) => {
            assert_eq!(v, 1);
            want.insert((b"after".to_vec(), 1), Stored { bytes, lane, seq: lane_seq });
            true
        }
        // No room: exactly what a claim of its span finds (see the ops above).
        Err(Error::Full) if free.iter().filter(|&&f| f).count() < (more > 0) as usize + 1 => false,
        Err(Error::Fragmented { needed: 2, free: n })
            if more > 0
                && n as usize == free.iter().filter(|&&f| f).count()
                && !free.windows(2).any(|w| w == [true, true]) =>
        {
            false
        }
        Err(e) => panic!("put after recovery: {e:?} (free map {free:?})"),
    };
    drop(pool);
    // A second crash (when the length's top bits ask for one): at a fence point of the
    // writer's open-time repair and the put, the pending words all persisted or none.
    // Everything the first recovery returned must still be there; the put whole or not
    // at all, and there if it returned.
    let k2 = (len >> 11) as usize;
    if k2 > 0 {
        let points = fence_points(&sim2.events());
        let point2 = points[k2 % points.len()];
        let state2 = sim2.crash_state(point2);
        let choices = vec![k2 & 1; state2.undecided()];
        let view2 = CrashView::new(state2, Chooser::replaying(choices));
        let pool2 = Pool::open_read_only(&view2, HeapMemory::new())
            .unwrap_or_else(|e| panic!("recovery failed after a second crash at event {point2}: {e}"));
        let c = contents(&pool2);
        let end = point2 == sim2.point();
        assert!(
            c == want || (!(acked && end) && c == recovered),
            "after a second crash at event {point2} of {}: {} objects, {} before it",
            sim2.point(),
            c.len(),
            recovered.len()
        );
    }
    let pool = Pool::open(&sim2, HeapMemory::new()).expect("reopen after the post-crash put");
    assert_eq!(contents(&pool), want, "after a crash, a put and a reopen");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oracle for a refused op's stores: a lone put's payload run, a batch's payloads
    /// of its first objects with each next object's header gap between them — and
    /// nothing else (a header word, a wrong gap, a fence, a batch's partial payload).
    #[test]
    fn stored_ahead_accepts_exactly_payloads_in_place() {
        let obj = |name: usize, len: usize| ReqObj {
            name: vec![b'n'; name],
            parts: vec![vec![1; len]],
            version: None,
            delta: None,
        };
        let nt = |w: u32| nvs_sim::Event::Store { thread: 0, word: w, value: 0, nt: true };
        let run = |from: u32, n: u32| (from..from + n).map(nt).collect::<Vec<_>>();
        let full = Error::VersionNotIncreasing { latest: u64::MAX, given: u64::MAX };
        let put = Req { call: Call::Put, lane: 0, objs: vec![obj(3, 100)] };
        assert!(stored_ahead(&run(40, 16), &put, &full));
        assert!(!stored_ahead(&run(40, 15), &put, &full), "a partial payload");
        assert!(!stored_ahead(&run(40, 16), &put, &Error::NameEmpty), "the caller's input is refused before");
        // Objects of 100, 64 and 8 bytes with names of 3, 20 and 40 bytes: payloads of 16,
        // 8 and 8 words, headers of 8, 16 and 16.
        let batch = Req { call: Call::Batch, lane: 0, objs: vec![obj(3, 100), obj(20, 64), obj(40, 8)] };
        let first = run(40, 16);
        let both: Vec<_> = first.iter().cloned().chain(run(56 + 16, 8)).collect();
        let all: Vec<_> = both.iter().cloned().chain(run(80 + 16, 8)).collect();
        assert!(stored_ahead(&first, &batch, &full));
        assert!(stored_ahead(&both, &batch, &full));
        assert!(stored_ahead(&all, &batch, &full));
        let gapless: Vec<_> = first.iter().cloned().chain(run(56, 8)).collect();
        assert!(!stored_ahead(&gapless, &batch, &full), "the second payload over its header");
        let header: Vec<_> = first.iter().cloned().chain(run(56, 24)).collect();
        assert!(!stored_ahead(&header, &batch, &full), "a header stored");
        let fenced: Vec<_> = first.iter().cloned().chain([nvs_sim::Event::Fence { thread: 0 }]).collect();
        assert!(!stored_ahead(&fenced, &batch, &full), "a fence");
        assert!(!stored_ahead(&both[..20], &batch, &full), "a partial second payload");
    }

    /// A hand-written workload: every kind of op, a crash at every point, each with the
    /// pending words all persisted and none persisted, then a resumed put.
    #[test]
    fn every_crash_point_of_a_small_workload() {
        let ops = vec![
            Op::Put { lane: 0, name: 0, len: 100, version: Ver::Auto },
            Op::Vectored { lane: 1, name: 3, parts: vec![1, 7, 64, 9] },
            Op::Batch {
                lane: 1,
                objects: vec![
                    Obj { name: 1, len: 300, version: Ver::Bump(5) },
                    Obj { name: 2, len: 0, version: Ver::Auto },
                    Obj { name: 1, len: 65, version: Ver::Auto },
                ],
                big: false,
            },
            Op::Reopen,
            Op::Put { lane: 0, name: 4, len: 3000, version: Ver::Max },
            Op::Refresh,
            Op::Close { lane: 0 },
            Op::Reclaim { keep: 1 },
            Op::Close { lane: 1 },
            Op::Put { lane: 1, name: 0, len: 3000, version: Ver::Auto },
            Op::Put { lane: 1, name: 0, len: 3000, version: Ver::Auto },
            Op::Put { lane: 0, name: 0, len: 3000, version: Ver::Auto },
            Op::Reclaim { keep: 0 },
            Op::Put { lane: 0, name: 0, len: 3000, version: Ver::Auto },
            Op::Reopen,
            Op::Put { lane: 0, name: 4, len: 1, version: Ver::Auto },
            Op::Put { lane: 0, name: 6, len: 1, version: Ver::Auto },
            Op::Put { lane: 1, name: 0, len: 2000, version: Ver::Auto },
        ];
        let mut input = Input {
            geometry: 0x13 | 0x40 | 0x80,
            pool_id: 77,
            stale: ops.clone(),
            ops,
            crash: Crash::AtEvent(0),
            persist_bits: Vec::new(),
            persist_rest: 0,
            after: Some((1, 500)),
        };
        for crash in 0..400 {
            for persist in [0, 255, 100] {
                input.crash = if crash % 2 == 0 { Crash::AtEvent(crash / 2) } else { Crash::BeforeFence(crash / 2) };
                input.persist_rest = persist;
                check(&input);
            }
        }
    }

    /// Spans: units of 2 and 3 segments, a crash at every point inside them, and a pool
    /// whose free segments are not side by side (Fragmented), then too few (Full).
    #[test]
    fn every_crash_point_of_spanning_units() {
        let big = |n: u16| 0x8000 | (n - 2048); // a Put of n bytes (4 KiB segments)
        let ops = vec![
            Op::Put { lane: 0, name: 0, len: 3000, version: Ver::Auto }, // segment 0
            Op::Put { lane: 1, name: 1, len: 3000, version: Ver::Auto }, // segment 1
            Op::Put { lane: 0, name: 0, len: 3000, version: Ver::Auto }, // segment 2
            Op::Put { lane: 1, name: 2, len: 100, version: Ver::Auto },  // segment 1
            Op::Reclaim { keep: 1 },                                     // frees segment 0
            Op::Put { lane: 1, name: 1, len: big(5000), version: Ver::Auto }, // Fragmented { 2, 2 }
            Op::Put { lane: 1, name: 1, len: big(9000), version: Ver::Auto }, // Full
            Op::Reopen,
            Op::Put { lane: 0, name: 0, len: big(7000), version: Ver::Auto }, // Fragmented
            Op::Reclaim { keep: 0 },
            Op::Put { lane: 1, name: 3, len: big(6000), version: Ver::Auto }, // a span of 2
            Op::Refresh,
            Op::Batch {
                lane: 1,
                objects: vec![
                    Obj { name: 1, len: 3999, version: Ver::Auto },
                    Obj { name: 2, len: 2500, version: Ver::Auto },
                ],
                big: true,
            },
        ];
        let mut input = Input {
            geometry: 0x12, // 4 segments of 4 KiB, 2 lanes
            pool_id: 91,
            stale: ops.clone(),
            ops,
            crash: Crash::AtEvent(0),
            persist_bits: Vec::new(),
            persist_rest: 0,
            after: Some((0, 0x400 | 900)),
        };
        for crash in 0..300 {
            for persist in [0, 255, 77] {
                input.crash = if crash % 2 == 0 { Crash::AtEvent(crash / 2) } else { Crash::BeforeFence(crash / 2) };
                input.persist_rest = persist;
                check(&input);
            }
        }
    }
}
