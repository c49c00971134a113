//! [`Follower`]: a reader in another process (or this one) following a pool's writers
//! while they write: every object as it commits, end of stream when the writers close
//! their lanes, and "writer gone" when a writer died without closing.
//!
//! A follower opens the pool read-only (it never writes, and takes no lock) and polls:
//! each poll refreshes the pool from the live mapping, which sees exactly the units
//! whose commit word it reads (an Acquire load), so only committed objects ever appear.
//! It remembers, per lane, the next unit sequence number it has not yet reported, and
//! reports each object once, in lane order. A poll's refresh catches up
//! ([`nvs_core::Pool::refresh`]): it reads the segment headers and only the units
//! committed since the last poll, and the poll then looks only at the objects that
//! refresh indexed ([`nvs_core::Pool::objects_after`]) — so a poll costs what is new
//! (plus a word per segment header), not the pool. When a refresh cannot catch up
//! (retention released segments, anything unexpected) it recovers the whole pool, and
//! that poll looks at every object. The index serves the follower's gets. Versions
//! retention released before the follower read them are skipped, silently (see
//! [`Follower`]).

use crate::error::{Error, Result};
use crate::media::Access;
use crate::pool::FilePool;
use nvs_core::NameId;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("pool", &self.pool)
            .field("next_seq", &self.next_seq)
            .field("expected", &self.expected)
            .finish_non_exhaustive()
    }
}

/// One committed object, as a follower reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    /// The lane that committed it.
    pub lane: u32,
    /// The lane sequence number of the unit that committed it.
    pub seq: u64,
    /// Its name.
    pub name: Vec<u8>,
    /// Its version.
    pub version: u64,
    /// Its length.
    pub len_bytes: u64,
}

impl Committed {
    /// Object `v` of name `name`.
    fn of(name: &[u8], v: &nvs_core::ObjectInfo) -> Committed {
        Committed { lane: v.lane, seq: v.seq, name: name.to_vec(), version: v.version, len_bytes: v.len_bytes }
    }
}

/// What a follower learnt from a wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Followed {
    /// Newly committed objects, in lane order.
    Objects(Vec<Committed>),
    /// Every lane that joined (and every declared one) is closed and nothing new
    /// remains: end of stream.
    EndOfStream,
    /// No writer holds the pool, a lane that joined the stream was never closed, and
    /// nothing new remains: the writer died (or exited without closing its lanes). On a
    /// pool no lane has joined yet, a follower waits instead, for a writer yet to come.
    WriterGone,
    /// Nothing happened before the timeout.
    Timeout,
}

/// Follows a pool's writers while they write: every object as it commits
/// ([`Followed::Objects`]), the end of the stream ([`Followed::EndOfStream`]), and
/// [`Followed::WriterGone`] when no writer holds the pool and some lane was never closed
/// (the writer died).
///
/// **When the stream ends.** A lane joins the stream when it is taken for writing
/// ([`FilePool::lane`], durably: it claims a segment before any put) or written; the
/// stream ends once every lane that joined is closed, and every lane declared with
/// [`Follower::expect_lanes`] has joined and closed. So a writer that takes all its lanes
/// before any closes, or a follower that declares them, never sees the stream end while
/// a late lane has still to start.
///
/// It opens the pool read-only (never writes, takes no lock) and polls: each poll
/// refreshes the pool from the live mapping, which sees exactly the units whose commit
/// word it reads, so only committed objects appear, each reported once, in lane order.
/// A poll costs what was committed since the last one (the refresh catches up; see the
/// module docs), or one recovery when it cannot. See [`FilePool`] for an example.
///
/// **A file replaced.** A follower that would wait for a next writer of a pool file that
/// was removed, moved or replaced at its path (a new pool made there) while no writer
/// holds it ends with [`Error::Replaced`]: no writer can open that file again. While a
/// writer holds it, or the path still names it, it waits.
///
/// **Retention.** A follower reports what is in the pool when it polls. Versions that
/// retention ([`FilePool::reclaim`], `NVS_KEEP` of the NVStream wrapper) released before
/// the follower read them are skipped, silently: a follower that falls behind a writer
/// using retention sees a gap in a name's versions (the next one it reports is more than
/// one above the last), nothing else.
pub struct Follower {
    pool: FilePool,
    /// Next unreported unit sequence number, per lane.
    next_seq: BTreeMap<u32, u64>,
    /// Only this name, if set.
    only: Option<Vec<u8>>,
    /// Lanes the stream must see closed before it ends (besides every lane that joined).
    expected: Vec<u32>,
    /// Where the index stood after the last poll: a poll whose refresh caught up reads
    /// only the objects indexed since.
    mark: Option<nvs_core::IndexMark>,
    /// Lanes whose writer was reported gone and given up ([`Follower::give_up`]): the
    /// stream goes on with the others, and ends without them.
    given_up: Vec<u32>,
}

impl Follower {
    /// Open `path` read-only to follow it (every object already committed is reported
    /// by the first poll). An `only` name no object can have (empty, longer than
    /// `NAME_MAX`) is refused: it would match nothing, and the follower would wait for
    /// ever for it.
    pub fn open(path: impl AsRef<Path>, only: Option<Vec<u8>>) -> Result<Follower> {
        let path = path.as_ref();
        let bad = match only.as_deref().map(<[u8]>::len) {
            Some(0) => Some(nvs_core::Error::NameEmpty),
            Some(len_bytes) if len_bytes > nvs_core::NAME_MAX => Some(nvs_core::Error::NameTooLong { len_bytes }),
            _ => None,
        };
        if let Some(source) = bad {
            return Err(Error::Core { path: path.to_path_buf(), source });
        }
        let pool = FilePool::open(path, Access::ReadOnly)?;
        Ok(Follower { pool, next_seq: BTreeMap::new(), only, expected: Vec::new(), mark: None, given_up: Vec::new() })
    }

    /// Declare lanes the stream has: it ends only once each of them has joined and
    /// closed (as well as every lane that joined on its own). A lane the pool cannot have
    /// (`lane >= lanes_max`) would never end its stream: it is refused
    /// ([`nvs_core::Error::NoSuchLane`]), and none of `lanes` is declared.
    pub fn expect_lanes(&mut self, lanes: impl IntoIterator<Item = u32>) -> Result<()> {
        let lanes: Vec<u32> = lanes.into_iter().collect();
        let lanes_max = self.pool.layout().lanes_max;
        if let Some(&lane) = lanes.iter().find(|&&l| l >= lanes_max) {
            let source = nvs_core::Error::NoSuchLane { lane, lanes_max };
            return Err(Error::Core { path: self.pool.path().to_path_buf(), source });
        }
        self.expected.extend(lanes);
        Ok(())
    }

    /// The pool as of the last poll (for gets).
    pub fn pool(&self) -> &FilePool {
        &self.pool
    }

    /// Catch up with the writers: every object committed since the last poll.
    pub fn poll(&mut self) -> Result<Vec<Committed>> {
        self.pool.refresh()?;
        let mut out = Vec::new();
        let mut name_buf = [0u8; nvs_core::NAME_MAX];
        let core = self.pool.core_pool();
        let unreported = |lane: u32, seq: u64| seq >= self.next_seq.get(&lane).copied().unwrap_or(0);
        let wanted = |name: &[u8]| !name.is_empty() && self.only.as_ref().is_none_or(|o| *o == name);
        // Empty names: their bytes went with a segment the writer reused since the refresh.
        match self.mark.and_then(|m| core.objects_after(m)) {
            // The refresh caught up: only the objects it indexed can be new.
            Some(new) => {
                let mut names: HashMap<NameId, Vec<u8>> = HashMap::new();
                for (id, v) in new {
                    let name = names.entry(id).or_insert_with(|| core.name_bytes(id, &mut name_buf).to_vec());
                    if wanted(name) && unreported(v.lane, v.seq) {
                        out.push(Committed::of(name, &v));
                    }
                }
            }
            // The index was rebuilt: any object may be new.
            None => {
                let names: Vec<_> = core.names().collect();
                for n in names {
                    let name = core.name_bytes(n.id, &mut name_buf).to_vec();
                    if !wanted(&name) {
                        continue;
                    }
                    let versions = core.versions_of(n.id);
                    out.extend(versions.filter(|v| unreported(v.lane, v.seq)).map(|v| Committed::of(&name, &v)));
                }
            }
        }
        out.sort_by(|a, b| (a.lane, a.seq, &a.name, a.version).cmp(&(b.lane, b.seq, &b.name, b.version)));
        self.mark = Some(core.index_mark());
        for lane in 0..self.pool.layout().lanes_max {
            if let Some(info) = self.pool.lane_info(lane) {
                self.next_seq.insert(lane, info.units);
            }
        }
        Ok(out)
    }

    /// Whether the stream has ended (every written lane closed), a writer is gone, or it
    /// is live — as of the last poll. A writer is gone when a lane that joined is
    /// neither closed nor detached and no writer holds it (its lock, `crate::locks`)
    /// now, nor held it before `dead_before` was read.
    fn status(&self, dead_before: &[u32]) -> Option<Followed> {
        // A lane given up whose writer lives again (a new process took it over) is
        // followed again.
        let (pool, given_up) = (&self.pool, &self.given_up);
        let ended = |l: u32| given_up.contains(&l) && !pool.lane_writer_alive(l);
        let lanes: Vec<_> = (0..pool.layout().lanes_max).filter_map(|l| Some((l, pool.lane_info(l)?))).collect();
        let expected_closed = self.expected.iter().all(|&l| pool.lane_info(l).is_some_and(|i| i.closed) || ended(l));
        if !lanes.is_empty() && lanes.iter().all(|(l, i)| i.closed || ended(*l)) && expected_closed {
            return Some(Followed::EndOfStream);
        }
        // No lane joined yet: no writer has been here to die; wait for one. Lanes whose
        // writer detached cleanly (or closed) wait for the next writer too.
        let gone = self.dangling().any(|l| dead_before.contains(&l) && !self.pool.lane_writer_alive(l));
        gone.then_some(Followed::WriterGone)
    }

    /// Lanes that joined and are neither closed nor detached nor given up: a writer owes
    /// them more.
    fn dangling(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.pool.layout().lanes_max)
            .filter(|&l| self.pool.lane_info(l).is_some_and(|i| !i.closed && !i.detached))
            .filter(|&l| !self.given_up.contains(&l) || self.pool.lane_writer_alive(l))
    }

    /// Go on without `lanes` (after [`Followed::WriterGone`], its [`Follower::gone_lanes`]):
    /// the next waits follow the other lanes, report no writer of these gone again, and
    /// the stream ends when the others have closed. A lane whose writer comes back (a
    /// new process takes it over) is followed again.
    pub fn give_up(&mut self, lanes: &[u32]) {
        for &l in lanes {
            if !self.given_up.contains(&l) {
                self.given_up.push(l);
            }
        }
    }

    /// The lanes whose writer is gone (after [`Followed::WriterGone`]): joined, neither
    /// closed nor detached, and held by no writer.
    pub fn gone_lanes(&self) -> Vec<u32> {
        self.dangling().filter(|&l| !self.pool.lane_writer_alive(l)).collect()
    }

    /// Poll until something is committed, the stream ends, a writer is gone, or
    /// `timeout` passes (`None`: wait as long as it takes). Polls every `interval`.
    pub fn wait(&mut self, timeout: Option<Duration>, interval: Duration) -> Result<Followed> {
        let start = Instant::now();
        loop {
            // Read the writers' liveness *before* polling: if a lane's writer was gone
            // before the poll, that poll saw everything it ever committed.
            let dead_before: Vec<u32> = self.dangling().filter(|&l| !self.pool.lane_writer_alive(l)).collect();
            // Likewise a file no writer can reach any more (removed or replaced at its
            // path): the writer it waits for would open the file now at the path.
            let orphaned_before = self.pool.orphaned();
            let objects = self.poll()?;
            if !objects.is_empty() {
                return Ok(Followed::Objects(objects));
            }
            match self.status(&dead_before) {
                Some(Followed::EndOfStream) => return Ok(Followed::EndOfStream),
                Some(Followed::WriterGone) => return Ok(Followed::WriterGone),
                _ if orphaned_before => return Err(Error::Replaced { path: self.pool.path().to_path_buf() }),
                _ => {}
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                return Ok(Followed::Timeout);
            }
            // Never past the timeout, whatever the interval.
            std::thread::sleep(timeout.map_or(interval, |t| interval.min(t.saturating_sub(start.elapsed()))));
        }
    }
}
