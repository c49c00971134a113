//! A workload: its operations, its setup and the families it comes in, and how one
//! writer runs it ([`Runner`]) on a recording [`SimMedia`], to get a trace and the
//! model of what each operation issued and when it was acknowledged. A workload of
//! writer processes runs a [`Runner`] in each (`crate::processes`); `crate::workload`
//! holds the families and runs any workload.

use crate::contract::{check_reads, read_all, recover_all, Issued, ReadResult};
use nvs_core::Key;
use nvs_core::{BatchError, DeltaOptions, Error, FormatOptions, HeapMemory, Media, Object, Pool};
use nvs_sim::SimMedia;
use std::collections::BTreeMap;

/// One operation of a workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// One object of `size` bytes.
    Put { lane: u32, size: usize },
    /// One object made of several slices.
    Vectored { lane: u32, sizes: Vec<usize> },
    /// Several objects under one commit.
    Batch { lane: u32, sizes: Vec<usize> },
    /// Close the pool and open it again (recovery, no stores).
    Reopen,
    /// Commit an end-of-stream marker on the lane (no objects).
    Close { lane: u32 },
    /// Commit a detach marker on the lane: its writer left cleanly, the stream goes on
    /// (not closed).
    Detach { lane: u32 },
    /// One object of `size` bytes with `meta` bytes of metadata, at version latest +
    /// `gap` of its name (`gap` 1: the next version, as a put without one gets; more: an
    /// explicit version, leaving a gap). The checker's bytes of such an object are its
    /// payload followed by its metadata.
    Tagged { lane: u32, size: usize, meta: usize, gap: u64 },
    /// The writer of `lane` reads every object its index holds, as it stands (no
    /// refresh: other writer processes may have released and reused the segments of
    /// what it knows of their lanes since). Each read gives the bytes that lane's op put
    /// under that name and version, or `NotFound` for what a reclaim released: never
    /// other bytes, never a corruption. Stores nothing.
    Read { lane: u32 },
    /// Take the lane for writing and give it back (it joins the stream: a lane without a
    /// segment claims one, fenced, with no unit).
    Join { lane: u32 },
    /// Retention: keep the last `keep` versions of each name, release older segments.
    Reclaim { keep: u32 },
    /// A delta put of name `d` against its last acknowledged version: that version's
    /// bytes, cut or grown to `size` (new bytes past the old end), with `changes`
    /// (offset, len; clipped to `size`) rewritten. The first one is a full put; one whose
    /// size differs from its parent's must become a full version (nvs decides).
    Delta { lane: u32, size: usize, changes: Vec<(usize, usize)> },
    /// Retention by the writer of `lane` (of writer processes, [`Writers::Processes`]: that
    /// process, which releases only its own lane's segments; of one pool: [`Op::Reclaim`]).
    ReclaimBy { lane: u32, keep: u32 },
    /// The writer of `lane` refreshes (of a process: recovers, and so learns what the
    /// other processes committed); what it then holds must be what a recovery of the
    /// media gives.
    Refresh { lane: u32 },
    /// Writer processes only: a new process takes `lane` over (`Pool::open_lanes`): its
    /// writer died ([`Op::Crash`]), or is closed first (a clean restart). Its recovery
    /// is held to the contract at once, with no power loss, and decides the dead
    /// writer's cut operation (whole: it happened, and is durable once drained; absent:
    /// it never will).
    Takeover { lane: u32 },
    /// Writer processes only: `op`'s process dies (a process crash, not a power loss)
    /// after `events` of `op`'s events (stores, fences), a wide store cut at a word; it
    /// does nothing more (its lane waits for an [`Op::Takeover`]). Its stores stay in the
    /// media. If `op` ends first, the process dies right after it.
    Crash { events: usize, op: Box<Op> },
    /// Writer processes only: `op`'s process is paused inside it after `events` of its
    /// events (at its first store or fence from there on outside the claim lock),
    /// while `meanwhile` run, each whole, in the other processes (op `j` of them is
    /// numbered 1000 × (this op's number + 1) + `j`); then `op` goes on. A paused
    /// process's NT stores not yet fenced are not yet visible to the others.
    Paused { events: usize, op: Box<Op>, meanwhile: Vec<Op> },
}

impl Op {
    /// The lane whose writer runs this op (`None`: the pool's, for [`Op::Reopen`] and
    /// [`Op::Reclaim`]).
    pub fn lane(&self) -> Option<u32> {
        match self {
            Op::Put { lane, .. }
            | Op::Vectored { lane, .. }
            | Op::Batch { lane, .. }
            | Op::Close { lane }
            | Op::Detach { lane }
            | Op::Tagged { lane, .. }
            | Op::Read { lane }
            | Op::Join { lane }
            | Op::Delta { lane, .. }
            | Op::ReclaimBy { lane, .. }
            | Op::Refresh { lane }
            | Op::Takeover { lane } => Some(*lane),
            Op::Crash { op, .. } | Op::Paused { op, .. } => op.lane(),
            Op::Reopen | Op::Reclaim { .. } => None,
        }
    }
}

/// Name of the object delta puts write.
pub const DELTA_NAME: &[u8] = b"d";

/// Delta options of the verifier's pools: small chunks and short chains, so objects of
/// a few hundred bytes take deltas, chains reach their limit, and full versions follow.
fn delta_options(chains_cross_segments: bool) -> DeltaOptions {
    DeltaOptions { chunk_bytes: 64, full_every: 3, max_percent: 50, chains_cross_segments }
}

/// How the media is prepared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setup {
    pub segment_len: u64,
    pub segments: u64,
    pub payload_checksum: bool,
    /// Run an earlier pool (another id, other contents, more operations) on the same
    /// media first, and format over its bytes without zeroing.
    pub stale: bool,
    /// Delta chains may cross segments (`DeltaOptions::chains_cross_segments`).
    pub cross_chains: bool,
    /// Every lane has names of its own (`FormatOptions::lane_names`); the workload's lanes
    /// then put the same names (see `name`), so versions repeat across lanes.
    pub lane_names: bool,
    /// Who writes: one pool, or two writer processes.
    pub writers: Writers,
    /// The pool's lanes (`FormatOptions::lanes_max`).
    pub lanes: u32,
    /// Payloads made of this pool's own headers (`forged_payload`): a segment header
    /// and a committed unit header, line by line, as a pool file stored in the pool
    /// would hold. Recovery must never read a payload byte as either.
    pub forged: bool,
}

/// Who writes a workload's pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writers {
    /// One pool writes every lane (`Pool::format`, `Pool::open`).
    One,
    /// Two writer processes over one media (`Pool::open_lanes`; the pool needs lane
    /// names): A writes lane 0, B lane 1, each on a thread of its own (fences are per
    /// thread), in turn: op by op, or one paused inside an op ([`Op::Paused`]); each op
    /// runs in the process of its lane (`crate::processes`). `drain`: a process that dies ([`Op::Crash`]) has its
    /// pending stores drained to the persistence domain (the kernel's entry on its CPU
    /// drains the write-combining buffers; nvs stores by NT stores only); otherwise they
    /// stay pending for good (a stricter model than x86 with ADR).
    Processes { drain: bool },
}

impl Setup {
    pub const fn small() -> Setup {
        Setup {
            segment_len: 4096,
            segments: 6,
            payload_checksum: false,
            stale: false,
            cross_chains: false,
            lane_names: false,
            writers: Writers::One,
            lanes: 2,
            forged: false,
        }
    }
    pub fn media_len(&self) -> usize {
        (4096 + self.segment_len * self.segments) as usize
    }
}

/// A named workload.
#[derive(Clone, Debug)]
pub struct Workload {
    /// `family/index`: names the workload in reports and repro commands.
    pub id: String,
    pub setup: Setup,
    pub ops: Vec<Op>,
}

/// A workload's recorded run.
pub struct Trace {
    pub media: SimMedia,
    /// Trace position after format.
    pub format_end: usize,
    /// Crash points start here: after format, or (a workload that kills a writer
    /// process) when it died.
    pub check_from: usize,
    pub issued: Vec<Issued>,
    pub setup: Setup,
    /// Each op's trace positions when it started and when it returned.
    pub spans: Vec<(usize, usize)>,
}

/// Object names cycle through a few, so versions of one name come from several ops. In
/// a pool with lane names, a name depends on the object's place in its op alone, so
/// every lane puts the same names (and their versions repeat across lanes).
fn name(op: usize, obj: usize, lane_names: bool) -> Vec<u8> {
    match lane_names {
        true => format!("n{}", obj % 2).into_bytes(),
        false => format!("n{}", (op + obj) % 3).into_bytes(),
    }
}

/// Deterministic, distinct-per-(seed, op, object) payload bytes.
fn payload(seed: u64, op: usize, obj: usize, len: usize) -> Vec<u8> {
    let mut x = seed ^ ((op as u64) << 32) ^ ((obj as u64) << 48) ^ 0x9E37_79B9_7F4A_7C15;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Payload bytes that are pool `pool_id`'s own headers, distinct per (op, object): odd
/// lines a valid segment header (lane 0 or 1, a far chain position), even lines a
/// committed end-of-stream unit of lane 0 or 1 with a seq far past any the workload
/// reaches. A lone put's payload starts 192 bytes into its segment (segment header,
/// unit header, object header), so where a span's payload crosses its covered segments
/// the segment-header lines land on their first lines and the unit lines on their data
/// starts: what a claim torn before its header, or a release that left a covered data
/// start, would show recovery. In a pool of sealed units, the unit lines are sealed ones,
/// bound to another place (as a copy of a pool file stored in the pool carries them).
fn forged_payload(pool_id: u64, sealed: bool, op: usize, obj: usize, len: usize) -> Vec<u8> {
    use nvs_core::internals::format::{
        commit_word, sealed_commit_word, SegmentHeader, UnitHeader, SEGMENT_MAGIC, UNIT_END_OF_STREAM,
    };
    let mut out = Vec::with_capacity(len + 64);
    for j in 0..len.div_ceil(64) as u64 {
        let lane = ((op + obj) as u64 + j / 2) as u32 % 2;
        let far = 1_000_000 + ((op as u64) << 20) + ((obj as u64) << 12) + j;
        if j % 2 == 1 {
            let mut h = SegmentHeader {
                magic: SEGMENT_MAGIC,
                pool_id,
                lane,
                flags: 0,
                chain_seq: far,
                first_seq: far,
                span: 1,
                reserved: 0,
                checksum: 0,
            };
            h.checksum = h.compute_checksum();
            out.extend_from_slice(bytemuck::bytes_of(&h));
        } else {
            let mut h = UnitHeader {
                commit: 0,
                seq: far,
                unit_len: 64,
                object_count: 0,
                lane,
                flags: UNIT_END_OF_STREAM,
                base: 0,
                reserved: 0,
                checksum: 0,
            };
            h.checksum = h.compute_checksum(pool_id);
            h.commit = match sealed {
                true => sealed_commit_word(pool_id, lane, far, h.checksum, far * 64),
                false => commit_word(pool_id, lane, far, h.checksum),
            };
            out.extend_from_slice(bytemuck::bytes_of(&h));
        }
    }
    out.truncate(len);
    out
}

/// The latest version of each name a workload's pool holds, by (lane, name) in a pool
/// with lane names and by name alone otherwise: every put must get the next version of
/// its name (with lane names, the next of its lane's name, whatever other lanes hold).
struct Versions {
    lane_names: bool,
    latest: BTreeMap<(Option<u32>, Vec<u8>), u64>,
}

impl Versions {
    fn of<M: Media>(pool: &Pool<M, HeapMemory>) -> Versions {
        let mut nb = [0u8; nvs_core::NAME_MAX];
        let latest = pool.names().map(|n| ((n.lane, pool.name_bytes(n.id, &mut nb).to_vec()), n.latest)).collect();
        Versions { lane_names: pool.layout().lane_names, latest }
    }

    /// The versions puts of `names`, in order, on `lane` must get.
    fn next<'a>(&self, lane: u32, names: impl IntoIterator<Item = &'a [u8]>) -> Vec<u64> {
        let mut taken: BTreeMap<&[u8], u64> = BTreeMap::new();
        let key = |name: &[u8]| (self.lane_names.then_some(lane), name.to_vec());
        names
            .into_iter()
            .map(|n| {
                let v = taken.get(n).copied().unwrap_or_else(|| self.latest.get(&key(n)).copied().unwrap_or(0)) + 1;
                taken.insert(n, v);
                v
            })
            .collect()
    }

    /// `name` on `lane` was put at version `v` (an explicit version).
    fn set(&mut self, lane: u32, name: &[u8], v: u64) {
        self.latest.insert((self.lane_names.then_some(lane), name.to_vec()), v);
    }

    /// Op `op` put `objects` (name, version), in order, on `lane`.
    fn check<'a>(
        &mut self,
        op: usize,
        lane: u32,
        objects: impl IntoIterator<Item = (&'a [u8], u64)>,
    ) -> Result<(), String> {
        for (name, v) in objects {
            let latest = self.latest.entry((self.lane_names.then_some(lane), name.to_vec())).or_insert(0);
            if v != *latest + 1 {
                let name = String::from_utf8_lossy(name);
                let was = if *latest == 0 { "none".to_string() } else { format!("v{latest}") };
                return Err(format!("op {op}: {name} put on lane {lane} as v{v}, but its latest was {was}"));
            }
            *latest = v;
        }
        Ok(())
    }
}

/// Each object of an operation: its name and its payload's parts.
type Parts = Vec<(Vec<u8>, Vec<Vec<u8>>)>;

/// A writer of a workload: its pool and what the workload knows of it (the versions it
/// has put, each lane's delta base). One pool writes every lane, or (in a workload of
/// writer processes, `crate::processes`) one process's pool writes its own lane.
pub(crate) struct Runner<'m, M: Media> {
    /// The recording media (the pool's media is this, or a process's tap on it).
    media: &'m SimMedia,
    /// `None` only while a reopen swaps it.
    pool: Option<Pool<M, HeapMemory>>,
    seed: u64,
    cross_chains: bool,
    lane_names: bool,
    /// The last acknowledged version of `DELTA_NAME` and its bytes: the base of the next
    /// delta; per lane in a pool with lane names (each lane's `DELTA_NAME` is its own).
    delta_bases: BTreeMap<u32, (u64, Vec<u8>)>,
    versions: Versions,
    /// The lane this writer owns beside other writer processes; `None`: the pool's one
    /// writer.
    owned: Option<u32>,
    /// Payloads of this pool id's own headers ([`Setup::forged`]).
    forge: Option<(u64, bool)>,
}

impl<'m, M: Media> Runner<'m, M> {
    pub(crate) fn new(
        media: &'m SimMedia,
        mut pool: Pool<M, HeapMemory>,
        seed: u64,
        cross_chains: bool,
        owned: Option<u32>,
    ) -> Result<Self, String> {
        pool.set_delta_options(delta_options(cross_chains)).map_err(|e| e.to_string())?;
        let (lane_names, versions) = (pool.layout().lane_names, Versions::of(&pool));
        let delta_bases = BTreeMap::new();
        Ok(Runner {
            media,
            pool: Some(pool),
            seed,
            cross_chains,
            lane_names,
            delta_bases,
            versions,
            owned,
            forge: None,
        })
    }

    pub(crate) fn pool(&mut self) -> &mut Pool<M, HeapMemory> {
        self.pool.as_mut().expect("a pool")
    }

    pub(crate) fn into_pool(self) -> Pool<M, HeapMemory> {
        self.pool.expect("a pool")
    }

    /// The objects op `i` puts, if it puts any (a delta put aside).
    fn parts(&self, i: usize, op: &Op) -> Option<(u32, Parts)> {
        let (seed, lane_names, forge) = (self.seed, self.lane_names, self.forge);
        let payload = |seed, i, k, len| match forge {
            Some((pool_id, sealed)) => forged_payload(pool_id, sealed, i, k, len),
            None => payload(seed, i, k, len),
        };
        Some(match op {
            Op::Put { lane, size } => (*lane, vec![(name(i, 0, lane_names), vec![payload(seed, i, 0, *size)])]),
            Op::Vectored { lane, sizes } => {
                let parts = sizes.iter().enumerate().map(|(k, &s)| payload(seed, i, 100 + k, s)).collect();
                (*lane, vec![(name(i, 0, lane_names), parts)])
            }
            Op::Batch { lane, sizes } => {
                let objects =
                    sizes.iter().enumerate().map(|(k, &s)| (name(i, k, lane_names), vec![payload(seed, i, k, s)]));
                (*lane, objects.collect())
            }
            _ => return None,
        })
    }

    /// A delta put's (parent, bytes, changed ranges) for op `i` (see [`Op::Delta`]).
    fn delta_input(
        &self,
        i: usize,
        lane: u32,
        size: usize,
        changes: &[(usize, usize)],
    ) -> (u64, Vec<u8>, Vec<(u64, u64)>) {
        let delta_base = self.delta_bases.get(&if self.lane_names { lane } else { 0 });
        let fresh = payload(self.seed, i, 0, size);
        let mut ranges = Vec::new();
        let (parent, mut bytes) = match delta_base {
            Some((v, b)) => {
                let mut bytes = b.clone();
                bytes.resize(size, 0);
                if b.len() < size {
                    bytes[b.len()..].copy_from_slice(&fresh[b.len()..]);
                    ranges.push((b.len() as u64, (size - b.len()) as u64));
                }
                (*v, bytes)
            }
            None => (0, fresh),
        };
        for (k, &(off, len)) in changes.iter().enumerate() {
            let (off, end) = (off.min(size), (off + len).min(size));
            bytes[off..end].copy_from_slice(&payload(self.seed, i, 1 + k, end - off));
            ranges.push((off as u64, (end - off) as u64));
        }
        // Sorted by offset, as `Changes` requires (overlaps nvs merges itself).
        ranges.sort_unstable();
        (parent, bytes, ranges)
    }

    /// A tagged put's (name, payload then metadata, version) for op `i` ([`Op::Tagged`]).
    fn tagged(&self, i: usize, lane: u32, size: usize, meta: usize, gap: u64) -> (Vec<u8>, Vec<u8>, u64) {
        let name = name(i, 0, self.lane_names);
        let v = self.versions.next(lane, [&name[..]])[0] - 1 + gap;
        let mut bytes = payload(self.seed, i, 0, size);
        bytes.extend(payload(self.seed, i, 1, meta));
        (name, bytes, v)
    }

    /// Whether a reclaim of this writer may release objects of `lane`.
    fn releases(&self, lane: u32) -> bool {
        self.owned.is_none_or(|o| o == lane)
    }

    /// What op `i` will issue if it gets anywhere, before it runs: its objects with the
    /// versions they must get, its close or join, the objects a reclaim may release.
    /// Not acknowledged (`ack: None`); `start` is the caller's. `None` for an operation
    /// that stores nothing.
    pub(crate) fn intent(&mut self, i: usize, op: &Op) -> Option<Issued> {
        let is = |lane| Issued { op: i, lane, ..Default::default() };
        match op {
            Op::Delta { lane, size, changes } => {
                let (_, bytes, _) = self.delta_input(i, *lane, *size, changes);
                let v = self.versions.next(*lane, [DELTA_NAME])[0];
                Some(Issued { objects: vec![(DELTA_NAME.to_vec(), v, bytes)], ..is(*lane) })
            }
            Op::Close { lane } => Some(Issued { close: true, ..is(*lane) }),
            Op::Detach { lane } => Some(Issued { detach: true, ..is(*lane) }),
            Op::Tagged { lane, size, meta, gap } => {
                let (name, bytes, v) = self.tagged(i, *lane, *size, *meta, *gap);
                Some(Issued { objects: vec![(name, v, bytes)], ..is(*lane) })
            }
            Op::Read { .. } => None,
            Op::Join { lane } => Some(Issued { join: true, ..is(*lane) }),
            Op::Reclaim { .. } | Op::ReclaimBy { .. } => {
                let lane = match op {
                    Op::ReclaimBy { lane, .. } if self.owned.is_some() => *lane,
                    _ => u32::MAX,
                };
                let mut released = present(self.pool());
                released.retain(|o| self.releases(o.0));
                Some(Issued { released, ..is(lane) })
            }
            op => {
                let (lane, objects) = self.parts(i, op)?;
                let vs = self.versions.next(lane, objects.iter().map(|(n, _)| &n[..]));
                let objects = objects.into_iter().zip(vs).map(|((n, ps), v)| (n, v, ps.concat())).collect();
                Some(Issued { objects, ..is(lane) })
            }
        }
    }

    /// Run op `i`; what it issued goes to `issued`.
    pub(crate) fn step(&mut self, i: usize, op: &Op, issued: &mut Vec<Issued>) -> Result<(), String> {
        let media = self.media;
        let start = media.point();
        let (lane, objects): (u32, Parts) = match op {
            Op::Reopen => {
                if self.owned.is_some() {
                    return Err(format!("op {i}: a reopen of one of several writer processes (take over instead)"));
                }
                let (m, _) = self.pool.take().expect("a pool").close();
                let mut pool = Pool::open(m, HeapMemory::new()).map_err(|e| format!("reopen failed: {e}"))?;
                pool.set_delta_options(delta_options(self.cross_chains)).map_err(|e| e.to_string())?;
                self.pool = Some(pool);
                if media.point() != start {
                    return Err("reopen stored to the media".into());
                }
                return Ok(());
            }
            Op::Refresh { .. } => {
                // What the writer then knows (the other writers' objects too) is what a
                // recovery of the media gives.
                self.pool().refresh().map_err(|e| format!("op {i}: refresh: {e}"))?;
                if media.point() != start {
                    return Err(format!("op {i}: refresh stored to the media"));
                }
                let pool = self.pool();
                let mine = read_all(pool).map_err(|e| format!("op {i}: after a refresh: {e}"))?;
                // A recovery of the media as this writer sees it.
                let media_holds = recover_all(pool.media()).map_err(|e| format!("op {i}: {e}"))?;
                if mine != media_holds {
                    return Err(format!(
                        "op {i}: a refreshed writer holds {} objects, a recovery of the media {}",
                        mine.objects.len(),
                        media_holds.objects.len()
                    ));
                }
                return Ok(());
            }
            Op::Close { lane } => {
                self.pool().close_lane(*lane).map_err(|e| format!("op {i}: close: {e}"))?;
                issued.push(Issued {
                    op: i,
                    lane: *lane,
                    start,
                    ack: Some(media.point()),
                    close: true,
                    ..Default::default()
                });
                return Ok(());
            }
            Op::Detach { lane } => {
                self.pool().detach_lane(*lane).map_err(|e| format!("op {i}: detach: {e}"))?;
                let ack = Some(media.point());
                issued.push(Issued { op: i, lane: *lane, start, ack, detach: true, ..Default::default() });
                return Ok(());
            }
            Op::Tagged { lane, size, meta, gap } => {
                let (name, bytes, v) = self.tagged(i, *lane, *size, *meta, *gap);
                let (payload, meta) = bytes.split_at(*size);
                let object = Object::new(&name, payload).meta(meta);
                let object = if *gap == 1 { object } else { object.version(v) };
                match self.pool().put(*lane, object) {
                    Ok(put) if put.version == v => {
                        self.versions.set(*lane, &name, v);
                        let ack = Some(media.point());
                        let objects = vec![(name, v, bytes)];
                        issued.push(Issued { op: i, lane: *lane, start, ack, objects, ..Default::default() });
                    }
                    Ok(put) => return Err(format!("op {i}: put as v{}, but v{v} was asked", put.version)),
                    Err(Error::Full) if media.point() == start => {}
                    Err(e) => return Err(format!("op {i}: tagged put: {e} (after {} events)", media.point() - start)),
                }
                return Ok(());
            }
            Op::Read { lane } => {
                let reads = read_known(self.pool());
                if media.point() != start {
                    return Err(format!("op {i}: a read stored to the media"));
                }
                issued.push(Issued { op: i, lane: *lane, start, ack: Some(start), reads, ..Default::default() });
                return Ok(());
            }
            Op::Join { lane } => {
                drop(self.pool().lane(*lane).map_err(|e| format!("op {i}: join: {e}"))?);
                issued.push(Issued {
                    op: i,
                    lane: *lane,
                    start,
                    ack: Some(media.point()),
                    join: true,
                    ..Default::default()
                });
                return Ok(());
            }
            Op::Reclaim { keep } | Op::ReclaimBy { keep, .. } => {
                let before = present(self.pool());
                self.pool().reclaim(*keep).map_err(|e| format!("op {i}: reclaim: {e}"))?;
                let after = present(self.pool());
                let released: Vec<_> =
                    before.into_iter().filter(|o| !after.contains(o) && self.releases(o.0)).collect();
                let lane = match op {
                    Op::ReclaimBy { lane, .. } if self.owned.is_some() => *lane,
                    _ => u32::MAX,
                };
                issued.push(Issued { op: i, lane, start, ack: Some(media.point()), released, ..Default::default() });
                return Ok(());
            }
            Op::Delta { lane, size, changes } => {
                let (parent, bytes, ranges) = self.delta_input(i, *lane, *size, changes);
                match self.pool().put(*lane, Object::new(DELTA_NAME, &bytes).delta(parent, &ranges)) {
                    Ok(put) => {
                        self.versions.check(i, *lane, [(DELTA_NAME, put.version)])?;
                        issued.push(Issued {
                            op: i,
                            lane: *lane,
                            start,
                            ack: Some(media.point()),
                            objects: vec![(DELTA_NAME.to_vec(), put.version, bytes.clone())],
                            ..Default::default()
                        });
                        self.delta_bases.insert(if self.lane_names { *lane } else { 0 }, (put.version, bytes));
                    }
                    Err(Error::Full) if media.point() == start => {}
                    Err(e) => return Err(format!("op {i}: delta: {e} (after {} events)", media.point() - start)),
                }
                return Ok(());
            }
            Op::Takeover { .. } | Op::Crash { .. } | Op::Paused { .. } => {
                return Err(format!("op {i}: {op:?} needs writer processes (Setup::writers)"))
            }
            op => self.parts(i, op).expect("an op that puts objects"),
        };
        let parts: Vec<Vec<&[u8]>> = objects.iter().map(|(_, ps)| ps.iter().map(|p| &p[..]).collect()).collect();
        let objs: Vec<Object> = objects.iter().zip(&parts).map(|((n, _), p)| Object::vectored(n, p)).collect();
        match self.pool().put_batch(lane, &objs) {
            Ok(vs) => {
                self.versions.check(i, lane, objects.iter().zip(vs.iter()).map(|((n, _), v)| (&n[..], *v)))?;
                issued.push(Issued {
                    op: i,
                    lane,
                    start,
                    ack: Some(media.point()),
                    objects: objects.iter().zip(vs.iter()).map(|((n, ps), v)| (n.clone(), *v, ps.concat())).collect(),
                    ..Default::default()
                })
            }
            Err(BatchError { error: Error::Full, .. }) => {
                if media.point() != start {
                    return Err(format!("op {i}: Full after storing {} events", media.point() - start));
                }
            }
            Err(e) => return Err(format!("op {i}: {e}")),
        }
        Ok(())
    }
}

/// Run `ops` on `pool` (its one writer), each op's (start, end) trace positions to
/// `spans`.
#[allow(clippy::too_many_arguments)] // the run's setup, passed down
fn apply<'m>(
    media: &'m SimMedia,
    pool: Pool<&'m SimMedia, HeapMemory>,
    ops: &[Op],
    seed: u64,
    cross_chains: bool,
    issued: &mut Vec<Issued>,
    spans: &mut Vec<(usize, usize)>,
    forged: bool,
) -> Result<Pool<&'m SimMedia, HeapMemory>, String> {
    let mut runner = Runner::new(media, pool, seed, cross_chains, None)?;
    runner.forge = forged.then(|| (runner.pool().layout().pool_id, runner.pool().layout().sealed_units()));
    for (i, op) in ops.iter().enumerate() {
        let start = media.point();
        let before = issued.len();
        runner.step(i, op, issued)?;
        if let Some(read) = issued[before..].iter().find(|is| !is.reads.is_empty()) {
            check_reads(&issued[..before], read)?;
        }
        spans.push((start, media.point()));
    }
    Ok(runner.into_pool())
}
/// Every (lane, name, version) the pool holds (the lane that wrote it; in a pool with
/// lane names, the lane whose name it is).
pub(crate) fn present<M: Media>(pool: &Pool<M, HeapMemory>) -> Vec<(u32, Vec<u8>, u64)> {
    let mut out = Vec::new();
    let mut nb = [0u8; nvs_core::NAME_MAX];
    for n in pool.names().collect::<Vec<_>>() {
        let name = pool.name_bytes(n.id, &mut nb).to_vec();
        let versions = match n.lane {
            Some(lane) => pool.versions(Key::on(lane, &name)),
            None => pool.versions(&name),
        };
        if let Ok(vs) = versions {
            out.extend(vs.map(|v| (v.lane, name.clone(), v.version)));
        }
    }
    out
}

/// Every (lane, name, version) the pool's index holds, read (`get`, then `meta`, of `Key::on(lane, name)`).
fn read_known<M: Media>(pool: &Pool<M, HeapMemory>) -> Vec<(u32, Vec<u8>, u64, ReadResult)> {
    let mut out = Vec::new();
    for (lane, name, version) in present(pool) {
        let info = pool.stat(Key::on(lane, &name), version);
        let read = info.and_then(|info| {
            let mut buf = vec![0u8; info.len_bytes as usize + info.meta_len as usize];
            let (payload, meta) = buf.split_at_mut(info.len_bytes as usize);
            pool.get(Key::on(lane, &name), version, payload)?;
            pool.meta(Key::on(lane, &name), version, meta)?;
            Ok(buf)
        });
        let got = match read {
            Ok(bytes) => Ok(Some(bytes)),
            Err(Error::NotFound) => Ok(None),
            Err(e) => Err(e.to_string()),
        };
        out.push((lane, name, version, got));
    }
    out
}

pub(crate) fn options(setup: &Setup, pool_id: u64) -> FormatOptions {
    let mut o = FormatOptions::new(pool_id);
    o.segment_len = Some(setup.segment_len);
    o.lanes_max = setup.lanes;
    o.payload_checksum = setup.payload_checksum;
    o.lane_names = setup.lane_names;
    o
}

/// Run a workload of one writer ([`Writers::One`]) on a fresh recording media.
pub(crate) fn run_one(w: &Workload) -> Result<Trace, String> {
    let mut base = vec![0u8; w.setup.media_len()];
    if w.setup.stale {
        // An earlier pool: the same operations and then more on both lanes, other bytes.
        let old = SimMedia::from_bytes(&base);
        let pool = Pool::format(&old, options(&w.setup, 0x0DD_0DD), HeapMemory::new()).map_err(|e| e.to_string())?;
        let mut ops = w.ops.clone();
        ops.extend([Op::Put { lane: 0, size: 100 }, Op::Put { lane: 1, size: 100 }, Op::Put { lane: 0, size: 300 }]);
        apply(&old, pool, &ops, 0xBAD, w.setup.cross_chains, &mut Vec::new(), &mut Vec::new(), false)?;
        base = old.volatile_bytes();
    }
    let media = SimMedia::from_bytes(&base);
    let pool = Pool::format(&media, options(&w.setup, 0x600D), HeapMemory::new()).map_err(|e| e.to_string())?;
    let format_end = media.point();
    let (mut issued, mut spans) = (Vec::new(), Vec::new());
    apply(&media, pool, &w.ops, 0x5EED, w.setup.cross_chains, &mut issued, &mut spans, w.setup.forged)?;
    Ok(Trace { media, format_end, check_from: format_end, issued, setup: w.setup.clone(), spans })
}

/// After a crash: open the image on `media` as a writer (recovery, and the writer's
/// open-time repair) and run `ops` on it (the second half of a depth-2 check).
pub fn continue_with(media: &SimMedia, ops: &[Op]) -> Result<Vec<Issued>, String> {
    let pool = Pool::open(media, HeapMemory::new()).map_err(|e| format!("reopen after the crash failed: {e}"))?;
    let mut issued = Vec::new();
    apply(media, pool, ops, 0xC0DE, false, &mut issued, &mut Vec::new(), false)
        .map_err(|e| format!("after the crash: {e}"))?;
    for i in &mut issued {
        i.op += 100;
    }
    Ok(issued)
}

/// Every sequence of 1 to `max_len` operations of `kinds` kinds, `op(kind, position)`
/// each, shorter ones first.
pub fn every_sequence(kinds: usize, max_len: usize, op: impl Fn(usize, usize) -> Op) -> Vec<Vec<Op>> {
    let mut out = Vec::new();
    let mut frontier: Vec<Vec<usize>> = vec![vec![]];
    for _ in 0..max_len {
        let mut next = Vec::new();
        for seq in &frontier {
            for k in 0..kinds {
                let mut s = seq.clone();
                s.push(k);
                out.push(s.iter().enumerate().map(|(pos, &kind)| op(kind, pos)).collect());
                next.push(s);
            }
        }
        frontier = next;
    }
    out
}

/// A workload family: a name and its workloads.
pub struct Family {
    pub name: &'static str,
    pub what: &'static str,
    pub workloads: Vec<Workload>,
    /// Check every crash point after every single event, not only before fences.
    pub all_points: bool,
    /// Deeper crashes, one list of operations each (empty: one crash). Depth 2: after
    /// each crash, a writer opens the image and runs `then[0]`, which is crashed again at
    /// every point (its recovery must keep everything the first recovery returned);
    /// depth 3: each of those images is opened by a writer that runs `then[1]`, crashed
    /// at every point again; and so on.
    pub then: Vec<Vec<Op>>,
    /// Crash inside `format` instead (every point before it returns): recovery must give
    /// the media's earlier pool, no pool (`NotFormatted`) or the new empty one.
    pub in_format: bool,
}
