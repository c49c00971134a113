//! The values the API takes and returns: an [`Object`] to put, and what puts, gets and
//! listings report back.

use crate::delta::{Changes, Delta};
use crate::index::Entry;
use crate::limits::BATCH_MAX;
use core::fmt;

/// Which name a read looks up: a name alone (`"temperature"`, `b"t"`, a `&String`, any
/// `&impl AsRef<[u8]>`), or a lane's name, [`Key::on`]. Every read of [`Pool`](crate::Pool)
/// takes one (`pool.get("t", 1, &mut buf)`, `pool.get(Key::on(3, "t"), 1, &mut buf)`).
///
/// In a pool with lane names ([`FormatOptions::lane_names`](crate::FormatOptions)) each
/// lane has a name space of its own: `Key::on(lane, name)` is that lane's `name`, and a
/// name alone is answered only when one lane holds it (`AmbiguousName` otherwise). In a
/// pool with one name space, `Key::on(lane, name)` is `name`'s versions that `lane` wrote.
///
/// ```
/// use nvs_core::Key;
/// assert_eq!(Key::from("t"), Key::new(None, "t"));
/// assert_eq!(Key::on(3, "t").lane(), Some(3));
/// assert_eq!(Key::on(3, "t").name(), b"t");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key<'a> {
    lane: Option<u32>,
    name: &'a [u8],
}

impl<'a> Key<'a> {
    /// `name` in `lane`'s name space (or, in a pool with one name space, as `lane`
    /// wrote it).
    pub fn on<N: AsRef<[u8]> + ?Sized>(lane: u32, name: &'a N) -> Self {
        Key { lane: Some(lane), name: name.as_ref() }
    }

    /// `name` on `lane` if given, else the name alone.
    pub fn new<N: AsRef<[u8]> + ?Sized>(lane: Option<u32>, name: &'a N) -> Self {
        Key { lane, name: name.as_ref() }
    }

    /// The name's bytes.
    pub fn name(&self) -> &'a [u8] {
        self.name
    }

    /// The lane, if the key names one.
    pub fn lane(&self) -> Option<u32> {
        self.lane
    }
}

impl<'a, N: AsRef<[u8]> + ?Sized> From<&'a N> for Key<'a> {
    fn from(name: &'a N) -> Self {
        Key { lane: None, name: name.as_ref() }
    }
}

/// One object of a put or a batch: a name, its bytes, and optionally an explicit
/// version and a delta request. Build it with [`Object::new`] (one slice),
/// [`Object::pod`] (a slice of plain numbers) or [`Object::vectored`] (several slices
/// stored as one object), then [`Object::version`] and [`Object::delta`].
///
/// ```
/// use nvs_core::Object;
/// let t = [1.0f64, 2.0, 3.0];
/// let o = Object::pod("temperature", &t).version(7);
/// assert_eq!(o.name(), b"temperature");
/// assert_eq!(o.len_bytes(), 24);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Object<'a> {
    pub(crate) name: &'a [u8],
    bytes: Bytes<'a>,
    pub(crate) version: Option<u64>,
    pub(crate) delta: Option<Delta<'a>>,
    pub(crate) meta: &'a [u8],
}

#[derive(Clone, Copy, Debug)]
enum Bytes<'a> {
    One(&'a [u8]),
    Parts(&'a [&'a [u8]]),
}

impl<'a> Object<'a> {
    /// `bytes` as the next version of `name` (the name's latest + 1, starting at 1).
    pub fn new<N: AsRef<[u8]> + ?Sized>(name: &'a N, bytes: &'a [u8]) -> Self {
        Object { name: name.as_ref(), bytes: Bytes::One(bytes), version: None, delta: None, meta: &[] }
    }

    /// A slice of plain values (`f64`, `i32`, ... any [`bytemuck::Pod`]) stored as its
    /// bytes, in this machine's byte order.
    pub fn pod<N: AsRef<[u8]> + ?Sized, T: bytemuck::Pod>(name: &'a N, values: &'a [T]) -> Self {
        Self::new(name, bytemuck::cast_slice(values))
    }

    /// Several slices stored as one object, in order (a vectored put: no copy to join
    /// them first).
    pub fn vectored<N: AsRef<[u8]> + ?Sized>(name: &'a N, parts: &'a [&'a [u8]]) -> Self {
        Object { name: name.as_ref(), bytes: Bytes::Parts(parts), version: None, delta: None, meta: &[] }
    }

    /// Put it as exactly `version`, which must exceed every version of the name taken so
    /// far (else `VersionNotIncreasing`).
    pub fn version(mut self, version: u64) -> Self {
        self.version = Some(version);
        self
    }

    /// Store `meta` with the object, under the same commit: up to [`crate::META_MAX`]
    /// bytes describing it — by convention `key=value` lines such as `dtype=<f8` and
    /// `shape=100,200` (FORMAT.md, "Object metadata") — returned by [`crate::Pool::meta`]
    /// and counted in [`ObjectInfo::meta_len`].
    pub fn meta(mut self, meta: &'a [u8]) -> Self {
        self.meta = meta;
        self
    }

    /// The metadata ([`Object::meta`]); empty if none.
    pub fn meta_bytes(&self) -> &'a [u8] {
        self.meta
    }

    /// Store only `changes` — the byte ranges, sorted by offset, where these bytes differ
    /// from version `parent` of the same name — when the pool's delta options allow,
    /// else a full version. A get returns all the bytes either way. The caller promises
    /// that bytes outside `changes` equal the parent's ([`crate::ChunkHashes`] finds the
    /// changes for it).
    pub fn delta(mut self, parent: u64, changes: &'a dyn Changes) -> Self {
        self.delta = Some(Delta { parent, changes });
        self
    }

    /// The name.
    pub fn name(&self) -> &'a [u8] {
        self.name
    }

    /// The object's length in bytes.
    #[inline]
    pub fn len_bytes(&self) -> u64 {
        match &self.bytes {
            Bytes::One(b) => b.len() as u64,
            Bytes::Parts(p) => p.iter().map(|p| p.len() as u64).sum(),
        }
    }

    /// The version asked for, if one was ([`Object::version`]).
    pub fn explicit_version(&self) -> Option<u64> {
        self.version
    }

    /// The delta request, if any: the parent version and the changed ranges.
    pub fn delta_request(&self) -> Option<(u64, &'a dyn Changes)> {
        self.delta.map(|d| (d.parent, d.changes))
    }

    /// Its bytes as slices, in order (one slice unless [`Object::vectored`]).
    #[inline]
    pub fn parts(&self) -> &[&'a [u8]] {
        match &self.bytes {
            Bytes::One(b) => core::slice::from_ref(b),
            Bytes::Parts(p) => p,
        }
    }
}

/// What a put committed: the version, and how it was stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Put {
    /// The version the object got.
    pub version: u64,
    /// Payload bytes written to the media (the delta record, or the whole object).
    pub stored_bytes: u64,
    /// Written as a delta (else as a full version).
    pub delta: bool,
}

/// The versions a batch committed, in the order of its objects.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Versions {
    v: heapless::Vec<u64, BATCH_MAX>,
}

impl Versions {
    /// One more version (a batch has at most `BATCH_MAX` objects).
    pub(crate) fn push(&mut self, version: u64) {
        let _ = self.v.push(version);
    }

    /// The versions as a slice.
    pub fn as_slice(&self) -> &[u64] {
        &self.v
    }
}

impl core::ops::Deref for Versions {
    type Target = [u64];
    fn deref(&self) -> &[u64] {
        &self.v
    }
}

impl fmt::Debug for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.v.iter()).finish()
    }
}

impl<'a> IntoIterator for &'a Versions {
    type Item = &'a u64;
    type IntoIter = core::slice::Iter<'a, u64>;
    fn into_iter(self) -> Self::IntoIter {
        self.v.iter()
    }
}

impl<const N: usize> PartialEq<[u64; N]> for Versions {
    fn eq(&self, other: &[u64; N]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<[u64]> for Versions {
    fn eq(&self, other: &[u64]) -> bool {
        self.as_slice() == other
    }
}

/// A lane as recovery (and this writer's puts) left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneInfo {
    /// Units committed on the lane (its next sequence number).
    pub units: u64,
    /// The lane's last unit is an end-of-stream marker ([`crate::Pool::close_lane`]).
    pub closed: bool,
    /// The lane's last unit is a detach marker ([`crate::Pool::detach_lane`]): its
    /// writer ended cleanly without closing the stream.
    pub detached: bool,
}

/// Facts about one committed object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Its version.
    pub version: u64,
    /// The object's length (what a get returns).
    pub len_bytes: u64,
    /// Payload bytes on the media: `len_bytes` for a full version, less for a delta.
    pub stored_bytes: u64,
    /// 0 for a full version; for a delta, how many deltas lie between it and its full
    /// version, itself included.
    pub depth: u32,
    /// The lane that committed it.
    pub lane: u32,
    /// Bytes of metadata stored with it ([`crate::Pool::meta`]); 0 if none.
    pub meta_len: u16,
    /// Sequence number (in its lane) of the unit that committed it.
    pub seq: u64,
    /// Media offset of the payload.
    pub offset: u64,
}

impl ObjectInfo {
    pub(crate) fn of(e: &Entry) -> Self {
        ObjectInfo {
            version: e.version,
            len_bytes: e.len_bytes,
            stored_bytes: e.stored_bytes,
            depth: e.depth as u32,
            meta_len: e.meta_len,
            lane: e.lane,
            seq: e.seq,
            offset: e.payload_off,
        }
    }
}

/// A name of one pool's index, as [`crate::Pool::names`] and
/// [`crate::Pool::objects_after`] give it: for [`crate::Pool::name_bytes`] and
/// [`crate::Pool::versions_of`], on the pool that gave it.
///
/// An id holds until the pool's index is rebuilt — a recovery: an open, a refresh
/// that recovers instead of catching up, a reclaim — which renumbers the names. An id
/// kept across a rebuild (or given to another pool, or to the same media opened again)
/// is stale: it names no name there, and the calls taking it answer as for no name
/// (empty bytes, no versions), never with another name's. Ids from the same pool
/// between rebuilds are equal exactly when they name the same name.
///
/// ```
/// # use nvs_core::{FormatOptions, HeapMemory, Object, Pool, Region, NAME_MAX};
/// # #[repr(align(64))]
/// # struct Line([u8; 64]);
/// # let mut mem: Vec<Line> = (0..(1 << 20) / 64).map(|_| Line([0; 64])).collect();
/// # // SAFETY: `mem` is 64-byte aligned, outlives the pool, and nothing else touches it.
/// # let region = unsafe { Region::new(mem.as_mut_ptr().cast(), mem.len() * 64) };
/// # let mut pool = Pool::format(region, FormatOptions::new(0x5eed), HeapMemory::new())?;
/// pool.put(0, Object::new("t", b"x"))?;
/// let id = pool.names().next().unwrap().id;
/// let mut buf = [0u8; NAME_MAX];
/// assert_eq!(pool.name_bytes(id, &mut buf), b"t");
/// pool.refresh()?; // the one writer's refresh recovers: the index is rebuilt
/// assert_eq!(pool.name_bytes(id, &mut buf), b"");
/// assert_eq!(pool.versions_of(id).count(), 0);
/// # Ok::<(), nvs_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NameId {
    /// The name's slot in the index.
    pub(crate) slot: u32,
    /// The index build the slot is of (`Pool::index_gen`: unique in this process).
    pub(crate) index: u64,
}

/// One distinct name (see [`crate::Pool::names`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NameInfo {
    /// The name's id, for [`crate::Pool::name_bytes`] and [`crate::Pool::versions_of`]
    /// (until the index is rebuilt: see [`NameId`]).
    pub id: NameId,
    /// How many versions it has.
    pub versions: u32,
    /// Its latest version.
    pub latest: u64,
    /// In a pool with lane names: the lane whose name it is (the same name on another
    /// lane is another name). `None` in a pool's one name space.
    pub lane: Option<u32>,
}

/// Where a pool's index stands ([`crate::Pool::index_mark`]): which build of it, and
/// how many objects it holds. Objects indexed later ([`crate::Pool::objects_after`])
/// come after the mark until the index is rebuilt; as for a [`NameId`], a mark of an
/// earlier build (or of another pool, or of an earlier open of the same media) is
/// refused there, never read as this build's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexMark {
    /// The index build it is of (`Pool::index_gen`).
    pub(crate) index: u64,
    pub(crate) objects: u32,
}

impl IndexMark {
    /// Objects in the index when the mark was taken.
    pub fn objects(&self) -> u32 {
        self.objects
    }
}

/// What a pool holds: what its last recovery found, kept up to date by every put,
/// reclaim and refresh since ([`Pool::stats`](crate::Pool::stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Segments owned by lanes.
    pub segments_used: u32,
    /// Committed units (puts and batches).
    pub units: u64,
    /// Committed objects.
    pub objects: u64,
    /// Payload bytes of committed objects.
    pub payload_bytes: u64,
    /// Lanes holding at least one segment.
    pub lanes: u32,
}
